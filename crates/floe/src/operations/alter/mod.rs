//! Table alterations, each a metadata-only change on the operation contract
//! ([`crate::operations::Operation`]): property updates ([`properties::AlterPropertiesBuilder`],
//! `table set-property`), partition evolution ([`partition::AlterPartitionBuilder`],
//! `table evolve-partition`) and schema evolution ([`schema::AlterSchemaBuilder`],
//! `table evolve-schema`) and format upgrades ([`format::UpgradeFormatBuilder`], `table upgrade`).
//!
//! `plan()` loads the table and decides the whole change against it: every refusal, naming
//! the property, partition field or column, comes from it, and nothing is written; its report
//! is what `--dry-run` prints, and what `apply` returns once the change landed. `apply(plan)`
//! commits through [`Committer::commit_with`], deciding the change again at each attempt on the
//! table that attempt commits on: the commit's requirements (schema: the current schema id and
//! last column id; spec: the default spec id and last partition id) fail when the table
//! changed in between, and the next attempt re-validates the change on the new state (a column
//! added meanwhile is refused by name, a spec already in place commits nothing). A property
//! update merges with concurrent ones (it has no requirement) but is validated again on the
//! properties it commits on.

pub mod format;
pub mod partition;
pub mod properties;
pub mod schema;

pub use properties::{validate_property_update, AlterPropertiesBuilder, PropertiesChange};

use iceberg::spec::TableMetadata;
use iceberg::table::Table;

use crate::base::error::Result;
use crate::commit::producer::PreparedCommit;
use crate::commit::{Committed, Committer, Produced};
use crate::operations::Ctx;

pub(crate) use crate::commit::action::evolve::metadata_change;

/// Commits the metadata change `decide` makes of the table at each attempt, the first on
/// `table` (the one planned on): `decide` returns the commit (`None`: the change is in place
/// already, nothing to commit) and what the attempt reports, or its refusal, which ends the
/// commit.
async fn commit_metadata<P>(
    ctx: &Ctx,
    table: Table,
    decide: impl Fn(&TableMetadata) -> Result<(Option<PreparedCommit>, P)>,
) -> Result<Committed<P>> {
    Committer::new(&ctx.catalog, &ctx.ident)
        .on(table)
        .commit_with(|t| {
            let decided = decide(t.metadata());
            async move {
                Ok(match decided? {
                    (Some(commit), p) => Produced::new(commit, p),
                    (None, p) => Produced::nothing(p),
                })
            }
        })
        .await
}

/// Metadata of a new v2 table with columns `schema` and partition spec `partition` ('' =
/// unpartitioned), for the evolution tests.
#[cfg(test)]
pub(crate) fn test_metadata(schema: &str, partition: &str) -> TableMetadata {
    use crate::table::schema::{parse_partition, parse_schema, unpartitioned};
    let schema = parse_schema(schema).unwrap();
    let spec = if partition.is_empty() {
        unpartitioned()
    } else {
        parse_partition(partition, &schema).unwrap()
    };
    let creation = iceberg::TableCreation::builder()
        .name("t".into())
        .location("file:///tmp/t".into())
        .schema(schema)
        .partition_spec(spec)
        .format_version(iceberg::spec::FormatVersion::V2)
        .build();
    iceberg::spec::TableMetadataBuilder::from_table_creation(creation)
        .unwrap()
        .build()
        .unwrap()
        .metadata
}
