"""Independent reader for an Iceberg table in a SQL catalog: PyIceberg and DuckDB.

Loads NS.T with PyIceberg's SqlCatalog, then reads the current snapshot twice, once
with PyIceberg and once with DuckDB's iceberg extension (offline, pointed at the
metadata file), and prints one JSON object:

  {"metadata_location": ..., "pyiceberg": {"rows", "sum", "files", "checksum"},
   "duckdb": {"rows", "sum", "files", "checksum"}}

checksum is an order-independent content hash (decimal string): the sum modulo 2**64
of the first 16 hex digits of sha256 of each row's canonical form. Exits 1 with a
one-line message on stderr if the table cannot be read.
"""
import argparse
import datetime as dt
import decimal
import glob
import hashlib
import json
import math
import os
import sys
import uuid
from urllib.parse import unquote, urlparse

import pyarrow as pa


def sqlalchemy_uri(uri: str) -> str:
    """Accept SQLAlchemy URIs plus floe-style ones (sqlite:///abs/x.db, postgres://...)."""
    if "://" not in uri:  # bare path to a SQLite file
        return "sqlite:///" + os.path.abspath(uri)
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:////" + uri[len("sqlite:///"):]  # floe: the path is absolute
    for prefix in ("postgres://", "postgresql://"):
        if uri.startswith(prefix):
            return "postgresql+psycopg2://" + uri[len(prefix):]
    return uri


def open_catalog(uri: str, name: str, warehouse: str):
    """A PyIceberg SqlCatalog; `warehouse` may be a path or a file:// URI."""
    from pyiceberg.catalog.sql import SqlCatalog

    if "://" not in warehouse:
        warehouse = "file://" + os.path.abspath(warehouse)
    return SqlCatalog(name, uri=sqlalchemy_uri(uri), warehouse=warehouse)


def table_parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser (described by the first line of `doc`) with the options every reader
    script takes to find its table: --catalog-uri, --catalog-name, --warehouse, --table."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--catalog-uri", required=True)
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True, help="NS.T")
    return p


def load_table(args):
    """The table that the options of `table_parser` name."""
    return open_catalog(args.catalog_uri, args.catalog_name, args.warehouse).load_table(args.table)


def local_path(location: str) -> str:
    parsed = urlparse(location)
    return unquote(parsed.path) if parsed.scheme == "file" else location


def canon(v) -> str:
    """Canonical string of one value, identical for PyIceberg's and DuckDB's Arrow output."""
    if v is None:
        return "\\N"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, uuid.UUID):
        return str(v)  # DuckDB hands UUIDs to Arrow as this string
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{canon(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(canon(x) for x in v) + "]"
    return str(v)


def ns_iso(v: int) -> str:
    """A nanosecond timestamp (since the epoch, UTC) as ISO text with all nine digits: Python's
    datetime stops at microseconds, so `to_pylist` refuses such values."""
    secs, ns = divmod(v, 1_000_000_000)
    return (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=secs)).isoformat() + f".{ns:09d}"


def column_values(col) -> list:
    """A column's values for `canon`; nanosecond timestamps (format v3's timestamp_ns and
    timestamptz_ns) as `ns_iso` text, as both readers give them in Arrow as int64 nanoseconds."""
    if pa.types.is_timestamp(col.type) and col.type.unit == "ns":
        return [None if v is None else ns_iso(v) for v in col.cast(pa.int64()).to_pylist()]
    return col.to_pylist()


def summarize(tbl: pa.Table, columns: list, sum_column, files: int) -> dict:
    cols = [column_values(tbl.column(c)) for c in columns]
    checksum = 0
    for row in zip(*cols):
        digest = hashlib.sha256("\x1f".join(canon(v) for v in row).encode()).hexdigest()
        checksum = (checksum + int(digest[:16], 16)) % 2**64
    total = None
    if sum_column is not None:
        values = [v for v in tbl.column(sum_column).to_pylist() if v is not None]
        if any(isinstance(v, float) for v in values):
            total = math.fsum(values)  # exact, so independent of row order
        else:
            total = sum(values)
        if isinstance(total, (float, decimal.Decimal)) and total == int(total):
            total = int(total)
        elif isinstance(total, decimal.Decimal):
            total = float(total)
    return {"rows": tbl.num_rows, "sum": total, "files": files, "checksum": str(checksum)}


def duckdb_connect(extensions=("avro", "iceberg")):
    """DuckDB offline: each extension loaded from its pip package (duckdb-extension-<name>)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false; SET autoload_known_extensions=false;")
    con.execute("SET TimeZone='UTC'")
    for ext in extensions:
        mod = __import__(f"duckdb_extension_{ext}")
        pattern = os.path.join(os.path.dirname(mod.__file__), "extensions", "*", f"{ext}.duckdb_extension")
        con.execute(f"LOAD '{sorted(glob.glob(pattern))[-1]}'")
    return con


def read_duckdb(metadata: str, columns: list, sum_column, snapshot_exists: bool, con=None) -> dict:
    con = con if con is not None else duckdb_connect()
    m = metadata.replace("'", "''")
    if not snapshot_exists:  # no snapshot yet: iceberg_scan has nothing to read
        return {"rows": 0, "sum": 0 if sum_column else None, "files": 0, "checksum": "0"}
    tbl = con.execute(f"SELECT * FROM iceberg_scan('{m}')").to_arrow_table()
    # duckdb-iceberg 1.5.5 labels iceberg_metadata's `content` column with the status
    # enum (a data file shows up as 'EXISTING'), so select data files by manifest_content.
    (files,) = con.execute(
        f"SELECT count(DISTINCT file_path) FROM iceberg_metadata('{m}') "
        "WHERE status != 'DELETED' AND manifest_content = 'DATA'"
    ).fetchone()
    return summarize(tbl, columns, sum_column, files)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-uri", required=True, help="SQLAlchemy or floe-style catalog URI")
    p.add_argument("--catalog-name", default="floe")
    p.add_argument("--warehouse", required=True, help="path or file:// URI")
    p.add_argument("--table", required=True, help="NS.T")
    p.add_argument("--sum-column")
    p.add_argument("--readers", default="pyiceberg,duckdb",
                   help="comma-separated subset of pyiceberg,duckdb (DuckDB 1.5.5 reads no "
                        "nanosecond timestamps: 'Unrecognized primitive type: timestamptz_ns')")
    args = p.parse_args()

    table = open_catalog(args.catalog_uri, args.catalog_name, args.warehouse).load_table(args.table)
    readers = set(args.readers.split(","))
    print(json.dumps(read_both(table, args.table, local_path(table.metadata_location), args.sum_column,
                               readers=readers)))


def read_both(table, name: str, metadata: str, sum_column, con=None,
              readers=frozenset({"pyiceberg", "duckdb"})) -> dict:
    """The current snapshot of table `name` read by PyIceberg and by DuckDB (at `metadata`,
    with connection `con`, or a local one); `readers` picks either or both."""
    columns = [f.name for f in table.schema().fields]
    if sum_column is not None and sum_column not in columns:
        raise ValueError(f"no column {sum_column!r} in {name}")
    out = {"metadata_location": table.metadata_location}
    if "pyiceberg" in readers:
        py_files = sum(1 for _ in table.scan().plan_files())
        out["pyiceberg"] = summarize(table.scan().to_arrow(), columns, sum_column, py_files)
    if "duckdb" in readers:
        out["duckdb"] = read_duckdb(metadata, columns, sum_column, table.current_snapshot() is not None, con)
    return out


def run_cli(main, script: str) -> None:
    """Runs `main`; any failure is one line on stderr and exit code 1, as the callers expect."""
    try:
        main()
    except Exception as e:
        msg = (str(e).strip().splitlines() or [""])[0]
        print(f"{script}: {type(e).__name__}: {msg}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run_cli(main, "read_table.py")
