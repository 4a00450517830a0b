//! The retry policy of the commit loop ([`crate::commit::Committer`]): exponential backoff
//! with jitter, per `commit.retry.num-retries`, `commit.retry.min-wait-ms`,
//! `commit.retry.max-wait-ms` and `commit.retry.total-timeout-ms` (Iceberg's names and
//! defaults), and the properties every commit reads.

use std::collections::HashMap;
use std::time::Duration;

use iceberg::table::Table;
use rand::Rng;

use crate::base::error::Result;
use crate::base::properties::{self, u64_prop};
use crate::table::ident_string;

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
        properties::COMMIT_RETRY_NUM_RETRIES.key,
        properties::COMMIT_RETRY_NUM_RETRIES_DEFAULT,
    ),
    (
        properties::COMMIT_RETRY_MIN_WAIT_MS.key,
        properties::COMMIT_RETRY_MIN_WAIT_MS_DEFAULT,
    ),
    (
        properties::COMMIT_RETRY_MAX_WAIT_MS.key,
        properties::COMMIT_RETRY_MAX_WAIT_MS_DEFAULT,
    ),
    (
        properties::COMMIT_RETRY_TOTAL_TIMEOUT_MS.key,
        properties::COMMIT_RETRY_TOTAL_TIMEOUT_MS_DEFAULT,
    ),
];

/// Properties every commit through the SQL catalog reads besides the retry settings: iceberg
/// writes `metadata.json` per `write.metadata.compression-codec` and trims the log per
/// `previous-versions-max`; floe deletes trimmed files per `delete-after-commit.enabled`.
pub(crate) const COMMIT_PATH_KEYS: [&str; 3] = [
    properties::METADATA_COMPRESSION_CODEC.key,
    properties::METADATA_PREVIOUS_VERSIONS_MAX.key,
    properties::METADATA_DELETE_AFTER_COMMIT.key,
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

    pub(crate) fn or_defaults(table: &str, p: &HashMap<String, String>) -> Self {
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
                properties::COMMIT_RETRY_NUM_RETRIES.key.to_string(),
                "-1".to_string(),
            ),
            (
                properties::COMMIT_RETRY_MIN_WAIT_MS.key.to_string(),
                "7".to_string(),
            ),
            (
                properties::COMMIT_RETRY_MAX_WAIT_MS.key.to_string(),
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
