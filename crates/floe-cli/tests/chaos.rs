//! The chaos test: `floe ingest` from a 3-partition Kafka topic for ~100 s while the table is
//! compacted and its history expired beside it, and the ingest itself is killed with kill -9
//! and restarted (same writer id) every 10-25 s. Nothing may be lost or written twice (floe,
//! PyIceberg and DuckDB count the same rows, every id once), the ingest never fails by itself,
//! and the last restart resumes from the positions in the table.
//!
//! Two variants share one body ([`chaos`]): external maintenance (`floe compact` and `floe
//! expire-snapshots --older-than 0s --retain-last 1` as separate processes at random moments),
//! and `floe ingest --maintain` (the ingest runs the table's maintenance policy itself).
//!
//! A third ([`chaos_group`]) scales the stream out: three `floe ingest --group` workers, one
//! partition each, hand their files to the group's coordinator (whichever holds the group's
//! lease), which commits them all once per interval. Random workers (often the coordinator)
//! are killed with kill -9 and restarted under the same worker id while `floe compact` runs
//! beside them.
//!
//! The schedule (maintenance kinds, pauses, kill moments) comes from a seeded RNG; the seed is
//! printed, and `FLOE_CHAOS_SEED=<seed>` replays it. On failure the working directory (table,
//! every process's stdout and stderr) is kept and its path printed.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rskafka::client::partition::UnknownTopicHandling;
use rskafka::client::ClientBuilder;
use serde_json::Value;

mod common;
use common::{chaos_seed, json_lines, kafka, produce_values, python_read};

const TABLE: &str = "chaos.events";
const PARTITIONS: i32 = 3;
/// Events per producer round, and a round every `TICK`: 400 events/s.
const PER_ROUND: u64 = 40;
const TICK: Duration = Duration::from_millis(100);
/// 1000 rounds: 100 s, 40 000 events.
const ROUNDS: u64 = 1000;
const N: u64 = PER_ROUND * ROUNDS;
/// `floe expire-snapshots` of every snapshot it may expire (`--older-than 0s --retain-last 1`).
const EXPIRE_ALL: [&str; 6] = [
    "expire-snapshots",
    TABLE,
    "--older-than",
    "0s",
    "--retain-last",
    "1",
];

/// A `floe` child process with stdout and stderr in files (no pipe to drain), killed by its
/// PID when dropped: every process a test starts ends with it, also when the test panics.
struct Proc {
    name: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
    status: Option<ExitStatus>,
}

impl Proc {
    fn spawn(d: &Path, name: &str, args: &[&str], env: &[(&str, String)]) -> Proc {
        let logs = d.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let out = logs.join(format!("{name}.stdout"));
        let err = logs.join(format!("{name}.stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .current_dir(d)
            .args(args)
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_CATALOG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("floe {args:?} does not start: {e}"));
        Proc {
            name: name.to_string(),
            child,
            out,
            err,
            started: Instant::now(),
            status: None,
        }
    }

    /// The exit status, once it exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().unwrap();
        }
        self.status
    }

    /// kill -9 (by PID), and reaps it.
    fn kill9(&mut self) {
        if self.status.is_none() {
            self.child.kill().unwrap();
            self.status = Some(self.child.wait().unwrap());
        }
    }

    /// Waits for the exit, at most `limit` (then kills it and panics).
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.exited() {
                return s;
            }
            if Instant::now() > deadline {
                self.kill9();
                panic!(
                    "{} did not exit within {limit:?}; stderr:\n{}",
                    self.name,
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// The stderr lines that mention an error (any case).
    fn error_lines(&self) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|l| l.to_lowercase().contains("error"))
            .map(str::to_string)
            .collect()
    }

    /// Asserts that it logged no error lines ([`Proc::error_lines`]).
    fn assert_no_errors(&self, seed: u64) {
        let errors = self.error_lines();
        assert!(
            errors.is_empty(),
            "seed {seed}: {} logged errors: {errors:#?}",
            self.name
        );
    }

    /// Panics if it exited: it never stops by itself.
    fn assert_runs(&mut self, seed: u64) {
        if let Some(status) = self.exited() {
            panic!(
                "seed {seed}: {} exited by itself ({status}) after {:.1}s; stderr:\n{}",
                self.name,
                self.started.elapsed().as_secs_f64(),
                self.stderr()
            );
        }
    }

    /// The last line of its stdout as JSON (a summary), or null.
    fn last_json(&self) -> Value {
        serde_json::from_str(self.stdout().lines().last().unwrap_or("null")).unwrap_or(Value::Null)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The working directory, kept (and its path printed) when the test fails.
struct WorkDir(Option<tempfile::TempDir>);

impl WorkDir {
    fn new() -> Self {
        WorkDir(Some(
            tempfile::Builder::new()
                .prefix("floe-chaos-")
                .tempdir()
                .unwrap(),
        ))
    }

    fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(t) = self.0.take() {
                eprintln!("[chaos] kept the working directory: {}", t.keep().display());
            }
        }
    }
}

fn floe_json(d: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = common::floe(d, &all);
    assert!(
        out.status.success(),
        "floe {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out)
}

fn sql(d: &Path, q: &str) -> Vec<Value> {
    floe_json(d, &["sql", q])
}

fn event(id: u64) -> String {
    // Four hour partitions, filled round robin in runs of 7 ids.
    format!(
        "{{\"id\": {id}, \"ts\": \"2026-03-01T{:02}:{:02}:{:02}\", \"payload\": \"p{id}-{}\"}}",
        10 + (id / 7) % 4,
        (id / 60) % 60,
        id % 60,
        "x".repeat(40 + (id % 61) as usize)
    )
}

/// Produces ids `0..N`, `PER_ROUND` per `TICK` (each id to partition `id % 3`), on a fixed
/// schedule (no drift): 100 s.
async fn produce(topic: String, produced: Arc<AtomicU64>) {
    let c = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
    let mut parts = Vec::new();
    for p in 0..PARTITIONS {
        parts.push(
            c.partition_client(topic.clone(), p, UnknownTopicHandling::Retry)
                .await
                .unwrap(),
        );
    }
    let start = tokio::time::Instant::now();
    for round in 0..ROUNDS {
        for (p, pc) in parts.iter().enumerate() {
            let ids = (round * PER_ROUND..(round + 1) * PER_ROUND)
                .filter(|id| id % PARTITIONS as u64 == p as u64);
            produce_values(pc, ids.map(event)).await;
        }
        produced.fetch_add(PER_ROUND, Ordering::Relaxed);
        tokio::time::sleep_until(start + TICK * (round as u32 + 1)).await;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Maintenance {
    /// `floe compact` and `floe expire-snapshots` as separate processes.
    External,
    /// `floe ingest --maintain`.
    ByIngest,
}

/// Per-commit JSON lines of an ingest's stdout (the summary line has `stopped_by`).
fn commit_lines(p: &Proc) -> Vec<Value> {
    p.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("snapshot_id").is_some() && v.get("stopped_by").is_none())
        .collect()
}

fn replace_snapshots(d: &Path) -> BTreeSet<i64> {
    let q = format!("SELECT snapshot_id, operation FROM {TABLE}$snapshots");
    sql(d, &q)
        .iter()
        .filter(|r| r["operation"] == "replace")
        .filter_map(|r| r["snapshot_id"].as_i64())
        .collect()
}

/// What the table holds: its snapshots (with summaries) and any id stored twice, for a
/// failure's report.
fn history(d: &Path) -> String {
    let mut s = String::new();
    let q = format!(
        "SELECT committed_at, snapshot_id, parent_id, operation, summary FROM {TABLE}$snapshots \
         ORDER BY committed_at"
    );
    for r in sql(d, &q) {
        s.push_str(&format!("  {r}\n"));
    }
    let q = format!(
        "SELECT id, count(*) AS n FROM {TABLE} GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 10"
    );
    s.push_str("ids stored more than once (first 10):\n");
    for r in sql(d, &q) {
        s.push_str(&format!("  {r}\n"));
    }
    s
}

/// Log lines stamped with the time since the test started.
struct Clock {
    label: String,
    t0: Instant,
}

impl Clock {
    fn new(label: &str) -> Clock {
        Clock {
            label: label.to_string(),
            t0: Instant::now(),
        }
    }

    fn log(&self, msg: impl AsRef<str>) {
        eprintln!(
            "[chaos {} {:6.1}s] {}",
            self.label,
            self.t0.elapsed().as_secs_f64(),
            msg.as_ref()
        );
    }
}

fn create_table(d: &Path) {
    floe_json(d, &["namespace", "create", "chaos"]);
    floe_json(
        d,
        &[
            "table",
            "create",
            TABLE,
            "--schema",
            "id bigint not null, ts timestamp, payload string",
            "--partition",
            "hour(ts)",
        ],
    );
}

/// Creates a fresh topic of `PARTITIONS` partitions and starts [`produce`] on `rt` (dropping
/// the runtime, also on a panic, ends it): the topic, the producer, the events produced so far.
fn start_producer(
    rt: &tokio::runtime::Runtime,
) -> (String, tokio::task::JoinHandle<()>, Arc<AtomicU64>) {
    let topic = format!("chaos-{}", uuid::Uuid::new_v4().simple());
    rt.block_on(async {
        let c = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
        c.controller_client()
            .unwrap()
            .create_topic(&topic, PARTITIONS, 1, 5_000)
            .await
            .unwrap();
    });
    let produced = Arc::new(AtomicU64::new(0));
    let producer = rt.spawn(produce(topic.clone(), produced.clone()));
    (topic, producer, produced)
}

/// Half the ingest runs pause 300 ms between writing their files and committing (or handing
/// them off), so that more kills land in that window.
fn pause_env(rng: &mut StdRng) -> Vec<(&'static str, String)> {
    if rng.random_bool(0.5) {
        vec![(
            "FLOE_FAULT_PAUSE_INGEST_BEFORE_COMMIT_MS",
            "300".to_string(),
        )]
    } else {
        vec![]
    }
}

type Tally = std::collections::BTreeMap<String, u32>;

/// The maintenance processes running beside the ingest (with their kinds), how many were
/// started, and how many of each kind succeeded and failed.
#[derive(Default)]
struct Maint {
    running: Vec<(String, Proc)>,
    started: usize,
    ok: Tally,
    failed: Tally,
}

impl Maint {
    /// Forgets the maintenance processes that exited, counting (and logging) them per kind as
    /// succeeded or failed (a failure is allowed: a conflict, say).
    fn reap(&mut self, clock: &Clock) {
        let (ok, failed) = (&mut self.ok, &mut self.failed);
        self.running.retain_mut(|(kind, p)| match p.exited() {
            None => true,
            Some(status) => {
                let secs = p.started.elapsed().as_secs_f64();
                if status.success() {
                    *ok.entry(kind.clone()).or_default() += 1;
                    let v = p.last_json();
                    let what = match kind.as_str() {
                        "compact" => format!(
                            "rewrote {} file(s) into {}, {} commit(s)",
                            v["rewritten_files"],
                            v["added_files"],
                            v["commits"].as_array().map_or(0, |c| c.len())
                        ),
                        _ => format!(
                            "expired {} snapshot(s), deleted {} file(s)",
                            v["expired_snapshots"].as_array().map_or(0, |e| e.len()),
                            v["deleted"]["deleted"]
                        ),
                    };
                    clock.log(format!("{} ok in {secs:.1}s: {what}", p.name));
                } else {
                    *failed.entry(kind.clone()).or_default() += 1;
                    clock.log(format!(
                        "{} FAILED ({status}) in {secs:.1}s (allowed): {}",
                        p.name,
                        p.stderr().trim()
                    ));
                }
                false
            }
        });
    }

    /// Starts `floe compact` as `compact-<no>`; it holds its outputs up to 2 s before
    /// committing, so that several ingest commits (and maybe an expiry, or a kill) land in
    /// between.
    fn start_compact(&mut self, d: &Path, rng: &mut StdRng, clock: &Clock) {
        self.started += 1;
        let env = vec![(
            "FLOE_FAULT_PAUSE_BEFORE_COMMIT_MS",
            rng.random_range(0..2_000u64).to_string(),
        )];
        let name = format!("compact-{:02}", self.started);
        clock.log(format!("start {name} {env:?}"));
        let args = ["--json", "compact", TABLE];
        let p = Proc::spawn(d, &name, &args, &env);
        self.running.push(("compact".to_string(), p));
    }

    /// Starts `floe expire-snapshots --older-than 0s --retain-last 1` as `expire-<no>`.
    fn start_expire(&mut self, d: &Path, clock: &Clock) {
        self.started += 1;
        let name = format!("expire-{:02}", self.started);
        clock.log(format!("start {name} []"));
        let args = [&["--json"][..], &EXPIRE_ALL].concat();
        let p = Proc::spawn(d, &name, &args, &[]);
        self.running.push(("expire".to_string(), p));
    }

    /// Asserts that some process of `kind` (a `what`) succeeded.
    fn assert_some_succeeded(&self, kind: &str, what: &str, seed: u64) {
        assert!(
            self.ok.get(kind).is_some_and(|&c| c >= 1),
            "seed {seed}: no {what} succeeded: {:?}",
            self.failed
        );
    }

    /// Waits for every maintenance process (at most 60 s each), then reaps them.
    fn wait_and_reap(&mut self, clock: &Clock) {
        for (_, p) in self.running.iter_mut() {
            p.wait(Duration::from_secs(60));
        }
        self.reap(clock);
    }
}

/// Joins the producer, once it finished, and checks that it produced every event.
fn producer_done(
    rt: &tokio::runtime::Runtime,
    producer: tokio::task::JoinHandle<()>,
    produced: &AtomicU64,
    clock: &Clock,
) {
    rt.block_on(producer)
        .expect("the producer produced every event");
    assert_eq!(produced.load(Ordering::Relaxed), N);
    clock.log(format!("producer done: {N} events"));
}

/// Kills each of the processes still `running` once the producer is done (kill -9; none may
/// have exited by itself, nor logged an error), logging it with `note`, into `done`. Returns
/// how many it killed.
fn kill_at_end(
    running: impl IntoIterator<Item = Proc>,
    note: impl Fn(&Proc) -> Option<String>,
    done: &mut Vec<Proc>,
    seed: u64,
    clock: &Clock,
) -> u32 {
    let mut kills = 0;
    for mut p in running {
        assert!(
            p.exited().is_none(),
            "seed {seed}: {} exited by itself; stderr:\n{}",
            p.name,
            p.stderr()
        );
        p.kill9();
        kills += 1;
        clock.log(match note(&p) {
            Some(note) => format!("kill -9 {} (the producer is done; {note})", p.name),
            None => format!("kill -9 {} (the producer is done)", p.name),
        });
        p.assert_no_errors(seed);
        done.push(p);
    }
    kills
}

/// Rows, distinct ids, their sum and range, as floe reads the table.
fn table_counts(d: &Path) -> Value {
    sql(
        d,
        &format!(
            "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s, min(id) AS lo, max(id) AS hi \
             FROM {TABLE}"
        ),
    )
    .remove(0)
}

/// Every produced id once in `row` ([`table_counts`]); the table's history otherwise.
fn assert_every_event_once(d: &Path, seed: u64, row: &Value) {
    let n = row["n"].as_u64().unwrap();
    let distinct = row["d"].as_u64().unwrap();
    if n != N || distinct != N {
        panic!(
            "seed {seed}: {N} produced, the table holds {n} rows with {distinct} distinct ids \
             ({} duplicate rows, {} ids lost)\nsnapshots:\n{}",
            n as i64 - distinct as i64,
            N as i64 - distinct as i64,
            history(d)
        );
    }
    assert_eq!(row["s"].as_u64(), Some(N * (N - 1) / 2), "seed {seed}");
}

/// PyIceberg and DuckDB read every event too.
fn assert_other_readers_agree(d: &Path, seed: u64) {
    let v = python_read(d, TABLE, "id");
    assert_eq!(v["pyiceberg"]["rows"].as_u64(), Some(N), "seed {seed}: {v}");
    assert_eq!(
        v["pyiceberg"]["sum"].as_u64(),
        Some(N * (N - 1) / 2),
        "seed {seed}: {v}"
    );
    assert_eq!(v["duckdb"]["rows"].as_u64(), Some(N), "seed {seed}: {v}");
}

fn chaos(mode: Maintenance) {
    let label = match mode {
        Maintenance::External => "external",
        Maintenance::ByIngest => "--maintain",
    };
    let seed = chaos_seed(label);
    let mut rng = StdRng::seed_from_u64(seed);
    let clock = Clock::new(label);
    let log = |msg: String| clock.log(msg);

    // Dropped last: the processes below end first.
    let dir = WorkDir::new();
    let d = dir.path();
    create_table(d);
    if mode == Maintenance::ByIngest {
        // The policy's defaults (active partitions rolled up by size tiers), on the test's
        // time scale: a compaction at most every 5 s (not 5 min), snapshots expire after 30 s
        // (not 5 days).
        for kv in [
            "floe.maintain.compact.rate-limit=5s",
            "history.expire.max-snapshot-age-ms=30000",
        ] {
            floe_json(d, &["table", "set-property", TABLE, kv]);
        }
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (topic, producer, produced) = start_producer(&rt);
    log(format!(
        "topic {topic}: producing {N} events over ~100 s; dir {}",
        d.display()
    ));

    let source = format!("kafka://{}/{topic}", kafka());
    let ingest_args = |extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = ["--json", "ingest", TABLE, "--source", &source]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--commit-interval", "1s"].map(String::from));
        if mode == Maintenance::ByIngest {
            a.push("--maintain".into());
        }
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let start_ingest = |run: usize, extra: &[&'static str], env: &[(&str, String)]| -> Proc {
        let args = ingest_args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Proc::spawn(d, &format!("ingest-{run:02}"), &args, env)
    };
    // Every ingest run, killed or not, for its commits and stderr.
    let mut done: Vec<Proc> = Vec::new();
    let mut run = 0usize;
    let env = pause_env(&mut rng);
    let mut ingest = Some(start_ingest(run, &[], &env));
    log(format!(
        "ingest-{run:02} started (pid {}) {env:?}",
        ingest.as_ref().unwrap().child.id()
    ));
    let mut restart_at: Option<Instant> = None;
    let mut next_kill = Instant::now() + Duration::from_millis(rng.random_range(10_000..25_000));
    let mut next_maint = Instant::now() + Duration::from_millis(rng.random_range(2_000..8_000));
    let mut next_poll = Instant::now() + Duration::from_secs(4);
    let mut maint = Maint::default();
    let mut replaces: BTreeSet<i64> = BTreeSet::new();
    let mut kills = 0u32;

    while !producer.is_finished() {
        let now = Instant::now();
        // The ingest never stops by itself.
        if let Some(p) = ingest.as_mut() {
            p.assert_runs(seed);
        }
        if now >= next_kill && ingest.is_some() {
            let mut p = ingest.take().unwrap();
            assert!(p.exited().is_none(), "{} still runs when killed", p.name);
            p.kill9();
            kills += 1;
            let commits = commit_lines(&p).len();
            log(format!(
                "kill -9 {} after {:.1}s ({commits} commit(s))",
                p.name,
                p.started.elapsed().as_secs_f64()
            ));
            p.assert_no_errors(seed);
            done.push(p);
            let pause = Duration::from_millis(rng.random_range(0..3_000));
            restart_at = Some(now + pause);
            next_kill = now + pause + Duration::from_millis(rng.random_range(10_000..25_000));
        }
        if restart_at.is_some_and(|t| now >= t) {
            restart_at = None;
            run += 1;
            let env = pause_env(&mut rng);
            let p = start_ingest(run, &[], &env);
            log(format!(
                "ingest-{run:02} started (pid {}) {env:?}",
                p.child.id()
            ));
            ingest = Some(p);
        }
        maint.reap(&clock);
        if mode == Maintenance::External && now >= next_maint {
            // At most two maintenance processes at once (they may overlap each other).
            if maint.running.len() < 2 {
                if rng.random_bool(0.5) {
                    maint.start_compact(d, &mut rng, &clock);
                } else {
                    maint.start_expire(d, &clock);
                }
            }
            next_maint = now + Duration::from_millis(rng.random_range(2_000..8_000));
        }
        if mode == Maintenance::ByIngest && now >= next_poll {
            // Compactions, before expiry (30 s) removes their snapshots.
            let seen = replace_snapshots(d);
            let new = seen.difference(&replaces).count();
            if new > 0 {
                log(format!("{new} new replace snapshot(s)"));
            }
            replaces.extend(seen);
            next_poll = Instant::now() + Duration::from_secs(4);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    producer_done(&rt, producer, &produced, &clock);
    kills += kill_at_end(ingest.take(), |_| None, &mut done, seed, &clock);
    maint.wait_and_reap(&clock);

    if mode == Maintenance::External {
        // The writer's last snapshot, then two compactions over it (`--rewrite-all`: each
        // commits, whatever the files), then expiry: the first compaction's snapshot lies
        // between the current one and the writer's and is expired (the writer's is its
        // watermark, kept), which breaks the parent chain from the current snapshot to the
        // writer's. The final ingest must still find its positions.
        for _ in 0..2 {
            let v = floe_json(d, &["compact", TABLE, "--rewrite-all"]);
            let commits = v.last().unwrap()["commits"].as_array().unwrap().len();
            log(format!("compact --rewrite-all: {commits} commit(s)"));
            assert_eq!(commits, 1, "seed {seed}: {v:?}");
        }
        // Expiry keeps a live writer's recovery chain by default (README, Safety): turned off
        // here, so that the chain does break and the writer must find its positions anyway.
        floe_json(
            d,
            &[
                "table",
                "set-property",
                TABLE,
                "floe.expire.writer-max-age=0s",
            ],
        );
        let v = floe_json(d, &EXPIRE_ALL);
        let expired = v.last().unwrap()["expired_snapshots"]
            .as_array()
            .unwrap()
            .len();
        log(format!("expire-snapshots: {expired} snapshot(s) expired"));
        let left = sql(d, &format!("SELECT operation FROM {TABLE}$snapshots"));
        log(format!("left: {left:?}"));
        assert_eq!(
            left.len(),
            2,
            "seed {seed}: the current snapshot and the writer's watermark: {left:?}"
        );
    }

    // The final ingest: catches up and stops once idle, with its summary.
    run += 1;
    let mut last = start_ingest(run, &["--stop-when-idle", "5s"], &[]);
    log(format!(
        "final ingest-{run:02} started (pid {})",
        last.child.id()
    ));
    let status = last.wait(Duration::from_secs(120));
    log(format!(
        "final ingest-{run:02} exited ({status}) after {:.1}s",
        last.started.elapsed().as_secs_f64()
    ));
    assert!(
        status.success(),
        "seed {seed}: the final ingest failed ({status}); stderr:\n{}",
        last.stderr()
    );
    let errors = last.error_lines();
    assert!(
        errors.is_empty(),
        "seed {seed}: the final ingest logged errors: {errors:#?}"
    );
    let summary = last.last_json();
    log(format!("final summary: {summary}"));
    done.push(last);

    let commits: usize = done.iter().map(|p| commit_lines(p).len()).sum();
    let row = table_counts(d);
    let live = sql(d, &format!("SELECT count(*) AS n FROM {TABLE}$data_files"))[0]["n"]
        .as_u64()
        .unwrap();
    log(format!(
        "{kills} kill(s), {} ingest run(s), {commits} ingest commit(s); maintenance ok {:?}, \
         failed {:?}; table: {row}, {live} live data file(s)",
        done.len(),
        maint.ok,
        maint.failed
    ));
    assert_every_event_once(d, seed, &row);
    assert_eq!(summary["stopped_by"], "idle", "seed {seed}: {summary}");
    let resumed = summary["resumed_from"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        !resumed.is_empty(),
        "seed {seed}: the final ingest found no positions in the table (it read the topic from \
         the start): {summary}\nsnapshots:\n{}",
        history(d)
    );
    assert_eq!(
        resumed.len(),
        PARTITIONS as usize,
        "seed {seed}: a position per partition: {summary}"
    );

    assert_other_readers_agree(d, seed);

    match mode {
        Maintenance::External => {
            // With ~10 attempts of each, a correct engine lets some of each through.
            maint.assert_some_succeeded("compact", "compaction", seed);
            maint.assert_some_succeeded("expire", "expiry", seed);
        }
        Maintenance::ByIngest => {
            replaces.extend(replace_snapshots(d));
            // What the in-process maintainers said: jobs done and failed per run.
            let mut jobs = String::new();
            for p in &done {
                let err = p.stderr();
                let count = |needle: &str| err.lines().filter(|l| l.contains(needle)).count();
                jobs.push_str(&format!(
                    "  {}: {} compaction(s), {} expiry(ies) done, {} job(s) failed\n",
                    p.name,
                    count("[maintain] done compact"),
                    count("[maintain] done expire-snapshots"),
                    count("[maintain] failed"),
                ));
                for l in err.lines().filter(|l| l.contains("[maintain] failed")) {
                    jobs.push_str(&format!("    {l}\n"));
                }
            }
            log(format!(
                "{} replace snapshot(s) seen; in-process maintenance per run:\n{jobs}",
                replaces.len()
            ));
            assert!(
                !replaces.is_empty(),
                "seed {seed}: the ingest with --maintain never compacted the table\nsnapshots:\n{}",
                history(d)
            );
            // Why the final run's maintainer did not compact, if it did not.
            let compact_skipped: Vec<String> = summary["maintenance"]["passes"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| p["decisions"].as_array().cloned().unwrap_or_default())
                .filter(|d| d["job"] == "compact" && d["chosen"] != true)
                .map(|d| format!("fired: {}; skipped: {}", d["fired"], d["skipped"]))
                .collect();
            assert!(
                live * 2 < commits as u64,
                "seed {seed}: {live} live data files after {commits} ingest commits: compaction \
                 does not keep up\nin-process maintenance per run:\n{jobs}the final run's \
                 compaction decisions not chosen: {compact_skipped:#?}"
            );
        }
    }
    log(format!(
        "passed in {:.1}s",
        clock.t0.elapsed().as_secs_f64()
    ));
}

#[test]
fn chaos_ingest_beside_external_compaction_and_expiry_with_kill_9() {
    chaos(Maintenance::External);
}

#[test]
fn chaos_ingest_with_maintain_and_kill_9() {
    chaos(Maintenance::ByIngest);
}

/// The group of [`chaos_group`]: its writer id, under which the table holds its positions.
const GROUP: &str = "chaos-group";

/// Rows of `q` on the embedded catalog's SQLite database, which also holds the group's
/// hand-offs (`floe_ingest_handoffs`) and its coordinator lease (`floe_maintain_leases`).
fn store_rows(d: &Path, q: &str) -> Vec<Value> {
    const SCRIPT: &str = "import json, sqlite3, sys\n\
        c = sqlite3.connect(sys.argv[1], timeout=30)\n\
        cur = c.execute(sys.argv[2])\n\
        cols = [x[0] for x in cur.description]\n\
        print(json.dumps([dict(zip(cols, r)) for r in cur.fetchall()]))\n";
    let py = std::env::var("FLOE_PYTHON").expect("FLOE_PYTHON (run .ci/setup)");
    let db = d.join("warehouse").join("catalog.db");
    let out = Command::new(py)
        .args(["-c", SCRIPT])
        .arg(&db)
        .arg(q)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{q} on {}: {}",
        db.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The worker holding the group's coordinator lease (`w0`: 0), while the lease is valid.
fn coordinator(d: &Path) -> Option<usize> {
    let now = chrono::Utc::now().timestamp_millis();
    store_rows(
        d,
        "SELECT holder, expires_ms FROM floe_maintain_leases WHERE scope LIKE 'ingest:%'",
    )
    .iter()
    .filter(|r| r["expires_ms"].as_i64().is_some_and(|e| e > now))
    .find_map(|r| r["holder"].as_str()?.strip_prefix('w')?.parse().ok())
}

/// The hand-offs waiting for the coordinator: (worker, id, to positions).
fn waiting_handoffs(d: &Path) -> Vec<Value> {
    store_rows(
        d,
        "SELECT worker, handoff_id, to_positions FROM floe_ingest_handoffs ORDER BY handoff_id",
    )
}

/// The hand-off lines of a worker's stdout (one per hand-off it recorded).
fn handoff_lines(p: &Proc) -> Vec<Value> {
    commit_lines(p)
        .into_iter()
        .filter(|v| v["handoff"].is_string())
        .collect()
}

/// The `coordinated` objects of a worker's stdout (one per commit it made as the coordinator).
fn coordinated_lines(p: &Proc) -> Vec<Value> {
    p.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("coordinated").cloned())
        .collect()
}

/// A snapshot summary as `floe sql` prints it (an object, or key/value entries).
fn summary_map(v: &Value) -> std::collections::BTreeMap<String, String> {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    match v {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|e| Some((e["key"].as_str()?.to_string(), text(&e["value"]))))
            .collect(),
        _ => Default::default(),
    }
}

/// Three workers of one group, one partition each, killed with kill -9 at random (the
/// coordinator about every other time) and restarted under the same worker id, mostly within
/// 3 s (the coordinator takes its own lease back), sometimes after the lease expired (another
/// worker takes over); `floe compact` runs beside them. Then all three catch up and stop once
/// idle.
fn chaos_group() {
    let label = "group";
    let seed = chaos_seed(label);
    let mut rng = StdRng::seed_from_u64(seed);
    let clock = Clock::new(label);
    let log = |msg: String| clock.log(msg);
    const W: usize = PARTITIONS as usize;

    // Dropped last: the processes below end first.
    let dir = WorkDir::new();
    let d = dir.path();
    create_table(d);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (topic, producer, produced) = start_producer(&rt);
    log(format!(
        "topic {topic}: producing {N} events over ~100 s into group {GROUP} of {W} workers; \
         dir {}",
        d.display()
    ));
    let start_worker = |w: usize, run: &str, extra: &[&str], env: &[(&str, String)]| -> Proc {
        let source = format!("kafka://{}/{topic}?partitions={w}", kafka());
        let worker = format!("w{w}");
        let mut args = vec![
            "--json",
            "ingest",
            TABLE,
            "--source",
            &source,
            "--group",
            GROUP,
            "--worker-id",
            &worker,
            "--commit-interval",
            "1s",
        ];
        args.extend_from_slice(extra);
        Proc::spawn(d, &format!("w{w}-{run}"), &args, env)
    };
    let describe = |p: &Proc| {
        format!(
            "{} hand-off(s), {} commit(s) as coordinator",
            handoff_lines(p).len(),
            coordinated_lines(p).len()
        )
    };

    // Every worker run, killed or not, for its hand-offs, commits and stderr.
    let mut done: Vec<Proc> = Vec::new();
    let mut runs = [0usize; W];
    let mut workers: Vec<Option<Proc>> = Vec::new();
    for w in 0..W {
        let env = pause_env(&mut rng);
        let p = start_worker(w, "00", &[], &env);
        log(format!("{} started (pid {}) {env:?}", p.name, p.child.id()));
        workers.push(Some(p));
    }
    let mut restart_at: [Option<Instant>; W] = [None; W];
    let kill_every = |rng: &mut StdRng| Duration::from_millis(rng.random_range(3_000..8_000));
    let mut next_kill = Instant::now() + kill_every(&mut rng);
    let mut next_maint = Instant::now() + Duration::from_millis(rng.random_range(3_000..10_000));
    let mut maint = Maint::default();
    let (mut kills, mut coordinator_kills, mut takeovers) = (0u32, 0u32, 0u32);

    while !producer.is_finished() {
        let now = Instant::now();
        // A worker never stops by itself.
        for p in workers.iter_mut().flatten() {
            p.assert_runs(seed);
        }
        if now >= next_kill {
            // The same draws whatever the state, so that a seed replays the same schedule.
            let (aim_at_coordinator, pick, long_pause) = (
                rng.random_bool(0.5),
                rng.random_range(0..W),
                rng.random_bool(0.25),
            );
            let pause = Duration::from_millis(rng.random_range(0..3_000));
            let coord = coordinator(d).filter(|&c| c < W && workers[c].is_some());
            let running: Vec<usize> = (0..W).filter(|&w| workers[w].is_some()).collect();
            let victim = match coord {
                Some(c) if aim_at_coordinator => Some(c),
                _ if running.is_empty() => None,
                _ => Some(running[pick % running.len()]),
            };
            if let Some(v) = victim {
                let mut p = workers[v].take().unwrap();
                p.kill9();
                kills += 1;
                let was_coordinator = coord == Some(v);
                // A coordinator down longer than its lease (10 s): another worker takes over.
                let pause = if was_coordinator && long_pause {
                    takeovers += 1;
                    Duration::from_secs(11) + pause
                } else {
                    pause
                };
                if was_coordinator {
                    coordinator_kills += 1;
                }
                log(format!(
                    "kill -9 {}{} after {:.1}s ({}); restart in {:.1}s",
                    p.name,
                    if was_coordinator {
                        " (the coordinator)"
                    } else {
                        ""
                    },
                    p.started.elapsed().as_secs_f64(),
                    describe(&p),
                    pause.as_secs_f64()
                ));
                p.assert_no_errors(seed);
                done.push(p);
                restart_at[v] = Some(now + pause);
            }
            next_kill = now + kill_every(&mut rng);
        }
        for w in 0..W {
            if restart_at[w].is_some_and(|t| now >= t) {
                restart_at[w] = None;
                runs[w] += 1;
                let env = pause_env(&mut rng);
                let p = start_worker(w, &format!("{:02}", runs[w]), &[], &env);
                log(format!("{} started (pid {}) {env:?}", p.name, p.child.id()));
                workers[w] = Some(p);
            }
        }
        maint.reap(&clock);
        if now >= next_maint {
            if maint.running.is_empty() {
                maint.start_compact(d, &mut rng, &clock);
            }
            next_maint = now + Duration::from_millis(rng.random_range(3_000..10_000));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    producer_done(&rt, producer, &produced, &clock);
    let running = workers.iter_mut().filter_map(Option::take);
    kills += kill_at_end(running, |p| Some(describe(p)), &mut done, seed, &clock);
    maint.wait_and_reap(&clock);
    log(format!(
        "{} hand-off(s) waiting after the last kill",
        waiting_handoffs(d).len()
    ));

    // All three catch up and stop once idle, each after the coordinator committed its
    // hand-offs.
    let mut finals: Vec<Proc> = (0..W)
        .map(|w| start_worker(w, "final", &["--stop-when-idle", "5s"], &[]))
        .collect();
    log(format!("final workers started: {W}, --stop-when-idle 5s"));
    for (w, p) in finals.iter_mut().enumerate() {
        let status = p.wait(Duration::from_secs(120));
        let err = p.stderr();
        let left = err
            .lines()
            .filter(|l| l.contains("still wait for the group's coordinator"))
            .count();
        let waited = err
            .lines()
            .filter(|l| l.contains("waiting for the group's coordinator lease"))
            .count();
        log(format!(
            "{} exited ({status}) after {:.1}s: {}; waited for the lease {waited} time(s){}",
            p.name,
            p.started.elapsed().as_secs_f64(),
            describe(p),
            if left > 0 {
                "; LEFT HAND-OFFS WAITING"
            } else {
                ""
            }
        ));
        assert!(
            status.success(),
            "seed {seed}: {} failed ({status}); stderr:\n{err}",
            p.name
        );
        p.assert_no_errors(seed);
        let summary = p.last_json();
        assert_eq!(summary["stopped_by"], "idle", "seed {seed}: {summary}");
        let stream = format!("kafka:{topic}:{w}");
        assert!(
            summary["resumed_from"].get(&stream).is_some(),
            "seed {seed}: {} found no position of {stream} (it read its partition from the \
             start): {summary}",
            p.name
        );
    }
    let left_by_finals = waiting_handoffs(d);
    log(format!(
        "{} hand-off(s) waiting after the final workers stopped: {left_by_finals:?}",
        left_by_finals.len()
    ));
    done.extend(finals);
    // Whatever the stop left waiting, a worker started later commits (as the coordinator,
    // once any lease left behind expired: 10 s).
    let mut extra = 0;
    while !waiting_handoffs(d).is_empty() {
        extra += 1;
        assert!(
            extra <= 4,
            "seed {seed}: hand-offs still wait after {} extra worker runs: {:?}",
            extra - 1,
            waiting_handoffs(d)
        );
        let mut p = start_worker(
            0,
            &format!("extra-{extra}"),
            &["--stop-when-idle", "5s"],
            &[],
        );
        let status = p.wait(Duration::from_secs(60));
        log(format!(
            "{} exited ({status}): {}",
            p.name,
            coordinated_lines(&p)
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        assert!(status.success(), "seed {seed}: {}: {}", p.name, p.stderr());
        done.push(p);
    }

    let row = table_counts(d);
    let handoffs: usize = done.iter().map(|p| handoff_lines(p).len()).sum();
    let coordinated: Vec<Value> = done.iter().flat_map(coordinated_lines).collect();
    let snaps = sql(
        d,
        &format!("SELECT snapshot_id, operation, summary, sequence_number FROM {TABLE}$snapshots"),
    );
    let by_group: Vec<(i64, i64, std::collections::BTreeMap<String, String>)> = snaps
        .iter()
        .filter(|s| s["operation"] == "append")
        .map(|s| {
            (
                s["snapshot_id"].as_i64().unwrap(),
                s["sequence_number"].as_i64().unwrap(),
                summary_map(&s["summary"]),
            )
        })
        .filter(|(_, _, m)| m.get("floe.writer-id").map(String::as_str) == Some(GROUP))
        .collect();
    let appends = snaps.iter().filter(|s| s["operation"] == "append").count();
    log(format!(
        "{kills} kill(s) ({coordinator_kills} of the coordinator, {takeovers} down past its \
         lease), {} worker run(s), {handoffs} hand-off(s), {} coordinated commit(s) printed, \
         {} group snapshot(s) of {appends} append(s); compactions ok {:?}, failed {:?}; \
         table: {row}",
        done.len(),
        coordinated.len(),
        by_group.len(),
        maint.ok,
        maint.failed
    ));
    assert_every_event_once(d, seed, &row);
    assert_other_readers_agree(d, seed);

    // One commit per interval for the whole group, not one per worker.
    assert_eq!(
        by_group.len(),
        appends,
        "seed {seed}: every append is the group's\nsnapshots:\n{}",
        history(d)
    );
    assert!(
        by_group.len() < handoffs,
        "seed {seed}: {} group snapshots for {handoffs} hand-offs",
        by_group.len()
    );
    // Every commit a coordinator reported is in the table; no hand-off was refused (no worker
    // outlived its kill, so none read a partition another one took over).
    let ids: BTreeSet<i64> = by_group.iter().map(|(id, _, _)| *id).collect();
    for c in &coordinated {
        if let Some(id) = c["snapshot_id"].as_i64().filter(|&id| id != 0) {
            assert!(
                ids.contains(&id),
                "seed {seed}: coordinated snapshot {id} is not the group's in the table: {c}"
            );
        }
        assert!(
            c["refused"].as_array().is_none_or(|r| r.is_empty()),
            "seed {seed}: a hand-off was refused: {c}"
        );
    }
    // The group's last snapshot holds every partition's position: past its last event.
    let (_, _, last) = by_group
        .iter()
        .max_by_key(|(_, seq, _)| *seq)
        .expect("the group committed");
    for p in 0..PARTITIONS as u64 {
        let key = format!("floe.position.kafka:{topic}:{p}");
        let events = (0..N).filter(|id| id % PARTITIONS as u64 == p).count();
        assert_eq!(
            last.get(&key).map(String::as_str),
            Some(events.to_string().as_str()),
            "seed {seed}: position of partition {p} in the group's last snapshot: {last:?}"
        );
    }
    maint.assert_some_succeeded("compact", "compaction", seed);
    assert!(
        coordinator_kills >= 1,
        "seed {seed}: the coordinator was never killed"
    );
    assert!(
        left_by_finals.is_empty(),
        "seed {seed}: the final workers all stopped (exit 0) leaving {} hand-off(s) waiting for \
         a coordinator: {left_by_finals:?}",
        left_by_finals.len()
    );
    log(format!(
        "passed in {:.1}s",
        clock.t0.elapsed().as_secs_f64()
    ));
}

#[test]
fn chaos_ingest_group_of_three_workers_with_kill_9() {
    chaos_group();
}
