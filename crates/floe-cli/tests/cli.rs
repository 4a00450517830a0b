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
