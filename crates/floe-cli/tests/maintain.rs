//! `floe maintain` as a process: the dry-run decision table, a maintainer killed with kill -9
//! whose lease expires and whose work is done once by the next, SIGTERM letting a running job
//! finish, and the dashboard, metrics and API of a live service read in headless Chromium.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::*;

/// A `floe maintain` process, killed by PID when the test ends (even on failure), with its
/// stderr lines forwarded to a channel.
struct Service {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Service {
    fn start(d: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
        cmd.current_dir(d)
            .arg("maintain")
            .args(args)
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_CATALOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("floe maintain starts");
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Service {
            child,
            lines: rx,
            seen: vec![],
        }
    }

    /// Waits for a stderr line containing `needle`; returns it.
    fn wait_for(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no line with {needle:?} within {limit:?}; saw {:#?}",
                    self.seen
                ),
            }
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Waits for the exit; stdout.
    fn wait_exit(&mut self, limit: Duration) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut out = String::new();
                self.child
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                return (status, out);
            }
            assert!(
                Instant::now() < deadline,
                "floe maintain did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A table of 12 small files over 3 day partitions, compacted by maintain at once (idle time 0).
fn due_table(d: &Path) -> (i64, i64) {
    let expected = make_table_with_small_files(d, 12, 200);
    ok_json(
        d,
        &[
            "table",
            "set-property",
            "db.t",
            "floe.maintain.compact.partition-idle-time=0s",
        ],
    );
    expected
}

fn compactions(d: &Path) -> usize {
    let out = floe(
        d,
        &["--json", "sql", "SELECT operation FROM db.t$snapshots"],
    );
    json_lines(&out)
        .iter()
        .filter(|r| r["operation"] == "replace")
        .count()
}

fn decision<'a>(v: &'a Value, job: &str) -> &'a Value {
    v["passes"][0]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["table"] == "db.t" && d["job"] == job)
        .unwrap_or_else(|| panic!("no {job} decision: {v}"))
}

#[test]
fn dry_run_prints_the_decision_table_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = due_table(d);
    let files = walk_files(&d.join("warehouse/db/t")).len();
    let v = ok_json(d, &["maintain", "--once", "--dry-run"]);
    let c = decision(&v, "compact");
    assert_eq!(c["chosen"], true, "{c}");
    assert_eq!(c["fired"], "commit-count 12 >= 10");
    assert!(c["cost"]["bytes_to_read"].as_u64().unwrap() > 0);
    assert!(c["score"].as_f64().unwrap() > 0.0);
    // Orphan removal fired too (never run), but one job per table: compaction scores best.
    let o = decision(&v, "remove-orphan-files");
    assert_eq!(o["fired"], "orphans: never run");
    assert!(
        o["skipped"].as_str().unwrap().contains("one job per table"),
        "{o}"
    );
    let human = floe(d, &["maintain", "--dry-run"]);
    assert!(human.status.success());
    let text = String::from_utf8_lossy(&human.stdout);
    for needle in [
        "table  job",
        "scope",
        "benefit",
        "score",
        "RUN: commit-count 12 >= 10",
        "skip: oldest snapshot",
        "dry run: 1 job(s) would start now",
    ] {
        assert!(text.contains(needle), "{needle:?} missing in:\n{text}");
    }
    assert_eq!(walk_files(&d.join("warehouse/db/t")).len(), files);
    assert_eq!(compactions(d), 0);
    assert_eq!(count_and_sum(d, "db.t"), expected);
    // A bad option is one error naming it.
    let bad = floe(d, &["maintain", "--once", "--interval", "0s"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--interval"));
}

#[test]
fn a_maintainer_killed_with_kill_9_loses_its_lease_and_the_next_one_does_the_work_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = due_table(d);
    let data = d.join("warehouse/db/t/data");
    let inputs = walk_files(&data).len();
    // A pauses right before committing its compaction; kill -9 it there.
    let mut a = Service::start(
        d,
        &["--once", "--holder", "A", "--lease-ttl", "2s"],
        &[("FLOE_FAULT_PAUSE_BEFORE_COMMIT_MS", "60000")],
    );
    a.wait_for("start compact on db.t", Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(20);
    while walk_files(&data).len() < inputs + 3 {
        assert!(Instant::now() < deadline, "A wrote no output");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();

    // B at once: the lease is still A's.
    let v = ok_json(
        d,
        &["maintain", "--once", "--holder", "B", "--lease-ttl", "2s"],
    );
    let c = decision(&v, "compact");
    assert!(
        c["skipped"]
            .as_str()
            .unwrap()
            .starts_with("leased by A for "),
        "{c}"
    );
    assert_eq!(compactions(d), 0);
    // After the TTL the lease is free: B compacts, once.
    std::thread::sleep(Duration::from_millis(2200));
    let v = ok_json(
        d,
        &["maintain", "--once", "--holder", "B", "--lease-ttl", "2s"],
    );
    assert_eq!(decision(&v, "compact")["chosen"], true, "{v}");
    assert_eq!(v["jobs_failed"], 0);
    assert_eq!(compactions(d), 1);
    assert_eq!(count_and_sum(d, "db.t"), expected);
    let live = ok_json(d, &["compact", "db.t", "--dry-run"])["live_files_before"]
        .as_u64()
        .unwrap();
    assert_eq!(live, 3, "one file per partition");
    // A's outputs were never committed: unreferenced files, that only an orphan removal sees.
    let data = walk_files(&d.join("warehouse/db/t/data")).len() as u64;
    assert!(
        data >= 12 + 3 + 3,
        "12 inputs, B's 3 outputs, A's 3 orphans: {data}"
    );
}

#[test]
fn sigterm_lets_the_running_job_finish_then_exits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = due_table(d);
    let mut s = Service::start(
        d,
        &["--interval", "1s", "--holder", "S"],
        &[("FLOE_FAULT_PAUSE_BEFORE_COMMIT_MS", "2000")],
    );
    s.wait_for("start compact on db.t", Duration::from_secs(30));
    let status = Command::new("kill")
        .args(["-TERM", &s.pid()])
        .status()
        .unwrap();
    assert!(status.success());
    s.wait_for(
        "stopping: waiting up to 1m for 1 running job(s)",
        Duration::from_secs(10),
    );
    let (status, out) = s.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(out.contains("1 job(s) succeeded, 0 failed"), "{out}");
    assert_eq!(compactions(d), 1, "the running compaction committed");
    assert_eq!(count_and_sum(d, "db.t"), expected);
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_dashboard_of_a_live_service_renders_in_chromium() {
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "/usr/bin/chromium is missing: .ci/setup installs Debian's chromium package"
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    due_table(d);
    let mut s = Service::start(
        d,
        &[
            "--interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
            "--holder",
            "dash",
        ],
        &[],
    );
    let line = s.wait_for("serving the dashboard on http://", Duration::from_secs(30));
    let addr = line
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    s.wait_for("done compact on db.t", Duration::from_secs(60));
    // A pass after the job, so the table's numbers show the compaction.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = http_get(&addr, "/api/tables/db.t");
        if body.contains("\"live_data_files\":3") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no pass after the compaction: {body}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let metrics = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("floe_maintain_jobs_succeeded_total{job=\"compact\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("floe_table_live_data_files{table=\"db.t\"} 3"),
        "{metrics}"
    );
    let jobs = http_get(&addr, "/api/jobs");
    assert!(
        jobs.contains("\"job\":\"compact\"") && jobs.contains("\"succeeded\""),
        "{jobs}"
    );

    let profile = tempfile::tempdir().unwrap();
    let mut browser = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("http://{addr}/"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let dom = loop {
        if browser.try_wait().unwrap().is_some() {
            let mut dom = String::new();
            browser
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut dom)
                .unwrap();
            break dom;
        }
        if Instant::now() > deadline {
            let _ = browser.kill();
            let _ = browser.wait();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(dom.contains("data-ready=\"1\""), "{dom}");
    assert!(dom.contains("data-table=\"db.t\""), "{dom}");
    assert!(dom.contains("<polyline"), "plots drawn: {dom}");
    assert!(dom.contains("class=\"job"), "jobs listed: {dom}");
    assert!(
        dom.contains("commit-count 12 &gt;= 10") || dom.contains("commit-count 12 >= 10"),
        "the job's reason: {dom}"
    );
}

/// `floe maintain` compacting and expiring (aggressively: 1 s snapshot age) while `floe
/// ingest` streams from Kafka into the same table: nothing lost, nothing twice, read alike by
/// floe, PyIceberg and DuckDB.
#[test]
fn maintenance_beside_a_running_ingest_loses_and_duplicates_nothing() {
    const N: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "k"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "k.events",
            "--schema",
            "id bigint not null, ts timestamp, name string",
            "--partition",
            "day(ts)",
        ],
    );
    for kv in [
        "floe.maintain.compact.partition-idle-time=0s",
        "floe.maintain.compact.trigger.commit-count=4",
        "floe.maintain.compact.rate-limit=1s",
        "history.expire.max-snapshot-age-ms=1000",
    ] {
        ok_json(d, &["table", "set-property", "k.events", kv]);
    }
    let topic = format!("mt-{}", uuid::Uuid::new_v4().simple());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let producer = {
        let topic = topic.clone();
        rt.spawn(async move { produce_events(&topic, 3, N, Duration::from_millis(40)).await })
    };
    let mut m = Service::start(d, &["--interval", "1s", "--holder", "M", "--json"], &[]);
    // Wait for the topic to exist before ingest reads it.
    std::thread::sleep(Duration::from_millis(500));
    let source = format!("kafka://{}/{topic}", kafka());
    let ingest = floe(
        d,
        &[
            "--json",
            "ingest",
            "k.events",
            "--source",
            &source,
            "--commit-interval",
            "300ms",
            "--stop-when-idle",
            "4s",
        ],
    );
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    rt.block_on(producer).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    Command::new("kill")
        .args(["-TERM", &m.pid()])
        .status()
        .unwrap();
    let (status, out) = m.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    let summary: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(
        summary["jobs_succeeded"].as_u64().unwrap() >= 2,
        "{summary}"
    );

    let rows = json_lines(&floe(
        d,
        &[
            "--json",
            "sql",
            "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM k.events",
        ],
    ));
    assert_eq!(rows[0]["n"].as_u64(), Some(N), "none lost, none twice");
    assert_eq!(rows[0]["d"].as_u64(), Some(N));
    assert_eq!(rows[0]["s"].as_u64(), Some(N * (N - 1) / 2));
    let by_job = &summary["succeeded_by_job"];
    assert!(by_job["compact"].as_u64().unwrap() >= 1, "{summary}");
    assert!(
        by_job["expire-snapshots"].as_u64().unwrap() >= 1,
        "{summary}"
    );
    let v = python_read(d, "k.events", "id");
    assert_eq!(v["pyiceberg"]["rows"].as_u64(), Some(N));
    assert_eq!(v["pyiceberg"]["sum"].as_u64(), Some(N * (N - 1) / 2));
    assert_eq!(v["duckdb"]["rows"].as_u64(), Some(N));
}

/// A failed job is recorded, `--once` exits non-zero, and the next round backs off that job
/// instead of retrying it at once (no hot loop); the failure shows in the decision.
#[test]
fn a_failed_job_backs_off_and_once_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = due_table(d);
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(d)
        .args(["--json", "maintain", "--once"])
        .env("FLOE_FAULT_FAIL_MAINTAIN_JOB", "storage unavailable")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a failed round exits non-zero");
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    let summary: Value = serde_json::from_str(lines[0]).unwrap();
    // Compaction failed; the other due job (orphans) too; each once, no retry loop.
    assert_eq!(summary["jobs_failed"], 2, "{summary}");
    assert_eq!(summary["jobs_succeeded"], 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 maintenance job(s) failed"));
    let v = ok_json(d, &["maintain", "--once", "--dry-run"]);
    let c = decision(&v, "compact");
    let why = c["skipped"].as_str().unwrap();
    assert!(
        why.starts_with("backoff: 1 failure(s), last ") && why.contains("storage unavailable"),
        "{c}"
    );
    assert_eq!(compactions(d), 0);
    assert_eq!(count_and_sum(d, "db.t"), expected);
}

/// The service waits for an unreachable catalog and says so on every retry; `--once` fails at
/// once with one error naming it.
#[test]
fn an_unreachable_catalog_is_reported_while_the_service_waits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let uri = "postgres://postgres@127.0.0.1:1/nowhere";
    let once = floe(d, &["--catalog-uri", uri, "maintain", "--once"]);
    assert!(!once.status.success());
    let err = String::from_utf8_lossy(&once.stderr);
    assert!(err.contains("127.0.0.1:1"), "{err}");
    let mut s = Service::start(d, &["--interval", "2s"], &[("FLOE_CATALOG_URI", uri)]);
    let first = s.wait_for(
        "[maintain] waiting: catalog floe unreachable",
        Duration::from_secs(40),
    );
    assert!(first.contains("retrying in 1s"), "{first}");
    s.wait_for("retrying in 2s", Duration::from_secs(40));
    Command::new("kill")
        .args(["-TERM", &s.pid()])
        .status()
        .unwrap();
    let (_, _) = s.wait_exit(Duration::from_secs(30));
    assert!(s
        .wait_for(
            "stopped while waiting for catalog floe",
            Duration::from_secs(5)
        )
        .contains("stopped"));
}

#[test]
fn bad_properties_are_refused_at_create_and_set_and_a_skipped_table_fails_maintain_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "p"]);
    let bad = [
        "commit.retry.num-retries=-1",
        "write.target-file-size-bytes=0",
        "floe.maintain.enabled=maybe",
        "floe.maintain.compact.trigger.commit-count=-1",
        "floe.maintain.orphans.older-than=1h",
        "floe.maintain.compact.trigger.comit-count=5",
    ];
    for kv in bad {
        let key = kv.split_once('=').unwrap().0;
        let out = floe(
            d,
            &[
                "table",
                "create",
                "p.t",
                "--schema",
                "id bigint",
                "--property",
                kv,
            ],
        );
        assert!(!out.status.success(), "{kv} accepted by table create");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{kv}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    ok_json(d, &["table", "create", "p.t", "--schema", "id bigint"]);
    ok_json(d, &["table", "create", "p.good", "--schema", "id bigint"]);
    for kv in bad {
        let key = kv.split_once('=').unwrap().0;
        let out = floe(d, &["table", "set-property", "p.t", kv]);
        assert!(!out.status.success(), "{kv} accepted by set-property");
        assert!(String::from_utf8_lossy(&out.stderr).contains(key), "{kv}");
    }
    let described = ok_json(d, &["table", "describe", "p.t"]);
    assert!(
        !described["properties"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("floe.maintain.")),
        "{described}"
    );

    // A bad value another engine stored: the table is skipped, named with the property, and
    // the round fails.
    set_property_with_pyiceberg(d, "p.t", "floe.maintain.enabled", "maybe");
    let out = floe(d, &["maintain", "--once"]);
    assert!(
        !out.status.success(),
        "a skipped table passed maintain --once"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let error = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(
        error.contains("p.t")
            && error.contains("floe.maintain.enabled")
            && !error.contains("p.good"),
        "{err}"
    );
}

#[test]
fn maintain_dry_run_refuses_listen() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = floe(d, &["maintain", "--dry-run", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success(), "--listen was ignored with --dry-run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen") && err.contains("--dry-run"),
        "{err}"
    );
}

#[test]
fn a_table_name_with_a_newline_or_override_forges_no_output_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "n"]);
    ok_json(d, &["table", "create", "n.t", "--schema", "id bigint"]);
    // Another tool renames the table in the catalog database (floe refuses such a name).
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (run .ci/setup)");
    let db = d.join("warehouse/catalog.db");
    let script = format!(
        "import sqlite3\nc = sqlite3.connect({db:?})\n\
         c.execute(\"UPDATE iceberg_tables SET table_name = ? WHERE table_name = 't'\", \
         ('t\\n[maintain] done compact on n.victim\\u202e',))\nc.commit()\n",
        db = db.display().to_string()
    );
    let out = Command::new(py).arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = floe(d, &["table", "list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(listed.trim_end().lines().count(), 1, "{listed:?}");
    assert!(listed.contains("\\n[maintain]"), "{listed:?}");
    assert!(!listed.contains('\u{202e}'), "{listed:?}");

    let out = floe(d, &["maintain", "--once"]);
    for stream in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(stream);
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("[maintain] done compact on n.victim")),
            "a forged line: {text}"
        );
        assert!(!text.contains('\u{202e}'), "{text:?}");
    }
}
