//! The commit path: the only way floe changes a table.
//!
//! ```text
//!  SnapshotUpdate ──> producer::prepare ──> PreparedCommit ──> Catalog::commit (CAS)
//!   (added/removed      writes manifests,     requirements +        │ conflict
//!    files, op)         manifest list,        updates               v
//!                       builds snapshot    Committer: reload, re-validate, rebuild, backoff
//! ```
//!
//! [`Committer`] is the one public entry: `Committer::new(&catalog, &ident)`, optionally
//! `.on(base)`, `.with_precondition(..)`, `.owning(files)` or `.lending(&mut ledger)`, then
//! `.commit(update)` for a snapshot action or `.commit_with(produce)` for any action planned
//! per attempt (row deltas, expiry, metadata changes). Retry, cleanup and the unknown-outcome
//! rule live there once.
//!
//! The vocabulary ([`action`]): one file per named action (append, rewrite, row delta, rewrite
//! deletes, rewrite manifests: [`SnapshotUpdate`] constructors; properties, refs, expire,
//! schema/spec evolution: [`producer::PreparedCommit`] builders). One file per action rather
//! than one enum: snapshot actions share one producer and differ only in what they remove and
//! add, while metadata actions are plain requirement + update lists; an enum would only
//! re-dispatch to them. Every attempt yields a commit or explicitly nothing
//! ([`Produced::nothing`]).
//!
//! Files an operation writes for a commit are registered in a [`Ledger`] the committer settles
//! (kept on landing or an unknown outcome, handed back on a [`Conflict`] to a lending caller,
//! deleted otherwise). Conflicts are a [`Conflict`] enum carried by
//! [`crate::Error::ValidationFailed`] and [`crate::Error::CommitConflict`].
//!
//! Implements the Iceberg table spec v2 ("Snapshots", "Manifests", "Manifest Lists", "Sequence
//! Numbers", "Commit Conflict Resolution and Retry"): an `append` adds a manifest of ADDED
//! entries and carries every parent manifest untouched (no old manifest is read); a `replace`
//! (rewrite) or `delete`/`overwrite` rewrites the manifests holding removed files into merged
//! manifests with DELETED + EXISTING entries. Conflict rules live in [`validate`].
//!
//! Per format version: v1 commits v1 manifests and lists (no sequence numbers, no delete
//! files); v3 commits v3 ones with row lineage (the list assigns data manifests their
//! `first_row_id` from the table's `next-row-id`, carried entries keep theirs explicitly,
//! [`crate::table::lineage`]), takes deletion vectors and never Parquet position delete files
//! ([`producer::check_update`]), removes one vector of a shared Puffin file by (file, data
//! file) ([`SnapshotUpdate::removing_vectors`]) and the vectors of a removed data file with it.
//!
//! Invariants: a commit never loses or duplicates a live file (every live entry of the parent is
//! carried exactly once, removed files must be live in the parent); files an attempt wrote are
//! deleted when the attempt loses; new files never overwrite an existing path (UUID names).

pub mod action;
mod committer;
mod ledger;
pub mod producer;
pub mod retry;
pub mod summary;
pub mod validate;

use std::collections::HashMap;

use iceberg::spec::{DataFile, Operation};

pub use crate::base::error::Conflict;
pub use crate::table::manifests::LiveFile;
pub use committer::{CommitOutcome, Committed, Committer, Precondition, Produced};
pub use ledger::Ledger;

/// Builders of files for unit tests of the conflict and dangling-delete rules.
#[cfg(test)]
pub(crate) use crate::table::manifests::test_support;

/// The key of an added delete file in [`SnapshotUpdate::with_delete_specs`]: its path, and for
/// a deletion vector (many share one Puffin file, each in its data file's spec) the data file
/// it references too.
pub fn placement_key(f: &DataFile) -> String {
    match (f.file_format(), f.referenced_data_file()) {
        (iceberg::spec::DataFileFormat::Puffin, Some(data)) => {
            format!("{}#{}", f.file_path(), data)
        }
        _ => f.file_path().to_string(),
    }
}

/// What a commit changes. Only the constructors make one (append, rewrite, delete, overwrite,
/// rewrite-manifests), so no combination Iceberg does not define can be written; commit it
/// with [`Committer::commit`].
#[derive(Debug, Clone)]
pub struct SnapshotUpdate {
    pub(crate) operation: Operation,
    /// New data files (written with the table's default spec).
    pub(crate) added_data_files: Vec<DataFile>,
    /// New delete files (position or equality; default spec).
    pub(crate) added_delete_files: Vec<DataFile>,
    /// Paths of data or delete files to remove; each must be live in the parent snapshot.
    pub(crate) removed_files: Vec<String>,
    /// Deletion vectors to remove, as (Puffin file, referenced data file): one blob of a Puffin
    /// file other vectors may share (format v3; a vector replaced by a merged one). The
    /// vectors of removed data files go with them without being named.
    pub(crate) removed_vectors: Vec<(String, String)>,
    /// Data sequence number for added data files. A rewrite sets the starting snapshot's so
    /// equality deletes committed after it started still apply (`use-starting-sequence-number`).
    pub(crate) data_sequence_number: Option<i64>,
    /// Snapshot the operation was planned against; validation checks what changed since.
    pub(crate) starting_snapshot_id: Option<i64>,
    /// Extra summary properties (`floe.writer-id`, source positions, ...).
    pub(crate) summary_properties: HashMap<String, String>,
    /// Rewrite every manifest of the parent, clustered by partition, at
    /// `commit.manifest.target-size-bytes` (`rewrite-manifests`; no data change).
    pub(crate) rewrite_manifests: bool,
    /// Partition spec and data sequence number of added delete files, by path (a rewrite of
    /// delete files keeps the spec and numbers of the files it replaces); others are in the
    /// default spec and take the new snapshot's number.
    pub(crate) delete_placement: HashMap<String, (i32, i64)>,
    /// The schema the added data files were written in: the commit is refused with
    /// [`crate::Error::SchemaChanged`] when the table's current schema is another one.
    pub(crate) written_schema_id: Option<i32>,
}

impl SnapshotUpdate {
    /// Places added position delete files in the partition spec of the data files they name
    /// (by [`placement_key`]; an older spec after partition evolution), with the new
    /// snapshot's sequence number. Unlisted delete files go in the default spec.
    pub fn with_delete_specs(mut self, specs: &HashMap<String, i32>) -> Self {
        for (path, spec) in specs {
            self.delete_placement.insert(path.clone(), (*spec, -1));
        }
        self
    }

    /// Names the schema the added data files were written in (`TableWriter::schema_id`): the
    /// commit is refused with [`crate::Error::SchemaChanged`] if the table's schema changed
    /// since, never made with files of another schema.
    pub fn written_in(mut self, schema_id: i32) -> Self {
        self.written_schema_id = Some(schema_id);
        self
    }

    /// Removes deletion vectors, as (Puffin file, data file): each must be live in the parent
    /// (a vector replaced by a merged one; format v3).
    pub fn removing_vectors(mut self, vectors: Vec<(String, String)>) -> Self {
        self.removed_vectors.extend(vectors);
        self
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
