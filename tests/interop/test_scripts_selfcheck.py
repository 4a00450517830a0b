"""Self-check of the interop scripts: PyIceberg and DuckDB must agree on a known table.

Writes a table with pyiceberg_write.py into a temporary SQLite catalog (and, when
FLOE_TEST_POSTGRES_URL is set, a PostgreSQL one), reads it back with read_table.py, and
checks both readers report the same rows, sum, files and checksum. When FLOE_TEST_REST_URI
is set, does the same through the REST catalog on S3 with rest_write.py and read_rest.py.
"""
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROWS = 1000
# 3 appends of 333/333/334 rows; ts covers 3 days, so with day(ts) the batches hit 1+2+2 days
FILES = {"none": 3, "day": 5}


def run(script: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / script), *args],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def check(catalog: list, partition: str, writer="pyiceberg_write.py", reader="read_table.py") -> None:
    written = run(writer, *catalog, "--rows", str(ROWS), "--partition", partition)
    got = run(reader, *catalog, "--sum-column", "id")
    assert got["metadata_location"] == written["metadata_location"]
    assert got["pyiceberg"] == got["duckdb"]
    assert got["pyiceberg"]["rows"] == ROWS
    assert got["pyiceberg"]["sum"] == written["sum_id"] == ROWS * (ROWS - 1) // 2
    assert got["pyiceberg"]["files"] == FILES[partition]


@pytest.mark.parametrize("partition", ["day", "none"])
def test_readers_agree_sqlite(tmp_path, partition):
    # SQLAlchemy spelling for one variant, floe spelling (sqlite:// + absolute path) for the other
    uri = f"sqlite:///{tmp_path}/catalog.db" if partition == "day" else f"sqlite://{tmp_path}/catalog.db"
    check(["--catalog-uri", uri, "--warehouse", str(tmp_path / "warehouse"), "--table", "ns.events"], partition)


@pytest.mark.skipif(not os.environ.get("FLOE_TEST_POSTGRES_URL"), reason="FLOE_TEST_POSTGRES_URL not set")
def test_readers_agree_postgres(tmp_path):
    from read_table import open_catalog  # noqa: PLC0415

    uri, name = os.environ["FLOE_TEST_POSTGRES_URL"], f"selfcheck_{uuid.uuid4().hex[:8]}"
    try:
        check(["--catalog-uri", uri, "--catalog-name", name, "--warehouse", f"file://{tmp_path}",
               "--table", "ns.events"], "day")
    finally:  # leave no catalog rows behind in the shared server
        cat = open_catalog(uri, name, str(tmp_path))
        for ident in cat.list_tables("ns") if ("ns",) in cat.list_namespaces() else []:
            cat.drop_table(ident)
        if ("ns",) in cat.list_namespaces():
            cat.drop_namespace("ns")


# read_rest.py's flags and the variables .ci/setup exports for them
REST_ENV = {"--uri": "FLOE_TEST_REST_URI", "--warehouse": "FLOE_TEST_REST_WAREHOUSE",
            "--credential": "FLOE_TEST_REST_CREDENTIAL", "--s3-endpoint": "FLOE_TEST_S3_ENDPOINT",
            "--s3-access-key": "FLOE_TEST_S3_ACCESS_KEY", "--s3-secret-key": "FLOE_TEST_S3_SECRET_KEY",
            "--s3-region": "FLOE_TEST_S3_REGION"}


@pytest.mark.skipif(not os.environ.get("FLOE_TEST_REST_URI"), reason="FLOE_TEST_REST_URI not set")
@pytest.mark.parametrize("partition", ["day", "none"])
def test_readers_agree_rest(partition):
    from argparse import Namespace  # noqa: PLC0415

    from read_rest import open_rest_catalog  # noqa: PLC0415

    flags = [x for flag, env in REST_ENV.items() for x in (flag, os.environ[env])]
    ns = f"selfcheck_{uuid.uuid4().hex[:8]}"  # the server is shared and keeps its data
    try:
        check([*flags, "--table", f"{ns}.events"], partition, "rest_write.py", "read_rest.py")
    finally:  # leave nothing behind in the shared server
        conf = {flag[2:].replace("-", "_"): os.environ[env] for flag, env in REST_ENV.items()}
        cat = open_rest_catalog(Namespace(**conf))
        if (ns,) in cat.list_namespaces():
            for ident in cat.list_tables(ns):
                cat.purge_table(ident)
            cat.drop_namespace(ns)


def test_missing_table_fails_cleanly(tmp_path):
    out = subprocess.run([sys.executable, str(HERE / "read_table.py"),
                          "--catalog-uri", f"sqlite:///{tmp_path}/catalog.db",
                          "--warehouse", f"file://{tmp_path}", "--table", "ns.nope"],
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1
