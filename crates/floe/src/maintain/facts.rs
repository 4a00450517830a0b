//! What the triggers look at, gathered from a table's metadata alone (no manifest is read):
//! the commits since the last compaction and what they added, from the snapshot summaries of
//! the current branch.
//!
//! [`compute`] is the pure part, over the branch's snapshots as plain rows; [`gather`] is the
//! thin adapter from a loaded [`Table`]. Manifest facts ([`ManifestFacts`]) need one manifest
//! list read and one listing of `metadata/`: the I/O step of `floe maintain` fills them in.

use std::collections::HashMap;

use iceberg::table::Table;

/// One snapshot of the current branch, as [`compute`] reads it: its timestamp (ms since the
/// epoch), its summary `operation` (`append`, `overwrite`, `delete`, `replace`) and the other
/// summary entries (`added-data-files`, ...).
pub type SnapshotRow<'a> = (i64, &'a str, &'a HashMap<String, String>);

/// Summary key (Iceberg's `SnapshotSummary`): data files a commit added.
pub const ADDED_DATA_FILES: &str = "added-data-files";
/// Summary key: bytes of the files a commit added (data and delete files).
pub const ADDED_FILES_SIZE: &str = "added-files-size";
/// Summary key: position delete files a commit added.
pub const ADDED_POS_DELETE_FILES: &str = "added-position-delete-files";
/// Summary key: equality delete files a commit added.
pub const ADDED_EQ_DELETE_FILES: &str = "added-equality-delete-files";

/// Summary keys that show a `replace` snapshot changed data or delete files (a compaction),
/// not only manifests (Iceberg's `rewrite_manifests`, also a `replace`).
const FILE_CHANGES: [&str; 4] = [
    ADDED_DATA_FILES,
    "deleted-data-files",
    "added-delete-files",
    "removed-delete-files",
];

/// The manifests of the current snapshot and the metadata files on storage: gathered by the
/// I/O step (one manifest list read, one listing), absent until then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestFacts {
    /// The size of every manifest the current snapshot's manifest list names.
    pub manifest_bytes: Vec<u64>,
    /// `*.metadata.json` files under the table's `metadata/` directory.
    pub metadata_json_files: u64,
}

/// The facts the triggers of one table are evaluated on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableFacts {
    /// Commits on the current branch since the last compaction (manifest rewrites excluded).
    pub commits_since_compaction: u64,
    /// `added-data-files` summed over those commits.
    pub data_files_since_compaction: u64,
    /// `added-files-size` summed over those commits (bytes; includes delete files).
    pub bytes_since_compaction: u64,
    /// `added-position-delete-files` summed over those commits.
    pub pos_delete_files_since_compaction: u64,
    /// `added-equality-delete-files` summed over those commits.
    pub eq_delete_files_since_compaction: u64,
    /// When the last compaction committed; `None` when the branch has none.
    pub last_compaction_ms: Option<i64>,
    /// When the first commit after the last compaction (or ever, when there is none) landed.
    pub first_uncompacted_ms: Option<i64>,
    /// When the last write (any commit but a compaction or manifest rewrite) landed: the
    /// table's write activity.
    pub last_write_ms: Option<i64>,
    /// Snapshots in the metadata (every branch and tag).
    pub snapshots: u64,
    /// When the oldest of them was committed.
    pub oldest_snapshot_ms: Option<i64>,
    /// Entries of the metadata log (previous metadata files still referenced).
    pub metadata_log_entries: u64,
    /// Manifest and metadata-file facts, when gathered.
    pub manifests: Option<ManifestFacts>,
}

/// What kind of commit a snapshot is, for maintenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitKind {
    /// A write: append, overwrite, delete (anything but `replace`).
    Write,
    /// A `replace` that changed data or delete files: a compaction.
    Compaction,
    /// A `replace` that changed manifests only (`rewrite_manifests`).
    ManifestRewrite,
}

/// The kind of a snapshot from its summary `operation` and entries. A `replace` naming no file
/// change but `manifests-replaced` is a manifest rewrite; any other `replace` is a compaction.
pub fn commit_kind(operation: &str, summary: &HashMap<String, String>) -> CommitKind {
    if !operation.eq_ignore_ascii_case("replace") {
        return CommitKind::Write;
    }
    let changes_files = FILE_CHANGES.iter().any(|k| num(summary, k) > 0);
    if !changes_files && summary.contains_key("manifests-replaced") {
        CommitKind::ManifestRewrite
    } else {
        CommitKind::Compaction
    }
}

/// A summary counter, 0 when absent or not a number (summaries are written by every engine;
/// a bad one must not stop maintenance).
fn num(summary: &HashMap<String, String>, key: &str) -> u64 {
    summary
        .get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// The facts of a table from its current branch, newest snapshot first (`branch`, the
/// current snapshot and its ancestors), the timestamps of all its snapshots and the length of
/// its metadata log. [`TableFacts::manifests`] is left `None`.
pub fn compute(
    branch: &[SnapshotRow<'_>],
    snapshot_timestamps: &[i64],
    metadata_log_entries: u64,
) -> TableFacts {
    let mut f = TableFacts {
        snapshots: snapshot_timestamps.len() as u64,
        oldest_snapshot_ms: snapshot_timestamps.iter().copied().min(),
        metadata_log_entries,
        ..TableFacts::default()
    };
    let mut counting = true;
    for (ts, operation, summary) in branch {
        match commit_kind(operation, summary) {
            CommitKind::ManifestRewrite => {}
            CommitKind::Compaction => {
                if counting {
                    f.last_compaction_ms = Some(*ts);
                    counting = false;
                }
            }
            CommitKind::Write => {
                if f.last_write_ms.is_none() {
                    f.last_write_ms = Some(*ts);
                }
                if counting {
                    f.commits_since_compaction += 1;
                    f.data_files_since_compaction += num(summary, ADDED_DATA_FILES);
                    f.bytes_since_compaction += num(summary, ADDED_FILES_SIZE);
                    f.pos_delete_files_since_compaction += num(summary, ADDED_POS_DELETE_FILES);
                    f.eq_delete_files_since_compaction += num(summary, ADDED_EQ_DELETE_FILES);
                    f.first_uncompacted_ms = Some(*ts);
                }
            }
        }
        if !counting && f.last_write_ms.is_some() {
            break;
        }
    }
    f
}

/// The facts of a loaded table, from its metadata alone (see [`compute`]).
pub fn gather(table: &Table) -> TableFacts {
    let md = table.metadata();
    let mut chain = Vec::new();
    let mut cur = md.current_snapshot();
    // A parent chain longer than the snapshot list would be a cycle in broken metadata.
    let limit = md.snapshots().count();
    while let Some(s) = cur {
        if chain.len() >= limit {
            break;
        }
        chain.push(s);
        cur = s.parent_snapshot_id().and_then(|p| md.snapshot_by_id(p));
    }
    let rows: Vec<SnapshotRow<'_>> = chain
        .into_iter()
        .map(|s| {
            let summary = s.summary();
            (
                s.timestamp_ms(),
                summary.operation.as_str(),
                &summary.additional_properties,
            )
        })
        .collect();
    let stamps: Vec<i64> = md.snapshots().map(|s| s.timestamp_ms()).collect();
    compute(&rows, &stamps, md.metadata_log().len() as u64)
}

#[cfg(test)]
mod tests;
