//! Refs: set or remove a tag or branch, under the table's uuid and the ref's current snapshot
//! (a concurrent move of the same ref fails the compare-and-swap and is re-planned).

use iceberg::spec::{SnapshotReference, TableMetadata};
use iceberg::{TableRequirement, TableUpdate};

use crate::commit::producer::PreparedCommit;

/// Sets ref `name` of `md` to `reference`; `existing` is the snapshot it names now (`None`
/// for a new ref).
pub fn set_ref(
    md: &TableMetadata,
    name: &str,
    existing: Option<i64>,
    reference: SnapshotReference,
) -> PreparedCommit {
    PreparedCommit {
        requirements: requirements(md, name, existing),
        updates: vec![TableUpdate::SetSnapshotRef {
            ref_name: name.to_string(),
            reference,
        }],
        written: vec![],
    }
}

/// Removes ref `name` of `md`, which names snapshot `existing` now.
pub fn remove_ref(md: &TableMetadata, name: &str, existing: i64) -> PreparedCommit {
    PreparedCommit {
        requirements: requirements(md, name, Some(existing)),
        updates: vec![TableUpdate::RemoveSnapshotRef {
            ref_name: name.to_string(),
        }],
        written: vec![],
    }
}

fn requirements(md: &TableMetadata, name: &str, existing: Option<i64>) -> Vec<TableRequirement> {
    vec![
        TableRequirement::UuidMatch { uuid: md.uuid() },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: name.to_string(),
            snapshot_id: existing,
        },
    ]
}
