//! Unit tests of the report arithmetic on synthetic tables.

use std::time::Duration;

use super::*;
use crate::operations::diagnose::facts::{active_snapshots, Expirable, SpecField};
use crate::operations::diagnose::model::{Thresholds, ACTIVE_COMMITS};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const HOUR_MS: i64 = 3_600_000;
const T0: i64 = 1_700_000_000_000;

fn thresholds() -> Thresholds {
    Thresholds {
        target_file_size_bytes: 8 * MIB,
        min_file_size_bytes: MIB,
        min_input_files: 5,
    }
}

fn snap(id: i64, timestamp_ms: i64, files: u64, bytes: u64) -> SnapshotFacts {
    SnapshotFacts {
        snapshot_id: id,
        timestamp_ms,
        sequence_number: id,
        operation: if files > 0 { "append" } else { "delete" }.to_string(),
        added_data_files: files,
        added_bytes: bytes,
    }
}

fn data(partition: &str, size: u64, snapshot_id: i64) -> LiveEntry {
    LiveEntry {
        spec_id: 0,
        partition: partition.to_string(),
        filter: Some(format!("p = '{partition}'")),
        data: true,
        vector: false,
        equality: false,
        size,
        records: 10,
        snapshot_id,
        values: vec![],
        row_groups: None,
    }
}

fn delete(partition: &str, size: u64, snapshot_id: i64) -> LiveEntry {
    LiveEntry {
        data: false,
        records: 1,
        ..data(partition, size, snapshot_id)
    }
}

fn listed(path: &str, size: u64, modified: SystemTime) -> ListedFile {
    ListedFile {
        path: path.to_string(),
        size,
        modified,
    }
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(T0 as u64)
}

fn ago(now: SystemTime, hours: u64) -> SystemTime {
    now - Duration::from_secs(hours * 3600)
}

fn facts() -> Facts {
    Facts {
        table: "ns.t".to_string(),
        location: "/w/ns/t".to_string(),
        format_version: 2,
        thresholds: thresholds(),
        spec_id: 0,
        spec: vec![],
        previous_versions_max: 100,
        snapshots: vec![],
        metadata_log_entries: 0,
        live: vec![],
        refs: vec![],
        only_old: vec![],
        expirable: None,
        manifest_lengths: vec![],
        referenced: vec![],
        listing: Ok(vec![]),
        writers: vec![],
        retainers: vec![],
        metadata_files: vec![],
        leaf_columns: 3,
        row_group_bytes: 128 * MIB,
        now: now(),
    }
}

#[test]
fn partitions_count_files_small_files_medians_and_deletes() {
    let snaps = [snap(1, T0, 7, 0)];
    let live = vec![
        data("p=b", 50 * KIB, 1),
        data("p=a", 300, 1),
        data("p=a", 10 * MIB, 1),
        data("p=a", 100, 1),
        data("p=b", 60 * KIB, 1),
        data("p=a", 2 * MIB, 1),
        data("p=a", 200, 1),
        delete("p=b", KIB, 1),
    ];
    let (parts, hist) = partitions(&live, &snaps, &thresholds());
    assert_eq!(parts.len(), 2);
    // Most data files first.
    let (a, b) = (&parts[0], &parts[1]);
    assert_eq!(a.partition, "p=a");
    assert_eq!(a.data_files, 5);
    assert_eq!(a.records, 50);
    assert_eq!(a.total_bytes, 600 + 12 * MIB);
    assert_eq!(a.avg_bytes, (600 + 12 * MIB) / 5);
    assert_eq!(a.median_bytes, 300);
    assert_eq!(a.files_under_min, 3);
    assert_eq!(a.files_under_target, 4);
    assert_eq!(a.delete_files, 0);
    assert_eq!(a.filter.as_deref(), Some("p = 'p=a'"));
    assert_eq!(b.partition, "p=b");
    assert_eq!(b.data_files, 2);
    assert_eq!(b.median_bytes, 60 * KIB);
    assert_eq!(b.files_under_min, 2);
    assert_eq!(b.delete_files, 1);
    assert_eq!(b.delete_bytes, KIB);
    assert_eq!(b.delete_ratio, 0.5);

    let files: Vec<(&str, u64, u64)> = hist.iter().map(|b| (b.label, b.files, b.bytes)).collect();
    assert_eq!(
        files[0],
        ("< 16 KiB", 3, 600),
        "the delete file is not in the histogram"
    );
    assert_eq!(files[1], ("16-128 KiB", 2, 110 * KIB));
    assert_eq!(files[2], ("128 KiB-1 MiB", 0, 0));
    assert_eq!(files[3], ("1-8 MiB", 1, 2 * MIB));
    assert_eq!(files[4], ("8-64 MiB", 1, 10 * MIB));
    assert_eq!(hist.iter().map(|b| b.files).sum::<u64>(), 7);

    let t = totals(&parts, &live);
    assert_eq!(t.partitions, 2);
    assert_eq!(t.data_files, 7);
    assert_eq!(t.delete_files, 1);
    assert_eq!(t.files_under_min, 5);
    assert_eq!(t.files_under_target, 6);
    assert_eq!(t.records, 70);
    // Sorted: 100, 200, 300, 50K, 60K, 2M, 10M.
    assert_eq!(t.median_bytes, 50 * KIB);
}

#[test]
fn a_partition_of_only_delete_files_has_a_ratio_of_its_count() {
    let live = vec![delete("p=x", 10, 1), delete("p=x", 20, 1)];
    let (parts, _) = partitions(&live, &[], &thresholds());
    assert_eq!(parts[0].data_files, 0);
    assert_eq!(parts[0].delete_ratio, 2.0);
    assert_eq!(parts[0].avg_bytes, 0);
    assert_eq!(parts[0].median_bytes, 0);
    assert_eq!(totals(&parts, &live).median_bytes, 0);
}

#[test]
fn the_same_label_in_two_specs_is_two_partitions() {
    let mut other = data("p=a", 10, 1);
    other.spec_id = 1;
    let live = vec![data("p=a", 10, 1), other, data("p=a", 10, 1)];
    let (parts, _) = partitions(&live, &[], &thresholds());
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].data_files, 2);
    assert_eq!(parts[0].spec_id, 0);
    assert_eq!(parts[1].spec_id, 1);
}

#[test]
fn active_partitions_are_the_ones_the_last_writing_commits_touched() {
    // Commits 1..=11 add files an hour apart; commit 12 adds none, so the last ten writing
    // commits are 2..=11. Given newest first: the order of the input does not matter.
    let mut snaps: Vec<SnapshotFacts> = (1..=11)
        .map(|i| snap(i, T0 + i * HOUR_MS, 1, 100))
        .collect();
    snaps.push(snap(12, T0 + 12 * HOUR_MS, 0, 0));
    snaps.reverse();
    let active = active_snapshots(&snaps);
    assert_eq!(active.len(), ACTIVE_COMMITS);
    assert!(!active.contains(&1) && !active.contains(&12));
    assert!(active.contains(&2) && active.contains(&11));

    let live = vec![
        data("p=old", 10, 1),
        data("p=mixed", 10, 1),
        data("p=mixed", 10, 2),
        data("p=new", 10, 11),
        // Added by a snapshot no longer in the metadata: no time.
        data("p=gone", 10, 99),
    ];
    let (parts, _) = partitions(&live, &snaps, &thresholds());
    let get = |name: &str| parts.iter().find(|p| p.partition == name).unwrap();
    assert!(!get("p=old").active);
    assert!(get("p=mixed").active);
    assert!(get("p=new").active);
    assert!(!get("p=gone").active);
    assert_eq!(get("p=old").last_added_ms, Some(T0 + HOUR_MS));
    assert_eq!(get("p=mixed").last_added_ms, Some(T0 + 2 * HOUR_MS));
    assert_eq!(get("p=gone").last_added_ms, None);
    assert_eq!(totals(&parts, &live).active_partitions, 2);
}

#[test]
fn history_rates_and_averages_over_recent_commits() {
    let snaps = vec![
        snap(3, T0 + HOUR_MS, 0, 0),
        snap(1, T0, 2, 2 * MIB),
        snap(4, T0 + 2 * HOUR_MS, 6, 6 * MIB),
        snap(2, T0 + HOUR_MS / 2, 4, MIB),
    ];
    let h = commit_history(&snaps);
    assert_eq!(h.snapshots, 4);
    assert_eq!(h.oldest_ms, Some(T0));
    assert_eq!(h.newest_ms, Some(T0 + 2 * HOUR_MS));
    // Three intervals over two hours.
    assert_eq!(h.commits_per_hour, 1.5);
    // The commit adding nothing is not averaged.
    assert_eq!(h.avg_files_per_commit, 4.0);
    assert_eq!(h.avg_bytes_per_commit, 3.0 * MIB as f64);
    let ids: Vec<i64> = h.recent.iter().map(|c| c.snapshot_id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(h.recent[2].operation, "delete");
    assert_eq!(h.recent[3].added_data_files, 6);
}

#[test]
fn equal_timestamps_order_by_sequence_number() {
    let snaps = vec![snap(2, T0, 1, 1), snap(1, T0, 1, 1), snap(3, T0 - 1, 1, 1)];
    let ids: Vec<i64> = commit_history(&snaps)
        .recent
        .iter()
        .map(|c| c.snapshot_id)
        .collect();
    assert_eq!(ids, [3, 1, 2]);
}

#[test]
fn a_short_history_has_the_rate_of_its_intervals() {
    // Two commits 59.999 s apart: one interval, a little over 60 an hour (a burst of commits
    // within seconds has a rate too, not "0.0 commits/h").
    let snaps = vec![snap(1, T0, 1, 1), snap(2, T0 + 59_999, 1, 1)];
    let rate = commit_history(&snaps).commits_per_hour;
    assert!((rate - 3_600_000.0 / 59_999.0).abs() < 1e-9, "{rate}");
    let snaps = vec![snap(1, T0, 1, 1), snap(2, T0 + 60_000, 1, 1)];
    let rate = commit_history(&snaps).commits_per_hour;
    assert!((rate - 60.0).abs() < 1e-9, "{rate}");
    let empty = commit_history(&[]);
    assert_eq!(empty.snapshots, 0);
    assert_eq!(empty.oldest_ms, None);
    assert_eq!(empty.avg_files_per_commit, 0.0);
}

#[test]
fn history_keeps_the_last_recent_commits() {
    let snaps: Vec<SnapshotFacts> = (1..=250).map(|i| snap(i, T0 + i * 60_000, 1, 1)).collect();
    let h = commit_history(&snaps);
    assert_eq!(h.snapshots, 250);
    assert_eq!(h.recent.len(), RECENT_COMMITS);
    assert_eq!(h.recent[0].snapshot_id, 51);
    assert_eq!(h.recent.last().unwrap().snapshot_id, 250);
    // 199 intervals of a minute.
    assert!(
        (h.commits_per_hour - 60.0).abs() < 1e-9,
        "{}",
        h.commits_per_hour
    );
    assert_eq!(h.oldest_ms, Some(T0 + 60_000));
}

#[test]
fn storage_counts_unreferenced_files_by_age() {
    let now = now();
    let listing = vec![
        // Referenced, spelled differently by the metadata.
        listed("file:///w/t/data/a.parquet", 1000, ago(now, 100)),
        listed("/w/t/metadata/v1.metadata.json", 10, ago(now, 100)),
        listed("/w/t/data/young.parquet", 1, ago(now, 0)),
        // Clock skew: modified after now counts as young.
        listed(
            "/w/t/data/future.parquet",
            2,
            now + Duration::from_secs(7200),
        ),
        listed("/w/t/data/hours.parquet", 4, ago(now, 5)),
        listed("/w/t/data/day.parquet", 8, ago(now, 24)),
        listed("/w/t/data/days.parquet", 16, ago(now, 71)),
        listed("/w/t/data/old.parquet", 32, ago(now, 72)),
    ];
    let referenced = vec![
        "/w/t/data/a.parquet".to_string(),
        "file:/w/t/metadata/v1.metadata.json".to_string(),
    ];
    let s = storage(&listing, &referenced, now);
    assert_eq!(s.listed_files, 8);
    assert_eq!(s.listed_bytes, 1073);
    assert_eq!(s.unreferenced_files, 6);
    assert_eq!(s.unreferenced_bytes, 63);
    let by_age: Vec<(&str, u64, u64)> = s
        .unreferenced_by_age
        .iter()
        .map(|(l, n, b)| (l.as_str(), *n, *b))
        .collect();
    assert_eq!(
        by_age,
        [
            ("< 1 h", 2, 3),
            ("1 h - 1 d", 1, 4),
            ("1 - 3 d", 2, 24),
            (">= 3 d", 1, 32)
        ]
    );
    assert_eq!(s.sample_unreferenced[0], "/w/t/data/young.parquet");
    assert_eq!(s.skipped, None);
}

#[test]
fn storage_samples_at_most_ten_paths() {
    let now = now();
    let listing: Vec<ListedFile> = (0..25)
        .map(|i| listed(&format!("/w/t/data/{i}.parquet"), 1, ago(now, 1)))
        .collect();
    let s = storage(&listing, &[], now);
    assert_eq!(s.unreferenced_files, 25);
    assert_eq!(s.sample_unreferenced.len(), 10);
    assert_eq!(s.sample_unreferenced[9], "/w/t/data/9.parquet");
}

#[test]
fn metadata_json_files_are_counted_from_the_listing() {
    let now = now();
    let listing = vec![
        listed("/w/t/metadata/v1.metadata.json", 10, now),
        listed("/w/t/metadata/00002-abc.metadata.json", 20, now),
        listed("/w/t/metadata/snap-1.avro", 40, now),
        listed("/w/t/data/a.parquet", 80, now),
    ];
    assert_eq!(metadata_json(&listing), (2, 30));
}

#[test]
fn report_sizes_old_files_from_the_listing_when_metadata_does_not() {
    let now = now();
    let mut f = facts();
    f.snapshots = vec![
        snap(1, T0 - 3 * HOUR_MS, 1, 100),
        snap(2, T0 - HOUR_MS, 1, 200),
    ];
    f.live = vec![data("p=a", 200, 2)];
    f.metadata_log_entries = 1;
    f.refs = vec![("tag-b".to_string(), 1), ("main".to_string(), 2)];
    f.only_old = vec![
        ("/w/ns/t/data/old.parquet".to_string(), Some(100)),
        // A manifest list: no size in the metadata, 70 bytes on storage.
        ("file:///w/ns/t/metadata/snap-1.avro".to_string(), None),
        // Not on storage either: 0 bytes.
        ("/w/ns/t/metadata/gone.avro".to_string(), None),
    ];
    f.expirable = Some(Expirable {
        snapshots: 1,
        files: vec![("/w/ns/t/metadata/snap-1.avro".to_string(), None)],
    });
    f.manifest_lengths = vec![Some(4000), None, Some(1000)];
    f.referenced = vec![
        "/w/ns/t/data/old.parquet".to_string(),
        "/w/ns/t/data/a.parquet".to_string(),
        "/w/ns/t/metadata/snap-1.avro".to_string(),
        "/w/ns/t/metadata/v2.metadata.json".to_string(),
    ];
    f.listing = Ok(vec![
        listed("/w/ns/t/data/old.parquet", 100, ago(now, 100)),
        listed("/w/ns/t/data/a.parquet", 200, ago(now, 1)),
        listed("/w/ns/t/metadata/snap-1.avro", 70, ago(now, 100)),
        listed("/w/ns/t/metadata/v1.metadata.json", 5, ago(now, 100)),
        listed("/w/ns/t/metadata/v2.metadata.json", 6, ago(now, 1)),
    ]);
    let r = report(f);
    assert_eq!(r.table, "ns.t");
    assert_eq!(r.location, "/w/ns/t");
    assert_eq!(r.generated_at_ms, T0);
    assert_eq!(r.duration_ms, 0);
    let h = &r.history;
    assert_eq!((h.only_old_files, h.only_old_bytes), (3, 170));
    assert_eq!(h.expirable_snapshots, 1);
    assert_eq!((h.expirable_files, h.expirable_bytes), (1, 70));
    assert_eq!((h.manifests, h.manifest_bytes), (3, 5000));
    assert_eq!((h.metadata_json_files, h.metadata_json_bytes), (2, 11));
    assert_eq!(h.metadata_log_entries, 1);
    assert_eq!(h.refs, ["main -> 2", "tag-b -> 1"]);
    assert_eq!(h.snapshots, 2);
    assert_eq!(r.storage.unreferenced_files, 1);
    assert_eq!(
        r.storage.sample_unreferenced,
        ["/w/ns/t/metadata/v1.metadata.json"]
    );
    assert_eq!(
        r.storage.unreferenced_by_age[3],
        (">= 3 d".to_string(), 1, 5)
    );
    assert_eq!(r.totals.data_files, 1);
    assert_eq!(r.partitions[0].files_under_min, 1);
    // One row per observation, whether or not it holds.
    assert_eq!(r.observations.len(), 11);
    let unref = r
        .observations
        .iter()
        .find(|o| o.id == "unreferenced-files")
        .unwrap();
    assert!(unref.holds);
    assert_eq!(
        unref.action.as_deref(),
        Some("floe remove-orphan-files ns.t --older-than 3d --dry-run")
    );
}

#[test]
fn a_failed_listing_is_reported_and_sizes_nothing() {
    let mut f = facts();
    f.only_old = vec![("/w/ns/t/metadata/snap-1.avro".to_string(), None)];
    f.listing = Err("permission denied".to_string());
    let r = report(f);
    assert_eq!(r.storage.skipped.as_deref(), Some("permission denied"));
    assert_eq!(r.storage.listed_files, 0);
    assert!(r.storage.unreferenced_by_age.is_empty());
    assert_eq!((r.history.only_old_files, r.history.only_old_bytes), (1, 0));
    assert_eq!(r.history.metadata_json_files, 0);
    // No expiry preview: nothing expirable.
    assert_eq!(r.history.expirable_snapshots, 0);
    let unref = r
        .observations
        .iter()
        .find(|o| o.id == "unreferenced-files")
        .unwrap();
    assert!(!unref.holds);
    assert_eq!(unref.evidence, "storage not listed: permission denied");
}

#[test]
fn many_small_files_in_an_active_partition_ask_for_compaction() {
    let mut f = facts();
    f.snapshots = (1..=20)
        .map(|i| snap(i, T0 - i * 60_000, 2, 2 * KIB))
        .collect();
    f.live = (1..=20)
        .flat_map(|i| [data("p=a", KIB, i), data("p=a", KIB, i)])
        .collect();
    let r = report(f);
    assert_eq!(r.totals.files_under_min, 40);
    assert_eq!(r.totals.active_partitions, 1);
    assert_eq!(r.history.avg_files_per_commit, 2.0);
    let small = r
        .observations
        .iter()
        .find(|o| o.id == "small-files-in-active-partitions")
        .unwrap();
    assert!(small.holds, "{}", small.evidence);
    assert!(small
        .action
        .as_deref()
        .unwrap()
        .starts_with("floe compact ns.t"));
}

#[test]
fn a_burst_of_commits_within_seconds_has_a_rate() {
    // 41 commits 250 ms apart: 40 intervals in 10 s, 14,400 per hour (was "0.0 commits/h").
    let snaps: Vec<SnapshotFacts> = (0..41).map(|i| snap(i + 1, T0 + i * 250, 1, KIB)).collect();
    let h = commit_history(&snaps);
    assert_eq!(h.recent_span_ms, 10_000);
    assert!(
        (h.commits_per_hour - 14_400.0).abs() < 1e-6,
        "{}",
        h.commits_per_hour
    );
    assert_eq!(
        super::super::render::commit_rate(&h),
        "41 commits in 10 s (14,400/h)"
    );
    // Commits sharing one millisecond have no rate, and say so.
    let same: Vec<SnapshotFacts> = (0..3).map(|i| snap(i + 1, T0, 1, KIB)).collect();
    let h = commit_history(&same);
    assert_eq!(h.commits_per_hour, 0.0);
    assert_eq!(
        super::super::render::commit_rate(&h),
        "3 commits within 1 ms"
    );
    // Slow tables keep their hourly rate: 5 commits over 2 hours.
    let slow: Vec<SnapshotFacts> = (0..5)
        .map(|i| snap(i + 1, T0 + i * HOUR_MS / 2, 1, KIB))
        .collect();
    let h = commit_history(&slow);
    assert!((h.commits_per_hour - 2.0).abs() < 1e-9);
    assert_eq!(
        super::super::render::commit_rate(&h),
        "5 commits in 2.0 h (2.0/h)"
    );
}

// --- over-partitioning ---------------------------------------------------------------------

const DAY_MS: i64 = 24 * HOUR_MS;

fn field(source: &str, transform: iceberg::spec::Transform) -> SpecField {
    SpecField {
        source: source.to_string(),
        transform,
    }
}

/// A data file of the current spec with partition `values`.
fn part_file<S: AsRef<str>>(values: &[S], size: u64, snapshot_id: i64) -> LiveEntry {
    let values: Vec<String> = values.iter().map(|v| v.as_ref().to_string()).collect();
    let mut entry = data(&values.join("/"), size, snapshot_id);
    entry.values = values;
    entry
}

/// `n` hourly partitions, one commit each (commit i writes hour i, one hour apart, the newest
/// now), `size` bytes each.
fn hourly(n: i64, size: u64) -> Facts {
    let mut f = facts();
    f.spec = vec![field("ts", iceberg::spec::Transform::Hour)];
    f.snapshots = (1..=n)
        .map(|i| snap(i, T0 - (n - i) * HOUR_MS, 1, size))
        .collect();
    f.live = (1..=n)
        .map(|i| {
            part_file(
                &[&format!("2023-11-{:02}-{:02}", 1 + i / 24, i % 24)],
                size,
                i,
            )
        })
        .collect();
    f
}

fn finding(r: &Report) -> &super::super::Observation {
    r.observations
        .iter()
        .find(|o| o.id == "over-partitioned")
        .unwrap()
}

#[test]
fn hour_partitions_with_little_data_suggest_day() {
    // Target 8 MiB: the finding holds under 1 MiB per partition, a suggestion aims at 2 MiB.
    let r = report(hourly(48, 100 * KIB));
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(o.holds, "{}", o.evidence);
    assert_eq!(o.basis, "closed-partitions");
    assert_eq!(o.window, "hour");
    assert_eq!(o.spec, "hour(ts)");
    assert_eq!(
        o.partitions, 38,
        "the 10 partitions of the last 10 commits are open"
    );
    assert_eq!(o.bytes_per_partition_median, 100 * KIB);
    assert_eq!(o.bytes_per_partition_per_commit_median, 100 * KIB);
    assert_eq!((o.fire_below, o.aim), (MIB, 2 * MIB));
    assert!((o.windows_for_target - 81.92).abs() < 1e-9);
    // x24 gives 2.3 MiB >= 2 MiB: day is the finest coarsening that reaches the aim.
    assert_eq!(o.suggested_spec.as_deref(), Some("day(ts)"));
    assert_eq!(o.suggested_bytes_per_partition, Some(2400 * KIB));
    let alts: Vec<&str> = o.alternatives.iter().map(|a| a.spec.as_str()).collect();
    assert_eq!(alts, ["day(ts)", "month(ts)", "year(ts)"]);
    assert_eq!(
        o.commands,
        [
            "floe table evolve-partition ns.t --spec 'day(ts)'",
            "floe compact ns.t"
        ]
    );
    assert!(
        o.evidence.starts_with(
            "partition spec is finer than the data rate: hour(ts) partitions receive 100.0 KiB each (median over 38 closed partitions"
        ),
        "{}",
        o.evidence
    );
    assert!(o
        .evidence
        .contains("a target-size file (8.0 MiB) would need 82 hours of data"));
    assert!(
        o.evidence.contains("day(ts) ~2.3 MiB, month(ts) ~71.3 MiB"),
        "{}",
        o.evidence
    );
    let obs = finding(&r);
    assert!(obs.holds);
    assert_eq!(
        obs.action.as_deref(),
        Some("floe table evolve-partition ns.t --spec 'day(ts)' && floe compact ns.t")
    );
    let text = super::super::render::text(&r);
    assert!(text.contains("OVER-PARTITIONED"), "{text}");
    assert!(text.contains("run: floe table evolve-partition ns.t --spec 'day(ts)'"));
    let html = super::super::render::html(&r);
    assert!(html.contains("<h2>Partitioning</h2>") && html.contains("month(ts)"));

    // Even less data: a day is not enough, a month is.
    let r = report(hourly(48, 4 * KIB));
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(o.holds);
    assert_eq!(o.suggested_spec.as_deref(), Some("month(ts)"));
}

#[test]
fn healthy_partitions_are_not_over_partitioned() {
    let r = report(hourly(48, 3 * MIB));
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(!o.holds, "{}", o.evidence);
    assert_eq!(o.bytes_per_partition_median, 3 * MIB);
    assert!(o.suggested_spec.is_none() && o.commands.is_empty());
    assert!(
        o.evidence.contains("the spec fits the data rate"),
        "{}",
        o.evidence
    );
    assert!(!finding(&r).holds);
    assert!(finding(&r).action.is_none());
    // An unpartitioned table has no finding at all.
    let mut f = facts();
    f.snapshots = vec![snap(1, T0, 1, KIB)];
    f.live = vec![data("unpartitioned", KIB, 1)];
    let r = report(f);
    assert!(r.over_partitioned.is_none());
    assert!(!finding(&r).holds);
}

#[test]
fn young_active_partitions_are_not_over_partitioned() {
    // Six hour partitions, all written by the last commits: still filling, only young.
    let r = report(hourly(6, KIB));
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(!o.holds, "{}", o.evidence);
    assert_eq!(o.partitions, 0);
    assert!(o.evidence.contains("too young to judge"), "{}", o.evidence);
    assert!(!finding(&r).holds);
    // Without a time transform, under an hour of history is too young for a daily rate.
    let mut f = facts();
    f.spec = vec![field("id", iceberg::spec::Transform::Bucket(64))];
    f.snapshots = vec![snap(1, T0 - 60_000, 64, 64 * KIB)];
    f.live = (0..64)
        .map(|b| part_file(&[&b.to_string()], KIB, 1))
        .collect();
    let r = report(f);
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(!o.holds);
    assert_eq!(o.basis, "daily-rate");
    assert!(o.evidence.contains("too young to judge"), "{}", o.evidence);
}

/// A `bucket(64, id)` table written for 4 days, each bucket holding `per_bucket` bytes.
fn bucketed(per_bucket: u64) -> Facts {
    let mut f = facts();
    f.spec = vec![field("id", iceberg::spec::Transform::Bucket(64))];
    f.snapshots = (0..8)
        .map(|i| {
            snap(
                i + 1,
                T0 - 4 * DAY_MS + i * DAY_MS / 2,
                64,
                64 * per_bucket / 8,
            )
        })
        .collect();
    f.live = (0..64)
        .flat_map(|b| (1..=8).map(move |s| part_file(&[&b.to_string()], per_bucket / 8, s)))
        .collect();
    f
}

#[test]
fn few_bytes_per_bucket_suggest_fewer_buckets() {
    // 2400 KiB per bucket over 4 days: 600 KiB per bucket per day, under 1 MiB.
    let r = report(bucketed(2400 * KIB));
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(o.holds, "{}", o.evidence);
    assert_eq!(o.basis, "daily-rate");
    assert_eq!(o.window, "day");
    assert_eq!(o.partitions, 64);
    assert_eq!(o.bytes_per_partition_median, 600 * KIB);
    assert_eq!(o.bytes_per_partition_per_commit_median, 300 * KIB);
    // x4 (64 -> 16 buckets) reaches 2 MiB; 32 buckets (x2) does not.
    assert_eq!(o.suggested_spec.as_deref(), Some("bucket(16, id)"));
    assert_eq!(o.suggested_bytes_per_partition, Some(2400 * KIB));
    assert_eq!(o.alternatives[0].spec, "bucket(32, id)");
    assert_eq!(
        o.alternatives.last().unwrap().spec,
        "",
        "dropping the field"
    );
    assert!(o.evidence.contains("per day each"), "{}", o.evidence);
    // So little that no bucket count is enough: unpartitioned, the coarsest.
    let r = report(bucketed(8 * KIB));
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(o.holds);
    assert_eq!(o.suggested_spec.as_deref(), Some(""));
    assert_eq!(o.commands[0], "floe table evolve-partition ns.t --spec ''");
    assert!(
        o.evidence.contains("the coarsest sensible one"),
        "{}",
        o.evidence
    );
}

#[test]
fn several_fields_multiply_their_cardinalities() {
    // day(ts) x identity(name) with 10 names: 50 KiB per (day, name) partition over 20 closed
    // days. Dropping name merges 10, a month ~30: only both together reach 2 MiB (x304), and
    // they beat year alone (x365).
    let mut f = facts();
    f.spec = vec![
        field("ts", iceberg::spec::Transform::Day),
        field("name", iceberg::spec::Transform::Identity),
    ];
    f.snapshots = (1..=30)
        .map(|d| snap(d, T0 - (30 - d) * DAY_MS, 10, 500 * KIB))
        .collect();
    f.live = (1..=30)
        .flat_map(|d| {
            (0..10).map(move |n| {
                part_file(
                    &[&format!("2023-10-{d:02}"), &format!("name-{n}")],
                    50 * KIB,
                    d,
                )
            })
        })
        .collect();
    let r = report(f.clone());
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(o.holds, "{}", o.evidence);
    assert_eq!(o.partitions, 200, "20 closed days x 10 names");
    assert_eq!(o.spec, "day(ts), name");
    assert_eq!(o.suggested_spec.as_deref(), Some("month(ts)"));
    let alts: Vec<&str> = o.alternatives.iter().map(|a| a.spec.as_str()).collect();
    assert_eq!(alts, ["day(ts)", "month(ts), name", "year(ts), name"]);
    // A low-cardinality identity field is kept: with 3 names it is never dropped.
    f.live
        .retain(|e| ["name-0", "name-1", "name-2"].contains(&e.values[1].as_str()));
    let r = report(f);
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(o.holds);
    assert!(o.alternatives.iter().all(|a| a.spec.contains("name")));
    assert_eq!(o.suggested_spec.as_deref(), Some("year(ts), name"));
}

fn point(id: i64, timestamp_ms: i64, op: &str, files: u64, bytes: u64) -> CommitPoint {
    CommitPoint {
        snapshot_id: id,
        timestamp_ms,
        operation: op.to_string(),
        added_data_files: files,
        added_bytes: bytes,
    }
}

#[test]
fn the_writer_side_measures_pace_commit_duration_and_freshness() {
    // Appends every 2 s (a compaction between them does not count), 1 MiB files.
    let recent = vec![
        point(1, T0, "append", 2, 2 * MIB),
        point(2, T0 + 2_000, "append", 1, MIB),
        point(3, T0 + 3_000, "replace", 1, 3 * MIB),
        point(4, T0 + 4_000, "append", 1, MIB),
        point(5, T0 + 7_000, "append", 1, MIB),
    ];
    // Each commit's metadata.json lands 40, 60 and 90 ms after its snapshot (commit 5's file
    // is no longer listed); another file has the compaction's timestamp.
    let at = |ms: i64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms as u64);
    let files = vec![
        (T0, "/w/ns/t/metadata/00001.metadata.json".to_string()),
        (
            T0 + 2_000,
            "/w/ns/t/metadata/00002.metadata.json".to_string(),
        ),
        (
            T0 + 3_000,
            "/w/ns/t/metadata/00003.metadata.json".to_string(),
        ),
        (
            T0 + 4_000,
            "/w/ns/t/metadata/00004.metadata.json".to_string(),
        ),
        (
            T0 + 7_000,
            "/w/ns/t/metadata/00005.metadata.json".to_string(),
        ),
    ];
    let listed_files = vec![
        listed(
            "file:///w/ns/t/metadata/00001.metadata.json",
            1,
            at(T0 + 40),
        ),
        listed(
            "file:///w/ns/t/metadata/00002.metadata.json",
            1,
            at(T0 + 2_060),
        ),
        listed(
            "file:///w/ns/t/metadata/00003.metadata.json",
            1,
            at(T0 + 3_500),
        ),
        listed(
            "file:///w/ns/t/metadata/00004.metadata.json",
            1,
            at(T0 + 4_090),
        ),
    ];
    let w = writer_side(&recent, &files, &listed_files, T0 + 10_000).unwrap();
    assert_eq!(w.writing_commits, 4);
    // Intervals 2, 2, 3 s: the median is 2 s.
    assert_eq!(w.commit_interval_ms, Some(2_000));
    assert_eq!(w.file_bytes, MIB);
    assert_eq!(w.files_per_commit, 1.25);
    assert_eq!(w.commit_durations_measured, 3);
    assert_eq!(w.commit_duration_ms, Some(60));
    assert_eq!(w.freshness_ms, Some(3_000));

    // A storage that reports whole seconds measures no duration.
    let coarse: Vec<ListedFile> = listed_files
        .iter()
        .map(|f| {
            let s = f
                .modified
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            listed(&f.path, 1, SystemTime::UNIX_EPOCH + Duration::from_secs(s))
        })
        .collect();
    let w = writer_side(&recent, &files, &coarse, T0 + 10_000).unwrap();
    assert_eq!(
        (w.commit_duration_ms, w.commit_durations_measured),
        (None, 0)
    );
    // One writing commit: no interval; none: no writer side.
    let one = writer_side(&recent[..1], &files, &listed_files, T0).unwrap();
    assert_eq!(one.commit_interval_ms, None);
    assert!(writer_side(&recent[2..3], &files, &listed_files, T0).is_none());
}

#[test]
fn scan_requests_count_footers_row_groups_columns_and_vectors() {
    let mut f = facts();
    f.manifest_lengths = vec![Some(1), Some(1), Some(1)];
    // Three data files: 4 row groups recorded, none recorded (300 MiB: 3 estimated), one.
    let mut a = data("p=1", MIB, 1);
    a.row_groups = Some(4);
    let b = data("p=1", 300 * MIB, 1);
    let mut c = data("p=2", MIB, 1);
    c.row_groups = Some(1);
    // A position delete file of one row group and a deletion vector.
    let mut d = delete("p=1", KIB, 1);
    d.row_groups = Some(1);
    let mut v = delete("p=2", KIB, 1);
    v.vector = true;
    f.live = vec![a, b, c, d, v];
    let r = report(f);
    let q = &r.scan_requests;
    assert_eq!(q.metadata, 2 + 3);
    assert_eq!(q.row_groups, 4 + 3 + 1);
    assert_eq!(q.columns, 3);
    // Parquet files: one footer request and one per row group at the fewest...
    assert_eq!(q.min, 5 + (1 + 4) + (1 + 3) + (1 + 1) + (1 + 1) + 1);
    // ... two footer requests and one per column chunk at the most.
    assert_eq!(q.max, 5 + (2 + 12) + (2 + 9) + (2 + 3) + (2 + 3) + 1);
    // Compacted to 8 MiB: p=1 (301 MiB) is 38 files, p=2 (1 MiB) one; one row group each.
    assert_eq!(q.compacted_files, 38 + 1);
    assert_eq!(q.compacted_min, 5 + 39 * 2);
    assert_eq!(q.compacted_max, 5 + 39 * (2 + 3));
}

#[test]
fn retainers_split_history_between_refs_writers_and_the_window() {
    use crate::operations::diagnose::facts::retainers;
    let w = crate::table::watermarks::Watermark {
        kind: "floe",
        id: "w1".to_string(),
        snapshot_id: 3,
        timestamp_ms: T0,
        position: Default::default(),
    };
    let refs = vec![
        ("main".to_string(), 5, "branch"),
        ("v1".to_string(), 2, "tag"),
        ("audit".to_string(), 4, "branch"),
    ];
    // Kept: 2..=5 and 1 (young); 5 is current.
    let r = retainers(&[1, 2, 3, 4, 5], Some(5), &refs, std::slice::from_ref(&w));
    let names: Vec<(&str, &str, &[i64])> = r
        .iter()
        .map(|(n, k, ids)| (n.as_str(), *k, ids.as_slice()))
        .collect();
    assert_eq!(
        names,
        [
            ("branch:audit", "branch", &[4][..]),
            ("tag:v1", "tag", &[2][..]),
            ("writer:floe:w1", "writer", &[3][..]),
            ("retention-window", "window", &[1][..]),
        ]
    );
    // Nothing kept beyond the named snapshots: no window.
    let r = retainers(&[2, 3, 5], Some(5), &refs[..2], &[w]);
    assert!(r.iter().all(|(_, k, _)| *k != "window"), "{r:?}");
}

#[test]
fn retained_files_are_counted_per_retainer_with_what_only_it_keeps() {
    let mut f = facts();
    f.retainers = vec![
        RetainerFacts {
            retainer: "tag:v1".to_string(),
            kind: "tag",
            snapshots: 1,
            held: vec![("/a".into(), Some(MIB)), ("/b".into(), None)],
            exclusive: vec![("/b".into(), None)],
        },
        RetainerFacts {
            retainer: "retention-window".to_string(),
            kind: "window",
            snapshots: 4,
            held: vec![("/a".into(), Some(MIB))],
            exclusive: vec![],
        },
    ];
    // The manifest list /b has no size in the metadata: the listing gives it.
    f.listing = Ok(vec![listed("file:///b", 7 * KIB, now())]);
    let r = report(f);
    let by = &r.history.retained_by;
    assert_eq!(by.len(), 2);
    assert_eq!(
        (
            by[0].held_files,
            by[0].held_bytes,
            by[0].exclusive_files,
            by[0].exclusive_bytes
        ),
        (2, MIB + 7 * KIB, 1, 7 * KIB)
    );
    assert_eq!(
        (by[1].snapshots, by[1].held_files, by[1].exclusive_files),
        (4, 1, 0)
    );
}
