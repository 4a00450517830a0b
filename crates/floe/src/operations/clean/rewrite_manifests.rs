//! `rewrite-manifests`: after many commits a table has many small manifests, and every reader
//! opens each one to plan a scan. This merges them into manifests of
//! `commit.manifest.target-size-bytes` (8 MiB), clustered by partition so a filtered scan opens
//! few of them, in one `replace` commit through the normal commit path (a concurrent commit
//! makes it re-read and rewrite from the new state; no data file is touched).

use std::time::Instant;

use iceberg::spec::ManifestContentType;
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::Result;
use crate::catalog::{ident_string, Catalog};
use crate::commit::{Committer, SnapshotUpdate};
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::table::manifests::current_manifests;

/// What `rewrite-manifests` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RewriteManifestsMetrics {
    pub table: String,
    pub dry_run: bool,
    pub manifests_before: u64,
    pub manifests_after: u64,
    pub data_manifests_before: u64,
    pub delete_manifests_before: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Whether some (content, spec) has two or more manifests: a rewrite would merge them.
    pub worth_rewriting: bool,
    /// Manifests a rewrite would leave at least: one per (content, spec).
    pub min_manifests_after: u64,
    /// The new snapshot, when one was committed.
    pub snapshot_id: Option<i64>,
    pub duration_ms: u64,
}

impl Costed for RewriteManifestsMetrics {
    /// Every manifest read and, when worth it, rewritten (the old ones leave the table; expiry
    /// deletes them).
    fn cost(&self) -> Cost {
        if !self.worth_rewriting {
            return Cost::default();
        }
        let (files, bytes) = if self.snapshot_id.is_some() {
            (self.manifests_after, self.bytes_after)
        } else {
            (self.min_manifests_after, self.bytes_before)
        };
        Cost {
            files_to_read: self.manifests_before,
            bytes_to_read: self.bytes_before,
            files_to_write: files,
            bytes_to_write: bytes,
            ..Cost::default()
        }
    }
}

/// `rewrite-manifests` on one table: manifests clustered by partition at the target size.
#[derive(Clone)]
pub struct RewriteManifestsBuilder {
    ctx: Ctx,
}

impl RewriteManifestsBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
        }
    }
}

/// The table a manifest rewrite was planned on.
pub struct RewriteManifestsWork {
    table: Table,
    planning: std::time::Duration,
}

impl std::fmt::Debug for RewriteManifestsWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RewriteManifestsWork")
    }
}

/// A `rewrite-manifests` plan: the dry-run report (manifests now, at least after).
pub type RewriteManifestsPlan = Planned<RewriteManifestsMetrics, RewriteManifestsWork>;

impl Operation for RewriteManifestsBuilder {
    type Plan = RewriteManifestsPlan;
    type Metrics = RewriteManifestsMetrics;

    /// Reads the current manifests and decides whether a rewrite would merge any.
    async fn plan(&self) -> Result<RewriteManifestsPlan> {
        let started = Instant::now();
        let table = self.ctx.load().await?;
        // Its manifests would carry a placeholder for the column's type in their header.
        crate::table::opaque::refuse(
            table.metadata().current_schema(),
            &format!(
                "rewrite the manifests of '{}'",
                ident_string(&self.ctx.ident)
            ),
            "write",
        )?;
        let before: Vec<_> = current_manifests(&table)
            .await?
            .into_iter()
            .filter(|m| m.has_added_files() || m.has_existing_files())
            .collect();
        let mut result = RewriteManifestsMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            manifests_before: before.len() as u64,
            manifests_after: before.len() as u64,
            data_manifests_before: before
                .iter()
                .filter(|m| m.content == ManifestContentType::Data)
                .count() as u64,
            delete_manifests_before: before
                .iter()
                .filter(|m| m.content == ManifestContentType::Deletes)
                .count() as u64,
            bytes_before: before.iter().map(|m| m.manifest_length.max(0) as u64).sum(),
            bytes_after: 0,
            worth_rewriting: false,
            min_manifests_after: 0,
            snapshot_id: None,
            duration_ms: 0,
        };
        result.bytes_after = result.bytes_before;
        let mut keys: Vec<_> = before
            .iter()
            .map(|m| (m.content == ManifestContentType::Data, m.partition_spec_id))
            .collect();
        keys.sort_unstable();
        result.worth_rewriting = keys.windows(2).any(|w| w[0] == w[1]);
        keys.dedup();
        result.min_manifests_after = keys.len() as u64;
        result.duration_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            result,
            snapshot_id,
            RewriteManifestsWork {
                table,
                planning: started.elapsed(),
            },
        ))
    }

    /// Rewrites the manifests (a no-op when no (content, spec) has two or more); the commit
    /// rewrites the manifests of the table as it then is.
    async fn apply(self, plan: RewriteManifestsPlan) -> Result<RewriteManifestsMetrics> {
        let started = Instant::now();
        let mut result = plan.report;
        result.dry_run = false;
        let RewriteManifestsWork { table, planning } = plan.work;
        if result.worth_rewriting {
            let update = SnapshotUpdate::rewrite_manifests(&table);
            let outcome = Committer::new(&self.ctx.catalog, &self.ctx.ident)
                .on(table)
                .commit(update)
                .await?;
            let after = current_manifests(&outcome.table).await?;
            result.manifests_after = after.len() as u64;
            result.bytes_after = after.iter().map(|m| m.manifest_length.max(0) as u64).sum();
            result.snapshot_id = Some(outcome.snapshot_id);
        }
        result.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(result)
    }
}
