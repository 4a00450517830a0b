#!/bin/bash
# CPU of `floe maintain` service replicas dividing one lake: a lake of TABLES tables (6 small
# files each, over 2 day partitions, nothing due after one settling round), then 1, 2 and 4
# replicas sharing its embedded SQLite lease store for SECONDS each, with a pass every 5 s.
# Prints each replica's user + system CPU seconds (GNU time).
#
#   crates/floe-bench/peers/maintain_replicas_bench.sh FLOE_BIN DIR [TABLES=200] [SECONDS=45]
set -euo pipefail
F=$(realpath "$1"); DIR=$2; TABLES=${3:-200}; SECS=${4:-45}
rm -rf "$DIR"; mkdir -p "$DIR"; cd "$DIR"
"$F" namespace create db >/dev/null
for i in $(seq 0 $((TABLES - 1))); do
  "$F" table create "db.t$i" --schema "id bigint not null, ts timestamp, payload string" \
    --partition "day(ts)" >/dev/null
  for b in 0 1 2 3 4 5; do
    printf '{"id": %d, "ts": "2026-05-01T12:00:00", "payload": "x"}\n{"id": %d, "ts": "2026-05-02T12:00:00", "payload": "y"}\n' \
      "$b" $((b + 100)) > f.ndjson
    "$F" append "db.t$i" f.ndjson >/dev/null
  done
done
# One round first: the jobs due on a new table (the first orphan listing) run now, not inside
# the measured window.
"$F" maintain --once >/dev/null 2>&1
for n in 1 2 4; do
  pids=()
  for r in $(seq 1 "$n"); do
    /usr/bin/time -f "replicas=$n r$r %U %S" -o "cpu_${n}_$r.txt" \
      timeout -s TERM "$SECS" "$F" maintain --holder "r$r" --interval 5s --lease-ttl 6s \
      >/dev/null 2>"log_${n}_$r.txt" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  for r in $(seq 1 "$n"); do
    awk '/^replicas=/ {printf "%s %s cpu_s=%.2f\n", $1, $2, $3 + $4}' "cpu_${n}_$r.txt"
  done
done
