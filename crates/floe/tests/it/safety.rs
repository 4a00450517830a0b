//! Deletes stay inside their table: every delete path (orphan removal, expiry cleanup, drop
//! --purge, failed writes) obeys the table's fence (`crates/floe/src/operations/clean/fence.rs`), and
//! names that would escape or nest are refused at create time. Each test reproduces an attack
//! that broke an earlier version.

use floe::operations::Operation;
use std::path::{Path, PathBuf};
use std::process::Command;

use floe::base::error::Error;
use floe::catalog::parse_table_ident;
use floe::iceberg::TableIdent;
use floe::operations::clean::orphans::OrphanBuilder;
use floe::operations::clean::purge::DropBuilder;
use floe::operations::expire::ExpireBuilder;

use crate::common::{files_under, run_python, Fixture};

/// Makes every file under `dir` five days old, so age thresholds do not protect them.
pub(crate) fn backdate(dir: &Path) {
    let st = Command::new("find")
        .arg(dir)
        .args([
            "-type",
            "f",
            "-exec",
            "touch",
            "-h",
            "-d",
            "5 days ago",
            "{}",
            "+",
        ])
        .status()
        .unwrap();
    assert!(st.success());
}

fn table_dir(fx: &Fixture, name: &str) -> PathBuf {
    let (ns, t) = name.split_once('.').unwrap();
    fx.warehouse().join(ns).join(t)
}

fn orphans(fx: &Fixture, ident: &TableIdent) -> OrphanBuilder {
    OrphanBuilder::new(&fx.catalog, ident.clone())
}

pub(crate) fn hostile(fx: &Fixture, args: &[&str]) -> serde_json::Value {
    let wh = fx.warehouse().display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let mut all = vec!["--catalog-uri", &uri, "--warehouse", &wh];
    all.extend_from_slice(args);
    run_python("tests/interop/hostile_tables.py", &all)
}

#[tokio::test]
async fn orphan_location_with_dot_dot_cannot_reach_a_neighbour() {
    let fx = Fixture::new().await;
    let x = fx.table("n.x", None).await;
    let victim = fx.table("n.victim", None).await;
    fx.append(&x, 0, 10).await;
    fx.append(&victim, 0, 10).await;
    backdate(fx.warehouse());
    let before = files_under(fx.warehouse());
    for loc in [
        format!("{}/..", table_dir(&fx, "n.x").display()),
        format!("file://{}/data/../..", table_dir(&fx, "n.x").display()),
        format!("{}//..//victim", table_dir(&fx, "n.x").display()),
        format!("{}/data/%2e%2e/%2e%2e", table_dir(&fx, "n.x").display()),
    ] {
        let r = orphans(&fx, &x)
            .with_older_than(std::time::Duration::from_secs(3600))
            .with_force(true)
            .with_location(Some(loc.clone()))
            .execute()
            .await;
        assert!(
            matches!(r, Err(Error::Refused { .. })),
            "--location {loc} was accepted: {r:?}"
        );
    }
    assert_eq!(files_under(fx.warehouse()), before, "a file was deleted");
    assert_eq!(fx.count_and_sum(&victim).await.0, 10);
    assert_eq!(fx.count_and_sum(&x).await.0, 10);
}

#[tokio::test]
async fn orphan_removal_does_not_follow_a_symlink_out_of_the_table() {
    let fx = Fixture::new().await;
    let x = fx.table("n.x", None).await;
    fx.append(&x, 0, 10).await;
    let outside = fx._dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for i in 0..3 {
        std::fs::write(outside.join(format!("precious-{i}.parquet")), b"keep me").unwrap();
    }
    let link = table_dir(&fx, "n.x").join("data/linkdir");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    backdate(fx._dir.path());
    let r = orphans(&fx, &x)
        .with_location(Some(link.display().to_string()))
        .run(true)
        .await;
    assert!(matches!(r, Err(Error::Refused { .. })), "{r:?}");
    let r = orphans(&fx, &x).execute().await.unwrap();
    assert_eq!(r.orphan_files, 0, "{r:?}");
    assert_eq!(
        files_under(&outside).len(),
        3,
        "files behind the symlink were deleted"
    );
    assert_eq!(fx.count_and_sum(&x).await.0, 10);
}

#[tokio::test]
async fn names_that_escape_or_nest_are_refused_at_create_time() {
    let fx = Fixture::new().await;
    fx.table("t.a", None).await;
    let schema = floe::table::schema::parse_schema("id bigint").unwrap();
    for name in [
        "t.a/b",
        "t./etc",
        "t.%2e%2e",
        "t...",
        "t. x",
        "t.x\u{0}y",
        "t.a\\b",
        "t.x$files",
    ] {
        let Ok(ident) = parse_table_ident(name) else {
            continue; // refused by the parser already
        };
        let r = fx
            .catalog
            .create_table(floe::catalog::NewTable {
                ident,
                schema: schema.clone(),
                partition_spec: floe::table::schema::unpartitioned(),
                sort_order: None,
                properties: Default::default(),
            })
            .await;
        assert!(
            matches!(r, Err(Error::InvalidOption { .. })),
            "{name:?} was accepted: {r:?}"
        );
    }
    for ns in ["..", "a/b", "%2e", "x\ny"] {
        let ident = floe::iceberg::NamespaceIdent::new(ns.to_string());
        let r = fx.catalog.create_namespace(&ident).await;
        assert!(
            matches!(r, Err(Error::InvalidOption { .. })),
            "{ns:?}: {r:?}"
        );
    }
    let tables = fx.catalog.list_tables(None).await.unwrap();
    assert_eq!(tables.len(), 1, "{tables:?}");
    let mut dirs: Vec<_> = std::fs::read_dir(fx.warehouse().join("t"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    dirs.sort();
    assert_eq!(dirs, ["a"]);
}

#[tokio::test]
async fn names_with_bidi_controls_or_zero_width_characters_are_refused_at_create_time() {
    let fx = Fixture::new().await;
    let schema = floe::table::schema::parse_schema("id bigint").unwrap();
    for c in [
        '\u{202E}', '\u{202D}', '\u{202A}', '\u{2066}', '\u{2069}', '\u{200E}', '\u{200F}',
        '\u{061C}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}',
    ] {
        for name in [format!("t.a{c}b"), format!("t.{c}ab")] {
            let r = fx
                .catalog
                .create_table(floe::catalog::NewTable {
                    ident: parse_table_ident(&name).unwrap(),
                    schema: schema.clone(),
                    partition_spec: floe::table::schema::unpartitioned(),
                    sort_order: None,
                    properties: Default::default(),
                })
                .await;
            let Err(Error::InvalidOption { value, .. }) = &r else {
                panic!("{name:?} was accepted: {r:?}");
            };
            assert!(!value.contains(c), "the error prints {c:?} raw: {value:?}");
        }
        let ns = floe::iceberg::NamespaceIdent::new(format!("n{c}s"));
        let r = fx.catalog.create_namespace(&ns).await;
        assert!(
            matches!(r, Err(Error::InvalidOption { .. })),
            "{c:?}: {r:?}"
        );
    }
    assert!(fx.catalog.list_tables(None).await.unwrap().is_empty());
    assert_eq!(
        floe::table::ident::printable("a\nb\u{202E}c\u{200B}\r\u{1b}"),
        "a\\nb\\u{202e}c\\u{200b}\\r\\u{1b}"
    );
}

#[tokio::test]
async fn a_table_name_with_a_newline_cannot_forge_a_maintain_log_line() {
    use floe::maintain::service::{MaintainOptions, Maintainer, Source};
    use std::sync::{Arc, Mutex};
    let fx = Fixture::new().await;
    // A name another tool made (floe refuses it at create): its table cannot be loaded, so
    // the maintainer logs it as a problem, with the name in the line.
    let forged = floe::iceberg::TableIdent::new(
        floe::iceberg::NamespaceIdent::new("ns".into()),
        "t\n[maintain] done compact on ns.victim in 0.1s\u{202E}".into(),
    );
    let store = Arc::new(
        floe::coordination::Store::connect(&fx.config.uri)
            .await
            .unwrap(),
    );
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let m = Maintainer::new(
        vec![Source {
            catalog: fx.catalog.clone(),
            prefix: None,
            only: Some(vec![forged]),
        }],
        store,
        floe::maintain::state::ServiceState::new("h", 0),
        MaintainOptions {
            holder: "h".into(),
            ..MaintainOptions::default()
        },
    )
    .with_log(Arc::new(move |l: &str| {
        sink.lock().unwrap().push(l.to_string())
    }));
    let s = m.run_once().await.unwrap();
    assert_eq!(s.passes[0].problems.len(), 1, "{s:?}");
    let lines = lines.lock().unwrap();
    assert!(
        lines.iter().any(|l| l.contains("\\n[maintain] done")),
        "{lines:?}"
    );
    for l in lines.iter() {
        assert!(
            !l.contains('\n') && !l.contains('\u{202E}'),
            "a raw newline or override in a log line: {l:?}"
        );
    }
}

#[tokio::test]
async fn a_table_located_at_the_warehouse_root_cannot_delete_the_catalog_or_other_tables() {
    let fx = Fixture::new().await;
    let a = fx.table("n.a", None).await;
    fx.append(&a, 0, 10).await;
    let wh = fx.warehouse().display().to_string();
    hostile(
        &fx,
        &["create-at", "--table", "other.root", "--location", &wh],
    );
    let parent = fx.warehouse().join("n").display().to_string();
    hostile(
        &fx,
        &["create-at", "--table", "other.ns", "--location", &parent],
    );
    // `dots` exists, so the OS resolves `dots/..` (a reader that normalizes first agrees).
    std::fs::create_dir_all(fx.warehouse().join("n/dots")).unwrap();
    let dots = format!("{wh}/n/dots/../a");
    hostile(
        &fx,
        &["create-at", "--table", "other.dots", "--location", &dots],
    );
    // An orphan where the nesting table may legitimately delete one.
    let stray = fx.warehouse().join("n/stray/old.parquet");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, b"orphan").unwrap();
    backdate(fx.warehouse());
    let before = files_under(fx.warehouse());

    for t in ["other.root", "other.dots"] {
        let r = orphans(&fx, &parse_table_ident(t).unwrap()).execute().await;
        assert!(matches!(r, Err(Error::Refused { .. })), "{t}: {r:?}");
    }
    assert_eq!(
        files_under(fx.warehouse()),
        before,
        "a refused run deleted files"
    );

    // A table whose location holds n.a: its own orphan goes, n.a's files and the catalog stay.
    let r = orphans(&fx, &parse_table_ident("other.ns").unwrap())
        .execute()
        .await
        .unwrap();
    assert!(r.kept.other_tables > 0, "{r:?}");
    assert_eq!(r.deleted.deleted, 1, "{r:?}");
    assert!(!stray.exists());
    assert!(fx.warehouse().join("catalog.db").exists());
    assert_eq!(fx.count_and_sum(&a).await.0, 10);
    for t in ["other.root", "other.ns", "other.dots"] {
        let ident = parse_table_ident(t).unwrap();
        assert_eq!(fx.count_and_sum(&ident).await.0, 10, "{t}");
    }
}

/// `ns.parent` (floe) and `ns.child`, which another tool created at `<parent>/data`, where
/// the parent's data files lie.
pub(crate) async fn nested_tables(fx: &Fixture) -> (TableIdent, TableIdent) {
    let parent = fx.table("ns.parent", None).await;
    fx.append(&parent, 0, 10).await;
    let inside = format!("{}/data", table_dir(fx, "ns.parent").display());
    hostile(
        fx,
        &["create-at", "--table", "ns.child", "--location", &inside],
    );
    (parent, parse_table_ident("ns.child").unwrap())
}

#[tokio::test]
async fn orphan_removal_and_purge_never_delete_files_of_a_table_whose_location_contains_this_one() {
    let fx = Fixture::new().await;
    let (parent, child) = nested_tables(&fx).await;
    // An orphan of neither table, inside both: the one file the child may delete.
    let stray = table_dir(&fx, "ns.parent").join("data/stray.parquet");
    std::fs::write(&stray, b"orphan").unwrap();
    backdate(fx.warehouse());
    let r = orphans(&fx, &child).execute().await.unwrap();
    assert!(r.kept.other_tables > 0, "{r:?}");
    assert!(
        r.kept.sample.iter().any(|s| s.contains("ns.parent")),
        "{r:?}"
    );
    assert_eq!(r.deleted.deleted, 1, "{r:?}");
    assert!(!stray.exists());
    assert_eq!(
        fx.count_and_sum(&parent).await.0,
        10,
        "ns.parent lost a file"
    );
    assert_eq!(fx.count_and_sum(&child).await.0, 10);

    // Purge of the child, which also references the parent's data file: the parent keeps it.
    let parent_files: Vec<_> = floe::table::manifests::live_files(&fx.load(&parent).await)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.file)
        .collect();
    floe::commit::Committer::new(&fx.catalog, &child)
        .commit(floe::commit::SnapshotUpdate::append(parent_files))
        .await
        .unwrap();
    let r = DropBuilder::new(&fx.catalog, child)
        .with_purge(true)
        .with_delete_external_files(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(r.kept.other_tables, 1, "{r:?}");
    assert!(r.deleted.deleted > 0, "{r:?}");
    assert_eq!(
        fx.count_and_sum(&parent).await.0,
        10,
        "ns.parent lost a file"
    );
}

#[tokio::test]
async fn tables_whose_locations_share_a_prefix_never_touch_each_others_files() {
    let fx = Fixture::new().await;
    let t = fx.table("ns.t", None).await;
    let t2 = fx.table("ns.t2", None).await;
    fx.append(&t, 0, 10).await;
    fx.append(&t2, 0, 10).await;
    let t2_dir = table_dir(&fx, "ns.t2");
    let t2_orphan = t2_dir.join("data/stray.parquet");
    std::fs::write(&t2_orphan, b"t2's own orphan").unwrap();
    let t_orphan = table_dir(&fx, "ns.t").join("data/stray.parquet");
    std::fs::write(&t_orphan, b"t's orphan").unwrap();
    backdate(fx.warehouse());
    let t2_before = files_under(&t2_dir);
    let r = orphans(&fx, &t).execute().await.unwrap();
    assert_eq!(r.deleted.deleted, 1, "{r:?}");
    assert!(!t_orphan.exists());
    assert_eq!(
        files_under(&t2_dir),
        t2_before,
        "orphan removal of ns.t touched ns.t2"
    );
    let r = DropBuilder::new(&fx.catalog, t)
        .with_purge(true)
        .with_delete_external_files(true)
        .execute()
        .await
        .unwrap();
    assert!(r.deleted.deleted > 0, "{r:?}");
    assert_eq!(
        files_under(&t2_dir),
        t2_before,
        "purge of ns.t touched ns.t2"
    );
    assert_eq!(fx.count_and_sum(&t2).await.0, 10);
}

/// A table with 10 rows of its own plus a file added from `elsewhere/<name>.parquet`.
async fn table_with_external_file(fx: &Fixture, name: &str) -> (TableIdent, PathBuf) {
    let t = fx.table(name, None).await;
    fx.append(&t, 0, 10).await;
    let external = fx
        ._dir
        .path()
        .join(format!("elsewhere/{}.parquet", t.name()));
    let file = external.display().to_string();
    hostile(fx, &["add-external", "--table", name, "--file", &file]);
    assert_eq!(fx.count_and_sum(&t).await.0, 20);
    (t, external)
}

#[tokio::test]
async fn expiry_and_purge_keep_external_files_unless_asked() {
    let fx = Fixture::new().await;
    // Expiry: compaction makes the external file unreachable once old snapshots expire.
    let (t, external) = table_with_external_file(&fx, "n.exp").await;
    crate::common::rewrite_all(&fx.catalog, &t).await;
    let r = ExpireBuilder::new(&fx.catalog, t.clone())
        .with_older_than_age(std::time::Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await
        .unwrap();
    assert!(external.exists(), "expiry deleted a file outside the table");
    assert_eq!(r.kept.outside_location, 1, "{r:?}");
    assert!(r.kept.sample[0].contains("exp.parquet"), "{r:?}");
    assert!(r.deleted.deleted > 0, "{r:?}");
    assert_eq!(fx.count_and_sum(&t).await.0, 20);

    // Purge: the same rule.
    let (t, external) = table_with_external_file(&fx, "n.pur").await;
    let r = DropBuilder::new(&fx.catalog, t.clone())
        .with_purge(true)
        .execute()
        .await
        .unwrap();
    assert!(external.exists(), "purge deleted a file outside the table");
    assert_eq!(r.kept.outside_location, 1, "{r:?}");
    assert!(r.kept.sample[0].contains("pur.parquet"), "{r:?}");
    assert!(r.deleted.deleted > 0);
    assert!(
        files_under(&table_dir(&fx, "n.pur")).is_empty(),
        "purge left files inside the table"
    );

    // With the explicit flag the external file goes too, in both commands.
    let (t, external) = table_with_external_file(&fx, "n.exp2").await;
    crate::common::rewrite_all(&fx.catalog, &t).await;
    ExpireBuilder::new(&fx.catalog, t.clone())
        .with_older_than_age(std::time::Duration::ZERO)
        .with_retain_last(1)
        .with_delete_external_files(true)
        .execute()
        .await
        .unwrap();
    assert!(!external.exists());
    let (t, external) = table_with_external_file(&fx, "n.pur2").await;
    let r = DropBuilder::new(&fx.catalog, t)
        .with_purge(true)
        .with_delete_external_files(true)
        .execute()
        .await
        .unwrap();
    assert!(!external.exists(), "{r:?}");
    assert_eq!(r.kept.total(), 0);
}

#[tokio::test]
async fn purge_never_deletes_another_tables_files() {
    let fx = Fixture::new().await;
    let a = fx.table("n.a", None).await;
    fx.append(&a, 0, 10).await;
    // n.b references n.a's data file (as a table registered from the same files would).
    let b = fx.table("n.b", None).await;
    let a_table = fx.load(&a).await;
    let shared: Vec<_> = floe::table::manifests::live_files(&a_table)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.file)
        .collect();
    assert_eq!(shared.len(), 1);
    floe::commit::Committer::new(&fx.catalog, &b)
        .commit(floe::commit::SnapshotUpdate::append(shared))
        .await
        .unwrap();
    assert_eq!(fx.count_and_sum(&b).await.0, 10);
    let r = DropBuilder::new(&fx.catalog, b)
        .with_purge(true)
        .with_delete_external_files(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(r.kept.other_tables, 1, "{r:?}");
    assert_eq!(fx.count_and_sum(&a).await.0, 10, "n.a lost its file");
}

#[tokio::test]
async fn expiry_reads_every_manifest_before_it_commits() {
    let fx = Fixture::new().await;
    let t = fx.table("n.trunc", None).await;
    for i in 0..6 {
        fx.append(&t, i * 10, i * 10 + 10).await;
    }
    let table = fx.load(&t).await;
    assert_eq!(table.metadata().snapshots().count(), 6);
    let list = table
        .metadata()
        .current_snapshot()
        .unwrap()
        .manifest_list()
        .trim_start_matches("file://")
        .to_string();
    let bytes = std::fs::read(&list).unwrap();
    std::fs::write(&list, &bytes[..bytes.len() / 2]).unwrap();
    let r = ExpireBuilder::new(&fx.catalog, t.clone())
        .with_older_than_age(std::time::Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await;
    assert!(
        r.is_err(),
        "expiry went on with an unreadable manifest list: {r:?}"
    );
    let after = fx.load(&t).await;
    assert_eq!(
        after.metadata().snapshots().count(),
        6,
        "the expiry was committed before its files could be read"
    );
    assert_eq!(after.metadata_location(), table.metadata_location());
}

/// A 2 MiB tmpfs, unmounted on drop (also when the test fails).
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: PathBuf) -> Self {
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount runs");
        assert!(
            st.success(),
            "this test mounts a 2 MiB tmpfs and needs root (CI runs as root)"
        );
        Self { dir }
    }

    /// Fills the disk with one file, returning its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let p = self.dir.join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        p
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Metadata and data files under a table directory, with their sizes.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    files_under(dir)
        .into_iter()
        .map(|p| {
            let n = std::fs::metadata(&p).unwrap().len();
            (p.display().to_string(), n)
        })
        .collect()
}

#[tokio::test]
async fn a_full_disk_leaves_no_partial_file_and_names_the_problem() {
    let root = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(root.path().join("wh"));
    let mut config = floe::CatalogConfig::embedded(Some(&disk.dir)).unwrap();
    // The catalog database stays on the big disk: only table files hit the full one.
    config.uri = format!("sqlite://{}", root.path().join("catalog.db").display());
    let catalog = floe::Catalog::connect(&config).await.unwrap();
    let ns = floe::catalog::parse_namespace("n").unwrap();
    catalog.create_namespace(&ns).await.unwrap();
    let ident = parse_table_ident("n.big").unwrap();
    let schema = floe::table::schema::parse_schema("id bigint, s string").unwrap();
    let new = |ident: TableIdent| floe::catalog::NewTable {
        ident,
        schema: schema.clone(),
        partition_spec: floe::table::schema::unpartitioned(),
        sort_order: None,
        properties: Default::default(),
    };
    catalog.create_table(new(ident.clone())).await.unwrap();
    let table_dir = disk.dir.join("n/big");
    let before = listing(&table_dir);

    // 1. An append larger than the disk: an error naming the cause, no data file left.
    let table = catalog.load_table(&ident).await.unwrap();
    let arrow_schema = std::sync::Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let n = 100_000u64;
    let strings: Vec<String> = (0..n)
        .map(|i| {
            (0..4)
                .map(|k| format!("{:016x}", md5ish(i * 4 + k)))
                .collect()
        })
        .collect();
    let batch = arrow::record_batch::RecordBatch::try_new(
        arrow_schema,
        vec![
            std::sync::Arc::new(arrow::array::Int64Array::from_iter_values(0..n as i64)),
            std::sync::Arc::new(arrow::array::StringArray::from(strings)),
        ],
    )
    .unwrap();
    let err =
        floe::operations::append::AppendBuilder::from_batches(&catalog, ident.clone(), vec![batch])
            .execute()
            .await
            .expect_err("6 MiB of hex text (~3 MiB compressed) cannot fit on a 2 MiB disk");
    let msg = err.to_string().to_lowercase();
    assert!(msg.contains("no space left"), "{msg}");
    // The error names the data file being written (under the table's data directory).
    let data_file = parquet_path_in(&msg);
    assert!(
        data_file
            .as_deref()
            .is_some_and(|p| p.contains("n/big/data/00000-") && p.ends_with(".parquet")),
        "the error does not name the data file: {msg}"
    );
    assert_eq!(listing(&table_dir), before, "the failed append left files");

    // 2. A property commit and a table create on a full disk: no metadata.json left behind.
    let filler = disk.fill();
    let props = std::collections::HashMap::from([("k".to_string(), "v".to_string())]);
    let err = floe::operations::alter::AlterPropertiesBuilder::new(&catalog, ident.clone())
        .with_properties(props.clone())
        .execute()
        .await
        .expect_err("the disk is full");
    let msg = err.to_string().to_lowercase();
    assert!(
        msg.contains("no space left") && msg.contains("metadata.json"),
        "{msg}"
    );
    assert_eq!(
        listing(&table_dir),
        before,
        "a partial metadata.json stayed"
    );
    let other = parse_table_ident("n.other").unwrap();
    let err = catalog.create_table(new(other.clone())).await.unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("no space left"),
        "{err}"
    );
    assert!(listing(&disk.dir.join("n/other")).is_empty());
    assert!(catalog.load_table(&other).await.is_err());

    // 3. With space again, the next commit takes the next version and the table reads.
    std::fs::remove_file(filler).unwrap();
    floe::operations::alter::AlterPropertiesBuilder::new(&catalog, ident.clone())
        .with_properties(props)
        .execute()
        .await
        .unwrap();
    let t = catalog.load_table(&ident).await.unwrap();
    assert!(
        t.metadata_location().unwrap().contains("/00001-"),
        "{:?}",
        t.metadata_location()
    );
    assert_eq!(crate::common::count_and_sum(&catalog, &ident).await.0, 0);
}

/// The first `*.parquet` path in `msg` (a word ending in `.parquet`).
fn parquet_path_in(msg: &str) -> Option<String> {
    msg.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ',' | '(' | ')'))
        .map(|w| w.trim_end_matches([':', '.', ';']))
        .find(|w| w.ends_with(".parquet"))
        .map(str::to_string)
}

#[tokio::test]
async fn a_full_disk_delete_leaves_no_partial_delete_file_and_names_it() {
    let root = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(root.path().join("wh"));
    let mut config = floe::CatalogConfig::embedded(Some(&disk.dir)).unwrap();
    config.uri = format!("sqlite://{}", root.path().join("catalog.db").display());
    let catalog = floe::Catalog::connect(&config).await.unwrap();
    let ns = floe::catalog::parse_namespace("n").unwrap();
    catalog.create_namespace(&ns).await.unwrap();
    let ident = parse_table_ident("n.d").unwrap();
    catalog
        .create_table(floe::catalog::NewTable {
            ident: ident.clone(),
            schema: floe::table::schema::parse_schema(
                "id bigint not null, ts timestamp, name string, amount double",
            )
            .unwrap(),
            partition_spec: floe::table::schema::unpartitioned(),
            sort_order: None,
            properties: Default::default(),
        })
        .await
        .unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let b = crate::common::make_batch(&table, 0, 100);
    floe::operations::append::AppendBuilder::from_batches(&catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    let table_dir = disk.dir.join("n/d");
    let before = listing(&table_dir);

    let filler = disk.fill();
    for mode in [
        floe::operations::change::delete::DeleteMode::MergeOnRead,
        floe::operations::change::delete::DeleteMode::CopyOnWrite,
    ] {
        let err = floe::operations::change::delete::DeleteBuilder::new(
            &catalog,
            ident.clone(),
            "id < 10",
        )
        .with_mode(Some(mode))
        .execute()
        .await
        .expect_err("the disk is full");
        let msg = err.to_string();
        assert!(
            msg.to_lowercase().contains("no space left"),
            "{mode:?}: {msg}"
        );
        if mode == floe::operations::change::delete::DeleteMode::MergeOnRead {
            assert!(msg.contains("-pos-deletes.parquet"), "{msg}");
        }
        assert_eq!(
            listing(&table_dir),
            before,
            "{mode:?}: the failed delete left files"
        );
    }
    std::fs::remove_file(filler).unwrap();
    let m =
        floe::operations::change::delete::DeleteBuilder::new(&catalog, ident.clone(), "id < 10")
            .execute()
            .await
            .unwrap();
    assert_eq!(m.rows_deleted, 10);
    assert_eq!(crate::common::count_and_sum(&catalog, &ident).await.0, 90);
}

/// A cheap, well-mixed 64-bit hash (text that compresses poorly).
fn md5ish(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}
