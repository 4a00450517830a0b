//! SQL over tables and metadata tables, with Iceberg's column names.

use arrow::array::{Array, Int64Array, StringArray};
use floe::operations::{Operation, Query};

use crate::common::{sum_ids, Fixture};

async fn scalar_i64(fx: &Fixture, sql: &str) -> i64 {
    let b = floe::operations::sql::SqlBuilder::new(&fx.catalog, sql)
        .query()
        .await
        .unwrap();
    let col = b[0].column(0);
    if let Some(a) = col.as_any().downcast_ref::<Int64Array>() {
        return a.value(0);
    }
    let c = arrow::compute::cast(col, &arrow::datatypes::DataType::Int64).unwrap();
    c.as_any().downcast_ref::<Int64Array>().unwrap().value(0)
}

#[tokio::test]
async fn metadata_tables_answer_with_iceberg_column_names() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    fx.append(&ident, 0, 30).await;
    fx.append(&ident, 30, 60).await;
    assert_eq!(scalar_i64(&fx, "SELECT count(*) FROM db.ev").await, 60);
    assert_eq!(
        scalar_i64(&fx, "SELECT sum(id) FROM db.ev").await,
        sum_ids(0, 60)
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT count(*) FROM db.ev$files WHERE content = 0").await,
        6
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT sum(record_count) FROM db.ev$files").await,
        60
    );
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT count(DISTINCT partition.ts_day) FROM db.ev$files"
        )
        .await,
        3
    );
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT count(*) FROM db.ev$snapshots WHERE operation = 'append'"
        )
        .await,
        2
    );
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT sum(CAST(summary['added-records'] AS BIGINT)) FROM db.ev$snapshots"
        )
        .await,
        60
    );
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT count(*) FROM db.ev$history WHERE is_current_ancestor"
        )
        .await,
        2
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT count(*) FROM db.ev$manifests").await,
        2
    );
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT sum(added_data_files_count) FROM db.ev$manifests"
        )
        .await,
        6
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT count(*) FROM db.ev$entries WHERE status = 1").await,
        6
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT sum(file_count) FROM db.ev$partitions").await,
        6
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT count(*) FROM db.ev$partitions").await,
        3
    );
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT count(*) FROM db.ev$refs WHERE name = 'main' AND type = 'BRANCH'"
        )
        .await,
        1
    );
    assert_eq!(
        scalar_i64(&fx, "SELECT count(*) FROM db.ev$metadata_log_entries").await,
        3
    );
    let b = floe::operations::sql::SqlBuilder::new(
        &fx.catalog,
        "SELECT file_path, file_format FROM db.ev$files LIMIT 1",
    )
    .query()
    .await
    .unwrap();
    let fmt = b[0]
        .column(1)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    assert_eq!(fmt.value(0), "PARQUET");
    assert!(b[0].column(0).len() == 1);
}

#[tokio::test]
async fn unknown_tables_and_metadata_tables_are_clear_errors() {
    let fx = Fixture::new().await;
    fx.table("db.ev", None).await;
    let e = floe::operations::sql::SqlBuilder::new(&fx.catalog, "SELECT * FROM db.nope")
        .query()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope"), "{e}");
    let e = floe::operations::sql::SqlBuilder::new(&fx.catalog, "SELECT * FROM db.ev$bogus")
        .query()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bogus") && e.contains("files"), "{e}");
}

/// Every file under `dir`, with its contents.
fn tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            // SQLite's own files (WAL, shared memory) change on reads.
            if e.file_name().to_string_lossy().starts_with("catalog.db") {
                continue;
            }
            if p.is_dir() {
                out.push((p.clone(), vec![]));
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn statements_that_write_or_read_files_are_refused_and_touch_nothing() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", None).await;
    fx.append(&ident, 0, 30).await;
    let metadata = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    let root = fx.warehouse().parent().unwrap().to_path_buf();
    std::fs::write(root.join("in.csv"), "a\n1\n").unwrap();
    let before = tree(&root);
    let out = root.join("out");
    let o = out.display();
    for sql in [
        format!("COPY (SELECT 'garbage' AS x) TO '{metadata}' STORED AS CSV"),
        format!("COPY (SELECT 1 AS x) TO '{o}/a.json' STORED AS JSON"),
        format!("COPY db.ev TO '{o}/b.parquet'"),
        format!("EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{o}/c.arrow' STORED AS ARROW"),
        format!(
            "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '{}'",
            root.join("in.csv").display()
        ),
        "CREATE TABLE db.x AS SELECT 1 AS a".into(),
        "CREATE VIEW db.v AS SELECT 1 AS a".into(),
        "DROP TABLE db.ev".into(),
        "INSERT INTO db.ev (id) VALUES (1)".into(),
        format!("SET datafusion.catalog.location = '{o}'"),
        "PREPARE p AS SELECT 1".into(),
    ] {
        let e = floe::operations::sql::SqlBuilder::new(&fx.catalog, &sql)
            .query()
            .await
            .unwrap_err();
        assert!(
            matches!(e, floe::Error::Refused { .. }) && e.to_string().contains("read-only"),
            "{sql}: {e}"
        );
        assert!(!out.exists(), "{sql} created {o}");
        assert_eq!(tree(&root), before, "{sql} changed a file");
    }
    // Reading files some other way finds nothing to read with.
    for sql in [
        format!("SELECT * FROM '{}'", root.join("in.csv").display()),
        format!(
            "SELECT * FROM read_csv('{}')",
            root.join("in.csv").display()
        ),
    ] {
        assert!(
            floe::operations::sql::SqlBuilder::new(&fx.catalog, &sql)
                .query()
                .await
                .is_err(),
            "{sql}"
        );
    }
    assert_eq!(fx.count_and_sum(&ident).await, (30, sum_ids(0, 30)));
}

#[tokio::test]
async fn listing_tables_does_not_load_them_and_a_broken_table_is_named() {
    let fx = Fixture::new().await;
    let good = fx.table("db.good", None).await;
    fx.append(&good, 0, 10).await;
    let bad = fx.table("db.bad", None).await;
    fx.append(&bad, 0, 10).await;
    let metadata = fx.load(&bad).await.metadata_location().unwrap().to_string();
    std::fs::write(metadata.trim_start_matches("file://"), "garbage").unwrap();
    let b = floe::operations::sql::SqlBuilder::new(&fx.catalog, "SHOW TABLES")
        .query()
        .await
        .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string();
    assert!(text.contains("good") && text.contains("bad"), "{text}");
    assert_eq!(scalar_i64(&fx, "SELECT count(*) FROM db.good").await, 10);
    let e = floe::operations::sql::SqlBuilder::new(&fx.catalog, "SELECT * FROM db.bad")
        .query()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("db.bad"), "{e}");
}

#[tokio::test]
async fn files_shows_each_file_partition_in_its_own_spec_after_partition_evolution() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.evo", Some("day(ts)")).await;
    fx.append(&ident, 0, 30).await;
    let change = floe::operations::alter::partition::PartitionEvolution {
        spec: Some("bucket(4, id)".into()),
        ..Default::default()
    };
    floe::operations::alter::partition::AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(change)
        .execute()
        .await
        .unwrap();
    fx.append(&ident, 30, 60).await;
    // Spec 0 files (3 days) carry ts_day and no id_bucket; spec 1 files the reverse.
    let new_files = scalar_i64(&fx, "SELECT count(*) FROM db.evo$files WHERE spec_id = 1").await;
    assert!(new_files >= 2, "{new_files}");
    for (sql, want) in [
        ("SELECT count(*) FROM db.evo$files", 3 + new_files),
        (
            "SELECT count(*) FROM db.evo$files WHERE spec_id = 0 \
             AND partition.ts_day IS NOT NULL AND partition.id_bucket IS NULL",
            3,
        ),
        (
            "SELECT count(DISTINCT partition.ts_day) FROM db.evo$files WHERE spec_id = 0",
            3,
        ),
        (
            "SELECT count(*) FROM db.evo$files WHERE spec_id = 1 \
             AND partition.id_bucket IS NOT NULL AND partition.ts_day IS NULL",
            new_files,
        ),
        (
            "SELECT count(*) FROM db.evo$partitions WHERE partition.ts_day IS NOT NULL",
            3,
        ),
    ] {
        assert_eq!(scalar_i64(&fx, sql).await, want, "{sql}");
    }
    // The same in `entries`, whose data_file holds the partition.
    assert_eq!(
        scalar_i64(
            &fx,
            "SELECT count(*) FROM db.evo$entries WHERE data_file.partition.ts_day IS NOT NULL"
        )
        .await,
        3
    );
}

async fn rows_and_sum(fx: &Fixture, sql: &str) -> (i64, i64) {
    let b = floe::operations::sql::SqlBuilder::new(&fx.catalog, sql)
        .query()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let get = |i: usize| -> i64 {
        let c = arrow::compute::cast(b[0].column(i), &arrow::datatypes::DataType::Int64).unwrap();
        let a = c.as_any().downcast_ref::<Int64Array>().unwrap();
        if a.is_null(0) {
            0
        } else {
            a.value(0)
        }
    };
    (get(0), get(1))
}

async fn columns_of(fx: &Fixture, sql: &str) -> Vec<String> {
    let b = floe::operations::sql::SqlBuilder::new(&fx.catalog, sql)
        .query()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    b[0].schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

async fn sql_error(fx: &Fixture, sql: &str) -> String {
    floe::operations::sql::SqlBuilder::new(&fx.catalog, sql)
        .query()
        .await
        .expect_err(sql)
        .to_string()
}

fn utc_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .format("%Y-%m-%d %H:%M:%S%.3f")
        .to_string()
}

/// `FOR VERSION AS OF` (snapshot id, tag, branch) and `FOR TIMESTAMP AS OF`, on the table and
/// on its file metadata tables: the same rows, sums, columns and files as PyIceberg's
/// `scan(snapshot_id=...)` at the snapshot PyIceberg resolves for the same ref or time.
#[tokio::test]
async fn time_travel_reads_what_pyiceberg_reads_at_the_same_snapshot() {
    use floe::operations::alter::schema::{AlterSchemaBuilder, SchemaChange};
    use floe::operations::refs::{CreateRefBuilder, NewRef};
    let fx = Fixture::new().await;
    let ident = fx.table("db.tt", Some("day(ts)")).await;
    let s1 = fx.append(&ident, 0, 10).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let s2 = fx.append(&ident, 10, 30).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let s3 = fx.append(&ident, 30, 35).await;
    for (kind, name, at) in [("tag", "v1", s1), ("branch", "audit", s2)] {
        let b = CreateRefBuilder::new(&fx.catalog, ident.clone());
        let b = if kind == "tag" {
            b.with_tag(name)
        } else {
            b.with_branch(name)
        };
        b.with_new_ref(NewRef {
            snapshot_id: Some(at),
            ..Default::default()
        })
        .execute()
        .await
        .unwrap();
    }
    // A column added after the last commit: snapshots and tags read in the schema they were
    // written with, branches and the current state in the table's current schema.
    AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes([SchemaChange::add("extra string").unwrap()])
        .execute()
        .await
        .unwrap();
    let t2 = fx
        .load(&ident)
        .await
        .metadata()
        .snapshot_by_id(s2)
        .unwrap()
        .timestamp_ms();

    let q = |at: &str| format!("SELECT count(*), sum(id) FROM db.tt {at}");
    for (at, want) in [
        (format!("FOR VERSION AS OF {s1}"), (10, sum_ids(0, 10))),
        ("FOR VERSION AS OF 'v1'".into(), (10, sum_ids(0, 10))),
        (format!("VERSION AS OF {s2}"), (30, sum_ids(0, 30))),
        ("FOR VERSION AS OF 'audit'".into(), (30, sum_ids(0, 30))),
        (
            format!("FOR TIMESTAMP AS OF '{}'", utc_text(t2)),
            (30, sum_ids(0, 30)),
        ),
        (
            format!("FOR TIMESTAMP AS OF TIMESTAMP '{} UTC'", utc_text(t2 + 1)),
            (30, sum_ids(0, 30)),
        ),
        (format!("TIMESTAMP AS OF {t2}"), (30, sum_ids(0, 30))),
        (
            format!("FOR SYSTEM_VERSION AS OF {s3}"),
            (35, sum_ids(0, 35)),
        ),
        (String::new(), (35, sum_ids(0, 35))),
    ] {
        assert_eq!(rows_and_sum(&fx, &q(&at)).await, want, "{at}");
    }
    let old = ["id", "ts", "name", "amount"];
    let new = ["id", "ts", "name", "amount", "extra"];
    for (at, want) in [
        (format!("FOR VERSION AS OF {s2}"), &old[..]),
        ("FOR VERSION AS OF 'v1'".into(), &old[..]),
        ("FOR VERSION AS OF 'audit'".into(), &new[..]),
        (String::new(), &new[..]),
    ] {
        assert_eq!(
            columns_of(&fx, &format!("SELECT * FROM db.tt {at} LIMIT 1")).await,
            want,
            "{at}"
        );
    }
    // The table's own name still qualifies its columns, and two versions join.
    assert_eq!(
        rows_and_sum(
            &fx,
            &format!(
                "SELECT count(*), max(tt.id) FROM db.tt FOR VERSION AS OF {s1} WHERE tt.id >= 5"
            )
        )
        .await,
        (5, 9)
    );
    assert_eq!(
        rows_and_sum(
            &fx,
            &format!(
                "SELECT count(*), sum(a.id) FROM db.tt FOR VERSION AS OF {s2} AS a \
                 JOIN db.tt FOR VERSION AS OF 'v1' b ON a.id = b.id"
            )
        )
        .await,
        (10, sum_ids(0, 10))
    );
    // File metadata tables as of a snapshot: 3 files (one per day) per append.
    for (meta, at, want) in [
        ("files", format!("{s1}"), 3),
        ("data_files", "'v1'".to_string(), 3),
        ("entries", format!("{s2}"), 6),
        ("files", String::new(), 9),
    ] {
        let at = if at.is_empty() {
            at
        } else {
            format!("FOR VERSION AS OF {at}")
        };
        assert_eq!(
            scalar_i64(&fx, &format!("SELECT count(*) FROM db.tt${meta} {at}")).await,
            want,
            "{meta} {at}"
        );
    }
    assert_eq!(
        scalar_i64(
            &fx,
            &format!("SELECT sum(record_count) FROM db.\"tt$partitions\" FOR VERSION AS OF {s2}")
        )
        .await,
        30
    );

    // What PyIceberg reads at the same snapshots, refs and time.
    let wh = fx.warehouse().display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let (s1s, s2s, t2s) = (s1.to_string(), s2.to_string(), t2.to_string());
    let py = crate::common::run_python(
        "tests/interop/read_as_of.py",
        &[
            "--catalog-uri",
            &uri,
            "--warehouse",
            &wh,
            "--table",
            "db.tt",
            "--snapshot",
            &s1s,
            "--snapshot",
            &s2s,
            "--ref",
            "v1",
            "--ref",
            "audit",
            "--timestamp-ms",
            &t2s,
        ],
    );
    for (read, sql_at) in [
        (&py["snapshot"][&s1s], format!("FOR VERSION AS OF {s1}")),
        (&py["snapshot"][&s2s], format!("FOR VERSION AS OF {s2}")),
        (&py["ref"]["v1"], "FOR VERSION AS OF 'v1'".into()),
        (&py["ref"]["audit"], "FOR VERSION AS OF 'audit'".into()),
        (&py["timestamp"][&t2s], format!("FOR TIMESTAMP AS OF {t2}")),
    ] {
        let (rows, sum) = rows_and_sum(&fx, &q(&sql_at)).await;
        assert_eq!(
            (read["rows"].as_i64(), read["sum"].as_i64()),
            (Some(rows), Some(sum)),
            "{sql_at}: {read}"
        );
        let files = scalar_i64(
            &fx,
            &format!("SELECT count(*) FROM db.tt$data_files {sql_at}"),
        )
        .await;
        assert_eq!(read["files"].as_i64(), Some(files), "{sql_at}: {read}");
    }
    assert_eq!(py["ref"]["v1"]["snapshot_id"].as_i64(), Some(s1));
    assert_eq!(py["timestamp"][&t2s]["snapshot_id"].as_i64(), Some(s2));
}

#[tokio::test]
async fn time_travel_to_what_does_not_exist_is_a_clear_error_naming_it() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.tt", None).await;
    let s1 = fx.append(&ident, 0, 10).await;
    for (sql, names) in [
        (
            "SELECT * FROM db.tt FOR VERSION AS OF 42".to_string(),
            vec!["db.tt", "no snapshot 42"],
        ),
        (
            "SELECT * FROM db.tt FOR VERSION AS OF 'nope'".into(),
            vec!["db.tt", "no tag or branch 'nope'", "main"],
        ),
        (
            "SELECT * FROM db.tt FOR TIMESTAMP AS OF '2001-01-01 00:00:00'".into(),
            vec!["db.tt", "no snapshot was current at 2001-01-01 00:00:00"],
        ),
        (
            "SELECT * FROM db.tt FOR TIMESTAMP AS OF 'last tuesday'".into(),
            vec!["db.tt", "last tuesday", "expected a timestamp"],
        ),
        (
            format!("SELECT * FROM db.tt$snapshots FOR VERSION AS OF {s1}"),
            vec!["$snapshots", "snapshot_id"],
        ),
        (
            format!("SELECT * FROM db.nope FOR VERSION AS OF {s1}"),
            vec!["db.nope", "not found"],
        ),
    ] {
        let e = sql_error(&fx, &sql).await;
        for n in names {
            assert!(e.contains(n), "{sql}: {e}");
        }
    }
}
