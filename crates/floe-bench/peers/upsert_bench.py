"""Upsert benchmark: floe `append --mode upsert` vs PyIceberg `table.upsert()` on the same
changes, each tool in its own process.

  prepare --dir D [--keys 100000] [--batches 10] [--per-batch N]
      writes D/batch-NN.parquet: each batch is N distinct keys (all keys by default; a random
      sample otherwise, so earlier files are partly replaced) in random order with a new `v`,
      batches x N changes in all (PyIceberg refuses duplicate keys inside one upsert).
  run --dir D --tool floe|pyiceberg [--floe target/release/floe]
      creates a fresh table (primary key id) in D/<tool>/ and upserts every batch in order
      (floe: one `floe append --mode upsert` process per batch; PyIceberg: one process for
      all), then checks the rows (one per key, the last batch's v) and prints one JSON line.
  read --dir D --tool floe|pyiceberg [--floe ...]
      DuckDB full-scan time of the tool's table, then floe compact, then the scan again.

Time `run` as a whole process (a fresh table each run) to get medians and peak RSS.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "interop"))


def prepare(d, keys, batches, per_batch):
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(d, exist_ok=True)
    rng = random.Random(42)
    for old in glob.glob(os.path.join(d, "batch-*.parquet")):
        os.remove(old)
    n = per_batch or keys
    for b in range(batches):
        ids = rng.sample(range(keys), n)
        v = [b * keys + i for i in range(n)]
        name = pa.array([f"user-{i}-{b}" for i in ids])
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False),
                            pa.field("name", pa.string()), pa.field("v", pa.int64())])
        t = pa.table({"id": pa.array(ids, pa.int64()), "name": name,
                      "v": pa.array(v, pa.int64())}, schema=schema)
        pq.write_table(t, os.path.join(d, f"batch-{b:02d}.parquet"))
    print(json.dumps({"batches": batches, "keys": keys, "changes": batches * n}))


def catalog_uri(wh):
    return "sqlite:///" + os.path.join(wh, "catalog.db")


def run(d, tool, floe):
    wh = os.path.join(d, tool)
    shutil.rmtree(wh, ignore_errors=True)
    os.makedirs(wh)
    batches = sorted(glob.glob(os.path.join(d, "batch-*.parquet")))
    started = time.perf_counter()
    if tool == "floe":
        env = dict(os.environ, FLOE_WAREHOUSE=wh)
        def floe_cmd(*args):
            subprocess.run([floe, *args], env=env, check=True, capture_output=True)
        floe_cmd("namespace", "create", "bench")
        floe_cmd("table", "create", "bench.u", "--schema", "id bigint, name string, v bigint",
                 "--primary-key", "id")
        for b in batches:
            floe_cmd("append", "bench.u", b, "--mode", "upsert")
    else:
        import pyarrow.parquet as pq
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField, StringType
        from read_table import open_catalog

        cat = open_catalog(catalog_uri(wh), "floe", wh)
        cat.create_namespace("bench")
        schema = Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "name", StringType(), required=False),
            NestedField(3, "v", LongType(), required=False),
            identifier_field_ids=[1],
        )
        table = cat.create_table("bench.u", schema=schema)
        for b in batches:
            table.upsert(pq.read_table(b))
            table = cat.load_table("bench.u")
    secs = time.perf_counter() - started
    rows, distinct, last = check(wh)
    print(json.dumps({"tool": tool, "seconds": round(secs, 3), "rows": rows,
                      "distinct_keys": distinct, "sum_v": last}))


def table_metadata(wh):
    from read_table import local_path, open_catalog
    t = open_catalog(catalog_uri(wh), "floe", wh).load_table("bench.u")
    return local_path(t.metadata_location)


def check(wh):
    from read_table import duckdb_connect
    con = duckdb_connect()
    m = table_metadata(wh).replace("'", "''")
    rows, distinct, vsum = con.execute(
        f"SELECT count(*), count(DISTINCT id), sum(v) FROM iceberg_scan('{m}')").fetchone()
    if rows != distinct:
        raise SystemExit(f"{wh}: {rows} rows for {distinct} keys")
    return rows, distinct, int(vsum)


def read(d, tool, floe):
    from read_table import duckdb_connect
    wh = os.path.join(d, tool)
    def scan():
        con = duckdb_connect()
        m = table_metadata(wh).replace("'", "''")
        t = time.perf_counter()
        con.execute(f"SELECT count(*), sum(v) FROM iceberg_scan('{m}')").fetchone()
        return time.perf_counter() - t
    def files():
        from read_table import duckdb_connect
        con = duckdb_connect()
        m = table_metadata(wh).replace("'", "''")
        return con.execute(
            f"SELECT manifest_content, count(DISTINCT file_path) FROM iceberg_metadata('{m}') "
            "WHERE status != 'DELETED' GROUP BY 1 ORDER BY 1").fetchall()
    before, files_before = min(scan() for _ in range(5)), files()
    env = dict(os.environ, FLOE_WAREHOUSE=wh)
    subprocess.run([floe, "compact", "bench.u", "--rewrite-all"], env=env, check=True,
                   capture_output=True)
    after, files_after = min(scan() for _ in range(5)), files()
    print(json.dumps({"tool": tool, "scan_before_compaction_s": round(before, 4),
                      "files_before": files_before,
                      "scan_after_compaction_s": round(after, 4), "files_after": files_after}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["prepare", "run", "read"])
    p.add_argument("--dir", required=True)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--per-batch", type=int, default=0)
    p.add_argument("--tool", choices=["floe", "pyiceberg"])
    p.add_argument("--floe", default="target/release/floe")
    a = p.parse_args()
    if a.step == "prepare":
        prepare(a.dir, a.keys, a.batches, a.per_batch)
    elif a.step == "run":
        run(a.dir, a.tool, os.path.abspath(a.floe))
    else:
        read(a.dir, a.tool, os.path.abspath(a.floe))


if __name__ == "__main__":
    main()
