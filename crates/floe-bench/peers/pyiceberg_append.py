"""PyIceberg side of floe-bench's append-commit-latency benchmark.

Loads an existing table (schema ``id long, ts timestamp, name string, amount double``,
possibly written by another tool with many prior snapshots) from a SQL catalog and times
K small ``table.append`` commits with ``time.perf_counter()``. Prints one JSON object:
``{"tool": "pyiceberg", "appends": K, "seconds": [...], "median_s": ..., "snapshots_before": ...}``.
"""
import argparse
import datetime as dt
import json
import os
import statistics
import time

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog


def sqlalchemy_uri(uri: str) -> str:
    """Accept SQLAlchemy URIs plus floe-style ones (sqlite:///abs/x.db, postgres://...)."""
    if "://" not in uri:
        return "sqlite:///" + os.path.abspath(uri)
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:////" + uri[len("sqlite:///"):]
    for prefix in ("postgres://", "postgresql://"):
        if uri.startswith(prefix):
            return "postgresql+psycopg2://" + uri[len(prefix):]
    return uri


def rows(schema: pa.Schema, start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    t0 = dt.datetime(2026, 1, 1)
    return pa.Table.from_pydict(
        {
            "id": list(ids),
            "ts": [t0 + dt.timedelta(seconds=i) for i in ids],
            "name": [f"name-{i % 7}" for i in ids],
            "amount": [i * 0.5 for i in ids],
        },
        schema=schema,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True, help="SQLAlchemy or floe-style catalog URI")
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True, help="path or file:// URI")
    p.add_argument("--table", required=True, help="NS.T, must exist")
    p.add_argument("--appends", type=int, default=5)
    p.add_argument("--rows-per-append", type=int, default=10)
    args = p.parse_args()

    warehouse = args.warehouse if "://" in args.warehouse else "file://" + os.path.abspath(args.warehouse)
    catalog = SqlCatalog(args.catalog_name, uri=sqlalchemy_uri(args.catalog_uri), warehouse=warehouse)
    table = catalog.load_table(args.table)
    snapshots_before = len(table.metadata.snapshots)
    schema = table.schema().as_arrow()  # field types and nullability as the table has them
    base = 1_000_000_000 + snapshots_before * args.rows_per_append
    seconds = []
    for k in range(args.appends):
        df = rows(schema, base + k * args.rows_per_append, args.rows_per_append)
        t = time.perf_counter()
        table.append(df)  # commits and refreshes `table`
        seconds.append(time.perf_counter() - t)
    print(json.dumps({
        "tool": "pyiceberg",
        "appends": args.appends,
        "seconds": seconds,
        "median_s": statistics.median(seconds) if seconds else None,
        "snapshots_before": snapshots_before,
    }))


if __name__ == "__main__":
    main()
