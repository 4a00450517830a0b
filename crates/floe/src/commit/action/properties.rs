//! Properties: set and remove table properties, with no requirement (a property change
//! another engine could have made concurrently merges; floe's validation of the values is the
//! caller's, [`crate::operations::alter::AlterPropertiesBuilder`]).

use iceberg::TableUpdate;

use crate::commit::producer::PreparedCommit;

/// The commit of metadata `updates` as they are, with no requirement.
pub fn properties(updates: Vec<TableUpdate>) -> PreparedCommit {
    PreparedCommit {
        requirements: vec![],
        updates,
        written: vec![],
    }
}

/// The per-attempt production of [`properties`] for [`crate::commit::Committer::commit_with`]:
/// the same `updates` at every attempt.
pub fn on_every_attempt(
    updates: Vec<TableUpdate>,
) -> impl FnMut(
    iceberg::table::Table,
) -> std::future::Ready<crate::base::error::Result<crate::commit::Produced<()>>> {
    move |_| {
        std::future::ready(Ok(crate::commit::Produced::commit(properties(
            updates.clone(),
        ))))
    }
}
