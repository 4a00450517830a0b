//! The one retry loop: prepare against the current table, commit through the catalog, and on a
//! lost race reload, re-prepare (which re-validates) and retry with exponential backoff and
//! jitter, per `commit.retry.num-retries`, `commit.retry.min-wait-ms`, `commit.retry.max-wait-ms`
//! and `commit.retry.total-timeout-ms` (Iceberg's names and defaults).
//!
//! A bad stored value of a property the commit path reads fails the commit before anything is
//! written, with an error naming the table, the key and the repair command; except for a
//! property update ([`with_retry_repairing`]), which must be able to fix such a table: it never
//! needs those values, and retries with Iceberg's defaults (and a warning) when the stored retry
//! settings are bad.

use std::collections::HashMap;
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

/// The retry settings: key and Iceberg's default.
const RETRY_KEYS: [(&str, u64); 4] = [
    (
        properties::COMMIT_RETRY_NUM_RETRIES,
        properties::COMMIT_RETRY_NUM_RETRIES_DEFAULT,
    ),
    (
        properties::COMMIT_RETRY_MIN_WAIT_MS,
        properties::COMMIT_RETRY_MIN_WAIT_MS_DEFAULT,
    ),
    (
        properties::COMMIT_RETRY_MAX_WAIT_MS,
        properties::COMMIT_RETRY_MAX_WAIT_MS_DEFAULT,
    ),
    (
        properties::COMMIT_RETRY_TOTAL_TIMEOUT_MS,
        properties::COMMIT_RETRY_TOTAL_TIMEOUT_MS_DEFAULT,
    ),
];

/// Properties every commit through the SQL catalog reads besides the retry settings: iceberg
/// writes `metadata.json` per `write.metadata.compression-codec` and trims the log per
/// `previous-versions-max`; floe deletes trimmed files per `delete-after-commit.enabled`.
const COMMIT_PATH_KEYS: [&str; 3] = [
    properties::METADATA_COMPRESSION_CODEC,
    properties::METADATA_PREVIOUS_VERSIONS_MAX,
    properties::METADATA_DELETE_AFTER_COMMIT,
];

impl RetryPolicy {
    /// Iceberg's defaults.
    pub fn iceberg_defaults() -> Self {
        Self::from_values(RETRY_KEYS.map(|(_, default)| default))
    }

    fn from_values([num_retries, min_wait, max_wait, total_timeout]: [u64; 4]) -> Self {
        Self {
            num_retries,
            min_wait: Duration::from_millis(min_wait),
            max_wait: Duration::from_millis(max_wait),
            total_timeout: Duration::from_millis(total_timeout),
        }
    }

    /// Reads the policy from a table's properties; a bad value is an error naming the table,
    /// the key and the repair.
    pub fn from_table(table: &Table) -> Result<Self> {
        let p = table.metadata().properties();
        let mut values = [0u64; 4];
        for (slot, (key, default)) in values.iter_mut().zip(RETRY_KEYS) {
            *slot = u64_prop(p, key, default)
                .map_err(|e| e.for_table(&ident_string(table.identifier())))?;
        }
        Ok(Self::from_values(values))
    }

    /// Reads the policy, taking Iceberg's default (with a warning) for each bad value: for the
    /// commit that repairs the table.
    pub fn from_table_or_defaults(table: &Table) -> Self {
        Self::or_defaults(
            &ident_string(table.identifier()),
            table.metadata().properties(),
        )
    }

    fn or_defaults(table: &str, p: &HashMap<String, String>) -> Self {
        Self::from_values(RETRY_KEYS.map(|(key, default)| {
            u64_prop(p, key, default).unwrap_or_else(|e| {
                tracing::warn!(
                    "{}; this property update retries with Iceberg's default {key}={default}",
                    e.for_table(table)
                );
                default
            })
        }))
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

/// How a commit treats bad stored values of the properties the commit path reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadSettings {
    /// Fail before preparing, naming the property and the repair.
    Fail,
    /// A property update: carry on with Iceberg's defaults, warning.
    UseDefaults,
}

/// Prepares a commit with `prepare` on `base` (or the freshly loaded table when `None`) and
/// commits it; a lost race reloads the table and prepares again. Files an attempt wrote
/// (manifests, manifest lists) are deleted when that attempt loses. A bad stored value of a
/// property the commit reads fails it first, naming the table, the key and the repair.
pub async fn with_retry<F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Option<Table>,
    prepare: F,
) -> Result<Table>
where
    F: FnMut(Table) -> Fut,
    Fut: Future<Output = Result<PreparedCommit>>,
{
    retry_loop(catalog, ident, base, prepare, BadSettings::Fail).await
}

/// [`with_retry`] for a commit that only updates table properties: it must succeed on a table
/// whose stored settings are bad (it is how such a table is repaired), so bad retry settings
/// fall back to Iceberg's defaults with a warning instead of failing.
pub async fn with_retry_repairing<F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Option<Table>,
    prepare: F,
) -> Result<Table>
where
    F: FnMut(Table) -> Fut,
    Fut: Future<Output = Result<PreparedCommit>>,
{
    retry_loop(catalog, ident, base, prepare, BadSettings::UseDefaults).await
}

async fn retry_loop<F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Option<Table>,
    mut prepare: F,
    bad_settings: BadSettings,
) -> Result<Table>
where
    F: FnMut(Table) -> Fut,
    Fut: Future<Output = Result<PreparedCommit>>,
{
    let name = ident_string(ident);
    let started = Instant::now();
    let mut attempt: u32 = 0;
    let mut base = base;
    loop {
        attempt += 1;
        let table = match base.take() {
            Some(t) => t,
            None => catalog.load_table(ident).await?,
        };
        let policy = match bad_settings {
            BadSettings::Fail => {
                properties::check_stored(
                    Some(name.as_str()),
                    table.metadata().properties(),
                    &COMMIT_PATH_KEYS,
                )?;
                RetryPolicy::from_table(&table)?
            }
            BadSettings::UseDefaults => {
                RetryPolicy::or_defaults(&name, table.metadata().properties())
            }
        };
        let file_io = table.file_io().clone();
        // Getters deep in the producers see only the property map: name the table here.
        let prepared = prepare(table.clone())
            .await
            .map_err(|e| e.for_table(&name))?;
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
                        tracing::info!(table = %name, attempt, ?wait, %reason, "commit conflict, retrying");
                        tokio::time::sleep(wait).await;
                    }
                    Error::CommitConflict { reason, .. } => {
                        return Err(Error::CommitConflict {
                            table: name,
                            attempts: attempt,
                            reason,
                        });
                    }
                    other => return Err(other.for_table(&name)),
                }
            }
        }
    }
}

/// Deletes files an operation wrote under the table `location`, logging (not failing) on error:
/// used to clean up after a failed attempt, where the files are unreferenced by construction.
/// The table's fence applies ([`crate::storage::fence::Fence::at`]): nothing outside `location`.
pub async fn delete_quietly(file_io: &FileIO, location: &str, paths: Vec<String>) {
    let fence = crate::storage::fence::Fence::at(location);
    crate::storage::delete::delete_quietly(file_io, &fence, paths).await;
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

    #[test]
    fn bad_retry_settings_fall_back_to_iceberg_defaults_one_by_one() {
        let props = HashMap::from([
            (
                properties::COMMIT_RETRY_NUM_RETRIES.to_string(),
                "-1".to_string(),
            ),
            (
                properties::COMMIT_RETRY_MIN_WAIT_MS.to_string(),
                "7".to_string(),
            ),
            (
                properties::COMMIT_RETRY_MAX_WAIT_MS.to_string(),
                "soon".to_string(),
            ),
        ]);
        let p = RetryPolicy::or_defaults("n.p", &props);
        let d = RetryPolicy::iceberg_defaults();
        assert_eq!(p.num_retries, d.num_retries);
        assert_eq!(
            p.min_wait,
            Duration::from_millis(7),
            "valid values are kept"
        );
        assert_eq!(p.max_wait, d.max_wait);
        assert_eq!(p.total_timeout, d.total_timeout);
        assert_eq!(d.num_retries, 4);
        assert_eq!(d.min_wait, Duration::from_millis(100));
    }
}
