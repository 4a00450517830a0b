//! Tables floe writes (create, append, rewrite) read identically in PyIceberg and DuckDB.

use crate::common::{read_with_python as read, rewrite_all, sum_ids, Fixture};
use floe::operations::Operation;

fn assert_readers_agree(v: &serde_json::Value, rows: i64, sum: i64, files: usize) {
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(v[reader]["rows"], rows, "{reader}: {v}");
        assert_eq!(v[reader]["sum"], sum, "{reader}: {v}");
        assert_eq!(v[reader]["files"], files, "{reader}: {v}");
    }
    assert_eq!(v["pyiceberg"]["checksum"], v["duckdb"]["checksum"], "{v}");
}

#[tokio::test]
async fn floe_tables_read_identically_in_pyiceberg_and_duckdb_after_append_and_rewrite() {
    let fx = Fixture::new().await;
    for (name, partition) in [
        ("interop.parted", Some("day(ts), bucket(4, id)")),
        ("interop.flat", None),
    ] {
        let ident = fx.table(name, partition).await;
        for i in 0..5 {
            fx.append(&ident, i * 40, i * 40 + 40).await;
        }
        let t = fx.load(&ident).await;
        let files = floe::table::manifests::live_files(&t).await.unwrap().len();
        let v = read(&fx, name);
        assert_readers_agree(&v, 200, sum_ids(0, 200), files);
        let checksum_before = v["duckdb"]["checksum"].clone();

        let (_, after) = rewrite_all(&fx.catalog, &ident).await;
        let v = read(&fx, name);
        assert_readers_agree(&v, 200, sum_ids(0, 200), after);
        assert_eq!(
            v["duckdb"]["checksum"], checksum_before,
            "rewrite changed content"
        );
        assert!(
            after < files,
            "{name}: rewrite should reduce files ({files} -> {after})"
        );

        // An append after the rewrite still reads right everywhere.
        fx.append(&ident, 200, 210).await;
        let t = fx.load(&ident).await;
        let files = floe::table::manifests::live_files(&t).await.unwrap().len();
        let v = read(&fx, name);
        assert_readers_agree(&v, 210, sum_ids(0, 210), files);
    }
}

#[tokio::test]
async fn every_primitive_type_round_trips_through_pyiceberg_and_duckdb() {
    let fx = Fixture::new().await;
    let ident = floe::catalog::parse_table_ident("types.all").unwrap();
    fx.catalog
        .create_namespace(ident.namespace())
        .await
        .unwrap();
    let schema = floe::table::schema::parse_schema(
        "id bigint not null, b boolean, i int, f float, d double, dec decimal(10, 2), dt date, \
         ts timestamp, tstz timestamptz, s string, bin binary",
    )
    .unwrap();
    fx.catalog
        .create_table(floe::catalog::NewTable {
            ident: ident.clone(),
            schema,
            partition_spec: floe::table::schema::unpartitioned(),
            sort_order: None,
            properties: Default::default(),
        })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.ndjson");
    let mut text = String::new();
    for id in 0..50 {
        text.push_str(&format!(
            "{{\"id\": {id}, \"b\": {}, \"i\": {}, \"f\": {}.5, \"d\": {}.25, \"dec\": \"{}.{:02}\", \"dt\": \"2026-03-{:02}\", \
             \"ts\": \"2026-03-01T10:00:{:02}\", \"tstz\": \"2026-03-01T10:00:{:02}Z\", \"s\": \"s{id}\", \"bin\": null}}\n",
            id % 2 == 0,
            id * 3,
            id,
            id,
            id,
            id % 100,
            1 + id % 28,
            id % 60,
            id % 60
        ));
    }
    std::fs::write(&path, text).unwrap();
    floe::operations::append::AppendBuilder::new(&fx.catalog, ident.clone())
        .with_inputs(vec![path])
        .execute()
        .await
        .unwrap();
    let v = read(&fx, "types.all");
    assert_readers_agree(&v, 50, sum_ids(0, 50), 1);
}
