//! SQL over tables and metadata tables, with Iceberg's column names.

use arrow::array::{Array, Int64Array, StringArray};

use crate::common::{sum_ids, Fixture};

async fn scalar_i64(fx: &Fixture, sql: &str) -> i64 {
    let b = floe::sql::query(&fx.catalog, sql).await.unwrap();
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
    let b = floe::sql::query(
        &fx.catalog,
        "SELECT file_path, file_format FROM db.ev$files LIMIT 1",
    )
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
    let e = floe::sql::query(&fx.catalog, "SELECT * FROM db.nope")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope"), "{e}");
    let e = floe::sql::query(&fx.catalog, "SELECT * FROM db.ev$bogus")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bogus") && e.contains("files"), "{e}");
}
