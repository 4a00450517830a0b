"""Self-check of java_iceberg.py: tables written by Iceberg's Java implementation (Spark) read the
same through Java, PyIceberg and DuckDB, and the v3 fixtures carry deletion vectors.

Writes the fixtures into a temporary hadoop catalog registered in a SQLite catalog, reads them
back with `java_iceberg.py read` (one Spark session) and with read_rows.py. Needs
FLOE_SPARK_JARS (printed by .ci/setup); skipped without it.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
COLUMNS = "id,name,amount,ts"
# rows after the statements of java_iceberg.py's FIXTURES
ROWS = {"v3.mor_flat": 9728, "v3.mor_part": 9728, "v1.plain": 1800, "v2.mor": 2170}
FORMAT = {"v3.mor_flat": 3, "v3.mor_part": 3, "v1.plain": 1, "v2.mor": 2}

needs_spark = pytest.mark.skipif(not os.environ.get("FLOE_SPARK_JARS"), reason="FLOE_SPARK_JARS not set")


def run(script: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    d = tmp_path_factory.mktemp("java")
    written = run("java_iceberg.py", "write-fixtures", "--warehouse", str(d / "wh"),
                  "--catalog-db", str(d / "catalog.db"))["tables"]
    metadata = [x for info in written.values() for x in ("--metadata", info["metadata"])]
    java = run("java_iceberg.py", "read", *metadata, "--columns", COLUMNS, "--row-ids", "--files")
    return {"dir": d, "written": written, "java": {t: java[info["metadata"]] for t, info in written.items()}}


@needs_spark
def test_fixtures_written(fixtures):
    written = fixtures["written"]
    assert set(written) == set(ROWS)
    for t, info in written.items():
        assert info["rows"] == ROWS[t], t
        assert info["format_version"] == FORMAT[t], t
        assert os.path.isabs(info["metadata"]) and info["metadata"].endswith(".metadata.json")
        with open(info["metadata"]) as f:
            assert json.load(f)["format-version"] == FORMAT[t]
    crc = list(fixtures["dir"].rglob(".*.crc"))
    assert crc == [], "Hadoop checksum files left beside the tables"


@needs_spark
@pytest.mark.parametrize("table", sorted(ROWS))
def test_readers_agree(fixtures, table):
    d = fixtures["dir"]
    other = run("read_rows.py", "--catalog-uri", f"sqlite:///{d}/catalog.db", "--warehouse", f"file://{d}/wh",
                "--table", table, "--columns", COLUMNS)
    java = fixtures["java"][table]["rows"]
    assert len(java) == ROWS[table]
    assert java == other["pyiceberg"]
    assert java == other["duckdb"]


@needs_spark
@pytest.mark.parametrize("table", ["v3.mor_flat", "v3.mor_part"])
def test_v3_deletion_vectors(fixtures, table):
    got = fixtures["java"][table]
    dvs = got["delete_files"]
    assert dvs, "no delete files"
    for dv in dvs:
        assert dv["file_format"] == "PUFFIN" and dv["content"] == 1, dv
        assert dv["file_path"].endswith(".puffin")
        assert dv["content_offset"] is not None and dv["content_size_in_bytes"] > 0, dv
        assert dv["referenced_data_file"] and dv["record_count"] > 0, dv
    referenced = [dv["referenced_data_file"] for dv in dvs]
    assert len(set(referenced)) == len(referenced), "one deletion vector per data file"
    assert len(referenced) < got["data_files"], "some data files have no deletion vector"
    # row lineage: every row has its own _row_id
    assert None not in got["row_ids"] and len(set(got["row_ids"])) == ROWS[table]
    assert len(got["last_updated"]) == ROWS[table]
    # the UPDATE and the MERGE replaced deletion vectors of earlier statements
    with open(fixtures["written"][table]["metadata"]) as f:
        summaries = [s["summary"] for s in json.load(f)["snapshots"]]
    assert sum(int(s.get("removed-dvs", 0)) for s in summaries) > 0


@needs_spark
def test_v1_and_v2_deletes(fixtures):
    v1, v2 = fixtures["java"]["v1.plain"], fixtures["java"]["v2.mor"]
    assert v1["delete_files"] == []  # format 1: the DELETE rewrote data files
    assert v2["delete_files"] and all(f["file_format"] == "PARQUET" for f in v2["delete_files"])
    assert set(v2["row_ids"]) == {None}  # no row lineage before format 3


def test_no_jars_fails_cleanly():
    env = {k: v for k, v in os.environ.items() if k != "FLOE_SPARK_JARS"}
    out = subprocess.run([sys.executable, str(HERE / "java_iceberg.py"), "read", "--metadata", "/nonexistent",
                          "--columns", "id"], capture_output=True, text=True, env=env)
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1 and "FLOE_SPARK_JARS" in out.stderr
