"""Rows of an Iceberg table in a SQL catalog, read by PyIceberg and by DuckDB.

Prints one JSON object {"pyiceberg": [[...], ...], "duckdb": [[...], ...]}: the values of
--columns of every row of the current snapshot, sorted, with each value in the canonical text
form of read_table.py (so the two readers and floe can be compared row by row). Used by the
upsert and delete tests to compare a table with a reference model.
"""
import argparse
import json

from read_table import canon, duckdb_connect, local_path, open_catalog, run_cli


def rows_of(tbl, columns):
    cols = [tbl.column(c).to_pylist() for c in columns]
    return sorted([canon(v) for v in row] for row in zip(*cols))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True)
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--columns", required=True, help="comma-separated")
    args = p.parse_args()
    columns = [c.strip() for c in args.columns.split(",")]

    table = open_catalog(args.catalog_uri, args.catalog_name, args.warehouse).load_table(args.table)
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
