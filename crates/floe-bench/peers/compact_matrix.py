"""Compaction matrix: floe compact vs delta-rs optimize.compact() vs a PyIceberg read-all-and-overwrite,
on the same input, over file sizes, partition counts, table widths and deletes.

One factor at a time around a baseline (small files of 1-10 KB (2.5-10 KB: a 1-row file is 2.2 KB), 3 day partitions, 5 columns, no deletes):

  size        small (~3,000 files of 2.5-10 KB), medium (100 KB-1 MB, ~150 MiB), large (5-20 MB,
              ~300 MiB), mixed (~3,000 files: 98% of 2.5-10 KB, 2% of 0.5-2 MB)
  partitions  part-1 (unpartitioned), part-3 (= small), part-30, part-300 (small files, >= 10 files
              per partition)
  width       width-5 (= medium), width-100 (id, ts, amount + 97 bigint/double/string columns),
              width-nested (id, ts, amount, s struct<x bigint, y string>, tags list<string>)
  deletes     del-pos (medium, 5% of rows position-deleted by `floe delete`), del-eq (medium,
              unpartitioned, one equality delete file of 5% of the ids, from `floe-bench equality-deletes`)
  large-2gb   ~2 GiB: 160 files of 5-20 MB and 480 of 2.5-10 KB, 3 partitions (opt-in: --cells large-2gb or --all)

Input. Each cell's Iceberg table is created with PyIceberg's SqlCatalog (catalog name 'floe', the
SQLite catalog floe opens with --warehouse) and written with PyIceberg `append`, so the Parquet files
are PyIceberg's. File sizes are set through PyIceberg's bin-packing: every append writes files of one
row count r ("level"), with `write.target-file-size-bytes` set to (r + 0.5) rows of in-memory Arrow
bytes, and every file of r rows has the same Arrow size (variable-length values take their lengths
from a per-r template, rotated per file), so PyIceberg cuts exactly one file per r rows, in every
partition. Row counts per file size come from a calibration (PyIceberg files of 1, 2, 5, 10, ...
rows, cached in DIR/calib). The table property is removed afterwards. The same data files are
hard-linked into a Delta table (hand-written _delta_log/00000000000000000000.json; partitioned cells
declare a `ts_day` date partition column that the files do not hold).

Runs. Every run starts from the same input: a pristine hard-linked copy (catalog.db copied for real)
is restored before each tool run, outside the timing. Tools run interleaved per run index (floe,
delta-rs, PyIceberg, then the next run), each in its own process under /usr/bin/time. After each run
the table is checked: rows, sum(amount) and count(distinct id) equal the input's minus deleted rows
(DuckDB iceberg_scan for Iceberg, deltalake for Delta; floe sql for the equality-delete cell, as
DuckDB 1.5.5 applies equality deletes in time ~ rows x deletes).

Inputs are cached: DIR/CELL/{iceberg,delta}.pristine and input.json are reused by the next run
with the same cell, --scale and generator (--rebuild forces a new build); the work copies are removed
after each cell (--keep keeps them). Results are written to --out after every cell (--merge keeps
the cells of an earlier file that this run does not redo).

Notes. --scale multiplies the number of files; when that leaves fewer than 10 files per partition
(8 for `large`), the cell gets 10 per partition of proportionally smaller files (same volume).
PyIceberg's stand-in holds the whole table in memory (~7-9x the input bytes): it is skipped when
that would not fit in MemAvailable (large-2gb on a 23 GiB host; --force runs it). DuckDB 1.5.5
applies equality deletes in time ~ rows x deleted keys (so does the iceberg crate's reader; floe's
compaction hashes the keys: del-eq went from ~390 s to ~1 s). Durations on the 2-core dev VM: the
default matrix at --runs 3 ~10 min (inputs built, ~3 min more to build them), large-2gb ~6 min more.

  /var/tmp/floe-venv/bin/python crates/floe-bench/peers/compact_matrix.py            # default matrix
  ... --cells small,medium --runs 1          # some cells
  ... --scale 0.05 --runs 1 --all            # quick smoke test of every cell (~2 min)
  ... --cells large-2gb --merge              # add the opt-in cell to the saved results
  ... --print crates/floe-bench/results/compact_matrix.json   # re-render the Markdown
"""
import argparse
import bisect
import datetime as dt
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

from bench_util import log, time_command  # noqa: E402

GEN_VERSION = 5  # bump when the generator or the input layout changes (invalidates cached inputs)
TABLE = "bench.t"
CATALOG_NAME = "floe"  # floe's embedded SQLite catalog name (compact_bench.py: SqlCatalog('floe', ...))
TARGET = "100MiB"  # delta-rs optimize's default target is 100 MiB
DAY0 = dt.date(2026, 1, 1)
KB, MB = 1000, 1000 ** 2
MIB = 2 ** 20

# File size classes (on-disk Parquet bytes), each cut into LEVELS row counts.
CLASSES = {
    "small": (2500, 10 * KB),  # "1-10 KB": a 5-column PyIceberg Parquet file of 1 row is already 2.2 KB
    "medium": (100 * KB, 1 * MB),
    "large": (5 * MB, 20 * MB),
    "big": (500 * KB, 2 * MB),  # the 2% of the mixed cell
}
LEVELS = 10

# name -> spec. files: data files at scale 1; mix: (fraction of files, size class).
CELLS = {
    "small": dict(schema="5col", parts=3, files=3000, mix=[(1.0, "small")],
                  desc="~3,000 files of 2.5-10 KB, 3 partitions, 5 columns (baseline; = part-3)"),
    "medium": dict(schema="5col", parts=3, files=275, mix=[(1.0, "medium")],
                   desc="100 KB-1 MB files, ~150 MB, 3 partitions, 5 columns (= width-5)"),
    "large": dict(schema="5col", parts=3, files=24, mix=[(1.0, "large")], min_files_per_partition=8,
                  desc="5-20 MB files, ~300 MB, 3 partitions, 5 columns"),
    "mixed": dict(schema="5col", parts=3, files=3000, mix=[(0.98, "small"), (0.02, "big")],
                  desc="~3,000 files: 98% of 2.5-10 KB, 2% of 0.5-2 MB, 3 partitions"),
    "part-1": dict(schema="5col", parts=1, files=3000, mix=[(1.0, "small")],
                   desc="small files, unpartitioned"),
    "part-30": dict(schema="5col", parts=30, files=3000, mix=[(1.0, "small")],
                    desc="small files, 30 day partitions"),
    "part-300": dict(schema="5col", parts=300, files=3000, mix=[(1.0, "small")],
                     desc="small files, 300 day partitions (10 files each)"),
    "width-100": dict(schema="wide", parts=3, files=275, mix=[(1.0, "medium")],
                      desc="medium files, 100 columns"),
    "width-nested": dict(schema="nested", parts=3, files=275, mix=[(1.0, "medium")],
                         desc="medium files, struct and list columns"),
    "del-pos": dict(schema="5col", parts=3, files=275, mix=[(1.0, "medium")], deletes="pos",
                    desc="medium files, 5% of rows position-deleted (floe delete, merge-on-read)"),
    "del-eq": dict(schema="5col", parts=1, files=275, mix=[(1.0, "medium")], deletes="eq",
                   desc="medium files, unpartitioned, equality deletes of 5% of the ids"),
    "large-2gb": dict(schema="5col", parts=3, files=640, mix=[(0.75, "small"), (0.25, "large")],
                      desc="~2 GB: 160 files of 5-20 MB + 480 of 2.5-10 KB, 3 partitions", opt_in=True),
}
ALIASES = {"part-3": "small", "width-5": "medium"}
DEFAULT_CELLS = [c for c, s in CELLS.items() if not s.get("opt_in")]
TOOLS = ["floe", "delta", "pyiceberg"]
MIN_FILES_PER_PARTITION = 10  # floe's min-input-files is 5: leave every partition a group to rewrite
# (at small --scale a cell gets at least this many files per partition, smaller ones: same volume)
APPEND_MAX_FILES = 500
APPEND_MAX_ARROW_BYTES = 256 * MIB

NA_DELTA_DELETES = "n/a: delta-rs has no position/equality delete input"
NA_PYICEBERG_EQ = "n/a: PyIceberg 0.12 cannot read equality deletes"
PYICEBERG_RSS_PER_INPUT_BYTE = 9  # observed peak RSS / input bytes of scan().to_arrow() + overwrite


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return float("inf")


class CellFailed(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# schemas and the row generator (DuckDB SQL: deterministic, hash-based, seeded per cell)

def wide_columns():
    """(name, kind) of the 97 extra columns of the wide schema."""
    kinds = ["bigint", "double", "category", "bigint", "double", "string"]
    return [(f"c{k:03d}", kinds[k % len(kinds)]) for k in range(1, 98)]


def iceberg_schema(name):
    from pyiceberg.schema import Schema
    from pyiceberg.types import (DoubleType, ListType, LongType, NestedField, StringType, StructType,
                                 TimestampType)
    f = [NestedField(1, "id", LongType(), required=True), NestedField(2, "ts", TimestampType()),
         NestedField(3, "amount", DoubleType())]
    if name == "5col":  # id bigint not null, ts timestamp, name string, amount double, payload string
        f = [f[0], f[1], NestedField(3, "name", StringType()), NestedField(4, "amount", DoubleType()),
             NestedField(5, "payload", StringType())]
    elif name == "wide":
        types = {"bigint": LongType(), "double": DoubleType(), "category": StringType(), "string": StringType()}
        f += [NestedField(4 + i, n, types[k]) for i, (n, k) in enumerate(wide_columns())]
    elif name == "nested":
        f += [NestedField(4, "s", StructType(NestedField(6, "x", LongType()), NestedField(7, "y", StringType()))),
              NestedField(5, "tags", ListType(8, StringType(), element_required=False))]
    else:
        raise ValueError(name)
    return Schema(*f)


SCHEMA_TEXT = {
    "5col": "id bigint not null, ts timestamp, name string, amount double, payload string",
    "wide": "id bigint not null, ts timestamp, amount double, c001..c097 (32 bigint, 33 double, 16 categorical "
            "string of 5-6 chars, 16 random hex string of 16 chars)",
    "nested": "id bigint not null, ts timestamp, amount double, s struct<x bigint, y string>, tags list<string>",
}


def select_list(schema, seed):
    """SQL expressions over g(fno, id0, r, day, rot, pos) for one row of `schema`. Variable-length
    values take their length from a template indexed by (pos + rot) % r and keyed by r, so every
    file of r rows has the same total length (and the same in-memory Arrow size)."""
    tpl = f"hash({seed}, r, (pos + rot) % r)"  # same multiset of values in every file of r rows
    id_ = "(id0 + pos)"
    cols = [f"{id_}::BIGINT AS id",
            f"(TIMESTAMP '{DAY0}' + to_days(day::INTEGER) + to_microseconds((hash({seed}, 2, {id_}) % 86400000000)::BIGINT)) AS ts",
            f"((hash({seed}, 1, {id_}) % 10000000) / 100.0)::DOUBLE AS amount"]

    def hexstr(k, length):  # random-ish hex, up to 64 chars
        return (f"substr(md5(concat({seed}, '-{k}-', {id_})) || md5(concat({id_}, '-{k}-', {seed})), 1, "
                f"({length})::BIGINT)")

    if schema == "5col":
        cols[2:2] = [f"'name-' || lpad((hash({seed}, 3, {id_}) % 1000)::VARCHAR, 3, '0') AS name"]
        cols.append(f"{hexstr(4, f'20 + {tpl} % 41')} AS payload")  # 20-60 chars
    elif schema == "wide":
        for k, (n, kind) in enumerate(wide_columns(), start=1):
            h = f"hash({seed}, {100 + k}, {id_})"
            if kind == "bigint":
                cols.append(f"({h} % 1000000)::BIGINT AS {n}")
            elif kind == "double":
                cols.append(f"(({h} % 100000000) / 1000.0)::DOUBLE AS {n}")
            elif kind == "category":
                cols.append(f"'v' || lpad(({h} % {10 ** (2 + k % 4)})::VARCHAR, 5, '0') AS {n}")
            else:
                cols.append(f"{hexstr(100 + k, 16)} AS {n}")
    elif schema == "nested":
        cols += [f"struct_pack(x := (hash({seed}, 5, {id_}) % 1000000)::BIGINT, y := {hexstr(6, f'8 + {tpl} % 25')}) AS s",
                 f"list_transform(range((({tpl} >> 8) % 5)::BIGINT), j -> 'tag-' || lpad((hash({seed}, 7, {id_}, j) % 100)::VARCHAR, 2, '0')) AS tags"]
    return cols


def gen_table(con, schema, arrow_schema, files, seed):
    """The rows of `files` (dicts: id0, r, day, rot) in file order, cast to the table's Arrow
    schema, as a Table with one record batch per file."""
    import pyarrow as pa
    ftab = pa.table({"fno": list(range(len(files))), "id0": [f["id0"] for f in files],
                     "r": [f["r"] for f in files], "day": [f["day"] for f in files],
                     "rot": [f["rot"] for f in files]})
    con.register("files", ftab)
    sql = (f"WITH g AS (SELECT fno, id0, r, day, rot, unnest(range(r)) AS pos FROM files) "
           f"SELECT {', '.join(select_list(schema, seed))} FROM g ORDER BY fno, pos")
    tbl = con.execute(sql).to_arrow_table().cast(arrow_schema)
    con.unregister("files")
    batches, off = [], 0
    for f in files:
        batches.extend(tbl.slice(off, f["r"]).combine_chunks().to_batches())
        off += f["r"]
    assert off == tbl.num_rows
    return pa.Table.from_batches(batches, schema=arrow_schema)


# ---------------------------------------------------------------------------------------------
# processes

def sh(cmd, timeout=None, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise CellFailed(f"{' '.join(map(str, cmd[:6]))} ...: rc {r.returncode}: "
                         f"{(r.stderr.strip() or r.stdout.strip())[-2000:]}")
    return r


def wait_for(binary, max_wait=900):
    """The binaries may be rebuilt (relinked) under us: wait until the file is back."""
    t = time.time()
    while not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        if time.time() - t > max_wait:
            raise CellFailed(f"{binary} is missing")
        time.sleep(5)


def floe_json(a, wh, *args, timeout=3600):
    wait_for(a.floe)
    r = sh([a.floe, "--warehouse", wh, "--json", *args], timeout=timeout)
    return json.loads(r.stdout)


def floe_sql(a, wh, query):
    """Rows of `floe --json sql` (one JSON object a line)."""
    wait_for(a.floe)
    r = sh([a.floe, "--warehouse", wh, "--json", "sql", query], timeout=3600)
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]


def run_measured(cmd, timeout=None):
    """Runs cmd under GNU time (bench_util.time_command): (measures, stdout); a failure is a
    CellFailed."""
    m, rc, out, err = time_command(cmd, timeout=timeout)
    if rc != 0 or m is None:
        raise CellFailed(f"{' '.join(map(str, cmd[:4]))} ...: rc {rc}: {err.strip()[-2000:]}")
    return m, out


DELTA_CODE = r"""
import json, sys, time
from deltalake import DeltaTable
t0 = time.perf_counter()
t = DeltaTable(sys.argv[1])
t1 = time.perf_counter()
m = t.optimize.compact()
t2 = time.perf_counter()
print(json.dumps({"open_s": t1 - t0, "inproc_s": t2 - t1, "metrics": m}, default=str))
"""

PYICEBERG_CODE = r"""
import json, sys, time
from pyiceberg.catalog.sql import SqlCatalog
wh, name, table = sys.argv[1:4]
c = SqlCatalog(name, uri="sqlite:///" + wh + "/catalog.db", warehouse="file://" + wh)
t0 = time.perf_counter()
t = c.load_table(table)
t1 = time.perf_counter()
df = t.scan().to_arrow()
t2 = time.perf_counter()
t.overwrite(df)
t3 = time.perf_counter()
print(json.dumps({"open_s": t1 - t0, "scan_s": t2 - t1, "write_s": t3 - t2, "inproc_s": t3 - t1, "rows": len(df)}))
"""


# ---------------------------------------------------------------------------------------------
# readers (the correctness checks)

class Readers:
    def __init__(self, a):
        self.a = a
        self._con = None

    def con(self):
        if self._con is None:
            from read_table import duckdb_connect
            self._con = duckdb_connect()
        return self._con

    def iceberg_duckdb(self, wh):
        """rows, sum(amount), distinct ids, data files, delete files of the current snapshot (DuckDB)."""
        loc = floe_json(self.a, wh, "table", "describe", TABLE)["metadata_location"]
        m = loc[len("file://"):] if loc.startswith("file://") else loc
        m = m.replace("'", "''")
        con = self.con()
        n, s, d = con.execute(f"SELECT count(*), sum(amount), count(DISTINCT id) FROM iceberg_scan('{m}')").fetchone()
        rows = con.execute(f"SELECT manifest_content, count(DISTINCT file_path) FROM iceberg_metadata('{m}') "
                           "WHERE status != 'DELETED' GROUP BY ALL").fetchall()
        by = dict(rows)
        return {"reader": "duckdb iceberg_scan", "rows": n, "sum": s or 0.0, "distinct_ids": d,
                "data_files": by.get("DATA", 0), "delete_files": by.get("DELETE", 0)}

    def iceberg_floe(self, wh):
        """The same through floe sql (applies equality deletes)."""
        (r,) = floe_sql(self.a, wh, f"SELECT count(*) AS n, sum(amount) AS s, count(DISTINCT id) AS d FROM {TABLE}")
        files = floe_sql(self.a, wh, f"SELECT content, count(*) AS n FROM {TABLE}$files GROUP BY content")
        by = {int(x["content"]): int(x["n"]) for x in files}
        return {"reader": "floe sql", "rows": int(r["n"]), "sum": float(r["s"] or 0.0), "distinct_ids": int(r["d"]),
                "data_files": by.get(0, 0), "delete_files": by.get(1, 0) + by.get(2, 0)}

    @staticmethod
    def delta(path):
        import pyarrow.compute as pc
        from deltalake import DeltaTable
        t = DeltaTable(path)
        tbl = t.to_pyarrow_table(columns=["id", "amount"])
        return {"reader": "deltalake to_pyarrow_table", "rows": tbl.num_rows,
                "sum": pc.sum(tbl["amount"]).as_py() or 0.0,
                "distinct_ids": pc.count_distinct(tbl["id"]).as_py(), "data_files": len(t.file_uris()),
                "delete_files": 0}


def check(got, exp, what):
    ok = (got["rows"] == exp["rows"] and got["distinct_ids"] == exp["rows"]
          and math.isclose(got["sum"], exp["sum"], rel_tol=1e-9, abs_tol=1e-6))
    if not ok:
        raise CellFailed(f"CHECK FAILED ({what}, {got['reader']}): rows {got['rows']} distinct ids "
                         f"{got['distinct_ids']} sum {got['sum']!r}, expected rows = distinct ids = "
                         f"{exp['rows']}, sum {exp['sum']!r}")


# ---------------------------------------------------------------------------------------------
# input

def catalog(wh):
    from pyiceberg.catalog.sql import SqlCatalog
    return SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")


def create_table(wh, schema, parts):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform
    os.makedirs(wh, exist_ok=True)
    c = catalog(wh)
    c.create_namespace(TABLE.split(".")[0])
    sch = iceberg_schema(schema)
    spec = (PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
            if parts > 1 else PartitionSpec())
    return c.create_table(TABLE, schema=sch, partition_spec=spec)


def target_for(t, tbl, r):
    """write.target-file-size-bytes for which PyIceberg cuts `tbl` (files of r rows) into one file
    per r rows. PyIceberg 0.12 (pyiceberg.io.pyarrow.bin_pack_arrow_table) splits each partition's
    table into batches of int(target / (nbytes / rows)) rows and packs batches first-fit into bins of
    `target` Arrow bytes; a partitioned table is first split per partition (filter, combine_chunks),
    which drops the per-file offsets and bitmaps, so its bytes per row are slightly lower than tbl's.
    Returns a target inside [r, r + 1) rows of every partition's table, as PyIceberg will see it."""
    if t.spec().is_unpartitioned():
        per_row = [tbl.nbytes / tbl.num_rows]
    else:
        from pyiceberg.io.pyarrow import _determine_partitions  # what append() does
        per_row = [p.arrow_table_partition.nbytes / p.arrow_table_partition.num_rows
                   for p in _determine_partitions(spec=t.spec(), schema=t.schema(), arrow_table=tbl)]
    lo, hi = max(r * x for x in per_row), min((r + 1) * x for x in per_row)
    if lo >= hi:
        log(f"WARNING: no file size target cuts every partition into files of {r} rows")
    return int((lo + hi) / 2)


def append_files(t, con, schema, files, seed, expected):
    """Appends `files` (all of r rows) in chunks, one file per r rows (see the module docstring)."""
    arrow_schema = t.schema().as_arrow()
    r = files[0]["r"]
    assert all(f["r"] == r for f in files)
    probe = gen_table(con, schema, arrow_schema, [dict(files[0], r=min(r, 2000))], seed)
    per_file = r * probe.nbytes / probe.num_rows  # in-memory Arrow bytes of one file (estimate)
    step = max(1, min(APPEND_MAX_FILES, int(APPEND_MAX_ARROW_BYTES / per_file)))
    i = appends = 0
    while i < len(files):
        chunk = files[i:i + step]
        tbl = gen_table(con, schema, arrow_schema, chunk, seed)
        target = target_for(t, tbl, r)
        with t.transaction() as tx:
            tx.set_properties({"write.target-file-size-bytes": str(target)})
            tx.append(tbl)
        accumulate(expected, tbl)
        i += len(chunk)
        appends += 1
    return appends


def accumulate(expected, tbl):
    """Adds tbl's rows and sum(amount), all and without the rows `id % 20 = 0` (the deleted ones)."""
    import pyarrow.compute as pc
    keep = pc.not_equal(pc.remainder(tbl["id"], 20), 0)
    kept = tbl.filter(keep)
    expected["rows"] += tbl.num_rows
    expected["sum"] += pc.sum(tbl["amount"]).as_py() or 0.0
    expected["rows_kept"] += kept.num_rows
    expected["sum_kept"] += pc.sum(kept["amount"]).as_py() or 0.0


def calibrate(a, schema):
    """(size, rows) points of PyIceberg Parquet files of this schema: 1, 2, 5, 10, ... rows up to ~25 MB."""
    path = os.path.join(a.dir, "calib", f"{schema}.json")
    if os.path.exists(path):
        c = json.load(open(path))
        if c.get("gen_version") == GEN_VERSION:
            return c["points"]
    import duckdb
    log(f"calibrating Parquet bytes per row for schema {schema}")
    wh = os.path.join(a.dir, "calib", f"{schema}-wh")
    shutil.rmtree(wh, ignore_errors=True)
    t = create_table(wh, schema, 1)
    con = duckdb.connect()
    points, r, step = [], 1, 0
    while r <= 4_000_000:
        tbl = gen_table(con, schema, t.schema().as_arrow(), [{"id0": 0, "r": r, "day": 0, "rot": 0}], 7)
        t.append(tbl)
        size = int(t.current_snapshot().summary["added-files-size"])
        points.append([size, r])
        if size > 25 * MB:
            break
        step += 1
        r = [1, 2, 5][step % 3] * 10 ** (step // 3)
    shutil.rmtree(wh, ignore_errors=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    json.dump({"gen_version": GEN_VERSION, "points": points}, open(path, "w"))
    log(f"  {schema}: " + ", ".join(f"{r} rows={s / 1000:.1f}KB" for s, r in points))
    return points


def rows_for(points, size):
    """Rows for a file of `size` bytes: piecewise linear in the calibration points."""
    sizes = [p[0] for p in points]
    i = bisect.bisect_left(sizes, size)
    if i == 0:
        return 1
    if i >= len(points):
        i = len(points) - 1
    (s0, r0), (s1, r1) = points[i - 1], points[i]
    return max(1, round(r0 + (size - s0) * (r1 - r0) / (s1 - s0)))


def plan_files(spec, scale, points, seed):
    """Files: dicts (class, level, size, r, day), shuffled, partitions round robin."""
    rng = random.Random(seed)
    parts = spec["parts"]
    n_scaled = max(1, round(spec["files"] * scale))
    n = max(n_scaled, spec.get("min_files_per_partition", MIN_FILES_PER_PARTITION) * parts)
    shrink = n_scaled / n  # keep the volume at `scale` when the per-partition floor adds files
    classes = []
    for frac, cls in spec["mix"]:
        classes += [cls] * max(1 if frac < 1 else 0, round(frac * n))
    classes = (classes + [spec["mix"][0][1]] * n)[:n]
    rng.shuffle(classes)
    files = []
    for i, cls in enumerate(classes):
        lo, hi = CLASSES[cls]
        level = rng.randrange(LEVELS)
        size = (lo + (hi - lo) * level / (LEVELS - 1)) * shrink
        day = i % parts if parts > 1 else i % 3
        files.append({"class": cls, "level": level, "size": size, "r": rows_for(points, size), "day": day,
                      "rot": rng.randrange(1 << 30)})
    return files


def quantiles(values):
    v = sorted(values)
    if not v:
        return {}
    q = lambda p: v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]  # noqa: E731
    return {"min": v[0], "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "max": v[-1],
            "mean": sum(v) / len(v)}


def size_buckets(sizes):
    edges = [(16 * KB, "<16KB"), (256 * KB, "16KB-256KB"), (4 * MB, "256KB-4MB"), (64 * MB, "4MB-64MB"),
             (float("inf"), ">=64MB")]
    out = {label: 0 for _, label in edges}
    for s in sizes:
        out[next(label for e, label in edges if s < e)] += 1
    return {k: v for k, v in out.items() if v}


def delta_type(t):
    from pyiceberg.types import DoubleType, ListType, LongType, StringType, StructType, TimestampType
    if isinstance(t, LongType):
        return "long"
    if isinstance(t, DoubleType):
        return "double"
    if isinstance(t, StringType):
        return "string"
    if isinstance(t, TimestampType):
        return "timestamp_ntz"
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [delta_field(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {"type": "array", "elementType": delta_type(t.element_type), "containsNull": not t.element_required}
    raise ValueError(t)


def delta_field(f):
    return {"name": f.name, "type": delta_type(f.field_type), "nullable": not f.required, "metadata": {}}


def build_delta(delta_dir, iceberg_schema_, data_files, partitioned):
    """A Delta table of the same Parquet files (hard links) and a hand-written first log entry."""
    os.makedirs(os.path.join(delta_dir, "_delta_log"))
    now = int(time.time() * 1000)
    fields = [delta_field(f) for f in iceberg_schema_.fields]
    if partitioned:
        fields.append({"name": "ts_day", "type": "date", "nullable": True, "metadata": {}})
    actions = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
                      "writerFeatures": ["timestampNtz"]}},
        {"metaData": {"id": "floe-compact-matrix", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}),
                      "partitionColumns": ["ts_day"] if partitioned else [], "configuration": {},
                      "createdTime": now}},
    ]
    for i, f in enumerate(data_files):
        sub = f"ts_day={f['day']}" if partitioned else ""
        name = os.path.join(sub, f"part-{i:06d}.parquet") if sub else f"part-{i:06d}.parquet"
        os.makedirs(os.path.join(delta_dir, sub), exist_ok=True)
        os.link(f["path"], os.path.join(delta_dir, name))
        actions.append({"add": {"path": name, "partitionValues": {"ts_day": f["day"]} if partitioned else {},
                                "size": f["size"], "modificationTime": now, "dataChange": True,
                                "stats": json.dumps({"numRecords": f["rows"]})}})
    with open(os.path.join(delta_dir, "_delta_log", "00000000000000000000.json"), "w") as out:
        for act in actions:
            out.write(json.dumps(act) + "\n")


def local(uri):
    from bench_util import local_path
    return local_path(uri)


def input_key(name, spec, a):
    return {"gen_version": GEN_VERSION, "cell": name, "scale": a.scale,
            "spec": {k: v for k, v in spec.items() if k != "desc"}}


def build_input(a, name, spec, paths, readers):
    """Builds the cell's Iceberg table (and Delta table) and their pristine copies; returns the
    input record. Reuses a previous build with the same key unless --rebuild."""
    import duckdb
    key = input_key(name, spec, a)
    rec_path = os.path.join(paths["cell"], "input.json")
    if not a.rebuild and os.path.exists(rec_path) and os.path.isdir(paths["ice_p"]):
        rec = json.load(open(rec_path))
        if rec.get("key") == key and (rec["delta"] is None or os.path.isdir(paths["delta_p"])):
            log(f"{name}: reusing the input built {rec['built_at']}")
            return rec
    shutil.rmtree(paths["cell"], ignore_errors=True)
    os.makedirs(paths["cell"])
    t0 = time.perf_counter()
    seed = sum(name.encode()) * 7919 + 1
    points = calibrate(a, spec["schema"])
    files = plan_files(spec, a.scale, points, seed)
    wh = paths["ice_w"]
    t = create_table(wh, spec["schema"], spec["parts"])
    con = duckdb.connect()
    expected = {"rows": 0, "sum": 0.0, "rows_kept": 0, "sum_kept": 0.0}
    levels = {}
    for f in files:
        levels.setdefault(f["r"], []).append(f)
    id0 = 0
    appends = 0
    for r in sorted(levels):
        group = sorted(levels[r], key=lambda f: f["day"])
        for f in group:
            f["id0"] = id0
            id0 += r
        appends += append_files(t, con, spec["schema"], group, seed, expected)
    t = catalog(wh).load_table(TABLE)
    with t.transaction() as tx:
        tx.remove_properties("write.target-file-size-bytes")
    log(f"{name}: appended {len(files)} planned files, {expected['rows']:,} rows in {time.perf_counter() - t0:.1f} s")

    deletes = spec.get("deletes")
    if deletes == "pos":
        out = floe_json(a, wh, "delete", TABLE, "--where", "id % 20 = 0")
        log(f"{name}: floe delete: {out.get('rows_deleted')} rows, {out.get('position_delete_files')} position delete files")
    elif deletes == "eq":
        wait_for(a.floe_bench)
        r = sh([a.floe_bench, "equality-deletes", "--warehouse", wh, "--table", TABLE, "--column", "id",
                "--modulo", "20"], check=False)
        if r.returncode != 0:
            msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise CellFailed(f"`floe-bench equality-deletes` failed (not in {a.floe_bench} yet? rebuild floe-bench): "
                             f"{' / '.join(msg[:3])}")
        log(f"{name}: floe-bench equality-deletes: {r.stdout.strip()[:300]}")

    t = catalog(wh).load_table(TABLE)
    if t.metadata.properties.get("write.target-file-size-bytes"):
        raise CellFailed("write.target-file-size-bytes is still set")
    listing = t.inspect.files().select(["content", "file_path", "file_size_in_bytes", "record_count",
                                        "partition"]).to_pylist()
    data = [x for x in listing if x["content"] == 0]
    dels = [x for x in listing if x["content"] != 0]
    partitioned = spec["parts"] > 1
    dfiles = [{"path": local(x["file_path"]), "size": x["file_size_in_bytes"], "rows": x["record_count"],
               "day": str(x["partition"]["ts_day"]) if partitioned else None} for x in data]
    sizes = [x["size"] for x in dfiles]
    exp = {"rows": expected["rows"], "sum": expected["sum"]} if not deletes else \
        {"rows": expected["rows_kept"], "sum": expected["sum_kept"]}
    rec = {
        "key": key, "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "desc": spec["desc"],
        "schema": SCHEMA_TEXT[spec["schema"]], "partitioning": "day(ts)" if partitioned else "none",
        "files": len(data), "planned_files": len(files), "bytes": sum(sizes), "rows": sum(x["rows"] for x in dfiles),
        "partitions": len({x["day"] for x in dfiles}) if partitioned else 1,
        "delete_files": len(dels), "delete_bytes": sum(x["file_size_in_bytes"] for x in dels),
        "delete_rows": sum(x["record_count"] for x in dels), "deletes": deletes,
        "appends": appends, "file_size": quantiles(sizes), "file_size_buckets": size_buckets(sizes),
        "rows_per_file": quantiles([x["rows"] for x in dfiles]),
        "files_per_partition": quantiles(list(_count_by(dfiles, "day").values())) if partitioned else None,
        "planned_size_by_class": {c: quantiles([f["size"] for f in files if f["class"] == c])
                                  for c in sorted({f["class"] for f in files})},
        "expected": exp, "input_rows": expected["rows"], "input_sum": expected["sum"],
        "build_s": None, "delta": None,
    }
    if rec["rows"] != expected["rows"]:
        raise CellFailed(f"input has {rec['rows']} rows, generated {expected['rows']}")
    if len(data) != len(files):
        log(f"WARNING {name}: PyIceberg wrote {len(data)} data files, {len(files)} planned")
    # the input as the checks will read it. Equality deletes: floe sql for the runs. Reading the
    # input through its equality deletes takes time ~ rows x delete rows in DuckDB 1.5.5 (4 s at
    # 171k x 8.6k) and in floe (floe sql: 12.5 min at scale 1, 3.4M x 170k), so at scale the input
    # is checked directly instead: the delete file holds exactly the ids id % 20 = 0.
    rec["reader"] = "floe sql" if deletes == "eq" else "duckdb iceberg_scan"
    if deletes == "eq":
        paths_del = [local(x["file_path"]) for x in dels]
        q = ", ".join("'" + x.replace("'", "''") + "'" for x in paths_del)
        n, d, bad = readers.con().execute(
            f"SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE id % 20 != 0) FROM read_parquet([{q}])").fetchone()
        want = expected["rows"] - expected["rows_kept"]
        if (n, d, bad) != (want, want, 0) or len(dels) != 1:
            raise CellFailed(f"equality delete input: {len(dels)} files, {n} rows, {d} distinct ids, {bad} with "
                             f"id % 20 != 0; expected 1 file of {want} ids")
        if rec["rows"] * rec["delete_rows"] <= 2e9:  # small inputs: read through the deletes too
            check(readers.iceberg_floe(wh), exp, f"{name} input")
            rec["duckdb_reads_equality_deletes"] = readers.iceberg_duckdb(wh)["rows"] == exp["rows"]
        else:
            rec["duckdb_reads_equality_deletes"] = "not tried (slow: rows x delete rows > 2e9)"
    else:
        check(readers.iceberg_duckdb(wh), exp, f"{name} input")
    if not deletes:
        build_delta(paths["delta_w"], t.schema(), dfiles, partitioned)
        check(Readers.delta(paths["delta_w"]), exp, f"{name} delta input")
        rec["delta"] = {"files": len(dfiles), "partition_column": "ts_day" if partitioned else None}
        sh(["cp", "-al", paths["delta_w"], paths["delta_p"]])
        copy_real(paths["delta_w"], paths["delta_p"], "_delta_log")
    sh(["cp", "-al", wh, paths["ice_p"]])
    copy_real(wh, paths["ice_p"], None)
    rec["build_s"] = time.perf_counter() - t0
    json.dump(rec, open(rec_path, "w"), indent=1)
    fs = rec["file_size"]
    log(f"{name}: input {rec['files']} data files ({rec['partitions']} partitions, {rec['appends']} appends), "
        f"{rec['bytes'] / MIB:.1f} MiB, {rec['rows']:,} rows, {rec['delete_files']} delete files; file size "
        f"min {fs['min'] / 1000:.1f} KB p50 {fs['p50'] / 1000:.1f} KB max {fs['max'] / 1000:.1f} KB; "
        f"built in {rec['build_s']:.1f} s")
    return rec


def _count_by(items, key):
    out = {}
    for x in items:
        out[x[key]] = out.get(x[key], 0) + 1
    return out


def copy_real(src, dst, sub):
    """Replaces the hard links of files written in place by real copies: catalog.db* (SQLite) in an
    Iceberg warehouse, the whole _delta_log of a Delta table."""
    if sub is None:
        for n in os.listdir(src):
            if n.startswith("catalog.db"):
                sh(["cp", "--remove-destination", os.path.join(src, n), os.path.join(dst, n)])
    else:
        shutil.rmtree(os.path.join(dst, sub))
        shutil.copytree(os.path.join(src, sub), os.path.join(dst, sub))


def restore(pristine, work, sub):
    shutil.rmtree(work, ignore_errors=True)
    sh(["cp", "-al", pristine, work])
    copy_real(pristine, work, sub)


def tree_state(path):
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            st = os.stat(p)
            out[os.path.relpath(p, path)] = (st.st_size, st.st_mtime_ns)
    return out


# ---------------------------------------------------------------------------------------------
# runs

def run_tool(a, tool, paths, rec, readers):
    timeout = a.timeout
    if tool == "floe":
        restore(paths["ice_p"], paths["ice_w"], None)
        wait_for(a.floe)
        m, out = run_measured([a.floe, "--warehouse", paths["ice_w"], "--json", "compact", TABLE,
                               "--target-file-size", TARGET], timeout=timeout)
        j = json.loads(out)
        m["inproc_s"] = j.get("duration_ms", 0) / 1000.0
        m["tool"] = {k: j.get(k) for k in ("live_files_before", "live_files_after", "rewritten_files", "added_files",
                                           "rewritten_bytes", "added_bytes", "removed_delete_files",
                                           "removed_dangling_deletes", "commits")}
        m["tool"]["commits"] = len(j.get("commits") or [])
        got = readers.iceberg_floe(paths["ice_w"]) if rec["reader"] == "floe sql" else readers.iceberg_duckdb(paths["ice_w"])
    elif tool == "delta":
        restore(paths["delta_p"], paths["delta_w"], "_delta_log")
        m, out = run_measured([sys.executable, "-c", DELTA_CODE, paths["delta_w"]], timeout=timeout)
        j = json.loads(out.strip().splitlines()[-1])
        m["inproc_s"], m["open_s"] = j["inproc_s"], j["open_s"]
        mm = j.get("metrics") or {}
        m["tool"] = {k: mm.get(k) for k in ("numFilesAdded", "numFilesRemoved", "numBatches", "totalConsideredFiles",
                                            "totalFilesSkipped")}
        got = Readers.delta(paths["delta_w"])
    else:
        restore(paths["ice_p"], paths["ice_w"], None)
        m, out = run_measured([sys.executable, "-c", PYICEBERG_CODE, paths["ice_w"], CATALOG_NAME, TABLE],
                              timeout=timeout)
        j = json.loads(out.strip().splitlines()[-1])
        m["inproc_s"] = j["inproc_s"]
        m["tool"] = {k: j[k] for k in ("open_s", "scan_s", "write_s", "rows")}
        got = readers.iceberg_duckdb(paths["ice_w"])
    check(got, rec["expected"], tool)
    m["check"] = got
    m["files_after"] = got["data_files"]
    m["delete_files_after"] = got["delete_files"]
    m["busy_cores"] = m["cpu_s"] / m["wall_s"] if m["wall_s"] else None
    return m


def summarize(runs, mib):
    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    wall, cpu = med("wall_s"), med("cpu_s")
    return {"runs": len(runs), "wall_median_s": wall, "wall_min_s": min(r["wall_s"] for r in runs),
            "wall_max_s": max(r["wall_s"] for r in runs),
            "inproc_median_s": med("inproc_s") if all(r.get("inproc_s") is not None for r in runs) else None,
            "cpu_median_s": cpu, "busy_cores_median": med("busy_cores"),
            "mib_per_s": mib / wall if wall else None, "mib_per_s_per_busy_core": mib / cpu if cpu else None,
            "peak_rss_median_mib": med("max_rss_mib"), "files_after": runs[-1]["files_after"],
            "delete_files_after": runs[-1]["delete_files_after"]}


def run_cell(a, name, spec, readers):
    cell_dir = os.path.join(a.dir, name)
    paths = {"cell": cell_dir, "ice_w": os.path.join(cell_dir, "iceberg"),
             "ice_p": os.path.join(cell_dir, "iceberg.pristine"), "delta_w": os.path.join(cell_dir, "delta"),
             "delta_p": os.path.join(cell_dir, "delta.pristine")}
    result = {"cell": name, "desc": spec["desc"], "scale": a.scale, "status": "running"}
    try:
        rec = build_input(a, name, spec, paths, readers)
        result["input"] = {k: v for k, v in rec.items() if k != "key"}
        mib = rec["bytes"] / MIB
        na = {}
        if rec["deletes"]:
            na["delta"] = NA_DELTA_DELETES
        if rec["deletes"] == "eq":
            na["pyiceberg"] = NA_PYICEBERG_EQ
        need = PYICEBERG_RSS_PER_INPUT_BYTE * rec["bytes"]
        if "pyiceberg" in a.tools and "pyiceberg" not in na and need > 0.8 * mem_available() and not a.force:
            na["pyiceberg"] = (f"skipped: the read-all-and-overwrite needs ~{need / 2**30:.0f} GiB "
                               f"(~{PYICEBERG_RSS_PER_INPUT_BYTE}x the input), {mem_available() / 2**30:.0f} GiB "
                               "available (--force runs it)")
            log(f"{name}: pyiceberg {na['pyiceberg']}")
        tools = [t for t in a.tools if t not in na]
        state = {"ice": tree_state(paths["ice_p"])}
        if "delta" in tools:
            state["delta"] = tree_state(paths["delta_p"])
        runs = {t: [] for t in tools}
        for i in range(a.runs):
            for tool in tools:
                m = run_tool(a, tool, paths, rec, readers)
                runs[tool].append(m)
                log(f"{name} run {i + 1}/{a.runs} {tool}: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} s cpu, "
                    f"in-process {m['inproc_s']:.2f} s, {m['max_rss_mib']:.0f} MiB, files {rec['files']} -> "
                    f"{m['files_after']} (+{m['delete_files_after']} delete), check ok")
        if tree_state(paths["ice_p"]) != state["ice"] or \
                ("delta" in state and tree_state(paths["delta_p"]) != state["delta"]):
            raise CellFailed("a pristine copy changed during the runs (a file was written in place)")
        result["tools"] = {}
        for tool in TOOLS:
            if tool in na:
                result["tools"][tool] = {"status": na[tool]}
            elif tool in runs:
                result["tools"][tool] = {"status": "ok", "summary": summarize(runs[tool], mib),
                                         "files_before": rec["files"], "runs": runs[tool]}
        t = result["tools"]
        fw = t.get("floe", {}).get("summary", {}).get("wall_median_s")
        ratios = {}
        if fw:
            for tool, key in (("delta", "delta_wall_over_floe_wall"), ("pyiceberg", "pyiceberg_wall_over_floe_wall")):
                s = t.get(tool, {}).get("summary")
                if s:
                    ratios[key] = s["wall_median_s"] / fw
            s = t.get("delta", {}).get("summary")
            if s and s["inproc_median_s"]:
                ratios["delta_inproc_over_floe_wall"] = s["inproc_median_s"] / fw
        result["ratios"] = ratios
        result["status"] = "ok"
    except (CellFailed, subprocess.TimeoutExpired) as e:
        result["status"] = f"FAILED: {e}"
        log(f"!!! {name} FAILED: {e}")
    except Exception as e:  # noqa: BLE001 -- a bug or an unexpected tool error: fail this cell, go on
        import traceback
        traceback.print_exc()
        result["status"] = f"FAILED: {type(e).__name__}: {str(e)[:1000]}"
        log(f"!!! {name} FAILED: {type(e).__name__}: {e}")
    return result


# ---------------------------------------------------------------------------------------------
# report

def f_s(v):
    return "-" if v is None else (f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}")


def f_x(v):
    return "-" if v is None else f"{v:.2f}x"


def markdown(doc):
    order = {n: i for i, n in enumerate(CELLS)}
    cells = dict(sorted(doc["cells"].items(), key=lambda kv: order.get(kv[0], len(order))))
    out = ["| cell | files | input MiB | floe s | delta-rs s | PyIceberg s | delta/floe | PyIceberg/floe | "
           "floe MiB/s per busy core | floe peak RSS | delta-rs peak RSS | PyIceberg peak RSS |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def tool(c, k):
        return c.get("tools", {}).get(k, {})

    for name, c in cells.items():
        inp = c.get("input") or {}
        if c["status"] != "ok":
            out.append(f"| {name} | {inp.get('files', '-')} | - | {c['status'][:80]} | | | | | | | | |")
            continue
        files = f"{inp['files']:,}" + (f" (+{inp['delete_files']} del)" if inp.get("delete_files") else "")
        row = [name, files, f"{inp['bytes'] / MIB:.1f}"]
        for k in TOOLS:
            s = tool(c, k).get("summary")
            row.append(f_s(s["wall_median_s"]) if s else tool(c, k).get("status", "-").split(":")[0])
        r = c.get("ratios", {})
        row += [f_x(r.get("delta_wall_over_floe_wall")), f_x(r.get("pyiceberg_wall_over_floe_wall"))]
        s = tool(c, "floe").get("summary")
        row.append(f"{s['mib_per_s_per_busy_core']:.1f}" if s else "-")
        for k in TOOLS:
            s = tool(c, k).get("summary")
            row.append(f"{s['peak_rss_median_mib']:.0f} MiB" if s else "-")
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("Per tool (medians over runs; MiB/s over wall and per CPU second; files before -> after):")
    out.append("")
    out.append("| cell | tool | runs | wall s (min-max) | in-process s | CPU s | busy cores | MiB/s | "
               "MiB/s per busy core | peak RSS | files |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, c in cells.items():
        if c["status"] != "ok":
            continue
        for k in TOOLS:
            t = tool(c, k)
            s = t.get("summary")
            if not s:
                if t.get("status"):
                    out.append(f"| {name} | {k} | {t['status']} | | | | | | | | |")
                continue
            out.append(f"| {name} | {k} | {s['runs']} | {f_s(s['wall_median_s'])} ({f_s(s['wall_min_s'])}-"
                       f"{f_s(s['wall_max_s'])}) | {f_s(s['inproc_median_s'])} | {f_s(s['cpu_median_s'])} | "
                       f"{s['busy_cores_median']:.2f} | {s['mib_per_s']:.1f} | {s['mib_per_s_per_busy_core']:.1f} | "
                       f"{s['peak_rss_median_mib']:.0f} MiB | {t['files_before']:,} -> {s['files_after']:,}"
                       + (f" (+{s['delete_files_after']} del)" if s["delete_files_after"] else "") + " |")
    out.append("")
    out.append("Cells (input shapes as measured):")
    out.append("")
    for name, c in cells.items():
        inp = c.get("input")
        if not inp:
            out.append(f"- `{name}`: {c.get('desc')} — {c['status']}")
            continue
        fs = inp["file_size"]
        r = c.get("ratios", {})
        extra = f"; delta in-process/floe wall {f_x(r['delta_inproc_over_floe_wall'])}" \
            if r.get("delta_inproc_over_floe_wall") else ""
        out.append(f"- `{name}`: {inp['desc']}. Measured: {inp['files']:,} files, {inp['partitions']} partition(s), "
                   f"{inp['rows']:,} rows, {inp['bytes'] / MIB:.1f} MiB, file size p10/p50/p90 "
                   f"{fs['p10'] / 1000:,.1f}/{fs['p50'] / 1000:,.1f}/{fs['p90'] / 1000:,.1f} KB "
                   f"(min {fs['min'] / 1000:,.1f}, max {fs['max'] / 1000:,.1f})"
                   + (f", {inp['delete_files']} delete files ({inp['delete_rows']:,} delete rows)" if inp["delete_files"] else "")
                   + extra + ".")
    return "\n".join(out)


def versions(a):
    import deltalake
    import duckdb
    import pyarrow
    import pyiceberg
    v = {"deltalake": deltalake.__version__, "pyiceberg": pyiceberg.__version__, "pyarrow": pyarrow.__version__,
         "duckdb": duckdb.__version__, "python": sys.version.split()[0]}
    try:
        v["floe"] = subprocess.run([a.floe, "--version"], capture_output=True, text=True).stdout.strip()
        v["floe_binary_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(a.floe)))
        v["git_head"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True).stdout.strip()
    except OSError:
        pass
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="cells: " + ", ".join(
        f"{k}{' (opt-in)' if s.get('opt_in') else ''}" for k, s in CELLS.items()) + "; aliases: " +
        ", ".join(f"{k}={v}" for k, v in ALIASES.items()))
    ap.add_argument("--cells", help="comma-separated cell names (default: all but large-2gb)")
    ap.add_argument("--all", action="store_true", help="every cell, including large-2gb")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the data volume (e.g. 0.05 for a smoke test)")
    ap.add_argument("--dir", default="/var/tmp/compact-matrix", help="work directory (inputs are cached there)")
    ap.add_argument("--floe", default="/var/tmp/floe-target/release/floe")
    ap.add_argument("--floe-bench", default="/var/tmp/floe-target/release/floe-bench")
    ap.add_argument("--out", default=os.path.join(ROOT, "crates", "floe-bench", "results", "compact_matrix.json"))
    ap.add_argument("--merge", action="store_true", help="keep the other cells already in --out")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--rebuild", action="store_true", help="rebuild inputs even if a cached one matches")
    ap.add_argument("--keep", action="store_true", help="keep each cell's work directory after its runs")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per tool run")
    ap.add_argument("--force", action="store_true",
                    help="run PyIceberg even when its in-memory rewrite may not fit in RAM (large-2gb)")
    ap.add_argument("--print", metavar="FILE", help="print the Markdown of a saved JSON and exit")
    a = ap.parse_args()
    if a.print:
        print(markdown(json.load(open(a.print))))
        return
    a.dir = os.path.abspath(a.dir)
    a.floe, a.floe_bench = os.path.abspath(a.floe), os.path.abspath(a.floe_bench)
    a.tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    bad = [t for t in a.tools if t not in TOOLS]
    if bad:
        ap.error(f"unknown tools {bad}: choose from {TOOLS}")
    names = list(CELLS) if a.all else DEFAULT_CELLS
    if a.cells:
        names = []
        for n in a.cells.split(","):
            n = ALIASES.get(n.strip(), n.strip())
            if n not in CELLS:
                ap.error(f"unknown cell {n!r}: choose from {', '.join(list(CELLS) + list(ALIASES))}")
            if n not in names:
                names.append(n)
    if not os.path.exists("/usr/bin/time"):
        sys.exit("GNU time is needed (/usr/bin/time): apt-get install -y time")
    os.makedirs(a.dir, exist_ok=True)
    doc = {"benchmark": "compact-matrix", "started": time.strftime("%Y-%m-%d %H:%M:%S"),
           "host": {"cpus": os.cpu_count(), "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
           "versions": versions(a), "target_file_size": TARGET,
           "args": {"cells": names, "runs": a.runs, "scale": a.scale, "tools": a.tools, "dir": a.dir},
           "cells": {}}
    if a.merge and os.path.exists(a.out):
        old = json.load(open(a.out))
        doc["cells"] = {k: v for k, v in old.get("cells", {}).items() if k not in names}
    readers = Readers(a)
    log(f"cells {', '.join(names)}; runs {a.runs}; scale {a.scale}; tools {', '.join(a.tools)}; dir {a.dir}")
    t0 = time.perf_counter()
    failed = []
    for name in names:
        log(f"=== {name}: {CELLS[name]['desc']}")
        c0 = time.perf_counter()
        res = run_cell(a, name, CELLS[name], readers)
        res["cell_s"] = time.perf_counter() - c0
        doc["cells"][name] = res
        if res["status"] != "ok":
            failed.append(name)
        if not a.keep:
            for sub in ("iceberg", "delta"):
                shutil.rmtree(os.path.join(a.dir, name, sub), ignore_errors=True)
        doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, default=str)
        os.replace(a.out + ".tmp", a.out)
        log(f"=== {name}: {res['status']} in {res['cell_s']:.0f} s")
    log(f"done in {time.perf_counter() - t0:.0f} s; results in {a.out}")
    print()
    print(markdown(doc))
    if failed:
        log(f"FAILED cells: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
