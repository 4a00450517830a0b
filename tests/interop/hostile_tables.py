"""Tables another engine may leave in a shared catalog, for floe's delete-fence tests.

``create-at``: a table at an explicit ``--location`` (the warehouse root, a directory that holds
other tables, a path with ``..``), filled with one batch. ``add-external``: a Parquet file
written at ``--file`` (outside the table location) and added to the table with ``add_files``.
Both print ``{"metadata_location", "rows"}`` as JSON.
"""
import argparse
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pyiceberg_write import SCHEMA, batch, ensure_namespace  # noqa: E402
from read_table import open_catalog  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True)
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create-at")
    c.add_argument("--table", required=True)
    c.add_argument("--location", required=True)
    c.add_argument("--rows", type=int, default=10)
    a = sub.add_parser("add-external")
    a.add_argument("--table", required=True)
    a.add_argument("--file", required=True)
    a.add_argument("--first-id", type=int, default=1_000_000)
    a.add_argument("--rows", type=int, default=10)
    args = p.parse_args()
    catalog = open_catalog(args.catalog_uri, args.catalog_name, args.warehouse)
    if args.cmd == "create-at":
        ensure_namespace(catalog, args.table)
        table = catalog.create_table(args.table, schema=SCHEMA, location=args.location)
        table.append(batch(range(args.rows), args.rows, table.schema().as_arrow()))
        table = catalog.load_table(args.table)
        print(json.dumps({"metadata_location": table.metadata_location, "rows": args.rows}))
    else:
        table = catalog.load_table(args.table)
        ids = range(args.first_id, args.first_id + args.rows)
        data = batch(ids, args.rows, table.schema().as_arrow())
        Path(args.file).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, args.file)
        table.add_files([args.file])
        table = catalog.load_table(args.table)
        print(json.dumps({"metadata_location": table.metadata_location, "rows": args.rows}))


if __name__ == "__main__":
    main()
