//! A format v1 table as a Spark user makes one (Spark 3.5 + Iceberg 1.10.2,
//! `tests/interop/java_iceberg.py write-v1-tagged`): a tag and a branch, then a copy-on-write
//! DELETE. floe sees Java's refs, keeps them through its own commits, and expiry keeps what they
//! need; the manifest lists floe writes carry Java's counts (Java names them `added_files_count`
//! in v1 too), so Java's own `files`, `entries` and `manifests` tables read them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{floe, json_lines, ok_json};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn java_iceberg(args: &[&str]) -> Value {
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (eval \"$(bash .ci/setup)\")");
    assert!(
        std::env::var("FLOE_SPARK_JARS").is_ok(),
        "FLOE_SPARK_JARS is not set: .ci/setup installs Spark + Iceberg's Java runtime"
    );
    let out = Command::new(py)
        .arg(repo().join("tests/interop/java_iceberg.py"))
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "java_iceberg.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn sql(d: &Path, q: &str) -> Vec<Value> {
    let out = floe(d, &["--json", "sql", q]);
    assert!(
        out.status.success(),
        "{q}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out)
}

fn refs(d: &Path) -> Vec<(String, i64)> {
    let mut r: Vec<(String, i64)> = sql(d, "SELECT name, snapshot_id FROM v1.tagged$refs")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["snapshot_id"].as_i64().unwrap(),
            )
        })
        .collect();
    r.sort();
    r
}

fn metadata_location(d: &Path) -> String {
    ok_json(d, &["table", "describe", "v1.tagged"])["metadata_location"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string()
}

#[test]
fn a_v1_table_java_tagged_keeps_its_refs_and_counts_through_floe_commits_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wh = d.join("warehouse");
    let written = java_iceberg(&[
        "write-v1-tagged",
        "--warehouse",
        wh.to_str().unwrap(),
        "--catalog-db",
        wh.join("catalog.db").to_str().unwrap(),
    ]);
    let id = |name: &str| written["refs"][name].as_i64().unwrap();
    let (keep, audit) = (id("keep"), id("audit"));
    let tag_rows = written["tag_rows"].as_u64().unwrap();
    assert_eq!((written["rows"].as_u64(), tag_rows), (Some(150), 300));

    // floe sees Java's refs on v1.
    let seen = refs(d);
    assert!(seen.contains(&("keep".into(), keep)), "{seen:?}");
    assert!(seen.contains(&("audit".into(), audit)), "{seen:?}");

    // A floe append keeps them and writes counts, never NULL, for Java's manifests.
    std::fs::write(
        d.join("more.ndjson"),
        "{\"id\": 1000, \"name\": \"floe\", \"amount\": 1.0, \"ts\": \"2026-01-01T00:00:00Z\", \"category\": \"north\"}\n",
    )
    .unwrap();
    ok_json(d, &["append", "v1.tagged", "more.ndjson"]);
    let after_append = refs(d);
    assert!(
        after_append.contains(&("keep".into(), keep)),
        "{after_append:?}"
    );
    assert!(
        after_append.contains(&("audit".into(), audit)),
        "{after_append:?}"
    );
    let manifests = sql(
        d,
        "SELECT added_data_files_count + existing_data_files_count AS live FROM v1.tagged$manifests",
    );
    let live: i64 = manifests.iter().map(|m| m["live"].as_i64().unwrap()).sum();
    assert!(live > 1, "floe reads Java's counts: {manifests:?}");

    // Expiry keeps every file the tag and the branch need.
    let e = ok_json(
        d,
        &[
            "expire-snapshots",
            "v1.tagged",
            "--older-than",
            "0s",
            "--retain-last",
            "1",
        ],
    );
    let expired: Vec<i64> = serde_json::from_value(e["expired_snapshots"].clone()).unwrap();
    assert!(!expired.contains(&keep), "{e}");
    let count = |q: &str| sql(d, q)[0]["n"].as_i64().unwrap();
    assert_eq!(
        count("SELECT count(*) AS n FROM v1.tagged FOR VERSION AS OF 'keep'"),
        tag_rows as i64
    );
    assert_eq!(count("SELECT count(*) AS n FROM v1.tagged"), 151);

    // Java reads the table floe wrote: its metadata tables, and the tag's rows.
    let m = metadata_location(d);
    let java = java_iceberg(&["metadata-tables", "--metadata", &m, "--tag", "keep"]);
    assert_eq!(java["rows"], 151, "{java}");
    assert_eq!(java["tags"]["keep"], tag_rows, "{java}");
    assert!(java["files"].as_u64().unwrap() > 0, "{java}");
    assert!(java["entries"].as_u64().unwrap() > 0, "{java}");
    for counts in java["manifests"].as_array().unwrap() {
        assert!(
            counts.as_array().unwrap().iter().all(Value::is_number),
            "a NULL count: {java}"
        );
    }
}
