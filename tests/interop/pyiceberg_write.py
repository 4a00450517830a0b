"""Create an Iceberg table with PyIceberg (SqlCatalog) and append rows to it.

Lets floe be tested against tables written by another engine. Schema:
``id long required, ts timestamp, name string, amount double``, optionally
partitioned by ``day(ts)``. Prints ``{"rows", "sum_id", "metadata_location"}`` as JSON.
"""
import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import pyarrow as pa
from pyiceberg.exceptions import NamespaceAlreadyExistsError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from read_table import open_catalog  # noqa: E402

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestampType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
)
START = dt.datetime(2026, 1, 1)
SPAN_S = 3 * 24 * 3600  # ts spread over 3 days


def batch(ids: range, n_total: int, schema: pa.Schema) -> pa.Table:
    """Rows `ids` of `n_total`; ts grows with id so the rows cover 3 days."""
    return pa.Table.from_pydict(
        {
            "id": list(ids),
            "ts": [START + dt.timedelta(seconds=i * SPAN_S // max(n_total, 1)) for i in ids],
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
    add_fill_args(p)
    args = p.parse_args()
    catalog = open_catalog(args.catalog_uri, args.catalog_name, args.warehouse)
    ensure_namespace(catalog, args.table)
    print(json.dumps(create_and_fill(catalog, args)))


def add_fill_args(p: argparse.ArgumentParser) -> None:
    """--table, --rows, --batches, --partition, --snapshot-property, --evolve-after (read by
    create_and_fill)."""
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--partition", choices=["day", "none"], default="day")
    p.add_argument(
        "--snapshot-property",
        action="append",
        default=[],
        metavar="K=V",
        help="summary property of every append (e.g. flink.job-id=J), as a streaming writer sets",
    )
    p.add_argument(
        "--evolve-after",
        type=int,
        default=None,
        metavar="K",
        help="after K appends, evolve the partition spec (add identity(name)); later appends use it",
    )


def ensure_namespace(catalog, table: str) -> None:
    try:
        catalog.create_namespace(table.rsplit(".", 1)[0])
    except NamespaceAlreadyExistsError:
        pass


def create_and_fill(catalog, args: argparse.Namespace) -> dict:
    """Creates args.table (day(ts) when args.partition is "day") and appends args.rows rows in
    args.batches commits, each with the --snapshot-property summary properties; returns what
    main prints."""
    props = dict(kv.split("=", 1) for kv in args.snapshot_property)
    spec = PartitionSpec()
    if args.partition == "day":
        spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    table = catalog.create_table(args.table, schema=SCHEMA, partition_spec=spec)
    arrow_schema = table.schema().as_arrow()
    nb = max(args.batches, 1)
    bounds = [args.rows * k // nb for k in range(nb + 1)]
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        if k == getattr(args, "evolve_after", None):
            with table.update_spec() as update:
                update.add_identity("name")
        if hi > lo:
            table.append(batch(range(lo, hi), args.rows, arrow_schema), snapshot_properties=props)
    snapshot = table.current_snapshot()
    return {
        "rows": args.rows,
        "sum_id": args.rows * (args.rows - 1) // 2,
        "metadata_location": table.metadata_location,
        "snapshot_id": snapshot.snapshot_id if snapshot else None,
    }


if __name__ == "__main__":
    main()
