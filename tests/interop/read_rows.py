"""Rows of an Iceberg table in a SQL catalog, read by PyIceberg and by DuckDB.

Prints one JSON object {"pyiceberg": [[...], ...], "duckdb": [[...], ...]}: the values of
--columns of every row of the current snapshot, sorted, with each value in the canonical text
form of read_table.py (so the two readers and floe can be compared row by row). Used by the
upsert and delete tests to compare a table with a reference model.
"""
import json

from read_table import canon, duckdb_connect, load_table, local_path, run_cli, table_parser


def rows_of(tbl, columns):
    cols = [tbl.column(c).to_pylist() for c in columns]
    return sorted([canon(v) for v in row] for row in zip(*cols))


def main() -> None:
    p = table_parser(__doc__)
    p.add_argument("--columns", required=True, help="comma-separated")
    args = p.parse_args()
    columns = [c.strip() for c in args.columns.split(",")]

    table = load_table(args)
    out = {"pyiceberg": rows_of(table.scan().to_arrow(), columns)}
    if table.current_snapshot() is None:
        out["duckdb"] = []
    else:
        m = local_path(table.metadata_location).replace("'", "''")
        con = duckdb_connect()
        tbl = con.execute(f"SELECT * FROM iceberg_scan('{m}')").to_arrow_table()
        out["duckdb"] = rows_of(tbl, columns)
    print(json.dumps(out))


if __name__ == "__main__":
    run_cli(main, "read_rows.py")
