//! Rewrite: replace data files by data files with the same rows (compaction; Iceberg
//! `replace`). Conflicts when a replaced file is gone or a new delete file applies to it.

use std::collections::HashMap;

use iceberg::spec::{DataFile, Operation};
use iceberg::table::Table;

use crate::commit::SnapshotUpdate;

impl SnapshotUpdate {
    /// Replace `removed` by `added` without changing table content (compaction). New files take
    /// the starting snapshot's sequence number.
    pub fn rewrite(starting: &Table, removed: Vec<String>, added: Vec<DataFile>) -> Self {
        let start = starting.metadata().current_snapshot();
        Self {
            operation: Operation::Replace,
            added_data_files: added,
            added_delete_files: vec![],
            removed_files: removed,
            removed_vectors: vec![],
            data_sequence_number: start.map(|s| s.sequence_number()),
            starting_snapshot_id: start.map(|s| s.snapshot_id()),
            summary_properties: HashMap::new(),
            rewrite_manifests: false,
            delete_placement: HashMap::new(),
            // Outputs are written in the schema the operation started from.
            written_schema_id: Some(starting.metadata().current_schema_id()),
        }
    }
}
