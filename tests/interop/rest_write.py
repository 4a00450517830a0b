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

from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pyiceberg_write import add_fill_args, create_and_fill, ensure_namespace  # noqa: E402
from read_rest import add_rest_args, check_rest_args, open_rest_catalog  # noqa: E402
from read_table import run_cli  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rest_args(p)
    add_fill_args(p)
    p.add_argument("--replace", action="store_true",
                   help="drop NS.T first if it exists (SeaweedFS deletes its files too)")
    args = p.parse_args()
    check_rest_args(p, args)
    catalog = open_rest_catalog(args)
    ensure_namespace(catalog, args.table)
    if args.replace:
        try:
            catalog.purge_table(args.table)
        except NoSuchTableError:
            pass
    elif catalog.table_exists(args.table):
        # SeaweedFS answers a CreateTable of an existing name with that table (200), not 409
        raise TableAlreadyExistsError(f"table {args.table} already exists (use --replace)")
    print(json.dumps(create_and_fill(catalog, args)))


if __name__ == "__main__":
    run_cli(main, "rest_write.py")
