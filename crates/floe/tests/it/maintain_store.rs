//! The lease store of `floe maintain` on PostgreSQL: one holder per table at any moment, even
//! when several maintainers (separate connection pools) race for the same tables.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use floe::coordination::{LeaseOutcome, RunRecord, Store};

fn postgres_url() -> String {
    let Ok(url) = std::env::var("FLOE_TEST_POSTGRES_URL") else {
        panic!("FLOE_TEST_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL");
    };
    url
}

/// A scope prefix no other run of these tests uses.
fn unique_prefix() -> String {
    format!("it-{}", uuid::Uuid::new_v4().simple())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn postgres_leases_exclude_expire_renew_and_release() {
    let store = Store::connect(&postgres_url()).await.unwrap();
    assert!(!store.display_uri().is_empty());
    let prefix = unique_prefix();
    let s = format!("{prefix}.ns.t");
    let ttl = Duration::from_secs(60);
    let t0 = now_ms();

    assert_eq!(
        store.try_acquire(&s, "a", ttl, t0).await.unwrap(),
        LeaseOutcome::Acquired
    );
    assert_eq!(
        store.try_acquire(&s, "b", ttl, t0 + 1).await.unwrap(),
        LeaseOutcome::HeldBy {
            holder: "a".into(),
            expires_ms: t0 + 60_000
        }
    );
    assert!(store.renew(&s, "a", ttl, t0 + 2).await.unwrap());
    assert!(!store.renew(&s, "b", ttl, t0 + 2).await.unwrap());
    store.release(&s, "b").await.unwrap();
    let mine: Vec<_> = store
        .leases(t0 + 3)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.scope == s)
        .collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(
        (mine[0].holder.as_str(), mine[0].expires_ms),
        ("a", t0 + 60_002)
    );

    // After expiry another holder takes it; the loser's renewal fails.
    let later = t0 + 60_002;
    assert_eq!(
        store.try_acquire(&s, "b", ttl, later).await.unwrap(),
        LeaseOutcome::Acquired
    );
    assert!(!store.renew(&s, "a", ttl, later + 1).await.unwrap());
    assert_eq!(
        store.try_acquire(&s, "a", ttl, later + 1).await.unwrap(),
        LeaseOutcome::HeldBy {
            holder: "b".into(),
            expires_ms: later + 60_000
        }
    );
    // Release by the holder frees it at once.
    store.release(&s, "b").await.unwrap();
    assert!(!store
        .leases(later + 1)
        .await
        .unwrap()
        .iter()
        .any(|l| l.scope == s));
    assert_eq!(
        store.try_acquire(&s, "a", ttl, later + 2).await.unwrap(),
        LeaseOutcome::Acquired
    );
    store.release(&s, "a").await.unwrap();
    store.close().await;
}

#[tokio::test]
async fn postgres_run_history_round_trips() {
    let store = Store::connect(&postgres_url()).await.unwrap();
    let prefix = unique_prefix();
    let scope = format!("{prefix}.ns.t");
    let job = format!("compact-{prefix}");
    let t0 = now_ms();
    let failed = RunRecord {
        scope: scope.clone(),
        job: job.clone(),
        holder: "host/1".into(),
        started_ms: t0,
        finished_ms: t0 + 10,
        succeeded: false,
        error: Some("conflict".into()),
        files_read: (1 << 31) + 1,
        bytes_read: (1 << 40) + 2,
        files_written: (1 << 32) + 3,
        bytes_written: (1 << 41) + 4,
        files_deleted: (1 << 33) + 5,
        bytes_deleted: (1 << 42) + 6,
    };
    let ok = RunRecord {
        finished_ms: t0 + 5,
        succeeded: true,
        error: None,
        ..failed.clone()
    };
    store.record_run(&ok).await.unwrap();
    store.record_run(&failed).await.unwrap();
    assert_eq!(
        store.recent_runs(Some(&job), 10).await.unwrap(),
        vec![failed.clone(), ok.clone()]
    );
    let last = store.last_runs(&scope).await.unwrap();
    assert_eq!(last.len(), 1);
    let last = &last[&job];
    assert_eq!(last.last_success_ms, Some(t0 + 5));
    assert_eq!(last.last_failure_ms, Some(t0 + 10));
    assert_eq!(last.consecutive_failures, 1);
    assert_eq!(last.last_error.as_deref(), Some("conflict"));
    store.close().await;
}

/// One successful acquisition: `holder` held `scope` at least from `from` (when its
/// `try_acquire` returned) until `until` (the lease's expiry, or when it started to release).
#[derive(Debug, Clone)]
struct Held {
    scope: String,
    holder: String,
    from: i64,
    until: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_maintainers_never_hold_one_table_together() {
    const INSTANCES: usize = 3;
    const SCOPES: usize = 20;
    const ROUNDS: usize = 8;
    // Short enough that leases expire and change hands during the test, long enough that an
    // acquire call never outlasts it: a holder whose call returns after its lease expired (in
    // the store's time) holds nothing, yet this test would count it as holding from the
    // return (30 ms was exceeded on a loaded 2-core machine).
    let ttl = Duration::from_millis(150);
    let prefix = unique_prefix();
    let scopes: Vec<String> = (0..SCOPES).map(|i| format!("{prefix}.ns.t{i}")).collect();

    // Separate pools, as separate processes would have.
    let mut stores = Vec::new();
    for _ in 0..INSTANCES {
        stores.push(Store::connect(&postgres_url()).await.unwrap());
    }
    let mut tasks = Vec::new();
    for (i, store) in stores.into_iter().enumerate() {
        let scopes = scopes.clone();
        tasks.push(tokio::spawn(async move {
            let holder = format!("maintainer-{i}");
            let mut held: Vec<Held> = Vec::new();
            let mut refused = 0usize;
            for round in 0..ROUNDS {
                // Each instance walks the scopes from a different start.
                for k in 0..SCOPES {
                    let scope = &scopes[(k + i * 7 + round) % SCOPES];
                    let now = now_ms();
                    match store.try_acquire(scope, &holder, ttl, now).await.unwrap() {
                        LeaseOutcome::Acquired => {
                            let mut h = Held {
                                scope: scope.clone(),
                                holder: holder.clone(),
                                from: now_ms(),
                                until: now + ttl.as_millis() as i64,
                            };
                            // Some leases are released, the others left to expire. A release
                            // ends this holder's lease, including the windows of its earlier
                            // acquisitions of the scope that this one extended.
                            if (round + k + i) % 3 == 0 {
                                let end = now_ms();
                                h.until = h.until.min(end);
                                for earlier in held.iter_mut().filter(|e| &e.scope == scope) {
                                    earlier.until = earlier.until.min(end);
                                }
                                store.release(scope, &holder).await.unwrap();
                            }
                            held.push(h);
                        }
                        LeaseOutcome::HeldBy {
                            holder: other,
                            expires_ms,
                        } => {
                            assert_ne!(other, holder);
                            assert!(expires_ms > 0);
                            refused += 1;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(35 * (i as u64 + 1))).await;
            }
            // Releasing everything ends every window of this holder.
            let end = now_ms();
            for h in &mut held {
                h.until = h.until.min(end);
            }
            for scope in &scopes {
                store.release(scope, &holder).await.unwrap();
            }
            store.close().await;
            (held, refused)
        }));
    }
    let mut all: Vec<Held> = Vec::new();
    let mut refused = 0;
    for task in tasks {
        let (held, r) = task.await.unwrap();
        all.extend(held);
        refused += r;
    }

    let mut by_scope: HashMap<&str, Vec<&Held>> = HashMap::new();
    for h in &all {
        by_scope.entry(h.scope.as_str()).or_default().push(h);
    }
    // Every scope was acquired by someone.
    assert_eq!(
        by_scope.keys().copied().collect::<BTreeSet<_>>(),
        scopes.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    // No two holders' windows on one scope overlap.
    let mut checked = 0;
    for (scope, held) in &by_scope {
        for (x, a) in held.iter().enumerate() {
            for b in &held[x + 1..] {
                if a.holder != b.holder {
                    checked += 1;
                    assert!(
                        a.until <= b.from || b.until <= a.from,
                        "{scope} held by two maintainers at once: {a:?} and {b:?}"
                    );
                }
            }
        }
    }
    let holders: BTreeSet<_> = all.iter().map(|h| h.holder.as_str()).collect();
    eprintln!(
        "{} acquisitions by {} maintainers, {refused} refused, {checked} pairs checked",
        all.len(),
        holders.len()
    );
}

#[tokio::test]
async fn queue_notifications_wake_a_waiter_at_once_and_only_on_its_channel() {
    use floe::coordination::wakeups::run_channel;
    let store = Store::connect(&postgres_url()).await.unwrap();
    let run = uuid::Uuid::now_v7().to_string();
    let mine = run_channel(&run);
    assert!(mine.len() <= 63 && mine.starts_with("floe_run_"), "{mine}");
    let other = run_channel(&uuid::Uuid::now_v7().to_string());
    assert_ne!(mine, other);

    // A notification on another run's channel does not wake the waiter: it waits its poll.
    let mut w = store.wakeups(&mine).await;
    let notifier = Store::connect(&postgres_url()).await.unwrap();
    let t = std::time::Instant::now();
    let (_, ()) = tokio::join!(w.wait(Duration::from_millis(1500)), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        notifier.notify(&other).await;
    });
    assert!(
        t.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t.elapsed()
    );

    // Its own channel wakes it long before its poll.
    let t = std::time::Instant::now();
    let (_, ()) = tokio::join!(w.wait(Duration::from_secs(20)), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        notifier.notify(&mine).await;
    });
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[tokio::test]
async fn postgres_replica_heartbeats_register_expire_and_refuse_a_reused_holder() {
    let store = Store::connect(&postgres_url()).await.unwrap();
    let group = unique_prefix();
    let ttl = Duration::from_secs(60);
    let t0 = now_ms();
    store.heartbeat(&group, "a", "i1", ttl, t0).await.unwrap();
    store.heartbeat(&group, "b", "i2", ttl, t0).await.unwrap();
    store
        .heartbeat(&group, "a", "i1", ttl, t0 + 10)
        .await
        .unwrap();
    let live = store.live_replicas(&group, t0 + 10).await.unwrap();
    assert_eq!(
        live.iter().map(|r| r.holder.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(live[0].started_ms, t0);
    assert!(store
        .heartbeat(&group, "b", "i3", ttl, t0 + 20)
        .await
        .is_err());
    store.leave(&group, "b", "i2").await.unwrap();
    let live = store.live_replicas(&group, t0 + 20).await.unwrap();
    assert_eq!(live.len(), 1);
    // Expired: gone from the list, and its name free for a new process.
    assert!(store
        .live_replicas(&group, t0 + 10 + 60_000)
        .await
        .unwrap()
        .is_empty());
    store
        .heartbeat(&group, "a", "i9", ttl, t0 + 10 + 60_000)
        .await
        .unwrap();
}
