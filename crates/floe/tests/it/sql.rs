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
