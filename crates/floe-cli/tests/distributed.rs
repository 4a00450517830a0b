//! `floe compact --distributed` with `floe worker` processes on a real PostgreSQL task queue:
//! the compaction is exact (floe, PyIceberg and DuckDB read the same rows), a worker that
//! loses its task deletes what it wrote, a worker killed mid-task leaves only orphans and its
//! task is done by another, a second run has nothing to do, and a coordinator with no worker
//! says what it waits for.
//!
//! Each test has a database of its own (workers serve any run in their queue). Every process
//! is ended by PID when the test ends, also when it fails.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{
    count_and_sum, floe_cmd, fresh_queue, make_table_with_small_files, ok_json, python_read,
    queue_worker as worker, Killed,
};

/// `floe --json compact db.t --distributed` on `queue` with `options`: its report.
fn coordinate(d: &Path, queue: &str, options: &[&str]) -> Value {
    let out = floe_cmd(d)
        .args([
            "--json",
            "compact",
            "db.t",
            "--distributed",
            "--queue",
            queue,
        ])
        .args(["--lease-ttl", "3s", "--partial-progress"])
        .args(options)
        .env("FLOE_LOG", "info")
        .output()
        .unwrap();
    std::fs::write(d.join("coordinator.log"), &out.stderr).unwrap();
    assert!(
        out.status.success(),
        "coordinator: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Options that split the test tables into groups of about 10 small files.
const SPLIT: &[&str] = &[
    "--option",
    "min-input-files=2",
    "--option",
    "max-file-group-size-bytes=25000",
];

fn report(d: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(d.join(format!("{name}.json"))).unwrap();
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "worker {name}: {e}: {text}\n{}",
            std::fs::read_to_string(d.join(format!("{name}.log"))).unwrap_or_default()
        )
    })
}

fn orphans(d: &Path) -> u64 {
    let v = ok_json(
        d,
        &[
            "remove-orphan-files",
            "db.t",
            "--older-than",
            "0s",
            "--force",
            "--dry-run",
        ],
    );
    v["orphan_files"]
        .as_u64()
        .or_else(|| v["files"].as_u64())
        .unwrap_or_else(|| panic!("orphan count in {v}"))
}

fn live_files(d: &Path) -> i64 {
    common::sql_row(d, "SELECT count(*) AS n FROM db.t$files")["n"]
        .as_i64()
        .unwrap()
}

#[test]
fn workers_losing_and_dying_mid_task_leave_an_exact_table_and_a_second_run_has_nothing_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let queue = fresh_queue();
    let (n, s) = make_table_with_small_files(d, 30, 100);
    assert_eq!(live_files(d), 90);
    assert_eq!(orphans(d), 0);

    // `slow` writes its first task's outputs, then stalls past its lease before reporting:
    // another worker takes the task over, and `slow`'s late report is refused, so it deletes
    // what it wrote. `doomed` stalls the same way and is killed there (kill -9): its outputs
    // stay, referenced by nothing. `steady` does the rest.
    let mut slow = Killed(worker(
        d,
        &queue,
        "slow",
        &[("FLOE_FAULT_PAUSE_WORKER_BEFORE_REPORT_MS", "7000")],
    ));
    let mut doomed = Killed(worker(
        d,
        &queue,
        "doomed",
        &[("FLOE_FAULT_PAUSE_WORKER_BEFORE_REPORT_MS", "60000")],
    ));
    let coordinator = std::thread::spawn({
        let (d, queue) = (d.to_path_buf(), queue.clone());
        // Groups of about 10 files: several tasks to share.
        move || coordinate(&d, &queue, SPLIT)
    });
    // Once both wrote a task's outputs and paused, kill `doomed` and start `steady`.
    let deadline = Instant::now() + Duration::from_secs(60);
    for w in ["slow", "doomed"] {
        loop {
            let log = std::fs::read_to_string(d.join(format!("{w}.log"))).unwrap_or_default();
            if log.contains("fault injection: pausing") {
                break;
            }
            assert!(Instant::now() < deadline, "{w} never paused: {log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    doomed.0.kill().unwrap();
    doomed.0.wait().unwrap();
    let steady = Killed(worker(d, &queue, "steady", &[]));
    let m = coordinator.join().unwrap();
    let mut steady = steady;
    assert!(steady.0.wait().unwrap().success());
    assert!(slow.0.wait().unwrap().success());

    // Exact, in floe and in the independent readers.
    assert_eq!(count_and_sum(d, "db.t"), (n, s));
    let py = python_read(d, "db.t", "id");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(py[reader]["rows"].as_i64(), Some(n), "{py}");
        assert_eq!(py[reader]["sum"].as_i64(), Some(s), "{py}");
    }

    let dist = &m["distributed"];
    let tasks = dist["tasks"].as_u64().unwrap();
    assert!(tasks >= 6, "several tasks: {m}");
    assert!(m["failed_groups"].as_array().unwrap().is_empty(), "{m}");
    assert_eq!(m["rewritten_files"], 90, "{m}");
    let logs = || {
        ["slow", "doomed", "steady", "coordinator"]
            .iter()
            .map(|w| {
                let log = std::fs::read_to_string(d.join(format!("{w}.log"))).unwrap_or_default();
                let kept: Vec<&str> = log.lines().filter(|l| !l.contains("notice")).collect();
                format!("--- {w}:\n{}", kept.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        dist["retried_claims"].as_u64().unwrap() >= 2,
        "the stalled and the killed tasks were claimed again: {m}\n{}",
        logs()
    );
    assert_eq!(
        live_files(d),
        m["added_files"].as_i64().unwrap(),
        "only the outputs are live: {m}"
    );
    let slow_report = report(d, "slow");
    assert!(
        slow_report["tasks_lost"].as_u64().unwrap() >= 1,
        "{slow_report}"
    );
    let steady_report = report(d, "steady");
    assert!(
        steady_report["tasks_done"].as_u64().unwrap() >= 1,
        "{steady_report}"
    );
    // Per-worker shares add up to the tasks committed.
    let shares: u64 = dist["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["tasks"].as_u64().unwrap())
        .sum();
    assert_eq!(shares, tasks, "{m}");
    // What `slow` wrote is gone; what `doomed` wrote before dying is the only orphan, and
    // orphan removal proves it unreferenced.
    let left = orphans(d);
    assert!(left >= 1, "the killed worker's outputs are orphans");
    let expected_inputs_and_outputs = 90 + m["added_files"].as_u64().unwrap();
    let parquet = common::walk_files(&d.join("warehouse"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count() as u64;
    assert_eq!(
        parquet,
        expected_inputs_and_outputs + left,
        "no file of the refused report left behind"
    );

    // A second run with Iceberg's defaults finds nothing to do and queues nothing (3 outputs
    // per partition, under min-input-files 5; the first run's options would merge those
    // small outputs again, as a local run would).
    let again = coordinate(d, &queue, &[]);
    assert!(
        again["plan"]["groups"].as_array().unwrap().is_empty(),
        "{again}"
    );
    assert!(again["commits"].as_array().unwrap().is_empty(), "{again}");
    assert_eq!(count_and_sum(d, "db.t"), (n, s));
}

#[test]
fn a_coordinator_without_workers_says_what_it_waits_for_and_a_killed_one_is_superseded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let queue = fresh_queue();
    let (n, s) = make_table_with_small_files(d, 12, 50);
    let mut first = Killed(
        floe_cmd(d)
            .args([
                "--json",
                "compact",
                "db.t",
                "--distributed",
                "--queue",
                &queue,
            ])
            .args(["--lease-ttl", "2s", "--option", "min-input-files=2"])
            .env("FLOE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("first.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let log = std::fs::read_to_string(d.join("first.log")).unwrap_or_default();
        if log.contains("waiting for workers") && log.contains("none claimed") {
            assert!(log.contains("floe worker --queue"), "{log}");
            break;
        }
        assert!(Instant::now() < deadline, "no waiting message: {log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The coordinator dies with its tasks queued: its run stops being renewed.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // A worker started now claims nothing of the dead run; the next coordinator marks it
    // abandoned and compacts the table itself, with that worker.
    let mut w = Killed(worker(d, &queue, "w", &[]));
    let m = coordinate(d, &queue, &["--option", "min-input-files=2"]);
    assert!(w.0.wait().unwrap().success());
    assert_eq!(
        m["distributed"]["abandoned_runs"].as_array().unwrap().len(),
        1,
        "{m}"
    );
    assert_eq!(count_and_sum(d, "db.t"), (n, s));
    assert_eq!(
        report(d, "w")["tasks_done"],
        m["distributed"]["tasks"],
        "{m}"
    );
}

/// A coordinator on `queue`, with options splitting the table in many tasks and 2 s leases.
fn chaos_coordinator(d: &Path, queue: &str, log: &str) -> Child {
    floe_cmd(d)
        .args([
            "--json",
            "compact",
            "db.t",
            "--distributed",
            "--queue",
            queue,
        ])
        .args([
            "--lease-ttl",
            "2s",
            "--partial-progress",
            "--max-commits",
            "4",
        ])
        .args(SPLIT)
        .env("FLOE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join(log)).unwrap())
        .spawn()
        .unwrap()
}

fn chaos_worker(d: &Path, queue: &str, name: &str) -> Child {
    floe_cmd(d)
        .args(["--json", "worker", "--queue", queue, "--worker-id", name])
        // Idle longer than a lease: a killed worker's task is claimable again before the
        // others stop.
        .args(["--stop-when-idle", "6s", "--lease-ttl", "2s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn chaos_kills_of_workers_and_coordinators_at_random_moments_lose_and_duplicate_nothing() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let seed = common::chaos_seed("distributed");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let queue = fresh_queue();
    let (n, s) = make_table_with_small_files(d, 45, 40);
    // Rounds of a coordinator and three workers, each process killed with kill -9 at a random
    // moment with some chance; the last round kills nothing. After every round the table holds
    // every row once.
    let rounds = 4;
    let (mut worker_kills, mut coordinator_kills) = (0usize, 0usize);
    for round in 0..rounds {
        let calm = round == rounds - 1;
        let mut coordinator = Killed(chaos_coordinator(d, &queue, &format!("c{round}.log")));
        let mut workers: Vec<Killed> = (0..3)
            .map(|i| Killed(chaos_worker(d, &queue, &format!("r{round}w{i}"))))
            .collect();
        let started = Instant::now();
        let mut kills: Vec<(u64, usize)> = Vec::new();
        if !calm {
            // Up to three kills in the first 1.5 s among workers 0 and 1 and the coordinator
            // (3); worker 2 lives, so a surviving coordinator always has a worker.
            for _ in 0..rng.random_range(1..=3) {
                let who = [0usize, 1, 3][rng.random_range(0..3usize)];
                kills.push((rng.random_range(50..1_500u64), who));
            }
            kills.sort();
        }
        for (at, who) in &kills {
            let wait = Duration::from_millis(*at).saturating_sub(started.elapsed());
            std::thread::sleep(wait);
            let victim = if *who == 3 {
                &mut coordinator
            } else {
                &mut workers[*who]
            };
            let _ = victim.0.kill();
            if *who == 3 {
                coordinator_kills += 1;
            } else {
                worker_kills += 1;
            }
            eprintln!("[distributed chaos] round {round}: killed process {who} at {at} ms");
        }
        // The coordinator ends (or was killed); workers stop when idle.
        let deadline = Instant::now() + Duration::from_secs(90);
        let status = loop {
            if let Some(st) = coordinator.0.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "seed {seed}: round {round}: the coordinator never ended"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        if calm {
            assert!(
                status.success(),
                "seed {seed}: the calm round failed: {}",
                std::fs::read_to_string(d.join(format!("c{round}.log"))).unwrap_or_default()
            );
        }
        for w in workers.iter_mut() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while w.0.try_wait().unwrap().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "seed {seed}: a worker never stopped"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        assert_eq!(
            count_and_sum(d, "db.t"),
            (n, s),
            "seed {seed}: round {round} (kills {kills:?})"
        );
        // Let the leases of what was killed expire before the next round.
        std::thread::sleep(Duration::from_millis(2_100));
    }
    // Orphan removal deletes only what no snapshot references: the table still reads whole,
    // in floe and in the independent readers.
    let orphans_found = orphans(d);
    ok_json(
        d,
        &[
            "remove-orphan-files",
            "db.t",
            "--older-than",
            "0s",
            "--force",
        ],
    );
    assert_eq!(orphans(d), 0, "seed {seed}");
    assert_eq!(count_and_sum(d, "db.t"), (n, s), "seed {seed}");
    let py = python_read(d, "db.t", "id");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(py[reader]["rows"].as_i64(), Some(n), "seed {seed}: {py}");
        assert_eq!(py[reader]["sum"].as_i64(), Some(s), "seed {seed}: {py}");
    }
    let live = live_files(d);
    assert!(live < 135, "seed {seed}: the calm round compacted");
    // One line per run, for the record (BENCHMARKS.md quotes it).
    eprintln!(
        "[distributed chaos] seed {seed}: {rounds} rounds, {worker_kills} worker and \
         {coordinator_kills} coordinator kill(s); rows ({n}) and sum exact in floe after every \
         round and in PyIceberg and DuckDB at the end; {orphans_found} orphan(s) removed; 135 \
         files -> {live}"
    );
}

// ---- `floe maintain` replicas and executors -------------------------------------------------

/// `db.tN` (`id`, `ts` over 2 days, `payload`) with `batches` more appends of 20 rows each
/// (a file per partition each); the table is created on the first call. With
/// [`due_from_3_commits`], due for compaction from 3 commits and 5 files per partition, without
/// a rate limit. Returns (rows, sum of id) added.
fn append_small_files(d: &Path, table: &str, first: usize, batches: usize) -> (i64, i64) {
    if first == 0 {
        ok_json(
            d,
            &[
                "table",
                "create",
                table,
                "--schema",
                "id bigint not null, ts timestamp, payload string",
                "--partition",
                "day(ts)",
                "--property",
                "floe.maintain.compact.partition-idle-time=0s",
            ],
        );
    }
    let (mut n, mut s) = (0i64, 0i64);
    let f = d.join(format!("{table}.ndjson"));
    for b in first..first + batches {
        let mut text = String::new();
        for r in 0..20 {
            let id = (b * 20 + r) as i64;
            text.push_str(&format!(
                "{{\"id\": {id}, \"ts\": \"2026-05-0{}T12:00:00\", \"payload\": \"p{id}\"}}\n",
                1 + id % 2
            ));
            n += 1;
            s += id;
        }
        std::fs::write(&f, text).unwrap();
        ok_json(d, &["append", table, f.to_str().unwrap()]);
    }
    (n, s)
}

fn due_from_3_commits(d: &Path, table: &str) {
    ok_json(
        d,
        &[
            "table",
            "set-property",
            table,
            "floe.maintain.compact.trigger.commit-count=3",
            "floe.maintain.compact.rate-limit=0s",
        ],
    );
}

fn replaces(d: &Path, table: &str) -> usize {
    let out = common::floe(
        d,
        &[
            "--json",
            "sql",
            &format!("SELECT operation FROM {table}$snapshots"),
        ],
    );
    common::json_lines(&out)
        .iter()
        .filter(|r| r["operation"] == "replace")
        .count()
}

fn http_json(addr: &str, path: &str) -> Option<Value> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (_, body) = out.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// A `floe maintain` service replica named `name`, serving its API on `addr`.
fn replica(d: &Path, lease_db: &str, name: &str, addr: &str) -> Killed {
    let mut c = floe_cmd(d);
    c.args(["maintain", "--holder", name, "--lease-db", lease_db])
        .args(["--interval", "1s", "--lease-ttl", "3s", "--listen", addr])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join(format!("{name}.log"))).unwrap());
    Killed(c.spawn().unwrap())
}

/// Each replica's `/api/tables` names (the tables it maintains now).
fn owned(addr: &str) -> Vec<String> {
    http_json(addr, "/api/tables")
        .and_then(|v| {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(|t| t["table"].as_str().map(String::from))
                    .collect()
            })
        })
        .unwrap_or_default()
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn maintain_replicas_divide_the_tables_and_take_over_the_tables_of_a_killed_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lease_db = fresh_queue();
    ok_json(d, &["namespace", "create", "db"]);
    let tables: Vec<String> = (0..8).map(|i| format!("db.t{i}")).collect();
    let mut expected = std::collections::BTreeMap::new();
    for t in &tables {
        expected.insert(t.clone(), append_small_files(d, t, 0, 6));
    }
    let names = ["r0", "r1", "r2"];
    let addrs: Vec<String> = names
        .iter()
        .map(|_| format!("127.0.0.1:{}", common::free_port()))
        .collect();
    let mut procs: Vec<Option<Killed>> = names
        .iter()
        .zip(&addrs)
        .map(|(n, a)| Some(replica(d, &lease_db, n, a)))
        .collect();

    // All three see each other, and the watched tables are split between them: every table
    // maintained by exactly one replica.
    let split = |live: &[usize]| -> Vec<Vec<String>> {
        live.iter().map(|&i| owned(&addrs[i])).collect::<Vec<_>>()
    };
    wait_until(
        "three live replicas, each table owned once",
        Duration::from_secs(60),
        || {
            let views: Vec<Option<Value>> =
                addrs.iter().map(|a| http_json(a, "/api/status")).collect();
            let all_three = views.iter().all(|v| {
                v.as_ref().is_some_and(|v| {
                    v["replicas"]["live"]
                        .as_array()
                        .is_some_and(|l| l.len() == 3)
                })
            });
            let mut union: Vec<String> = split(&[0, 1, 2]).concat();
            union.sort();
            all_three && union == tables
        },
    );
    let first = split(&[0, 1, 2]);
    assert!(
        first.iter().filter(|o| !o.is_empty()).count() >= 2,
        "at least two replicas maintain tables: {first:?}"
    );
    for (i, a) in addrs.iter().enumerate() {
        let s = http_json(a, "/api/status").unwrap();
        assert_eq!(
            s["replicas"]["owned_tables"].as_u64(),
            Some(first[i].len() as u64),
            "{s}"
        );
        assert_eq!(
            s["replicas"]["tables_elsewhere"].as_u64(),
            Some((8 - first[i].len()) as u64),
            "{s}"
        );
    }
    // Once the split is settled (while replicas start, the first may briefly take every
    // table, the table leases then keeping one job per table), the tables become due: every
    // table gets compacted, by its owner only.
    for t in &tables {
        due_from_3_commits(d, t);
    }
    wait_until("every table compacted", Duration::from_secs(90), || {
        tables.iter().all(|t| replaces(d, t) >= 1)
    });
    for (i, a) in addrs.iter().enumerate() {
        let jobs = http_json(a, "/api/jobs").unwrap();
        for j in jobs
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["job"] == "compact")
        {
            let t = j["table"].as_str().unwrap();
            assert!(
                first[i].iter().any(|o| o == t),
                "{} ran {} on {t}, owned by another replica: {first:?}",
                names[i],
                j["job"]
            );
        }
    }

    // Kill -9 the replica with the most tables; make its tables due again.
    let victim = (0..3).max_by_key(|&i| first[i].len()).unwrap();
    let survivors: Vec<usize> = (0..3).filter(|&i| i != victim).collect();
    procs[victim].take(); // killed by PID, waited for
    for t in &first[victim] {
        let (n, s) = append_small_files(d, t, 6, 6);
        let e = expected.get_mut(t).unwrap();
        *e = (e.0 + n, e.1 + s);
    }
    // After the victim's heartbeat expires (3 s), its tables move to the survivors, which
    // compact them again; every table stays owned once.
    wait_until(
        "the killed replica's tables taken over and compacted again",
        Duration::from_secs(90),
        || first[victim].iter().all(|t| replaces(d, t) >= 2),
    );
    let after = split(&survivors);
    let mut union: Vec<String> = after.concat();
    union.sort();
    assert_eq!(union, tables, "{after:?}");
    for &i in &survivors {
        let s = http_json(&addrs[i], "/api/status").unwrap();
        let live: Vec<&str> = s["replicas"]["live"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(!live.contains(&names[victim]), "{s}");
        assert_eq!(live.len(), 2, "{s}");
        // A survivor keeps the tables it had: only the dead replica's moved.
        for t in &first[i] {
            assert!(after.concat().contains(t));
        }
    }
    for (k, &i) in survivors.iter().enumerate() {
        for t in &first[i] {
            assert!(
                after[k].contains(t),
                "{t} moved away from a live replica: {after:?}"
            );
        }
    }
    drop(procs);
    // Nothing lost, nothing duplicated, in floe and in PyIceberg and DuckDB.
    for t in &tables {
        assert_eq!(count_and_sum(d, t), expected[t], "{t}");
    }
    for t in &first[victim] {
        let py = python_read(d, t, "id");
        for reader in ["pyiceberg", "duckdb"] {
            assert_eq!(
                py[reader]["rows"].as_i64(),
                Some(expected[t].0),
                "{t}: {py}"
            );
            assert_eq!(py[reader]["sum"].as_i64(), Some(expected[t].1), "{t}: {py}");
        }
    }
}

/// `floe maintain --once` with large compactions sent to the workers of `db`; its stderr log
/// (text mode: the job lines and errors).
fn maintain_once(d: &Path, db: &str, extra: &[&str]) -> std::process::Output {
    floe_cmd(d)
        .args(["maintain", "--once", "--holder", "m", "--lease-db", db])
        .args([
            "--queue",
            db,
            "--distribute-above",
            "1",
            "--lease-ttl",
            "3s",
        ])
        .args(extra)
        .env("FLOE_LOG", "info")
        .output()
        .unwrap()
}

#[test]
fn maintain_sends_large_compactions_to_the_workers_and_fails_them_cleanly_without_workers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (n, s) = make_table_with_small_files(d, 12, 200);
    ok_json(
        d,
        &[
            "table",
            "set-property",
            "db.t",
            "floe.maintain.compact.partition-idle-time=0s",
        ],
    );
    let files = live_files(d);

    // No worker: the queued compaction fails after --worker-timeout, naming what to start;
    // the table is unchanged and the run's tasks are gone (a late worker finds nothing).
    let alone = fresh_queue();
    let out = maintain_once(d, &alone, &["--worker-timeout", "3s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("through the queue"), "{err}");
    assert!(
        err.contains("--worker-timeout") && err.contains("floe worker --queue"),
        "{err}"
    );
    assert_eq!(live_files(d), files);
    assert_eq!(replaces(d, "db.t"), 0);
    assert_eq!(orphans(d), 0);
    let mut late = worker(d, &alone, "late", &[]);
    assert!(late.wait().unwrap().success());
    let r = report(d, "late");
    assert_eq!(r["tasks_done"].as_u64(), Some(0), "{r}");
    assert_eq!(r["tasks_lost"].as_u64(), Some(0), "{r}");

    // Two workers: the same job through the queue, committed by the maintainer.
    let queue = fresh_queue();
    let _w: Vec<Killed> = ["w1", "w2"]
        .iter()
        .map(|w| Killed(worker(d, &queue, w, &[])))
        .collect();
    let out = maintain_once(d, &queue, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("through the queue"), "{err}");
    assert!(err.contains("done compact on db.t"), "{err}");
    assert_eq!(replaces(d, "db.t"), 1);
    assert!(live_files(d) < files);
    assert_eq!(count_and_sum(d, "db.t"), (n, s));
    let py = python_read(d, "db.t", "id");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(py[reader]["rows"].as_i64(), Some(n), "{py}");
        assert_eq!(py[reader]["sum"].as_i64(), Some(s), "{py}");
    }
    // The workers did the rewriting (they stop once idle): their reports count the tasks.
    let mut done = 0;
    for (k, mut w) in _w.into_iter().enumerate() {
        assert!(w.0.wait().unwrap().success());
        done += report(d, &format!("w{}", k + 1))["tasks_done"]
            .as_u64()
            .unwrap();
    }
    assert!(done >= 1, "the workers did the tasks");
    assert_eq!(orphans(d), 0);
}
