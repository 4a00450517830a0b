"""Independent scan planning: how many data files PyIceberg selects for each row filter.

Loads NS.T (SqlCatalog) and prints one JSON object:

  {"files": N, "selected": {FILTER: n}, "rows": {FILTER: m}}

`files` is the number of live data files, `selected[FILTER]` the number PyIceberg's
`plan_files()` keeps for that filter (manifest and column-bound pruning), and `rows[FILTER]`
the rows it reads that match (`scan(row_filter).to_arrow()`). Filters use PyIceberg's
expression syntax ("x < 32", "y >= 'user_00100'"). Exits 1 with a one-line message on stderr
if the table cannot be read.
"""
import json

from read_table import load_table, run_cli, table_parser


def main() -> None:
    p = table_parser(__doc__)
    p.add_argument("--filter", action="append", default=[])
    args = p.parse_args()

    table = load_table(args)
    out = {"files": sum(1 for _ in table.scan().plan_files()), "selected": {}, "rows": {}}
    for f in args.filter:
        scan = table.scan(row_filter=f)
        out["selected"][f] = sum(1 for _ in scan.plan_files())
        out["rows"][f] = scan.to_arrow().num_rows
    print(json.dumps(out))


if __name__ == "__main__":
    run_cli(main, "plan_files.py")
