//! Property updates (`floe table set-property`): set and remove table properties in one
//! metadata-only commit.
//!
//! Known properties are validated ([`validate_property_update`]: every key floe reads, named in
//! the error with the value and what is expected) and stored in canonical form. The commit
//! itself needs none of the stored settings, so it succeeds on a table whose stored values are
//! bad (this is how such a table is repaired): bad retry settings fall back to Iceberg's
//! defaults with a warning. Only a bad `write.metadata.compression-codec` that the update
//! leaves in place stops it, since the new metadata file could not be written.
//!
//! The commit has no requirement, so it merges with a concurrent update of other keys; each
//! attempt validates the update again on the properties it commits on (the compaction settings
//! are checked together with the stored ones).

use std::collections::HashMap;

use iceberg::table::Table;
use iceberg::{TableIdent, TableUpdate};
use serde::Serialize;

use crate::base::cost::{Cost, Costed};
use crate::base::error::Result;
use crate::base::properties as props;
use crate::catalog::Catalog;
use crate::commit::{action, Committer, Produced};
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::table::ident_string;

/// What a property update changes (or, in a dry run, would change).
#[derive(Debug, Clone, Serialize)]
pub struct PropertiesChange {
    pub table: String,
    pub dry_run: bool,
    /// The table's properties after the update.
    pub properties: HashMap<String, String>,
}

impl Costed for PropertiesChange {
    /// A metadata-only change: no data or manifest file is read, written or deleted.
    fn cost(&self) -> Cost {
        Cost::default()
    }
}

/// `table set-property`: sets and removes table properties of one table.
#[derive(Clone)]
pub struct AlterPropertiesBuilder {
    ctx: Ctx,
    set: HashMap<String, String>,
    unset: Vec<String>,
}

impl AlterPropertiesBuilder {
    /// An update of `ident`'s properties that changes nothing until properties are given.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            set: HashMap::new(),
            unset: Vec::new(),
        }
    }

    /// Sets `key` to `value`.
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.insert(key.into(), value.into());
        self
    }

    /// Sets each `(key, value)`.
    pub fn with_properties<K: Into<String>, V: Into<String>>(
        mut self,
        set: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.set
            .extend(set.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Removes `key`.
    pub fn with_unset(mut self, key: impl Into<String>) -> Self {
        self.unset.push(key.into());
        self
    }

    /// Removes each key of `keys`.
    pub fn with_unsets<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
        self.unset.extend(keys.into_iter().map(Into::into));
        self
    }

    /// The properties the update leaves on `current` and its commit's updates, or the refusal
    /// naming the property.
    fn decide(
        &self,
        table: &str,
        current: &HashMap<String, String>,
    ) -> Result<(HashMap<String, String>, Vec<TableUpdate>)> {
        let set = validate_property_update(current, &self.set, &self.unset)?;
        let after = props::updated(current, &set, &self.unset);
        props::check_stored(
            Some(table),
            &after,
            &[props::METADATA_COMPRESSION_CODEC.key],
        )?;
        let mut updates = Vec::new();
        if !set.is_empty() {
            updates.push(TableUpdate::SetProperties { updates: set });
        }
        if !self.unset.is_empty() {
            updates.push(TableUpdate::RemoveProperties {
                removals: self.unset.clone(),
            });
        }
        Ok((after, updates))
    }
}

/// The table a property update was planned on.
pub struct AlterPropertiesWork {
    table: Table,
}

impl std::fmt::Debug for AlterPropertiesWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AlterPropertiesWork")
    }
}

/// A property update's plan: the properties it leaves.
pub type AlterPropertiesPlan = Planned<PropertiesChange, AlterPropertiesWork>;

impl Operation for AlterPropertiesBuilder {
    type Plan = AlterPropertiesPlan;
    type Metrics = PropertiesChange;

    /// Validates the update on the table's properties; commits nothing.
    async fn plan(&self) -> Result<AlterPropertiesPlan> {
        let table = self.ctx.load().await?;
        let name = ident_string(&self.ctx.ident);
        let (properties, _) = self.decide(&name, table.metadata().properties())?;
        let report = PropertiesChange {
            table: name,
            dry_run: true,
            properties,
        };
        Ok(Planned::new(
            report,
            snapshot_of(&table),
            AlterPropertiesWork { table },
        ))
    }

    /// Commits the update (nothing when it sets and removes nothing), validated again at each
    /// attempt on the properties it commits on.
    async fn apply(self, plan: AlterPropertiesPlan) -> Result<PropertiesChange> {
        let mut report = plan.report;
        report.dry_run = false;
        if self.set.is_empty() && self.unset.is_empty() {
            return Ok(report);
        }
        let name = report.table.as_str();
        let done = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(plan.work.table)
            .repairing()
            .commit_with(|t| {
                let decided = self.decide(name, t.metadata().properties());
                async move {
                    let (_, updates) = decided?;
                    Ok(Produced::commit(action::properties::properties(updates)))
                }
            })
            .await?;
        report.properties = done.table.metadata().properties().clone();
        Ok(report)
    }
}

/// Checks a property update: each value by its key's rule ([`props::validate_update`],
/// returned canonical), then, when the update touches compaction settings, the planner options
/// `floe compact` would start from ([`crate::operations::compact::plan::check_property_defaults`]).
pub fn validate_property_update(
    current: &HashMap<String, String>,
    set: &HashMap<String, String>,
    remove: &[String],
) -> Result<HashMap<String, String>> {
    let canonical = props::validate_update(set, remove)?;
    if props::touches_compaction(canonical.keys().chain(remove)) {
        let after = props::updated(current, &canonical, remove);
        crate::operations::compact::plan::check_property_defaults(&after)?;
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::properties::{GC_ENABLED, WRITE_TARGET_FILE_SIZE_BYTES};

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
