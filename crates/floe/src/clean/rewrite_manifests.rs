//! `rewrite-manifests`: after many commits a table has many small manifests, and every reader
//! opens each one to plan a scan. This merges them into manifests of
//! `commit.manifest.target-size-bytes` (8 MiB), clustered by partition so a filtered scan opens
//! few of them, in one `replace` commit through the normal commit path (a concurrent commit
//! makes it re-read and rewrite from the new state; no data file is touched).

use std::time::Instant;

use iceberg::spec::ManifestContentType;
use iceberg::TableIdent;

use crate::catalog::{ident_string, Catalog};
use crate::commit::{Committer, SnapshotUpdate};
use crate::error::Result;
use crate::operation::{Cost, Costed};
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
pub struct RewriteManifestsBuilder<'a> {
    catalog: &'a Catalog,
    ident: TableIdent,
    dry_run: bool,
}

impl<'a> RewriteManifestsBuilder<'a> {
    pub fn new(catalog: &'a Catalog, ident: TableIdent) -> Self {
        Self {
            catalog,
            ident,
            dry_run: false,
        }
    }

    /// Plans and reports without changing anything.
    pub fn with_dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Runs it.
    /// What `execute` would do, changing nothing (the dry run), with its [`Cost`].
    pub async fn plan(&self) -> Result<RewriteManifestsMetrics> {
        self.clone().with_dry_run(true).execute().await
    }

    pub async fn execute(self) -> Result<RewriteManifestsMetrics> {
        rewrite_manifests(self.catalog, &self.ident, self.dry_run).await
    }
}

/// Rewrites the manifests of `ident` (a no-op when no (content, spec) has two or more).
async fn rewrite_manifests(
    catalog: &Catalog,
    ident: &TableIdent,
    dry_run: bool,
) -> Result<RewriteManifestsMetrics> {
    let started = Instant::now();
    let table = catalog.load_table(ident).await?;
    let before: Vec<_> = current_manifests(&table)
        .await?
        .into_iter()
        .filter(|m| m.has_added_files() || m.has_existing_files())
        .collect();
    let mut result = RewriteManifestsMetrics {
        table: ident_string(ident),
        dry_run,
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
    let worth_it = keys.windows(2).any(|w| w[0] == w[1]);
    result.worth_rewriting = worth_it;
    let mut distinct = keys.clone();
    distinct.dedup();
    result.min_manifests_after = distinct.len() as u64;
    if worth_it && !dry_run {
        let update = SnapshotUpdate::rewrite_manifests(&table);
        let outcome = Committer::new(catalog, ident)
            .on(table)
            .commit(update)
            .await?;
        let after = current_manifests(&outcome.table).await?;
        result.manifests_after = after.len() as u64;
        result.bytes_after = after.iter().map(|m| m.manifest_length.max(0) as u64).sum();
        result.snapshot_id = Some(outcome.snapshot_id);
    }
    result.duration_ms = started.elapsed().as_millis() as u64;
    Ok(result)
}
