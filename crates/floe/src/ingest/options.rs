//! The options of an ingest (`floe ingest` flags and the `floe.ingest.*` / `write.*` table
//! properties they override), checked before anything starts.

use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::write::WriteOptions;

pub use crate::table::exactly_once::{POSITION_PREFIX, SOURCE_KEY};

/// How rows are spread over writer tasks (`write.distribution-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Each micro-batch goes to the next writer: a partition may get a file per writer.
    None,
    /// Each partition goes to exactly one writer (by hash): one file per partition per commit.
    Hash,
    /// Partitions go to writers by observed traffic ([`crate::ingest::range`]): balanced
    /// writers, a partition split over several only when it is heavier than a writer's share.
    Range,
}

impl std::str::FromStr for Distribution {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "hash" => Ok(Self::Hash),
            "range" => Ok(Self::Range),
            _ => Err(Error::invalid_option(
                crate::base::properties::WRITE_DISTRIBUTION_MODE.key,
                s,
                "expected none, hash or range",
            )),
        }
    }
}

/// Options of an ingest.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Identity of this writer in snapshot summaries (positions are per writer id).
    pub writer_id: String,
    pub commit_interval: Duration,
    pub commit_bytes: Option<u64>,
    pub commit_records: Option<u64>,
    /// Overrides `floe.ingest.write-buffer-size` (default 256 MiB).
    pub write_buffer_size: Option<u64>,
    /// Overrides `write.distribution-mode` (default none).
    pub distribution: Option<Distribution>,
    pub write_parallelism: usize,
    /// Stop with an error once more than this many records were rejected.
    pub max_bad_records: Option<u64>,
    /// Commit and stop once no record arrived for this long.
    pub stop_when_idle: Option<Duration>,
    /// Overrides `floe.ingest.source-timeout`: how long the source may stay unreachable before
    /// the ingest commits what it read and stops with an error (default: wait forever).
    pub source_timeout: Option<Duration>,
    /// Records per micro-batch.
    pub batch_records: usize,
    pub write: WriteOptions,
    /// Run the table's maintenance in this process (`--maintain`); `None`: the table's
    /// `floe.ingest.maintain`.
    pub maintain: Option<bool>,
    /// The lease and run-history store of the in-process maintenance (the one `floe maintain`
    /// uses, so the two never run a job on the table at once); `None`: a private SQLite file.
    pub maintain_store: Option<String>,
    /// Time between maintenance passes when no commit wakes one.
    pub maintain_interval: Duration,
    /// Scale-out (`--group`): hand files off to the group's coordinator instead of
    /// committing; `writer_id` names the group.
    pub group: Option<crate::ingest::group::GroupOptions>,
    /// `--mode upsert|cdc`, the key and the delete field (append by default).
    pub changes: crate::ingest::upsert::ChangeOptions,
    /// Fault injection for tests: sleep this long between writing the files and committing.
    #[doc(hidden)]
    pub pause_before_commit: Option<Duration>,
}

impl IngestOptions {
    /// Defaults: 60 s interval, one writer, 10,000-record micro-batches.
    pub fn new(writer_id: impl Into<String>) -> Self {
        Self {
            writer_id: writer_id.into(),
            commit_interval: Duration::from_secs(60),
            commit_bytes: None,
            commit_records: None,
            write_buffer_size: None,
            distribution: None,
            write_parallelism: 1,
            max_bad_records: None,
            stop_when_idle: None,
            source_timeout: None,
            batch_records: 10_000,
            write: WriteOptions::default(),
            maintain: None,
            maintain_store: None,
            maintain_interval: Duration::from_secs(30),
            group: None,
            changes: Default::default(),
            pause_before_commit: None,
        }
    }

    /// Refuses a zero count, size or duration (each would commit on every poll, stop at once or
    /// run no writer), naming the `floe ingest` option.
    pub fn validate(&self) -> Result<()> {
        let zero = |option: &str, value: &str| {
            Err(Error::invalid_option(
                option,
                value,
                "must be greater than 0",
            ))
        };
        if self.commit_interval.is_zero() {
            return zero("--commit-interval", "0s");
        }
        if self.stop_when_idle.is_some_and(|d| d.is_zero()) {
            return zero("--stop-when-idle", "0s");
        }
        if self.source_timeout.is_some_and(|d| d.is_zero()) {
            return zero("--source-timeout", "0s");
        }
        for (option, value) in [
            ("--commit-bytes", self.commit_bytes),
            ("--commit-records", self.commit_records),
            ("--write-buffer-size", self.write_buffer_size),
            ("--target-file-size", self.write.target_file_size_bytes),
        ] {
            if value == Some(0) {
                return zero(option, "0");
            }
        }
        if self.write_parallelism == 0 {
            return zero("--write-parallelism", "0");
        }
        if self.batch_records == 0 {
            return zero("batch_records", "0");
        }
        let mode = self.changes.mode;
        if mode != crate::ingest::change::IngestMode::Append {
            if self.group.is_some() {
                return Err(Error::invalid_option(
                    "--group",
                    self.writer_id.as_str(),
                    "not with --mode upsert or cdc (the coordinator commits appends only)",
                ));
            }
        } else if self.changes.key.is_some() || self.changes.delete_field.is_some() {
            return Err(Error::invalid_option(
                if self.changes.key.is_some() {
                    "--key"
                } else {
                    "--delete-field"
                },
                "",
                "only with --mode upsert or cdc",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod validate_tests {
    use super::*;

    type Edit = Box<dyn Fn(&mut IngestOptions)>;

    #[test]
    fn zero_counts_sizes_and_durations_are_refused_naming_the_option() {
        let cases: Vec<(&str, Edit)> = vec![
            (
                "--commit-interval",
                Box::new(|o| o.commit_interval = Duration::ZERO),
            ),
            (
                "--stop-when-idle",
                Box::new(|o| o.stop_when_idle = Some(Duration::ZERO)),
            ),
            (
                "--source-timeout",
                Box::new(|o| o.source_timeout = Some(Duration::ZERO)),
            ),
            ("--commit-bytes", Box::new(|o| o.commit_bytes = Some(0))),
            ("--commit-records", Box::new(|o| o.commit_records = Some(0))),
            (
                "--write-buffer-size",
                Box::new(|o| o.write_buffer_size = Some(0)),
            ),
            (
                "--target-file-size",
                Box::new(|o| o.write.target_file_size_bytes = Some(0)),
            ),
            ("--write-parallelism", Box::new(|o| o.write_parallelism = 0)),
            ("batch_records", Box::new(|o| o.batch_records = 0)),
        ];
        assert!(IngestOptions::new("w").validate().is_ok());
        for (option, set) in cases {
            let mut o = IngestOptions::new("w");
            set(&mut o);
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains(option) && e.contains("greater than 0"), "{e}");
        }
    }
}
