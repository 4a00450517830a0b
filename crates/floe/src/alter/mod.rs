//! Table alterations, committed as metadata-only changes through the commit path: property
//! updates (`table set-property`, here), partition evolution (`table evolve-partition`,
//! [`partition`]) and schema evolution (`table evolve-schema`, [`schema`]).
//!
//! Written as an `impl Catalog` block in this operation module, so that the catalog layer
//! (load, create, drop, compare-and-swap) never imports the layers above it.

pub mod partition;
pub mod schema;

use std::collections::HashMap;

use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{TableIdent, TableUpdate};

use crate::catalog::Catalog;
use crate::commit::producer::PreparedCommit;
use crate::commit::{action, Committer, Produced};
use crate::error::Result;
use crate::properties;
use crate::table::ident_string;

impl Catalog {
    /// Sets and removes table properties in one commit.
    ///
    /// Known properties are validated first ([`properties::validate_update`]: every key floe
    /// reads, named in the error with the value and what is expected) and stored in canonical
    /// form. The commit itself needs none of the stored settings, so it succeeds on a table
    /// whose stored values are bad (this is how such a table is repaired): bad retry settings
    /// fall back to Iceberg's defaults with a warning. Only a bad
    /// `write.metadata.compression-codec` that the update leaves in place stops it, since the
    /// new metadata file could not be written.
    pub async fn set_properties(
        &self,
        ident: &TableIdent,
        set: HashMap<String, String>,
        remove: Vec<String>,
    ) -> Result<Table> {
        let table = self.load_table(ident).await?;
        let set = validate_property_update(table.metadata().properties(), &set, &remove)?;
        let name = ident_string(ident);
        let mut updates = Vec::new();
        if !set.is_empty() {
            updates.push(TableUpdate::SetProperties {
                updates: set.clone(),
            });
        }
        if !remove.is_empty() {
            updates.push(TableUpdate::RemoveProperties {
                removals: remove.clone(),
            });
        }
        let committer = Committer::new(self, ident).on(table).repairing();
        let done = committer.commit_with(|table| {
            let updates = updates.clone();
            let mut after = table.metadata().properties().clone();
            after.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
            for k in &remove {
                after.remove(k);
            }
            let writable = properties::check_stored(
                Some(name.as_str()),
                &after,
                &[properties::METADATA_COMPRESSION_CODEC.key],
            );
            async move {
                writable?;
                Ok(Produced::commit(action::properties::properties(updates)))
            }
        });
        Ok(done.await?.table)
    }
}

pub(crate) use crate::commit::action::evolve::metadata_change;

impl Catalog {
    /// Commits the metadata change `plan` makes of `table`, planned again on the fresh metadata
    /// at each attempt (a conflict re-plans it, or fails with the plan's error).
    async fn commit_metadata(
        &self,
        ident: &TableIdent,
        table: Table,
        plan: impl Fn(&TableMetadata) -> Result<PreparedCommit>,
    ) -> Result<Table> {
        let done = Committer::new(self, ident)
            .on(table)
            .commit_with(|t| {
                let commit = plan(t.metadata());
                async move { Ok(Produced::commit(commit?)) }
            })
            .await?;
        Ok(done.table)
    }
}

/// Checks a property update: each value by its key's rule ([`properties::validate_update`],
/// returned canonical), then, when the update touches compaction settings, the planner options
/// `floe compact` would start from ([`crate::compact::plan::check_property_defaults`]).
pub fn validate_property_update(
    current: &HashMap<String, String>,
    set: &HashMap<String, String>,
    remove: &[String],
) -> Result<HashMap<String, String>> {
    let canonical = properties::validate_update(set, remove)?;
    if properties::touches_compaction(canonical.keys().chain(remove)) {
        let after = properties::updated(current, &canonical, remove);
        crate::compact::plan::check_property_defaults(&after)?;
    }
    Ok(canonical)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::{GC_ENABLED, WRITE_TARGET_FILE_SIZE_BYTES};

    #[test]
    fn compaction_defaults_are_checked_together_when_updated() {
        let current = HashMap::new();
        let set = HashMap::from([(
            "floe.compact.min-file-size-bytes".to_string(),
            "1GiB".to_string(),
        )]);
        let e = validate_property_update(&current, &set, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("floe.compact.min-file-size-bytes"), "{e}");
        // Raising the table's target along with it makes it consistent.
        let mut set = set;
        set.insert(
            WRITE_TARGET_FILE_SIZE_BYTES.key.into(),
            (2u64 << 30).to_string(),
        );
        validate_property_update(&current, &set, &[]).unwrap();
        let e = validate_property_update(
            &current,
            &set,
            &[
                GC_ENABLED.key.to_string(),
                WRITE_TARGET_FILE_SIZE_BYTES.key.to_string(),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("both set and unset"), "{e}");
    }
}
