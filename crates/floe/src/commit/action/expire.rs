//! Expire: remove expired refs and snapshots (and their statistics) from the metadata, under
//! the table's uuid; the compare-and-swap on the base metadata makes the plan exact (any
//! concurrent commit forces a re-plan, `crate::operations::expire`).

use std::collections::BTreeSet;

use iceberg::spec::TableMetadata;
use iceberg::{TableRequirement, TableUpdate};

use crate::commit::producer::PreparedCommit;

/// The metadata updates of an expiry: refs, snapshots and their statistics removed. The CAS
/// on the base metadata makes the plan exact: any concurrent commit forces a re-plan.
pub fn expire(md: &TableMetadata, refs: &[String], snapshots: &[i64]) -> PreparedCommit {
    let mut updates: Vec<TableUpdate> = refs
        .iter()
        .map(|r| TableUpdate::RemoveSnapshotRef {
            ref_name: r.clone(),
        })
        .collect();
    if !snapshots.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots {
            snapshot_ids: snapshots.to_vec(),
        });
    }
    let expired: BTreeSet<i64> = snapshots.iter().copied().collect();
    for st in md
        .statistics_iter()
        .filter(|s| expired.contains(&s.snapshot_id))
    {
        updates.push(TableUpdate::RemoveStatistics {
            snapshot_id: st.snapshot_id,
        });
    }
    for st in md
        .partition_statistics_iter()
        .filter(|s| expired.contains(&s.snapshot_id))
    {
        updates.push(TableUpdate::RemovePartitionStatistics {
            snapshot_id: st.snapshot_id,
        });
    }
    PreparedCommit {
        requirements: vec![TableRequirement::UuidMatch { uuid: md.uuid() }],
        updates,
        written: vec![],
    }
}
