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
