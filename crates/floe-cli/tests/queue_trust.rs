//! The distributed-compaction queue is less trusted than the table's storage (it never holds a
//! secret): a forged `done` report naming a live file, and a forged task naming another
//! table's file, commit nothing, delete nothing, and fail with a message naming the run and the
//! task (`floe::operations::compact::queue_checks`).

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{
    count_and_sum, floe_cmd, fresh_queue, make_table_with_small_files, ok_json, python_read,
    queue_worker,
};
use floe::iceberg::spec::FormatVersion;

/// `floe compact db.t --distributed` on `queue`, in the background.
fn coordinator(d: &Path, queue: &str) -> std::thread::JoinHandle<Output> {
    let mut c = floe_cmd(d);
    c.args([
        "--json",
        "compact",
        "db.t",
        "--distributed",
        "--queue",
        queue,
    ])
    .args(["--lease-ttl", "3s", "--worker-timeout", "30s"])
    .args(["--option", "min-input-files=2"])
    .env("FLOE_LOG", "info");
    std::thread::spawn(move || c.output().unwrap())
}

fn psql(queue: &str, sql: &str) -> String {
    let bin = std::env::var("FLOE_PG_BIN").expect("FLOE_PG_BIN (run .ci/setup)");
    let out = Command::new(Path::new(&bin).join("psql"))
        .args(["-At", "-v", "ON_ERROR_STOP=1", "-c", sql, queue])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits until the coordinator queued its tasks; returns how many.
fn queued(queue: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = std::panic::catch_unwind(|| {
            psql(
                queue,
                "SELECT count(*) FROM floe_compact_tasks WHERE state = 'queued'",
            )
        })
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
        if n > 0 {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "the coordinator never queued a task"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn live_paths(d: &Path, table: &str) -> Vec<String> {
    let out = floe_cmd(d)
        .args([
            "--json",
            "sql",
            &format!("SELECT file_path FROM {table}$files"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::json_lines(&out)
        .iter()
        .map(|r| r["file_path"].as_str().unwrap().to_string())
        .collect()
}

fn local(path: &str) -> &Path {
    Path::new(path.trim_start_matches("file://"))
}

#[test]
fn a_forged_done_report_naming_a_live_file_commits_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (n, s) = make_table_with_small_files(d, 6, 100);
    let before = live_paths(d, "db.t");
    let queue = fresh_queue();
    let coordinating = coordinator(d, &queue);
    let tasks = queued(&queue);

    // Someone with write access to the queue claims every task and reports a live file of the
    // table as its output (a row count that fits, so only the file itself can give it away).
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let config = floe::catalog::CatalogConfig::embedded(Some(&d.join("warehouse"))).unwrap();
        let catalog = floe::catalog::Catalog::connect(&config).await.unwrap();
        let ident = floe::catalog::parse_table_ident("db.t").unwrap();
        let t = catalog.load_table(&ident).await.unwrap();
        let live = floe::table::manifests::live_files(&t).await.unwrap();
        let md = t.metadata();
        let pt = md
            .default_partition_spec()
            .partition_type(md.current_schema())
            .unwrap();
        let forged = floe::iceberg::spec::serialize_data_file_to_json(
            live[0].file.clone(),
            &pt,
            FormatVersion::V2,
        )
        .unwrap();
        let output =
            serde_json::json!([{"spec_id": md.default_partition_spec_id(), "data_file": forged}])
                .to_string();
        let store = floe::coordination::Store::connect(&queue).await.unwrap();
        for _ in 0..tasks {
            let now = store.now_ms().await.unwrap();
            let claimed = store
                .claim_task("forger", Duration::from_secs(60), now)
                .await
                .unwrap()
                .expect("a queued task");
            let done = floe::coordination::tasks::TaskDone {
                output: output.clone(),
                rows: live[0].file.record_count(),
                ..Default::default()
            };
            assert!(store
                .complete_task(&claimed, "forger", &done, now)
                .await
                .unwrap());
        }
    });
    let out = coordinating.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "every group failed: {err}");
    assert!(
        err.contains("run ") && err.contains("task ") && err.contains("not named after this run"),
        "{err}"
    );

    // The live file is still there, the table unchanged, and every reader agrees.
    for p in &before {
        assert!(local(p).exists(), "{p} was deleted");
    }
    assert_eq!(live_paths(d, "db.t").len(), before.len());
    assert_eq!(count_and_sum(d, "db.t"), (n, s));
    let py = python_read(d, "db.t", "id");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(py[reader]["rows"].as_i64(), Some(n), "{py}");
        assert_eq!(py[reader]["sum"].as_i64(), Some(s), "{py}");
    }
}

#[test]
fn a_forged_task_naming_another_tables_file_is_refused_by_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (n, s) = make_table_with_small_files(d, 6, 100);
    // Another table, whose file the forged task names.
    ok_json(
        d,
        &[
            "table",
            "create",
            "db.other",
            "--schema",
            "id bigint not null, ts timestamp, payload string",
        ],
    );
    std::fs::write(
        d.join("other.ndjson"),
        "{\"id\": 7, \"ts\": \"2026-05-01T00:00:00\", \"payload\": \"other\"}\n",
    )
    .unwrap();
    ok_json(d, &["append", "db.other", "other.ndjson"]);
    let other = live_paths(d, "db.other").remove(0);

    let queue = fresh_queue();
    let coordinating = coordinator(d, &queue);
    queued(&queue);
    let spec = psql(
        &queue,
        "SELECT spec FROM floe_compact_tasks WHERE task_id = 0",
    );
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    let mine = spec["members"][0]["task"]["data_file_path"]
        .as_str()
        .unwrap()
        .to_string();
    psql(
        &queue,
        &format!(
            "UPDATE floe_compact_tasks SET spec = replace(spec, '{mine}', '{other}') \
             WHERE task_id = 0"
        ),
    );
    let mut w = queue_worker(d, &queue, "w", &[]);
    let out = coordinating.join().unwrap();
    assert!(w.wait().unwrap().success());
    let log = std::fs::read_to_string(d.join("w.log")).unwrap();
    assert!(log.contains("outside the location of table db.t"), "{log}");
    let report: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(d.join("w.json")).unwrap().trim()).unwrap();
    assert!(report["tasks_failed"].as_u64().unwrap() >= 1, "{report}");
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        err.contains("task 0") || stdout.contains("task 0"),
        "the failed group names the task: {err}\n{stdout}"
    );
    // Nothing of the other table was read into this one; both are unchanged.
    assert_eq!(count_and_sum(d, "db.t"), (n, s));
    assert!(local(&other).exists());
    let row = common::sql_row(d, "SELECT count(*) AS n, sum(id) AS s FROM db.other");
    assert_eq!((row["n"].as_i64(), row["s"].as_i64()), (Some(1), Some(7)));
}
