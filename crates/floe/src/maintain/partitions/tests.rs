use super::*;
use crate::maintain::policy::Policy;

const MIN: i64 = 60_000;

fn part(name: &str, small: u64, last_added_min_ago: Option<i64>, now: i64) -> PartitionActivity {
    PartitionActivity {
        partition: name.to_string(),
        data_files: small + 1,
        data_bytes: small * 1000 + 500_000_000,
        small_files: small,
        small_bytes: small * 1000,
        delete_files: 0,
        last_added_ms: last_added_min_ago.map(|m| now - m * MIN),
    }
}

#[test]
fn idle_partitions_go_first_and_active_ones_wait() {
    let now = 1_000_000 * MIN;
    let t = Policy::default().compact; // idle 15m, hard limit 100
    let parts = vec![
        part("day=3", 40, Some(1), now), // active, under the limit: held back
        part("day=1", 10, Some(600), now), // idle 10h
        part("day=2", 30, Some(20), now), // idle 20m
        part("day=4", 150, Some(2), now), // active, past the hard limit
        part("day=5", 1, Some(600), now), // one small file: nothing to merge
    ];
    let c = choose(&parts, &t, now);
    let order: Vec<(&str, bool)> = c
        .iter()
        .map(|p| (p.partition.as_str(), p.eligible))
        .collect();
    assert_eq!(
        order,
        vec![
            ("day=2", true),
            ("day=1", true),
            ("day=4", true),
            ("day=3", false)
        ]
    );
    assert!(
        c[3].reason.contains("partition-idle-time 15m"),
        "{}",
        c[3].reason
    );
    assert!(c[2]
        .reason
        .contains("150 small files >= small-file-hard-limit 100"));
    assert_eq!(c[1].reason, "idle 10h");
}

#[test]
fn a_partition_whose_writes_were_expired_is_idle_and_delete_files_count_as_work() {
    let now = 50 * MIN;
    let t = Policy::default().compact;
    let mut p = part("x=1", 0, None, now);
    p.delete_files = 3;
    let c = choose(&[p], &t, now);
    assert_eq!(c.len(), 1);
    assert!(c[0].eligible && c[0].idle);
}

#[test]
fn the_idle_time_is_a_threshold_not_a_guess() {
    let now = 100 * MIN;
    let mut t = Policy::default().compact;
    t.partition_idle_time_ms = 30 * MIN as u64;
    let just_under = choose(&[part("a", 5, Some(29), now)], &t, now);
    let at = choose(&[part("a", 5, Some(30), now)], &t, now);
    assert!(!just_under[0].eligible);
    assert!(at[0].eligible);
}
