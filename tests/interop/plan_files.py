"""Independent scan planning: how many data files PyIceberg selects for each row filter.

Loads NS.T (SqlCatalog) and prints one JSON object:

  {"files": N, "selected": {FILTER: n}, "rows": {FILTER: m}}

`files` is the number of live data files, `selected[FILTER]` the number PyIceberg's
`plan_files()` keeps for that filter (manifest and column-bound pruning), and `rows[FILTER]`
the rows it reads that match (`scan(row_filter).to_arrow()`). Filters use PyIceberg's
expression syntax ("x < 32", "y >= 'user_00100'"). Exits 1 with a one-line message on stderr
if the table cannot be read.
"""
import argparse
import json

from read_table import open_catalog, run_cli


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True)
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--filter", action="append", default=[])
    args = p.parse_args()

    table = open_catalog(args.catalog_uri, args.catalog_name, args.warehouse).load_table(args.table)
    out = {"files": sum(1 for _ in table.scan().plan_files()), "selected": {}, "rows": {}}
    for f in args.filter:
        scan = table.scan(row_filter=f)
        out["selected"][f] = sum(1 for _ in scan.plan_files())
        out["rows"][f] = scan.to_arrow().num_rows
    print(json.dumps(out))


if __name__ == "__main__":
    run_cli(main, "plan_files.py")
