#!/bin/sh
# One whole ingest of an NDJSON file into a fresh table partitioned by day(ts), for farm-bench
# pairs: `ingest_once.sh floe|pyiceberg FLOE PYTHON EVENTS.ndjson`. The table is created by
# floe in a new warehouse, filled by floe ingest (commits of 100,000 records) or by the ingest
# benchmark's PyIceberg append (pyarrow.json, table.append per 100,000 rows), its row count
# checked, and the warehouse removed.
set -e
tool=$1 floe=$2 python=$3 events=$4
here=$(cd "$(dirname "$0")" && pwd)
wh=$(mktemp -d)
trap 'rm -rf "$wh"' EXIT
"$floe" --warehouse "$wh" namespace create b >/dev/null 2>&1 || true
"$floe" --warehouse "$wh" table create b.t --partition "day(ts)" \
  --schema "id bigint not null, ts timestamp, name string, payload string" >/dev/null
case $tool in
  floe) "$floe" --warehouse "$wh" --json ingest b.t --source "$events" \
          --commit-records 100000 --commit-interval 1h >/dev/null ;;
  pyiceberg) "$python" "$here/ingest_bench.py" --floe - --floe-bench - --dir "$wh" \
          --batch 100000 --pyiceberg-append "$wh" b.t "$events" >/dev/null ;;
  *) echo "usage: $0 floe|pyiceberg FLOE PYTHON EVENTS" >&2; exit 2 ;;
esac
rows=$(wc -l < "$events")
got=$("$floe" --warehouse "$wh" --json sql 'SELECT count(*) AS n FROM b.t' | tr -dc '0-9')
[ "$got" -eq "$rows" ] || { echo "expected $rows rows, found $got" >&2; exit 1; }
