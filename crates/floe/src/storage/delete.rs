//! Deletes, batched on object stores and concurrent locally, every one checked against a
//! table's [`Fence`]: the only way floe deletes a file.

use futures::StreamExt;
use iceberg::io::FileIO;

use crate::base::cost::{Progress, ProgressFn};
use crate::storage::fence::Fence;

/// Concurrent deletes.
const DELETE_CONCURRENCY: usize = 32;

/// Outcome of a batch of deletes.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct DeleteStats {
    pub deleted: u64,
    pub failed: u64,
    /// Paths the table's fence refused (outside its location, another table's, the catalog's).
    pub refused: u64,
    /// The first failures (path: reason), for the report.
    pub failures: Vec<String>,
}

/// Keys per batched delete request (S3 `DeleteObjects` takes at most 1,000).
const DELETE_BATCH: usize = 1000;

/// Deletes `paths`. On object stores the deletes are batched (S3: one `DeleteObjects` request
/// per 1,000 keys; GCS: JSON batches of 100; Azure: Blob Batch requests of 256); a batch that fails is retried file by file so each failure is named. Locally,
/// `DELETE_CONCURRENCY` files at a time. A file that cannot be deleted is counted and reported,
/// not fatal: what it leaves is unreferenced, so a later run removes it. Every path is checked
/// against `fence` first (callers split their candidates with [`Fence::partition`] to report
/// what was kept; this second check makes the rule hold for every caller).
pub async fn delete_files(
    file_io: &FileIO,
    fence: &Fence,
    paths: Vec<String>,
    progress: Option<ProgressFn>,
) -> DeleteStats {
    let mut stats = DeleteStats::default();
    let (paths, kept) = fence.partition(paths);
    if kept.total() > 0 {
        tracing::warn!(
            table = fence.table(),
            refused = kept.total(),
            "paths outside the table's fence were not deleted"
        );
        stats.refused = kept.total();
        stats.failures.extend(kept.sample.into_iter().take(20));
    }
    let total = paths.len() as u64;
    let batched = paths
        .first()
        .is_some_and(|p| crate::storage::is_object_store(p));
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
                    p(&Progress::deleted(stats.deleted + stats.failed, total));
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
    progress: Option<&ProgressFn>,
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
                        crate::storage::first_line(&e.to_string())
                    ));
                }
            }
        }
        if let Some(p) = progress {
            p(&Progress::deleted(stats.deleted + stats.failed, total));
        }
    }
}

/// Deletes files an operation wrote itself after it failed, logging (not failing) on error:
/// they are unreferenced by construction. The table's own fence still applies.
pub async fn delete_quietly(file_io: &FileIO, fence: &Fence, paths: Vec<String>) {
    if paths.is_empty() {
        return;
    }
    let stats = delete_files(file_io, fence, paths, None).await;
    if stats.failed > 0 || stats.refused > 0 {
        tracing::warn!(
            table = fence.table(),
            failed = stats.failed,
            refused = stats.refused,
            first = ?stats.failures.first(),
            "some files of a failed operation were not deleted; they are orphans now"
        );
    }
}

/// Deletes files an operation wrote under the table `location`, logging (not failing) on error:
/// used to clean up after a failed attempt, where the files are unreferenced by construction.
/// The table's fence applies ([`Fence::at`]): nothing outside `location`.
pub async fn delete_quietly_in(file_io: &FileIO, location: &str, paths: Vec<String>) {
    let fence = Fence::at(location);
    delete_quietly(file_io, &fence, paths).await;
}
