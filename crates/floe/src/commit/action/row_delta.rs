//! Row delta: remove data files and/or add delete and data files (Iceberg `delete` and
//! `overwrite`): `floe delete`, upserts, copy-on-write changes. The per-attempt loop that
//! locates rows again on every retry is `crate::operations::change::commit_row_delta_with`, built on
//! these constructors and [`crate::commit::Committer::commit_with`].

use std::collections::HashMap;

use iceberg::spec::{DataFile, Operation};
use iceberg::table::Table;

use crate::commit::SnapshotUpdate;

impl SnapshotUpdate {
    /// Remove data files and/or add delete files (a row-level delete, Iceberg's `delete`).
    pub fn delete(starting: &Table, removed: Vec<String>, added_deletes: Vec<DataFile>) -> Self {
        Self::changes(Operation::Delete, starting, removed, added_deletes, vec![])
    }

    /// Remove files and add data (and delete) files: Iceberg's `overwrite` (copy-on-write
    /// updates and deletes).
    pub fn overwrite(
        starting: &Table,
        removed: Vec<String>,
        added_deletes: Vec<DataFile>,
        added_data: Vec<DataFile>,
    ) -> Self {
        Self::changes(
            Operation::Overwrite,
            starting,
            removed,
            added_deletes,
            added_data,
        )
    }

    pub(crate) fn changes(
        operation: Operation,
        starting: &Table,
        removed: Vec<String>,
        added_deletes: Vec<DataFile>,
        added_data: Vec<DataFile>,
    ) -> Self {
        let start = starting.metadata().current_snapshot();
        Self {
            operation,
            added_data_files: added_data,
            added_delete_files: added_deletes,
            removed_files: removed,
            removed_vectors: vec![],
            data_sequence_number: None,
            starting_snapshot_id: start.map(|s| s.snapshot_id()),
            summary_properties: HashMap::new(),
            rewrite_manifests: false,
            delete_placement: HashMap::new(),
            written_schema_id: Some(starting.metadata().current_schema_id()),
        }
    }
}
