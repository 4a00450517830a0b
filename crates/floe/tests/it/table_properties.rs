//! Table properties: known ones are validated when set, and a bad value stored by another tool
//! never blocks the property update that repairs the table, while the commands that need it fail
//! naming the table, the key and the repair.

use floe::operations::Operation;
use std::collections::HashMap;
use std::process::Command;

use floe::iceberg::{TableIdent, TableUpdate};
use floe::Error;

use crate::common::{make_batch, python, repo_root, Fixture};

/// Stores `key=value` through the catalog's raw commit, below floe's validation (what another
/// engine, or an older floe, may have written).
async fn store_raw(fx: &Fixture, ident: &TableIdent, key: &str, value: &str) {
    let table = fx.load(ident).await;
    crate::common::commit_raw(
        &fx.catalog,
        &table,
        vec![TableUpdate::SetProperties {
            updates: HashMap::from([(key.to_string(), value.to_string())]),
        }],
    )
    .await;
    assert_eq!(
        fx.load(ident).await.metadata().properties().get(key),
        Some(&value.to_string())
    );
}

async fn try_append(fx: &Fixture, ident: &TableIdent, from: i64, to: i64) -> floe::Result<()> {
    let table = fx.load(ident).await;
    let batch = make_batch(&table, from, to);
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![batch])
        .execute()
        .await
        .map(|_| ())
}

fn data_files(fx: &Fixture) -> usize {
    fn walk(dir: &std::path::Path, n: &mut usize) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, n);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(fx.warehouse(), &mut n);
    n
}

#[tokio::test]
async fn set_property_refuses_a_bad_value_of_a_known_key_and_commits_nothing() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.refused", None).await;
    let before = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    for (key, value) in [
        ("commit.retry.num-retries", "-1"),
        ("commit.retry.min-wait-ms", "soon"),
        ("write.target-file-size-bytes", "0"),
        ("write.parquet.compression-codec", "brotli"),
        ("history.expire.min-snapshots-to-keep", "0"),
        ("gc.enabled", "nope"),
        ("floe.compact.min-input-files", "0"),
        ("floe.compact.no-such-option", "1"),
        ("floe.ingest.write-buffer-size", "-5"),
    ] {
        let e = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
            .with_property(key, value)
            .execute()
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidOption { .. }), "{key}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(key) && msg.contains(value) && msg.contains("expected"),
            "{key}={value}: {msg}"
        );
    }
    let after = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    assert_eq!(before, after, "no commit for a refused update");
    // Valid values still go through, in canonical form.
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_properties(HashMap::from([
            ("commit.retry.num-retries".to_string(), "+7".to_string()),
            ("gc.enabled".to_string(), "TRUE".to_string()),
            ("owner".to_string(), "anything at all".to_string()),
        ]))
        .execute()
        .await
        .unwrap();
    let t = fx.load(&ident).await;
    let p = t.metadata().properties();
    assert_eq!(p["commit.retry.num-retries"], "7");
    assert_eq!(p["gc.enabled"], "true");
    assert_eq!(p["owner"], "anything at all");
}

#[tokio::test]
async fn a_bad_stored_retry_setting_fails_commits_by_name_and_unsetting_it_repairs_the_table() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.retry", None).await;
    try_append(&fx, &ident, 0, 10).await.unwrap();
    store_raw(&fx, &ident, "commit.retry.num-retries", "-1").await;
    let files_before = data_files(&fx);

    // Commands that need the value fail, naming the table, the key, the value and the repair,
    // and leave no file behind.
    let e = try_append(&fx, &ident, 10, 20).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::InvalidTableProperty { .. }), "{e:?}");
    for part in [
        "props.retry",
        "commit.retry.num-retries",
        "'-1'",
        "floe table set-property props.retry --unset commit.retry.num-retries",
    ] {
        assert!(msg.contains(part), "{part}: {msg}");
    }
    assert_eq!(
        data_files(&fx),
        files_before,
        "the failed append left files"
    );

    // Another property update still commits (with Iceberg's default retries)...
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("owner", "me")
        .execute()
        .await
        .unwrap();
    // ...and so does the repair.
    let r = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_unset("commit.retry.num-retries")
        .execute()
        .await
        .unwrap();
    assert!(!r.properties.contains_key("commit.retry.num-retries"));
    try_append(&fx, &ident, 10, 20).await.unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (20, (0..20).sum()));
}

#[tokio::test]
async fn a_bad_stored_value_can_be_replaced_by_a_valid_one() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.replace", None).await;
    store_raw(&fx, &ident, "commit.retry.max-wait-ms", "later").await;
    store_raw(&fx, &ident, "commit.manifest.min-count-to-merge", "many").await;
    let e = try_append(&fx, &ident, 0, 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("commit.retry.max-wait-ms"), "{e}");
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("commit.retry.max-wait-ms", "2000")
        .execute()
        .await
        .unwrap();
    // The next bad value read on the commit path is named in turn, with the table.
    let e = try_append(&fx, &ident, 0, 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("commit.manifest.min-count-to-merge") && e.contains("props.replace"),
        "{e}"
    );
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_unset("commit.manifest.min-count-to-merge")
        .execute()
        .await
        .unwrap();
    try_append(&fx, &ident, 0, 10).await.unwrap();
}

#[tokio::test]
async fn bad_stored_metadata_settings_never_turn_a_landed_commit_into_an_error() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.meta", None).await;
    try_append(&fx, &ident, 0, 10).await.unwrap();
    store_raw(
        &fx,
        &ident,
        "write.metadata.delete-after-commit.enabled",
        "maybe",
    )
    .await;
    // A property update lands and reports success (the old metadata files are kept).
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("owner", "me")
        .execute()
        .await
        .unwrap();
    assert_eq!(fx.load(&ident).await.metadata().properties()["owner"], "me");
    // An append is refused before it writes anything, naming the key.
    let e = try_append(&fx, &ident, 10, 20)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("write.metadata.delete-after-commit.enabled") && e.contains("--unset"),
        "{e}"
    );
    assert_eq!(fx.count_and_sum(&ident).await, (10, (0..10).sum()));

    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_unset("write.metadata.delete-after-commit.enabled")
        .execute()
        .await
        .unwrap();
    try_append(&fx, &ident, 10, 20).await.unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (20, (0..20).sum()));
}

/// Sets table properties with PyIceberg (no validation of floe's keys), as another engine would.
fn pyiceberg_set(fx: &Fixture, table: &str, props: &[(&str, &str)]) {
    let py = python().expect("needs FLOE_PYTHON (run .ci/setup)");
    let wh = fx.warehouse().display().to_string();
    let props: HashMap<&str, &str> = props.iter().copied().collect();
    let script = format!(
        r#"
import json, sys
sys.path.insert(0, {interop:?})
from read_table import open_catalog
cat = open_catalog({uri:?}, "floe", {wh:?})
t = cat.load_table({table:?})
with t.transaction() as tx:
    tx.set_properties(json.loads({props:?}))
print(json.dumps(cat.load_table({table:?}).properties))
"#,
        interop = repo_root().join("tests/interop").display().to_string(),
        uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/')),
        props = serde_json::to_string(&props).unwrap(),
    );
    let out = Command::new(py).arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stored: HashMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
    for (k, v) in props {
        assert_eq!(stored.get(k).map(String::as_str), Some(v), "{stored:?}");
    }
}

#[tokio::test]
async fn a_metadata_codec_iceberg_cannot_write_blocks_every_commit_but_its_repair() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.codec", None).await;
    try_append(&fx, &ident, 0, 10).await.unwrap();
    pyiceberg_set(
        &fx,
        "props.codec",
        &[("write.metadata.compression-codec", "brotli")],
    );
    for e in [
        try_append(&fx, &ident, 10, 20)
            .await
            .unwrap_err()
            .to_string(),
        floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
            .with_property("owner", "you")
            .execute()
            .await
            .unwrap_err()
            .to_string(),
    ] {
        assert!(
            e.contains("write.metadata.compression-codec")
                && e.contains("floe table set-property props.codec --unset"),
            "{e}"
        );
    }
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("write.metadata.compression-codec", "none")
        .execute()
        .await
        .unwrap();
    try_append(&fx, &ident, 10, 20).await.unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (20, (0..20).sum()));
}

#[tokio::test]
async fn a_bad_value_written_by_pyiceberg_is_repaired_by_floe() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.py", None).await;
    try_append(&fx, &ident, 0, 10).await.unwrap();
    pyiceberg_set(
        &fx,
        "props.py",
        &[
            ("commit.retry.num-retries", "-1"),
            ("history.expire.min-snapshots-to-keep", "zero"),
        ],
    );

    let e = try_append(&fx, &ident, 10, 20)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("commit.retry.num-retries") && e.contains("--unset"),
        "{e}"
    );
    let e = floe::operations::expire::ExpireBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("history.expire.min-snapshots-to-keep"), "{e}");
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_unsets(vec![
            "commit.retry.num-retries".to_string(),
            "history.expire.min-snapshots-to-keep".to_string(),
        ])
        .execute()
        .await
        .unwrap();
    try_append(&fx, &ident, 10, 20).await.unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (20, (0..20).sum()));
}

#[tokio::test]
async fn a_bad_stored_value_names_its_table_in_the_repair_command_of_every_operation() {
    let fx = Fixture::new().await;
    let cases: [(&str, &str, &str); 5] = [
        ("props.w", "write.parquet.row-group-size-bytes", "0"),
        ("props.m", "commit.manifest.min-count-to-merge", "-5"),
        ("props.c", "write.target-file-size-bytes", "0"),
        ("props.e", "history.expire.min-snapshots-to-keep", "0"),
        ("props.g", "gc.enabled", "maybe"),
    ];
    for (name, key, value) in cases {
        let ident = fx.table(name, None).await;
        fx.append(&ident, 0, 10).await;
        fx.append(&ident, 10, 20).await;
        store_raw(&fx, &ident, key, value).await;
        let err = match key {
            "write.target-file-size-bytes" => {
                floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
                    .execute()
                    .await
                    .map(|_| ())
            }
            "history.expire.min-snapshots-to-keep" => {
                floe::operations::expire::ExpireBuilder::new(&fx.catalog, ident.clone())
                    .execute()
                    .await
                    .map(|_| ())
            }
            "gc.enabled" => {
                floe::operations::clean::orphans::OrphanBuilder::new(&fx.catalog, ident.clone())
                    .execute()
                    .await
                    .map(|_| ())
            }
            _ => try_append(&fx, &ident, 20, 30).await,
        }
        .expect_err(key)
        .to_string();
        assert!(!err.contains("NS.TABLE"), "{err}");
        assert!(
            err.contains(&format!("floe table set-property {name} --unset {key}")),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_property_plan_commits_nothing_and_apply_validates_again_on_the_properties_it_finds() {
    let fx = Fixture::new().await;
    let ident = fx.table("props.plan", None).await;
    let location = |t: floe::iceberg::table::Table| t.metadata_location().unwrap().to_string();
    let before = location(fx.load(&ident).await);
    let update = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("gc.enabled", "TRUE")
        .with_property("owner", "me");
    let plan = update.plan().await.unwrap();
    assert_eq!(
        location(fx.load(&ident).await),
        before,
        "a plan commits nothing"
    );
    assert!(plan.report.dry_run);
    // The report shows the properties as they would be stored (canonical form).
    assert_eq!(plan.report.properties["gc.enabled"], "true");
    let planned = plan.report.properties.clone();
    let applied = update.apply(plan).await.unwrap();
    assert!(!applied.dry_run);
    assert_eq!(
        applied.properties, planned,
        "apply commits what the plan said"
    );
    assert_eq!(*fx.load(&ident).await.metadata().properties(), planned);

    // Another writer's update of other keys merges with a planned one.
    let other = fx.second_connection().await;
    let mine = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("team", "data");
    let plan = mine.plan().await.unwrap();
    floe::operations::alter::AlterPropertiesBuilder::new(&other, ident.clone())
        .with_property("cost-center", "42")
        .execute()
        .await
        .unwrap();
    let r = mine.apply(plan).await.unwrap();
    assert_eq!(
        (
            r.properties["team"].as_str(),
            r.properties["cost-center"].as_str()
        ),
        ("data", "42")
    );

    // A compaction setting valid with the target the plan saw, but not with the one another
    // writer set meanwhile: refused at apply, naming the key.
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("write.target-file-size-bytes", (2u64 << 30).to_string())
        .execute()
        .await
        .unwrap();
    let min = floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("floe.compact.min-file-size-bytes", (1u64 << 30).to_string());
    let plan = min.plan().await.unwrap();
    floe::operations::alter::AlterPropertiesBuilder::new(&other, ident.clone())
        .with_property("write.target-file-size-bytes", (256u64 << 20).to_string())
        .execute()
        .await
        .unwrap();
    let at = location(fx.load(&ident).await);
    let e = min.apply(plan).await.unwrap_err().to_string();
    assert!(e.contains("floe.compact.min-file-size-bytes"), "{e}");
    assert_eq!(location(fx.load(&ident).await), at, "nothing committed");
}
