//! Conflict rules, as data: given what a commit removes and what other commits added since the
//! operation's starting snapshot, decide whether the commit is still valid.
//!
//! Iceberg spec v2, "Commit Conflict Resolution and Retry" / "Scan Planning" (which delete files
//! apply to which data files):
//! - a removed file must still be live in the parent (checked by the producer while it rewrites
//!   manifests: a missing file fails with [`Error::ValidationFailed`]);
//! - a position delete file applies to a data file when it references it, or (no reference) when
//!   it is in the same spec and partition;
//! - an equality delete file applies to a data file in the same partition (or any, when the
//!   delete is unpartitioned) with a lower data sequence number. A rewrite that keeps the starting
//!   sequence number for its new files stays correct under new equality deletes, so they are
//!   ignored then.
//!
//! Appends never conflict.

use std::collections::HashSet;

use iceberg::spec::{DataContentType, DataFile, TableMetadata};

use crate::base::error::{Error, Result};
use crate::commit::{Conflict, LiveFile};

/// Snapshot ids committed after `starting` on the current branch (newest first). Fails when
/// `starting` is no longer an ancestor (expired, or the branch was rolled back).
pub fn snapshots_since(
    metadata: &TableMetadata,
    starting: Option<i64>,
    table: &str,
) -> Result<HashSet<i64>> {
    let mut out = HashSet::new();
    let mut cur = metadata.current_snapshot();
    while let Some(s) = cur {
        if Some(s.snapshot_id()) == starting {
            return Ok(out);
        }
        out.insert(s.snapshot_id());
        cur = s
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p));
    }
    if starting.is_none() {
        return Ok(out);
    }
    Err(Error::ValidationFailed {
        table: table.to_string(),
        reason: Conflict::StartingSnapshotGone {
            snapshot_id: starting.unwrap_or_default(),
        },
    })
}

/// The first new delete file that applies to a removed data file, as a conflict.
pub fn conflicting_delete(
    removed: &[LiveFile],
    new_deletes: &[LiveFile],
    ignore_equality_deletes: bool,
) -> Option<Conflict> {
    for d in new_deletes {
        for r in removed
            .iter()
            .filter(|r| r.file.content_type() == DataContentType::Data)
        {
            if applies(
                &d.file,
                d.spec_id,
                &r.file,
                r.spec_id,
                ignore_equality_deletes,
            ) {
                return Some(Conflict::DeleteAdded {
                    delete: d.file.file_path().to_string(),
                    replaced: r.file.file_path().to_string(),
                });
            }
        }
    }
    None
}

fn applies(
    delete: &DataFile,
    delete_spec: i32,
    data: &DataFile,
    data_spec: i32,
    ignore_eq: bool,
) -> bool {
    match delete.content_type() {
        DataContentType::Data => false,
        DataContentType::PositionDeletes => match delete.referenced_data_file() {
            Some(path) => path == data.file_path(),
            None => delete_spec == data_spec && delete.partition() == data.partition(),
        },
        DataContentType::EqualityDeletes => {
            !ignore_eq
                && (delete.partition().fields().is_empty()
                    || (delete_spec == data_spec && delete.partition() == data.partition()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{Literal, Struct};

    fn file(path: &str, content: DataContentType, day: i32, referenced: Option<&str>) -> LiveFile {
        let partition = Struct::from_iter([Some(Literal::int(day))]);
        crate::commit::test_support::live_file(path, content, partition, 1, referenced)
    }

    #[test]
    fn position_delete_on_replaced_file_conflicts() {
        let removed = [file("a.parquet", DataContentType::Data, 1, None)];
        let del = [file(
            "d.parquet",
            DataContentType::PositionDeletes,
            1,
            Some("a.parquet"),
        )];
        assert!(conflicting_delete(&removed, &del, true).is_some());
        let other = [file(
            "d.parquet",
            DataContentType::PositionDeletes,
            1,
            Some("b.parquet"),
        )];
        assert!(conflicting_delete(&removed, &other, true).is_none());
    }

    #[test]
    fn partition_scoped_position_delete_conflicts_only_in_its_partition() {
        let removed = [file("a.parquet", DataContentType::Data, 1, None)];
        let same = [file("d.parquet", DataContentType::PositionDeletes, 1, None)];
        let other = [file("d.parquet", DataContentType::PositionDeletes, 2, None)];
        assert!(conflicting_delete(&removed, &same, true).is_some());
        assert!(conflicting_delete(&removed, &other, true).is_none());
    }

    #[test]
    fn equality_deletes_are_fine_when_rewrite_keeps_starting_sequence_number() {
        let removed = [file("a.parquet", DataContentType::Data, 1, None)];
        let eq = [file("e.parquet", DataContentType::EqualityDeletes, 1, None)];
        assert!(conflicting_delete(&removed, &eq, true).is_none());
        assert!(conflicting_delete(&removed, &eq, false).is_some());
    }
}
