"""Create an Iceberg table in a REST catalog on S3 with PyIceberg and append rows to it.

The REST twin of pyiceberg_write.py (same schema, rows and partitioning), so floe can be
tested against tables another engine wrote through a REST catalog: ``id long required,
ts timestamp, name string, amount double``, optionally partitioned by ``day(ts)``. The
namespace is created if missing. Connection flags as in read_rest.py (default: the
variables .ci/setup exports). Prints ``{"rows", "sum_id", "metadata_location",
"snapshot_id"}`` as JSON; exits 1 with a one-line message on stderr on error.
"""
import argparse
import json
import sys
from pathlib import Path

from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import DayTransform

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pyiceberg_write import SCHEMA, batch  # noqa: E402
from read_rest import add_rest_args, check_rest_args, open_rest_catalog  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rest_args(p)
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--partition", choices=["day", "none"], default="day")
    p.add_argument("--replace", action="store_true",
                   help="drop NS.T first if it exists (SeaweedFS deletes its files too)")
    p.add_argument(
        "--snapshot-property",
        action="append",
        default=[],
        metavar="K=V",
        help="summary property of every append (e.g. flink.job-id=J), as a streaming writer sets",
    )
    args = p.parse_args()
    check_rest_args(p, args)
    props = dict(kv.split("=", 1) for kv in args.snapshot_property)

    catalog = open_rest_catalog(args)
    ns = args.table.rsplit(".", 1)[0]
    try:
        catalog.create_namespace(ns)
    except NamespaceAlreadyExistsError:
        pass
    if args.replace:
        try:
            catalog.purge_table(args.table)
        except NoSuchTableError:
            pass
    elif catalog.table_exists(args.table):
        # SeaweedFS answers a CreateTable of an existing name with that table (200), not 409
        raise TableAlreadyExistsError(f"table {args.table} already exists (use --replace)")
    spec = PartitionSpec()
    if args.partition == "day":
        spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    table = catalog.create_table(args.table, schema=SCHEMA, partition_spec=spec)

    arrow_schema = table.schema().as_arrow()
    nb = max(args.batches, 1)
    bounds = [args.rows * k // nb for k in range(nb + 1)]
    for lo, hi in zip(bounds, bounds[1:]):
        if hi > lo:
            table.append(batch(range(lo, hi), args.rows, arrow_schema), snapshot_properties=props)
    snapshot = table.current_snapshot()
    print(json.dumps({
        "rows": args.rows,
        "sum_id": args.rows * (args.rows - 1) // 2,
        "metadata_location": table.metadata_location,
        "snapshot_id": snapshot.snapshot_id if snapshot else None,
    }))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line on stderr, as the callers expect
        msg = (str(e).strip().splitlines() or [""])[0]
        print(f"rest_write.py: {type(e).__name__}: {msg}", file=sys.stderr)
        sys.exit(1)
