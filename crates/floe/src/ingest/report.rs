//! What an ingest reports: its plan (where it resumes, the settings in effect), one report per
//! commit, and its metrics when it stops.

use crate::ingest::maintain::Debt;
use crate::ingest::options::Distribution;
use crate::ingest::source::{Positions, StreamLag};
use crate::maintain::service::MaintainSummary;

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
    pub lag: Vec<StreamLag>,
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
    pub debt_limits: crate::ingest::maintain::DebtLimits,
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
    /// What the in-process maintenance did (`--maintain`).
    pub maintenance: Option<MaintainSummary>,
}

/// The process's peak resident set size (`VmHWM`), on Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
