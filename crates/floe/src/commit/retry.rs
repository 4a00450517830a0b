//! The one retry loop: prepare against the current table, commit through the catalog, and on a
//! lost race reload, re-prepare (which re-validates) and retry with exponential backoff and
//! jitter, per `commit.retry.num-retries`, `commit.retry.min-wait-ms`, `commit.retry.max-wait-ms`
//! and `commit.retry.total-timeout-ms` (Iceberg's names and defaults).

use std::future::Future;
use std::time::{Duration, Instant};

use iceberg::io::FileIO;
use iceberg::table::Table;
use iceberg::TableIdent;
use rand::Rng;

use crate::catalog::{ident_string, Catalog};
use crate::commit::producer::PreparedCommit;
use crate::error::{Error, Result};
use crate::properties::{self, u64_prop};

/// Retry policy read from table properties.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub num_retries: u64,
    pub min_wait: Duration,
    pub max_wait: Duration,
    pub total_timeout: Duration,
}

impl RetryPolicy {
    /// Reads the policy from a table's properties.
    pub fn from_table(table: &Table) -> Result<Self> {
        let p = table.metadata().properties();
        Ok(Self {
            num_retries: u64_prop(
                p,
                properties::COMMIT_RETRY_NUM_RETRIES,
                properties::COMMIT_RETRY_NUM_RETRIES_DEFAULT,
            )?,
            min_wait: Duration::from_millis(u64_prop(
                p,
                properties::COMMIT_RETRY_MIN_WAIT_MS,
                properties::COMMIT_RETRY_MIN_WAIT_MS_DEFAULT,
            )?),
            max_wait: Duration::from_millis(u64_prop(
                p,
                properties::COMMIT_RETRY_MAX_WAIT_MS,
                properties::COMMIT_RETRY_MAX_WAIT_MS_DEFAULT,
            )?),
            total_timeout: Duration::from_millis(u64_prop(
                p,
                properties::COMMIT_RETRY_TOTAL_TIMEOUT_MS,
                properties::COMMIT_RETRY_TOTAL_TIMEOUT_MS_DEFAULT,
            )?),
        })
    }

    /// Backoff before retry number `attempt` (1-based): min * 2^(attempt-1), capped, with
    /// up to 50% random jitter so racing writers spread out.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .min_wait
            .saturating_mul(1u32 << (attempt.saturating_sub(1)).min(20))
            .min(self.max_wait);
        let jitter = rand::rng().random_range(0.0..0.5);
        base.mul_f64(1.0 + jitter)
            .min(self.max_wait.max(self.min_wait))
    }
}

/// Prepares a commit with `prepare` on `base` (or the freshly loaded table when `None`) and
/// commits it; a lost race reloads the table and prepares again. Files an attempt wrote
/// (manifests, manifest lists) are deleted when that attempt loses.
pub async fn with_retry<F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Option<Table>,
    mut prepare: F,
) -> Result<Table>
where
    F: FnMut(Table) -> Fut,
    Fut: Future<Output = Result<PreparedCommit>>,
{
    let started = Instant::now();
    let mut attempt: u32 = 0;
    let mut base = base;
    loop {
        attempt += 1;
        let table = match base.take() {
            Some(t) => t,
            None => catalog.load_table(ident).await?,
        };
        let policy = RetryPolicy::from_table(&table)?;
        let file_io = table.file_io().clone();
        let prepared = prepare(table.clone()).await?;
        match catalog
            .commit(&table, &prepared.requirements, prepared.updates)
            .await
        {
            Ok(table) => return Ok(table),
            // The outcome is unknown: the files may be referenced by a commit that landed.
            Err(e @ Error::CommitStateUnknown { .. }) => return Err(e),
            Err(e) => {
                delete_quietly(&file_io, table.metadata().location(), prepared.written).await;
                let out_of_budget = u64::from(attempt) > policy.num_retries
                    || started.elapsed() >= policy.total_timeout;
                match e {
                    Error::CommitConflict { reason, .. } if !out_of_budget => {
                        let wait = policy.backoff(attempt);
                        tracing::info!(table = %ident_string(ident), attempt, ?wait, %reason, "commit conflict, retrying");
                        tokio::time::sleep(wait).await;
                    }
                    Error::CommitConflict { reason, .. } => {
                        return Err(Error::CommitConflict {
                            table: ident_string(ident),
                            attempts: attempt,
                            reason,
                        });
                    }
                    other => return Err(other),
                }
            }
        }
    }
}

/// Deletes files an operation wrote under the table `location`, logging (not failing) on error:
/// used to clean up after a failed attempt, where the files are unreferenced by construction.
/// The table's fence applies ([`crate::clean::fence::Fence::at`]): nothing outside `location`.
pub async fn delete_quietly(file_io: &FileIO, location: &str, paths: Vec<String>) {
    let fence = crate::clean::fence::Fence::at(location);
    crate::clean::delete_quietly(file_io, &fence, paths).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            num_retries: 4,
            min_wait: Duration::from_millis(100),
            max_wait: Duration::from_millis(1000),
            total_timeout: Duration::from_secs(60),
        };
        let first = p.backoff(1);
        assert!(
            first >= Duration::from_millis(100) && first <= Duration::from_millis(150),
            "{first:?}"
        );
        let third = p.backoff(3);
        assert!(
            third >= Duration::from_millis(400) && third <= Duration::from_millis(600),
            "{third:?}"
        );
        assert!(p.backoff(30) <= Duration::from_millis(1000));
    }
}
