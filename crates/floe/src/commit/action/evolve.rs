//! Schema and partition-spec evolution (and any metadata change iceberg's metadata builder
//! checks): the builder's change list, committed under the table's uuid plus the caller's
//! requirements (`crate::operations::alter::schema`, `crate::operations::alter::partition`).

use iceberg::spec::{TableMetadata, TableMetadataBuilder};
use iceberg::TableRequirement;

use crate::base::error::{Error, Result};
use crate::commit::producer::PreparedCommit;

/// A metadata-only change planned against `md`: `change` applied through iceberg's metadata
/// builder (which checks it, and whose change list is exactly what a catalog needs), committed
/// under `requirements` plus the table's uuid (what the plan read). Returns the metadata the
/// change gives and its commit; `what` names the change in errors.
pub fn metadata_change(
    md: &TableMetadata,
    what: &'static str,
    mut requirements: Vec<TableRequirement>,
    change: impl FnOnce(TableMetadataBuilder) -> iceberg::Result<TableMetadataBuilder>,
) -> Result<(TableMetadata, PreparedCommit)> {
    let built = change(TableMetadataBuilder::new_from_metadata(md.clone(), None))
        .and_then(|b| b.build())
        .map_err(|e| Error::InvalidDefinition {
            what,
            fragment: md.location().to_string(),
            reason: e.message().to_string(),
        })?;
    requirements.insert(0, TableRequirement::UuidMatch { uuid: md.uuid() });
    Ok((
        built.metadata,
        PreparedCommit {
            requirements,
            updates: built.changes,
            written: vec![],
        },
    ))
}
