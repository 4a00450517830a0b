"""Compaction benchmark driver: floe compact vs delta-rs optimize.compact() vs a PyIceberg
read-all-and-overwrite, side by side on the same rows and the same small files.

1. `floe-bench small-files` builds two identical Iceberg tables (bench.floe, bench.py) of N
   small Parquet files. The same Parquet files are registered in a Delta table (a hand-written
   _delta_log/00000000000000000000.json with one `add` action per file, files hard-linked).
2. Each tool runs in its own process; wall time and peak RSS (wait4 ru_maxrss) are measured.
3. The result is checked: row count and sum(amount) are unchanged for every tool.
4. DuckDB scan time of the floe table before and after compaction.
Prints one JSON object.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "interop"))


def run_measured(cmd, env=None):
    """Runs cmd under /usr/bin/time, returns (seconds, peak_rss_mib, stdout).

    Peak RSS comes from GNU time's %M, not from wait4 here: a child forked from this (large)
    Python process starts with the parent's high-water mark in ru_maxrss on Linux.
    """
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "FLOE_MAXRSS_KB %M"] + cmd, capture_output=True, env=env)
    secs = time.perf_counter() - t
    err = p.stderr.decode()
    if p.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed: {err[-2000:]}")
    kb = [int(l.split()[1]) for l in err.splitlines() if l.startswith("FLOE_MAXRSS_KB")][-1]
    return secs, kb / 1024.0, p.stdout.decode()


def build_delta(delta_dir, paths, bytes_total):
    import pyarrow.parquet as pq
    os.makedirs(os.path.join(delta_dir, "_delta_log"), exist_ok=True)
    now = int(time.time() * 1000)
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
        {"name": "payload", "type": "string", "nullable": True, "metadata": {}},
    ]}
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "floe-bench", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {}, "createdTime": now}},
    ]
    for i, p in enumerate(paths):
        src = p[len("file://"):] if p.startswith("file://") else p
        name = f"part-{i:06d}.parquet"
        dst = os.path.join(delta_dir, name)
        if not os.path.exists(dst):
            os.link(src, dst)
        rows = pq.ParquetFile(dst).metadata.num_rows
        actions.append({"add": {"path": name, "partitionValues": {}, "size": os.path.getsize(dst),
                                "modificationTime": now, "dataChange": True,
                                "stats": json.dumps({"numRecords": rows})}})
    with open(os.path.join(delta_dir, "_delta_log", "00000000000000000000.json"), "w") as f:
        for a in actions:
            f.write(json.dumps(a) + "\n")


def duckdb_scan(metadata_location):
    from read_table import duckdb_connect  # noqa: E402
    con = duckdb_connect()
    loc = metadata_location[len("file://"):] if metadata_location.startswith("file://") else metadata_location
    best = None
    for _ in range(3):
        t = time.perf_counter()
        n, s = con.execute(f"SELECT count(*), sum(amount) FROM iceberg_scan('{loc}')").fetchone()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, n, s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floe", required=True)
    ap.add_argument("--floe-bench", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--files", type=int, required=True)
    ap.add_argument("--target", default="100MiB", help="target file size for floe (delta-rs default is 100 MB)")
    a = ap.parse_args()
    py = sys.executable
    wh = os.path.join(a.dir, f"wh-{a.files}")
    delta_dir = os.path.join(a.dir, f"delta-{a.files}")
    subprocess.run(["rm", "-rf", wh, delta_dir], check=True)
    built = json.loads(subprocess.run([a.floe_bench, "small-files", "--warehouse", wh, "--files", str(a.files)],
                                      check=True, capture_output=True).stdout)
    src = built["bench.floe"]
    build_delta(delta_dir, src["paths"], src["bytes"])
    mb = src["bytes"] / 2**20
    results = {"files": src["files"], "bytes": src["bytes"], "rows": src["rows"]}

    scan_before, n0, s0 = duckdb_scan(src["metadata_location"])

    secs, rss, out = run_measured([a.floe, "--warehouse", wh, "--json", "compact", "bench.floe",
                                   "--target-file-size", a.target])
    m = json.loads(out)
    results["floe"] = {"seconds": secs, "peak_rss_mib": rss, "files_after": m["live_files_after"]}
    after = json.loads(subprocess.run([a.floe, "--warehouse", wh, "--json", "table", "describe", "bench.floe"],
                                      check=True, capture_output=True).stdout)
    scan_after, n1, s1 = duckdb_scan(after["metadata_location"])
    assert (n0, round(s0, 2)) == (n1, round(s1, 2)), "floe compaction changed the data"
    results["duckdb_scan_s"] = {"before": scan_before, "after": scan_after}

    code = ("import sys; from deltalake import DeltaTable; t = DeltaTable(sys.argv[1]); "
            "m = t.optimize.compact(); import json; print(json.dumps(m))")
    secs, rss, out = run_measured([py, "-c", code, delta_dir])
    dm = json.loads(out)
    import duckdb  # noqa: E402
    from deltalake import DeltaTable  # noqa: E402
    dt = DeltaTable(delta_dir).to_pyarrow_table(columns=["amount"])
    assert dt.num_rows == src["rows"], "delta-rs compaction changed the row count"
    results["delta_rs"] = {"seconds": secs, "peak_rss_mib": rss, "files_after": len(DeltaTable(delta_dir).file_uris()),
                           "files_removed": dm.get("numFilesRemoved")}

    code = ("import sys; from pyiceberg.catalog.sql import SqlCatalog; "
            "c = SqlCatalog('floe', uri='sqlite:///' + sys.argv[1] + '/catalog.db', warehouse='file://' + sys.argv[1]); "
            "t = c.load_table('bench.py'); df = t.scan().to_arrow(); t.overwrite(df); print(len(df))")
    secs, rss, out = run_measured([py, "-c", code, wh])
    assert int(out.strip()) == src["rows"]
    results["pyiceberg_overwrite"] = {"seconds": secs, "peak_rss_mib": rss}

    for k in ("floe", "delta_rs", "pyiceberg_overwrite"):
        r = results[k]
        r["mb_per_s"] = mb / r["seconds"]
        r["files_per_s"] = src["files"] / r["seconds"]
    results["delta_over_floe"] = results["delta_rs"]["seconds"] / results["floe"]["seconds"]
    results["pyiceberg_over_floe"] = results["pyiceberg_overwrite"]["seconds"] / results["floe"]["seconds"]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
