"""Iceberg's Java implementation (Spark 3.5 + Iceberg 1.10.2, through PySpark) as writer and reader.

Subcommands, each one Spark session (local[2]) printing one JSON object on stdout:

  write-fixtures --warehouse DIR [--catalog-db PATH]
      Writes the fixture tables (FIXTURES below) with a Spark `hadoop` catalog rooted at DIR;
      with --catalog-db, registers each in the SQLite SQL catalog `floe` at PATH (PyIceberg's
      register_table, warehouse file://DIR). Prints
      {"tables": {"NS.T": {"metadata": "/abs/.../vN.metadata.json", "format_version": N, "rows": N}}}
  read --metadata M [--metadata M2 ...] --columns a,b [--row-ids] [--files]
      Reads the table of each metadata file read-only. Prints {M: {"rows": [[...], ...]}} with the
      rows sorted and each value in read_table.py's canonical form (as read_rows.py prints them);
      --row-ids adds "row_ids" (sorted _row_id) and "last_updated" (sorted [_row_id,
      _last_updated_sequence_number] pairs); --files adds "data_files" (count) and "delete_files"
      (one object per live delete file, from the `<M>#delete_files` metadata table).
  write-bench --warehouse DIR [--catalog-db PATH] [--table NS.T] [--commits N] [--rows N]
      Writes a streaming-shaped v3 benchmark table (bench_statements: N small INSERTs into 4
      partitions, then DELETEs leaving deletion vectors) and registers it like write-fixtures.
      Prints {"metadata": M, "rows": N, "data_files": N, "deletion_vectors": N}.
  write-types --warehouse DIR [--catalog-db PATH] [--table NS.T]
      Writes a v3 table whose schema holds the types of format v3 the iceberg crate cannot parse
      (TYPES_SCHEMA: variant, geometry, geography, unknown, with timestamptz_ns) through Iceberg's
      Java API (Spark 3.5 has no such types): 3 appends of 10 rows written by Java's generic
      Parquet writer (variant values; geometry and geography stay null, as Java 1.10 writes no
      Parquet for them), then the first file deleted and one more append. Registered like
      write-fixtures. Prints {"metadata": M, "rows": N, "snapshots": N}.
  write-v1-tagged --warehouse DIR [--catalog-db PATH] [--table NS.T]
      Writes a format-1 table (identity-partitioned by category) as a Spark user makes one:
      3 INSERTs of 100 rows, `CREATE TAG keep RETAIN 365 DAYS` and `CREATE BRANCH audit` on the
      third, then a copy-on-write DELETE of every id below 150 (it rewrites files the tag
      needs). Registered like write-fixtures. Prints {"metadata": M, "rows": N, "tag_rows": N,
      "refs": {NAME: id}}.
  metadata-tables --metadata M [--tag NAME ...]
      Java's own metadata tables of the table at M: {"files": N, "entries": N, "manifests":
      [[added, existing, deleted], ...], "rows": N, "tags": {NAME: rows read at that tag}}.
  inspect --metadata M [--metadata M2 ...]
      Loads each metadata file with Java's own parser and plans its current snapshot (no row is
      read: Spark 3.5 reads none of those types). Prints {M: {"schema": [[id, name, type], ...],
      "snapshots": N, "current_snapshot": id, "data_files": [paths], "rows": N,
      "snapshot_ids": sorted ids, "history": snapshot-log ids, "refs": {NAME: id},
      "metadata_log": previous files, "last_sequence_number": N, "format_version": N}}.
  rewrite-data-files --warehouse DIR --table NS.T [--option K=V ...]
      CALL system.rewrite_data_files on a table of the hadoop catalog at DIR (options: the
      procedure's, e.g. --option rewrite-all=true). Prints {"result": {the procedure's result
      row}, "seconds": the CALL alone, "metadata": the new metadata file}; before the timed CALL,
      the same procedure runs once on a copy of the table in a scratch catalog (JVM warm-up).

The jars come from --jars or FLOE_SPARK_JARS (comma-separated: iceberg-spark-runtime and the
relocated Jackson jar; .ci/setup prints it). Table locations written here are plain absolute
paths (DIR/NS/T), as Iceberg's HadoopCatalog writes them for a warehouse given as a path.
Any failure is one line on stderr and exit code 1.
"""
import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from urllib.parse import unquote, urlparse

from read_table import canon, open_catalog, run_cli

CATALOG = "hadoop"  # the Spark catalog name of the warehouse
CATEGORIES = "array('north', 'south', 'east', 'west')"
# Spark's log4j2 configuration: errors only, on stderr (stdout carries the JSON). The gateway's
# own level keeps Spark from announcing "Setting default log level to WARN" at startup.
LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def log(msg: str) -> None:
    print(f"[java_iceberg] {msg}", file=sys.stderr, flush=True)


def local_dir(path_or_uri: str) -> str:
    """An absolute path from a path or a file:// URI."""
    parsed = urlparse(path_or_uri)
    return os.path.abspath(unquote(parsed.path) if parsed.scheme == "file" else path_or_uri)


def spark_session(jars: str, warehouse=None, more_catalogs=None, short_run=True):
    """A local Spark session with Iceberg's SQL extensions and, with `warehouse`, a hadoop catalog
    (more_catalogs: other hadoop catalogs, name -> warehouse directory). short_run: the JVM
    compiles with C1 only (-XX:TieredStopAtLevel=1), which on this 2-core machine wrote the
    fixtures in 37 s instead of 65 s; not for timing a steady-state workload."""
    if not jars:
        raise ValueError("no jars: pass --jars or set FLOE_SPARK_JARS (eval \"$(bash .ci/setup)\")")
    missing = [j for j in jars.split(",") if not os.path.isfile(j)]
    if missing:
        raise FileNotFoundError(f"jar not found: {missing[0]}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_dir = tempfile.mkdtemp(prefix="floe-spark-log-")
    log_conf = os.path.join(log_dir, "log4j2.properties")
    with open(log_conf, "w") as f:
        f.write(LOG4J2)
    jvm_opts = [f"-Dlog4j2.configurationFile=file:{log_conf}", "-Duser.timezone=UTC"]
    if short_run:
        jvm_opts.append("-XX:TieredStopAtLevel=1")
    from pyspark.sql import SparkSession  # noqa: PLC0415 (slow import, only when used)

    b = (SparkSession.builder.master("local[2]").appName("floe-java-iceberg")
         .config("spark.jars", jars)
         .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.extraJavaOptions", " ".join(jvm_opts)))
    catalogs = dict(more_catalogs or {})
    if warehouse is not None:
        catalogs[CATALOG] = warehouse
    for name, directory in catalogs.items():
        b = (b.config(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
             .config(f"spark.sql.catalog.{name}.type", "hadoop")
             .config(f"spark.sql.catalog.{name}.warehouse", directory))
    t0 = time.monotonic()
    try:
        spark = b.getOrCreate()
    finally:  # read once, at JVM start
        shutil.rmtree(log_dir, ignore_errors=True)
    spark.sparkContext.setLogLevel("ERROR")
    log(f"Spark session started in {time.monotonic() - t0:.1f} s")
    return spark


# --- fixtures -----------------------------------------------------------------------------

def rows_sql(start: int, end: int, category: bool = False) -> str:
    """Rows with ids [start, end) in one Spark partition (so one data file per table partition).
    name is NULL for every 97th id; ts steps 37 s + 1 µs per id from 2023-11-14T22:13:20Z."""
    cat = f", element_at({CATEGORIES}, CAST(id % 4 AS INT) + 1) AS category" if category else ""
    return (f"SELECT id, CASE WHEN id % 97 = 0 THEN NULL ELSE concat('name-', id) END AS name, "
            f"id * 0.25 + 0.1 AS amount, timestamp_micros(1700000000000000 + id * 37000001) AS ts{cat} "
            f"FROM range({start}, {end}, 1, 1)")


MOR = ("'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read'")


def v3_statements(t: str, category: bool) -> list:
    """20 INSERTs of 500 rows (ids 0..9999), then a DELETE, an UPDATE and a MERGE whose id ranges
    overlap, so some data files get a deletion vector that a later statement replaces."""
    cols = "id bigint, name string, amount double, ts timestamp" + (", category string" if category else "")
    part = " PARTITIONED BY (category)" if category else ""
    fv = "'format-version'='3'"
    out = [f"CREATE TABLE {t} ({cols}) USING iceberg{part} TBLPROPERTIES ({fv}, {MOR})"]
    out += [f"INSERT INTO {t} {rows_sql(i * 500, (i + 1) * 500, category)}" for i in range(20)]
    out.append(f"DELETE FROM {t} WHERE id < 4000 AND id % 7 = 0")
    out.append(f"UPDATE {t} SET name = concat(name, '-u'), amount = amount + 1000 "
               "WHERE id BETWEEN 3000 AND 6999 AND id % 5 = 1")
    source = (f"SELECT id, concat('merged-', id) AS name, id * 0.5 AS amount, "
              f"timestamp_micros(1700000000000000 + id * 37000001) AS ts"
              + (f", element_at({CATEGORIES}, CAST(id % 4 AS INT) + 1) AS category" if category else "")
              + " FROM range(0, 10300, 1, 1) WHERE (id BETWEEN 6500 AND 7499 AND id % 3 = 0) OR id >= 10000")
    out.append(f"MERGE INTO {t} t USING ({source}) s ON t.id = s.id "
               "WHEN MATCHED THEN UPDATE SET t.name = s.name, t.amount = s.amount "
               "WHEN NOT MATCHED THEN INSERT *")
    return out


def v1_statements(t: str) -> list:
    """Format 1, identity-partitioned by category: 10 INSERTs of 200 rows, a copy-on-write DELETE."""
    out = [f"CREATE TABLE {t} (id bigint, name string, amount double, ts timestamp, category string) "
           f"USING iceberg PARTITIONED BY (category) TBLPROPERTIES ('format-version'='1')"]
    out += [f"INSERT INTO {t} {rows_sql(i * 200, (i + 1) * 200, True)}" for i in range(10)]
    out.append(f"DELETE FROM {t} WHERE id % 10 = 3")
    return out


def v2_statements(t: str) -> list:
    """Format 2, merge-on-read: 5 INSERTs of 500 rows, two DELETEs (Parquet position deletes; the
    second hits files the first already has deletes for)."""
    out = [f"CREATE TABLE {t} (id bigint, name string, amount double, ts timestamp) "
           f"USING iceberg TBLPROPERTIES ('format-version'='2', {MOR}, "
           "'write.delete.granularity'='partition')"]
    out += [f"INSERT INTO {t} {rows_sql(i * 500, (i + 1) * 500)}" for i in range(5)]
    out.append(f"DELETE FROM {t} WHERE id % 10 = 3")
    out.append(f"DELETE FROM {t} WHERE id BETWEEN 400 AND 1199 AND id % 10 = 7")
    return out


FIXTURES = {
    "v3.mor_flat": lambda t: v3_statements(t, category=False),
    "v3.mor_part": lambda t: v3_statements(t, category=True),
    "v1.plain": v1_statements,
    "v2.mor": v2_statements,
}


def current_metadata(spark, table: str) -> str:
    (path,) = spark.sql(f"SELECT file FROM {table}.metadata_log_entries "
                        "ORDER BY timestamp DESC, latest_sequence_number DESC LIMIT 1").first()
    return local_dir(path)


def remove_crc_files(warehouse: str) -> None:
    """Hadoop's local file system writes a `.NAME.crc` checksum beside every file it writes; they
    are no part of the tables, so they go (other engines would see them as orphan files)."""
    for root, _, files in os.walk(warehouse):
        for f in files:
            if f.startswith(".") and f.endswith(".crc"):
                os.remove(os.path.join(root, f))


def bench_statements(t: str, commits: int, rows: int) -> list:
    """A streaming-shaped v3 table for benchmarks: `commits` INSERTs of `rows` rows (one small file
    per partition each, identity-partitioned by category), then merge-on-read DELETEs that leave a
    deletion vector on most files (every 10th id, and ids ending in 5 of every other commit)."""
    fv = "'format-version'='3'"
    out = [f"CREATE TABLE {t} (id bigint, name string, amount double, ts timestamp, category string) "
           f"USING iceberg PARTITIONED BY (category) TBLPROPERTIES ({fv}, {MOR})"]
    out += [f"INSERT INTO {t} {rows_sql(i * rows, (i + 1) * rows, True)}" for i in range(commits)]
    out.append(f"DELETE FROM {t} WHERE id % 10 = 0")
    out.append(f"DELETE FROM {t} WHERE id % 10 = 5 AND (id DIV {rows}) % 2 = 0")
    return out


def write_bench(args) -> None:
    warehouse = local_dir(args.warehouse)
    os.makedirs(warehouse, exist_ok=True)
    spark = spark_session(args.jars, warehouse)
    t = f"{CATALOG}.{args.table}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{args.table.split('.')[0]}")
    t0 = time.monotonic()
    for sql in bench_statements(t, args.commits, args.rows):
        spark.sql(sql)
    metadata = current_metadata(spark, t)
    (rows,) = spark.sql(f"SELECT count(*) FROM {t}").first()
    (files,) = spark.sql(f"SELECT count(*) FROM {t}.data_files").first()
    (vectors,) = spark.sql(f"SELECT count(*) FROM {t}.delete_files").first()
    spark.stop()
    remove_crc_files(warehouse)
    if args.catalog_db:
        cat = open_catalog(os.path.abspath(args.catalog_db), "floe", "file://" + warehouse)
        cat.create_namespace_if_not_exists(args.table.split(".")[0])
        cat.register_table(tuple(args.table.split(".")), metadata)
    log(f"{args.table}: {rows} rows in {files} data files, {vectors} deletion vectors, "
        f"{time.monotonic() - t0:.1f} s")
    print(json.dumps({"metadata": metadata, "rows": rows, "data_files": files, "deletion_vectors": vectors}))


def write_fixtures(args) -> None:
    warehouse = local_dir(args.warehouse)
    os.makedirs(warehouse, exist_ok=True)
    spark = spark_session(args.jars, warehouse)
    tables = {}
    for name, statements in FIXTURES.items():
        t0 = time.monotonic()
        t = f"{CATALOG}.{name}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{name.split('.')[0]}")
        for sql in statements(t):
            spark.sql(sql)
        metadata = current_metadata(spark, t)
        with open(metadata) as f:
            fv = json.load(f)["format-version"]
        (rows,) = spark.sql(f"SELECT count(*) FROM {t}").first()
        tables[name] = {"metadata": metadata, "format_version": fv, "rows": rows}
        log(f"{name}: {rows} rows, format {fv}, {time.monotonic() - t0:.1f} s")
    spark.stop()
    remove_crc_files(warehouse)
    if args.catalog_db:
        cat = open_catalog(os.path.abspath(args.catalog_db), "floe", "file://" + warehouse)
        for name, info in tables.items():
            cat.create_namespace_if_not_exists(name.split(".")[0])
            cat.register_table(tuple(name.split(".")), info["metadata"])
    print(json.dumps({"tables": tables}))


def write_v1_tagged(args) -> None:
    warehouse = local_dir(args.warehouse)
    os.makedirs(warehouse, exist_ok=True)
    spark = spark_session(args.jars, warehouse)
    t = f"{CATALOG}.{args.table}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{args.table.split('.')[0]}")
    spark.sql(f"CREATE TABLE {t} (id bigint, name string, amount double, ts timestamp, category string) "
              f"USING iceberg PARTITIONED BY (category) TBLPROPERTIES ('format-version'='1')")
    for i in range(3):
        spark.sql(f"INSERT INTO {t} {rows_sql(i * 100, (i + 1) * 100, True)}")
    spark.sql(f"ALTER TABLE {t} CREATE TAG keep RETAIN 365 DAYS")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH audit")
    spark.sql(f"DELETE FROM {t} WHERE id < 150")
    metadata = current_metadata(spark, t)
    (rows,) = spark.sql(f"SELECT count(*) FROM {t}").first()
    (tag_rows,) = spark.sql(f"SELECT count(*) FROM {t} VERSION AS OF 'keep'").first()
    refs = {r["name"]: r["snapshot_id"] for r in spark.sql(f"SELECT name, snapshot_id FROM {t}.refs").collect()}
    spark.stop()
    remove_crc_files(warehouse)
    if args.catalog_db:
        cat = open_catalog(os.path.abspath(args.catalog_db), "floe", "file://" + warehouse)
        cat.create_namespace_if_not_exists(args.table.split(".")[0])
        cat.register_table(tuple(args.table.split(".")), metadata)
    print(json.dumps({"metadata": metadata, "rows": rows, "tag_rows": tag_rows, "refs": refs}))


def metadata_tables(args) -> None:
    spark = spark_session(args.jars)
    path = local_dir(args.metadata)
    load = lambda suffix="": spark.read.format("iceberg").load(path + suffix)  # noqa: E731
    out = {
        "files": load("#files").count(),
        "entries": load("#entries").count(),
        "manifests": sorted([r[0], r[1], r[2]] for r in load("#manifests").select(
            "added_data_files_count", "existing_data_files_count", "deleted_data_files_count").collect()),
        "rows": load().count(),
        "tags": {tag: spark.read.format("iceberg").option("tag", tag).load(path).count() for tag in args.tag},
    }
    spark.stop()
    print(json.dumps(out))


# (field id, name, Java type factory, required); ids beyond the int range (py4j passes a Python
# int that fits an int as an Integer, and `id` is a long).
TYPES_SCHEMA = [
    (1, "id", lambda T: T.LongType.get(), True),
    (2, "ts_ns", lambda T: T.TimestampNanoType.withZone(), False),
    (3, "name", lambda T: T.StringType.get(), False),
    (4, "v", lambda T: T.VariantType.get(), False),
    (5, "geo", lambda T: T.GeometryType.crs84(), False),
    (6, "geog", lambda T: T.GeographyType.crs84(), False),
    (7, "u", lambda T: T.UnknownType.get(), False),
]
TYPES_WRITTEN = ["id", "ts_ns", "name", "v", "u"]
TYPES_ID_BASE = 5_000_000_000


def java_list(jvm, items):
    out = jvm.java.util.ArrayList()
    for i in items:
        out.add(i)
    return out


def write_types(args) -> None:
    warehouse = local_dir(args.warehouse)
    os.makedirs(warehouse, exist_ok=True)
    spark = spark_session(args.jars)
    jvm = spark._jvm
    ice = jvm.org.apache.iceberg
    types = ice.types.Types
    fields = [(types.NestedField.required if req else types.NestedField.optional)(fid, name, make(types))
              for fid, name, make, req in TYPES_SCHEMA]
    schema = ice.Schema(java_list(jvm, fields))
    catalog = ice.hadoop.HadoopCatalog(spark._jsc.hadoopConfiguration(), warehouse)
    ident = ice.catalog.TableIdentifier.parse(args.table)
    props = jvm.java.util.HashMap()
    props.put("format-version", "3")
    table = catalog.createTable(ident, schema, ice.PartitionSpec.unpartitioned(), props)
    written = table.schema().select(java_list(jvm, TYPES_WRITTEN))
    factory = ice.data.GenericAppenderFactory(written, table.spec())
    variants = ice.variants

    def append(batch: int):
        out = table.io().newOutputFile(table.locationProvider().newDataLocation(f"data-{batch}.parquet"))
        w = factory.newAppender(out, ice.FileFormat.PARQUET)
        for i in range(batch * 10, batch * 10 + 10):
            r = ice.data.GenericRecord.create(written)
            r.setField("id", TYPES_ID_BASE + i)
            r.setField("ts_ns", jvm.java.time.OffsetDateTime.parse(f"2026-01-01T00:00:00.{i:09d}Z"))
            r.setField("name", f"name-{i}")
            r.setField("v", variants.Variant.of(variants.Variants.emptyMetadata(), variants.Variants.of(f"v-{i}")))
            w.add(r)
        w.close()
        f = (ice.DataFiles.builder(table.spec()).withInputFile(out.toInputFile())
             .withMetrics(w.metrics()).withFormat(ice.FileFormat.PARQUET).build())
        table.newAppend().appendFile(f).commit()
        return f

    first = append(0)
    append(1)
    append(2)
    table.newDelete().deleteFile(first).commit()
    append(3)
    table.refresh()
    metadata = local_dir(table.operations().current().metadataFileLocation())
    snapshots = sum(1 for _ in table.snapshots())
    spark.stop()
    remove_crc_files(warehouse)
    if args.catalog_db:
        cat = open_catalog(os.path.abspath(args.catalog_db), "floe", "file://" + warehouse)
        ns, name = args.table.split(".")
        cat.create_namespace_if_not_exists(ns)
        # PyIceberg 0.12 cannot parse these types, so its register_table cannot be used: the
        # row goes into its SqlCatalog table (the JDBC catalog's layout) directly.
        from sqlalchemy import text  # noqa: PLC0415

        with cat.engine.begin() as conn:
            conn.execute(text("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                              "metadata_location, previous_metadata_location) "
                              "VALUES (:c, :ns, :t, :m, NULL)"),
                         {"c": "floe", "ns": ns, "t": name, "m": metadata})
    print(json.dumps({"metadata": metadata, "rows": 30, "snapshots": snapshots}))


def inspect(args) -> None:
    spark = spark_session(args.jars)
    jvm = spark._jvm
    ice = jvm.org.apache.iceberg
    io = ice.hadoop.HadoopFileIO(spark._jsc.hadoopConfiguration())
    out = {}
    for m in args.metadata:
        table = ice.BaseTable(ice.StaticTableOperations(local_dir(m), io), m)
        schema = [[f.fieldId(), f.name(), f.type().toString()] for f in table.schema().columns()]
        files, rows = [], 0
        tasks = table.newScan().planFiles()
        it = tasks.iterator()
        while it.hasNext():
            f = it.next().file()
            files.append(local_dir(f.location()))
            rows += f.recordCount()
        tasks.close()
        current = table.currentSnapshot()
        md = table.operations().current()
        refs = {name: md.ref(name).snapshotId() for name in md.refs().keySet()}
        out[m] = {"schema": schema, "snapshots": sum(1 for _ in table.snapshots()),
                  "current_snapshot": current.snapshotId() if current is not None else None,
                  "data_files": sorted(files), "rows": rows,
                  "snapshot_ids": sorted(s.snapshotId() for s in table.snapshots()),
                  "history": [e.snapshotId() for e in table.history()],
                  "refs": refs,
                  "metadata_log": [local_dir(e.file()) for e in md.previousFiles()],
                  "last_sequence_number": md.lastSequenceNumber(),
                  "format_version": md.formatVersion()}
    spark.stop()
    print(json.dumps(out))


# --- reading ------------------------------------------------------------------------------

UTC_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def canon_rows(df, columns: list) -> list:
    """Sorted rows of `columns` in canonical form. A `timestamp` (with time zone) column is taken
    as microseconds since the epoch, since PySpark would turn it into the Python process's local
    time; it then becomes a UTC datetime, as PyIceberg and DuckDB give it."""
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.types import TimestampType  # noqa: PLC0415

    types = [f.dataType for f in df.select(*columns).schema.fields]  # also _row_id & co.
    tz = [isinstance(t, TimestampType) for t in types]
    sel = [F.unix_micros(F.col(c)).alias(c) if is_tz else F.col(c) for c, is_tz in zip(columns, tz)]
    out = []
    for row in df.select(*sel).collect():
        vals = [UTC_EPOCH + dt.timedelta(microseconds=v) if is_tz and v is not None else v
                for v, is_tz in zip(row, tz)]
        out.append([canon(v) for v in vals])
    return sorted(out)


def read(args) -> None:
    columns = [c.strip() for c in args.columns.split(",")]
    spark = spark_session(args.jars)
    out = {}
    for m in args.metadata:
        t0 = time.monotonic()
        path = local_dir(m)
        df = spark.read.format("iceberg").load(path)
        res = {"rows": canon_rows(df, columns)}
        if args.row_ids:
            pairs = [(r[0], r[1]) for r in df.select("_row_id", "_last_updated_sequence_number").collect()]
            nulls_last = lambda v: (v is None, v or 0)  # noqa: E731 (before v3, both are null)
            res["row_ids"] = sorted((p[0] for p in pairs), key=nulls_last)
            res["last_updated"] = sorted(([a, b] for a, b in pairs), key=lambda p: tuple(map(nulls_last, p)))
        if args.files:
            res["data_files"] = spark.read.format("iceberg").load(path + "#data_files").count()
            res["delete_files"] = [
                r.asDict() for r in spark.read.format("iceberg").load(path + "#delete_files").select(
                    "content", "file_path", "file_format", "record_count", "referenced_data_file",
                    "content_offset", "content_size_in_bytes").orderBy("file_path", "content_offset").collect()]
        out[m] = res
        log(f"read {m}: {len(res['rows'])} rows in {time.monotonic() - t0:.1f} s")
    spark.stop()
    print(json.dumps(out))


# --- maintenance --------------------------------------------------------------------------

def rewrite_data_files(args) -> None:
    warehouse = local_dir(args.warehouse)
    opts = []
    for kv in args.option:
        k, sep, v = kv.partition("=")
        if not sep:
            raise ValueError(f"--option wants KEY=VALUE, got {kv!r}")
        opts += [k, v]
    scratch = tempfile.mkdtemp(prefix="floe-spark-warmup-")
    try:
        spark = spark_session(args.jars, warehouse, {"scratch": scratch}, short_run=False)
        t = f"{CATALOG}.{args.table}"
        # Warm-up: the same procedure on a copy of the table in a scratch catalog, so the timed
        # CALL runs with the classes loaded and compiled.
        t0 = time.monotonic()
        spark.sql(f"CREATE TABLE scratch.warmup.t USING iceberg AS SELECT * FROM {t}")
        spark.sql("CALL scratch.system.rewrite_data_files(table => 'warmup.t', "
                  "options => map('rewrite-all', 'true'))").collect()
        log(f"warm-up in {time.monotonic() - t0:.1f} s")
        quoted = ", ".join("'" + s.replace("'", "''") + "'" for s in opts)
        call = f"CALL {CATALOG}.system.rewrite_data_files(table => '{args.table}'"
        call += f", options => map({quoted}))" if opts else ")"
        t0 = time.monotonic()
        row = spark.sql(call).first()
        seconds = time.monotonic() - t0
        out = {"result": row.asDict(), "seconds": round(seconds, 3), "metadata": current_metadata(spark, t)}
        spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    remove_crc_files(os.path.join(warehouse, *args.table.split(".")))
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jars", default=os.environ.get("FLOE_SPARK_JARS", ""),
                   help="comma-separated jars (default: $FLOE_SPARK_JARS)")
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write-fixtures", help="write the fixture tables")
    w.add_argument("--warehouse", required=True, help="directory (or file:// URI) of the hadoop catalog")
    w.add_argument("--catalog-db", help="SQLite file of a SQL catalog `floe` to register the tables in")
    w.set_defaults(func=write_fixtures)
    r = sub.add_parser("read", help="read tables from their metadata files")
    r.add_argument("--metadata", required=True, action="append", help="a metadata.json file; repeatable")
    r.add_argument("--columns", required=True, help="comma-separated")
    r.add_argument("--row-ids", action="store_true", help="also _row_id and _last_updated_sequence_number")
    r.add_argument("--files", action="store_true", help="also the data file count and the delete files")
    r.set_defaults(func=read)
    b = sub.add_parser("write-bench", help="write a streaming-shaped v3 table with deletion vectors")
    b.add_argument("--warehouse", required=True)
    b.add_argument("--catalog-db", help="SQLite file of a SQL catalog `floe` to register the table in")
    b.add_argument("--table", default="bench.v3", help="NS.T")
    b.add_argument("--commits", type=int, default=200, help="INSERTs (one small file per partition each)")
    b.add_argument("--rows", type=int, default=1000, help="rows per INSERT")
    b.set_defaults(func=write_bench)
    t = sub.add_parser("write-types", help="write a v3 table with variant, geometry, geography, unknown")
    t.add_argument("--warehouse", required=True)
    t.add_argument("--catalog-db", help="SQLite file of a SQL catalog `floe` to register the table in")
    t.add_argument("--table", default="v3.types", help="NS.T")
    t.set_defaults(func=write_types)
    v = sub.add_parser("write-v1-tagged", help="write a v1 table with a tag and a branch, then a CoW DELETE")
    v.add_argument("--warehouse", required=True)
    v.add_argument("--catalog-db", help="SQLite file of a SQL catalog `floe` to register the table in")
    v.add_argument("--table", default="v1.tagged", help="NS.T")
    v.set_defaults(func=write_v1_tagged)
    m = sub.add_parser("metadata-tables", help="Java's files, entries and manifests tables, and reads at tags")
    m.add_argument("--metadata", required=True, help="a metadata.json file")
    m.add_argument("--tag", action="append", default=[], help="a tag to read at; repeatable")
    m.set_defaults(func=metadata_tables)
    i = sub.add_parser("inspect", help="load tables with Java's parser and plan them (no rows read)")
    i.add_argument("--metadata", required=True, action="append", help="a metadata.json file; repeatable")
    i.set_defaults(func=inspect)
    c = sub.add_parser("rewrite-data-files", help="CALL system.rewrite_data_files on a hadoop-catalog table")
    c.add_argument("--warehouse", required=True)
    c.add_argument("--table", required=True, help="NS.T")
    c.add_argument("--option", action="append", default=[], help="KEY=VALUE for the procedure's options")
    c.set_defaults(func=rewrite_data_files)
    args = p.parse_args()
    try:
        args.func(args)
    except Exception as e:
        if type(e).__name__ != "Py4JJavaError":
            raise
        cause = e.java_exception  # the Java exception, not py4j's "An error occurred while calling"
        while cause.getCause() is not None and not cause.getMessage():
            cause = cause.getCause()
        raise RuntimeError(f"{cause.getClass().getName()}: {cause.getMessage()}") from None


if __name__ == "__main__":
    run_cli(main, "java_iceberg.py")
