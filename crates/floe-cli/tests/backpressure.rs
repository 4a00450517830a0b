//! Backpressure (crates/floe/src/ingest/debt.rs, crates/floe/src/maintain/in_stream.rs): with the
//! in-process maintenance made slow (every job pauses 4 s), `floe ingest --maintain` stretches its
//! commit interval while the compaction debt is over `floe.ingest.max-small-files-per-partition`,
//! keeps the debt near the limit instead of a file per commit, and comes back once the debt is
//! paid; memory stays bounded by the write buffer.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{count_and_sum, create_events_table, ok_json, Killed};
use serde_json::Value;

#[test]
fn slow_maintenance_stretches_the_commit_interval_and_bounds_the_debt() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_events_table(d);
    for (k, v) in [
        ("floe.ingest.max-small-files-per-partition", "6"),
        ("floe.ingest.max-commit-interval", "3s"),
        ("floe.maintain.compact.rate-limit", "0s"),
    ] {
        ok_json(d, &["table", "set-property", "db.t", &format!("{k}={v}")]);
    }
    let input = d.join("in.ndjson");
    std::fs::write(&input, "").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(d)
        .args([
            "--json",
            "ingest",
            "db.t",
            "--source",
            input.to_str().unwrap(),
            "--follow",
            "--commit-interval",
            "300ms",
            "--maintain",
            "--write-buffer-size",
            "8MiB",
            "--stop-when-idle",
            "8s",
        ])
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .env("FLOE_FAULT_PAUSE_MAINTAIN_JOB_MS", "4000")
        .stdout(Stdio::from(
            std::fs::File::create(d.join("out.log")).unwrap(),
        ))
        .stderr(Stdio::from(
            std::fs::File::create(d.join("err.log")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let mut ingest = Killed(child);
    // 25 s of a record every 25 ms, all in one day partition.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    let n = 1000i64;
    for id in 0..n {
        writeln!(
            f,
            "{{\"id\": {id}, \"ts\": \"2026-05-01T12:00:00\", \"payload\": \"p{id}\"}}"
        )
        .unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(25));
    }
    let status = ingest.0.wait().unwrap();
    let stdout = std::fs::read_to_string(d.join("out.log")).unwrap();
    let stderr = std::fs::read_to_string(d.join("err.log")).unwrap();
    assert!(status.success(), "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let commits: Vec<&Value> = lines.iter().filter(|l| l.get("commit").is_some()).collect();
    let summary = lines.last().unwrap();
    assert_eq!(count_and_sum(d, "db.t"), (n, (0..n).sum()));

    let intervals: Vec<u64> = commits
        .iter()
        .map(|c| c["commit_interval_ms"].as_u64().unwrap())
        .collect();
    let debts: Vec<u64> = commits
        .iter()
        .filter_map(|c| c["debt"]["max_small_files"].as_u64())
        .collect();
    // The writer slowed down (the interval doubled at least twice), throttled time counted.
    let longest = intervals.iter().max().copied().unwrap();
    assert!(longest >= 1200, "intervals {intervals:?}\n{stderr}");
    assert!(summary["throttled_ms"].as_u64().unwrap() > 0, "{summary}");
    // 25 s at 300 ms would be about 80 commits, each a small file while maintenance stalls.
    assert!(
        commits.len() < 60,
        "{} commits: {intervals:?}",
        commits.len()
    );
    // The debt stayed near its limit: over it by at most what one debt reading (2 s) of
    // commits at the base interval adds, plus a roll-up in flight.
    let most = debts.iter().max().copied().unwrap_or(0);
    assert!(most <= 6 + 7 + 4, "debt {debts:?}");
    // Maintenance ran (slowly) and paid: the interval came back down after its peak.
    let peak = intervals.iter().position(|i| *i == longest).unwrap();
    assert!(
        intervals[peak..].contains(&300),
        "recovered to --commit-interval: {intervals:?}"
    );
    assert!(
        summary["maintenance"]["succeeded_by_job"]["compact"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{summary}"
    );
    assert!(stderr.contains("backpressure"), "{stderr}");
    // Memory: the buffer is 8 MiB; the process (DataFusion, iceberg, tokio) stays far under
    // what a growing buffer would take.
    let rss = summary["peak_rss_bytes"].as_u64().unwrap();
    assert!(rss < 400 << 20, "peak RSS {rss}");
}
