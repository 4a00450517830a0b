use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{SnapshotReference, SnapshotRetention, MAIN_BRANCH};

use crate::table::watermarks::Watermark;

use super::*;

const DAY: i64 = 86_400_000;

fn chain(n: i64, now: i64) -> Vec<SnapshotInfo> {
    // Snapshot i is (n - i) days old; each is the parent of the next.
    (1..=n)
        .map(|i| SnapshotInfo {
            id: i,
            parent: (i > 1).then_some(i - 1),
            timestamp_ms: now - (n - i) * DAY,
        })
        .collect()
}

fn branch(id: i64) -> SnapshotReference {
    SnapshotReference {
        snapshot_id: id,
        retention: SnapshotRetention::Branch {
            min_snapshots_to_keep: None,
            max_snapshot_age_ms: None,
            max_ref_age_ms: None,
        },
    }
}

fn retention(now: i64, days: i64, keep: u64) -> Retention {
    Retention {
        older_than_ms: now - days * DAY,
        min_snapshots_to_keep: keep,
        max_ref_age_ms: None,
        by_age: true,
        max_snapshots: None,
        // Recovery chains are tested on their own (below).
        writer_chain_max_age_ms: Some(0),
    }
}

fn watermark(id: i64) -> Watermark {
    Watermark {
        kind: "flink",
        id: "job".into(),
        snapshot_id: id,
        timestamp_ms: 0,
        position: BTreeMap::new(),
    }
}

#[test]
fn age_and_min_keep_on_main() {
    let now = 100 * DAY;
    let snaps = chain(10, now);
    let refs = HashMap::from([(MAIN_BRANCH.to_string(), branch(10))]);
    // Older than 3 days: snapshots 1..=6 are 4..9 days old.
    let p = plan(&snaps, &refs, &[], &[], &retention(now, 3, 1), now).unwrap();
    assert_eq!(p.expired_snapshots, vec![1, 2, 3, 4, 5, 6]);
    // Everything old, but keep the last 2.
    let p = plan(
        &snaps,
        &refs,
        &[],
        &[],
        &retention(now + 50 * DAY, 0, 2),
        now + 50 * DAY,
    )
    .unwrap();
    assert_eq!(p.expired_snapshots, (1..=8).collect::<Vec<_>>());
    assert_eq!(p.retained_snapshots, 2);
}

#[test]
fn tags_branches_and_writers_protect_snapshots() {
    let now = 100 * DAY;
    let snaps = chain(10, now);
    let refs = HashMap::from([
        (MAIN_BRANCH.to_string(), branch(10)),
        (
            "v1".to_string(),
            SnapshotReference {
                snapshot_id: 2,
                retention: SnapshotRetention::Tag {
                    max_ref_age_ms: None,
                },
            },
        ),
        ("audit".to_string(), branch(4)),
    ]);
    let p = plan(
        &snaps,
        &refs,
        &[watermark(6)],
        &[],
        &retention(now, 0, 1),
        now,
    )
    .unwrap();
    assert_eq!(p.expired_snapshots, vec![1, 3, 5, 7, 8, 9]);
    assert_eq!(p.protected.len(), 1);
    assert_eq!(p.protected[0].snapshot_id, 6);
    assert_eq!(p.protected[0].writer, "flink:job");
}

#[test]
fn old_refs_expire_but_main_never_does() {
    let now = 100 * DAY;
    let snaps = chain(10, now);
    let mut r = retention(now, 0, 1);
    r.max_ref_age_ms = Some(2 * DAY);
    let refs = HashMap::from([
        (MAIN_BRANCH.to_string(), branch(1)),
        ("old".to_string(), branch(3)),
        ("new".to_string(), branch(10)),
    ]);
    let p = plan(&snaps, &refs, &[], &[], &r, now).unwrap();
    assert_eq!(p.expired_refs, vec!["old".to_string()]);
    assert!(!p.expired_snapshots.contains(&1), "main's head stays");
    assert!(!p.expired_snapshots.contains(&10), "new's head stays");
    assert!(p.expired_snapshots.contains(&3));
}

#[test]
fn explicit_ids_only_expire_those_and_refuse_heads_and_watermarks() {
    let now = 100 * DAY;
    let snaps = chain(5, now);
    let refs = HashMap::from([(MAIN_BRANCH.to_string(), branch(5))]);
    let mut r = retention(now, 0, 1);
    r.by_age = false;
    let p = plan(&snaps, &refs, &[], &[2], &r, now).unwrap();
    assert_eq!(p.expired_snapshots, vec![2]);
    let e = plan(&snaps, &refs, &[], &[5], &r, now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("head of ref 'main'"), "{e}");
    let e = plan(&snaps, &refs, &[watermark(3)], &[3], &r, now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("recovery point of writer flink:job"), "{e}");
    assert!(plan(&snaps, &refs, &[], &[99], &r, now).is_err());
}

#[test]
fn unreferenced_snapshots_expire_by_age() {
    let now = 100 * DAY;
    let mut snaps = chain(3, now);
    snaps.push(SnapshotInfo {
        id: 50,
        parent: Some(1),
        timestamp_ms: now - 10 * DAY,
    });
    snaps.push(SnapshotInfo {
        id: 51,
        parent: Some(1),
        timestamp_ms: now,
    });
    let refs = HashMap::from([(MAIN_BRANCH.to_string(), branch(3))]);
    let p = plan(&snaps, &refs, &[], &[], &retention(now, 5, 5), now).unwrap();
    assert_eq!(p.expired_snapshots, vec![50]);
}

#[test]
fn max_snapshots_bounds_young_history_but_keeps_heads_watermarks_and_the_minimum() {
    let now = 100 * DAY;
    let snaps = chain(10, now);
    let tag = SnapshotReference {
        snapshot_id: 2,
        retention: SnapshotRetention::Tag {
            max_ref_age_ms: None,
        },
    };
    let refs = HashMap::from([
        (MAIN_BRANCH.to_string(), branch(10)),
        ("v1".to_string(), tag),
    ]);
    // Everything is younger than 30 days: only the count expires snapshots.
    let bounded = |max: u64, keep: u64| Retention {
        max_snapshots: Some(max),
        ..retention(now, 30, keep)
    };
    let p = plan(&snaps, &refs, &[], &[], &retention(now, 30, 1), now).unwrap();
    assert!(p.expired_snapshots.is_empty(), "no bound: nothing expires");
    let p = plan(&snaps, &refs, &[watermark(3)], &[], &bounded(4, 1), now).unwrap();
    assert_eq!(
        p.expired_snapshots,
        vec![1, 4, 5, 6],
        "tag 2 and watermark 3 stay"
    );
    assert_eq!(p.protected.len(), 1);
    // The minimum wins over a smaller maximum.
    let p = plan(&snaps, &refs, &[], &[], &bounded(4, 6), now).unwrap();
    assert_eq!(p.expired_snapshots, vec![1, 3, 4]);
    // Age still applies within the bound.
    let p = plan(
        &snaps,
        &refs,
        &[],
        &[],
        &Retention {
            max_snapshots: Some(8),
            ..retention(now, 3, 1)
        },
        now,
    )
    .unwrap();
    assert_eq!(p.expired_snapshots, vec![1, 3, 4, 5, 6]);
}

#[test]
fn a_live_writers_recovery_chain_is_kept_from_each_branch_head_and_a_stale_one_is_reported() {
    let now = 100 * DAY;
    let snaps = chain(10, now);
    let refs = HashMap::from([
        (MAIN_BRANCH.to_string(), branch(10)),
        ("audit".to_string(), branch(8)),
    ]);
    // A Flink job whose newest snapshot is 4 (6 days old), kept for 7 days.
    let w = Watermark {
        timestamp_ms: now - 6 * DAY,
        ..watermark(4)
    };
    let live = Retention {
        writer_chain_max_age_ms: Some(7 * DAY),
        ..retention(now, 0, 1)
    };
    let p = plan(&snaps, &refs, std::slice::from_ref(&w), &[], &live, now).unwrap();
    assert_eq!(
        p.expired_snapshots,
        vec![1, 2, 3],
        "4..=10 is the chain from main's head"
    );
    let mut seen: Vec<(String, usize, bool)> = p
        .chains
        .iter()
        .map(|c| (c.branch.clone(), c.snapshots, c.kept))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("audit".to_string(), 5, true),
            ("main".to_string(), 7, true)
        ]
    );
    // A snapshot on the chain cannot be expired by id either.
    let by_id = Retention {
        by_age: false,
        ..live
    };
    let e = plan(&snaps, &refs, std::slice::from_ref(&w), &[6], &by_id, now).unwrap_err();
    assert!(
        e.to_string().contains("recovery chain of writer flink:job"),
        "{e}"
    );
    // Past the age, only the recovery point stays, and the plan says why.
    let stale = Retention {
        writer_chain_max_age_ms: Some(5 * DAY),
        ..live
    };
    let p = plan(&snaps, &refs, std::slice::from_ref(&w), &[], &stale, now).unwrap();
    assert_eq!(p.expired_snapshots, vec![1, 2, 3, 5, 6, 7, 9]);
    assert!(p.chains.iter().all(|c| !c.kept));
    let reason = p.chains[0].reason.as_deref().unwrap();
    assert!(reason.contains("6d") && reason.contains("5d"), "{reason}");
}
