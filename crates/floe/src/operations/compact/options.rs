//! Compaction options, typed and parsed once.
//!
//! The names are Iceberg's `rewrite_data_files` options. A value comes from, in order: the
//! caller (typed CLI flags, or `--option K=V` parsed by [`CompactOptions::set`]), the table
//! property `floe.compact.K` (read only for options the caller left unset), then Iceberg's
//! default ([`CompactOptions::plan_options`] and the accessors).

use std::collections::HashMap;

use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::base::properties::{self, parse_bool, parse_size};
use crate::operations::compact::plan::{JobOrder, PlanOptions};

/// Every option name, as `--option` and `floe.compact.*` spell it.
pub const OPTION_NAMES: [&str; 16] = [
    "target-file-size-bytes",
    "min-file-size-bytes",
    "max-file-size-bytes",
    "min-input-files",
    "max-file-group-size-bytes",
    "max-concurrent-file-group-rewrites",
    "partial-progress.enabled",
    "partial-progress.max-commits",
    "rewrite-all",
    "rewrite-job-order",
    "delete-file-threshold",
    "remove-dangling-deletes",
    "row-group-merge",
    "row-group-merge-min-bytes",
    "plan-batch-files",
    "sort-job-size-bytes",
];

/// Whether a compaction copies the column chunks of inputs' row groups into its output without
/// decoding them (row-group merge, Iceberg Java's `ParquetFileMerger` / Amoro's row-group
/// merging): `auto` when an input's row groups average at least `row-group-merge-min-bytes`,
/// `always` whatever their size, `never`. Never for an input with delete files, a Parquet
/// schema other than the output's, or a sorted rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowGroupMerge {
    Auto,
    Always,
    Never,
}

impl RowGroupMerge {
    pub fn parse(value: &str) -> Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            _ => Err(Error::invalid_option(
                "row-group-merge",
                value,
                "expected auto, always or never",
            )),
        }
    }
}

/// Amoro's threshold: inputs whose row groups average 8 MiB or more are merged by row group.
pub const ROW_GROUP_MERGE_MIN_BYTES: u64 = 8 * 1024 * 1024;

/// Default of `plan-batch-files`: this many candidate scan tasks stay in memory (about
/// 150 MiB); past it they go to a local file and the run is rewritten in batches of this many
/// input files.
pub const PLAN_BATCH_FILES: u64 = 100_000;

/// Compaction options; `None` means "the table property, else Iceberg's default".
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CompactOptions {
    pub target_file_size_bytes: Option<u64>,
    pub min_file_size_bytes: Option<u64>,
    pub max_file_size_bytes: Option<u64>,
    pub min_input_files: Option<u64>,
    pub max_file_group_size_bytes: Option<u64>,
    pub max_concurrent_file_group_rewrites: Option<u64>,
    pub partial_progress_enabled: Option<bool>,
    pub partial_progress_max_commits: Option<u64>,
    pub rewrite_all: Option<bool>,
    pub rewrite_job_order: Option<JobOrder>,
    pub delete_file_threshold: Option<u64>,
    pub remove_dangling_deletes: Option<bool>,
    pub row_group_merge: Option<RowGroupMerge>,
    pub row_group_merge_min_bytes: Option<u64>,
    /// Candidate files planned at once: above this, partitions are planned, rewritten and
    /// committed in batches holding at most this many (one partition may exceed it alone).
    pub plan_batch_files: Option<u64>,
    /// Input bytes one sorted job orders as a whole (`--sort-by`): see
    /// [`PlanOptions::sort_job_size_bytes`].
    pub sort_job_size_bytes: Option<u64>,
}

impl CompactOptions {
    /// Sets option `key` (an Iceberg name, see [`OPTION_NAMES`]) from its text form; an unknown
    /// key or a bad value is an error naming it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let size = || parse_size(key, value);
        let flag = || parse_bool(key, value);
        match key {
            "target-file-size-bytes" => self.target_file_size_bytes = Some(size()?),
            "min-file-size-bytes" => self.min_file_size_bytes = Some(size()?),
            "max-file-size-bytes" => self.max_file_size_bytes = Some(size()?),
            "min-input-files" => self.min_input_files = Some(size()?),
            "max-file-group-size-bytes" => self.max_file_group_size_bytes = Some(size()?),
            "max-concurrent-file-group-rewrites" => {
                self.max_concurrent_file_group_rewrites = Some(size()?)
            }
            "partial-progress.enabled" => self.partial_progress_enabled = Some(flag()?),
            "partial-progress.max-commits" => self.partial_progress_max_commits = Some(size()?),
            "rewrite-all" => self.rewrite_all = Some(flag()?),
            "rewrite-job-order" => self.rewrite_job_order = Some(JobOrder::parse(value)?),
            "delete-file-threshold" => self.delete_file_threshold = Some(size()?),
            "remove-dangling-deletes" => self.remove_dangling_deletes = Some(flag()?),
            "row-group-merge" => self.row_group_merge = Some(RowGroupMerge::parse(value)?),
            "row-group-merge-min-bytes" => self.row_group_merge_min_bytes = Some(size()?),
            "plan-batch-files" => {
                let n = size()?;
                if n == 0 {
                    return Err(Error::invalid_option(key, value, "must be at least 1"));
                }
                self.plan_batch_files = Some(n)
            }
            "sort-job-size-bytes" => self.sort_job_size_bytes = Some(size()?),
            _ => {
                return Err(Error::invalid_option(
                    "compaction option",
                    key,
                    format!("known options: {}", OPTION_NAMES.join(", ")),
                ))
            }
        }
        Ok(())
    }

    /// Whether option `key` is set.
    fn is_set(&self, key: &str) -> bool {
        match key {
            "target-file-size-bytes" => self.target_file_size_bytes.is_some(),
            "min-file-size-bytes" => self.min_file_size_bytes.is_some(),
            "max-file-size-bytes" => self.max_file_size_bytes.is_some(),
            "min-input-files" => self.min_input_files.is_some(),
            "max-file-group-size-bytes" => self.max_file_group_size_bytes.is_some(),
            "max-concurrent-file-group-rewrites" => {
                self.max_concurrent_file_group_rewrites.is_some()
            }
            "partial-progress.enabled" => self.partial_progress_enabled.is_some(),
            "partial-progress.max-commits" => self.partial_progress_max_commits.is_some(),
            "rewrite-all" => self.rewrite_all.is_some(),
            "rewrite-job-order" => self.rewrite_job_order.is_some(),
            "delete-file-threshold" => self.delete_file_threshold.is_some(),
            "row-group-merge" => self.row_group_merge.is_some(),
            "row-group-merge-min-bytes" => self.row_group_merge_min_bytes.is_some(),
            "remove-dangling-deletes" => self.remove_dangling_deletes.is_some(),
            "plan-batch-files" => self.plan_batch_files.is_some(),
            "sort-job-size-bytes" => self.sort_job_size_bytes.is_some(),
            _ => false,
        }
    }

    /// `self` completed from the table's `floe.compact.*` properties, for the options left
    /// unset (a bad stored value of an option the caller set does not matter).
    pub fn with_table_defaults(mut self, props: &HashMap<String, String>) -> Result<Self> {
        for key in OPTION_NAMES {
            if self.is_set(key) {
                continue;
            }
            if let Some(v) = props.get(&format!("{}{key}", properties::COMPACT_PREFIX)) {
                self.set(key, v)?;
            }
        }
        Ok(self)
    }

    /// The planner options: these, then Iceberg's defaults relative to the target size (the
    /// table's `write.target-file-size-bytes` unless `target-file-size-bytes` is set).
    pub fn plan_options(&self, table_target: u64) -> Result<PlanOptions> {
        let mut o = PlanOptions::for_target(self.target_file_size_bytes.unwrap_or(table_target));
        if let Some(v) = self.min_file_size_bytes {
            o.min_file_size_bytes = v;
        }
        if let Some(v) = self.max_file_size_bytes {
            o.max_file_size_bytes = v;
        }
        if let Some(v) = self.min_input_files {
            o.min_input_files = v.min(usize::MAX as u64) as usize;
        }
        if let Some(v) = self.max_file_group_size_bytes {
            o.max_file_group_size_bytes = v;
        }
        o.delete_file_threshold = self
            .delete_file_threshold
            .unwrap_or(u64::MAX)
            .min(usize::MAX as u64) as usize;
        o.rewrite_all = self.rewrite_all.unwrap_or(false);
        if let Some(v) = self.sort_job_size_bytes {
            o.sort_job_size_bytes = v;
        }
        if let Some(order) = self.rewrite_job_order {
            o.rewrite_job_order = order;
        }
        o.validate()?;
        Ok(o)
    }

    /// Concurrent group rewrites (default 5, at least 1, as Iceberg's RewriteDataFiles).
    pub fn max_concurrent(&self) -> Result<usize> {
        let n = self.max_concurrent_file_group_rewrites.unwrap_or(5);
        if n == 0 {
            return Err(Error::invalid_option(
                "max-concurrent-file-group-rewrites",
                0,
                "must be at least 1",
            ));
        }
        Ok(n.min(usize::MAX as u64) as usize)
    }

    /// Partial progress and its commit budget (default off, 10 commits; at least 1 when on).
    /// The row-group merge mode and its threshold (average compressed row-group bytes).
    pub fn row_group_merge(&self) -> (RowGroupMerge, u64) {
        (
            self.row_group_merge.unwrap_or(RowGroupMerge::Auto),
            self.row_group_merge_min_bytes
                .unwrap_or(ROW_GROUP_MERGE_MIN_BYTES),
        )
    }

    /// Candidate scan tasks held in memory, and input files per rewrite batch past that
    /// (default 100,000).
    pub fn plan_batch_files(&self) -> usize {
        self.plan_batch_files
            .unwrap_or(PLAN_BATCH_FILES)
            .clamp(1, usize::MAX as u64) as usize
    }

    pub fn partial_progress(&self) -> Result<(bool, usize)> {
        let on = self.partial_progress_enabled.unwrap_or(false);
        let max = self.partial_progress_max_commits.unwrap_or(10);
        if on && max == 0 {
            return Err(Error::invalid_option(
                "partial-progress.max-commits",
                0,
                "must be at least 1 with partial progress",
            ));
        }
        Ok((on, max.clamp(1, usize::MAX as u64) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_parsed_once_by_name_and_bad_input_is_named() {
        let mut o = CompactOptions::default();
        o.set("target-file-size-bytes", "64MiB").unwrap();
        o.set("rewrite-job-order", "files-desc").unwrap();
        o.set("partial-progress.enabled", "true").unwrap();
        assert_eq!(o.target_file_size_bytes, Some(64 << 20));
        assert_eq!(o.rewrite_job_order, Some(JobOrder::FilesDesc));
        let e = o.set("min-input-files", "many").unwrap_err().to_string();
        assert!(e.contains("min-input-files"), "{e}");
        let e = o.set("max-files", "3").unwrap_err().to_string();
        assert!(
            e.contains("max-files") && e.contains("min-input-files"),
            "{e}"
        );
        for key in OPTION_NAMES {
            assert!(!CompactOptions::default().is_set(key));
        }
    }

    #[test]
    fn table_properties_fill_only_what_the_caller_left_unset() {
        let props = HashMap::from([
            ("floe.compact.min-input-files".to_string(), "9".to_string()),
            ("floe.compact.rewrite-all".to_string(), "oops".to_string()),
        ]);
        let caller = CompactOptions {
            rewrite_all: Some(true),
            ..Default::default()
        };
        let o = caller.with_table_defaults(&props).unwrap();
        assert_eq!(o.min_input_files, Some(9));
        assert_eq!(
            o.rewrite_all,
            Some(true),
            "the bad stored value is never read"
        );
        let e = CompactOptions::default()
            .with_table_defaults(&props)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rewrite-all"), "{e}");
    }

    #[test]
    fn planner_defaults_follow_the_target_and_zero_budgets_are_refused() {
        let o = CompactOptions::default();
        let p = o.plan_options(100 << 20).unwrap();
        assert_eq!(p.target_file_size_bytes, 100 << 20);
        assert_eq!(p, PlanOptions::for_target(100 << 20));
        assert_eq!(o.max_concurrent().unwrap(), 5);
        assert_eq!(o.partial_progress().unwrap(), (false, 10));
        let zero = CompactOptions {
            max_concurrent_file_group_rewrites: Some(0),
            partial_progress_enabled: Some(true),
            partial_progress_max_commits: Some(0),
            ..Default::default()
        };
        assert!(zero.max_concurrent().is_err());
        assert!(zero.partial_progress().is_err());
        let bad = CompactOptions {
            min_file_size_bytes: Some(1 << 40),
            ..Default::default()
        };
        assert!(bad.plan_options(1 << 20).is_err());
    }

    #[test]
    fn every_option_is_a_known_table_property() {
        for key in OPTION_NAMES {
            let prop = format!("{}{key}", properties::COMPACT_PREFIX);
            if let Err(e) = properties::validate(&prop, "not-a-value") {
                let e = e.to_string();
                assert!(!e.contains("not a floe compact option"), "{prop}: {e}");
            }
        }
        let e = properties::validate("floe.compact.nope", "1").unwrap_err();
        assert!(e.to_string().contains("not a floe compact option"), "{e}");
    }
}
