//! Backpressure on compaction debt: every ingest whose table sets a limit (and every
//! `floe ingest --maintain`, with the defaults `crate::base::properties` gives the `floe.ingest.max-*` keys) has the table's debt
//! measured after a commit, and slows its commits while the debt passes a limit.
//!
//! ```text
//!  ingest loop ── commit ──> debt (measured by the caller's hook::Maintenance)
//!      └─ commit interval x2 while over a limit, /2 once paid
//! ```
//!
//! The debt: the most small files in one partition, the snapshots since the last compaction,
//! and how long small files have waited since the last compaction. While one is over its
//! limit (`floe.ingest.max-*`), the commit interval doubles (up to
//! `floe.ingest.max-commit-interval`); once all are under, it halves back. Buffered rows
//! spill to disk past the write buffer, so memory stays within it.
//!
//! Also here: whether an ingest maintains its table at all ([`maintain_enabled`]: `--maintain`,
//! else `floe.ingest.maintain`, [`INGEST_MAINTAIN`]).

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use crate::base::error::Result;
use crate::base::properties::{
    bool_prop, duration_prop, u64_prop, INGEST_MAINTAIN, INGEST_MAINTAIN_DEFAULT,
    INGEST_MAX_COMMIT_INTERVAL, INGEST_MAX_SMALL_FILES, INGEST_MAX_SMALL_FILES_DEFAULT,
    INGEST_MAX_SNAPSHOTS, INGEST_MAX_SNAPSHOTS_DEFAULT, INGEST_MAX_TIME,
    INGEST_MAX_TIME_DEFAULT_MS,
};

/// Whether an ingest into a table with `props` maintains it: `--maintain` when given, else
/// `floe.ingest.maintain`.
pub fn maintain_enabled(flag: Option<bool>, props: &HashMap<String, String>) -> Result<bool> {
    match flag {
        Some(b) => Ok(b),
        None => bool_prop(props, INGEST_MAINTAIN.key, INGEST_MAINTAIN_DEFAULT),
    }
}

/// The debt limits; a limit of 0 is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DebtLimits {
    pub max_small_files_per_partition: u64,
    pub max_snapshots_since_compaction: u64,
    pub max_ms_since_compaction: u64,
    pub max_commit_interval_ms: u64,
}

impl DebtLimits {
    /// The limits `props` set for an ingest committing every `interval`; unset limits take
    /// their defaults (`properties::INGEST_MAX_*_DEFAULT`; `floe.ingest.max-commit-interval`:
    /// 10x `interval`, at least 60s) when the ingest maintains the table, else are off.
    pub fn from_properties(
        props: &HashMap<String, String>,
        interval: Duration,
        maintaining: bool,
    ) -> Result<DebtLimits> {
        let on = |d: u64| if maintaining { d } else { 0 };
        let interval_ms = interval.as_millis() as u64;
        Ok(DebtLimits {
            max_small_files_per_partition: u64_prop(
                props,
                INGEST_MAX_SMALL_FILES.key,
                on(INGEST_MAX_SMALL_FILES_DEFAULT),
            )?,
            max_snapshots_since_compaction: u64_prop(
                props,
                INGEST_MAX_SNAPSHOTS.key,
                on(INGEST_MAX_SNAPSHOTS_DEFAULT),
            )?,
            max_ms_since_compaction: duration_prop(
                props,
                INGEST_MAX_TIME.key,
                on(INGEST_MAX_TIME_DEFAULT_MS),
                0,
            )?,
            max_commit_interval_ms: duration_prop(
                props,
                INGEST_MAX_COMMIT_INTERVAL.key,
                (interval_ms * 10).max(60_000),
                0,
            )?
            .max(interval_ms),
        })
    }

    /// Any limit on.
    pub fn any(&self) -> bool {
        self.max_small_files_per_partition > 0
            || self.max_snapshots_since_compaction > 0
            || self.max_ms_since_compaction > 0
    }
}

/// A table's compaction debt, as the writer measures it after a commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Debt {
    /// The most small data files in one partition, and that partition.
    pub max_small_files: u64,
    pub partition: Option<String>,
    /// Snapshots (commits) since the last compaction on the current branch.
    pub snapshots_since_compaction: u64,
    /// How long small files have waited since the last compaction (0 when no partition has
    /// two small files: nothing to compact is no debt).
    pub ms_since_compaction: u64,
    /// The limits passed, in words (`small files 230 > 200`); empty when none.
    pub over: Vec<String>,
}

/// The limits `d` passes, in words.
pub fn over(d: &Debt, l: &DebtLimits) -> Vec<String> {
    let mut out = vec![];
    if l.max_small_files_per_partition > 0 && d.max_small_files > l.max_small_files_per_partition {
        out.push(format!(
            "{} small files in {} > {} {}",
            d.max_small_files,
            d.partition.as_deref().unwrap_or("?"),
            INGEST_MAX_SMALL_FILES.key,
            l.max_small_files_per_partition
        ));
    }
    if l.max_snapshots_since_compaction > 0
        && d.snapshots_since_compaction > l.max_snapshots_since_compaction
    {
        out.push(format!(
            "{} snapshots since the last compaction > {} {}",
            d.snapshots_since_compaction,
            INGEST_MAX_SNAPSHOTS.key,
            l.max_snapshots_since_compaction
        ));
    }
    if l.max_ms_since_compaction > 0 && d.ms_since_compaction > l.max_ms_since_compaction {
        out.push(format!(
            "{} s since the last compaction > {} {} s",
            d.ms_since_compaction / 1000,
            INGEST_MAX_TIME.key,
            l.max_ms_since_compaction / 1000
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_SMALL_FILES: &str = INGEST_MAX_SMALL_FILES.key;
    const MAX_TIME: &str = INGEST_MAX_TIME.key;
    const MAX_COMMIT_INTERVAL: &str = INGEST_MAX_COMMIT_INTERVAL.key;

    #[test]
    fn a_limit_is_validated_when_set() {
        assert!(crate::base::properties::validate(MAX_TIME, "10m").is_ok());
        assert!(crate::base::properties::validate(MAX_TIME, "soon").is_err());
    }

    #[test]
    fn limits_default_on_only_when_maintaining_and_name_what_is_over() {
        let none = HashMap::new();
        let l = DebtLimits::from_properties(&none, Duration::from_secs(5), false).unwrap();
        assert!(!l.any());
        assert_eq!(l.max_commit_interval_ms, 60_000);
        let l = DebtLimits::from_properties(&none, Duration::from_secs(5), true).unwrap();
        assert_eq!(l.max_small_files_per_partition, 200);
        let props = HashMap::from([
            (MAX_SMALL_FILES.to_string(), "10".to_string()),
            (MAX_TIME.to_string(), "30s".to_string()),
            (MAX_COMMIT_INTERVAL.to_string(), "2m".to_string()),
        ]);
        let l = DebtLimits::from_properties(&props, Duration::from_secs(5), false).unwrap();
        assert_eq!(
            (
                l.max_small_files_per_partition,
                l.max_snapshots_since_compaction,
                l.max_ms_since_compaction,
                l.max_commit_interval_ms
            ),
            (10, 0, 30_000, 120_000)
        );
        let d = Debt {
            max_small_files: 11,
            partition: Some("h=1".into()),
            snapshots_since_compaction: 5000,
            ms_since_compaction: 31_000,
            over: vec![],
        };
        let o = over(&d, &l);
        assert_eq!(o.len(), 2, "{o:?}");
        assert!(o[0].contains("11 small files in h=1"), "{o:?}");
        assert!(o[1].contains("31 s since the last compaction"), "{o:?}");
        let bad = HashMap::from([(MAX_TIME.to_string(), "soon".to_string())]);
        let e = DebtLimits::from_properties(&bad, Duration::from_secs(5), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains(MAX_TIME) && e.contains("soon"), "{e}");
    }
}
