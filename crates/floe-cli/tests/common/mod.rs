//! Helpers shared by the CLI test binaries: run `floe` in a directory, read its JSON, build a
//! table of small files, count rows.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A child process ended by PID when dropped, also when the test fails.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn floe(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(dir)
        .args(args)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .output()
        .expect("floe runs")
}

pub fn ok_json(dir: &Path, args: &[&str]) -> Value {
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

pub fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
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

pub fn count_and_sum(d: &Path, table: &str) -> (i64, i64) {
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

/// Creates `db.t` (`id bigint not null, ts timestamp, payload string`, by `day(ts)`).
pub fn create_events_table(d: &Path) {
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
}

pub fn make_table_with_small_files(d: &Path, batches: usize, rows: usize) -> (i64, i64) {
    create_events_table(d);
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

pub fn snapshot_count(d: &Path) -> u64 {
    ok_json(d, &["table", "describe", "db.t"])["snapshot_count"]
        .as_u64()
        .unwrap()
}

/// The Kafka broker `.ci/setup` starts.
pub fn kafka() -> String {
    std::env::var("FLOE_TEST_KAFKA").expect("Kafka tests need FLOE_TEST_KAFKA (run .ci/setup)")
}

/// Produces one record per value (no key, no headers, stamped now) to a partition, uncompressed.
pub async fn produce_values(
    pc: &rskafka::client::partition::PartitionClient,
    values: impl IntoIterator<Item = String>,
) {
    use rskafka::client::partition::Compression;
    use rskafka::record::Record;
    let records: Vec<Record> = values
        .into_iter()
        .map(|v| Record {
            key: None,
            value: Some(v.into_bytes()),
            headers: Default::default(),
            timestamp: chrono::Utc::now(),
        })
        .collect();
    pc.produce(records, Compression::NoCompression)
        .await
        .unwrap();
}

/// Creates `topic` with `partitions` partitions and produces ids `0..n` as NDJSON events
/// (`id`, `ts` over three days, `name`), 100 per partition per round, a round every
/// `pause`: a stream of a few seconds.
pub async fn produce_events(topic: &str, partitions: i32, n: u64, pause: std::time::Duration) {
    use rskafka::client::partition::UnknownTopicHandling;
    use rskafka::client::ClientBuilder;
    let c = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
    c.controller_client()
        .unwrap()
        .create_topic(topic, partitions, 1, 5_000)
        .await
        .unwrap();
    let mut parts = Vec::new();
    for p in 0..partitions {
        parts.push(
            c.partition_client(topic.to_string(), p, UnknownTopicHandling::Retry)
                .await
                .unwrap(),
        );
    }
    let mut next = 0u64;
    while next < n {
        for pc in &parts {
            let ids = next..(next + 100).min(n);
            next = (next + 100).min(n);
            if !ids.is_empty() {
                let event = |id: u64| {
                    format!(
                        "{{\"id\": {id}, \"ts\": \"2026-03-0{}T{:02}:00:00\", \"name\": \"user-{}\"}}",
                        1 + id % 3,
                        id % 24,
                        id % 1000
                    )
                };
                produce_values(pc, ids.map(event)).await;
            }
        }
        tokio::time::sleep(pause).await;
    }
}

/// `tests/interop/read_table.py` on the embedded catalog of `d`: what PyIceberg and DuckDB
/// read of `table` (rows, and the sum of `sum_column`).
pub fn python_read(d: &Path, table: &str, sum_column: &str) -> Value {
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (run .ci/setup)");
    let wh = d.join("warehouse").display().to_string();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(py)
        .arg(root.join("tests/interop/read_table.py"))
        .args([
            "--catalog-uri",
            &format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/')),
        ])
        .args([
            "--warehouse",
            &wh,
            "--table",
            table,
            "--sum-column",
            sum_column,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Sets `key=value` on `table` of the embedded catalog of `d` with PyIceberg, below floe's
/// validation (what another engine, or an older floe, may store).
pub fn set_property_with_pyiceberg(d: &Path, table: &str, key: &str, value: &str) {
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (run .ci/setup)");
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop");
    let db = d.join("warehouse/catalog.db");
    let script = format!(
        "import sys\nsys.path.insert(0, {interop:?})\nfrom read_table import open_catalog\n\
         cat = open_catalog('sqlite:///' + {db:?}, 'floe', {wh:?})\n\
         t = cat.load_table({table:?})\n\
         with t.transaction() as tx:\n    tx.set_properties({{{key:?}: {value:?}}})\n",
        interop = interop.display().to_string(),
        db = db.display().to_string(),
        wh = d.join("warehouse").display().to_string(),
    );
    let out = Command::new(py).arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// noida-db's Kafka service on a free port, data in `dir`.
pub fn noida_kafka(dir: &Path) -> (String, Killed) {
    let port = free_port();
    // The server binary itself, not the package's Python launcher (killing the launcher
    // would leave the server running).
    let python = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (run .ci/setup)");
    let out = Command::new(python)
        .args([
            "-c",
            "import noida_db, os; print(os.path.join(os.path.dirname(noida_db.__file__), 'noida-db'))",
        ])
        .output()
        .expect("python");
    assert!(out.status.success(), "noida-db (installed by .ci/setup)");
    let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let child = Killed(
        Command::new(bin)
            .args(["start", "--only", "kafka", "--kafka-port"])
            .arg(port.to_string())
            .arg("--data-dir")
            .arg(dir.join("noida"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("broker.log")).unwrap())
            .spawn()
            .expect("noida-db (installed by .ci/setup)"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "noida-db never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (format!("127.0.0.1:{port}"), child)
}

/// Namespace `k` and table `k.events (id bigint not null, ts timestamp, name string)`, the
/// table of the Kafka tests.
pub fn create_kafka_table(d: &Path) {
    ok_json(d, &["namespace", "create", "k"]);
    ok_json(
        d,
        &[
            "table",
            "create",
            "k.events",
            "--schema",
            "id bigint not null, ts timestamp, name string",
        ],
    );
}

/// The first row of `floe --json sql Q` in `d`.
pub fn sql_row(d: &Path, q: &str) -> Value {
    let out = floe(d, &["--json", "sql", q]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap()
}

/// The run's seed: `FLOE_CHAOS_SEED`, or the clock (printed, to replay).
pub fn chaos_seed(label: &str) -> u64 {
    let seed: u64 = match std::env::var("FLOE_CHAOS_SEED") {
        Ok(s) => s.parse().expect("FLOE_CHAOS_SEED is a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("[chaos {label}] seed {seed} (replay with FLOE_CHAOS_SEED={seed})");
    seed
}

/// A fresh database on the PostgreSQL `.ci/setup` starts: its URI.
pub fn fresh_queue() -> String {
    let url = std::env::var("FLOE_TEST_POSTGRES_URL")
        .expect("FLOE_TEST_POSTGRES_URL is not set: run the tests through .ci/test");
    let name = format!("floe_queue_{}", uuid::Uuid::new_v4().simple());
    let bin = std::env::var("FLOE_PG_BIN").expect("FLOE_PG_BIN (run .ci/setup)");
    let out = Command::new(Path::new(&bin).join("createdb"))
        .args(["--maintenance-db", &url, &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "createdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// `floe` run in `d`, with no warehouse, catalog or queue from the environment.
pub fn floe_cmd(d: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_floe"));
    c.current_dir(d)
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG")
        .env_remove("FLOE_QUEUE");
    c
}

/// A `floe worker` on `queue`, its JSON report in `d/NAME.json`.
pub fn queue_worker(d: &Path, queue: &str, name: &str, envs: &[(&str, &str)]) -> Child {
    let mut c = floe_cmd(d);
    c.args(["--json", "worker", "--queue", queue, "--worker-id", name])
        .args(["--stop-when-idle", "4s", "--lease-ttl", "3s"])
        .env("FLOE_LOG", "info")
        .stdout(std::fs::File::create(d.join(format!("{name}.json"))).unwrap())
        .stderr(std::fs::File::create(d.join(format!("{name}.log"))).unwrap());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.spawn().unwrap()
}
