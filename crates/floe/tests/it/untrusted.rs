//! Untrusted input never steers a path or a decision (the README's Safety tables): partition
//! values from records are escaped in file paths and bounded in length; `floe.internal.*`
//! properties are refused when set and ignored when another engine wrote them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, LargeBinaryArray, StringArray};
use arrow::record_batch::RecordBatch;
use floe::operations::append::AppendBuilder;
use floe::operations::expire::ExpireBuilder;
use floe::operations::{Operation, Query};

use crate::common::{files_under, read_with_python, Fixture};

/// Hostile partition values: path traversal, separators, URI syntax, NUL and control bytes,
/// escapes that decode to traversal, a value longer than any file name, names that are
/// special to a file system, and text a reader might decode.
fn hostile() -> Vec<String> {
    let mut v: Vec<String> = [
        "../../../../../escaped",
        "a/b",
        "x?y#z%20",
        "nul\0byte",
        "..",
        ".",
        "",
        "/",
        "\\..\\..\\win",
        "%2e%2e%2f%2e%2e%2fdecoded",
        "new\nline",
        "sp ace+plus",
        "é/ü/日本",
        "~",
        "con",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("z".repeat(300));
    v.push(format!("{}/..", "y".repeat(250)));
    v
}

fn escaped_outside(root: &Path) -> Vec<String> {
    // Every file the test wrote lies under the table's data directory; nothing anywhere in the
    // temporary directory outside the warehouse.
    let parent = root.parent().unwrap();
    files_under(parent)
        .into_iter()
        .filter(|p| !p.starts_with(root))
        .map(|p| p.display().to_string())
        .collect()
}

#[tokio::test]
async fn partition_values_from_records_never_steer_a_file_path() {
    let fx = Fixture::new().await;
    let schema =
        floe::table::schema::parse_schema("id bigint not null, s string, d double, b binary")
            .unwrap();
    let mut values = hostile();
    let n = values.len();
    // Identity of a string, truncate of a string, and identity of a double whose human form
    // has 309 digits.
    let ident = fx
        .create_table(
            "u.parts",
            schema,
            Some("identity(s), truncate(4, s), identity(d)"),
        )
        .await;
    let table = fx.load(&ident).await;
    let arrow_schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    values.truncate(n);
    let ids: Vec<i64> = (0..n as i64).collect();
    let doubles: Vec<f64> = (0..n)
        .map(|i| if i % 2 == 0 { 1e308 } else { -1.5e300 })
        .collect();
    let binaries: Vec<Vec<u8>> = (0..n).map(|i| vec![0xfb, 0xff, 0xbf, i as u8]).collect();
    let batch = RecordBatch::try_new(
        arrow_schema,
        vec![
            Arc::new(Int64Array::from(ids)) as ArrayRef,
            Arc::new(StringArray::from(values.clone())),
            Arc::new(Float64Array::from(doubles)),
            Arc::new(LargeBinaryArray::from_iter_values(binaries.iter())),
        ],
    )
    .unwrap();
    AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![batch])
        .execute()
        .await
        .unwrap();

    let table_dir = fx.warehouse().join("u").join("parts");
    assert!(
        escaped_outside(fx.warehouse()).is_empty(),
        "files outside the warehouse: {:?}",
        escaped_outside(fx.warehouse())
    );
    let data_dir = table_dir.join("data");
    let parquet: Vec<_> = files_under(fx.warehouse())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert_eq!(parquet.len(), n, "one file per partition: {parquet:?}");
    for p in &parquet {
        assert!(
            p.starts_with(&data_dir),
            "{} is outside {}",
            p.display(),
            data_dir.display()
        );
        let rel = p.strip_prefix(&data_dir).unwrap();
        let segments: Vec<_> = rel
            .iter()
            .map(|s| s.to_string_lossy().to_string())
            .collect();
        assert_eq!(
            segments.len(),
            4,
            "3 partition fields and the file: {segments:?}"
        );
        for s in &segments {
            assert!(s.len() <= 200, "segment of {} bytes: {s}", s.len());
            assert!(
                s != ".." && s != "." && !s.contains('\0') && !s.contains('\n'),
                "{s:?}"
            );
        }
    }

    // Every value is stored as given, and read back the same by floe, PyIceberg and DuckDB.
    let batches = floe::operations::sql::SqlBuilder::new(
        &fx.catalog,
        "SELECT id, s FROM u.parts ORDER BY id".to_string(),
    )
    .query()
    .await
    .unwrap();
    let mut seen = Vec::new();
    for b in &batches {
        let s = arrow::compute::cast(b.column(1), &arrow::datatypes::DataType::Utf8).unwrap();
        let s = s.as_any().downcast_ref::<StringArray>().unwrap();
        seen.extend((0..s.len()).map(|i| s.value(i).to_string()));
    }
    assert_eq!(seen, values);
    let read = read_with_python(&fx, "u.parts");
    assert_eq!(read["pyiceberg"]["rows"], n, "{read}");
    assert_eq!(read["duckdb"]["rows"], n, "{read}");
    assert_eq!(
        read["pyiceberg"]["checksum"], read["duckdb"]["checksum"],
        "{read}"
    );
}

#[tokio::test]
async fn reserved_properties_are_refused_when_set_and_ignored_when_another_engine_wrote_them() {
    let fx = Fixture::new().await;
    let ident = fx.table("u.reserved", None).await;
    fx.append(&ident, 0, 10).await;

    // Set and unset are both refused, by name, and nothing is committed.
    let before = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    for key in [
        "floe.internal.head-of-history",
        "floe.internal.v1-refs",
        "floe.internal.x",
    ] {
        let e = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
            .with_properties(HashMap::from([(key.to_string(), "true".to_string())]))
            .execute()
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains("reserved"), "{e}");
        let e = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
            .with_unset(key)
            .execute()
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains("reserved"), "{e}");
    }
    assert_eq!(fx.load(&ident).await.metadata_location().unwrap(), before);

    // Another engine writes floe.internal.* keys into the metadata (here: the file edited).
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(before.trim_start_matches("file://")).unwrap())
            .unwrap();
    json["properties"]["floe.internal.head-of-history"] = "true".into();
    json["properties"]["floe.internal.v1-refs"] = r#"{"x":{"snapshot-id":1,"type":"tag"}}"#.into();
    std::fs::write(
        before.trim_start_matches("file://"),
        serde_json::to_vec(&json).unwrap(),
    )
    .unwrap();
    let catalog = fx.second_connection().await;
    let t = catalog.load_table(&ident).await.unwrap();
    assert!(
        !t.metadata()
            .properties()
            .keys()
            .any(|k| k.starts_with("floe.internal.")),
        "{:?}",
        t.metadata().properties()
    );
    // Expiry, an append and a property change all work (the key is not taken for floe's).
    ExpireBuilder::new(&catalog, ident.clone())
        .with_older_than_age(std::time::Duration::ZERO)
        .execute()
        .await
        .unwrap();
    let b = crate::common::make_batch(&t, 10, 20);
    AppendBuilder::from_batches(&catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    let t = catalog.load_table(&ident).await.unwrap();
    let written =
        std::fs::read_to_string(t.metadata_location().unwrap().trim_start_matches("file://"))
            .unwrap();
    assert!(!written.contains("floe.internal."), "{written}");
    assert_eq!(crate::common::count_and_sum(&catalog, &ident).await.0, 20);
}
