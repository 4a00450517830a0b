//! Unit tests of the observation table on synthetic reports.

use std::collections::BTreeMap;

use super::*;

const MIB: u64 = 1 << 20;

fn thresholds() -> Thresholds {
    Thresholds {
        target_file_size_bytes: 128 * MIB,
        min_file_size_bytes: 16 * MIB,
        min_input_files: 5,
    }
}

/// A partition of `files` data files, `small` of them under the minimum size.
fn part(name: &str, files: u64, small: u64, active: bool) -> PartitionHealth {
    PartitionHealth {
        partition: name.to_string(),
        spec_id: 0,
        filter: Some(format!("day = '{name}'")),
        data_files: files,
        records: files * 100,
        total_bytes: files * 64 * MIB,
        avg_bytes: 64 * MIB,
        median_bytes: 64 * MIB,
        files_under_min: small,
        files_under_target: small,
        delete_files: 0,
        delete_bytes: 0,
        delete_ratio: 0.0,
        deleted_rows: 0,
        deleted_row_ratio: 0.0,
        deletion_vectors: 0,
        position_delete_files: 0,
        equality_delete_files: 0,
        vector_deleted_rows: 0,
        vector_deleted_row_ratio: 0.0,
        active,
        last_added_ms: None,
    }
}

fn totals_of(parts: &[PartitionHealth]) -> Totals {
    Totals {
        partitions: parts.len() as u64,
        active_partitions: parts.iter().filter(|p| p.active).count() as u64,
        data_files: parts.iter().map(|p| p.data_files).sum(),
        data_bytes: parts.iter().map(|p| p.total_bytes).sum(),
        files_under_min: parts.iter().map(|p| p.files_under_min).sum(),
        files_under_target: parts.iter().map(|p| p.files_under_target).sum(),
        ..Default::default()
    }
}

/// A table with nothing wrong: big files, short history, no stray files.
struct Table {
    thresholds: Thresholds,
    totals: Totals,
    partitions: Vec<PartitionHealth>,
    history: History,
    storage: Storage,
    writers: Vec<Watermark>,
    previous_versions_max: u64,
}

impl Table {
    fn healthy() -> Self {
        let partitions = vec![
            part("2024-01-01", 8, 0, false),
            part("2024-01-02", 8, 1, true),
        ];
        Table {
            thresholds: thresholds(),
            totals: totals_of(&partitions),
            partitions,
            history: History {
                snapshots: 3,
                manifests: 2,
                manifest_bytes: 2 * MIB,
                metadata_json_files: 4,
                metadata_log_entries: 3,
                ..Default::default()
            },
            storage: Storage {
                listed_files: 30,
                unreferenced_by_age: vec![
                    ("< 1 h".to_string(), 0, 0),
                    ("1 h - 1 d".to_string(), 0, 0),
                    ("1 - 3 d".to_string(), 0, 0),
                    (">= 3 d".to_string(), 0, 0),
                ],
                ..Default::default()
            },
            writers: vec![],
            previous_versions_max: 100,
        }
    }

    fn with_partitions(mut self, partitions: Vec<PartitionHealth>) -> Self {
        self.totals = totals_of(&partitions);
        self.partitions = partitions;
        self
    }

    fn observe(&self) -> Vec<Observation> {
        observe(&Inputs {
            table: "ns.t",
            thresholds: &self.thresholds,
            totals: &self.totals,
            partitions: &self.partitions,
            history: &self.history,
            scan_requests: &ScanRequests::default(),
            storage: &self.storage,
            writers: &self.writers,
            previous_versions_max: self.previous_versions_max,
            over_partitioned: None,
        })
    }
}

fn holding(obs: &[Observation]) -> Vec<&'static str> {
    obs.iter().filter(|o| o.holds).map(|o| o.id).collect()
}

fn find<'a>(obs: &'a [Observation], id: &str) -> &'a Observation {
    obs.iter().find(|o| o.id == id).expect(id)
}

#[test]
fn a_healthy_table_has_no_observation() {
    let obs = Table::healthy().observe();
    assert_eq!(obs.len(), 11, "every row is reported");
    assert!(holding(&obs).is_empty(), "{:?}", holding(&obs));
    assert!(obs.iter().all(|o| o.action.is_none()));
    // The evidence is there even when nothing holds.
    assert!(find(&obs, "unreferenced-files")
        .evidence
        .starts_with("0 of 30 files under the table location"));
}

#[test]
fn an_empty_table_has_no_observation() {
    let t = Table {
        history: History::default(),
        storage: Storage::default(),
        ..Table::healthy()
    }
    .with_partitions(vec![]);
    assert!(holding(&t.observe()).is_empty());
}

#[test]
fn many_small_files_in_active_partitions_ask_for_compaction() {
    let mut t = Table::healthy().with_partitions(vec![
        part("2024-01-01", 8, 0, false),
        part("2024-01-02", 40, 30, true),
    ]);
    t.history.avg_files_per_commit = 12.0;
    t.history.avg_bytes_per_commit = (2 * MIB) as f64;
    let obs = t.observe();
    assert_eq!(holding(&obs), ["small-files-in-active-partitions"]);
    let o = find(&obs, "small-files-in-active-partitions");
    assert_eq!(
        o.evidence,
        "30 of 40 live data files in 1 active partition(s) are under 16.0 MiB (75%); \
         recent commits add 12.0 files / 2.0 MiB each; a full scan makes 0-0 object-store \
         requests, 0-0 once compacted to 0 files"
    );
    assert!(o
        .action
        .as_deref()
        .unwrap()
        .starts_with("floe compact ns.t  # then raise the writer's commit interval"));
}

#[test]
fn under_half_small_or_under_min_input_files_is_no_observation() {
    // 4 small files: under min-input-files (5).
    let t = Table::healthy().with_partitions(vec![part("a", 4, 4, true)]);
    assert!(holding(&t.observe()).is_empty());
    // 10 small of 30: a third.
    let t = Table::healthy().with_partitions(vec![part("a", 30, 10, true)]);
    assert!(holding(&t.observe()).is_empty());
}

#[test]
fn a_backlog_in_one_partition_names_it_in_the_command() {
    let t = Table::healthy().with_partitions(vec![
        part("2024-01-01", 100, 30, true),
        part("2024-01-02", 10, 1, true),
        part("2024-01-03", 10, 1, true),
        part("2024-01-04", 10, 0, true),
    ]);
    let obs = t.observe();
    let o = find(&obs, "uncompacted-files-in-few-partitions");
    assert!(o.holds, "{}", o.evidence);
    assert_eq!(
        o.action.as_deref(),
        Some("floe compact ns.t --where \"day = '2024-01-01'\"")
    );
    assert!(o.evidence.contains("worst: 2024-01-01 with 30 files"));
    // Fewer than four partitions: not "a few of many".
    let t = Table::healthy().with_partitions(vec![part("2024-01-01", 100, 30, true)]);
    assert!(!find(&t.observe(), "uncompacted-files-in-few-partitions").holds);
}

#[test]
fn inactive_partitions_with_small_files_are_compacted_one_at_a_time() {
    let mut quiet = part("2023-12-31", 20, 20, false);
    quiet.filter = None;
    let t = Table::healthy().with_partitions(vec![
        part("2024-01-01", 50, 0, true),
        part("2023-12-30", 12, 12, false),
        quiet,
    ]);
    let obs = t.observe();
    let o = find(&obs, "inactive-partitions-keep-small-files");
    assert!(o.holds);
    assert!(o
        .evidence
        .starts_with("2 partition(s) no recent commit wrote to hold 32 files"));
    // The worst one first; it has no filter, so the whole table.
    assert!(
        o.evidence.ends_with("worst: 2023-12-31 with 20"),
        "{}",
        o.evidence
    );
    assert_eq!(o.action.as_deref(), Some("floe compact ns.t"));
}

#[test]
fn old_files_held_by_history_ask_for_expiry() {
    let mut t = Table::healthy();
    t.history.only_old_files = 500;
    t.history.only_old_bytes = 10 * MIB;
    t.history.expirable_snapshots = 7;
    let o = find(&t.observe(), "history-retains-old-files").clone();
    assert!(o.holds);
    assert_eq!(o.action.as_deref(), Some("floe expire-snapshots ns.t"));

    // Nothing expirable under the table's retention: a dry run with a shorter one, its age
    // from the span of the history.
    t.history.expirable_snapshots = 0;
    t.history.oldest_ms = Some(0);
    t.history.newest_ms = Some(3 * 86_400_000);
    t.writers = vec![Watermark {
        kind: "floe",
        id: "w1".to_string(),
        snapshot_id: 9,
        timestamp_ms: 0,
        position: BTreeMap::new(),
    }];
    let o = find(&t.observe(), "history-retains-old-files").clone();
    assert_eq!(
        o.action.as_deref(),
        Some("floe expire-snapshots ns.t --older-than 1d --retain-last 1 --dry-run")
    );
    assert!(
        o.evidence.ends_with("; writer watermarks kept: floe:w1"),
        "{}",
        o.evidence
    );
    t.history.newest_ms = Some(3 * 3_600_000);
    let o = find(&t.observe(), "history-retains-old-files").clone();
    assert!(o.action.unwrap().contains("--older-than 1h"));
}

#[test]
fn few_old_files_are_not_a_history_problem() {
    let mut t = Table::healthy();
    // 16 live files of 64 MiB: 3 old small files are neither more files nor half the bytes.
    t.history.only_old_files = 3;
    t.history.only_old_bytes = 3 * MIB;
    assert!(!find(&t.observe(), "history-retains-old-files").holds);
}

#[test]
fn small_delete_files_ask_for_a_delete_rewrite() {
    let mut t = Table::healthy();
    t.totals.delete_files = 10;
    t.totals.delete_bytes = 10 * 4096;
    let obs = t.observe();
    let o = find(&obs, "small-delete-files-dominate");
    assert!(o.holds);
    assert_eq!(
        o.evidence,
        "10 live delete files (average 4.0 KiB) for 16 data files"
    );
    assert_eq!(
        o.action.as_deref(),
        Some(
            "floe compact ns.t --option delete-file-threshold=1 --option remove-dangling-deletes=true  \
             # or, leaving data files as they are: floe rewrite-position-delete-files ns.t"
        )
    );
    // Big delete files are not the problem.
    t.totals.delete_bytes = 10 * 32 * MIB;
    assert!(!find(&t.observe(), "small-delete-files-dominate").holds);
}

#[test]
fn unreferenced_files_by_age_pick_the_orphan_command() {
    let mut t = Table::healthy();
    t.storage.unreferenced_files = 3;
    t.storage.unreferenced_bytes = 3 * MIB;
    t.storage.unreferenced_by_age[0] = ("< 1 h".to_string(), 3, 3 * MIB);
    let o = find(&t.observe(), "unreferenced-files").clone();
    assert!(o.holds);
    assert_eq!(
        o.action.as_deref(),
        Some("floe remove-orphan-files ns.t --dry-run  # all are under 1 h old: a writer may still commit them")
    );
    assert!(o.evidence.ends_with(
        "by age: < 1 h: 3 (3.0 MiB), 1 h - 1 d: 0 (0 B), 1 - 3 d: 0 (0 B), >= 3 d: 0 (0 B)"
    ));
    t.storage.unreferenced_by_age[0].1 = 2;
    t.storage.unreferenced_by_age[3].1 = 1;
    let o = find(&t.observe(), "unreferenced-files").clone();
    assert_eq!(
        o.action.as_deref(),
        Some("floe remove-orphan-files ns.t --older-than 3d --dry-run")
    );
    // Storage not listed: nothing is claimed.
    t.storage.skipped = Some("access denied".to_string());
    let o = find(&t.observe(), "unreferenced-files").clone();
    assert!(!o.holds);
    assert_eq!(o.evidence, "storage not listed: access denied");
}

#[test]
fn many_small_manifests_ask_for_a_manifest_rewrite() {
    let mut t = Table::healthy();
    t.history.manifests = 12;
    t.history.manifest_bytes = 12 * 8192;
    let o = find(&t.observe(), "many-small-manifests").clone();
    assert!(o.holds);
    assert_eq!(o.evidence, "12 manifests, average 8.0 KiB");
    assert_eq!(o.action.as_deref(), Some("floe rewrite-manifests ns.t"));
    // Nine small ones are fine.
    t.history.manifests = 9;
    assert!(!find(&t.observe(), "many-small-manifests").holds);
}

#[test]
fn metadata_files_beyond_the_log_ask_for_cleanup() {
    let mut t = Table::healthy();
    t.history.metadata_log_entries = 5;
    // log + current + 10 of slack = 16: not more.
    t.history.metadata_json_files = 16;
    assert!(!find(&t.observe(), "old-metadata-files").holds);
    t.history.metadata_json_files = 17;
    let o = find(&t.observe(), "old-metadata-files").clone();
    assert!(o.holds);
    assert_eq!(o.action.as_deref(), Some("floe clean-metadata ns.t"));
    // A low previous-versions-max counts too.
    t.history.metadata_log_entries = 100;
    t.history.metadata_json_files = 20;
    t.previous_versions_max = 2;
    assert!(find(&t.observe(), "old-metadata-files").holds);
}

#[test]
fn bytes_are_human_readable() {
    assert_eq!(bytes(0), "0 B");
    assert_eq!(bytes(1023), "1023 B");
    assert_eq!(bytes(1024), "1.0 KiB");
    assert_eq!(bytes(1536), "1.5 KiB");
    assert_eq!(bytes(5 * MIB), "5.0 MiB");
    assert_eq!(bytes(3 * 1024 * MIB), "3.0 GiB");
    assert_eq!(bytes(1024 * 1024 * MIB), "1.0 TiB");
    // TiB is the largest unit.
    assert_eq!(bytes(u64::MAX), "16777216.0 TiB");
}

#[test]
fn pct_of_nothing_is_zero() {
    assert_eq!(pct(1, 0), 0.0);
    assert_eq!(pct(1, 4), 25.0);
}

fn commit(
    id: i64,
    at_s: i64,
    op: &str,
    files: u64,
    bytes_each: u64,
) -> super::super::model::CommitPoint {
    super::super::model::CommitPoint {
        snapshot_id: id,
        timestamp_ms: at_s * 1000,
        operation: op.to_string(),
        added_data_files: files,
        added_bytes: files * bytes_each,
    }
}

#[test]
fn a_writer_committing_small_files_gets_the_interval_that_fixes_them() {
    let mut t = Table::healthy();
    // Every 5 s, 2 files of 1 MiB: 16 MiB files need 80 s, 128 MiB files 640 s.
    t.history.recent = (0..20)
        .map(|k| commit(k, k * 5, "append", 2, MIB))
        .collect();
    let obs = t.observe();
    let o = find(&obs, "writer-makes-small-files");
    assert!(o.holds, "{o:?}");
    assert!(o.evidence.contains("one every 5.0 s"), "{}", o.evidence);
    assert!(
        o.evidence.contains("at a commit interval of 80 s"),
        "{}",
        o.evidence
    );
    assert!(o.evidence.contains("at 640 s"), "{}", o.evidence);
    let action = o.action.as_deref().unwrap();
    assert!(action.contains("--commit-interval 80s"), "{action}");
    assert!(action.contains("--maintain"), "{action}");
    // No compaction among them: nothing regrows.
    assert!(!find(&obs, "small-files-regrow-after-compaction").holds);
}

#[test]
fn small_files_after_the_last_compaction_name_the_writer() {
    let mut t = Table::healthy();
    let mut recent: Vec<_> = (0..8).map(|k| commit(k, k * 5, "append", 1, MIB)).collect();
    recent.push(commit(100, 41, "replace", 1, 8 * MIB));
    recent.extend((0..6).map(|k| commit(200 + k, 45 + k * 5, "append", 1, MIB)));
    t.history.recent = recent;
    let obs = t.observe();
    let o = find(&obs, "small-files-regrow-after-compaction");
    assert!(o.holds, "{o:?}");
    assert!(o.evidence.contains("snapshot 100"), "{}", o.evidence);
    assert!(
        o.evidence.contains("6 writing commits added 6 files"),
        "{}",
        o.evidence
    );
}

#[test]
fn big_files_or_too_few_commits_are_no_writer_observation() {
    let mut t = Table::healthy();
    t.history.recent = (0..20)
        .map(|k| commit(k, k * 60, "append", 1, 64 * MIB))
        .collect();
    assert!(!find(&t.observe(), "writer-makes-small-files").holds);
    t.history.recent = (0..3).map(|k| commit(k, k * 5, "append", 1, MIB)).collect();
    let obs = t.observe();
    let o = find(&obs, "writer-makes-small-files");
    assert!(!o.holds && o.evidence.contains("too few"), "{o:?}");
}
