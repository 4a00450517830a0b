//! Append: new data files in a new snapshot (Iceberg `append`); carries every parent
//! manifest untouched and never conflicts with anything but a dropped table.

use std::collections::HashMap;

use iceberg::spec::{DataFile, Operation};

use crate::commit::SnapshotUpdate;

impl SnapshotUpdate {
    /// Append data files (never conflicts with anything but a dropped table).
    pub fn append(files: Vec<DataFile>) -> Self {
        Self {
            operation: Operation::Append,
            added_data_files: files,
            added_delete_files: vec![],
            removed_files: vec![],
            removed_vectors: vec![],
            data_sequence_number: None,
            starting_snapshot_id: None,
            summary_properties: HashMap::new(),
            rewrite_manifests: false,
            delete_placement: HashMap::new(),
            written_schema_id: None,
        }
    }
}
