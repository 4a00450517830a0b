//! The commit path: the only way floe changes a table's data.
//!
//! ```text
//!  SnapshotUpdate ──> producer::prepare ──> PreparedCommit ──> Catalog::commit (CAS)
//!   (added/removed      writes manifests,     requirements +        │ conflict
//!    files, op)         manifest list,        updates               v
//!                       builds snapshot    retry::with_retry: reload, re-validate, rebuild, backoff
//! ```
//!
//! Implements the Iceberg table spec v2 ("Snapshots", "Manifests", "Manifest Lists", "Sequence
//! Numbers", "Commit Conflict Resolution and Retry"): an `append` adds a manifest of ADDED
//! entries and carries every parent manifest untouched (no old manifest is read); a `replace`
//! (rewrite) or `delete`/`overwrite` rewrites the manifests holding removed files into merged
//! manifests with DELETED + EXISTING entries. Conflict rules live in [`validate`].
//!
//! Invariants: a commit never loses or duplicates a live file (every live entry of the parent is
//! carried exactly once, removed files must be live in the parent); files an attempt wrote are
//! deleted when the attempt loses; new files never overwrite an existing path (UUID names).

pub mod producer;
pub mod retry;
pub mod summary;
pub mod validate;

use std::collections::HashMap;

use iceberg::spec::{DataFile, Operation};
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::catalog::Catalog;
use crate::error::{Error, Result};

pub use crate::table::manifests::LiveFile;

/// Builders of files for unit tests of the conflict and dangling-delete rules.
#[cfg(test)]
pub(crate) mod test_support {
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Struct};

    use super::LiveFile;

    /// A live file of spec 0 with the given content, partition, sequence number and
    /// (for position deletes) referenced data file.
    pub fn live_file(
        path: &str,
        content: DataContentType,
        partition: Struct,
        seq: i64,
        referenced: Option<&str>,
    ) -> LiveFile {
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .record_count(1)
            .file_size_in_bytes(10)
            .partition_spec_id(0);
        if let Some(r) = referenced {
            b.referenced_data_file(Some(r.to_string()));
        }
        LiveFile {
            file: b.build().expect("valid test file"),
            spec_id: 0,
            snapshot_id: 1,
            sequence_number: seq,
            file_sequence_number: Some(seq),
        }
    }
}

/// What a commit changes. Build it with the constructors, then [`commit`] it.
#[derive(Debug, Clone)]
pub struct SnapshotUpdate {
    pub operation: Operation,
    /// New data files (written with the table's default spec).
    pub added_data_files: Vec<DataFile>,
    /// New delete files (position or equality; default spec).
    pub added_delete_files: Vec<DataFile>,
    /// Paths of data or delete files to remove; each must be live in the parent snapshot.
    pub removed_files: Vec<String>,
    /// Data sequence number for added data files. A rewrite sets the starting snapshot's so
    /// equality deletes committed after it started still apply (`use-starting-sequence-number`).
    pub data_sequence_number: Option<i64>,
    /// Snapshot the operation was planned against; validation checks what changed since.
    pub starting_snapshot_id: Option<i64>,
    /// Extra summary properties (`floe.writer-id`, source positions, ...).
    pub summary_properties: HashMap<String, String>,
    /// Rewrite every manifest of the parent, clustered by partition, at
    /// `commit.manifest.target-size-bytes` (`rewrite-manifests`; no data change).
    pub rewrite_manifests: bool,
}

impl SnapshotUpdate {
    /// Append data files (never conflicts with anything but a dropped table).
    pub fn append(files: Vec<DataFile>) -> Self {
        Self {
            operation: Operation::Append,
            added_data_files: files,
            added_delete_files: vec![],
            removed_files: vec![],
            data_sequence_number: None,
            starting_snapshot_id: None,
            summary_properties: HashMap::new(),
            rewrite_manifests: false,
        }
    }

    /// Replace `removed` by `added` without changing table content (compaction). New files take
    /// the starting snapshot's sequence number.
    pub fn rewrite(starting: &Table, removed: Vec<String>, added: Vec<DataFile>) -> Self {
        let start = starting.metadata().current_snapshot();
        Self {
            operation: Operation::Replace,
            added_data_files: added,
            added_delete_files: vec![],
            removed_files: removed,
            data_sequence_number: start.map(|s| s.sequence_number()),
            starting_snapshot_id: start.map(|s| s.snapshot_id()),
            summary_properties: HashMap::new(),
            rewrite_manifests: false,
        }
    }

    /// Remove data files and/or add delete files (row-level delete). With added data files
    /// this becomes an `overwrite`.
    pub fn delete(
        starting: &Table,
        removed: Vec<String>,
        added_deletes: Vec<DataFile>,
        added_data: Vec<DataFile>,
    ) -> Self {
        let start = starting.metadata().current_snapshot();
        Self {
            operation: if added_data.is_empty() {
                Operation::Delete
            } else {
                Operation::Overwrite
            },
            added_data_files: added_data,
            added_delete_files: added_deletes,
            removed_files: removed,
            data_sequence_number: None,
            starting_snapshot_id: start.map(|s| s.snapshot_id()),
            summary_properties: HashMap::new(),
            rewrite_manifests: false,
        }
    }

    /// Rewrite the table's manifests, clustered by partition, without changing its content.
    pub fn rewrite_manifests(starting: &Table) -> Self {
        let start = starting.metadata().current_snapshot();
        Self {
            operation: Operation::Replace,
            added_data_files: vec![],
            added_delete_files: vec![],
            removed_files: vec![],
            data_sequence_number: None,
            starting_snapshot_id: start.map(|s| s.snapshot_id()),
            summary_properties: HashMap::new(),
            rewrite_manifests: true,
        }
    }

    /// Adds summary properties.
    pub fn with_summary_properties(mut self, props: HashMap<String, String>) -> Self {
        self.summary_properties.extend(props);
        self
    }

    /// Every file this update adds (the caller's to delete if the commit finally fails).
    pub fn added_paths(&self) -> Vec<String> {
        self.added_data_files
            .iter()
            .chain(&self.added_delete_files)
            .map(|f| f.file_path().to_string())
            .collect()
    }
}

/// What one commit did.
#[derive(Debug, Clone)]
pub struct CommitOutcome {
    pub table: Table,
    pub snapshot_id: i64,
    pub attempts: u32,
}

/// Commits `update` to the table with retries; on final failure deletes the files the update
/// added (so a failed operation leaves nothing behind but, after a crash, orphans).
pub async fn commit(
    catalog: &Catalog,
    ident: &TableIdent,
    update: SnapshotUpdate,
) -> Result<CommitOutcome> {
    commit_on(catalog, ident, None, update).await
}

/// Like [`commit`], but the first attempt builds on `base` (a table the caller just loaded),
/// saving a metadata read; later attempts reload.
pub async fn commit_on(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Option<Table>,
    update: SnapshotUpdate,
) -> Result<CommitOutcome> {
    let owner = base.clone();
    let result = try_commit(catalog, ident, base, &update).await;
    match &result {
        Err(Error::CommitStateUnknown { .. }) | Ok(_) => {}
        Err(_) => {
            let owner = match owner {
                Some(t) => Some(t),
                None => catalog.load_table(ident).await.ok(),
            };
            match owner {
                Some(t) => {
                    retry::delete_quietly(
                        t.file_io(),
                        t.metadata().location(),
                        update.added_paths(),
                    )
                    .await
                }
                None => tracing::warn!("cannot reach the table to delete the files of a failed commit; they are orphans now"),
            }
        }
    }
    result
}

/// Commits with retries but leaves the update's added files in place on failure: the caller
/// owns them (compaction uses this to retry groups one by one after a joint commit failed).
pub async fn try_commit(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Option<Table>,
    update: &SnapshotUpdate,
) -> Result<CommitOutcome> {
    let mut attempts = 0u32;
    let table = retry::with_retry(catalog, ident, base, |table| {
        attempts += 1;
        async move { producer::prepare(&table, update).await }
    })
    .await?;
    let snapshot_id = table
        .metadata()
        .current_snapshot_id()
        .expect("a committed snapshot is current");
    Ok(CommitOutcome {
        table,
        snapshot_id,
        attempts,
    })
}
