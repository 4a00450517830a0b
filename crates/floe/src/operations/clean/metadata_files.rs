//! `clean-metadata`: delete `metadata.json` files that fell out of the metadata log (beyond
//! `write.metadata.previous-versions-max`) and are older than the current version. A file with
//! a higher version than the current one may belong to a commit in flight and is kept; the
//! pointer is re-read right before deleting.

use std::collections::HashSet;
use std::time::Instant;

use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::Result;
use crate::catalog::{ident_string, Catalog};
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::storage::delete::{delete_files, DeleteStats};
use crate::storage::listing::{list_files, SplitPath};
use crate::table::reach::metadata_files;

/// What `clean-metadata` found and did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CleanMetadataMetrics {
    pub table: String,
    pub dry_run: bool,
    pub metadata_files: u64,
    /// In the metadata log or current.
    pub kept: u64,
    /// Newer than the current version (a commit in flight).
    pub kept_newer: u64,
    pub removable: u64,
    pub removable_bytes: u64,
    pub deleted: DeleteStats,
    pub duration_ms: u64,
}

/// The version number of a `NNNNN-<uuid>.metadata.json` (or `vN.metadata.json`) file name.
pub fn metadata_version(path: &str) -> Option<u64> {
    let name = path.rsplit('/').next()?;
    if !name.contains(".metadata.json") {
        return None;
    }
    let digits: String = name
        .trim_start_matches('v')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn key(path: &str) -> String {
    SplitPath::parse(path, &Default::default()).path
}

/// The metadata files `table` still needs (current + metadata log), by path key.
fn needed(table: &iceberg::table::Table) -> HashSet<String> {
    metadata_files(table).files.keys().map(|p| key(p)).collect()
}

impl Costed for CleanMetadataMetrics {
    fn cost(&self) -> Cost {
        Cost {
            files_to_delete: self.removable,
            bytes_to_delete: self.removable_bytes,
            ..Cost::default()
        }
    }
}

/// `clean-metadata` on one table: metadata.json files no longer in the metadata log.
#[derive(Clone)]
pub struct CleanMetadataBuilder {
    ctx: Ctx,
}

impl CleanMetadataBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
        }
    }
}

/// The metadata files a `clean-metadata` plan found removable, and the table it listed.
pub struct CleanMetadataWork {
    table: Table,
    doomed: Vec<String>,
    planning: std::time::Duration,
}

impl std::fmt::Debug for CleanMetadataWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CleanMetadataWork({} files)", self.doomed.len())
    }
}

/// A `clean-metadata` plan: the dry-run report and the files it would delete.
pub type CleanMetadataPlan = Planned<CleanMetadataMetrics, CleanMetadataWork>;

impl Operation for CleanMetadataBuilder {
    type Plan = CleanMetadataPlan;
    type Metrics = CleanMetadataMetrics;

    /// Lists the metadata directory and sorts its metadata.json files, deleting nothing.
    async fn plan(&self) -> Result<CleanMetadataPlan> {
        let started = Instant::now();
        let table = self.ctx.load().await?;
        let md = table.metadata();
        let current = table.metadata_location_result()?.to_string();
        let current_version = metadata_version(&current).unwrap_or(u64::MAX);
        let keep = needed(&table);
        let dir = format!("{}/metadata", md.location().trim_end_matches('/'));
        let listed: Vec<_> = list_files(table.file_io(), &dir)
            .await?
            .into_iter()
            .filter(|f| metadata_version(&f.path).is_some())
            .collect();
        let mut result = CleanMetadataMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            metadata_files: listed.len() as u64,
            kept: 0,
            kept_newer: 0,
            removable: 0,
            removable_bytes: 0,
            deleted: DeleteStats::default(),
            duration_ms: 0,
        };
        let mut doomed = Vec::new();
        for f in listed {
            if keep.contains(&key(&f.path)) {
                result.kept += 1;
            } else if metadata_version(&f.path).is_some_and(|v| v >= current_version) {
                result.kept_newer += 1;
            } else {
                result.removable += 1;
                result.removable_bytes += f.size;
                doomed.push(f.path);
            }
        }
        result.duration_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            result,
            snapshot_id,
            CleanMetadataWork {
                table,
                doomed,
                planning: started.elapsed(),
            },
        ))
    }

    /// Deletes the planned files the table, reloaded now, no longer keeps.
    async fn apply(self, plan: CleanMetadataPlan) -> Result<CleanMetadataMetrics> {
        let started = Instant::now();
        let mut result = plan.report;
        result.dry_run = false;
        let CleanMetadataWork {
            table,
            mut doomed,
            planning,
        } = plan.work;
        if !doomed.is_empty() {
            // The pointer may have moved since the listing; never delete what the new
            // metadata keeps.
            let fresh = needed(&self.ctx.load().await?);
            doomed.retain(|p| !fresh.contains(&key(p)));
            let fence = crate::storage::fence::Fence::own(&table);
            result.deleted = delete_files(table.file_io(), &fence, doomed, None).await;
        }
        result.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::metadata_version;

    #[test]
    fn versions_from_names() {
        assert_eq!(
            metadata_version("file:///w/t/metadata/00012-ab-cd.metadata.json"),
            Some(12)
        );
        assert_eq!(metadata_version("/w/t/metadata/v3.metadata.json"), Some(3));
        assert_eq!(metadata_version("/w/t/metadata/snap-1-1-x.avro"), None);
    }
}
