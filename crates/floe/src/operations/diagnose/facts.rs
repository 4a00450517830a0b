//! What `diagnose` reads before computing anything (`super::gather`, the only I/O), as plain
//! facts, and the few questions every computing file asks of them (medians, the active
//! snapshots).

use std::collections::HashSet;
use std::time::SystemTime;

use iceberg::spec::Transform;

use super::model::{CommitPoint, Thresholds, ACTIVE_COMMITS};
use crate::storage::listing::ListedFile;
use crate::table::watermarks::Watermark;

/// One snapshot of the table, as diagnose reads it.
#[derive(Debug, Clone)]
pub(crate) struct SnapshotFacts {
    pub snapshot_id: i64,
    pub timestamp_ms: i64,
    pub sequence_number: i64,
    pub operation: String,
    /// `added-data-files` of the summary (0 when absent or not a number).
    pub added_data_files: u64,
    /// `added-files-size` of the summary (0 when absent or not a number).
    pub added_bytes: u64,
}

/// One live entry (data or delete file) of the current snapshot.
#[derive(Debug, Clone)]
pub(crate) struct LiveEntry {
    pub spec_id: i32,
    /// The partition as a path (`day=2024-01-01`), or `unpartitioned`.
    pub partition: String,
    /// A `--where` filter selecting exactly this partition, when there is one.
    pub filter: Option<String>,
    /// A data file (false: a position or equality delete file, or a deletion vector).
    pub data: bool,
    /// A deletion vector (format v3); its size is its blob's, not its Puffin file's.
    pub vector: bool,
    /// An equality delete file.
    pub equality: bool,
    pub size: u64,
    pub records: u64,
    /// The snapshot that added the file.
    pub snapshot_id: i64,
    /// The partition's value of each field of the current spec, as text (`null` for none);
    /// empty for files of other specs.
    pub values: Vec<String>,
    /// Row groups of a Parquet file, from its split offsets (`None`: not recorded).
    pub row_groups: Option<u64>,
}

/// A retainer of history and the files it keeps (see [`super::model::Retainer`]).
#[derive(Debug, Clone)]
pub(crate) struct RetainerFacts {
    pub retainer: String,
    pub kind: &'static str,
    pub snapshots: u64,
    pub held: Vec<SizedPath>,
    pub exclusive: Vec<SizedPath>,
}

/// A reachable file: its path and its size when the metadata records one.
pub(crate) type SizedPath = (String, Option<u64>);

/// What `expire-snapshots` with the table's own settings would remove now.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expirable {
    pub snapshots: u64,
    /// Files only the expired snapshots reach.
    pub files: Vec<SizedPath>,
}

/// Everything the report is computed from, read by `super::gather`.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// `ns.table`.
    pub table: String,
    pub location: String,
    /// The table's format version (1, 2 or 3).
    pub format_version: u8,
    pub thresholds: Thresholds,
    /// The current (default) partition spec: its id and fields.
    pub spec_id: i32,
    pub spec: Vec<SpecField>,
    /// `write.metadata.previous-versions-max`.
    pub previous_versions_max: u64,
    /// Every snapshot, in any order.
    pub snapshots: Vec<SnapshotFacts>,
    pub metadata_log_entries: u64,
    /// Live entries of the current snapshot.
    pub live: Vec<LiveEntry>,
    /// Ref name and the snapshot it points at.
    pub refs: Vec<(String, i64)>,
    /// Files some snapshot reaches but neither the current snapshot nor a ref head does.
    pub only_old: Vec<SizedPath>,
    /// `None` when the expiry preview failed.
    pub expirable: Option<Expirable>,
    /// Lengths of the current snapshot's manifests.
    pub manifest_lengths: Vec<Option<u64>>,
    /// Every path a snapshot or the metadata log references, as the metadata spells it.
    pub referenced: Vec<String>,
    /// One listing of the table location, or why it failed.
    pub listing: std::result::Result<Vec<ListedFile>, String>,
    pub writers: Vec<Watermark>,
    /// What keeps history, and what each keeps.
    pub retainers: Vec<RetainerFacts>,
    /// Every metadata.json the table knows (the metadata log, then the current file), with the
    /// `last-updated-ms` it was written with.
    pub metadata_files: Vec<(i64, String)>,
    /// Leaf (primitive) columns of the current schema.
    pub leaf_columns: u64,
    /// `write.parquet.row-group-size-bytes`: row groups of a file that records no split
    /// offsets are estimated from its size.
    pub row_group_bytes: u64,
    /// When the facts were read: file ages and the report time are taken against it.
    pub now: SystemTime,
}

/// One field of the current partition spec.
#[derive(Debug, Clone)]
pub(crate) struct SpecField {
    /// The source column's name.
    pub source: String,
    pub transform: Transform,
}

/// The middle element of `sorted` (0 when empty).
pub(crate) fn median(sorted: &[u64]) -> u64 {
    if sorted.is_empty() {
        0
    } else {
        sorted[sorted.len() / 2]
    }
}

/// `snapshots` oldest first (by timestamp, then sequence number).
pub(crate) fn by_time(snapshots: &[SnapshotFacts]) -> Vec<&SnapshotFacts> {
    let mut snaps: Vec<&SnapshotFacts> = snapshots.iter().collect();
    snaps.sort_by_key(|s| (s.timestamp_ms, s.sequence_number));
    snaps
}

/// The snapshots of the last [`ACTIVE_COMMITS`] commits that added data files.
pub(crate) fn active_snapshots(snapshots: &[SnapshotFacts]) -> HashSet<i64> {
    by_time(snapshots)
        .into_iter()
        .rev()
        .filter(|s| s.added_data_files > 0)
        .take(ACTIVE_COMMITS)
        .map(|s| s.snapshot_id)
        .collect()
}

/// Which snapshots each retainer of history keeps: each ref other than `main` (its head),
/// each writer watermark (its snapshot), and the retention window (the other `kept`
/// snapshots: young enough, or among a branch's `min-snapshots-to-keep`). The current
/// snapshot is the table itself, no retainer. `refs` are (name, head, `branch` or `tag`).
pub(crate) fn retainers(
    kept: &[i64],
    current: Option<i64>,
    refs: &[(String, i64, &'static str)],
    writers: &[Watermark],
) -> Vec<(String, &'static str, Vec<i64>)> {
    let mut out = Vec::new();
    let mut named: HashSet<i64> = current.into_iter().collect();
    let mut refs: Vec<&(String, i64, &'static str)> = refs
        .iter()
        .filter(|(n, _, _)| n != iceberg::spec::MAIN_BRANCH)
        .collect();
    refs.sort();
    for (name, head, kind) in refs {
        named.insert(*head);
        out.push((format!("{kind}:{name}"), *kind, vec![*head]));
    }
    for w in writers {
        named.insert(w.snapshot_id);
        out.push((
            format!("writer:{}", w.writer()),
            "writer",
            vec![w.snapshot_id],
        ));
    }
    let window: Vec<i64> = kept
        .iter()
        .copied()
        .filter(|id| !named.contains(id))
        .collect();
    if !window.is_empty() {
        out.push(("retention-window".to_string(), "window", window));
    }
    out
}

/// The recent commits that wrote data: appends and overwrites that added data files.
pub(crate) fn writing(c: &&CommitPoint) -> bool {
    c.added_data_files > 0 && matches!(c.operation.as_str(), "append" | "overwrite")
}

/// What the writer's commits look like: how many, their median interval and the median size
/// of the files they add.
pub(crate) struct WriterPace {
    pub commits: usize,
    /// `None` under two commits.
    pub interval_ms: Option<i64>,
    pub file_bytes: u64,
    pub files_per_commit: f64,
}

/// The pace of `commits` (oldest first); `None` when there is none.
pub(crate) fn writer_pace(commits: &[&CommitPoint]) -> Option<WriterPace> {
    let mut intervals: Vec<i64> = commits
        .windows(2)
        .map(|w| (w[1].timestamp_ms - w[0].timestamp_ms).max(0))
        .collect();
    intervals.sort_unstable();
    let mut sizes: Vec<u64> = commits
        .iter()
        .map(|c| c.added_bytes / c.added_data_files.max(1))
        .collect();
    sizes.sort_unstable();
    let files: u64 = commits.iter().map(|c| c.added_data_files).sum();
    (!commits.is_empty()).then(|| WriterPace {
        commits: commits.len(),
        interval_ms: intervals.get(intervals.len() / 2).copied(),
        file_bytes: median(&sizes),
        files_per_commit: files as f64 / commits.len() as f64,
    })
}
