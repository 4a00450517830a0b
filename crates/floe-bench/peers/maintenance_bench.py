"""Table-health benchmark: `floe diagnose` and `floe remove-orphan-files --dry-run` on a table
with many files and snapshots, side by side with PyIceberg doing the same metadata work.

1. `floe-bench history` builds bench.history: N live files over S append snapshots (hard-linked
   copies of one Parquet file per partition) plus uncommitted orphans.
2. Each measurement runs in its own process under GNU time (wall seconds, peak RSS):
   - floe diagnose (per-partition stats, history, reachability of all snapshots, one listing);
   - floe remove-orphan-files --dry-run (listing + reachability + diff);
   - the PyIceberg peer (this file with --peer): inspect.files() grouped by partition,
     inspect.snapshots(), inspect.all_files() + all_manifests() (reachability of all snapshots),
     os.walk listing and the diff. PyIceberg 0.12 has no diagnose or orphan removal, so this is
     the metadata work both would need.
3. Both sides must agree on the number of live files and of unreferenced files.
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
sys.path.insert(0, HERE)
from compact_bench import run_measured  # noqa: E402


def local(p):
    return p[len("file://"):] if p.startswith("file://") else p


def peer(warehouse, table_name):
    """PyIceberg doing diagnose's and orphan listing's metadata work."""
    import pyarrow.compute as pc
    from read_table import open_catalog

    uri = f"sqlite:///{warehouse.lstrip('/')}/catalog.db"
    cat = open_catalog(uri, "floe", warehouse)
    t = cat.load_table(table_name)
    files = t.inspect.files()
    import pyarrow as pa
    keys = files.column("partition").combine_chunks().flatten()
    flat = pa.table({**{f"k{i}": k for i, k in enumerate(keys)}, "size": files["file_size_in_bytes"]})
    per_part = flat.group_by([f"k{i}" for i in range(len(keys))]).aggregate(
        [("size", "count"), ("size", "sum"), ("size", "mean")])
    snaps = t.inspect.snapshots()
    all_files = t.inspect.all_files()
    all_manifests = t.inspect.all_manifests()
    referenced = set(local(p) for p in all_files["file_path"].to_pylist())
    referenced |= set(local(p) for p in all_manifests["path"].to_pylist())
    referenced |= set(local(s.manifest_list) for s in t.metadata.snapshots)
    referenced |= set(local(m.metadata_file) for m in t.metadata.metadata_log)
    referenced.add(local(t.metadata_location))
    current = set(files["file_path"].to_pylist())
    only_old = len(set(all_files["file_path"].to_pylist()) - current)
    listed = []
    for root, _, names in os.walk(local(t.metadata.location)):
        for n in names:
            listed.append(os.path.join(root, n))
    unreferenced = [p for p in listed if p not in referenced]
    return {
        "live_files": files.num_rows, "partitions": per_part.num_rows, "snapshots": snaps.num_rows,
        "only_old_files": only_old, "listed": len(listed), "unreferenced": len(unreferenced),
        "small_share": float(pc.mean(pc.less(files["file_size_in_bytes"], 384 << 20)).as_py()),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floe", required=True)
    p.add_argument("--floe-bench", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--snapshots", type=int, default=1_000)
    p.add_argument("--orphans", type=int, default=1_000)
    p.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    wh = os.path.abspath(os.path.join(args.dir, "warehouse"))
    if args.peer:
        t = time.perf_counter()
        out = peer(wh, "bench.history")
        out["seconds_inside"] = time.perf_counter() - t
        print(json.dumps(out))
        return

    built = None
    if not os.path.exists(os.path.join(wh, "catalog.db")):
        os.makedirs(args.dir, exist_ok=True)
        t = time.perf_counter()
        r = subprocess.run([args.floe_bench, "history", "--warehouse", wh, "--files", str(args.files),
                            "--snapshots", str(args.snapshots), "--orphans", str(args.orphans)],
                           capture_output=True, check=True)
        built = json.loads(r.stdout)
        built["seconds"] = time.perf_counter() - t
    env = dict(os.environ, FLOE_WAREHOUSE=wh)
    d_s, d_rss, d_out = run_measured([args.floe, "--json", "diagnose", "bench.history"], env=env)
    diag = json.loads(d_out)
    o_s, o_rss, o_out = run_measured([args.floe, "--json", "remove-orphan-files", "bench.history", "--dry-run",
                                      "--older-than", "0s", "--force"], env=env)
    orph = json.loads(o_out)
    p_s, p_rss, p_out = run_measured([sys.executable, os.path.abspath(__file__), "--peer", "--floe", "-",
                                      "--floe-bench", "-", "--dir", args.dir])
    py = json.loads(p_out)
    assert diag["totals"]["data_files"] == py["live_files"], (diag["totals"]["data_files"], py["live_files"])
    assert diag["storage"]["unreferenced_files"] == py["unreferenced"], (diag["storage"], py)
    assert orph["orphan_files"] == py["unreferenced"], (orph["orphan_files"], py["unreferenced"])
    print(json.dumps({
        "built": built,
        "table": {"live_files": diag["totals"]["data_files"], "partitions": diag["totals"]["partitions"],
                  "snapshots": diag["history"]["snapshots"], "listed_files": diag["storage"]["listed_files"],
                  "unreferenced": orph["orphan_files"], "manifests": diag["history"]["manifests"]},
        "floe_diagnose": {"seconds": round(d_s, 2), "peak_rss_mib": round(d_rss, 1)},
        "floe_orphan_dry_run": {"seconds": round(o_s, 2), "peak_rss_mib": round(o_rss, 1)},
        "pyiceberg_peer": {"seconds": round(p_s, 2), "peak_rss_mib": round(p_rss, 1)},
        "ratio_diagnose_vs_peer": round(p_s / d_s, 2),
        "ratio_orphans_vs_peer": round(p_s / o_s, 2),
    }, indent=1))


if __name__ == "__main__":
    main()
