//! The `floe` binary end to end: exit codes, `--json`, one-line errors, nothing committed on
//! bad input.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::*;

#[test]
fn quickstart_runs_on_the_embedded_default() {
    let dir = tempfile::tempdir().unwrap();
    let v = ok_json(dir.path(), &["quickstart"]);
    assert_eq!(v["commits"].as_array().unwrap().len(), 8);
    assert!(dir.path().join("warehouse/catalog.db").exists());
    assert_eq!(v["queries"]["rows"][0]["rows"], 4000);
    // Diagnose before/after compaction, expiry and orphan removal, with a before/after table.
    let holds = |r: &Value| -> Vec<String> {
        r["observations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["holds"] == true)
            .map(|o| o["id"].as_str().unwrap().to_string())
            .collect()
    };
    let before = holds(&v["diagnose_before"]);
    assert!(
        before.contains(&"small-files-in-active-partitions".to_string()),
        "{before:?}"
    );
    assert!(
        before.contains(&"unreferenced-files".to_string()),
        "{before:?}"
    );
    let after = holds(&v["diagnose_after"]);
    assert!(
        !after.contains(&"small-files-in-active-partitions".to_string()),
        "{after:?}"
    );
    assert_eq!(v["before"]["files"], 24);
    assert_eq!(
        v["after"]["files"], 6,
        "3 compacted + 3 from the commit after compaction"
    );
    assert_eq!(v["after"]["snapshots"], 1);
    // The service did the work: compaction, expiry and the crashed writer's orphan, each
    // chosen by its trigger; the second round (after the stream went on) expired again.
    let first = &v["maintain"][0]["succeeded_by_job"];
    assert_eq!(first["compact"], 1, "{}", v["maintain"][0]);
    assert_eq!(first["remove-orphan-files"], 1);
    assert!(first["expire-snapshots"].as_u64().unwrap() >= 1);
    assert_eq!(v["maintain"][0]["jobs_failed"], 0);
    assert_eq!(v["maintain"][1]["succeeded_by_job"]["expire-snapshots"], 1);
    assert_eq!(v["crashed_write_removed"], true);
    assert!(v["after"]["storage_bytes"].as_u64() < v["before"]["storage_bytes"].as_u64());
    // Running it again starts over instead of failing.
    let v = ok_json(dir.path(), &["quickstart"]);
    assert_eq!(v["queries"]["rows"][0]["rows"], 4000);
    let human = floe(dir.path(), &["quickstart"]);
    assert!(human.status.success());
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("$files"));
    assert!(text.contains("floe maintain --once"), "{text}");
    assert!(text.contains("RUN: commit-count 8 >= 5"), "{text}");
}

#[test]
fn table_lifecycle_with_json_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "shop"]);
    let created = ok_json(
        d,
        &[
            "table",
            "create",
            "shop.orders",
            "--schema",
            "id bigint not null, ts timestamptz, customer string, total decimal(12, 2)",
            "--partition",
            "month(ts), bucket(8, id)",
            "--property",
            "write.target-file-size-bytes=1048576",
        ],
    );
    assert_eq!(created["partition_spec"][0]["transform"], "month");
    assert_eq!(
        created["properties"]["write.target-file-size-bytes"],
        "1048576"
    );
    std::fs::write(
        d.join("a.ndjson"),
        "{\"id\": 1, \"ts\": \"2026-01-05T10:00:00Z\", \"customer\": \"ann\", \"total\": \"12.50\"}\n\
         {\"id\": 2, \"ts\": \"2026-02-05T10:00:00Z\", \"customer\": \"bob\", \"total\": 3}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("b.csv"),
        "customer,id,ts,total\ncy,3,2026-02-06T00:00:00Z,1.25\n",
    )
    .unwrap();
    // A dry run reads and checks every record and commits nothing.
    let dry = ok_json(
        d,
        &["append", "shop.orders", "a.ndjson", "b.csv", "--dry-run"],
    );
    assert_eq!(
        (dry["rows"].as_u64(), dry["dry_run"].as_bool()),
        (Some(3), Some(true))
    );
    assert!(
        dry["snapshot_id"].is_null() && dry["data_files"] == 0,
        "{dry}"
    );
    let described = ok_json(d, &["table", "describe", "shop.orders"]);
    assert!(described["current_snapshot"].is_null(), "{described}");
    let appended = ok_json(d, &["append", "shop.orders", "a.ndjson", "b.csv"]);
    assert_eq!(appended["rows"], 3);
    assert_eq!(appended["input_files"], 2);
    let described = ok_json(d, &["table", "describe", "shop.orders"]);
    assert_eq!(
        described["current_snapshot"]["summary"]["total-records"],
        "3"
    );
    assert_eq!(described["current_snapshot"]["operation"], "append");
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            "SELECT customer, total FROM shop.orders ORDER BY id",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["customer"], "ann");
    let csv = floe(
        d,
        &[
            "sql",
            "--csv",
            "SELECT count(*) AS n FROM shop.orders$files",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&csv.stdout).trim(), "n\n3");
    let listed = ok_json(d, &["table", "list"]);
    assert_eq!(listed, serde_json::json!(["shop.orders"]));
    ok_json(
        d,
        &[
            "table",
            "set-property",
            "shop.orders",
            "commit.retry.num-retries=7",
            "--unset",
            "write.target-file-size-bytes",
        ],
    );
    let described = ok_json(d, &["table", "describe", "shop.orders"]);
    assert_eq!(described["properties"]["commit.retry.num-retries"], "7");
    assert!(described["properties"]
        .get("write.target-file-size-bytes")
        .is_none());
    // A data file floe wrote is itself a valid Parquet input.
    let parquet = walk_files(&d.join("warehouse/shop/orders/data"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let appended = ok_json(d, &["append", "shop.orders", parquet.to_str().unwrap()]);
    assert!(appended["rows"].as_u64().unwrap() >= 1);
    ok_json(d, &["table", "drop", "shop.orders", "--purge"]);
    assert!(
        !d.join("warehouse/shop/orders/data").exists()
            || walk_files(&d.join("warehouse/shop/orders/data")).is_empty()
    );
}

#[test]
fn a_bad_record_names_file_line_column_and_value_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "db"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "db.t",
            "--schema",
            "id bigint not null, amount double",
            "--partition",
            "bucket(2, id)",
        ],
    );
    std::fs::write(
        d.join("good.ndjson"),
        "{\"id\": 1, \"amount\": 1.5}\n".repeat(100),
    )
    .unwrap();
    std::fs::write(
        d.join("bad.ndjson"),
        "{\"id\": 1, \"amount\": 1.5}\n{\"id\": 2, \"amount\": \"a lot\"}\n",
    )
    .unwrap();
    let out = floe(d, &["append", "db.t", "good.ndjson", "bad.ndjson"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.ndjson")
            && err.contains("line 2")
            && err.contains("amount")
            && err.contains("a lot"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let described = ok_json(d, &["table", "describe", "db.t"]);
    assert!(described["current_snapshot"].is_null(), "nothing committed");
    assert!(
        walk_files(&d.join("warehouse/db/t/data")).is_empty(),
        "written files were removed"
    );
}

#[test]
fn errors_are_one_line_with_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["table", "describe", "db.missing"], "does not exist"),
        (
            vec!["table", "create", "db.t", "--schema", "id bigint, x strang"],
            "strang",
        ),
        (vec!["append", "nodots", "x.ndjson"], "NAMESPACE.TABLE"),
        (vec!["--catalog", "mysql://x", "table", "list"], "catalog"),
        (vec!["sql", "SELECT * FROM nowhere.t"], "nowhere"),
    ];
    for (args, needle) in cases {
        let out = floe(d, &args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let out = floe(d, &["--json", "table", "describe", "db.missing"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("does not exist"));
}

#[test]
fn compact_dry_run_and_run_report_with_json() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 6, 100);
    let plan = ok_json(d, &["compact", "db.t", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["plan"]["groups"].as_array().unwrap().len(), 3);
    assert_eq!(plan["plan"]["groups"][0]["input_files"], 6);
    assert_eq!(plan["live_files_after"], 18, "dry run changes nothing");
    let human = floe(d, &["compact", "db.t", "--dry-run"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("ts_day=2026-05-01") && text.contains("expected outputs"),
        "{text}"
    );
    let done = ok_json(
        d,
        &[
            "compact",
            "db.t",
            "--target-file-size",
            "64MiB",
            "--partial-progress",
            "--max-commits",
            "3",
        ],
    );
    assert_eq!(done["rewritten_files"], 18);
    assert_eq!(done["live_files_after"], 3);
    assert_eq!(
        done["commits"].as_array().unwrap().len(),
        3,
        "one commit per finished group"
    );
    assert_eq!(count_and_sum(d, "db.t"), expected);
    let bad = floe(d, &["compact", "db.t", "--option", "min-input-files=zero"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("min-input-files"));
    let bad = floe(d, &["compact", "db.t", "--where", "nope = 1"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nope"));
}

#[test]
fn kill_9_mid_compaction_leaves_every_row_readable_and_only_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 12, 2000);
    let data = d.join("warehouse/db/t/data");
    let files_before = walk_files(&data).len();
    let snapshots_before = snapshot_count(d);
    // Pause after the output files are written, right before the commit, and kill -9 there.
    let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(d)
        .args(["compact", "db.t", "--max-concurrent", "1"])
        .env("FLOE_FAULT_PAUSE_BEFORE_COMMIT_MS", "30000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while walk_files(&data).len() < files_before + 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "compaction wrote no output"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        count_and_sum(d, "db.t"),
        expected,
        "every row readable after the crash"
    );
    assert_eq!(snapshot_count(d), snapshots_before, "nothing committed");
    let live = ok_json(d, &["compact", "db.t", "--dry-run"])["live_files_before"]
        .as_u64()
        .unwrap() as usize;
    assert_eq!(live, files_before);
    let orphans = walk_files(&data).len() - live;
    assert_eq!(
        orphans, 3,
        "the crashed run left its 3 outputs as unreferenced files"
    );
    // Kills at other moments (planning, writing) are harmless too.
    for delay_ms in [5u64, 30, 80] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .current_dir(d)
            .args(["compact", "db.t", "--max-concurrent", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            count_and_sum(d, "db.t"),
            expected,
            "after kill at {delay_ms} ms"
        );
    }
    // The table still compacts normally afterwards.
    ok_json(d, &["compact", "db.t"]);
    let after = ok_json(d, &["compact", "db.t", "--dry-run"]);
    assert_eq!(after["live_files_before"], 3);
    assert_eq!(count_and_sum(d, "db.t"), expected);
}

#[test]
fn health_commands_report_with_json_and_refuse_unsafe_requests() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 6, 50);
    let report = ok_json(d, &["diagnose", "db.t", "--html", "report.html"]);
    assert_eq!(report["history"]["snapshots"], 6);
    assert!(report["totals"]["data_files"].as_u64().unwrap() >= 6);
    let html = std::fs::read_to_string(d.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("File-size histogram"));
    let human = floe(d, &["diagnose", "db.t"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("observations"));

    let dry = ok_json(
        d,
        &[
            "expire-snapshots",
            "db.t",
            "--older-than",
            "0s",
            "--dry-run",
        ],
    );
    assert_eq!(dry["expired_snapshots"].as_array().unwrap().len(), 5);
    assert_eq!(snapshot_count(d), 6, "a dry run changes nothing");
    let bad = floe(
        d,
        &["expire-snapshots", "db.t", "--older-than", "5 fortnights"],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--older-than"));
    let done = ok_json(
        d,
        &[
            "expire-snapshots",
            "db.t",
            "--older-than",
            "0s",
            "--retain-last",
            "2",
        ],
    );
    assert_eq!(done["expired_snapshots"].as_array().unwrap().len(), 4);
    assert_eq!(snapshot_count(d), 2);
    assert_eq!(count_and_sum(d, "db.t"), expected);

    let refused = floe(d, &["remove-orphan-files", "db.t", "--older-than", "10m"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("under one hour") && err.lines().count() == 1,
        "{err}"
    );
    let orphans = ok_json(d, &["remove-orphan-files", "db.t", "--dry-run"]);
    assert_eq!(
        orphans["orphan_files"], 0,
        "everything is younger than 3 days"
    );
    // Referenced files count as referenced whatever their age; "too recent" is only for
    // unreferenced ones.
    let n = |k: &str| orphans[k].as_u64().unwrap();
    assert!(n("referenced") > 0, "{orphans}");
    assert_eq!(
        n("referenced") + n("too_recent"),
        n("listed_files"),
        "{orphans}"
    );
    let forced = ok_json(
        d,
        &[
            "remove-orphan-files",
            "db.t",
            "--older-than",
            "0s",
            "--force",
        ],
    );
    assert_eq!(forced["deleted"]["failed"], 0);
    assert_eq!(count_and_sum(d, "db.t"), expected);

    let rm = ok_json(d, &["rewrite-manifests", "db.t"]);
    assert!(rm["manifests_after"].as_u64() <= rm["manifests_before"].as_u64());
    let cm = ok_json(d, &["clean-metadata", "db.t", "--dry-run"]);
    assert!(cm["metadata_files"].as_u64().unwrap() > 0);
    assert_eq!(count_and_sum(d, "db.t"), expected);
}

// ---- Safety: read-only SQL, explicit units and counts, prompt exits, honest exit codes ----

fn fails_with(d: &Path, args: &[&str], needles: &[&str]) -> String {
    let out = floe(d, args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args:?} should fail: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: expected '{n}' in: {err}");
    }
    err
}

/// Every path under `dir` with its contents (SQLite's own WAL/shm files excluded).
fn snapshot_tree(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
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

#[test]
fn sql_is_read_only_and_refused_statements_touch_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 2, 20);
    let metadata = ok_json(d, &["table", "describe", "db.t"])["metadata_location"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    std::fs::write(d.join("in.csv"), "a\n1\n").unwrap();
    let before = snapshot_tree(d);
    let out = d.join("out");
    let o = out.display().to_string();
    let input = d.join("in.csv").display().to_string();
    let refused = [
        format!("COPY (SELECT 'garbage' AS x) TO '{metadata}' STORED AS CSV"),
        format!("COPY (SELECT 1 AS x) TO '{o}/a.csv' STORED AS CSV"),
        format!("COPY (SELECT 1 AS x) TO '{o}/b.json' STORED AS JSON"),
        format!("COPY (SELECT 1 AS x) TO '{o}/new/c.arrow' STORED AS ARROW"),
        format!("COPY db.t TO '{o}/d.parquet'"),
        format!("EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{o}/e.csv' STORED AS CSV"),
        format!("EXPLAIN COPY (SELECT 1 AS x) TO '{o}/f.csv' STORED AS CSV"),
        format!("CREATE EXTERNAL TABLE ext STORED AS CSV LOCATION '{input}'"),
        "CREATE TABLE db.x AS SELECT 1 AS a".into(),
        "CREATE TABLE x (a INT)".into(),
        "CREATE VIEW v AS SELECT * FROM db.t".into(),
        "CREATE SCHEMA s2".into(),
        "DROP TABLE db.t".into(),
        "INSERT INTO db.t (id) VALUES (1)".into(),
        "DELETE FROM db.t".into(),
        "UPDATE db.t SET id = 1".into(),
        "WITH x AS (SELECT 1 AS id) INSERT INTO db.t (id) SELECT id FROM x".into(),
        "SELECT 1 AS a INTO newtab".into(),
        format!("SET datafusion.catalog.location = '{o}'"),
        "SET datafusion.execution.target_partitions = 1".into(),
        "RESET datafusion.execution.batch_size".into(),
        "PREPARE p AS SELECT 1".into(),
        "EXECUTE p".into(),
        "START TRANSACTION".into(),
    ];
    for sql in &refused {
        let err = fails_with(d, &["sql", sql], &["read-only"]);
        assert_eq!(err.trim().lines().count(), 1, "{sql}: {err}");
        assert!(!out.exists(), "{sql} created {o}");
        assert_eq!(snapshot_tree(d), before, "{sql} changed or added a file");
    }
    // Other ways to reach files: no URL tables, no file-reading table functions, one statement.
    for sql in [
        format!("SELECT * FROM '{input}'"),
        format!("SELECT * FROM read_csv('{input}')"),
        format!("SELECT * FROM read_parquet('{o}/x.parquet')"),
        format!("SELECT 1; COPY (SELECT 1 AS x) TO '{o}/g.csv' STORED AS CSV"),
        format!("COPY INTO '{o}/h.csv' FROM (SELECT 1 AS x)"),
    ] {
        fails_with(d, &["sql", &sql], &[]);
        assert!(!out.exists(), "{sql} created {o}");
        assert_eq!(snapshot_tree(d), before, "{sql} changed or added a file");
    }
    assert_eq!(count_and_sum(d, "db.t"), expected, "the table is intact");
    // Queries still run.
    for sql in [
        "SELECT count(*) AS n FROM db.t",
        "WITH x AS (SELECT id FROM db.t) SELECT count(*) AS n FROM x",
        "VALUES (1), (2)",
        "EXPLAIN SELECT count(*) FROM db.t",
        "EXPLAIN ANALYZE SELECT count(*) FROM db.t",
        "SHOW TABLES",
        "SHOW COLUMNS FROM db.t",
        "DESCRIBE db.t",
        "SELECT * FROM db.t$snapshots",
        "SELECT * FROM generate_series(1, 3)",
    ] {
        let out = floe(d, &["sql", sql]);
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(snapshot_tree(d), before);
}

#[test]
fn show_tables_lists_a_broken_table_and_a_query_on_it_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_table_with_small_files(d, 1, 10);
    ok_json(
        d,
        &["table", "create", "db.broken", "--schema", "id bigint"],
    );
    let metadata = ok_json(d, &["table", "describe", "db.broken"])["metadata_location"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    std::fs::write(&metadata, "garbage").unwrap();
    let out = floe(d, &["sql", "--csv", "SHOW TABLES"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(",db,t,") && text.contains(",db,broken,"),
        "{text}"
    );
    let out = floe(
        d,
        &["sql", "SELECT table_name FROM information_schema.tables"],
    );
    assert!(out.status.success());
    assert_eq!(count_and_sum(d, "db.t").0, 10);
    fails_with(d, &["sql", "SELECT * FROM db.broken"], &["db.broken"]);
}

#[test]
fn sql_json_prints_nan_and_infinities_as_strings_not_null() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            "SELECT v, CAST(v AS FLOAT) AS f, k FROM (VALUES \
             (CAST('NaN' AS DOUBLE), 1), (CAST('Infinity' AS DOUBLE), 2), \
             (CAST('-Infinity' AS DOUBLE), 3), (1.5, 4), (0.1, 5), (CAST(NULL AS DOUBLE), 6)) \
             AS t(v, k) ORDER BY k",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out);
    let col = |c: &str| rows.iter().map(|r| r.get(c).cloned()).collect::<Vec<_>>();
    let s = |v: &str| Some(Value::String(v.into()));
    let n = |v: f64| Some(serde_json::json!(v));
    assert_eq!(
        col("v"),
        vec![
            s("NaN"),
            s("Infinity"),
            s("-Infinity"),
            n(1.5),
            n(0.1),
            None
        ]
    );
    // A float prints its own shortest digits (0.1, not 0.10000000149011612).
    assert_eq!(
        col("f"),
        vec![
            s("NaN"),
            s("Infinity"),
            s("-Infinity"),
            n(1.5),
            n(0.1),
            None
        ]
    );
}

#[test]
fn sql_output_formats_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in [
        ["--json", "sql", "--csv", "SELECT 1"],
        ["sql", "--csv", "--json", "SELECT 1"],
    ] {
        let out = floe(d, &args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--csv") && err.contains("--json"), "{err}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("\"Int64(1)\""),
            "no result printed"
        );
    }
}

#[test]
fn a_cli_duration_without_a_unit_is_an_error_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 6, 10);
    std::fs::write(d.join("in.ndjson"), "").unwrap();
    for (args, option) in [
        (
            vec!["expire-snapshots", "db.t", "--older-than", "5"],
            "--older-than",
        ),
        (
            vec!["expire-snapshots", "db.t", "--older-than", "0", "--dry-run"],
            "--older-than",
        ),
        (
            vec![
                "remove-orphan-files",
                "db.t",
                "--older-than",
                "5",
                "--force",
            ],
            "--older-than",
        ),
        (
            vec![
                "ingest",
                "db.t",
                "--source",
                "in.ndjson",
                "--commit-interval",
                "60",
            ],
            "--commit-interval",
        ),
        (
            vec![
                "ingest",
                "db.t",
                "--source",
                "in.ndjson",
                "--stop-when-idle",
                "5",
            ],
            "--stop-when-idle",
        ),
    ] {
        let err = fails_with(d, &args, &[option]);
        // The units, or (expire-snapshots, which also takes timestamps) that a unit is needed.
        assert!(
            err.contains("ms, s, m, h, d or w") || err.contains("a duration needs a unit"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert_eq!(snapshot_count(d), 6, "nothing expired");
    assert_eq!(count_and_sum(d, "db.t"), expected);
    // With a unit it works; table properties stay bare milliseconds.
    let dry = ok_json(
        d,
        &[
            "expire-snapshots",
            "db.t",
            "--older-than",
            "5ms",
            "--dry-run",
        ],
    );
    assert_eq!(dry["expired_snapshots"].as_array().unwrap().len(), 5);
    ok_json(
        d,
        &[
            "table",
            "set-property",
            "db.t",
            "history.expire.max-snapshot-age-ms=1",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    let by_property = ok_json(d, &["expire-snapshots", "db.t", "--dry-run"]);
    assert_eq!(
        by_property["expired_snapshots"].as_array().unwrap().len(),
        5,
        "max age 1 ms: all but the current snapshot (the default, 5 days, expires none)"
    );
}

#[test]
fn zero_counts_sizes_and_durations_are_refused_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 6, 10);
    std::fs::write(d.join("in.ndjson"), "{\"id\": 1000}\n").unwrap();
    let ingest = |extra: &[&'static str]| {
        let mut v = vec![
            "ingest",
            "db.t",
            "--source",
            "in.ndjson",
            "--stop-when-idle",
            "1s",
        ];
        v.extend_from_slice(extra);
        v
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["compact", "db.t", "--max-concurrent", "0"],
            "--max-concurrent",
        ),
        (
            vec![
                "compact",
                "db.t",
                "--partial-progress",
                "--max-commits",
                "0",
            ],
            "--max-commits",
        ),
        (
            vec!["compact", "db.t", "--min-input-files", "0"],
            "--min-input-files",
        ),
        (
            vec!["compact", "db.t", "--target-file-size", "0"],
            "--target-file-size",
        ),
        (
            vec![
                "compact",
                "db.t",
                "--option",
                "max-concurrent-file-group-rewrites=0",
            ],
            "max-concurrent-file-group-rewrites",
        ),
        (
            vec!["compact", "db.t", "--max-concurrent", "0", "--dry-run"],
            "--max-concurrent",
        ),
        (vec!["compact", "db.t", "--max-concurrent", "-1"], "-1"),
        (ingest(&["--write-parallelism", "0"]), "--write-parallelism"),
        (ingest(&["--commit-records", "0"]), "--commit-records"),
        (ingest(&["--commit-bytes", "0"]), "--commit-bytes"),
        (
            ingest(&["--write-buffer-size", "0MiB"]),
            "--write-buffer-size",
        ),
        (ingest(&["--target-file-size", "0"]), "--target-file-size"),
        (ingest(&["--commit-interval", "0s"]), "--commit-interval"),
        (
            vec![
                "ingest",
                "db.t",
                "--source",
                "in.ndjson",
                "--stop-when-idle",
                "0s",
            ],
            "--stop-when-idle",
        ),
        (
            vec![
                "expire-snapshots",
                "db.t",
                "--retain-last",
                "0",
                "--older-than",
                "0s",
            ],
            "--retain-last",
        ),
        (
            vec!["append", "db.t", "in.ndjson", "--target-file-size", "0"],
            "--target-file-size",
        ),
    ];
    for (args, option) in cases {
        fails_with(d, &args, &[option]);
    }
    assert_eq!(snapshot_count(d), 6, "nothing committed");
    assert_eq!(count_and_sum(d, "db.t"), expected);
}

#[test]
fn a_source_matching_no_file_is_an_error_unless_following() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_table_with_small_files(d, 1, 10);
    let err = fails_with(
        d,
        &["ingest", "db.t", "--source", "nomatch-*.ndjson"],
        &["nomatch-*.ndjson", "no file matches"],
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    fails_with(
        d,
        &["ingest", "db.t", "--source", "missing.ndjson"],
        &["missing.ndjson"],
    );
    fails_with(
        d,
        &["append", "db.t", "missing.ndjson"],
        &["missing.ndjson", "no such file"],
    );
    fails_with(
        d,
        &["append", "db.t", "nomatch-*.ndjson"],
        &["nomatch-*.ndjson"],
    );
    assert_eq!(snapshot_count(d), 1);
    // Following, it says it waits (and stops here once idle).
    let out = floe(
        d,
        &[
            "ingest",
            "db.t",
            "--source",
            "nomatch-*.ndjson",
            "--follow",
            "--stop-when-idle",
            "1s",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("waiting for files"), "{err}");
}

/// floe in `d` with `args`, outside any warehouse or catalog the environment names.
fn floe_command(d: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_floe"));
    c.current_dir(d)
        .args(args)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG");
    c
}

/// Runs floe and fails the test if it has not exited after `limit`.
fn floe_within(d: &Path, args: &[&str], limit: std::time::Duration) -> std::process::ExitStatus {
    let mut child = floe_command(d, args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("floe {args:?} still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn every_command_exits_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "db"]);
    let limit = std::time::Duration::from_secs(20);
    for i in 0..40 {
        let name = format!("db.t{i}");
        let created = floe_within(
            d,
            &["table", "create", &name, "--schema", "id bigint"],
            limit,
        );
        assert!(created.success(), "{name}");
        assert!(floe_within(d, &["namespace", "list"], limit).success());
        // Failing commands exit promptly too.
        assert!(!floe_within(d, &["table", "describe", "db.missing"], limit).success());
    }
}

#[test]
fn a_compaction_whose_every_group_failed_exits_non_zero_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 6, 30);
    let run = |other_args: &[&str]| {
        // The first compaction writes its three outputs and waits before committing...
        let child = compaction_paused_before_commit(d, 3, 8000);
        // ... while another one rewrites the same files and commits first.
        ok_json(d, other_args);
        child.wait_with_output().unwrap()
    };
    // Every group conflicts: nothing committed, exit 1, each group named.
    let out = run(&["compact", "db.t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed = v["failed_groups"].as_array().unwrap();
    assert_eq!(failed.len(), 3, "{v}");
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("committed nothing") && msg.contains("3 group"),
        "{msg}"
    );
    for f in failed {
        let p = f["partition"].as_str().unwrap();
        assert!(msg.contains(p) && err.contains(p), "{p}: {msg}");
    }
    assert_eq!(count_and_sum(d, "db.t"), expected);

    // Only one partition conflicts: the others commit, exit 0, a warning, failed_groups kept.
    let expected = {
        // New small files in every partition for the next round.
        let mut text = String::new();
        for id in 10_000..10_090i64 {
            text.push_str(&format!(
                "{{\"id\": {id}, \"ts\": \"2026-05-0{}T12:00:00\", \"payload\": \"x\"}}\n",
                1 + id % 3
            ));
        }
        for b in 0..6 {
            let f = d.join(format!("more{b}.ndjson"));
            std::fs::write(&f, &text[..]).unwrap();
            ok_json(d, &["append", "db.t", f.to_str().unwrap()]);
        }
        count_and_sum(d, "db.t")
    };
    let out = run(&["compact", "db.t", "--where", "ts < '2026-05-02'"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["failed_groups"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["commits"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        err.contains("warning:") && err.contains("1 of 3 group(s) not committed"),
        "{err}"
    );
    assert_eq!(count_and_sum(d, "db.t"), expected);
}

#[test]
fn log_lines_carry_no_colours_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_table_with_small_files(d, 6, 10);
    // The fault-injection pause logs a WARN line.
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(d)
        .args(["compact", "db.t"])
        .env("FLOE_FAULT_PAUSE_BEFORE_COMMIT_MS", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("WARN"), "{err}");
    assert!(!err.contains('\u{1b}'), "ANSI escape in: {err:?}");
}

/// Runs floe with extra environment variables.
fn floe_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(dir)
        .args(args)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .env_remove("FLOE_CONFIG")
        .envs(env.iter().copied())
        .output()
        .expect("floe runs")
}

#[test]
fn set_property_refuses_a_bad_value_and_a_bad_stored_one_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "n"]);
    ok_json(
        d,
        &["table", "create", "n.p", "--schema", "id bigint not null"],
    );
    for (kv, key, value) in [
        (
            "commit.retry.num-retries=-1",
            "commit.retry.num-retries",
            "-1",
        ),
        ("gc.enabled=sometimes", "gc.enabled", "sometimes"),
        (
            "floe.compact.min-input-files=zero",
            "floe.compact.min-input-files",
            "zero",
        ),
    ] {
        let out = floe(d, &["table", "set-property", "n.p", kv]);
        assert!(!out.status.success(), "{kv} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(key) && err.contains(value) && err.contains("expected"),
            "{kv}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // An empty key says so (no masked `KEY=****`); a value of whitespace only is not stored
    // as empty; a reserved key is refused by name.
    for (kv, needle) in [
        ("=x", "name before '=' is empty"),
        ("owner=   ", "only whitespace"),
        ("floe.internal.head-of-history=true", "reserved"),
    ] {
        let out = floe(d, &["table", "set-property", "n.p", kv]);
        assert!(!out.status.success(), "{kv} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle) && !err.contains("****"), "{kv}: {err}");
    }
    let described = ok_json(d, &["table", "describe", "n.p"]);
    assert!(described["properties"]
        .get("commit.retry.num-retries")
        .is_none());
    // --dry-run checks the update and shows the properties it leaves, committing nothing.
    let planned = ok_json(
        d,
        &[
            "table",
            "set-property",
            "n.p",
            "gc.enabled=TRUE",
            "--dry-run",
        ],
    );
    assert_eq!(planned["dry_run"], true, "{planned}");
    assert_eq!(planned["properties"]["gc.enabled"], "true", "{planned}");
    let described = ok_json(d, &["table", "describe", "n.p"]);
    assert!(described["properties"].get("gc.enabled").is_none());
    std::fs::write(d.join("a.ndjson"), "{\"id\": 1}\n").unwrap();
    ok_json(d, &["append", "n.p", "a.ndjson"]);

    // A bad value written by another engine (PyIceberg) is named by the commands that need it,
    // with the repair, and the repair works.
    set_property_with_pyiceberg(d, "n.p", "commit.retry.num-retries", "-1");
    let out = floe(d, &["append", "n.p", "a.ndjson"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("floe table set-property n.p --unset commit.retry.num-retries"),
        "{err}"
    );
    ok_json(
        d,
        &[
            "table",
            "set-property",
            "n.p",
            "--unset",
            "commit.retry.num-retries",
        ],
    );
    ok_json(d, &["append", "n.p", "a.ndjson"]);
    assert_eq!(count_and_sum(d, "n.p"), (2, 2));
}

/// Secrets hidden in every place a catalog configuration can hold one; none may be printed.
const SECRETS: [&str; 9] = [
    "pgQueryPass1",
    "adlsAccountKey2",
    "restUriToken3",
    "oauthClientSecret4",
    "credSecret5",
    "userinfoPass6",
    "sasSig7",
    "envPassword8",
    "bearerToken9",
];

const HOSTILE_TOML: &str = r#"
default-catalog = "pg"

[catalog.pg]
uri = "postgres://floe@127.0.0.1:1/catalog?password=pgQueryPass1&sslmode=disable"
warehouse = "wh"
"adls.account-key" = "adlsAccountKey2"
"adls.sas-token.acct" = "sv=2022-11-02&sig=sasSig7"

[catalog.rest]
uri = "http://127.0.0.1:1/api?token=restUriToken3"
"oauth2-server-uri" = "http://127.0.0.1:1/oauth/tokens?client_id=me&client_secret=oauthClientSecret4"
credential = "client:credSecret5"
token = "bearerToken9"
"s3.access-key-id" = "AKIAVISIBLE"

[catalog.user]
uri = "postgresql://floe:userinfoPass6@127.0.0.1:1/catalog"
warehouse = "wh"
"#;

fn assert_no_secret(what: &str, out: &Output) {
    let all = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for s in SECRETS {
        assert!(!all.contains(s), "{what}: {s} printed:\n{all}");
    }
}

fn hostile_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("floe.toml"), HOSTILE_TOML).unwrap();
    std::fs::write(dir.path().join("empty.toml"), "").unwrap();
    dir
}

const HOSTILE_ENV: [(&str, &str); 2] = [
    (
        "FLOE_CATALOG__ENVY__URI",
        "postgres://floe:envPassword8@127.0.0.1:1/c",
    ),
    ("FLOE_CATALOG__ENVY__WAREHOUSE", "wh"),
];

#[test]
fn catalog_list_masks_every_secret_in_text_and_json() {
    let dir = hostile_dir();
    let d = dir.path();
    let out = floe_env(d, &["catalog", "list"], &HOSTILE_ENV);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_secret("catalog list", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("postgres://floe@127.0.0.1:1/catalog?password=****"),
        "{text}"
    );
    let out = floe_env(d, &["--json", "catalog", "list"], &HOSTILE_ENV);
    assert!(out.status.success());
    assert_no_secret("--json catalog list", &out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["catalogs"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{v}");
    let rest = rows.iter().find(|r| r["name"] == "rest").unwrap();
    // Not secrets: left readable.
    assert_eq!(rest["properties"]["s3.access-key-id"], "AKIAVISIBLE");
    assert!(rest["properties"]["oauth2-server-uri"]
        .as_str()
        .unwrap()
        .contains("client_id=me&client_secret=****"));
}

#[test]
fn catalog_show_and_failing_connections_never_print_a_secret() {
    let dir = hostile_dir();
    let d = dir.path();
    // (arguments, also with FLOE_LOG=debug). The PostgreSQL cases take seconds each (the pool
    // waits for a connection): one of them runs with debug logs.
    let cases: Vec<(Vec<&str>, bool)> = vec![
        (vec!["catalog", "show"], true),
        (vec!["--json", "catalog", "show"], false),
        (vec!["--catalog", "rest", "catalog", "show"], true),
        (
            vec!["--json", "--catalog", "rest", "catalog", "show"],
            false,
        ),
        (vec!["--catalog", "user", "namespace", "list"], false),
        (vec!["--json", "--catalog", "envy", "table", "list"], false),
        (vec!["--catalog", "rest", "table", "describe", "a.b"], true),
        (
            vec![
                "--config",
                "empty.toml",
                "--catalog-uri",
                "postgres://floe:userinfoPass6@127.0.0.1:1/db",
                "namespace",
                "list",
            ],
            false,
        ),
        (
            vec![
                "--catalog",
                "rest",
                "--catalog-prop",
                "uri=http://floe:userinfoPass6@127.0.0.1:1/x?access_token=bearerToken9",
                "namespace",
                "list",
            ],
            true,
        ),
    ];
    for (args, debug) in cases {
        let logs: &[&str] = if debug { &["warn", "debug"] } else { &["warn"] };
        for log in logs {
            let mut env = HOSTILE_ENV.to_vec();
            env.push(("FLOE_LOG", log));
            let out = floe_env(d, &args, &env);
            assert!(!out.status.success(), "{args:?} should fail to connect");
            assert_no_secret(&format!("{args:?} (FLOE_LOG={log})"), &out);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("error:"), "{args:?}: {err}");
            if args.contains(&"--json") {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert!(v["error"].as_str().unwrap().contains("127.0.0.1:1"), "{v}");
            }
        }
    }
}

#[test]
fn append_rejects_two_json_values_on_a_line_and_values_that_do_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "db"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "db.t",
            "--schema",
            "id bigint not null, d decimal(10, 2)",
        ],
    );
    for (body, want) in [
        (
            "{\"id\": 1}\n{\"id\": 11}{\"id\": 12}\n",
            "in.ndjson: line 2: column '-' value {\"id\": 11}{\"id\": 12}: more than one JSON value",
        ),
        (
            "{\"id\":10} garbage\n",
            "in.ndjson: line 1: column '-' value {\"id\":10} garbage: unexpected characters",
        ),
        (
            "{\"id\": -9223372036854775900}\n",
            "in.ndjson: line 1: column 'id' value -9223372036854775900: out of range for bigint",
        ),
        (
            "{\"id\": 1.9}\n",
            "column 'id' value 1.9: has a fractional part",
        ),
        (
            "{\"id\": 1, \"d\": 1.239}\n",
            "column 'd' value 1.239: has more than 2 digit(s) after the decimal point",
        ),
    ] {
        std::fs::write(d.join("in.ndjson"), body).unwrap();
        let out = floe(d, &["append", "db.t", "in.ndjson"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let described = ok_json(d, &["table", "describe", "db.t"]);
    assert!(described["current_snapshot"].is_null(), "nothing committed");
}

#[test]
fn diagnose_saves_a_report_and_compares_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (rows, _) = make_table_with_small_files(d, 6, 50);
    let report = ok_json(d, &["diagnose", "db.t", "--save", "before.json"]);
    assert_eq!(report["probe"]["rows"], rows, "--save times a full read");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("before.json")).unwrap()).unwrap();
    assert_eq!(saved["format"], "floe-diagnose-report");
    assert_eq!(saved["format_version"], 1);
    assert_eq!(saved["table"], "db.t");
    assert_eq!(saved["measures"]["probe"]["rows"], rows);
    let files_before = saved["measures"]["data_files"].as_u64().unwrap();
    assert!(files_before >= 6);

    ok_json(d, &["compact", "db.t"]);
    let v = ok_json(
        d,
        &[
            "diagnose",
            "db.t",
            "--compare",
            "before.json",
            "--html",
            "cmp.html",
        ],
    );
    assert_eq!(v["before"]["data_files"], files_before);
    assert_eq!(
        v["after"]["data_files"], 3,
        "one file per day after compaction"
    );
    assert_eq!(v["report"]["table"], "db.t");
    let delta = |m: &str| -> Value {
        v["deltas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["metric"] == m)
            .unwrap_or_else(|| panic!("{m}: {v}"))
            .clone()
    };
    assert_eq!(delta("live data files")["change"], 3 - files_before as i64);
    assert_eq!(delta("probe rows")["before"], rows);
    assert_eq!(
        delta("probe rows")["change"],
        0,
        "same rows read before and after"
    );
    assert!(delta("probe time")["after"].is_u64());
    assert!(delta("snapshots")["after"].as_u64() > delta("snapshots")["before"].as_u64());
    let html = std::fs::read_to_string(d.join("cmp.html")).unwrap();
    assert!(html.contains("<h2>Before / after</h2>"));
    assert!(html.contains(&format!(
        "<tr><td>live data files</td><td>{files_before}</td><td>3</td>"
    )));
    assert!(html.contains("File-size histogram, before (grey) and after"));
    let human = floe(d, &["diagnose", "db.t", "--compare", "before.json"]);
    assert!(human.status.success());
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("before / after: db.t"), "{text}");

    // A report of another table is an error naming --compare, a warning with --force.
    let mut other = saved.clone();
    other["table"] = "db.other".into();
    std::fs::write(d.join("other.json"), other.to_string()).unwrap();
    let bad = floe(d, &["diagnose", "db.t", "--compare", "other.json"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--compare") && err.contains("db.other"),
        "{err}"
    );
    let forced = floe(
        d,
        &[
            "--json",
            "diagnose",
            "db.t",
            "--compare",
            "other.json",
            "--force",
        ],
    );
    assert!(forced.status.success());
    assert!(String::from_utf8_lossy(&forced.stderr)
        .contains("warning: the saved report is of table db.other"));
    // A file that is not a saved report fails before the table is read.
    std::fs::write(d.join("junk.json"), "{\"a\": 1}").unwrap();
    let bad = floe(d, &["diagnose", "db.t", "--compare", "junk.json"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a saved diagnose report"));
    let bad = floe(d, &["diagnose", "db.t", "--compare", "missing.json"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.json"));
}

/// Appends one NDJSON batch of ids `from..to` to `db.t`.
fn append_ids(d: &Path, from: u64, to: u64) {
    let text: String = (from..to)
        .map(|id| {
            format!("{{\"id\": {id}, \"ts\": \"2026-05-01T12:00:00\", \"payload\": \"p\"}}\n")
        })
        .collect();
    let f = d.join(format!("ids-{from}.ndjson"));
    std::fs::write(&f, text).unwrap();
    ok_json(d, &["append", "db.t", f.to_str().unwrap()]);
}

/// Snapshot ids of `db.t`, oldest first.
fn snapshot_ids(d: &Path) -> Vec<i64> {
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            "SELECT snapshot_id FROM db.t$snapshots ORDER BY committed_at",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out)
        .iter()
        .map(|r| r["snapshot_id"].as_i64().unwrap())
        .collect()
}

#[test]
fn expire_snapshots_older_than_a_timestamp_keeps_later_commits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_events_table(d);
    append_ids(d, 0, 10);
    append_ids(d, 10, 20);
    std::thread::sleep(std::time::Duration::from_millis(30));
    let between = chrono::Utc::now();
    std::thread::sleep(std::time::Duration::from_millis(30));
    append_ids(d, 20, 30);
    append_ids(d, 30, 40);
    let ids = snapshot_ids(d);
    assert_eq!(ids.len(), 4);

    let at = between.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let v = ok_json(
        d,
        &[
            "expire-snapshots",
            "db.t",
            "--older-than",
            &at,
            "--retain-last",
            "1",
        ],
    );
    let mut want = ids[..2].to_vec();
    want.sort();
    let expired: Vec<i64> = v["expired_snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert_eq!(expired, want, "{v}");
    assert_eq!(v["older_than_ms"], between.timestamp_millis(), "{v}");
    assert_eq!(snapshot_ids(d), ids[2..].to_vec(), "the later commits stay");
    assert_eq!(count_and_sum(d, "db.t"), (40, (0..40).sum::<i64>()));

    // Epoch milliseconds are the same instant; nothing more to expire.
    let ms = between.timestamp_millis().to_string();
    let again = ok_json(d, &["expire-snapshots", "db.t", "--older-than", &ms]);
    assert_eq!(again["expired_snapshots"].as_array().unwrap().len(), 0);

    // A time in the future is accepted (as 0s) with a warning; --retain-last still applies.
    let out = floe(
        d,
        &[
            "--json",
            "expire-snapshots",
            "db.t",
            "--older-than",
            "2999-01-01",
            "--dry-run",
        ],
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2999-01-01T00:00:00Z is in the future"),
        "{err}"
    );
    let dry: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        dry["expired_snapshots"].as_array().unwrap().len(),
        1,
        "{dry}"
    );

    let bad = floe(
        d,
        &[
            "expire-snapshots",
            "db.t",
            "--older-than",
            "2026-11-31 10:00",
        ],
    );
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--older-than")
            && err.contains("'2026-11-31 10:00'")
            && err.contains("RFC 3339")
            && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(snapshot_ids(d), ids[2..].to_vec());
}

#[test]
fn tags_and_branches_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_events_table(d);
    let refused = floe(d, &["table", "tag", "create", "db.t", "v1"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no snapshot yet"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    append_ids(d, 0, 10);
    append_ids(d, 10, 20);
    append_ids(d, 20, 30);
    let ids = snapshot_ids(d);

    let tag = ok_json(
        d,
        &[
            "table",
            "tag",
            "create",
            "db.t",
            "v1",
            "--snapshot-id",
            &ids[0].to_string(),
            "--retain",
            "30d",
        ],
    );
    assert_eq!(tag["action"], "created", "{tag}");
    assert_eq!(tag["ref"]["type"], "tag", "{tag}");
    assert_eq!(tag["ref"]["snapshot_id"], ids[0], "{tag}");
    assert_eq!(tag["ref"]["max_ref_age_ms"], 30u64 * 86_400_000, "{tag}");
    let branch = ok_json(
        d,
        &[
            "table",
            "branch",
            "create",
            "db.t",
            "audit",
            "--max-snapshot-age",
            "2d",
            "--min-snapshots-to-keep",
            "2",
        ],
    );
    assert_eq!(branch["ref"]["snapshot_id"], ids[2], "the current snapshot");
    assert_eq!(branch["ref"]["min_snapshots_to_keep"], 2);
    assert_eq!(branch["ref"]["max_snapshot_age_ms"], 2u64 * 86_400_000);

    let tags = ok_json(d, &["table", "tag", "list", "db.t"]);
    assert_eq!(tags.as_array().unwrap().len(), 1, "{tags}");
    assert_eq!(tags[0]["name"], "v1");
    let branches = ok_json(d, &["table", "branch", "list", "db.t"]);
    let names: Vec<&str> = branches
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "audit"]);
    let described = ok_json(d, &["table", "describe", "db.t"]);
    assert_eq!(
        described["refs"].as_array().unwrap().len(),
        3,
        "{described}"
    );
    let text = String::from_utf8_lossy(&floe(d, &["table", "describe", "db.t"]).stdout).to_string();
    assert!(
        text.contains("refs\n") && text.contains("v1") && text.contains("retain 30d"),
        "{text}"
    );
    assert!(
        text.contains("audit") && text.contains("min-snapshots-to-keep 2"),
        "{text}"
    );

    // Each refusal is one line naming the problem, exit code 1.
    for (args, want) in [
        (vec!["table", "tag", "create", "db.t", "v1"], "--replace"),
        (
            vec!["table", "tag", "create", "db.t", "audit"],
            "a branch named 'audit'",
        ),
        (
            vec!["table", "tag", "create", "db.t", "x", "--snapshot-id", "7"],
            "no such snapshot",
        ),
        (
            vec!["table", "tag", "create", "db.t", "x", "--retain", "7 days"],
            "--retain",
        ),
        (
            vec!["table", "tag", "create", "db.t", "x", "--retain", "0s"],
            "greater than 0",
        ),
        (
            vec![
                "table",
                "branch",
                "create",
                "db.t",
                "b",
                "--min-snapshots-to-keep",
                "0",
            ],
            "--min-snapshots-to-keep",
        ),
        (
            vec!["table", "branch", "drop", "db.t", "main"],
            "cannot be dropped",
        ),
        (vec!["table", "tag", "drop", "db.t", "audit"], "is a branch"),
        (vec!["table", "tag", "drop", "db.t", "nope"], "no such tag"),
    ] {
        let out = floe(d, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }

    // --dry-run shows the change and commits nothing.
    let planned = ok_json(d, &["table", "tag", "create", "db.t", "v2", "--dry-run"]);
    assert_eq!(
        (
            &planned["action"],
            &planned["dry_run"],
            &planned["ref"]["snapshot_id"]
        ),
        (&"created".into(), &true.into(), &ids[2].into()),
        "{planned}"
    );
    let planned = ok_json(d, &["table", "tag", "drop", "db.t", "v1", "--dry-run"]);
    assert_eq!(
        (&planned["action"], &planned["dry_run"]),
        (&"dropped".into(), &true.into()),
        "{planned}"
    );
    let text = String::from_utf8_lossy(
        &floe(
            d,
            &["table", "branch", "drop", "db.t", "audit", "--dry-run"],
        )
        .stdout,
    )
    .to_string();
    assert!(text.starts_with("would drop branch 'audit'"), "{text}");
    let tags = ok_json(d, &["table", "tag", "list", "db.t"]);
    assert_eq!(tags.as_array().unwrap().len(), 1, "{tags}");
    assert_eq!(tags[0]["name"], "v1");

    // Expiry keeps the tagged snapshot and the branch's two; dropping them frees them.
    let e = ok_json(d, &["expire-snapshots", "db.t", "--older-than", "0s"]);
    assert_eq!(e["expired_snapshots"].as_array().unwrap().len(), 0, "{e}");
    let dropped = ok_json(d, &["table", "tag", "drop", "db.t", "v1"]);
    assert_eq!(dropped["action"], "dropped");
    assert_eq!(dropped["ref"]["snapshot_id"], ids[0]);
    ok_json(d, &["table", "branch", "drop", "db.t", "audit"]);
    let e = ok_json(d, &["expire-snapshots", "db.t", "--older-than", "0s"]);
    assert_eq!(e["expired_snapshots"].as_array().unwrap().len(), 2, "{e}");
    assert_eq!(snapshot_ids(d), [ids[2]]);
}

#[test]
fn a_primary_key_is_stored_as_identifier_fields_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "cdc"]);
    let created = ok_json(
        d,
        &[
            "table",
            "create",
            "cdc.users",
            "--schema",
            "id bigint, region string, name string, score double",
            "--primary-key",
            "id, region",
        ],
    );
    assert_eq!(
        created["primary_key"],
        serde_json::json!(["id", "region"]),
        "{created}"
    );
    // Key columns are made not null, as in SQL; the others keep their nullability.
    let required: Vec<(String, bool)> = created["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["required"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        required,
        vec![
            ("id".to_string(), true),
            ("region".to_string(), true),
            ("name".to_string(), false),
            ("score".to_string(), false)
        ]
    );
    let text = floe(d, &["table", "describe", "cdc.users"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("primary key id, region"));

    // PyIceberg sees the same identifier fields.
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (run .ci/setup)");
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop");
    let script = format!(
        "import sys\nsys.path.insert(0, {interop:?})\nfrom read_table import open_catalog\n\
         cat = open_catalog('sqlite:///' + {db:?}, 'floe', {wh:?})\n\
         print(sorted(cat.load_table('cdc.users').schema().identifier_field_names()))\n",
        interop = interop.display().to_string(),
        db = d.join("warehouse/catalog.db").display().to_string(),
        wh = d.join("warehouse").display().to_string(),
    );
    let out = Command::new(py).arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "['id', 'region']"
    );

    // A key no engine could use is refused, naming the column.
    for (key, says) in [("score", "float or double"), ("nope", "no column 'nope'")] {
        let out = floe(
            d,
            &[
                "table",
                "create",
                "cdc.bad",
                "--schema",
                "id bigint, score double",
                "--primary-key",
                key,
            ],
        );
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{key}: {err}");
    }
    // A column of the key cannot be dropped.
    let out = floe(
        d,
        &["table", "evolve-schema", "cdc.users", "--drop-column", "id"],
    );
    assert!(!out.status.success());
}

#[test]
fn upsert_and_delete_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "cdc"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "cdc.users",
            "--schema",
            "id bigint, name string, score bigint",
            "--primary-key",
            "id",
        ],
    );
    let first = d.join("first.ndjson");
    let lines: String = (0..10)
        .map(|i| format!("{{\"id\": {i}, \"name\": \"u{i}\", \"score\": {i}}}\n"))
        .collect();
    std::fs::write(&first, lines).unwrap();
    ok_json(
        d,
        &[
            "append",
            "cdc.users",
            first.to_str().unwrap(),
            "--mode",
            "upsert",
        ],
    );
    // Ids 5..12, id 7 twice (the last wins); 5..9 replace live rows.
    let second = d.join("second.ndjson");
    let mut lines: String = (5..12)
        .map(|i| {
            format!(
                "{{\"id\": {i}, \"name\": \"v{i}\", \"score\": {}}}\n",
                100 + i
            )
        })
        .collect();
    lines.push_str("{\"id\": 7, \"name\": \"last\", \"score\": 777}\n");
    std::fs::write(&second, lines).unwrap();
    let dry = ok_json(
        d,
        &[
            "append",
            "cdc.users",
            second.to_str().unwrap(),
            "--mode",
            "upsert",
            "--dry-run",
        ],
    );
    assert_eq!(dry["replaced_rows"], 5, "{dry}");
    assert_eq!(dry["snapshot_id"], Value::Null);
    let up = ok_json(
        d,
        &[
            "append",
            "cdc.users",
            second.to_str().unwrap(),
            "--mode",
            "upsert",
        ],
    );
    assert_eq!(up["mode"], "upsert", "{up}");
    assert_eq!(up["key"], serde_json::json!(["id"]));
    assert_eq!(up["rows"], 7);
    assert_eq!(up["duplicate_rows"], 1);
    assert_eq!(up["replaced_rows"], 5);
    let rows = |sql: &str| -> Vec<Value> {
        let out = floe(d, &["--json", "sql", sql]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_lines(&out)
    };
    let all = rows("SELECT id, name, score FROM cdc.users ORDER BY id");
    assert_eq!(all.len(), 12);
    assert_eq!(all[7]["name"], "last");
    assert_eq!(all[7]["score"], 777);
    assert_eq!(all[4]["name"], "u4");

    let del = ok_json(
        d,
        &[
            "delete",
            "cdc.users",
            "--where",
            "score >= 100 AND id % 2 = 1",
        ],
    );
    // 5, 7, 9 and 11 (7 twice in the input: its last row, score 777).
    assert_eq!(del["rows_deleted"], 4, "{del}");
    assert_eq!(del["mode"], "merge-on-read");
    let n = rows("SELECT count(*) AS n FROM cdc.users");
    assert_eq!(n[0]["n"], 8);
    // The text form says what happened.
    let out = floe(
        d,
        &["delete", "cdc.users", "--where", "id = 0", "--dry-run"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("dry run: 1 row(s)"),
        "{text}"
    );

    fails_with(
        d,
        &["delete", "cdc.users", "--where", "nope = 1"],
        &["nope"],
    );
    fails_with(
        d,
        &[
            "delete",
            "cdc.users",
            "--where",
            "id = 1",
            "--mode",
            "sideways",
        ],
        &["--mode", "sideways"],
    );
    fails_with(
        d,
        &[
            "append",
            "cdc.users",
            first.to_str().unwrap(),
            "--key",
            "id",
        ],
        &["--key", "upsert"],
    );
    let n = rows("SELECT count(*) AS n FROM cdc.users");
    assert_eq!(n[0]["n"], 8, "failed commands changed nothing");
}

/// A compaction whose outputs were written in the schema it started from never commits them
/// into a table whose schema changed meanwhile: it commits nothing, deletes its outputs and
/// says why; the next run compacts in the new schema with every row kept.
#[test]
fn a_compaction_racing_a_schema_change_commits_nothing_and_the_next_run_uses_the_new_schema() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = make_table_with_small_files(d, 6, 30);
    let data = d.join("warehouse/db/t/data");
    let files_before = walk_files(&data).len();
    let child = compaction_paused_before_commit(d, 3, 3000);
    ok_json(
        d,
        &[
            "table",
            "evolve-schema",
            "db.t",
            "--drop-column",
            "payload",
            "--add-column",
            "note string",
        ],
    );
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("schema") && err.contains("changed"), "{err}");
    assert_eq!(walk_files(&data).len(), files_before, "outputs left behind");
    assert_eq!(count_and_sum(d, "db.t"), expected);

    let v = ok_json(d, &["compact", "db.t"]);
    assert!(v["rewritten_files"].as_u64().unwrap() >= 6, "{v}");
    assert_eq!(count_and_sum(d, "db.t"), expected);
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            "SELECT count(note) AS n, count(*) AS m FROM db.t",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(
        (row["n"].as_i64(), row["m"].as_i64()),
        (Some(0), Some(expected.0))
    );
}

/// `floe --json compact db.t` started with a pause of `pause_ms` before its commit, returned
/// once it has written `outputs` files (its outputs wait in the table's data directory).
fn compaction_paused_before_commit(d: &Path, outputs: usize, pause_ms: u64) -> std::process::Child {
    let data = d.join("warehouse/db/t/data");
    let files_before = walk_files(&data).len();
    let child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(d)
        .args(["--json", "compact", "db.t"])
        .env("FLOE_FAULT_PAUSE_BEFORE_COMMIT_MS", pause_ms.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while walk_files(&data).len() < files_before + outputs {
        assert!(std::time::Instant::now() < deadline, "no output written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// Runs floe with its stdout read end closed before it prints (`floe ... | head` once `head`
/// has gone): returns the exit status and stderr.
fn floe_into_closed_pipe(d: &Path, args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = floe_command(d, args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_went_away_is_no_panic_and_the_work_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (rows, sum) = make_table_with_small_files(d, 6, 10);
    for json in [true, false] {
        let mut args = vec!["sql", "SELECT * FROM db.t"];
        if json {
            args.insert(0, "--json");
        }
        let (status, stderr) = floe_into_closed_pipe(d, &args);
        assert!(status.success(), "{args:?}: {status:?} {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // A command that changes the table finishes its work although nobody reads its report.
    let (status, stderr) = floe_into_closed_pipe(d, &["--json", "compact", "db.t"]);
    assert!(status.success(), "{status:?} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let files = ok_json(d, &["sql", "SELECT count(*) AS n FROM db.t$files"]);
    assert_eq!(
        files["n"], 3,
        "one file per day partition after the compaction: {files}"
    );
    assert_eq!(count_and_sum(d, "db.t"), (rows, sum));
}
