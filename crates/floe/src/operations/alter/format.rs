//! `table upgrade`: raises a table's Iceberg format version, a metadata-only change, as Spark's
//! `ALTER TABLE t SET TBLPROPERTIES ('format-version'='3')` and Java's
//! `UpdateProperties`/`upgradeFormatVersion` do (table spec, "Format Versioning": tables are
//! upgraded in place, by a new metadata file; no data or manifest file is rewritten, and files
//! written under the older version stay valid).
//!
//! A downgrade is refused (the spec has none: a v2 reader cannot know that v3 features were
//! not used). The commit requires the table's UUID only; an attempt that finds the version
//! already raised (by a concurrent upgrade) commits nothing.

use iceberg::spec::{FormatVersion, TableMetadata};
use iceberg::{TableIdent, TableRequirement, TableUpdate};
use serde::Serialize;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::commit::producer::PreparedCommit;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::table::{format_version, ident_string};

/// What an upgrade changes (or, in a dry run, would change).
#[derive(Debug, Clone, Serialize)]
pub struct FormatUpgrade {
    pub table: String,
    pub dry_run: bool,
    /// The format version before and after.
    pub from: u8,
    pub to: u8,
    /// Whether a new metadata file is (or would be) committed: false when the table is at the
    /// version already.
    pub changed: bool,
    /// What the new version changes for the table, one line each.
    pub changes: Vec<String>,
}

impl Costed for FormatUpgrade {
    /// A metadata-only change: no data or manifest file is read, written or deleted.
    fn cost(&self) -> Cost {
        Cost::default()
    }
}

/// `table upgrade --format-version N`.
#[derive(Clone)]
pub struct UpgradeFormatBuilder {
    ctx: Ctx,
    to: u8,
}

impl UpgradeFormatBuilder {
    /// An upgrade of `ident` to format 2 (set another with [`Self::with_format_version`]).
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            to: 2,
        }
    }

    /// The format version to upgrade to: 2 or 3.
    pub fn with_format_version(mut self, version: u8) -> Self {
        self.to = version;
        self
    }

    /// The commit (none when the table is at `to` already) and its report, or the refusal.
    fn decide(&self, md: &TableMetadata) -> Result<(Option<PreparedCommit>, FormatUpgrade)> {
        let table = ident_string(&self.ctx.ident);
        let from = format_version(md);
        let target = match self.to {
            2 => FormatVersion::V2,
            3 => FormatVersion::V3,
            other => {
                return Err(Error::invalid_option(
                    "--format-version",
                    other.to_string(),
                    "a table can be upgraded to format 2 or 3",
                ))
            }
        };
        if self.to < from {
            return Err(Error::Refused {
                operation: format!("change '{table}' to format v{}", self.to),
                reason: format!(
                    "it is a format v{from} table and Iceberg has no downgrade (readers of v{} \
                     could not tell whether v{from} features are in use)",
                    self.to
                ),
            });
        }
        let changes = (from + 1..=self.to).flat_map(changes_of).collect();
        let report = FormatUpgrade {
            table,
            dry_run: true,
            from,
            to: self.to,
            changed: self.to > from,
            changes,
        };
        if !report.changed {
            return Ok((None, report));
        }
        let commit = PreparedCommit {
            requirements: vec![TableRequirement::UuidMatch { uuid: md.uuid() }],
            updates: vec![TableUpdate::UpgradeFormatVersion {
                format_version: target,
            }],
            written: vec![],
        };
        Ok((Some(commit), report))
    }
}

/// What reaching format `version` changes (table spec, "Version 2" and "Version 3").
fn changes_of(version: u8) -> Vec<String> {
    match version {
        2 => vec![
            "commits get sequence numbers; manifests and manifest lists are written in the v2 \
             layout from now on (existing v1 manifests stay valid)"
                .to_string(),
            "row-level deletes become possible: position and equality delete files (delete, \
             upserts, CDC ingest)"
                .to_string(),
        ],
        3 => vec![
            "new deletes are deletion vectors (one Puffin blob per data file); existing \
             position delete files stay valid until compaction rewrites them"
                .to_string(),
            "row lineage starts: next-row-id is 0 and every later commit assigns row ids to \
             the rows it adds (rows written before the upgrade have no row id)"
                .to_string(),
            "new types (nanosecond timestamps, variant, geometry, geography, unknown) and \
             default values become possible; readers must support format v3"
                .to_string(),
        ],
        _ => vec![],
    }
}

/// The table an upgrade was planned on.
pub struct UpgradeFormatWork {
    table: iceberg::table::Table,
}

impl std::fmt::Debug for UpgradeFormatWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UpgradeFormatWork")
    }
}

/// An upgrade's plan: the versions and what changes.
pub type UpgradeFormatPlan = Planned<FormatUpgrade, UpgradeFormatWork>;

impl Operation for UpgradeFormatBuilder {
    type Plan = UpgradeFormatPlan;
    type Metrics = FormatUpgrade;

    /// Decides the upgrade on the table's metadata (a downgrade is refused); commits nothing.
    async fn plan(&self) -> Result<UpgradeFormatPlan> {
        let table = self.ctx.load().await?;
        let (_, report) = self.decide(table.metadata())?;
        Ok(Planned::new(
            report,
            snapshot_of(&table),
            UpgradeFormatWork { table },
        ))
    }

    /// Commits the new version, decided again at each attempt (a concurrent upgrade to the
    /// same version leaves nothing to commit; one past it is a refused downgrade).
    async fn apply(self, plan: UpgradeFormatPlan) -> Result<FormatUpgrade> {
        let planned = plan.report;
        if !planned.changed {
            return Ok(FormatUpgrade {
                dry_run: false,
                ..planned
            });
        }
        let done = super::commit_metadata(&self.ctx, plan.work.table, |md| self.decide(md)).await?;
        Ok(FormatUpgrade {
            dry_run: false,
            ..done.plan
        })
    }
}
