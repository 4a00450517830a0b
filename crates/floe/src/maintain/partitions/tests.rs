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
        small_sizes: vec![1000; small as usize],
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

#[test]
fn roll_up_merges_the_lowest_full_tier_and_everything_below_it() {
    // Off, or fewer files than the fan-in: nothing.
    assert_eq!(roll_up(&[100; 10], 0), None);
    assert_eq!(roll_up(&[100; 3], 4), None);
    // Four commit-sized files fill tier 0 ([100, 400)).
    assert_eq!(roll_up(&[100, 120, 110, 390], 4), Some((400, 4)));
    // Tier 0 holds 3 files, tier 1 ([400, 1600)) holds 3: within the bound, nothing to do.
    assert_eq!(roll_up(&[100, 100, 100, 400, 500, 1500], 4), None);
    // A fourth file in tier 1 merges tier 1 and tier 0 below it.
    assert_eq!(
        roll_up(&[100, 100, 100, 400, 500, 1500, 1200, 9000], 4),
        Some((1600, 7))
    );
}

#[test]
fn roll_up_keeps_an_active_partition_under_fan_in_files_per_tier() {
    // A simulated stream: a 100-byte file per commit into one active partition, the roll-up
    // applied after every commit. Small files stay under (fan-in - 1) * tiers, and bytes
    // rewritten stay under tiers * bytes written.
    let (fan_in, min_size) = (4u64, 1_000_000u64);
    let mut files: Vec<u64> = vec![];
    let (mut written, mut rewritten, mut most) = (0u64, 0u64, 0usize);
    for _ in 0..5_000 {
        files.push(100);
        written += 100;
        let small: Vec<u64> = files.iter().copied().filter(|s| *s < min_size).collect();
        if let Some((below, _)) = roll_up(&small, fan_in) {
            let merged: u64 = files.iter().filter(|s| **s < below).sum();
            rewritten += merged;
            files.retain(|s| *s >= below);
            files.push(merged);
        }
        most = most.max(files.iter().filter(|s| **s < min_size).count());
    }
    let tiers = ((min_size as f64 / 100.0).ln() / (fan_in as f64).ln()).ceil() as usize;
    assert!(
        most <= (fan_in as usize - 1) * tiers,
        "{most} small files, {tiers} tiers"
    );
    assert!(
        rewritten <= written * tiers as u64,
        "{rewritten} rewritten of {written}"
    );
    assert_eq!(files.iter().sum::<u64>(), written);
}

#[test]
fn an_active_partition_with_a_full_tier_is_eligible_for_a_roll_up() {
    let now = 100 * MIN;
    let mut t = Policy::default().compact;
    let p = part("h=1", 5, Some(1), now); // active, 5 files of 1000 bytes
    assert!(!choose(std::slice::from_ref(&p), &t, now)[0].eligible);
    t.roll_up_fan_in = 4;
    let c = choose(&[p], &t, now);
    assert!(c[0].eligible && !c[0].idle, "{:?}", c[0]);
    assert_eq!(c[0].roll_up_below, Some(4000));
    assert!(
        c[0].reason.contains("roll-up of 5 small files"),
        "{}",
        c[0].reason
    );
}
