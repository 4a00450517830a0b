//! `floe ingest` end to end: exactly-once under repeated kill -9 during a Kafka ingest (checked
//! by floe and PyIceberg), commit on SIGTERM with metrics served over HTTP, and flat memory on a
//! 2 GiB stream with a 64 MiB buffer.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use rskafka::client::partition::UnknownTopicHandling;
use rskafka::client::ClientBuilder;
use serde_json::Value;

mod common;

fn floe(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_floe"));
    c.current_dir(dir)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG");
    c
}

fn ok_json(dir: &Path, args: &[&str]) -> Value {
    let out = floe(dir).arg("--json").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "floe {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap()
}

fn sql_row(dir: &Path, q: &str) -> Value {
    let out = floe(dir).args(["--json", "sql", q]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap()
}

fn create_table(dir: &Path, table: &str) {
    let ns = table.split('.').next().unwrap();
    ok_json(dir, &["namespace", "create", ns]);
    ok_json(
        dir,
        &[
            "table",
            "create",
            table,
            "--schema",
            "id bigint not null, ts timestamp, name string",
            "--partition",
            "day(ts)",
        ],
    );
}

fn event(id: u64) -> String {
    format!(
        "{{\"id\": {id}, \"ts\": \"2026-03-0{}T{:02}:00:00\", \"name\": \"user-{}\"}}",
        1 + id % 3,
        id % 24,
        id % 1000
    )
}

use common::kafka;

/// Runs `floe ARGS` `rounds` times, each killed with SIGKILL after 0.3 to 1.5 s; every other
/// run widens the window between writing a commit's files and committing them. Returns the
/// kills.
fn kill_9_repeatedly(d: &Path, args: &[&str], rounds: usize) -> usize {
    let mut rng = rand::rng();
    for round in 0..rounds {
        let mut cmd = floe(d);
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        if round % 2 == 1 {
            cmd.env("FLOE_FAULT_PAUSE_INGEST_BEFORE_COMMIT_MS", "300");
        }
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    rounds
}

#[test]
fn kafka_ingest_is_exactly_once_under_repeated_kill_9() {
    const N: u64 = 30_000;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_table(d, "k.events");
    let topic = format!("eo-{}", uuid::Uuid::new_v4().simple());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async {
        let c = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
        c.controller_client()
            .unwrap()
            .create_topic(&topic, 3, 1, 5_000)
            .await
            .unwrap();
        c
    });
    // The producer streams N unique ids into 3 partitions over a few seconds, while the
    // ingest below is killed and restarted.
    let producer_topic = topic.clone();
    let producer = rt.spawn(async move {
        let mut parts = Vec::new();
        for p in 0..3 {
            parts.push(
                client
                    .partition_client(producer_topic.clone(), p, UnknownTopicHandling::Retry)
                    .await
                    .unwrap(),
            );
        }
        for chunk in 0..(N / 300) {
            for (p, pc) in parts.iter().enumerate() {
                common::produce_values(
                    pc,
                    (0..100).map(|k| event(chunk * 300 + p as u64 * 100 + k)),
                )
                .await;
            }
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
    });
    let source = format!("kafka://{}/{topic}", kafka());
    let args = [
        "ingest",
        "k.events",
        "--source",
        &source,
        "--commit-interval",
        "250ms",
    ];
    let kills = kill_9_repeatedly(d, &args, 8);
    rt.block_on(producer).unwrap();
    let summary = ok_json(
        d,
        &[
            "ingest",
            "k.events",
            "--source",
            &source,
            "--commit-interval",
            "1s",
            "--stop-when-idle",
            "3s",
        ],
    );
    assert_eq!(summary["stopped_by"], "idle");
    let row = sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM k.events",
    );
    assert_eq!(
        row["n"].as_u64(),
        Some(N),
        "after {kills} kills: every key once, none lost"
    );
    assert_eq!(row["d"].as_u64(), Some(N), "no key twice");
    assert_eq!(row["s"].as_u64(), Some(N * (N - 1) / 2));
    let snaps = sql_row(d, "SELECT count(*) AS n FROM k.events$snapshots");
    assert!(
        snaps["n"].as_u64().unwrap() >= 3,
        "the killed runs committed too: {snaps}"
    );
    // PyIceberg reads the same rows.
    let v = common::python_read(d, "k.events", "id");
    assert_eq!(v["pyiceberg"]["rows"].as_u64(), Some(N));
    assert_eq!(v["pyiceberg"]["sum"].as_u64(), Some(N * (N - 1) / 2));
    assert_eq!(v["duckdb"]["rows"].as_u64(), Some(N));
}

fn scrape(addr: &str) -> Option<String> {
    request(addr, "GET", "/metrics")
}

/// The whole response (status line, headers, body) to `method path`.
fn request(addr: &str, method: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(format!("{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

#[test]
fn sigterm_commits_what_is_buffered_and_metrics_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_table(d, "m.events");
    let input = d.join("in.ndjson");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 0..500 {
        writeln!(f, "{}", event(i)).unwrap();
    }
    writeln!(f, "{{\"id\": \"bad\"}}").unwrap();
    drop(f);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = floe(d)
        .args([
            "--json",
            "ingest",
            "m.events",
            "--source",
            input.to_str().unwrap(),
            "--follow",
        ])
        .args(["--commit-interval", "1h", "--metrics-addr", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        if let Some(t) = scrape(&addr) {
            if metric(&t, "recordsIn") == Some(501.0) {
                break t;
            }
        }
        assert!(
            Instant::now() < deadline,
            "metrics never showed the records"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(metric(&text, "badRecords"), Some(1.0));
    assert_eq!(
        metric(&text, "commits"),
        Some(0.0),
        "a 1 h interval: nothing committed yet"
    );
    assert!(metric(&text, "elapsedSecondsSinceLastSuccessfulCommit").is_some());
    assert!(text.contains("dataFilesSizeHistogram_bucket{le=\"+Inf\"} 0"));
    // Only its paths answer, and only to reads (as `floe maintain --listen`).
    let status_line = |m: &str, p: &str| {
        request(&addr, m, p)
            .unwrap()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        status_line("GET", "/nope").contains(" 404 "),
        "{}",
        status_line("GET", "/nope")
    );
    assert!(status_line("POST", "/metrics").contains(" 405 "));
    assert!(status_line("DELETE", "/api/status").contains(" 405 "));
    assert!(status_line("GET", "/api/status").contains(" 200 "));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.last().unwrap();
    assert_eq!(summary["stopped_by"], "signal");
    assert_eq!(summary["commits"], 1);
    assert_eq!(lines[0]["records"], 500, "the per-commit JSON line");
    let row = sql_row(d, "SELECT count(*) AS n FROM m.events");
    assert_eq!(row["n"], 500);
}

#[test]
fn a_2_gib_stream_with_a_64_mib_buffer_stays_under_512_mib() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_table(d, "big.events");
    let mut child = floe(d)
        .args([
            "--json",
            "ingest",
            "big.events",
            "--source",
            "-",
            "--write-buffer-size",
            "64MiB",
        ])
        .args(["--commit-interval", "1h"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().unwrap());
    let pad = "x".repeat(160);
    let mut written = 0u64;
    let mut n = 0u64;
    while written < 2 << 30 {
        let line = format!(
            "{{\"id\": {n}, \"ts\": \"2026-03-0{}T{:02}:00:00\", \"name\": \"{pad}{}\"}}\n",
            1 + n % 3,
            n % 24,
            n % 100_000
        );
        stdin.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
        n += 1;
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["records"].as_u64(), Some(n));
    assert_eq!(summary["commits"], 1, "one commit at the end of the stream");
    let peak = summary["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        peak < 512 << 20,
        "peak RSS {} MiB over 2 GiB of input",
        peak >> 20
    );
    let row = sql_row(d, "SELECT count(*) AS n FROM big.events");
    assert_eq!(row["n"].as_u64(), Some(n));
}

#[test]
fn an_unreachable_broker_or_missing_topic_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_table(d, "e.events");
    let started = Instant::now();
    let out = floe(d)
        .args([
            "ingest",
            "e.events",
            "--source",
            "kafka://127.0.0.1:1/events",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "gave up in time"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("127.0.0.1:1") && err.contains("cannot connect to Kafka"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = floe(d)
        .args([
            "ingest",
            "e.events",
            "--source",
            &format!(
                "kafka://{}/no-such-topic-{}",
                kafka(),
                uuid::Uuid::new_v4().simple()
            ),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

/// The change `k` of `step` in Kafka partition `p`: its key (always in partition `p`: key % 3)
/// and its value (`None`: a tombstone).
fn change(step: u64, p: u64, k: u64) -> (u64, Option<u64>) {
    let id = 3 * ((step * 37 + k * 11) % 200) + p;
    let v = (!(step + k).is_multiple_of(5)).then_some(step * 1000 + k);
    (id, v)
}

#[test]
fn kafka_upserts_match_a_reference_model_under_repeated_kill_9() {
    const STEPS: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok_json(d, &["namespace", "create", "u"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "u.users",
            "--schema",
            "id bigint, name string, v bigint",
            "--primary-key",
            "id",
        ],
    );
    let topic = format!("up-{}", uuid::Uuid::new_v4().simple());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async {
        let c = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
        c.controller_client()
            .unwrap()
            .create_topic(&topic, 3, 1, 5_000)
            .await
            .unwrap();
        c
    });
    // The model: per key, its last change (every key stays in one partition, so that is the
    // produce order).
    let mut model = std::collections::BTreeMap::new();
    for step in 0..STEPS {
        for p in 0..3 {
            for k in 0..50 {
                match change(step, p, k) {
                    (id, Some(v)) => model.insert(id, v),
                    (id, None) => model.remove(&id),
                };
            }
        }
    }
    let producer_topic = topic.clone();
    let producer = rt.spawn(async move {
        use rskafka::client::partition::Compression;
        use rskafka::record::Record;
        let mut parts = Vec::new();
        for p in 0..3 {
            parts.push(
                client
                    .partition_client(producer_topic.clone(), p, UnknownTopicHandling::Retry)
                    .await
                    .unwrap(),
            );
        }
        for step in 0..STEPS {
            for (p, pc) in parts.iter().enumerate() {
                let records = (0..50)
                    .map(|k| {
                        let (id, v) = change(step, p as u64, k);
                        Record {
                            key: Some(format!("{{\"id\": {id}}}").into_bytes()),
                            value: v.map(|v| {
                                format!("{{\"id\": {id}, \"name\": \"n{v}\", \"v\": {v}}}")
                                    .into_bytes()
                            }),
                            headers: Default::default(),
                            timestamp: chrono::Utc::now(),
                        }
                    })
                    .collect();
                pc.produce(records, Compression::NoCompression)
                    .await
                    .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
    });
    let source = format!("kafka://{}/{topic}", kafka());
    let args = [
        "ingest",
        "u.users",
        "--source",
        &source,
        "--mode",
        "upsert",
        "--commit-interval",
        "250ms",
    ];
    kill_9_repeatedly(d, &args, 6);
    rt.block_on(producer).unwrap();
    ok_json(
        d,
        &[
            "ingest",
            "u.users",
            "--source",
            &source,
            "--mode",
            "upsert",
            "--commit-interval",
            "1s",
            "--stop-when-idle",
            "3s",
        ],
    );
    let out = floe(d)
        .args(["--json", "sql", "SELECT id, v FROM u.users ORDER BY id"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<(u64, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            (r["id"].as_u64().unwrap(), r["v"].as_u64().unwrap())
        })
        .collect();
    let want: Vec<(u64, u64)> = model.into_iter().collect();
    assert_eq!(got.len(), want.len(), "one row per live key");
    assert_eq!(got, want, "every key's last change, after 6 kills");
    let v = common::python_read(d, "u.users", "v");
    let sum: u64 = want.iter().map(|r| r.1).sum();
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(
            v[reader]["rows"].as_u64(),
            Some(want.len() as u64),
            "{reader}"
        );
        assert_eq!(v[reader]["sum"].as_u64(), Some(sum), "{reader}");
    }
}

/// The issue's case and its variants: `evolve-schema` while `floe ingest` reads stdin. Every
/// commit after the change writes the buffered rows by field id: each value stays in its own
/// column, nothing is lost, and the ingest ends cleanly.
#[test]
fn a_schema_change_beside_a_running_ingest_keeps_every_value_in_its_column() {
    // Each variant is one or more `evolve-schema` commands run at once mid-stream.
    let changes: [&[&[&str]]; 5] = [
        &[&["--drop-column", "a"]],
        &[&["--add-column", "d string"]],
        &[&["--set-type", "n bigint"]],
        &[&["--drop-column", "a", "--add-column", "e string"]],
        &[&["--drop-column", "a"], &["--add-column", "a string"]],
    ];
    for (k, change) in changes.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let table = format!("t.s{k}");
        ok_json(d, &["namespace", "create", "t"]);
        ok_json(
            d,
            &[
                "table",
                "create",
                &table,
                "--schema",
                "id bigint, a string, b string, c string, n int",
            ],
        );
        let child = floe(d)
            .args(["--json", "ingest", &table, "--source", "-"])
            .args(["--commit-interval", "500ms"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = common::Killed(child);
        let mut stdin = child.0.stdin.take().unwrap();
        for i in 1..=30 {
            writeln!(
                stdin,
                r#"{{"id":{i},"a":"A{i}","b":"B{i}","c":"C{i}","n":{i}}}"#
            )
            .unwrap();
            stdin.flush().unwrap();
            std::thread::sleep(Duration::from_millis(60));
            if i == 12 {
                for c in change.iter() {
                    let mut args = vec!["table", "evolve-schema", table.as_str()];
                    args.extend_from_slice(c);
                    ok_json(d, &args);
                }
            }
        }
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "ingest did not end");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut err = String::new();
        child
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(child.0.wait().unwrap().success(), "{change:?}: {err}");
        let out = floe(d)
            .args([
                "--json",
                "sql",
                &format!("SELECT * FROM {table} ORDER BY id"),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 30, "{change:?}: {rows:?}");
        for (i, r) in (1..=30).zip(&rows) {
            assert_eq!(r["id"], i, "{change:?}: {r}");
            assert_eq!(r["b"], format!("B{i}"), "{change:?}: {r}");
            assert_eq!(r["c"], format!("C{i}"), "{change:?}: {r}");
            assert_eq!(r["n"], i, "{change:?}: {r}");
            match k {
                0 => assert!(r.get("a").is_none(), "{change:?}: {r}"),
                // An added column is null in rows read before the change; rows read after
                // the first commit on the new schema are decoded in it.
                1 => {
                    assert_eq!(r["a"], format!("A{i}"), "{change:?}: {r}");
                    assert!(r["d"].is_null(), "{change:?}: {r}");
                }
                2 => assert_eq!(r["a"], format!("A{i}"), "{change:?}: {r}"),
                3 => {
                    assert!(r.get("a").is_none(), "{change:?}: {r}");
                    assert!(r["e"].is_null(), "{change:?}: {r}");
                }
                // Dropped and added again: a new column (new field id), the old values gone
                // for rows read before the change, taken from the records after it.
                _ => assert!(
                    r["a"].is_null() || r["a"] == format!("A{i}"),
                    "{change:?}: {r}"
                ),
            }
        }
        if k == 4 {
            // Null for the rows read before the change, then the new column's values: once
            // a commit finds the new schema, the next records are decoded in it.
            let first = rows.iter().position(|r| !r["a"].is_null()).unwrap_or(30);
            assert!(
                first >= 5,
                "values of the dropped column came back: {rows:?}"
            );
            assert!(rows[first..].iter().all(|r| !r["a"].is_null()), "{rows:?}");
            assert_eq!(rows[29]["a"], "A30", "{rows:?}");
        }
    }
}
