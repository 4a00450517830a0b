//! Cleanup: files no snapshot needs any more.
//!
//! ```text
//!  reach (what snapshots need) ──┬─> orphans: listed on storage - reachable, older than T
//!  listing (what storage holds) ─┘   metadata_files: metadata.json out of the metadata log
//!                                    manifests: rewrite-manifests (compaction of metadata)
//! ```
//!
//! Every delete here is a set difference against [`reach::reachable`], computed from metadata
//! that is re-read right before deleting; anything unreadable aborts before the first delete.

pub mod listing;
pub mod manifests;
pub mod metadata_files;
pub mod orphans;
pub mod reach;

use std::sync::Arc;

use futures::StreamExt;
use iceberg::io::FileIO;

use crate::error::{Error, Result};
use crate::properties;

/// Concurrent deletes.
const DELETE_CONCURRENCY: usize = 32;

/// Receives (files done, files total) while deleting.
pub type DeleteProgress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// Outcome of a batch of deletes.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct DeleteStats {
    pub deleted: u64,
    pub failed: u64,
    /// The first failures (path: reason), for the report.
    pub failures: Vec<String>,
}

/// Keys per batched delete request (S3 `DeleteObjects` takes at most 1,000).
const DELETE_BATCH: usize = 1000;

/// Deletes `paths`. On object stores the deletes are batched (one `DeleteObjects` request per
/// 1,000 keys); a batch that fails is retried file by file so each failure is named. Locally,
/// `DELETE_CONCURRENCY` files at a time. A file that cannot be deleted is counted and reported,
/// not fatal: what it leaves is unreferenced, so a later run removes it.
pub async fn delete_files(
    file_io: &FileIO,
    paths: Vec<String>,
    progress: Option<DeleteProgress>,
) -> DeleteStats {
    let total = paths.len() as u64;
    let mut stats = DeleteStats::default();
    let batched = paths
        .first()
        .is_some_and(|p| crate::catalog::storage::is_s3(p));
    if !batched {
        delete_one_by_one(file_io, paths, &mut stats, total, progress.as_ref()).await;
        return stats;
    }
    for chunk in paths.chunks(DELETE_BATCH) {
        let keys = chunk.to_vec();
        match file_io.delete_stream(futures::stream::iter(keys)).await {
            Ok(()) => {
                stats.deleted += chunk.len() as u64;
                if let Some(p) = &progress {
                    p(stats.deleted + stats.failed, total);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "batched delete failed; deleting one by one");
                delete_one_by_one(
                    file_io,
                    chunk.to_vec(),
                    &mut stats,
                    total,
                    progress.as_ref(),
                )
                .await;
            }
        }
    }
    stats
}

async fn delete_one_by_one(
    file_io: &FileIO,
    paths: Vec<String>,
    stats: &mut DeleteStats,
    total: u64,
    progress: Option<&DeleteProgress>,
) {
    let mut results = futures::stream::iter(paths.into_iter().map(|p| {
        let io = file_io.clone();
        async move {
            let r = io.delete(&p).await;
            (p, r)
        }
    }))
    .buffer_unordered(DELETE_CONCURRENCY);
    while let Some((path, r)) = results.next().await {
        match r {
            Ok(()) => stats.deleted += 1,
            Err(e) => {
                stats.failed += 1;
                tracing::warn!(%path, error = %e, "could not delete");
                if stats.failures.len() < 20 {
                    stats.failures.push(format!(
                        "{path}: {}",
                        crate::catalog::storage::first_line(&e.to_string())
                    ));
                }
            }
        }
        if let Some(p) = progress {
            p(stats.deleted + stats.failed, total);
        }
    }
}

/// Refuses file deletion on a table whose `gc.enabled` is false (Iceberg's rule: such tables
/// may share files with other tables).
pub(crate) fn check_gc_enabled(table: &iceberg::table::Table, operation: &str) -> Result<()> {
    if properties::bool_prop(table.metadata().properties(), properties::GC_ENABLED, true)? {
        Ok(())
    } else {
        Err(Error::Refused {
            operation: operation.to_string(),
            reason: format!(
                "table property {} is false (files may be shared with other tables)",
                properties::GC_ENABLED
            ),
        })
    }
}

/// True when `path` lies under the directory `location` (compared without scheme differences).
pub fn is_under(path: &str, location: &str) -> bool {
    let eq = std::collections::HashMap::new();
    let p = listing::SplitPath::parse(path, &eq);
    let l = listing::SplitPath::parse(location, &eq);
    if p.mismatches(&l) {
        return false;
    }
    let dir = l.path.trim_end_matches('/');
    p.path.len() > dir.len() && p.path.starts_with(dir) && p.path.as_bytes()[dir.len()] == b'/'
}

#[cfg(test)]
mod tests {
    use super::is_under;

    #[test]
    fn under_location() {
        assert!(is_under("file:///w/ns/t/data/a.parquet", "file:///w/ns/t"));
        assert!(is_under("/w/ns/t/data/a.parquet", "file:///w/ns/t/"));
        assert!(!is_under("file:///w/ns/t2/a.parquet", "file:///w/ns/t"));
        assert!(!is_under("file:///w/ns/t", "file:///w/ns/t"));
        assert!(!is_under("s3://b/w/ns/t/a", "s3://c/w/ns/t"));
    }
}
