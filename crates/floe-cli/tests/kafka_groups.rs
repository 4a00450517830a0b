//! `floe ingest --group` with the partitions assigned by Kafka's consumer group (no
//! `?partitions=`): workers join and leave while a producer writes, and every event lands
//! exactly once.
//!
//! One worker starts alone and reads all four partitions; a second and a third join (the
//! cooperative rebalance moves partitions to them, each handed off by its old owner first);
//! the second stops on SIGTERM (it leaves the group, its partitions move at once) and the third
//! is killed with kill -9 (its partitions move after its session timeout, and what it never
//! handed off is read again by the new owner). The first worker ends alone, with every
//! partition back. The broker is the Tansu of `.ci/setup`; every process is ended by PID, also
//! when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{create_kafka_table, kafka, sql_row, Killed};

const N: u64 = 80_000;
const PARTITIONS: i32 = 4;

/// A worker of a floe group, its stdout and stderr in files of `d`.
struct Worker {
    name: String,
    proc: Killed,
    out: PathBuf,
    err: PathBuf,
}

impl Worker {
    fn start(d: &Path, source: &str, group: &str, name: &str) -> Worker {
        let out = d.join(format!("{name}.out"));
        let err = d.join(format!("{name}.err"));
        let child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .current_dir(d)
            .args([
                "--json",
                "ingest",
                "k.events",
                "--source",
                source,
                "--group",
                group,
                "--worker-id",
                name,
                "--commit-interval",
                "1s",
            ])
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_CATALOG")
            .env(
                "FLOE_LOG",
                std::env::var("KAFKA_GROUPS_LOG").unwrap_or("floe=info".into()),
            )
            .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
            .spawn()
            .unwrap();
        Worker {
            name: name.into(),
            proc: Killed(child),
            out,
            err,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The streams of each hand-off this worker recorded.
    fn handed_off(&self) -> Vec<Vec<String>> {
        self.lines()
            .iter()
            .filter(|v| v["handoff"].is_string())
            .map(|v| {
                v["handed_off"]
                    .as_array()
                    .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default()
            })
            .collect()
    }

    fn assert_runs(&mut self) {
        if let Some(status) = self.proc.0.try_wait().unwrap() {
            panic!(
                "{} exited ({status}); stderr:\n{}",
                self.name,
                self.stderr()
            );
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.proc.0.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGTERM, then the exit status (within `within`).
    fn stop(&mut self, within: Duration) -> std::process::ExitStatus {
        self.signal("-TERM");
        let until = Instant::now() + within;
        loop {
            if let Some(s) = self.proc.0.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < until,
                "{} did not stop within {within:?}; stderr:\n{}",
                self.name,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn counts(d: &Path) -> (i64, i64) {
    let row = sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM k.events",
    );
    (row["n"].as_i64().unwrap(), row["ids"].as_i64().unwrap())
}

/// Waits until `workers[joined]` has partitions assigned (its stderr says so), each worker
/// still running.
fn wait_assigned(workers: &mut [&mut Worker], joined: usize) {
    let until = Instant::now() + Duration::from_secs(90);
    while !workers[joined]
        .stderr()
        .contains("stream assigned to this worker")
    {
        assert!(
            Instant::now() < until,
            "{} got no partition within 90 s; stderr:\n{}",
            workers[joined].name,
            workers[joined].stderr()
        );
        sleep_watching(workers, Duration::from_millis(500));
    }
}

fn sleep_watching(workers: &mut [&mut Worker], d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        for w in workers.iter_mut() {
            w.assert_runs();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn kafka_assigns_partitions_to_group_workers_joining_leaving_and_killed_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_kafka_table(d);
    let topic = format!("groups-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    // Its own Kafka consumer group too (named after the floe group).
    let group = format!("g-{topic}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    // 400 events a round, a round every 200 ms: ~40 s of stream.
    let producer =
        rt.spawn({
            let topic = topic.clone();
            async move {
                common::produce_events(&topic, PARTITIONS, N, Duration::from_millis(200)).await
            }
        });
    std::thread::sleep(Duration::from_millis(500));
    // A short session, so the killed worker's partitions move within seconds.
    let source = format!(
        "kafka://{}/{topic}?session.timeout.ms=6000&heartbeat.interval.ms=500",
        kafka()
    );
    // Each step waits for the rebalance it causes (a round takes seconds, more on a busy
    // machine), then lets the workers read a while.
    let mut a = Worker::start(d, &source, &group, "a");
    wait_assigned(&mut [&mut a], 0);
    sleep_watching(&mut [&mut a], Duration::from_secs(2));
    let mut b = Worker::start(d, &source, &group, "b");
    wait_assigned(&mut [&mut a, &mut b], 1);
    sleep_watching(&mut [&mut a, &mut b], Duration::from_secs(2));
    let mut c = Worker::start(d, &source, &group, "c");
    wait_assigned(&mut [&mut a, &mut b, &mut c], 2);
    sleep_watching(&mut [&mut a, &mut b, &mut c], Duration::from_secs(2));
    let status = b.stop(Duration::from_secs(30));
    assert!(status.success(), "b: {status}; stderr:\n{}", b.stderr());
    sleep_watching(&mut [&mut a, &mut c], Duration::from_secs(3));
    c.signal("-KILL");
    let _ = c.proc.0.wait();
    rt.block_on(producer).unwrap();

    // a ends alone with every partition: all events land, each once.
    let until = Instant::now() + Duration::from_secs(90);
    let mut last = (0, 0);
    while Instant::now() < until {
        a.assert_runs();
        last = counts(d);
        if last.0 >= N as i64 {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    // A little longer: a duplicate would show up now.
    std::thread::sleep(Duration::from_secs(3));
    let status = a.stop(Duration::from_secs(30));
    assert!(status.success(), "a: {status}; stderr:\n{}", a.stderr());
    let (n, ids) = counts(d);
    let report = |w: &Worker| {
        let err = w.stderr();
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("floe::")).collect();
        format!(
            "{}: hand-offs {:?}\n{}",
            w.name,
            w.handed_off(),
            lines.join("\n")
        )
    };
    assert_eq!(
        (n, ids),
        (N as i64, N as i64),
        "rows and distinct ids after the group ran (waited until {last:?});\n{}\n{}\n{}",
        report(&a),
        report(&b),
        report(&c),
    );

    // Kafka moved partitions: b handed off some, a handed off all four over its life.
    let streams = |w: &Worker| {
        w.handed_off()
            .into_iter()
            .flatten()
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (sa, sb, sc) = (streams(&a), streams(&b), streams(&c));
    assert_eq!(sa.len(), PARTITIONS as usize, "{}", report(&a));
    assert!(
        !sb.is_empty() && sb.len() < PARTITIONS as usize,
        "{}",
        report(&b)
    );
    // c read partitions (its hand-offs may all have been lost to the kill).
    assert!(
        c.stderr().contains("stream assigned to this worker"),
        "{} {sc:?}",
        report(&c)
    );
    // a gave partitions up when b joined, handing off what it had read of them first.
    let aerr = a.stderr();
    assert!(
        aerr.contains("streams taken from this worker"),
        "a's stderr:\n{aerr}"
    );
    let berr = b.stderr();
    assert!(
        berr.contains("stream assigned to this worker"),
        "b's stderr:\n{berr}"
    );
    // Nobody's hand-off was refused (each partition's old owner handed off before the new one
    // read it).
    for w in [&a, &b, &c] {
        let err = w.stderr();
        assert!(
            !err.contains("covered these streams") && !err.contains("refused"),
            "{}:\n{err}",
            w.name
        );
    }
}
