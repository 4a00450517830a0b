//! What `diagnose` reads before computing anything (`super::gather`, the only I/O), as plain
//! facts, and the few questions every computing file asks of them (medians, the active
//! snapshots).

use std::collections::HashSet;
use std::time::SystemTime;

use iceberg::spec::Transform;

use super::model::{Thresholds, ACTIVE_COMMITS};
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
