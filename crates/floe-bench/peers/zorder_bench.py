"""Z-order compaction benchmark: files a range filter selects after `floe compact` (bin-pack, linear
sort on x, Z-order on x and y), and floe's Z-order compaction time against delta-rs's
optimize.z_order, on the same rows.

1. Input (fixed seed, DuckDB hash-based generator): N rows of id bigint (unique, 0..N-1, random row
   order), x and y bigint (independent, uniform on [0, 1,000,000)), ts timestamp (uniform over 30
   days from 2026-01-01), s string (12 random hex chars), v double. Cut into --files Parquet files
   and appended to an unpartitioned Iceberg table bench.t in a fresh local floe warehouse, one
   `floe append` (one commit, one data file) per input file. That warehouse is kept as a pristine
   copy; every compaction starts from a hard-linked copy of it (catalog.db copied for real),
   restored at the same path outside the timing. The same slices are written to a Delta table with
   deltalake.write_deltalake, one append per file (pristine copy likewise, _delta_log copied).
2. Layouts: `floe compact bench.t --rewrite-all --target-file-size T` plus nothing (unsorted,
   bin-pack), `--sort-by x` (linear) and `--sort-by 'zorder(x, y)'` (zorder). After each, PyIceberg
   (SqlCatalog over catalog.db) plans --filters random ranges of 1% of the domain on x, and as many
   on y: the mean number of data files plan_files() selects, per column. Each filter is also read
   (scan(row_filter).to_arrow()): the rows read, and the rows among them matching the filter
   exactly, must equal the count (and sum(id)) computed from the generated data; each table's rows,
   sum(id) and distinct ids must equal the input's.
3. Timing: floe `compact --sort-by 'zorder(x, y)'` vs delta-rs `DeltaTable.optimize.z_order(["x", "y"],
   target_size=T)`, --warmup uncounted then --runs counted runs, alternating (floe, delta, floe, ...),
   each from a fresh copy of its pristine input, each in its own process under GNU time (wall, cpu,
   peak RSS). Reported: min/median/max per side, the ratio of the medians delta/floe and the median
   of the pairwise ratios. Every run's output is checked (rows, sum(id)).
   The Delta table after z_order is pruned with the same filters (DeltaTable.file_uris
   file_pruning_predicate: per-file min/max statistics) and read back with a pyarrow dataset filter
   (row counts checked too).

--target-file-size auto (the default) is the input's bytes / 16, so both engines write ~16-32 files
whatever --rows; give a size (8MiB, 8388608) to fix it. A floe without Z-order compaction rejects
`--sort-by 'zorder(x, y)'`: the script then prints the other layouts' results and exits 2.

  /var/tmp/floe-venv/bin/python crates/floe-bench/peers/zorder_bench.py \\
      --floe /var/tmp/floe-target/release/floe --workdir /var/tmp/zorder-bench       # ~2-3 min, 2 cores
  ... --rows 200000 --files 50 --runs 1 --warmup 0                                    # smoke test
  ... --json > zorder.json                                                          # progress on stderr
"""
import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

from bench_util import Floe, dir_bytes, local_path, log, time_command  # noqa: E402

NS, TABLE = "bench", "bench.t"
CATALOG_NAME = "floe"  # floe's embedded SQLite catalog name
SCHEMA = "id bigint not null, x bigint, y bigint, ts timestamp, s string, v double"
DOMAIN = 1_000_000  # x and y are uniform on [0, DOMAIN)
WIDTH = DOMAIN // 100  # each filter covers 1% of the domain
DAY_US = 86_400_000_000
AUTO_OUTPUT_FILES = 16  # --target-file-size auto: input bytes / this (sorted outputs come out smaller)
LAYOUTS = {"unsorted": [], "linear": ["--sort-by", "x"], "zorder": ["--sort-by", "zorder(x, y)"]}
ZORDER = "zorder(x, y)"

DELTA_ZORDER_CODE = r"""
import json, sys, time
from deltalake import DeltaTable
t0 = time.perf_counter()
m = DeltaTable(sys.argv[1]).optimize.z_order(["x", "y"], target_size=int(sys.argv[2]))
print(json.dumps({"inproc_s": time.perf_counter() - t0, "metrics": m}, default=str))
"""


class BenchFailed(Exception):
    pass


def parse_size(s):
    """'auto', bytes, or a number with K/M/G (decimal) or KiB/MiB/GiB (binary) suffix."""
    if s == "auto":
        return None
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMG]i?B?|B)?\s*", s, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r}: auto, 8388608, 8MiB, 8MB")
    unit = (m.group(2) or "B").upper()
    mult = 1 if unit == "B" else (1024 if "I" in unit else 1000) ** ("KMG".index(unit[0]) + 1)
    return int(float(m.group(1)) * mult)


def sh(cmd, timeout=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise BenchFailed(f"{' '.join(map(str, cmd[:6]))} ...: rc {r.returncode}: "
                          f"{(r.stderr.strip() or r.stdout.strip())[-2000:]}")
    return r


def tree_state(path):
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            st = os.stat(p)
            out[os.path.relpath(p, path)] = (st.st_size, st.st_mtime_ns)
    return out


def restore(pristine, work, real):
    """work := a hard-linked copy of pristine, with the files written in place (`real`: catalog.db*
    of a warehouse, or the directory _delta_log) copied for real."""
    shutil.rmtree(work, ignore_errors=True)
    sh(["cp", "-al", pristine, work])
    if real == "_delta_log":
        shutil.rmtree(os.path.join(work, real))
        shutil.copytree(os.path.join(pristine, real), os.path.join(work, real))
    else:
        for n in os.listdir(pristine):
            if n.startswith(real):
                sh(["cp", "--remove-destination", os.path.join(pristine, n), os.path.join(work, n)])


# ---------------------------------------------------------------------------------------------
# input

def generate(rows, seed):
    import duckdb
    con = duckdb.connect()
    q = f"""
    SELECT i::BIGINT AS id,
           (hash({seed}, 1, i) % {DOMAIN})::BIGINT AS x,
           (hash({seed}, 2, i) % {DOMAIN})::BIGINT AS y,
           TIMESTAMP '2026-01-01' + to_microseconds((hash({seed}, 3, i) % {30 * DAY_US})::BIGINT) AS ts,
           substr(md5(concat({seed}, '-', i)), 1, 12) AS s,
           (hash({seed}, 4, i) % 1000000000)::DOUBLE / 1000.0 AS v
    FROM range({rows}) r(i) ORDER BY hash({seed}, 0, i), i"""
    return con.execute(q).to_arrow_table().combine_chunks()


def make_filters(n, seed):
    rng = random.Random(seed)
    return {col: [(lo, lo + WIDTH) for lo in (rng.randrange(0, DOMAIN - WIDTH + 1) for _ in range(n))]
            for col in ("x", "y")}


def truth(data, filters):
    """Per column, per filter: (rows, sum(id)) of the generated rows with lo <= col < hi."""
    import pyarrow.compute as pc
    out = {}
    for col, ranges in filters.items():
        out[col] = []
        for lo, hi in ranges:
            mask = pc.and_(pc.greater_equal(data[col], lo), pc.less(data[col], hi))
            ids = pc.filter(data["id"], mask)
            out[col].append((len(ids), pc.sum(ids).as_py() or 0))
    return out


def build_iceberg(a, floe, wh, slices, in_dir):
    import pyarrow.parquet as pq
    shutil.rmtree(wh, ignore_errors=True)
    shutil.rmtree(in_dir, ignore_errors=True)
    os.makedirs(in_dir)
    os.makedirs(wh)
    sh(floe.argv("namespace", "create", NS))
    sh(floe.argv("table", "create", TABLE, "--schema", SCHEMA))
    for i, t in enumerate(slices):
        p = os.path.join(in_dir, f"part-{i:05d}.parquet")
        pq.write_table(t, p)
        sh(floe.argv("--json", "append", TABLE, p))  # one commit, one data file
    shutil.rmtree(in_dir)


def build_delta(path, slices):
    from deltalake import write_deltalake
    shutil.rmtree(path, ignore_errors=True)
    for t in slices:
        write_deltalake(path, t, mode="append")


# ---------------------------------------------------------------------------------------------
# checks and pruning

def open_table(wh):
    from read_table import open_catalog
    cat = open_catalog(f"sqlite:///{wh}/catalog.db", CATALOG_NAME, wh)
    return cat, cat.load_table(TABLE)


def close_catalog(cat):
    eng = getattr(cat, "engine", None)
    if eng is not None:
        eng.dispose()  # the work warehouse is removed and restored next: drop the SQLite handle


def check_totals(got, exp, what):
    if got != exp:
        raise BenchFailed(f"CHECK FAILED ({what}): rows, sum(id), distinct ids {got}, expected {exp}")


def iceberg_totals(wh):
    import pyarrow.compute as pc
    cat, t = open_table(wh)
    try:
        ids = t.scan(selected_fields=("id",)).to_arrow()["id"]
        return (len(ids), pc.sum(ids).as_py() or 0, pc.count_distinct(ids).as_py())
    finally:
        close_catalog(cat)


def delta_totals(path):
    import pyarrow.compute as pc
    from deltalake import DeltaTable
    ids = DeltaTable(path).to_pyarrow_table(columns=["id"])["id"]
    return (len(ids), pc.sum(ids).as_py() or 0, pc.count_distinct(ids).as_py())


def exact_matches(tbl, col, lo, hi):
    import pyarrow.compute as pc
    mask = pc.and_(pc.greater_equal(tbl[col], lo), pc.less(tbl[col], hi))
    ids = pc.filter(tbl["id"], mask)
    return len(ids), pc.sum(ids).as_py() or 0


def pruning_summary(selected, total, files):
    """selected[col] = files selected per filter -> summary per column."""
    out = {"data_files": files, "total_file_bytes": total}
    for col, ns in selected.items():
        mean = statistics.mean(ns)
        out[col] = {"mean_files": mean, "min_files": min(ns), "max_files": max(ns),
                    "mean_fraction": mean / files if files else None, "per_filter": ns}
    return out


def iceberg_layout(wh, filters, expected):
    """Files plan_files() selects per filter, with the rows read checked against the generated data."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan
    cat, t = open_table(wh)
    try:
        all_files = list(t.scan().plan_files())
        total = sum(f.file.file_size_in_bytes for f in all_files)
        selected = {}
        for col, ranges in filters.items():
            selected[col] = []
            for (lo, hi), (n_exp, s_exp) in zip(ranges, expected[col]):
                scan = t.scan(row_filter=And(GreaterThanOrEqual(col, lo), LessThan(col, hi)),
                              selected_fields=("id", col))
                selected[col].append(len(list(scan.plan_files())))
                tbl = scan.to_arrow()
                n, s = exact_matches(tbl, col, lo, hi)
                if not (tbl.num_rows == n == n_exp and s == s_exp):
                    raise BenchFailed(f"CHECK FAILED ({wh}, {lo} <= {col} < {hi}): read {tbl.num_rows} rows, "
                                      f"{n} matching, sum(id) {s}; expected {n_exp} rows, sum(id) {s_exp}")
        return pruning_summary(selected, total, len(all_files))
    finally:
        close_catalog(cat)


def delta_layout(path, filters, expected):
    import pyarrow.dataset as ds
    from deltalake import DeltaTable
    t = DeltaTable(path)
    uris = t.file_uris()
    total = sum(os.path.getsize(local_path(u)) for u in uris)
    dataset = t.to_pyarrow_dataset()
    selected = {}
    for col, ranges in filters.items():
        selected[col] = []
        for (lo, hi), (n_exp, s_exp) in zip(ranges, expected[col]):
            selected[col].append(len(t.file_uris(file_pruning_predicate=f"{col} >= {lo} AND {col} < {hi}")))
            tbl = dataset.to_table(columns=["id", col], filter=(ds.field(col) >= lo) & (ds.field(col) < hi))
            n, s = exact_matches(tbl, col, lo, hi)
            if not (tbl.num_rows == n == n_exp and s == s_exp):
                raise BenchFailed(f"CHECK FAILED (delta, {lo} <= {col} < {hi}): read {tbl.num_rows} rows, "
                                  f"{n} matching, sum(id) {s}; expected {n_exp} rows, sum(id) {s_exp}")
    return pruning_summary(selected, total, len(uris))


# ---------------------------------------------------------------------------------------------
# runs

def floe_compact(a, wh, layout, target):
    """One timed `floe compact`; raises BenchFailed (zorder: with what to do) on a non-zero exit."""
    cmd = [a.floe, "--warehouse", wh, "--json", "compact", TABLE, "--rewrite-all",
           "--target-file-size", str(target), *LAYOUTS[layout]]
    m, rc, out, err = time_command(cmd, timeout=a.timeout)
    if rc != 0 or m is None:
        msg = (err.strip() or out.strip())[-1500:]
        if layout == "zorder":
            raise BenchFailed(f"this floe ({a.floe}) cannot run `floe compact --sort-by '{ZORDER}'` "
                              f"(rc {rc}): {msg}\n  -> it predates Z-order compaction: rebuild floe "
                              "(cargo build --release -p floe-cli) and run again")
        raise BenchFailed(f"floe compact ({layout}) failed, rc {rc}: {msg}")
    j = json.loads(out)
    m["inproc_s"] = j.get("duration_ms", 0) / 1000.0
    m["files_before"], m["files_after"] = j.get("live_files_before"), j.get("live_files_after")
    m["rewritten_files"] = j.get("rewritten_files")
    return m


def delta_zorder(a, path, target):
    m, rc, out, err = time_command([sys.executable, "-c", DELTA_ZORDER_CODE, path, str(target)],
                                   timeout=a.timeout)
    if rc != 0 or m is None:
        raise BenchFailed(f"delta-rs z_order failed, rc {rc}: {(err.strip() or out.strip())[-1500:]}")
    j = json.loads(out.strip().splitlines()[-1])
    mm = j.get("metrics") or {}
    m["inproc_s"] = j["inproc_s"]
    m["files_removed"], m["files_added"] = mm.get("numFilesRemoved"), mm.get("numFilesAdded")
    return m


def summarize(runs):
    out = {"runs": len(runs)}
    for k in ("wall_s", "cpu_s", "inproc_s", "max_rss_mib"):
        v = [r[k] for r in runs]
        out[k] = {"min": min(v), "median": statistics.median(v), "max": max(v)}
    return out


def timing(a, paths, target, exp_totals):
    runs = {"floe": [], "delta": []}
    total = a.warmup + a.runs
    for i in range(total):
        counted = i >= a.warmup
        tag = f"run {i - a.warmup + 1}/{a.runs}" if counted else f"warm-up {i + 1}/{a.warmup}"
        restore(paths["ice_p"], paths["ice_w"], "catalog.db")
        m = floe_compact(a, paths["ice_w"], "zorder", target)
        check_totals(iceberg_totals(paths["ice_w"]), exp_totals, f"floe zorder {tag}")
        log(f"{tag} floe  zorder: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} s cpu, {m['max_rss_mib']:.0f} MiB, "
            f"files {m['files_before']} -> {m['files_after']}, check ok")
        if counted:
            runs["floe"].append(m)
        restore(paths["delta_p"], paths["delta_w"], "_delta_log")
        m = delta_zorder(a, paths["delta_w"], target)
        check_totals(delta_totals(paths["delta_w"]), exp_totals, f"delta z_order {tag}")
        log(f"{tag} delta z_order: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} s cpu, {m['max_rss_mib']:.0f} MiB, "
            f"files -{m['files_removed']} +{m['files_added']}, check ok")
        if counted:
            runs["delta"].append(m)
    res = {"floe": summarize(runs["floe"]), "delta": summarize(runs["delta"])}
    res["delta_over_floe_wall_median"] = res["delta"]["wall_s"]["median"] / res["floe"]["wall_s"]["median"]
    res["delta_over_floe_wall_pairwise_median"] = statistics.median(
        d["wall_s"] / f["wall_s"] for f, d in zip(runs["floe"], runs["delta"]))
    res["delta_over_floe_cpu_median"] = res["delta"]["cpu_s"]["median"] / res["floe"]["cpu_s"]["median"]
    res["runs"] = runs
    return res


# ---------------------------------------------------------------------------------------------
# report

def human(doc):
    lines = []
    inp = doc["input"]
    lines.append(f"input: {inp['rows']:,} rows, {inp['files']} files, {inp['bytes'] / 2**20:.1f} MiB (Iceberg), "
                 f"target file size {doc['params']['target_file_size']:,} bytes; "
                 f"{doc['params']['filters']} filters per column of 1% of [0, {DOMAIN:,})")
    hdr = f"{'layout':<22}{'files':>6}{'MiB':>8}  {'x: files/filter':>17}  {'y: files/filter':>17}  {'compact s':>9}"
    lines += ["", hdr, "-" * len(hdr)]

    def row(name, lay, secs):
        def col(c):
            s = lay[c]
            return f"{s['mean_files']:>7.1f} ({100 * s['mean_fraction']:>4.0f}%)"
        secs_s = f"{secs:>9.2f}" if secs is not None else f"{'-':>9}"
        return (f"{name:<22}{lay['data_files']:>6}{lay['total_file_bytes'] / 2**20:>8.1f}  {col('x'):>17}  "
                f"{col('y'):>17}  {secs_s}")

    names = {"unsorted": "floe unsorted", "linear": "floe --sort-by x", "zorder": f"floe {ZORDER}"}
    for k, lay in doc["layouts"].items():
        lines.append(row(names[k], lay, lay["compact"]["wall_s"]))
    if doc.get("delta_layout"):
        lines.append(row("delta z_order([x, y])", doc["delta_layout"], None))
    lines.append("(files/filter: the mean of data files selected by the scan planner (PyIceberg plan_files; "
                 "delta: file_uris file_pruning_predicate), % of the table's files; rows read checked exact)")
    tm = doc.get("timing")
    if tm:
        lines += ["", f"Z-order compaction, {tm['floe']['runs']} runs each, alternating, fresh copy each "
                      "(min / median / max):"]
        for side, name in (("floe", f"floe compact --sort-by '{ZORDER}'"), ("delta", "delta-rs optimize.z_order")):
            s = tm[side]
            w, c, r = s["wall_s"], s["cpu_s"], s["max_rss_mib"]
            lines.append(f"  {name:<36} wall {w['min']:.2f} / {w['median']:.2f} / {w['max']:.2f} s   "
                         f"cpu {c['median']:.2f} s   peak RSS {r['median']:.0f} MiB")
        lines.append(f"  delta/floe: wall {tm['delta_over_floe_wall_median']:.2f}x (medians), "
                     f"{tm['delta_over_floe_wall_pairwise_median']:.2f}x (median of pairs); "
                     f"cpu {tm['delta_over_floe_cpu_median']:.2f}x")
    if doc.get("error"):
        lines += ["", f"FAILED: {doc['error']}"]
    return "\n".join(lines)


def versions(a):
    import deltalake
    import pyiceberg
    r = subprocess.run([a.floe, "--version"], capture_output=True, text=True)
    return {"floe": r.stdout.strip(), "deltalake": deltalake.__version__, "pyiceberg": pyiceberg.__version__,
            "python": sys.version.split()[0], "nproc": os.cpu_count()}


def run(a, doc):
    work = os.path.abspath(a.workdir)
    os.makedirs(work, exist_ok=True)
    paths = {"ice_w": os.path.join(work, "iceberg"), "ice_p": os.path.join(work, "iceberg.pristine"),
             "delta_w": os.path.join(work, "delta"), "delta_p": os.path.join(work, "delta.pristine"),
             "input": os.path.join(work, "input")}
    for p in paths.values():
        shutil.rmtree(p, ignore_errors=True)
    floe = Floe(a.floe, paths["ice_w"])

    t0 = time.perf_counter()
    data = generate(a.rows, a.seed)
    per = math.ceil(a.rows / a.files)
    slices = [data.slice(i * per, per) for i in range(a.files) if i * per < a.rows]
    filters = make_filters(a.filters, a.seed)
    expected = truth(data, filters)
    exp_totals = (a.rows, a.rows * (a.rows - 1) // 2, a.rows)
    log(f"generated {a.rows:,} rows in {len(slices)} slices ({time.perf_counter() - t0:.1f} s)")

    t0 = time.perf_counter()
    # built at the work path: table locations are absolute, every run restores the pristine copy there
    build_iceberg(a, floe, paths["ice_w"], slices, paths["input"])
    restore(paths["ice_w"], paths["ice_p"], "catalog.db")
    ice_bytes = dir_bytes(os.path.join(paths["ice_w"], NS))
    cat, t = open_table(paths["ice_w"])
    data_files = list(t.scan().plan_files())
    close_catalog(cat)
    in_bytes = sum(f.file.file_size_in_bytes for f in data_files)
    if len(data_files) != len(slices):
        raise BenchFailed(f"the Iceberg input has {len(data_files)} data files, expected {len(slices)}")
    check_totals(iceberg_totals(paths["ice_w"]), exp_totals, "Iceberg input")
    log(f"Iceberg input: {len(data_files)} files, {in_bytes / 2**20:.1f} MiB data "
        f"({ice_bytes / 2**20:.1f} MiB with metadata), {time.perf_counter() - t0:.1f} s")
    target = a.target_file_size or max(1, in_bytes // AUTO_OUTPUT_FILES)
    doc["params"]["target_file_size"] = target
    doc["input"] = {"rows": a.rows, "files": len(data_files), "bytes": in_bytes, "sum_id": exp_totals[1]}
    doc["filters"] = filters

    if not a.skip_delta:
        t0 = time.perf_counter()
        build_delta(paths["delta_p"], slices)
        check_totals(delta_totals(paths["delta_p"]), exp_totals, "Delta input")
        from deltalake import DeltaTable
        n = len(DeltaTable(paths["delta_p"]).file_uris())
        log(f"Delta input: {n} files, {dir_bytes(paths['delta_p']) / 2**20:.1f} MiB, "
            f"{time.perf_counter() - t0:.1f} s")
        doc["input"]["delta_files"] = n
    del data, slices

    state = {"ice": tree_state(paths["ice_p"])}
    if not a.skip_delta:
        state["delta"] = tree_state(paths["delta_p"])

    doc["layouts"] = {}
    for layout in LAYOUTS:
        restore(paths["ice_p"], paths["ice_w"], "catalog.db")
        m = floe_compact(a, paths["ice_w"], layout, target)
        check_totals(iceberg_totals(paths["ice_w"]), exp_totals, f"floe {layout}")
        lay = iceberg_layout(paths["ice_w"], filters, expected)
        lay["compact"] = m
        doc["layouts"][layout] = lay
        log(f"{layout}: {m['wall_s']:.2f} s, files {m['files_before']} -> {m['files_after']}; files/filter "
            f"x {lay['x']['mean_files']:.1f}, y {lay['y']['mean_files']:.1f} of {lay['data_files']}; checks ok")

    if not a.skip_delta:
        doc["timing"] = timing(a, paths, target, exp_totals)
        doc["delta_layout"] = delta_layout(paths["delta_w"], filters, expected)
        d = doc["delta_layout"]
        log(f"delta z_order: files/filter x {d['x']['mean_files']:.1f}, y {d['y']['mean_files']:.1f} "
            f"of {d['data_files']}; checks ok")

    for k, p in (("ice", paths["ice_p"]), ("delta", paths["delta_p"])):
        if k in state:
            now = tree_state(p)
            changed = sorted(n for n in set(now) | set(state[k]) if now.get(n) != state[k].get(n))
            if changed:
                raise BenchFailed(f"the pristine copy {p} changed during the runs (written in place?): "
                                  f"{', '.join(changed[:5])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--floe", required=True, help="the floe binary")
    ap.add_argument("--workdir", required=True, help="scratch directory (its iceberg*, delta*, input subdirectories "
                                                     "are replaced)")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=200, help="input data files")
    ap.add_argument("--target-file-size", type=parse_size, default=None,
                    help="output file size: auto (input bytes / 16), bytes, or 8MiB / 8MB (default auto)")
    ap.add_argument("--filters", type=int, default=10, help="range filters per column (x, y), 1%% of the domain each")
    ap.add_argument("--runs", type=int, default=3, help="counted timing runs per side")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted timing runs per side, first")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--skip-delta", action="store_true", help="only the floe layouts (no Delta table, no timing)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per compaction run")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout (progress on stderr)")
    a = ap.parse_args()
    a.floe = os.path.abspath(a.floe)
    if not (os.path.isfile(a.floe) and os.access(a.floe, os.X_OK)):
        ap.error(f"--floe {a.floe}: not an executable file")
    if a.rows < 1 or a.files < 1 or a.files > a.rows or a.runs < 1 or a.warmup < 0 or a.filters < 1:
        ap.error("need rows >= files >= 1, runs >= 1, warmup >= 0, filters >= 1")

    doc = {"bench": "zorder", "params": {"rows": a.rows, "files": a.files, "filters": a.filters,
                                         "filter_width": WIDTH, "domain": DOMAIN, "runs": a.runs,
                                         "warmup": a.warmup, "seed": a.seed}}
    rc = 0
    with contextlib.redirect_stdout(sys.stderr if a.json else sys.stdout):
        doc["versions"] = versions(a)
        try:
            run(a, doc)
        except (BenchFailed, subprocess.TimeoutExpired) as e:
            doc["error"] = str(e)
            log(f"!!! {e}")
            rc = 2
        if doc.get("layouts") or doc.get("error"):
            print(human(doc) if doc.get("layouts") else f"FAILED: {doc['error']}", flush=True)
    if a.json:
        print(json.dumps(doc, indent=2, default=str))
    sys.exit(rc)


if __name__ == "__main__":
    main()
