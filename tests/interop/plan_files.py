"""Independent scan planning: how many data files PyIceberg selects for each row filter.

Loads NS.T (SqlCatalog) and prints one JSON object:

  {"files": N, "row_groups": G, "selected": {FILTER: n}, "rows": {FILTER: m}}

`files` is the number of live data files, `row_groups` their row groups (read from each file's
Parquet footer by pyarrow), `selected[FILTER]` the number PyIceberg's
`plan_files()` keeps for that filter (manifest and column-bound pruning), and `rows[FILTER]`
the rows it reads that match (`scan(row_filter).to_arrow()`). Filters use PyIceberg's
expression syntax ("x < 32", "y >= 'user_00100'"). Exits 1 with a one-line message on stderr
if the table cannot be read.
"""
import json

import pyarrow.parquet as pq

from read_table import load_table, run_cli, table_parser


def main() -> None:
    p = table_parser(__doc__)
    p.add_argument("--filter", action="append", default=[])
    args = p.parse_args()

    table = load_table(args)
    tasks = list(table.scan().plan_files())
    row_groups = 0
    for task in tasks:
        with table.io.new_input(task.file.file_path).open() as f:
            row_groups += pq.ParquetFile(f).num_row_groups
    out = {"files": len(tasks), "row_groups": row_groups, "selected": {}, "rows": {}}
    for f in args.filter:
        scan = table.scan(row_filter=f)
        out["selected"][f] = sum(1 for _ in scan.plan_files())
        out["rows"][f] = scan.to_arrow().num_rows
    print(json.dumps(out))


if __name__ == "__main__":
    run_cli(main, "plan_files.py")
