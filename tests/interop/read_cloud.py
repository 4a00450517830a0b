"""Independent reader for an Iceberg table on GCS or Azure: PyIceberg.

Loads NS.T with PyIceberg's SqlCatalog, passing the FileIO properties given with --prop
(`gcs.service.host`, `gcs.oauth2.token`, `adls.connection-string`, ...), reads the current
snapshot and prints one JSON object:

  {"metadata_location": ..., "pyiceberg": {"rows", "sum", "files", "checksum"}}

Fields as in read_table.py. PyIceberg reads gs:// through pyarrow's GcsFileSystem and
abfss:// / wasbs:// through fsspec's adlfs. Exits 1 with a one-line message on stderr if the
table cannot be read.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from read_table import run_cli, sqlalchemy_uri, summarize  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True, help="SQLAlchemy or floe-style catalog URI")
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True, help="gs://bucket/prefix or abfss://c@a.dfs.../prefix")
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--sum-column")
    p.add_argument("--prop", action="append", default=[], help="FileIO property KEY=VALUE")
    args = p.parse_args()

    from pyiceberg.catalog.sql import SqlCatalog

    props = dict(kv.split("=", 1) for kv in args.prop)
    catalog = SqlCatalog(args.catalog_name, uri=sqlalchemy_uri(args.catalog_uri),
                         warehouse=args.warehouse, **props)
    table = catalog.load_table(args.table)
    columns = [f.name for f in table.schema().fields]
    files = sum(1 for _ in table.scan().plan_files())
    py = summarize(table.scan().to_arrow(), columns, args.sum_column, files)
    print(json.dumps({"metadata_location": table.metadata_location, "pyiceberg": py}))


if __name__ == "__main__":
    run_cli(main, "read_cloud.py")
