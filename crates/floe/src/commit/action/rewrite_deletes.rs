//! Rewrite deletes: replace position delete files by others that delete the same rows
//! (`rewrite-position-delete-files`; Iceberg `replace`).

use std::collections::HashMap;

use iceberg::spec::{DataFile, Operation};
use iceberg::table::Table;

use crate::commit::SnapshotUpdate;

impl SnapshotUpdate {
    /// Replace delete files `removed` by `added` delete files without changing table content
    /// (`rewrite-position-delete-files`); `placement` gives each added file's partition spec
    /// and data sequence number (by path), so it applies to exactly the data files the replaced
    /// ones did.
    pub fn rewrite_deletes(
        starting: &Table,
        removed: Vec<String>,
        added: Vec<DataFile>,
        placement: HashMap<String, (i32, i64)>,
    ) -> Self {
        let mut u = Self::changes(Operation::Replace, starting, removed, added, vec![]);
        u.delete_placement = placement;
        u
    }
}
