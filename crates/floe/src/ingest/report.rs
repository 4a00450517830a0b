//! What an ingest reports: its plan (where it resumes, the settings in effect), one report per
//! commit, and its metrics when it stops.

use crate::ingest::debt::Debt;
use crate::ingest::options::Distribution;
use crate::ingest::source::{Positions, StreamLag};

/// What one commit did (for the per-commit progress line).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommitReport {
    pub commit: u64,
    pub snapshot_id: i64,
    pub records: u64,
    pub bad_records: u64,
    pub data_files: u64,
    pub bytes: u64,
    pub partitions: u64,
    pub flush_ms: u64,
    pub commit_ms: u64,
    pub spilled_bytes: u64,
    /// Lag from what was fetched: high watermark minus the next offset to fetch.
    pub lag: Vec<StreamLag>,
    /// Lag from what the table holds after this commit: high watermark minus the position
    /// this commit stored (includes records fetched but not yet decoded).
    pub lag_committed: Vec<StreamLag>,
    /// The positions this commit stored: each stream's next position after it.
    pub positions: Positions,
    /// When the commit landed (ms since the epoch): its rows are readable from then on.
    pub committed_at_ms: i64,
    /// Attempts the commit took (more than 1: another process committed in between).
    pub attempts: u32,
    /// The commit interval in effect after this commit (longer than `--commit-interval`
    /// while backpressure holds).
    pub commit_interval_ms: u64,
    /// The table's compaction debt after this commit, when measured.
    pub debt: Option<Debt>,
    /// With `--group`: the hand-off this worker recorded instead of committing (its rows
    /// become readable at the coordinator's next commit).
    pub handoff: Option<String>,
    /// With `--group`: the streams this hand-off advanced (the partitions this worker read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub handed_off: Vec<String>,
    /// `--mode upsert|cdc`: live rows of the table this commit replaced or deleted.
    pub replaced_rows: u64,
    /// `--mode upsert|cdc`: changes of this window whose key had a change from another stream
    /// (Kafka partition) in the same window: applied in arrival order, which Kafka does not
    /// define across partitions (keys must stay in one partition).
    pub keys_across_streams: u64,
}

/// The source's reachability, reported while it does not answer (every few seconds), once
/// when it answers again, and when `--source-timeout` gives up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SourceStatus {
    /// `waiting`, `reachable` (again) or `gave_up`.
    pub event: &'static str,
    /// What is waited for, e.g. `Kafka broker 127.0.0.1:9092 (topic events partition 0)`.
    pub what: String,
    /// Why the last attempt failed (`connection refused`, ...).
    pub reason: String,
    /// Seconds since the source last answered (for `reachable`: how long it did not).
    pub unreachable_s: u64,
    /// The position the source is read from (Kafka: the offset of the next fetch).
    pub position: i64,
    /// Seconds left before `--source-timeout` gives up (none: waits forever).
    pub gives_up_in_s: Option<u64>,
}

impl SourceStatus {
    /// The line `floe ingest` prints on stderr (after `[ingest] `).
    pub fn line(&self) -> String {
        match self.event {
            "reachable" => format!(
                "{} reachable again after {} s; reading from offset {}",
                self.what, self.unreachable_s, self.position
            ),
            "gave_up" => format!(
                "giving up on {} after {} s (--source-timeout): {}; committing what was read up to offset {}",
                self.what, self.unreachable_s, self.reason, self.position
            ),
            _ => format!(
                "waiting for {}: {}; retrying for {} s, last fetch at offset {}{}",
                self.what,
                self.reason,
                self.unreachable_s,
                self.position,
                match self.gives_up_in_s {
                    Some(s) => format!("; giving up in {s} s (--source-timeout)"),
                    None => String::new(),
                }
            ),
        }
    }
}

/// What an ingest would do ([`crate::ingest::stream::IngestBuilder::plan`]): where it resumes and the settings in
/// effect.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestPlan {
    pub table: String,
    pub writer_id: String,
    pub source: String,
    /// The writer's newest snapshot, if it committed before.
    pub resumes_after_snapshot: Option<i64>,
    /// Positions it resumes from (empty: from the start of the source).
    pub resume_from: Positions,
    pub write_buffer_size: u64,
    pub distribution: Distribution,
    pub write_parallelism: usize,
    pub commit_interval_ms: u64,
    pub commit_bytes: Option<u64>,
    pub commit_records: Option<u64>,
    /// Whether the ingest runs the table's maintenance (`--maintain` or
    /// `floe.ingest.maintain`).
    pub maintain: bool,
    /// The backpressure limits in effect.
    pub debt_limits: crate::ingest::debt::DebtLimits,
}

/// What an ingest did when it stopped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestMetrics {
    pub table: String,
    pub writer_id: String,
    pub source: String,
    pub resumed_from: Positions,
    pub positions: Positions,
    pub commits: u64,
    pub records: u64,
    pub bad_records: u64,
    pub data_files: u64,
    pub duration_ms: u64,
    /// Why it stopped: end of input, idle, signal.
    pub stopped_by: String,
    /// Peak resident memory of the process (Linux), for checking the buffer budget.
    pub peak_rss_bytes: Option<u64>,
    /// Time the commit interval was stretched by backpressure (ms beyond `--commit-interval`).
    pub throttled_ms: u64,
    /// What the in-process maintenance did (`--maintain`), as it reports it
    /// ([`crate::ingest::hook::AfterCommit::stop`]).
    pub maintenance: Option<serde_json::Value>,
}

impl IngestMetrics {
    /// An ingest of `table` by `writer_id` from `source`, starting at `resumed_from`.
    pub(crate) fn start(
        table: &str,
        writer_id: &str,
        source: &str,
        resumed_from: Positions,
    ) -> Self {
        Self {
            table: table.to_string(),
            writer_id: writer_id.to_string(),
            source: source.to_string(),
            resumed_from,
            positions: Positions::new(),
            commits: 0,
            records: 0,
            bad_records: 0,
            data_files: 0,
            duration_ms: 0,
            stopped_by: String::new(),
            peak_rss_bytes: None,
            throttled_ms: 0,
            maintenance: None,
        }
    }
}

/// The process's peak resident set size (`VmHWM`), on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
