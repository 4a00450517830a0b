use std::time::Duration;

use super::*;

const TTL: Duration = Duration::from_secs(60);
const T0: i64 = 1_700_000_000_000;

async fn sqlite_store(dir: &tempfile::TempDir) -> Store {
    let uri = format!("sqlite://{}", dir.path().join("leases.db").display());
    Store::connect(&uri).await.unwrap()
}

fn held_by(holder: &str, expires_ms: i64) -> LeaseOutcome {
    LeaseOutcome::HeldBy {
        holder: holder.into(),
        expires_ms,
    }
}

#[tokio::test]
async fn leases_exclude_renew_expire_and_release() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let ttl_ms = TTL.as_millis() as i64;
    let (s, a, b) = ("c.ns.t", "maintainer-a", "maintainer-b");

    assert_eq!(
        store.try_acquire(s, a, TTL, T0).await.unwrap(),
        LeaseOutcome::Acquired
    );
    assert_eq!(
        store.try_acquire(s, b, TTL, T0 + 1).await.unwrap(),
        held_by(a, T0 + ttl_ms)
    );
    // The holder re-acquiring extends its lease.
    assert_eq!(
        store.try_acquire(s, a, TTL, T0 + 10).await.unwrap(),
        LeaseOutcome::Acquired
    );
    assert_eq!(
        store.leases(T0 + 10).await.unwrap(),
        vec![Lease {
            scope: s.into(),
            holder: a.into(),
            expires_ms: T0 + 10 + ttl_ms
        }]
    );
    // Renewal by the holder extends; by another is refused and changes nothing.
    assert!(store.renew(s, a, TTL, T0 + 20).await.unwrap());
    assert!(!store.renew(s, b, TTL, T0 + 20).await.unwrap());
    assert_eq!(
        store.try_acquire(s, b, TTL, T0 + 30).await.unwrap(),
        held_by(a, T0 + 20 + ttl_ms)
    );
    // Release by a non-holder is a no-op.
    store.release(s, b).await.unwrap();
    assert_eq!(store.leases(T0 + 30).await.unwrap().len(), 1);

    // The lease expires exactly at expires_ms: then another holder takes it.
    let expired = T0 + 20 + ttl_ms;
    assert!(store.leases(expired).await.unwrap().is_empty());
    assert_eq!(
        store.try_acquire(s, b, TTL, expired).await.unwrap(),
        LeaseOutcome::Acquired
    );
    // The loser learns it lost the lease.
    assert!(!store.renew(s, a, TTL, expired + 1).await.unwrap());
    assert_eq!(
        store.try_acquire(s, a, TTL, expired + 1).await.unwrap(),
        held_by(b, expired + ttl_ms)
    );
    // An expired lease cannot be renewed, even by its holder.
    assert!(!store.renew(s, b, TTL, expired + ttl_ms).await.unwrap());

    // Release by the holder frees the scope at once.
    store.release(s, b).await.unwrap();
    assert!(store.leases(expired).await.unwrap().is_empty());
    assert_eq!(
        store.try_acquire(s, a, TTL, expired + 2).await.unwrap(),
        LeaseOutcome::Acquired
    );
    // Other scopes are independent.
    assert_eq!(
        store
            .try_acquire("c.ns.u", b, TTL, expired + 2)
            .await
            .unwrap(),
        LeaseOutcome::Acquired
    );
    let scopes: Vec<_> = store
        .leases(expired + 2)
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.scope, l.holder))
        .collect();
    assert_eq!(
        scopes,
        vec![("c.ns.t".into(), a.into()), ("c.ns.u".into(), b.into())]
    );
    store.close().await;
}

#[tokio::test]
async fn a_second_connection_sees_the_same_leases_and_schema_creation_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let one = sqlite_store(&dir).await;
    let two = sqlite_store(&dir).await;
    assert_eq!(
        one.try_acquire("s", "a", TTL, T0).await.unwrap(),
        LeaseOutcome::Acquired
    );
    assert_eq!(
        two.try_acquire("s", "b", TTL, T0).await.unwrap(),
        held_by("a", T0 + 60_000)
    );
    assert!(two.display_uri().ends_with("leases.db"));
    one.close().await;
    two.close().await;
}

#[tokio::test]
async fn a_bad_uri_is_an_invalid_option() {
    let err = Store::connect("mysql://h/db").await.err().unwrap();
    assert!(matches!(err, Error::InvalidOption { .. }), "{err}");
    assert!(err.to_string().contains("lease database"), "{err}");
}

fn run(job: &str, finished_ms: i64, succeeded: bool) -> RunRecord {
    RunRecord {
        scope: "c.ns.t".into(),
        job: job.into(),
        holder: "m1".into(),
        started_ms: finished_ms - 500,
        finished_ms,
        succeeded,
        error: (!succeeded).then(|| format!("boom at {finished_ms}")),
        ..Default::default()
    }
}

#[tokio::test]
async fn runs_round_trip_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let big = 1u64 << 40;
    let full = RunRecord {
        scope: "c.ns.t".into(),
        job: "compact".into(),
        holder: "host-1/4242".into(),
        started_ms: T0,
        finished_ms: T0 + 1234,
        succeeded: false,
        error: Some("commit conflict: it's 'quoted'".into()),
        files_read: (1 << 31) + 1,
        bytes_read: big + 2,
        files_written: (1 << 32) + 3,
        bytes_written: big + 4,
        files_deleted: (1 << 33) + 5,
        bytes_deleted: big + 6,
    };
    store.record_run(&full).await.unwrap();
    let ok = RunRecord {
        succeeded: true,
        error: None,
        finished_ms: T0 + 2000,
        job: "expire-snapshots".into(),
        ..full.clone()
    };
    store.record_run(&ok).await.unwrap();
    let older = run("compact", T0 - 5, true);
    store.record_run(&older).await.unwrap();

    assert_eq!(
        store.recent_runs(None, 10).await.unwrap(),
        vec![ok.clone(), full.clone(), older.clone()]
    );
    assert_eq!(store.recent_runs(None, 1).await.unwrap(), vec![ok]);
    assert_eq!(
        store.recent_runs(Some("compact"), 10).await.unwrap(),
        vec![full, older]
    );
    assert!(store
        .recent_runs(Some("nope"), 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store.recent_runs(None, 0).await.unwrap().is_empty());
    store.close().await;
}

#[tokio::test]
async fn last_runs_count_failures_since_the_last_success() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    assert!(store.last_runs("c.ns.t").await.unwrap().is_empty());
    for r in [
        run("compact", T0 + 1, false),
        run("compact", T0 + 2, true),
        run("compact", T0 + 3, false),
        run("compact", T0 + 4, false),
        run("compact", T0 + 5, false),
        run("expire-snapshots", T0 + 1, true),
        run("expire-snapshots", T0 + 2, false),
        run("expire-snapshots", T0 + 3, true),
        run("rewrite-manifests", T0 + 7, false),
        run("rewrite-manifests", T0 + 8, false),
        // Another table's runs count for that table only.
        RunRecord {
            scope: "c.ns.other".into(),
            ..run("compact", T0 + 9, false)
        },
    ] {
        store.record_run(&r).await.unwrap();
    }
    let last = store.last_runs("c.ns.t").await.unwrap();
    assert_eq!(last.len(), 3);
    assert_eq!(
        last["compact"],
        LastRuns {
            last_success_ms: Some(T0 + 2),
            last_failure_ms: Some(T0 + 5),
            consecutive_failures: 3,
            last_error: Some(format!("boom at {}", T0 + 5)),
        }
    );
    assert_eq!(
        last["expire-snapshots"],
        LastRuns {
            last_success_ms: Some(T0 + 3),
            last_failure_ms: Some(T0 + 2),
            consecutive_failures: 0,
            last_error: Some(format!("boom at {}", T0 + 2)),
        }
    );
    assert_eq!(
        last["rewrite-manifests"],
        LastRuns {
            last_success_ms: None,
            last_failure_ms: Some(T0 + 8),
            consecutive_failures: 2,
            last_error: Some(format!("boom at {}", T0 + 8)),
        }
    );
    let other = store.last_runs("c.ns.other").await.unwrap();
    assert_eq!(other["compact"].consecutive_failures, 1);
    // A success resets the count.
    store
        .record_run(&run("compact", T0 + 10, true))
        .await
        .unwrap();
    let last = store.last_runs("c.ns.t").await.unwrap();
    assert_eq!(last["compact"].consecutive_failures, 0);
    assert_eq!(last["compact"].last_success_ms, Some(T0 + 10));
    store.close().await;
}

#[tokio::test]
async fn the_task_queue_hands_each_task_to_one_worker_and_refuses_lost_attempts() {
    use super::tasks::TaskDone;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let ttl = Duration::from_secs(10);
    let tasks: Vec<(usize, String)> = vec![(0, "a".into()), (0, "b".into()), (1, "c".into())];
    store
        .create_run("run-1", "c.ns.t", "coord", &tasks, ttl, T0)
        .await
        .unwrap();
    assert_eq!(store.queue_depth(T0).await.unwrap(), 3);
    // Three claims take three different tasks, in order; a fourth finds nothing.
    let w1 = store.claim_task("w1", ttl, T0).await.unwrap().unwrap();
    let w2 = store.claim_task("w2", ttl, T0).await.unwrap().unwrap();
    let w3 = store.claim_task("w3", ttl, T0).await.unwrap().unwrap();
    assert_eq!((w1.task_id, w2.task_id, w3.task_id), (0, 1, 2));
    assert_eq!((w1.spec.as_str(), w1.attempt), ("a", 1));
    assert!(store.claim_task("w4", ttl, T0).await.unwrap().is_none());
    // w1 renews and reports; w2 lets its lease expire and w4 takes the task over (the
    // coordinator renews its run meanwhile).
    assert!(store.renew_task(&w1, "w1", ttl, T0 + 5_000).await.unwrap());
    assert!(store
        .renew_run("run-1", "coord", ttl, T0 + 9_000)
        .await
        .unwrap());
    let done = TaskDone {
        output: "[]".into(),
        rows: 7,
        bytes_read: 100,
        bytes_written: 40,
    };
    assert!(store
        .complete_task(&w1, "w1", &done, T0 + 6_000)
        .await
        .unwrap());
    // Polling reads states only; outputs are read for the tasks asked, when reported.
    let states = store.run_task_states("run-1").await.unwrap();
    assert!(states.iter().all(|r| r.output.is_none()));
    assert_eq!(states[0].state, "done");
    let outs = store.task_outputs("run-1", &[0, 1, 2]).await.unwrap();
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[&0], "[]");
    let again = store
        .claim_task("w4", ttl, T0 + 10_001)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.task_id, again.attempt), (1, 2));
    // The lost attempt can neither renew nor report: its outputs are never committed.
    assert!(!store.renew_task(&w2, "w2", ttl, T0 + 10_002).await.unwrap());
    assert!(!store
        .complete_task(&w2, "w2", &done, T0 + 10_003)
        .await
        .unwrap());
    assert!(store
        .complete_task(&again, "w4", &done, T0 + 10_004)
        .await
        .unwrap());
    // A failure requeues the task until its attempts are spent.
    store
        .fail_task(&w3, "w3", "disk full", T0 + 10_005)
        .await
        .unwrap();
    let mut last = None;
    for i in 0..(tasks::MAX_ATTEMPTS - 1) {
        let t = store
            .claim_task("w5", ttl, T0 + 10_010 + i)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.task_id, 2);
        store
            .fail_task(&t, "w5", "disk full", T0 + 10_011 + i)
            .await
            .unwrap();
        last = Some(t);
    }
    assert_eq!(last.unwrap().attempt, tasks::MAX_ATTEMPTS);
    let rows = store.run_tasks("run-1").await.unwrap();
    let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, ["done", "done", "failed"]);
    assert_eq!(rows[2].error.as_deref(), Some("disk full"));
    let shares = store.worker_shares("run-1").await.unwrap();
    let names: Vec<&str> = shares.iter().map(|s| s.worker.as_str()).collect();
    assert_eq!(names, ["w1", "w4"]);
    assert_eq!(shares[0].bytes_read, 100);
    store
        .finish_run("run-1", "done", T0 + 15_000)
        .await
        .unwrap();
    // A coordinator that stops renewing: its run is abandoned, nothing of it is claimed.
    store
        .create_run(
            "run-2",
            "c.ns.t",
            "coord",
            &[(0, "d".into())],
            ttl,
            T0 + 20_000,
        )
        .await
        .unwrap();
    assert!(store
        .renew_run("run-2", "coord", ttl, T0 + 25_000)
        .await
        .unwrap());
    assert!(store
        .claim_task("w6", ttl, T0 + 36_000)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        store
            .abandon_stale_runs("c.ns.t", T0 + 36_000)
            .await
            .unwrap(),
        vec!["run-2".to_string()]
    );
    assert!(!store
        .renew_run("run-2", "coord", ttl, T0 + 36_001)
        .await
        .unwrap());
    assert_eq!(store.queue_depth(T0 + 36_002).await.unwrap(), 0);
}

#[tokio::test]
async fn replicas_register_renew_expire_leave_and_refuse_a_reused_holder_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let ttl_ms = TTL.as_millis() as i64;
    let g = "group-1";
    store.heartbeat(g, "a", "i-a", TTL, T0).await.unwrap();
    store.heartbeat(g, "b", "i-b", TTL, T0 + 5).await.unwrap();
    // Another group is not seen.
    store.heartbeat("other", "c", "i-c", TTL, T0).await.unwrap();
    let live = store.live_replicas(g, T0 + 10).await.unwrap();
    assert_eq!(
        live.iter().map(|r| r.holder.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    // A renewal keeps the start and moves the expiry.
    store.heartbeat(g, "a", "i-a", TTL, T0 + 20).await.unwrap();
    let a = &store.live_replicas(g, T0 + 20).await.unwrap()[0];
    assert_eq!((a.started_ms, a.expires_ms), (T0, T0 + 20 + ttl_ms));
    // A second process under a live holder name is refused, naming the option.
    let e = store
        .heartbeat(g, "a", "i-other", TTL, T0 + 30)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--holder") && e.contains("already runs as a"),
        "{e}"
    );
    // b stops renewing: dead at its expiry, gone from the list.
    let live = store.live_replicas(g, T0 + 5 + ttl_ms).await.unwrap();
    assert_eq!(
        live.iter().map(|r| r.holder.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    // Its name is free again once it expired, for a new process (which starts anew).
    store
        .heartbeat(g, "b", "i-b2", TTL, T0 + 5 + ttl_ms)
        .await
        .unwrap();
    let b = store.live_replicas(g, T0 + 5 + ttl_ms).await.unwrap()[1].clone();
    assert_eq!((b.holder.as_str(), b.started_ms), ("b", T0 + 5 + ttl_ms));
    // Leaving needs the instance: an old process cannot remove the new one's row.
    store.leave(g, "b", "i-b").await.unwrap();
    assert_eq!(
        store.live_replicas(g, T0 + 6 + ttl_ms).await.unwrap().len(),
        2
    );
    store.leave(g, "b", "i-b2").await.unwrap();
    assert_eq!(
        store.live_replicas(g, T0 + 6 + ttl_ms).await.unwrap().len(),
        1
    );
}

#[test]
fn rendezvous_owners_spread_tables_and_move_only_the_dead_replicas_tables() {
    use super::replicas::{default_group, owner, weight};
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let three = names(&["maintain-0", "maintain-1", "maintain-2"]);
    let scopes: Vec<String> = (0..3000).map(|i| format!("cat.ns.t{i}")).collect();
    let mut counts = HashMap::new();
    for s in &scopes {
        *counts.entry(owner(s, &three).unwrap()).or_insert(0usize) += 1;
    }
    assert_eq!(counts.len(), 3);
    for (r, n) in &counts {
        assert!((850..=1150).contains(n), "{r} owns {n} of 3000");
    }
    // maintain-1 dies: exactly its tables move, spread over the two others.
    let two = names(&["maintain-0", "maintain-2"]);
    let mut moved = HashMap::new();
    for s in &scopes {
        let before = owner(s, &three).unwrap();
        let after = owner(s, &two).unwrap();
        if before == "maintain-1" {
            *moved.entry(after).or_insert(0usize) += 1;
        } else {
            assert_eq!(before, after, "{s} moved although its replica lives");
        }
    }
    assert_eq!(moved.len(), 2, "{moved:?}");
    // The order of the list does not matter; nobody owns without replicas.
    let shuffled = names(&["maintain-2", "maintain-0", "maintain-1"]);
    assert!(scopes
        .iter()
        .all(|s| owner(s, &three) == owner(s, &shuffled)));
    assert_eq!(owner("cat.ns.t", &[]), None);
    // Stable across builds: pinned values (a change would split a mixed-version fleet).
    // (computed independently from the definition: FNV-1a, 0xff separator, SplitMix64).
    assert_eq!(weight("a", "b"), 6_137_638_104_319_202_169);
    assert_eq!(weight("maintain-0", "cat.ns.t0"), 1_086_475_603_754_560_838);
    assert_ne!(weight("ab", "c"), weight("a", "bc"));
    assert_eq!(default_group(&["c", "ns"]), default_group(&["c", "ns"]));
    assert_ne!(default_group(&["c", "ns"]), default_group(&["c", "n"]));
}
