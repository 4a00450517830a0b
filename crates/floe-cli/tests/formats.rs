//! Tables other engines wrote, in every format version: Iceberg's Java implementation (Spark
//! 3.5 + Iceberg 1.10.2, `tests/interop/java_iceberg.py`) writes a v3 merge-on-read table with
//! deletion vectors (flat and partitioned), a v1 table and a v2 table with position deletes;
//! floe reads them as Java, PyIceberg and DuckDB do, changes and compacts v3 with deletion
//! vectors and row lineage (Java reads the same `_row_id`s after a compaction), maintains v1
//! in place, and upgrades v2 to v3. A v3 table floe creates passes the same readers.

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
    let v = interop_read(d, "read_rows.py", table, &["--columns", "id,name"]);
    let parse = |k: &str| serde_json::from_value(v[k].clone()).unwrap();
    (parse("pyiceberg"), parse("duckdb"))
}

/// Runs the reader `script` of `tests/interop` on `table` of the warehouse under `d`.
fn interop_read(d: &Path, script: &str, table: &str, more: &[&str]) -> Value {
    let wh = d.join("warehouse").display().to_string();
    let script = repo().join("tests/interop").join(script);
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let mut args = vec![
        script.to_str().unwrap(),
        "--catalog-uri",
        &uri,
        "--warehouse",
        &wh,
        "--table",
        table,
    ];
    args.extend_from_slice(more);
    python(&args)
}

/// Java's fixtures (v1, v2, v3 tables) written into the warehouse `wh` and its catalog.
fn java_fixtures(wh: &Path) -> Value {
    java_iceberg(&[
        "write-fixtures",
        "--warehouse",
        wh.to_str().unwrap(),
        "--catalog-db",
        wh.join("catalog.db").to_str().unwrap(),
    ])
}

fn metadata_location(d: &Path, table: &str) -> String {
    ok_json(d, &["table", "describe", table])["metadata_location"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `expire-snapshots --older-than 0s --retain-last 1`: every snapshot but the current one.
fn expire_all_but_current(d: &Path, table: &str) -> Value {
    ok_json(
        d,
        &[
            "expire-snapshots",
            table,
            "--older-than",
            "0s",
            "--retain-last",
            "1",
        ],
    )
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
    let written = java_fixtures(&d.join("warehouse"));
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
        "--row-ids",
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

        // diagnose names the format and what the delete files are; its timed full read
        // (`--save`) applies the vectors.
        let saved = d.join(format!("{t}.diagnose.json"));
        let report = ok_json(d, &["diagnose", t, "--save", saved.to_str().unwrap()]);
        assert_eq!(report["probe"]["rows"], rows_of(t) as u64, "{t}");
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
    let e = expire_all_but_current(d, t);
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
    let java_v12 = java_iceberg(&[
        "read",
        "--metadata",
        &v1_after,
        "--metadata",
        &v2_after,
        "--columns",
        "id,name",
    ]);
    for (t, m) in [("v1.plain", &v1_after), ("v2.mor", &v2_after)] {
        let rows: Vec<Vec<String>> = serde_json::from_value(java_v12[m]["rows"].clone()).unwrap();
        assert_eq!(rows, floe_rows(d, t), "{t}: Java reads what floe reads");
    }

    // --- v3 changes: deletion vectors, never Parquet position deletes; row ids kept. ---
    let keep = |rows: &[Vec<String>]| -> Vec<Vec<String>> {
        rows.iter()
            .filter(|r| r[0].parse::<i64>().unwrap() % 7 != 0)
            .cloned()
            .collect()
    };
    let ids_of = |v: &Value| -> Vec<i64> {
        v["row_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().expect("every row of a v3 table has a row id"))
            .collect()
    };
    // Merge-on-read on the flat table, copy-on-write on the partitioned one; the upgraded v2
    // table's position deletes become deletion vectors.
    let del = ok_json(d, &["delete", "v3.mor_flat", "--where", "id % 7 = 0"]);
    assert!(del["deletion_vectors"].as_u64().unwrap() > 0, "{del}");
    assert_eq!(del["position_delete_files"], 0, "{del}");
    let cow = ok_json(
        d,
        &[
            "delete",
            "v3.mor_part",
            "--where",
            "id % 7 = 0",
            "--mode",
            "copy-on-write",
        ],
    );
    assert!(cow["rewritten_data_files"].as_u64().unwrap() > 0, "{cow}");
    let conv = ok_json(d, &["rewrite-position-delete-files", "v2.mor"]);
    assert!(
        conv["added_delete_files_count"].as_u64().unwrap() > 0,
        "{conv}"
    );

    // A v3 table floe creates: appends, an upsert and a delete.
    ok_json(d, &["namespace", "create", "mine"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "mine.v3",
            "--schema",
            "id bigint not null, name string",
            "--format-version",
            "3",
        ],
    );
    for b in 0..3 {
        let f = d.join(format!("m{b}.ndjson"));
        let text: String = (b * 40..b * 40 + 40)
            .map(|i| format!("{{\"id\": {i}, \"name\": \"n{i}\"}}\n"))
            .collect();
        std::fs::write(&f, text).unwrap();
        ok_json(d, &["append", "mine.v3", f.to_str().unwrap()]);
    }
    let up = d.join("up.ndjson");
    std::fs::write(
        &up,
        "{\"id\": 3, \"name\": \"three\"}\n{\"id\": 200, \"name\": \"new\"}\n",
    )
    .unwrap();
    ok_json(
        d,
        &[
            "append",
            "mine.v3",
            up.to_str().unwrap(),
            "--mode",
            "upsert",
            "--key",
            "id",
        ],
    );
    ok_json(d, &["delete", "mine.v3", "--where", "id % 7 = 0"]);
    assert_eq!(format_version(d, "mine.v3"), 3);

    let changed = ["v3.mor_flat", "v3.mor_part", "v2.mor", "mine.v3"];
    let stage: Vec<String> = changed.iter().map(|t| metadata_location(d, t)).collect();
    let read_all = |metadata: &[String]| {
        let mut args = vec!["read"];
        for m in metadata {
            args.extend(["--metadata", m.as_str()]);
        }
        args.extend(["--columns", "id,name", "--files", "--row-ids"]);
        java_iceberg(&args)
    };
    let java_changed = read_all(&stage);
    let no_parquet_deletes = |t: &str, v: &Value| {
        let files = v["delete_files"].as_array().unwrap();
        assert!(
            files.iter().all(|f| f["file_format"] == "PUFFIN"),
            "{t}: only deletion vectors in a v3 table: {files:?}"
        );
        let mut per_file: Vec<&str> = files
            .iter()
            .map(|f| f["referenced_data_file"].as_str().unwrap())
            .collect();
        let n = per_file.len();
        per_file.sort();
        per_file.dedup();
        assert_eq!(per_file.len(), n, "{t}: at most one vector per data file");
    };
    for (i, t) in changed.iter().enumerate() {
        let v = &java_changed[&stage[i]];
        let rows: Vec<Vec<String>> = serde_json::from_value(v["rows"].clone()).unwrap();
        assert_eq!(rows, floe_rows(d, t), "{t}: Java reads what floe reads");
        let (py, duck) = python_rows(d, t);
        assert_eq!(py, rows, "{t}: PyIceberg");
        assert_eq!(duck, rows, "{t}: DuckDB");
        no_parquet_deletes(t, v);
        let ids = ids_of(v);
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), rows.len(), "{t}: one distinct row id per row");
    }
    for (i, t) in ["v3.mor_flat", "v3.mor_part"].iter().enumerate() {
        let before: Vec<Vec<String>> =
            serde_json::from_value(java[&java_first[i]]["rows"].clone()).unwrap();
        let after: Vec<Vec<String>> =
            serde_json::from_value(java_changed[&stage[i]]["rows"].clone()).unwrap();
        assert_eq!(after, keep(&before), "{t}: exactly the matching rows left");
        // A row that stays keeps its id (copy-on-write rewrites carry it).
        let was: std::collections::HashSet<i64> =
            ids_of(&java[&java_first[i]]).into_iter().collect();
        assert!(
            ids_of(&java_changed[&stage[i]])
                .iter()
                .all(|id| was.contains(id)),
            "{t}"
        );
    }
    let mine: Vec<Vec<String>> =
        serde_json::from_value(java_changed[&stage[3]]["rows"].clone()).unwrap();
    assert_eq!(
        mine.len(),
        121 - 18,
        "120 appended + 1 upserted, ids divisible by 7 gone"
    );
    assert!(mine.contains(&vec!["3".to_string(), "three".to_string()]));

    // --- v3 compaction keeps every row's _row_id and _last_updated_sequence_number. ---
    for t in changed {
        let c = ok_json(d, &["compact", t, "--rewrite-all"]);
        assert!(c["rewritten_files"].as_u64().unwrap() > 0, "{t}: {c}");
    }
    let compacted: Vec<String> = changed.iter().map(|t| metadata_location(d, t)).collect();
    let java_compacted = read_all(&compacted);
    for (i, t) in changed.iter().enumerate() {
        let (b, a) = (&java_changed[&stage[i]], &java_compacted[&compacted[i]]);
        assert_eq!(a["rows"], b["rows"], "{t}: compaction keeps the rows");
        assert_eq!(a["row_ids"], b["row_ids"], "{t}: ... and their row ids");
        assert_eq!(
            a["last_updated"], b["last_updated"],
            "{t}: ... and sequence numbers"
        );
        assert_eq!(
            a["delete_files"].as_array().unwrap().len(),
            0,
            "{t}: vectors applied"
        );
        let rows: Vec<Vec<String>> = serde_json::from_value(a["rows"].clone()).unwrap();
        let (py, duck) = python_rows(d, t);
        assert_eq!(
            (py, duck),
            (rows.clone(), rows),
            "{t}: PyIceberg and DuckDB"
        );
    }
}

/// `floe` with `args` fails, and its stderr says `needle`.
fn fails_saying(d: &Path, args: &[&str], needle: &str) {
    let out = floe(d, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "floe {args:?} should fail");
    assert!(err.contains(needle), "floe {args:?}: {err}");
}

/// The `schemas` of a metadata.json, as written.
fn schemas_json(metadata: &str) -> Value {
    let v: Value = serde_json::from_slice(&std::fs::read(metadata).unwrap()).unwrap();
    v["schemas"].clone()
}

#[test]
fn a_v3_table_with_types_floe_cannot_parse_loads_diagnoses_expires_and_refuses_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wh = d.join("warehouse");
    let t = "v3.types";
    let written = java_iceberg(&[
        "write-types",
        "--warehouse",
        wh.to_str().unwrap(),
        "--catalog-db",
        wh.join("catalog.db").to_str().unwrap(),
        "--table",
        t,
    ]);
    let java_metadata = written["metadata"].as_str().unwrap().to_string();
    assert_eq!(written["snapshots"], 5);

    // It loads: describe, diagnose and the metadata tables see what Java wrote.
    let described = ok_json(d, &["table", "describe", t]);
    assert_eq!(described["format_version"], 3);
    let types: Vec<(&str, &str)> = described["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        types,
        [
            ("id", "long"),
            ("ts_ns", "timestamptz_ns"),
            ("name", "string"),
            ("v", "variant"),
            ("geo", "geometry"),
            ("geog", "geography"),
            ("u", "unknown")
        ]
    );
    let report = ok_json(d, &["diagnose", t]);
    assert_eq!(report["format_version"], 3, "{report}");
    assert_eq!(report["totals"]["data_files"], 3, "{report}");
    assert_eq!(report["totals"]["records"], 30, "{report}");
    let files = floe(
        d,
        &[
            "--json",
            "sql",
            &format!("SELECT count(*) AS n, sum(record_count) AS r FROM {t}$files"),
        ],
    );
    assert!(
        files.status.success(),
        "{}",
        String::from_utf8_lossy(&files.stderr)
    );
    let row = &json_lines(&files)[0];
    assert_eq!((row["n"].as_i64(), row["r"].as_i64()), (Some(3), Some(30)));

    // What reads or writes rows refuses by column name, and changes nothing.
    fails_saying(
        d,
        &["sql", &format!("SELECT id FROM {t}")],
        "column v has type variant, which floe does not read",
    );
    fails_saying(
        d,
        &["compact", t],
        "column v has type variant, which floe does not rewrite",
    );
    fails_saying(
        d,
        &["delete", t, "--where", "id > 0"],
        "column v has type variant, which floe does not read",
    );
    fails_saying(
        d,
        &["rewrite-manifests", t],
        "column v has type variant, which floe does not write",
    );
    assert_eq!(metadata_location(d, t), java_metadata, "nothing committed");

    // Expiry commits metadata only: the types are written back exactly as Java wrote them.
    let e = expire_all_but_current(d, t);
    assert_eq!(e["expired_snapshots"].as_array().unwrap().len(), 4, "{e}");
    let expired_metadata = metadata_location(d, t);
    assert_ne!(expired_metadata, java_metadata);
    assert_eq!(
        schemas_json(&expired_metadata),
        schemas_json(&java_metadata),
        "column types as Java wrote them"
    );
    let o = ok_json(
        d,
        &["remove-orphan-files", t, "--older-than", "0s", "--force"],
    );
    ok_json(d, &["table", "set-property", t, "owner=lake"]);
    let last = metadata_location(d, t);

    // Java loads what floe wrote: the same types, one snapshot, the same three files, all there.
    let before = java_iceberg(&["inspect", "--metadata", &java_metadata]);
    let after = java_iceberg(&["inspect", "--metadata", &last]);
    let (before, after) = (&before[&java_metadata], &after[&last]);
    assert_eq!(after["schema"], before["schema"], "{after}");
    let types: Vec<&str> = after["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[2].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "long",
            "timestamptz_ns",
            "string",
            "variant",
            "geometry",
            "geography",
            "unknown"
        ]
    );
    assert_eq!(after["snapshots"], 1);
    assert_eq!(after["current_snapshot"], before["current_snapshot"]);
    assert_eq!(after["rows"], 30);
    assert_eq!(after["data_files"], before["data_files"], "orphans: {o}");
    for f in after["data_files"].as_array().unwrap() {
        assert!(
            Path::new(f.as_str().unwrap()).exists(),
            "live file kept: {f}"
        );
    }
    // The Hadoop catalog's pointer is no orphan: Java still finds the table through it.
    assert!(
        wh.join("v3/types/metadata/version-hint.text").exists(),
        "orphans: {o}"
    );
}

/// PyIceberg's view of a table's history (`tests/interop/read_history.py`).
fn history(d: &Path, table: &str) -> Value {
    interop_read(d, "read_history.py", table, &[])
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// A metadata file's path, whatever form a reader gives it in.
fn plain_path(p: &Value) -> String {
    let p = p.as_str().unwrap();
    p.strip_prefix("file://")
        .or_else(|| p.strip_prefix("file:"))
        .unwrap_or(p)
        .to_string()
}

/// An append commits by splicing its snapshot onto the history of the current metadata.json,
/// never parsed (`floe::table::metadata_json`). On tables Java wrote (its pretty-printed
/// metadata, v1, v2 with position deletes, v3 with deletion vectors and row lineage) and on a v3
/// table floe made, three appends with a tag set on an old snapshot in between (a commit on
/// the whole table) leave metadata that Java's own parser, PyIceberg and DuckDB read alike: the
/// same snapshots, snapshot log, refs, metadata log and sequence numbers, and the same rows.
#[test]
fn appends_splice_onto_histories_java_wrote_and_every_reader_reads_them_alike() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let written = java_fixtures(&d.join("warehouse"));
    ok_json(d, &["namespace", "create", "mine"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "mine.t",
            "--schema",
            "id bigint, name string",
            "--format-version",
            "3",
        ],
    );
    let tables = ["v1.plain", "v2.mor", "v3.mor_flat", "mine.t"];
    let mut planned = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let before = history(d, t);
        let append = |k: usize| -> i64 {
            let f = d.join(format!("{t}-{k}.ndjson"));
            let rows: String = (0..3)
                .map(|r| {
                    let id = 1_000_000 + i * 100 + k * 10 + r;
                    format!("{{\"id\": {id}, \"name\": \"spliced-{id}\"}}\n")
                })
                .collect();
            std::fs::write(&f, rows).unwrap();
            let m = ok_json(d, &["append", t, f.to_str().unwrap()]);
            m["snapshot_id"].as_i64().expect("an appended snapshot")
        };
        let mut appended = vec![append(0), append(1)];
        // A tag on the table's oldest snapshot (format v2 and up: v1 has no refs).
        let tagged = (format_version(d, t) > 1).then(|| {
            let oldest = ids(&before["history"])
                .first()
                .copied()
                .unwrap_or(appended[0]);
            ok_json(
                d,
                &[
                    "table",
                    "tag",
                    "create",
                    t,
                    "old",
                    "--snapshot-id",
                    &oldest.to_string(),
                ],
            );
            oldest
        });
        appended.push(append(2));
        planned.push((t, before, appended, tagged));
    }

    let metadata: Vec<String> = tables.iter().map(|t| metadata_location(d, t)).collect();
    let mut args = vec!["inspect"];
    for m in &metadata {
        args.extend(["--metadata", m.as_str()]);
    }
    let java = java_iceberg(&args);
    args[0] = "read";
    args.extend(["--columns", "id,name"]);
    let java_rows = java_iceberg(&args);

    for ((t, before, appended, tagged), m) in planned.iter().zip(&metadata) {
        let (j, py) = (&java[m], history(d, t));
        assert_eq!(py["metadata_location"].as_str(), Some(m.as_str()), "{t}");
        // Snapshots: those before and the appended ones, in Java and in PyIceberg.
        let mut want = ids(&before["snapshot_ids"]);
        want.extend(appended);
        want.sort();
        assert_eq!(ids(&py["snapshot_ids"]), want, "{t}: PyIceberg's snapshots");
        assert_eq!(ids(&j["snapshot_ids"]), want, "{t}: Java's snapshots");
        assert_eq!(
            j["current_snapshot"].as_i64(),
            appended.last().copied(),
            "{t}"
        );
        // The snapshot log goes on where it was; Java and PyIceberg read the same.
        let mut log = ids(&before["history"]);
        log.extend(appended);
        assert_eq!(ids(&py["history"]), log, "{t}: PyIceberg's snapshot log");
        assert_eq!(ids(&j["history"]), log, "{t}: Java's snapshot log");
        // Each appended snapshot's parent is the one before it, with the next sequence number.
        for w in appended.windows(2) {
            assert_eq!(py["snapshots"][w[1].to_string()]["parent"], w[0], "{t}");
        }
        let seq = |id: i64| py["snapshots"][id.to_string()]["sequence_number"].as_i64();
        if format_version(d, t) > 1 {
            let last = before["last_sequence_number"].as_i64().unwrap();
            assert_eq!(seq(appended[2]), Some(last + 3), "{t}");
            assert_eq!(py["last_sequence_number"].as_i64(), Some(last + 3), "{t}");
        }
        assert_eq!(j["last_sequence_number"], py["last_sequence_number"], "{t}");
        // Refs: main at the last append, the tag where it was set.
        let refs = py["refs"].as_object().unwrap();
        assert_eq!(refs["main"].as_i64(), appended.last().copied(), "{t}");
        if let Some(old) = tagged {
            assert_eq!(refs["old"].as_i64(), Some(*old), "{t}");
        }
        assert_eq!(&j["refs"], &py["refs"], "{t}: Java's refs");
        // The metadata log names the same files, the last the one each commit replaced.
        let java_log: Vec<String> = j["metadata_log"]
            .as_array()
            .unwrap()
            .iter()
            .map(plain_path)
            .collect();
        let py_log: Vec<String> = py["metadata_log"]
            .as_array()
            .unwrap()
            .iter()
            .map(plain_path)
            .collect();
        assert_eq!(java_log, py_log, "{t}: metadata log");
        assert!(py_log.len() >= 3, "{t}: {py_log:?}");
        assert_eq!(
            j["format_version"].as_i64(),
            Some(format_version(d, t)),
            "{t}"
        );

        // Rows: what was there and the nine appended, in every reader.
        let expected: Vec<Vec<String>> =
            serde_json::from_value(java_rows[m]["rows"].clone()).unwrap();
        let had = written["tables"][**t]["rows"].as_u64().unwrap_or(0) as usize;
        assert_eq!(expected.len(), had + 9, "{t}: Java reads every row");
        assert_eq!(floe_rows(d, t), expected, "{t}: floe");
        let (py_rows, duck) = python_rows(d, t);
        assert_eq!(py_rows, expected, "{t}: PyIceberg");
        assert_eq!(duck, expected, "{t}: DuckDB");
    }
}
