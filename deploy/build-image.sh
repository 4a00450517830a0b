#!/usr/bin/env bash
# Builds floe's container image without pulling a base image from any registry.
#
# floe is dynamically linked against glibc and, through librdkafka, libssl/libcurl/zlib and
# their own dependencies. Instead of a distro base image, this script assembles a minimal root
# filesystem from the build host itself: the binary, exactly the shared libraries `ldd` says
# it loads (at the paths the loader looks for them), the dynamic loader, the CA bundle, a
# passwd/group with the non-root user 65532 and a /tmp. deploy/Containerfile is then just
# `FROM scratch` + `COPY rootfs/ /`, so the image runs the same bits that were tested on
# this host, and `chroot rootfs floe --version` checks it before any image builder is involved.
#
# Usage: deploy/build-image.sh [BINARY]
#   BINARY                 default ${CARGO_TARGET_DIR:-/var/tmp/floe-target}/release/floe
# Environment:
#   FLOE_IMAGE             tag to build (default localhost/floe:<version from floe --version>)
#   FLOE_IMAGE_CONTEXT     build context directory, recreated (default /var/tmp/floe-image)
#   FLOE_IMAGE_BUILDER     auto (buildah, else podman, else none) | buildah | podman | none
#   FLOE_IMAGE_ARCHIVE     also write the image to this OCI archive (for `skopeo copy` to a
#                          registry, or `podman load`), when an image builder ran
#   STORAGE_DRIVER, BUILDAH_ISOLATION, CONTAINERS_STORAGE_CONF: read by buildah/podman
#                          themselves (e.g. STORAGE_DRIVER=vfs where overlay is unavailable)
# Without buildah or podman it stops after the rootfs and a tarball of it (docker can turn
# that into an image: `docker import --change 'USER 65532' ... floe-rootfs.tar`).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

BIN=${1:-${CARGO_TARGET_DIR:-/var/tmp/floe-target}/release/floe}
CTX=${FLOE_IMAGE_CONTEXT:-/var/tmp/floe-image}
BUILDER=${FLOE_IMAGE_BUILDER:-auto}
ROOT=$CTX/rootfs
UID_NONROOT=65532 # distroless' "nonroot": collides with no distro's system users

log() { echo "[build-image] $*" >&2; }
die() { log "error: $*"; exit 1; }

[ -f "$BIN" ] && [ -x "$BIN" ] || die "no executable floe binary at $BIN (build it with cargo build --release, or pass its path)"
command -v ldd >/dev/null || die "ldd is missing (it finds the shared libraries to copy)"

VERSION=$("$BIN" --version 2>/dev/null | awk '{print $2}') || true
VERSION=${VERSION:-dev}
IMAGE=${FLOE_IMAGE:-localhost/floe:$VERSION}

# Refuse to overwrite something that is not our context (the directory is deleted below).
if [ -e "$CTX" ] && [ ! -e "$CTX/.floe-image-context" ]; then
  die "$CTX exists and was not made by this script; choose another FLOE_IMAGE_CONTEXT"
fi
rm -rf "$CTX"
mkdir -p "$ROOT"
touch "$CTX/.floe-image-context"

# --- The binary. Debug sections only (~5% of it): symbol names stay for panic backtraces.
install -D -m 0755 "$BIN" "$ROOT/usr/local/bin/floe"
if command -v strip >/dev/null; then
  strip --strip-debug "$ROOT/usr/local/bin/floe"
fi

# --- Shared libraries and the loader, at the paths ldd resolved them to (the loader's
# default search path on this host, so no ld.so.cache or LD_LIBRARY_PATH is needed). Each
# soname symlink is copied as the file it points to: one file per library, nothing dangling.
libs=$(ldd "$BIN") || die "ldd $BIN failed (not a dynamic executable for this host?)"
if grep -q 'not found' <<<"$libs"; then
  die "$BIN needs libraries this host lacks:"$'\n'"$(grep 'not found' <<<"$libs")"
fi
# "libx.so.1 => /lib/.../libx.so.1 (0x...)" and the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)";
# linux-vdso has no file.
paths=$(awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$libs" | sort -u)
[ -n "$paths" ] || die "ldd listed no libraries for $BIN (statically linked? then only the binary is needed)"
for p in $paths; do
  install -D -m 0755 "$(readlink -f "$p")" "$ROOT$p"
done

# What the image holds and which host package each library came from: scanners find no dpkg
# database in a scratch image, so this is the place to look for CVE triage.
{
  echo "floe $VERSION, from $BIN, assembled $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  for p in $paths; do
    pkg=$( (dpkg -S "$(readlink -f "$p")" 2>/dev/null || dpkg -S "$p" 2>/dev/null) | head -1 | cut -d: -f1,2)
    ver=$( [ -n "$pkg" ] && dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
    echo "$p ${pkg:-?} ${ver:-?}"
  done
} | install -D -m 0644 /dev/stdin "$ROOT/usr/share/floe/image-contents.txt"

# --- TLS roots: the REST catalog/S3 clients (rustls) and librdkafka/libcurl (OpenSSL) both
# read SSL_CERT_FILE (set in the Containerfile); OpenSSL's compiled-in default (OPENSSLDIR
# /cert.pem) is linked too, for code that ignores the variable.
CA=/etc/ssl/certs/ca-certificates.crt
[ -f "$CA" ] || die "no CA bundle at $CA (install ca-certificates)"
install -D -m 0644 "$CA" "$ROOT$CA"
ssldir=$(openssl version -d 2>/dev/null | sed -n 's/^OPENSSLDIR: "\(.*\)"$/\1/p')
ssldir=${ssldir:-/usr/lib/ssl}
mkdir -p "$ROOT$ssldir"
ln -sfn "$CA" "$ROOT$ssldir/cert.pem"
ln -sfn /etc/ssl/certs "$ROOT$ssldir/certs"

# --- Users: Kubernetes' runAsNonRoot needs a numeric non-zero USER; the passwd entry gives
# the uid a name and a HOME for libraries that look one up (read-only, like the whole root:
# COPY makes every file root's, and floe only reads ~/.config/floe/floe.toml there).
mkdir -p "$ROOT/etc" "$ROOT/home/floe"
cat >"$ROOT/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
floe:x:$UID_NONROOT:$UID_NONROOT:floe:/home/floe:/sbin/nologin
EOF
cat >"$ROOT/etc/group" <<EOF
root:x:0:
floe:x:$UID_NONROOT:
EOF
# glibc without nsswitch.conf falls back to "dns [!UNAVAIL=return] files" for hosts, which
# skips /etc/hosts entries (Kubernetes' hostAliases) when DNS answers.
cat >"$ROOT/etc/nsswitch.conf" <<'EOF'
passwd: files
group:  files
hosts:  files dns
EOF
chmod 0644 "$ROOT/etc/passwd" "$ROOT/etc/group" "$ROOT/etc/nsswitch.conf"
# /tmp: spill files of ingest and compaction; Kubernetes mounts an emptyDir over it because
# the root filesystem is read-only there.
mkdir -p "$ROOT/tmp"
chmod 1777 "$ROOT/tmp"

# --- Self-check: the rootfs alone runs floe (finds its loader, libraries and nothing else).
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null; then
  got=$(chroot --userspec="$UID_NONROOT:$UID_NONROOT" "$ROOT" /usr/local/bin/floe --version) || die "floe does not run inside $ROOT (chroot)"
  [ "$got" = "floe $VERSION" ] || die "chroot $ROOT floe --version printed '$got', expected 'floe $VERSION'"
  log "rootfs ok: chroot $ROOT /usr/local/bin/floe --version -> $got"
else
  log "not root: skipped the chroot check of the rootfs"
fi
log "rootfs: $ROOT ($(du -sh "$ROOT" | cut -f1))"

# --- Image.
if [ "$BUILDER" = auto ]; then
  BUILDER=none
  for b in buildah podman; do
    if command -v "$b" >/dev/null; then BUILDER=$b; break; fi
  done
fi
case "$BUILDER" in
  buildah) buildah bud --build-arg "VERSION=$VERSION" -f "$HERE/Containerfile" -t "$IMAGE" "$CTX" >&2 ;;
  podman) podman build --build-arg "VERSION=$VERSION" -f "$HERE/Containerfile" -t "$IMAGE" "$CTX" >&2 ;;
  none)
    tar -C "$ROOT" --numeric-owner -cf "$CTX/floe-rootfs.tar" .
    log "no image builder (buildah or podman) used: assembled $ROOT and $CTX/floe-rootfs.tar only"
    log "install one (apt-get install buildah) and re-run, or import the tarball with your own tooling"
    echo "$CTX/floe-rootfs.tar"
    exit 0
    ;;
  *) die "FLOE_IMAGE_BUILDER must be auto, buildah, podman or none, not '$BUILDER'" ;;
esac
if [ -n "${FLOE_IMAGE_ARCHIVE:-}" ]; then
  "$BUILDER" push "$IMAGE" "oci-archive:$FLOE_IMAGE_ARCHIVE:$IMAGE" >&2
  log "wrote $FLOE_IMAGE_ARCHIVE"
fi
log "built $IMAGE with $BUILDER"
echo "$IMAGE"
