//! Tables other engines wrote, in every format version: Iceberg's Java implementation (Spark
//! 3.5 + Iceberg 1.10.2, `tests/interop/java_iceberg.py`) writes a v3 merge-on-read table with
//! deletion vectors (flat and partitioned), a v1 table and a v2 table with position deletes;
//! floe reads them as Java, PyIceberg and DuckDB do, maintains v1 in place, upgrades v2 to v3,
//! and says what it does not do yet by name.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{floe, json_lines, ok_json};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python(args: &[&str]) -> Value {
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (eval \"$(bash .ci/setup)\")");
    let out = Command::new(py).args(args).output().expect("python runs");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn java_iceberg(args: &[&str]) -> Value {
    assert!(
        std::env::var("FLOE_SPARK_JARS").is_ok(),
        "FLOE_SPARK_JARS is not set: .ci/setup installs Spark + Iceberg's Java runtime"
    );
    let script = repo().join("tests/interop/java_iceberg.py");
    let mut all = vec![script.to_str().unwrap()];
    all.extend_from_slice(args);
    python(&all)
}

/// `[id, name]` of every row, as floe's SQL reads them (name in the readers' canonical form:
/// `\N` for null), sorted.
fn floe_rows(d: &Path, table: &str) -> Vec<Vec<String>> {
    let out = floe(
        d,
        &["--json", "sql", &format!("SELECT id, name FROM {table}")],
    );
    assert!(
        out.status.success(),
        "floe sql on {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows: Vec<Vec<String>> = json_lines(&out)
        .iter()
        .map(|r| {
            vec![
                r["id"].as_i64().expect("id").to_string(),
                r["name"].as_str().unwrap_or("\\N").to_string(),
            ]
        })
        .collect();
    rows.sort();
    rows
}

/// PyIceberg's and DuckDB's `[id, name]` rows.
fn python_rows(d: &Path, table: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let wh = d.join("warehouse").display().to_string();
    let script = repo().join("tests/interop/read_rows.py");
    let v = python(&[
        script.to_str().unwrap(),
        "--catalog-uri",
        &format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/')),
        "--warehouse",
        &wh,
        "--table",
        table,
        "--columns",
        "id,name",
    ]);
    let parse = |k: &str| serde_json::from_value(v[k].clone()).unwrap();
    (parse("pyiceberg"), parse("duckdb"))
}

fn metadata_location(d: &Path, table: &str) -> String {
    ok_json(d, &["table", "describe", table])["metadata_location"]
        .as_str()
        .unwrap()
        .to_string()
}

fn format_version(d: &Path, table: &str) -> i64 {
    ok_json(d, &["table", "describe", table])["format_version"]
        .as_i64()
        .unwrap()
}

#[test]
fn tables_java_wrote_in_formats_1_2_and_3_are_read_maintained_and_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wh = d.join("warehouse");
    let written = java_iceberg(&[
        "write-fixtures",
        "--warehouse",
        wh.to_str().unwrap(),
        "--catalog-db",
        wh.join("catalog.db").to_str().unwrap(),
    ]);
    let rows_of = |t: &str| written["tables"][t]["rows"].as_u64().unwrap() as usize;

    // --- v3 with deletion vectors: floe reads what Java, PyIceberg and DuckDB read. ---
    let mut java_first = Vec::new();
    for t in ["v3.mor_flat", "v3.mor_part"] {
        java_first.push(metadata_location(d, t));
    }
    let java = java_iceberg(&[
        "read",
        "--metadata",
        &java_first[0],
        "--metadata",
        &java_first[1],
        "--columns",
        "id,name",
        "--files",
    ]);
    for (t, m) in ["v3.mor_flat", "v3.mor_part"].iter().zip(&java_first) {
        let expected: Vec<Vec<String>> = serde_json::from_value(java[m]["rows"].clone()).unwrap();
        assert_eq!(expected.len(), rows_of(t));
        let vectors = java[m]["delete_files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["file_format"].as_str() == Some("PUFFIN"))
            .count();
        assert!(vectors > 0, "{t}: the fixture has deletion vectors");
        assert_eq!(floe_rows(d, t), expected, "{t}: floe reads what Java reads");
        let (py, duck) = python_rows(d, t);
        assert_eq!(py, expected, "{t}: PyIceberg");
        assert_eq!(duck, expected, "{t}: DuckDB");

        // diagnose names the format and what the delete files are.
        let report = ok_json(d, &["diagnose", t]);
        assert_eq!(report["format_version"], 3, "{t}");
        assert_eq!(report["totals"]["deletion_vectors"], vectors as u64, "{t}");
        assert_eq!(report["totals"]["position_delete_files"], 0, "{t}");
        let data_rows = report["totals"]["records"].as_u64().unwrap();
        let deleted = report["totals"]["vector_deleted_rows"].as_u64().unwrap();
        assert_eq!(
            data_rows - deleted,
            rows_of(t) as u64,
            "{t}: data rows minus rows the vectors delete are the live rows"
        );
        assert_eq!(format_version(d, t), 3);

        // Compaction of a v3 table is refused by name, before anything is written.
        let before = metadata_location(d, t);
        let files_before = common::walk_files(&wh).len();
        let out = floe(d, &["compact", t]);
        assert!(
            !out.status.success(),
            "{t}: compaction must refuse v3 for now"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("format v3"), "{t}: {err}");
        assert_eq!(metadata_location(d, t), before, "{t}: nothing committed");
        assert_eq!(
            common::walk_files(&wh).len(),
            files_before,
            "{t}: no file left"
        );
        // No downgrade.
        let out = floe(d, &["table", "upgrade", t, "--format-version", "2"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("no downgrade"));
    }

    // --- v1: maintained in place, as Java maintains it. ---
    let t = "v1.plain";
    let expected = floe_rows(d, t);
    assert_eq!(expected.len(), rows_of(t));
    let c = ok_json(d, &["compact", t, "--min-input-files", "2"]);
    assert!(
        c["rewritten_files"].as_u64().unwrap() > c["added_files"].as_u64().unwrap(),
        "{c}"
    );
    let e = ok_json(
        d,
        &[
            "expire-snapshots",
            t,
            "--older-than",
            "0s",
            "--retain-last",
            "1",
        ],
    );
    assert!(
        !e["expired_snapshots"].as_array().unwrap().is_empty(),
        "v1 snapshots expire: {e}"
    );
    assert_eq!(e["retained_snapshots"], 1, "{e}");
    ok_json(d, &["rewrite-manifests", t]);
    let o = ok_json(
        d,
        &["remove-orphan-files", t, "--older-than", "0s", "--force"],
    );
    assert_eq!(floe_rows(d, t), expected, "v1 after maintenance: {o}");
    assert_eq!(format_version(d, t), 1, "maintenance keeps v1");
    let (py, duck) = python_rows(d, t);
    assert_eq!(py, expected);
    assert_eq!(duck, expected);
    let v1_after = metadata_location(d, t);

    // --- v2 -> v3: metadata only; the dry run changes nothing. ---
    let t = "v2.mor";
    let expected = floe_rows(d, t);
    assert_eq!(expected.len(), rows_of(t));
    let before = metadata_location(d, t);
    let dry = ok_json(
        d,
        &["table", "upgrade", t, "--format-version", "3", "--dry-run"],
    );
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        (dry["from"].as_i64(), dry["to"].as_i64()),
        (Some(2), Some(3))
    );
    assert!(!dry["changes"].as_array().unwrap().is_empty());
    assert_eq!(metadata_location(d, t), before);
    let done = ok_json(d, &["table", "upgrade", t, "--format-version", "3"]);
    assert_eq!(done["changed"], true);
    assert_eq!(format_version(d, t), 3);
    assert_eq!(floe_rows(d, t), expected, "rows after the upgrade");
    let again = ok_json(d, &["table", "upgrade", t, "--format-version", "3"]);
    assert_eq!(
        again["changed"], false,
        "upgrading to the same version commits nothing"
    );
    let v2_after = metadata_location(d, t);

    // Java reads floe's v1 maintenance and v2 upgrade like floe does.
    let java = java_iceberg(&[
        "read",
        "--metadata",
        &v1_after,
        "--metadata",
        &v2_after,
        "--columns",
        "id,name",
    ]);
    for (t, m) in [("v1.plain", &v1_after), ("v2.mor", &v2_after)] {
        let rows: Vec<Vec<String>> = serde_json::from_value(java[m]["rows"].clone()).unwrap();
        assert_eq!(rows, floe_rows(d, t), "{t}: Java reads what floe reads");
    }
}
