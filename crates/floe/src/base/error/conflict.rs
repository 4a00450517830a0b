//! [`Conflict`]: why a commit cannot be made on the table as it is now, one variant per reason
//! floe detects. Validation conflicts (a file removed, a delete file added since the operation
//! started) come in [`crate::Error::ValidationFailed`]; lost compare-and-swaps in
//! [`crate::Error::CommitConflict`]. Each variant renders the message floe has always printed.
//! Defined in the base layer (the error type carries it), re-exported as `crate::commit::Conflict`.

/// Why a commit conflicts with the table as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// A file the commit removes is no longer live (a concurrent commit removed it).
    RemovedConcurrently { path: String },
    /// A file to remove is listed twice, or live twice in the table.
    RemovedTwice,
    /// A delete file committed since the operation started applies to a file it replaces.
    DeleteAdded { delete: String, replaced: String },
    /// The snapshot the operation started from is no longer an ancestor of the current one
    /// (expired, or the branch was rolled back).
    StartingSnapshotGone { snapshot_id: i64 },
    /// A requirement of the commit no longer holds (iceberg's message: the table was replaced,
    /// a ref moved, ...).
    RequirementFailed(String),
    /// The table pointer moved during the commit (another writer swapped it first).
    PointerMoved,
    /// The table changed while it was being dropped.
    ChangedWhileDropping,
    /// The catalog refused the commit as a conflict (its answer).
    CatalogRefused(String),
    /// Another writer set the ref to the same snapshot and settings meanwhile.
    RefSetMeanwhile { kind: &'static str, name: String },
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conflict::RemovedConcurrently { path } => write!(
                f,
                "file {path} is no longer live in the table (removed by a concurrent commit?)"
            ),
            Conflict::RemovedTwice => {
                f.write_str("a file to remove is listed twice, or live twice in the table")
            }
            Conflict::DeleteAdded { delete, replaced } => write!(
                f,
                "delete file {delete} committed concurrently applies to replaced file {replaced}"
            ),
            Conflict::StartingSnapshotGone { snapshot_id } => write!(
                f,
                "starting snapshot {snapshot_id} is no longer an ancestor of the current snapshot"
            ),
            Conflict::RequirementFailed(m) | Conflict::CatalogRefused(m) => f.write_str(m),
            Conflict::PointerMoved => f.write_str("the table pointer moved during the commit"),
            Conflict::ChangedWhileDropping => {
                f.write_str("the table changed while it was being dropped")
            }
            Conflict::RefSetMeanwhile { kind, name } => write!(
                f,
                "{kind} '{name}' was set to the same snapshot and settings by another writer meanwhile"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Conflict;
    use crate::Error;

    #[test]
    fn conflicts_render_the_messages_floe_always_printed() {
        let cases = [
            (
                Conflict::RemovedConcurrently { path: "s3://b/t/data/a.parquet".into() },
                "file s3://b/t/data/a.parquet is no longer live in the table (removed by a concurrent commit?)",
            ),
            (
                Conflict::RemovedTwice,
                "a file to remove is listed twice, or live twice in the table",
            ),
            (
                Conflict::DeleteAdded { delete: "d.parquet".into(), replaced: "a.parquet".into() },
                "delete file d.parquet committed concurrently applies to replaced file a.parquet",
            ),
            (
                Conflict::StartingSnapshotGone { snapshot_id: 42 },
                "starting snapshot 42 is no longer an ancestor of the current snapshot",
            ),
            (
                Conflict::RequirementFailed("Requirement failed: Table UUID does not match".into()),
                "Requirement failed: Table UUID does not match",
            ),
            (Conflict::PointerMoved, "the table pointer moved during the commit"),
            (
                Conflict::ChangedWhileDropping,
                "the table changed while it was being dropped",
            ),
            (Conflict::CatalogRefused("HTTP 409: conflict".into()), "HTTP 409: conflict"),
            (
                Conflict::RefSetMeanwhile { kind: "tag", name: "v1".into() },
                "tag 'v1' was set to the same snapshot and settings by another writer meanwhile",
            ),
        ];
        for (conflict, message) in cases {
            assert_eq!(conflict.to_string(), message);
        }
    }

    #[test]
    fn errors_carrying_a_conflict_read_as_before() {
        let e = Error::ValidationFailed {
            table: "db.t".into(),
            reason: Conflict::RemovedTwice,
        };
        assert_eq!(
            e.to_string(),
            "validation failed for 'db.t': a file to remove is listed twice, or live twice in the table"
        );
        let e = Error::CommitConflict {
            table: "db.t".into(),
            attempts: 5,
            reason: Conflict::PointerMoved,
        };
        assert_eq!(
            e.to_string(),
            "commit to 'db.t' failed after 5 attempt(s): the table pointer moved during the commit"
        );
        assert!(e.is_retryable());
    }
}
