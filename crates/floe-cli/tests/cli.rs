//! The `floe` binary end to end: exit codes, `--json`, one-line errors, nothing committed on
//! bad input.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn floe(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(dir)
        .args(args)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .output()
        .expect("floe runs")
}

fn ok_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = floe(dir, &all);
    assert!(
        out.status.success(),
        "floe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

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
    assert_eq!(v["remove_orphan_files"]["deleted"]["deleted"], 1);
    assert!(v["after"]["storage_bytes"].as_u64() < v["before"]["storage_bytes"].as_u64());
    // Running it again starts over instead of failing.
    let v = ok_json(dir.path(), &["quickstart"]);
    assert_eq!(v["queries"]["rows"][0]["rows"], 4000);
    let human = floe(dir.path(), &["quickstart"]);
    assert!(human.status.success());
    assert!(String::from_utf8_lossy(&human.stdout).contains("$files"));
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

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(walk_files(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
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

fn count_and_sum(d: &Path, table: &str) -> (i64, i64) {
    let out = floe(
        d,
        &[
            "--json",
            "sql",
            &format!("SELECT count(*) AS n, sum(id) AS s FROM {table}"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out);
    (
        rows[0]["n"].as_i64().unwrap(),
        rows[0]["s"].as_i64().unwrap(),
    )
}

fn make_table_with_small_files(d: &Path, batches: usize, rows: usize) -> (i64, i64) {
    ok_json(d, &["namespace", "create", "db"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "db.t",
            "--schema",
            "id bigint not null, ts timestamp, payload string",
            "--partition",
            "day(ts)",
        ],
    );
    let (mut n, mut s) = (0i64, 0i64);
    for b in 0..batches {
        let mut text = String::new();
        for r in 0..rows {
            let id = (b * rows + r) as i64;
            text.push_str(&format!(
                "{{\"id\": {id}, \"ts\": \"2026-05-0{}T12:00:00\", \"payload\": \"{}\"}}\n",
                1 + id % 3,
                "x".repeat(20 + (id % 50) as usize)
            ));
            n += 1;
            s += id;
        }
        let f = d.join(format!("b{b}.ndjson"));
        std::fs::write(&f, text).unwrap();
        ok_json(d, &["append", "db.t", f.to_str().unwrap()]);
    }
    (n, s)
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

fn snapshot_count(d: &Path) -> u64 {
    ok_json(d, &["table", "describe", "db.t"])["snapshot_count"]
        .as_u64()
        .unwrap()
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
    assert!(orphans["too_recent"].as_u64().unwrap() > 0);
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
