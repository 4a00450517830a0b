//! Rewrite manifests: every manifest of the parent rewritten, clustered by partition, with
//! no data change (Iceberg `replace`).

use std::collections::HashMap;

use iceberg::spec::Operation;
use iceberg::table::Table;

use crate::commit::SnapshotUpdate;

impl SnapshotUpdate {
    /// Rewrite the table's manifests, clustered by partition, without changing its content.
    pub fn rewrite_manifests(starting: &Table) -> Self {
        let start = starting.metadata().current_snapshot();
        Self {
            operation: Operation::Replace,
            added_data_files: vec![],
            added_delete_files: vec![],
            removed_files: vec![],
            removed_vectors: vec![],
            data_sequence_number: None,
            starting_snapshot_id: start.map(|s| s.snapshot_id()),
            summary_properties: HashMap::new(),
            rewrite_manifests: true,
            delete_placement: HashMap::new(),
            written_schema_id: None,
        }
    }
}
