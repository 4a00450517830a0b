"""Checks of the deployment material under deploy/: the Kubernetes manifests, the KEDA
examples and the container image build.

- Every manifest of deploy/kubernetes validates against the Kubernetes OpenAPI schemas shipped
  offline by kubernetes-validate, strictly (an unknown or misspelled field fails), for the
  oldest and the newest Kubernetes minor this suite targets.
- KEDA's CRDs have no offline schema: keda/ gets a hand-written structural check instead.
- Cross-references a schema cannot see: containers run real floe subcommands with flags they
  take, probes and Prometheus annotations point at the port floe listens on, Secrets and
  ConfigMaps are referenced by existing names and keys, $(VAR) in args names a defined
  variable (Kubernetes silently leaves unknown ones as literal text), each kustomization lists
  exactly the files of its directory, and KEDA's triggers read what floe writes.
- The image: deploy/build-image.sh assembles a rootfs from the built binary that runs
  `floe --version` under chroot, and (with buildah or podman) builds an image that does too.

Each check returns a list of problems; the tests assert it is empty for the real files, and
the negative tests assert it is not for deliberately broken copies, so no check passes
vacuously.
"""
import copy
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

try:
    import kubernetes_validate
    import yaml  # a dependency of kubernetes-validate
except ImportError as e:  # fail the run, not skip: a CI without it would check nothing
    raise ImportError(f"{e}: pip install kubernetes-validate==1.37.0 (listed in .ci/setup)") from e

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
KEDA = K8S / "keda"
NAMESPACE = "floe"
SECRET = "floe-secrets"
# The oldest Kubernetes minor the manifests must still run on, and the newest schema
# kubernetes-validate 1.37.0 ships: a field too new for the first or an API removed by the
# second fails.
K8S_VERSIONS = ("1.30", "1.37")
FLOE_BIN = Path(os.environ.get("FLOE_BIN") or
                Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")) / "release" / "floe")

# --- floe's command line, as the manifests may use it (flag -> takes a value) --------------
GLOBAL_FLAGS = {"--json": False, "--catalog": True, "--config": True, "--catalog-prop": True,
                "--warehouse": True, "--catalog-uri": True, "--catalog-name": True}
CLI = {
    "maintain": {"--catalogs": True, "--lease-db": True, "--listen": True, "--holder": True,
                 "--lease-ttl": True, "--max-concurrent-jobs": True, "--once": False,
                 "--interval": True, "--namespace": True, "--table": True, "--dry-run": False,
                 "--max-rewrite-bytes-per-hour": True, "--shutdown-grace": True,
                 "--replica-group": True, "--queue": True, "--distribute-above": True,
                 "--worker-timeout": True},
    "worker": {"--queue": True, "--worker-id": True, "--stop-when-idle": True, "--listen": True,
               "--lease-ttl": True},
    "compact": {"--distributed": False, "--queue": True, "--lease-ttl": True, "--where": True,
                "--target-file-size": True, "--min-input-files": True, "--max-concurrent": True,
                "--partial-progress": False, "--max-commits": True, "--rewrite-all": False,
                "--sort-by": True, "--option": True, "--dry-run": False,
                "--worker-timeout": True},
    "ingest": {"--source": True, "--commit-interval": True, "--maintain": False,
               "--metrics-addr": True, "--group": True, "--worker-id": True, "--lease-db": True,
               "--commit-bytes": True, "--commit-records": True, "--write-buffer-size": True,
               "--write-parallelism": True, "--distribution-mode": True,
               "--target-file-size": True, "--dead-letter": True, "--max-bad-records": True,
               "--mode": True, "--key": True, "--delete-field": True, "--stop-when-idle": True,
               "--source-timeout": True, "--writer-id": True, "--follow": False},
}
# Subcommands taking a NAMESPACE.TABLE positional.
TABLE_ARG = {"compact", "ingest"}
# The flag whose address the HTTP endpoints (probes, /metrics) are served on.
LISTEN_FLAG = {"maintain": "--listen", "worker": "--listen", "ingest": "--metrics-addr"}
# Endpoints of each server: maintain and worker have health endpoints, ingest only metrics.
PROBE_PATHS = {"maintain": ("/healthz", "/readyz"), "worker": ("/healthz", "/readyz"),
               "ingest": ("/metrics", "/metrics")}
# Connection URIs with secrets: given on the command line or through the variable floe reads,
# and that variable must come from the Secret, not a literal value.
SECRET_ENV = {"FLOE_LEASE_DB", "FLOE_QUEUE", "AWS_SECRET_ACCESS_KEY", "FLOE_KAFKA__SASL__PASSWORD"}
# KEDA's queue depth: every queued or running task, or (tighter) only those of live runs,
# which workers can still claim (keda/worker-scaledobject.yaml says why).
QUEUE_DEPTH_QUERIES = {
    "SELECT count(*) FROM floe_compact_tasks WHERE state IN ('queued','running')",
    "SELECT count(*) FROM floe_compact_tasks t JOIN floe_compact_runs r ON r.run_id = t.run_id "
    "WHERE t.state IN ('queued','running') AND r.state = 'running' "
    "AND r.expires_ms > CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
}
WORKLOAD_KINDS = {"Deployment", "Job", "StatefulSet", "DaemonSet", "CronJob"}
CLUSTER_SCOPED = {"Namespace"}


# --- loading ------------------------------------------------------------------------------
def load_dir(d: Path) -> dict:
    """{file name: [documents]} for every YAML file of d but its kustomization."""
    return {p.name: [x for x in yaml.safe_load_all(p.read_text()) if x is not None]
            for p in sorted([*d.glob("*.yaml"), *d.glob("*.yml")]) if p.name != "kustomization.yaml"}


def load_bundle() -> dict:
    return {"k8s": load_dir(K8S), "keda": load_dir(KEDA),
            "kustomization": yaml.safe_load((K8S / "kustomization.yaml").read_text()),
            "keda_kustomization": yaml.safe_load((KEDA / "kustomization.yaml").read_text())}


@pytest.fixture
def bundle():
    return load_bundle()


def docs(files: dict):
    for name, ds in files.items():
        for d in ds:
            yield name, d


def find(files: dict, kind: str, name: str) -> dict:
    for _, d in docs(files):
        if d.get("kind") == kind and d.get("metadata", {}).get("name") == name:
            return d
    raise KeyError(f"{kind}/{name}")


def pod_spec(d: dict):
    if d.get("kind") == "CronJob":
        return d["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if d.get("kind") in WORKLOAD_KINDS:
        return d["spec"]["template"]["spec"]
    return None


def containers(d: dict) -> list:
    spec = pod_spec(d) or {}
    return spec.get("initContainers", []) + spec.get("containers", [])


def where(d: dict, c: dict = None) -> str:
    s = f"{d.get('kind')}/{d.get('metadata', {}).get('name')}"
    return f"{s} container {c.get('name')}" if c else s


def parse_args(args: list):
    """(subcommand, positionals, {flag: value or True}, problems) of a floe command line;
    flags may be written --flag=value or --flag value."""
    problems, flags, positionals = [], {}, []
    if not args:
        return None, [], {}, ["no args: the image's entrypoint needs a subcommand"]
    sub, rest = args[0], args[1:]
    known = {**GLOBAL_FLAGS, **CLI.get(sub, {})}
    if sub not in CLI:
        problems.append(f"'{sub}' is not one of the floe subcommands {sorted(CLI)}")
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if name not in known:
                problems.append(f"floe {sub} takes no flag {name}")
            elif known[name] and not eq:
                if i + 1 >= len(rest) or rest[i + 1].startswith("--"):
                    problems.append(f"{name} needs a value")
                else:
                    value, i = rest[i + 1], i + 1
            elif not known[name] and eq:
                problems.append(f"{name} is a switch, it takes no value")
            flags[name] = value if known.get(name) else True
        else:
            positionals.append(a)
        i += 1
    return sub, positionals, flags, problems


def env_of(c: dict) -> dict:
    return {e["name"]: e for e in c.get("env", [])}


def listen_port(sub: str, flags: dict):
    addr = flags.get(LISTEN_FLAG.get(sub, ""))
    if not isinstance(addr, str):
        return None, None
    host, _, port = addr.rpartition(":")
    return host, int(port) if port.isdigit() else None


def resolve_port(c: dict, port):
    if isinstance(port, int):
        return port
    for p in c.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    return None


def floe_toml(files: dict) -> dict:
    return tomllib.loads(find(files, "ConfigMap", "floe-config")["data"]["floe.toml"])


# --- checks: each returns a list of problems ----------------------------------------------
def schema_problems(d: dict, version: str) -> list:
    """Strict validation against the Kubernetes schema of `version`."""
    try:
        kubernetes_validate.validate(d, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{where(d)}: {'.'.join(map(str, e.path)) or '(top)'}: {e.message}"]
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
        return [f"{where(d)}: {e.message}"]
    return []


def cli_problems(b: dict) -> list:
    """Containers run floe subcommands with flags floe takes and what each needs."""
    out = []
    for _, d in docs(b["k8s"]):
        for c in containers(d):
            w = where(d, c)
            if c.get("command") not in (None, ["/usr/local/bin/floe"]):
                out.append(f"{w}: command {c['command']} bypasses the image's floe entrypoint")
            args = c.get("args", [])
            sub, pos, flags, problems = parse_args(args)
            out += [f"{w}: {p}" for p in problems]
            env = env_of(c)
            # Kubernetes expands $(VAR) only for variables of the container (and those the
            # Job controller adds); anything else stays literally "$(VAR)" in the argument.
            defined = set(env) | ({"JOB_COMPLETION_INDEX"} if d["kind"] == "Job"
                                  and d["spec"].get("completionMode") == "Indexed" else set())
            for a in args:
                for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a):
                    if var not in defined:
                        out.append(f"{w}: {a!r} uses $({var}), which the container does not define")
            if sub in TABLE_ARG and not (len(pos) == 1 and re.fullmatch(r"[\w-]+(\.[\w-]+)+", pos[0])):
                out.append(f"{w}: floe {sub} takes one NAMESPACE.TABLE argument, got {pos}")
            if sub not in TABLE_ARG and pos:
                out.append(f"{w}: floe {sub} takes no positional argument, got {pos}")
            needs = []
            if sub == "worker" or (sub == "compact" and "--distributed" in flags):
                needs.append(("--queue", "FLOE_QUEUE"))
            if sub == "maintain":  # required with a REST catalog
                needs.append(("--lease-db", "FLOE_LEASE_DB"))
            if sub == "ingest" and "--group" in flags:  # ingest's --lease-db has no env fallback
                needs.append(("--lease-db", None))
            for flag, var in needs:
                if flag not in flags and (var is None or var not in env):
                    out.append(f"{w}: floe {sub} needs {flag}" + (f" or env {var}" if var else ""))
            for name, e in env.items():
                if name in SECRET_ENV and "value" in e:
                    out.append(f"{w}: {name} is a literal value; take it from the Secret")
            if c.get("image") != "floe":
                out.append(f"{w}: image {c.get('image')!r}: use 'floe' (kustomization.yaml sets the real one)")
    return out


def probe_problems(b: dict) -> list:
    """Servers listen on all interfaces, on the declared port, and probes and scrape
    annotations point there."""
    out = []
    for _, d in docs(b["k8s"]):
        annotations = ((d.get("spec", {}).get("template") or {}).get("metadata") or {}).get("annotations", {})
        for c in containers(d):
            w = where(d, c)
            sub, _, flags, _ = parse_args(c.get("args", []))
            host, port = listen_port(sub, flags)
            probes = {k: c[k] for k in ("livenessProbe", "readinessProbe", "startupProbe") if k in c}
            if port is None:
                if probes:
                    out.append(f"{w}: probes but no {LISTEN_FLAG.get(sub, 'listen address')} to answer them")
                if annotations.get("prometheus.io/scrape") == "true":
                    out.append(f"{w}: prometheus.io/scrape but floe serves no /metrics")
                continue
            if host not in ("0.0.0.0", "[::]", "::"):
                out.append(f"{w}: {LISTEN_FLAG[sub]} on {host}: the kubelet probes the pod IP, listen on 0.0.0.0")
            if port not in [p.get("containerPort") for p in c.get("ports", [])]:
                out.append(f"{w}: port {port} ({LISTEN_FLAG[sub]}) is not among the containerPorts")
            wanted = ["livenessProbe"] + (["readinessProbe"] if d["kind"] != "Job" else [])
            out += [f"{w}: no {k}" for k in wanted if k not in probes]
            live_path, ready_path = PROBE_PATHS[sub]
            for kind, probe in probes.items():
                action = probe.get("httpGet") or probe.get("tcpSocket")
                if action is None:
                    out.append(f"{w}: {kind} is neither httpGet nor tcpSocket")
                    continue
                got = resolve_port(c, action.get("port"))
                if got != port:
                    out.append(f"{w}: {kind} probes port {action.get('port')} ({got}), floe listens on {port}")
                path = probe.get("httpGet", {}).get("path")
                expected = ready_path if kind == "readinessProbe" else live_path
                if path is not None and path != expected:
                    out.append(f"{w}: {kind} path {path}: floe {sub} answers {expected}")
            if annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") != str(port):
                out.append(f"{w}: prometheus.io/port {annotations.get('prometheus.io/port')} != {port}")
    return out


def reference_problems(b: dict) -> list:
    """Secrets, ConfigMaps and ServiceAccounts are referenced by names and keys that exist,
    every Secret key is used, and placeholders are marked."""
    out = []
    secrets = {d["metadata"]["name"]: {**d.get("data", {}), **d.get("stringData", {})}
               for _, d in docs(b["k8s"]) if d["kind"] == "Secret"}
    configmaps = {d["metadata"]["name"]: d.get("data", {})
                  for _, d in docs(b["k8s"]) if d["kind"] == "ConfigMap"}
    accounts = {d["metadata"]["name"] for _, d in docs(b["k8s"]) if d["kind"] == "ServiceAccount"}
    if set(secrets) != {SECRET}:
        out.append(f"expected one Secret {SECRET}, found {sorted(secrets)}")
    used = set()
    catalogs = set(floe_toml(b["k8s"]).get("catalog", {}))
    for _, d in docs(b["k8s"]):
        spec = pod_spec(d)
        if spec is None:
            continue
        if spec.get("serviceAccountName") not in accounts:
            out.append(f"{where(d)}: serviceAccountName {spec.get('serviceAccountName')!r} does not exist")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            if "secret" in v and v["secret"].get("secretName") not in secrets:
                out.append(f"{where(d)}: volume {v['name']} mounts unknown Secret {v['secret'].get('secretName')}")
            if "configMap" in v and v["configMap"].get("name") not in configmaps:
                out.append(f"{where(d)}: volume {v['name']} mounts unknown ConfigMap {v['configMap'].get('name')}")
        for c in containers(d):
            w = where(d, c)
            for e in c.get("env", []):
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    if ref.get("name") not in secrets:
                        out.append(f"{w}: env {e['name']} refers to unknown Secret {ref.get('name')!r}")
                    elif ref.get("key") in secrets[ref["name"]]:
                        used.add(ref["key"])
                    elif not ref.get("optional"):
                        out.append(f"{w}: env {e['name']}: Secret {ref['name']} has no key {ref.get('key')!r}")
                cref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                if cref and cref.get("key") not in configmaps.get(cref.get("name"), {}):
                    out.append(f"{w}: env {e['name']}: no ConfigMap key {cref.get('name')}/{cref.get('key')}")
            for src in c.get("envFrom", []):
                name = (src.get("secretRef") or {}).get("name")
                if name is not None and name not in secrets:
                    out.append(f"{w}: envFrom unknown Secret {name!r}")
                used |= set(secrets.get(name, {}))
            env = env_of(c)
            config = env.get("FLOE_CONFIG", {}).get("value")
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            if config is None:
                out.append(f"{w}: no FLOE_CONFIG")
            else:
                vol = volumes.get(mounts.get(os.path.dirname(config)), {})
                cm = vol.get("configMap", {}).get("name")
                if os.path.basename(config) not in configmaps.get(cm, {}):
                    out.append(f"{w}: FLOE_CONFIG {config} is not a key of a mounted ConfigMap")
            catalog = env.get("FLOE_CATALOG", {}).get("value")
            if catalog not in catalogs:
                out.append(f"{w}: FLOE_CATALOG {catalog!r} is not a [catalog.*] of floe.toml {sorted(catalogs)}")
            sub, _, flags, _ = parse_args(c.get("args", []))
            for name in str(flags.get("--catalogs", "")).split(","):
                if name and name not in catalogs:
                    out.append(f"{w}: --catalogs names {name!r}, which floe.toml does not define")
            if c.get("securityContext", {}).get("readOnlyRootFilesystem") is not True:
                out.append(f"{w}: the root filesystem must be read-only")
            if "/tmp" not in mounts or "emptyDir" not in volumes.get(mounts["/tmp"], {}):
                out.append(f"{w}: no emptyDir on /tmp (spill and temporary files)")
        if spec.get("securityContext", {}).get("runAsNonRoot") is not True:
            out.append(f"{where(d)}: runAsNonRoot is not set")
    for name, data in secrets.items():
        out += [f"Secret {name}: key {k} is referenced by no workload" for k in sorted(set(data) - used)]
        out += [f"Secret {name}: {k} is not a marked placeholder (REPLACE_ME)"
                for k, v in data.items() if "REPLACE_ME" not in str(v)]
    return out


def config_problems(b: dict) -> list:
    """floe.toml parses, and each catalog is flat key = value: floe turns a sub-table into
    dotted keys, so [catalog.x.storage] would hide "s3.endpoint" as "storage.s3.endpoint"."""
    out = []
    try:
        toml = floe_toml(b["k8s"])
    except tomllib.TOMLDecodeError as e:
        return [f"floe.toml: {e}"]
    if not toml.get("catalog"):
        out.append("floe.toml defines no [catalog.NAME]")
    for name, props in toml.get("catalog", {}).items():
        for k, v in props.items():
            if isinstance(v, dict):
                out.append(f"floe.toml: [catalog.{name}.{k}] is a sub-table; write its keys as \"{k}.x\" = ... "
                           f"or directly (s3.*) in [catalog.{name}]")
            if k in ("s3.access-key-id", "s3.secret-access-key", "credential", "token"):
                out.append(f"floe.toml: catalog {name} holds the secret {k}; use the Secret")
        if not {"uri", "warehouse"} <= set(props):
            out.append(f"floe.toml: catalog {name} lacks uri or warehouse")
    return out


def kustomization_problems(k: dict, files: dict, directory: str) -> list:
    """The kustomization lists exactly the YAML files next to it, in namespace floe."""
    out = []
    listed = list(k.get("resources", []))
    if len(listed) != len(set(listed)):
        out.append(f"{directory}/kustomization.yaml lists a file twice")
    out += [f"{directory}/kustomization.yaml does not list {f}" for f in sorted(set(files) - set(listed))]
    out += [f"{directory}/kustomization.yaml lists {f}, which does not exist" for f in sorted(set(listed) - set(files))]
    if k.get("namespace") != NAMESPACE:
        out.append(f"{directory}/kustomization.yaml: namespace {k.get('namespace')!r}, expected {NAMESPACE}")
    for name, d in docs(files):
        if d.get("kind") not in CLUSTER_SCOPED and d.get("metadata", {}).get("namespace") != NAMESPACE:
            out.append(f"{directory}/{name}: {where(d)} is not in namespace {NAMESPACE} (kubectl apply -f would put it elsewhere)")
    return out


# KEDA 2.x ScaledObject fields (keda.sh/v1alpha1), for a strictness the CRD schema would give.
SCALED_OBJECT_SPEC = {"scaleTargetRef", "pollingInterval", "cooldownPeriod", "initialCooldownPeriod",
                      "idleReplicaCount", "minReplicaCount", "maxReplicaCount", "fallback",
                      "advanced", "triggers"}
TRIGGER_FIELDS = {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
TRIGGER_REQUIRED = {"postgresql": {"query", "targetQueryValue"},
                    "kafka": {"bootstrapServers", "consumerGroup", "topic", "lagThreshold"}}
POSTGRES_CONNECTION = ({"connectionFromEnv"}, {"host", "port", "userName", "dbName"})


def kafka_source(flags: dict):
    """(brokers, topic, query parameters) of an ingest's kafka:// --source."""
    m = re.fullmatch(r"kafka://([^/]+)/([^?]+)(?:\?(.*))?", str(flags.get("--source", "")))
    if not m:
        return None
    params = dict(p.partition("=")[::2] for p in (m.group(3) or "").split("&") if p)
    return m.group(1), m.group(2), params


def keda_problems(b: dict) -> list:
    out = []
    deployments = {d["metadata"]["name"]: d for _, d in docs(b["k8s"]) if d["kind"] == "Deployment"}
    seen_types = set()
    for name, d in docs(b["keda"]):
        w = f"keda/{name}"
        if d.get("apiVersion") != "keda.sh/v1alpha1" or d.get("kind") != "ScaledObject":
            out.append(f"{w}: {d.get('apiVersion')}/{d.get('kind')} is not keda.sh/v1alpha1 ScaledObject")
            continue
        spec = d.get("spec") or {}
        out += [f"{w}: unknown spec field {k}" for k in sorted(set(spec) - SCALED_OBJECT_SPEC)]
        target = spec.get("scaleTargetRef") or {}
        if target.get("kind", "Deployment") != "Deployment" or target.get("apiVersion", "apps/v1") != "apps/v1":
            out.append(f"{w}: scaleTargetRef must be an apps/v1 Deployment of deploy/kubernetes")
        dep = deployments.get(target.get("name"))
        if dep is None:
            out.append(f"{w}: scaleTargetRef.name {target.get('name')!r} is no Deployment in deploy/kubernetes {sorted(deployments)}")
        elif "replicas" in dep["spec"]:
            out.append(f"{w}: Deployment {target['name']} sets replicas, which kubectl apply would reset under KEDA")
        lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi):
            out.append(f"{w}: replica counts {lo}..{hi}")
        triggers = spec.get("triggers") or []
        if not triggers:
            out.append(f"{w}: no triggers")
        c = containers(dep)[0] if dep else {}
        _, _, flags, _ = parse_args(c.get("args", []))
        for t in triggers:
            kind, meta = t.get("type"), t.get("metadata") or {}
            seen_types.add(kind)
            out += [f"{w}: unknown trigger field {k}" for k in sorted(set(t) - TRIGGER_FIELDS)]
            if kind not in TRIGGER_REQUIRED:
                out.append(f"{w}: trigger type {kind!r}, expected one of {sorted(TRIGGER_REQUIRED)}")
                continue
            out += [f"{w}: {kind} trigger lacks metadata.{k}" for k in sorted(TRIGGER_REQUIRED[kind] - set(meta))]
            # The CRD types metadata as map[string]string: a YAML number is rejected by the API server.
            out += [f"{w}: metadata.{k} must be a string, not {type(v).__name__} (quote it)"
                    for k, v in meta.items() if not isinstance(v, str)]
            if kind == "postgresql":
                if not any(keys <= set(meta) for keys in POSTGRES_CONNECTION) and "authenticationRef" not in t:
                    out.append(f"{w}: postgresql trigger has no connection (connectionFromEnv or host/port/userName/dbName)")
                env = meta.get("connectionFromEnv")
                if env is not None and env not in env_of(c):
                    out.append(f"{w}: connectionFromEnv {env} is no env var of {target.get('name')}'s container")
                if " ".join(str(meta.get("query", "")).split()) not in QUEUE_DEPTH_QUERIES:
                    out.append(f"{w}: query {meta.get('query')!r} is none of the queue depths {sorted(QUEUE_DEPTH_QUERIES)}")
            if kind == "kafka":
                src = kafka_source(flags)
                if src is None:
                    out.append(f"{w}: kafka trigger on {target.get('name')}, which has no kafka:// --source")
                    continue
                brokers, topic, params = src
                # floe commits offsets to a consumer group only with group.id in --source
                # (--group alone joins without committing): without it KEDA sees no lag.
                if meta.get("consumerGroup") != params.get("group.id"):
                    out.append(f"{w}: consumerGroup {meta.get('consumerGroup')!r} is not the group.id floe commits to "
                               f"({params.get('group.id')!r} in --source)")
                if meta.get("topic") != topic:
                    out.append(f"{w}: topic {meta.get('topic')!r} != --source topic {topic!r}")
                if meta.get("bootstrapServers") != brokers:
                    out.append(f"{w}: bootstrapServers {meta.get('bootstrapServers')!r} != --source brokers {brokers!r}")
    out += [f"keda/: no {k} trigger example" for k in sorted(set(TRIGGER_REQUIRED) - seen_types)]
    return out


# --- tests --------------------------------------------------------------------------------
def all_k8s_docs():
    return [pytest.param(d, id=f"{name}:{d.get('kind')}") for name, d in docs(load_dir(K8S))]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("doc", all_k8s_docs())
def test_manifest_validates_strictly(doc, version):
    assert schema_problems(doc, version) == []


def test_expected_workloads_exist(bundle):
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in docs(bundle["k8s"])}
    expected = {("Namespace", "floe"), ("ConfigMap", "floe-config"), ("Secret", SECRET),
                ("ServiceAccount", "floe"), ("Deployment", "floe-maintain"), ("Service", "floe-maintain"),
                ("PodDisruptionBudget", "floe-maintain"), ("Deployment", "floe-worker"),
                ("Job", "floe-worker-burst"), ("Job", "floe-compact-distributed"),
                ("Deployment", "floe-ingest-orders")}
    assert expected <= kinds, sorted(expected - kinds)
    assert find(bundle["k8s"], "Deployment", "floe-maintain")["spec"]["replicas"] == 2
    burst = find(bundle["k8s"], "Job", "floe-worker-burst")
    assert burst["spec"]["completionMode"] == "Indexed"
    assert "--stop-when-idle" in parse_args(containers(burst)[0]["args"])[2]


def test_cli_usage(bundle):
    assert cli_problems(bundle) == []


def test_probes_and_ports(bundle):
    assert probe_problems(bundle) == []


def test_references(bundle):
    assert reference_problems(bundle) == []


def test_floe_toml(bundle):
    assert config_problems(bundle) == []


def test_kustomizations_list_every_file(bundle):
    assert kustomization_problems(bundle["kustomization"], bundle["k8s"], "deploy/kubernetes") == []
    assert kustomization_problems(bundle["keda_kustomization"], bundle["keda"], "deploy/kubernetes/keda") == []


def test_keda_scaled_objects(bundle):
    assert keda_problems(bundle) == []


# --- negative tests: each check rejects a broken copy -------------------------------------
BROKEN_MANIFESTS = {
    "misspelled field": """
apiVersion: apps/v1
kind: Deployment
metadata: {name: x, namespace: floe}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: floe
          image: floe
          livenessProbes: {httpGet: {path: /healthz, port: 9464}}
""",
    "wrong type": """
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  replicas: two
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec: {containers: [{name: floe, image: floe}]}
""",
    "missing required field": """
apiVersion: batch/v1
kind: Job
metadata: {name: x}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{image: floe}]
""",
    "removed API version": """
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata: {name: x}
spec: {minAvailable: 1, selector: {matchLabels: {a: b}}}
""",
}


@pytest.mark.parametrize("text", BROKEN_MANIFESTS.values(), ids=BROKEN_MANIFESTS.keys())
def test_validator_rejects_broken_manifest(text):
    assert schema_problems(yaml.safe_load(text), K8S_VERSIONS[-1]) != []


def maintain(b):
    return containers(find(b["k8s"], "Deployment", "floe-maintain"))[0]


def worker(b):
    return containers(find(b["k8s"], "Deployment", "floe-worker"))[0]


def ingest(b):
    return containers(find(b["k8s"], "Deployment", "floe-ingest-orders"))[0]


def keda_trigger(b, kind):
    return next(t for _, d in docs(b["keda"]) for t in d["spec"]["triggers"] if t["type"] == kind)


def replace_arg(c, prefix, new):
    c["args"] = [new if a.startswith(prefix) else a for a in c["args"]]


def set_env(c, name, **value):
    """Replaces the source of env var `name` (value= or valueFrom=)."""
    e = next(e for e in c["env"] if e["name"] == name)
    e.pop("value", None)
    e.pop("valueFrom", None)
    e.update(value)


BREAKAGES = {
    "unknown subcommand": (cli_problems, lambda b: maintain(b)["args"].__setitem__(0, "maintian")),
    "unknown flag": (cli_problems, lambda b: maintain(b)["args"].append("--lease_db=x")),
    "switch given a value": (cli_problems, lambda b: ingest(b)["args"].append("--maintain=true")),
    "undefined $(VAR)": (cli_problems, lambda b: replace_arg(worker(b), "--worker-id", "--worker-id=$(HOSTNAME)")),
    "worker without queue": (cli_problems, lambda b: worker(b)["env"].remove(env_of(worker(b))["FLOE_QUEUE"])),
    "secret as literal": (cli_problems, lambda b: set_env(maintain(b), "FLOE_LEASE_DB", value="postgres://u:p@h/db")),
    "bad table argument": (cli_problems, lambda b: ingest(b)["args"].__setitem__(1, "orders")),
    "probe on another port": (probe_problems, lambda b: maintain(b)["livenessProbe"]["httpGet"].__setitem__("port", 9465)),
    "listen on loopback": (probe_problems, lambda b: replace_arg(maintain(b), "--listen", "--listen=127.0.0.1:9464")),
    "listen port changed": (probe_problems, lambda b: replace_arg(worker(b), "--listen", "--listen=0.0.0.0:9999")),
    "readiness on /healthz": (probe_problems, lambda b: worker(b)["readinessProbe"]["httpGet"].__setitem__("path", "/healthz")),
    "no readiness probe": (probe_problems, lambda b: ingest(b).pop("readinessProbe")),
    "scrape annotation port": (probe_problems, lambda b: find(b["k8s"], "Deployment", "floe-ingest-orders")["spec"]
                               ["template"]["metadata"]["annotations"].__setitem__("prometheus.io/port", "9464")),
    "secret name typo": (reference_problems, lambda b: set_env(worker(b), "FLOE_QUEUE", valueFrom={
        "secretKeyRef": {"name": "floe-secret", "key": "queue"}})),
    "secret key typo": (reference_problems, lambda b: set_env(maintain(b), "FLOE_LEASE_DB", valueFrom={
        "secretKeyRef": {"name": SECRET, "key": "leasedb"}})),
    "unused secret key": (reference_problems, lambda b: find(b["k8s"], "Secret", SECRET)["stringData"].__setitem__(
        "spare", "REPLACE_ME")),
    "unmarked placeholder": (reference_problems, lambda b: find(b["k8s"], "Secret", SECRET)["stringData"].__setitem__(
        "queue", "postgres://floe:secret@db/floe")),
    "unknown catalog": (reference_problems, lambda b: set_env(ingest(b), "FLOE_CATALOG", value="warehouse")),
    "writable root": (reference_problems, lambda b: maintain(b)["securityContext"].__setitem__("readOnlyRootFilesystem", False)),
    "catalog sub-table": (config_problems, lambda b: find(b["k8s"], "ConfigMap", "floe-config")["data"].__setitem__(
        "floe.toml", '[catalog.lake]\nuri = "u"\nwarehouse = "w"\n[catalog.lake.storage]\n"s3.endpoint" = "e"\n')),
    "keda target missing": (keda_problems, lambda b: next(d for _, d in docs(b["keda"]))["spec"]["scaleTargetRef"]
                            .__setitem__("name", "floe-workers")),
    "keda numeric metadata": (keda_problems, lambda b: keda_trigger(b, "kafka")["metadata"].__setitem__("lagThreshold", 5)),
    "keda missing key": (keda_problems, lambda b: keda_trigger(b, "kafka")["metadata"].pop("consumerGroup")),
    "keda group not committed": (keda_problems, lambda b: replace_arg(
        ingest(b), "--source", "--source=kafka://kafka:9092/orders")),
    "keda env not on target": (keda_problems, lambda b: keda_trigger(b, "postgresql")["metadata"].__setitem__(
        "connectionFromEnv", "DATABASE_URL")),
    "keda wrong query": (keda_problems, lambda b: keda_trigger(b, "postgresql")["metadata"].__setitem__(
        "query", "SELECT count(*) FROM floe_compact_tasks")),
    "keda unknown kind": (keda_problems, lambda b: next(d for _, d in docs(b["keda"])).__setitem__("kind", "ScaledJobs")),
    "keda replicas field": (keda_problems, lambda b: find(b["k8s"], "Deployment", "floe-worker")["spec"].__setitem__("replicas", 1)),
}


@pytest.mark.parametrize("name", BREAKAGES)
def test_check_rejects_breakage(bundle, name):
    check, breakage = BREAKAGES[name]
    assert check(bundle) == []
    broken = copy.deepcopy(bundle)
    breakage(broken)
    assert check(broken) != []


@pytest.mark.parametrize("missing", ["secret.yaml", "worker-burst-job.yaml"])
def test_kustomization_check_rejects_unlisted_file(bundle, missing):
    k = copy.deepcopy(bundle["kustomization"])
    k["resources"].remove(missing)
    assert kustomization_problems(k, bundle["k8s"], "deploy/kubernetes") != []
    k["resources"] += [missing, "gone.yaml"]
    assert kustomization_problems(k, bundle["k8s"], "deploy/kubernetes") != []


# --- with tools: kustomize and the floe binary --------------------------------------------
@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl not installed (kustomize build check)")
@pytest.mark.parametrize("directory", [K8S, KEDA], ids=["kubernetes", "keda"])
def test_kustomize_builds(directory):
    out = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len(rendered) == sum(len(ds) for ds in load_dir(directory).values())
    assert all(d["metadata"].get("namespace") == NAMESPACE for d in rendered if d["kind"] not in CLUSTER_SCOPED)
    images = {c["image"] for d in rendered for c in containers(d)}
    assert "floe" not in images, "kustomization.yaml's images: did not rewrite the image"


needs_floe = pytest.mark.skipif(not FLOE_BIN.is_file(), reason=f"no floe binary at {FLOE_BIN} (cargo build --release)")


@needs_floe
def test_floe_reads_the_configmap(tmp_path, bundle):
    """floe itself parses the ConfigMap's floe.toml and sees the catalog the workloads select."""
    (tmp_path / "floe.toml").write_text(find(bundle["k8s"], "ConfigMap", "floe-config")["data"]["floe.toml"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")}
    out = subprocess.run([str(FLOE_BIN), "catalog", "list"], capture_output=True, text=True, cwd=tmp_path,
                         env={**env, "FLOE_CONFIG": str(tmp_path / "floe.toml")})
    assert out.returncode == 0, out.stderr
    toml = floe_toml(bundle["k8s"])
    for name, props in toml["catalog"].items():
        assert f"{name} {props['type']} {props['uri']}" in out.stdout


def cli_is_stale() -> bool:
    """The binary predates the CLI's sources (built before the last edit): its help may lack
    flags the manifests rightly use."""
    sources = list((REPO / "crates").glob("floe-cli/src/**/*.rs"))
    return bool(sources) and FLOE_BIN.stat().st_mtime < max(p.stat().st_mtime for p in sources)


@needs_floe
@pytest.mark.parametrize("sub", sorted(CLI))
def test_manifest_flags_exist_in_floe_help(bundle, sub):
    """Every flag a manifest gives floe <sub> appears in that subcommand's --help."""
    used = set()
    for _, d in docs(bundle["k8s"]):
        for c in containers(d):
            command, _, flags, _ = parse_args(c.get("args", []))
            if command == sub:
                used |= set(flags)
    if not used:
        pytest.skip(f"no manifest runs floe {sub}")
    if cli_is_stale():
        pytest.skip(f"{FLOE_BIN} is older than crates/floe-cli/src: rebuild to check its flags")
    out = subprocess.run([str(FLOE_BIN), sub, "--help"], capture_output=True, text=True)
    assert out.returncode == 0, f"floe has no subcommand {sub}: {out.stderr}"
    missing = [f for f in sorted(used) if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", out.stdout)]
    assert missing == [], f"floe {sub} --help lists no {missing}"


def floe_knows(sub: str) -> bool:
    return FLOE_BIN.is_file() and subprocess.run([str(FLOE_BIN), sub, "--help"], capture_output=True).returncode == 0


@pytest.mark.skipif(not os.environ.get("FLOE_TEST_POSTGRES_URL"), reason="FLOE_TEST_POSTGRES_URL not set")
@pytest.mark.skipif(not floe_knows("worker"), reason=f"no floe binary with `floe worker` at {FLOE_BIN}")
def test_keda_queue_query_on_floes_schema(tmp_path, bundle):
    """KEDA's PostgreSQL query runs on the queue schema floe creates and counts the work: the
    queued and running tasks of a live run (and, for the plain query, those of a dead one)."""
    psycopg2 = pytest.importorskip("psycopg2")
    server = os.environ["FLOE_TEST_POSTGRES_URL"]
    db = f"floe_keda_{os.urandom(4).hex()}"
    admin = psycopg2.connect(server)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    uri = urlsplit(server)._replace(path=f"/{db}").geturl()
    try:
        # The worker creates the queue's tables, finds nothing and exits.
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")}
        out = subprocess.run([str(FLOE_BIN), "worker", "--queue", uri, "--stop-when-idle", "1s"],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        now = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
        with psycopg2.connect(uri) as conn, conn.cursor() as cur:
            # A live run (lease an hour ahead) and one whose coordinator died (lease expired),
            # as floe's coordinator writes them.
            for run, expires in (("live", f"{now} + 3600000"), ("dead", f"{now} - 3600000")):
                cur.execute("INSERT INTO floe_compact_runs (run_id, scope, coordinator, expires_ms, state, created_ms) "
                            f"VALUES (%s, 'ns.t', 'c', {expires}, 'running', {now})", (run,))
            tasks = [("live", "queued")] * 3 + [("live", "running"), ("live", "done"), ("dead", "queued"),
                                                  ("dead", "queued")]
            for i, (run, state) in enumerate(tasks):
                cur.execute("INSERT INTO floe_compact_tasks (run_id, task_id, group_index, state, attempt, expires_ms, "
                            f"spec, rows_written, bytes_read, bytes_written) VALUES (%s, %s, 0, %s, 0, {now}, '{{}}', 0, 0, 0)",
                            (run, i, state))
            counts = {}
            for q in QUEUE_DEPTH_QUERIES:
                cur.execute(q)
                counts["JOIN" in q] = cur.fetchone()[0]
            cur.execute(keda_trigger(bundle, "postgresql")["metadata"]["query"])
            configured = cur.fetchone()[0]
        assert counts == {False: 6, True: 4}
        assert configured in counts.values()
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.close()


# --- the image ----------------------------------------------------------------------------
def workspace_version() -> str:
    return tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def build_image(tmp_path, builder: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(DEPLOY / "build-image.sh"), str(FLOE_BIN)], capture_output=True, text=True,
                          env={**os.environ, "FLOE_IMAGE_CONTEXT": str(tmp_path / "ctx"),
                               "FLOE_IMAGE_BUILDER": builder, **env})


@needs_floe
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chroot"), reason="chroot needs root")
def test_rootfs_runs_floe_under_chroot(tmp_path):
    """The assembled rootfs alone (no host library) runs floe, as the image's non-root user."""
    try:
        out = build_image(tmp_path, "none")
        assert out.returncode == 0, out.stderr
        root = tmp_path / "ctx" / "rootfs"
        assert (tmp_path / "ctx" / "floe-rootfs.tar").is_file()
        run = subprocess.run(["chroot", "--userspec=65532:65532", str(root), "/usr/local/bin/floe", "--version"],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"floe {workspace_version()}"
        assert (root / "tmp").stat().st_mode & 0o1777 == 0o1777
        assert "floe:x:65532:65532:" in (root / "etc/passwd").read_text()
    finally:  # ~200 MB; pytest keeps its last three temporary directories
        shutil.rmtree(tmp_path / "ctx", ignore_errors=True)


@needs_floe
@pytest.mark.skipif(not (shutil.which("buildah") or shutil.which("podman")),
                    reason="neither buildah nor podman installed (apt-get install buildah)")
@pytest.mark.skipif(os.geteuid() != 0, reason="the image build uses root's container storage")
def test_image_runs_floe(tmp_path):
    """deploy/Containerfile builds FROM scratch, and the image runs floe as user 65532."""
    # A private vfs store: the test leaves nothing in the machine's image store, and vfs works
    # wherever overlay mounts are not allowed.
    conf = tmp_path / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{tmp_path}/storage"\nrunroot = "{tmp_path}/run"\n')
    image = "localhost/floe:test"
    env = {"CONTAINERS_STORAGE_CONF": str(conf), "FLOE_IMAGE": image}
    builder = "buildah" if shutil.which("buildah") else "podman"
    try:
        out = build_image(tmp_path, builder, **env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == image
        run_env = {**os.environ, **env}
        if builder == "buildah":
            inspect = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                                      "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}", image],
                                     capture_output=True, text=True, env=run_env)
            assert inspect.stdout.strip() == "65532:65532 [/usr/local/bin/floe]", inspect.stderr
            ctr = subprocess.run(["buildah", "from", "--pull=never", image], capture_output=True, text=True,
                                 env=run_env, check=True).stdout.strip()
            # chroot isolation: needs no OCI runtime or cgroup setup, still the image's user and env.
            cmd = ["buildah", "run", "--isolation", "chroot", ctr, "--", "/usr/local/bin/floe", "--version"]
        else:
            cmd = ["podman", "run", "--rm", image, "--version"]
        run = subprocess.run(cmd, capture_output=True, text=True, env=run_env)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"floe {workspace_version()}"
    finally:
        subprocess.run([builder, "rm", "--all"], capture_output=True, env={**os.environ, **env})
        subprocess.run([builder, "rmi", "--all", "--force"], capture_output=True, env={**os.environ, **env})
        shutil.rmtree(tmp_path / "storage", ignore_errors=True)
        shutil.rmtree(tmp_path / "ctx", ignore_errors=True)
