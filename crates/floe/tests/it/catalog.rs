//! Catalog: the JDBC schema on SQLite and PostgreSQL, shared with PyIceberg.

use floe::catalog::{parse_namespace, parse_table_ident, Catalog, CatalogConfig};
use floe::operations::Operation;
use floe::Error;

use crate::common::{python, run_python, sum_ids, Fixture};

#[tokio::test]
async fn namespaces_and_tables_round_trip_and_errors_are_clear() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.events", Some("day(ts)")).await;
    assert_eq!(
        fx.catalog.list_namespaces().await.unwrap(),
        vec!["db".to_string()]
    );
    let tables = fx.catalog.list_tables(None).await.unwrap();
    assert_eq!(tables, vec![ident.clone()]);
    let err = fx
        .catalog
        .create_namespace(&parse_namespace("db").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NamespaceExists { .. }), "{err}");
    let missing = fx
        .catalog
        .load_table(&parse_table_ident("db.nope").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::TableNotFound { .. }), "{missing}");
    let no_ns = fx
        .catalog
        .load_table(&parse_table_ident("nons.t").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(no_ns, Error::NamespaceNotFound { .. }), "{no_ns}");
    // Drop with purge deletes the table's files.
    fx.append(&ident, 0, 10).await;
    let location = fx
        .load(&ident)
        .await
        .metadata()
        .location()
        .trim_start_matches("file://")
        .to_string();
    let files_before = walk(&location);
    assert!(files_before > 0);
    floe::operations::clean::purge::DropBuilder::new(&fx.catalog, ident.clone())
        .with_purge(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(walk(&location), 0, "purge left files behind");
    assert!(fx.catalog.list_tables(None).await.unwrap().is_empty());
}

fn walk(dir: &str) -> usize {
    fn rec(p: &std::path::Path) -> usize {
        match std::fs::read_dir(p) {
            Err(_) => 0,
            Ok(rd) => rd
                .flatten()
                .map(|e| if e.path().is_dir() { rec(&e.path()) } else { 1 })
                .sum(),
        }
    }
    rec(std::path::Path::new(dir))
}

#[tokio::test]
async fn corrupt_metadata_is_a_clear_error() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    let loc = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    std::fs::write(loc.trim_start_matches("file://"), b"{not json").unwrap();
    let err = fx.catalog.load_table(&ident).await.unwrap_err();
    assert!(matches!(err, Error::Metadata { .. }), "{err}");
    assert!(err.to_string().contains("metadata"), "{err}");
}

#[tokio::test]
async fn unreachable_catalog_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CatalogConfig::embedded(Some(dir.path())).unwrap();
    config.uri = "postgres://nobody@127.0.0.1:1/none".into();
    let err = Catalog::connect(&config).await.unwrap_err();
    assert!(matches!(err, Error::Catalog { .. }), "{err}");
}

#[tokio::test]
async fn postgres_catalog_creates_appends_and_commits() {
    let Ok(url) = std::env::var("FLOE_TEST_POSTGRES_URL") else {
        panic!("FLOE_TEST_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL");
    };
    let dir = tempfile::tempdir().unwrap();
    let name = format!("floe_test_{}", std::process::id());
    let mut config = CatalogConfig::embedded(Some(dir.path())).unwrap();
    config.name = name;
    config.uri = url;
    let catalog = Catalog::connect(&config).await.unwrap();
    let fx = Fixture {
        _dir: dir,
        config,
        catalog,
    };
    let ident = fx.table("pg.events", Some("bucket(4, id)")).await;
    fx.append(&ident, 0, 100).await;
    fx.append(&ident, 100, 250).await;
    assert_eq!(fx.count_and_sum(&ident).await, (250, sum_ids(0, 250)));
    // A second connection sees the same pointer and can commit on top.
    let other = fx.second_connection().await;
    let b = fx.batch(&ident, 250, 300).await;
    floe::operations::append::AppendBuilder::from_batches(&other, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (300, sum_ids(0, 300)));
    floe::operations::clean::purge::DropBuilder::new(&fx.catalog, ident.clone())
        .with_purge(true)
        .execute()
        .await
        .unwrap();
}

#[tokio::test]
async fn catalog_created_by_pyiceberg_works_in_floe_and_back() {
    if python().is_none() {
        panic!("FLOE_PYTHON is not set: run the tests through .ci/test");
    }
    // PyIceberg creates the catalog database, the table, and appends (3 commits, 600 rows).
    let dir = tempfile::tempdir().unwrap();
    let wh_path = dir.path().join("warehouse");
    std::fs::create_dir_all(&wh_path).unwrap();
    let wh = wh_path.display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let created = run_python(
        "tests/interop/pyiceberg_write.py",
        &[
            "--catalog-uri",
            &uri,
            "--warehouse",
            &wh,
            "--table",
            "py.events",
            "--rows",
            "600",
            "--batches",
            "3",
        ],
    );
    assert_eq!(created["rows"], 600);
    // floe opens that catalog and reads the table ...
    let config = CatalogConfig::embedded(Some(&wh_path)).unwrap();
    let catalog = Catalog::connect(&config).await.unwrap();
    let ident = parse_table_ident("py.events").unwrap();
    assert_eq!(
        crate::common::count_and_sum(&catalog, &ident).await,
        (600, sum_ids(0, 600))
    );
    // ... appends to it ...
    let table = catalog.load_table(&ident).await.unwrap();
    let batch = crate::common::make_batch(&table, 600, 700);
    floe::operations::append::AppendBuilder::from_batches(&catalog, ident.clone(), vec![batch])
        .execute()
        .await
        .unwrap();
    // ... and PyIceberg and DuckDB read floe's commit identically.
    let read = crate::common::read_catalog_with_python(&wh_path, "py.events");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(read[reader]["rows"], 700, "{reader}: {read}");
        assert_eq!(read[reader]["sum"], sum_ids(0, 700), "{reader}: {read}");
    }
    assert_eq!(read["pyiceberg"]["checksum"], read["duckdb"]["checksum"]);
}

#[tokio::test]
async fn a_locked_sqlite_catalog_is_a_clear_error_and_commits_nothing() {
    use sqlx::Connection;
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    fx.append(&ident, 0, 10).await;
    let b = fx.batch(&ident, 10, 20).await;
    // Another process holds the catalog database exclusively.
    let db = fx.warehouse().join("catalog.db");
    let mut locker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let err =
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .execute()
            .await
            .unwrap_err();
    assert!(matches!(err, Error::Catalog { .. }), "{err}");
    assert!(err.to_string().contains("locked"), "{err}");
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    drop(locker);
    assert_eq!(
        fx.count_and_sum(&ident).await,
        (10, sum_ids(0, 10)),
        "nothing committed"
    );
}

/// What a catalog keeps between commits is never stale and never less than the table: a kept
/// load sees another process's commit, the table an append's commit returns and the one a kept
/// load returns after it hold the whole history (not the head the append committed on), and
/// the files written read the same from a fresh load and in PyIceberg.
#[tokio::test]
async fn kept_tables_follow_the_pointer_and_hold_the_whole_history() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.kept", None).await;
    for k in 0..5 {
        fx.append(&ident, k * 10, k * 10 + 10).await;
    }
    let other = fx.second_connection().await;
    let kept = fx.catalog.load_table_kept(&ident).await.unwrap();
    assert_eq!(kept.metadata().snapshots().count(), 5);

    // Another process commits: the kept load follows the pointer.
    floe::operations::append::AppendBuilder::from_batches(
        &other,
        ident.clone(),
        vec![fx.batch(&ident, 50, 60).await],
    )
    .execute()
    .await
    .unwrap();
    let kept = fx.catalog.load_table_kept(&ident).await.unwrap();
    assert_eq!(kept.metadata().snapshots().count(), 6);
    assert_eq!(
        kept.metadata_location(),
        other.load_table(&ident).await.unwrap().metadata_location()
    );

    // This process appends (a head, spliced): what it then holds is the whole table.
    let id = fx.append(&ident, 60, 70).await;
    for t in [
        fx.catalog.load_table_kept(&ident).await.unwrap(),
        other.load_table(&ident).await.unwrap(),
    ] {
        let md = t.metadata();
        assert!(!floe::table::metadata_json::is_head(md));
        assert_eq!(md.snapshots().count(), 7);
        assert_eq!(md.history().len(), 7, "the snapshot log goes on");
        assert_eq!(md.current_snapshot_id(), Some(id));
    }
    assert_eq!(fx.count_and_sum(&ident).await, (70, sum_ids(0, 70)));
    let read = crate::common::read_with_python(&fx, "db.kept");
    assert_eq!(read["pyiceberg"]["rows"], 70);
    assert_eq!(read["duckdb"]["rows"], 70);
}

/// A table whose metadata is gzip-compressed (`write.metadata.compression-codec=gzip`) gets its
/// appends spliced too: each next file is gzipped under a `.gz.metadata.json` name, loads whole
/// and reads the same in PyIceberg and DuckDB.
#[tokio::test]
async fn spliced_appends_write_gzip_metadata_when_the_table_says_so() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.gz", None).await;
    fx.set_property(&ident, "write.metadata.compression-codec", "gzip")
        .await;
    for k in 0..3 {
        fx.append(&ident, k * 10, k * 10 + 10).await;
    }
    let t = fx.load(&ident).await;
    let location = t.metadata_location().unwrap().to_string();
    assert!(location.ends_with(".gz.metadata.json"), "{location}");
    let bytes = std::fs::read(location.trim_start_matches("file://")).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip magic");
    assert_eq!(t.metadata().snapshots().count(), 3);
    assert_eq!(t.metadata().history().len(), 3);
    assert_eq!(fx.count_and_sum(&ident).await, (30, sum_ids(0, 30)));
    let read = crate::common::read_with_python(&fx, "db.gz");
    assert_eq!(read["pyiceberg"]["rows"], 30);
    assert_eq!(read["duckdb"]["rows"], 30);
}
