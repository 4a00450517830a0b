//! The report of `diagnose` as plain data: what `compute` fills in, `observe` and
//! `partitioning` judge, `compare` measures and `render` shows. Everything else in the module
//! points here, and this file points at nothing of it, so the module's files stay a one-way
//! stack: model <- facts <- observe, partitioning <- compute; model <- compare <- render.

use crate::table::watermarks::Watermark;

/// A partition is active when one of the last this-many commits added a data file to it.
pub const ACTIVE_COMMITS: usize = 10;

/// Commits shown in the history (files added per commit over time).
pub const RECENT_COMMITS: usize = 200;

/// File-size histogram bucket upper bounds (bytes); the last bucket is open.
pub(super) const BUCKETS: [(u64, &str); 9] = [
    (16 << 10, "< 16 KiB"),
    (128 << 10, "16-128 KiB"),
    (1 << 20, "128 KiB-1 MiB"),
    (8 << 20, "1-8 MiB"),
    (64 << 20, "8-64 MiB"),
    (256 << 20, "64-256 MiB"),
    (512 << 20, "256-512 MiB"),
    (1 << 30, "512 MiB-1 GiB"),
    (u64::MAX, ">= 1 GiB"),
];

/// One bar of the file-size histogram.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Bucket {
    pub label: &'static str,
    pub upper_bytes: u64,
    pub files: u64,
    pub bytes: u64,
}

/// Health of one partition (live files of the current snapshot).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PartitionHealth {
    pub partition: String,
    pub spec_id: i32,
    /// A `--where` filter selecting exactly this partition, when its transforms allow one.
    pub filter: Option<String>,
    pub data_files: u64,
    pub records: u64,
    pub total_bytes: u64,
    pub avg_bytes: u64,
    pub median_bytes: u64,
    /// Data files under `min-file-size-bytes`.
    pub files_under_min: u64,
    /// Data files under the target size.
    pub files_under_target: u64,
    pub delete_files: u64,
    pub delete_bytes: u64,
    /// Delete files per data file.
    pub delete_ratio: f64,
    /// Rows of the delete files (position deletes: rows deleted; equality deletes: keys).
    pub deleted_rows: u64,
    /// `deleted_rows` per data row: the share of what readers read only to drop it (delete
    /// debt; compaction resolves it).
    pub deleted_row_ratio: f64,
    /// Deletion vectors (format v3): one per data file that has deleted rows.
    pub deletion_vectors: u64,
    /// Parquet position delete files (v2; still valid in a table upgraded to v3).
    pub position_delete_files: u64,
    pub equality_delete_files: u64,
    /// Rows deleted by deletion vectors.
    pub vector_deleted_rows: u64,
    /// `vector_deleted_rows` per data row: the share of the partition's rows that readers
    /// read only to drop (compaction resolves it).
    pub vector_deleted_row_ratio: f64,
    /// One of the last [`ACTIVE_COMMITS`] commits added a data file here.
    pub active: bool,
    pub last_added_ms: Option<i64>,
}

/// One commit, for the files-per-commit history.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommitPoint {
    pub snapshot_id: i64,
    pub timestamp_ms: i64,
    pub operation: String,
    pub added_data_files: u64,
    pub added_bytes: u64,
}

/// Snapshot history and metadata weight.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct History {
    pub snapshots: u64,
    pub oldest_ms: Option<i64>,
    pub newest_ms: Option<i64>,
    /// Commits per hour over the recent commits (0 when they share one millisecond).
    pub commits_per_hour: f64,
    /// From the first to the last of the recent commits.
    pub recent_span_ms: i64,
    /// Average data files added per append/overwrite commit over the recent commits.
    pub avg_files_per_commit: f64,
    pub avg_bytes_per_commit: f64,
    pub recent: Vec<CommitPoint>,
    /// Files (and bytes) referenced by some snapshot but not by the current one or a ref head.
    pub only_old_files: u64,
    pub only_old_bytes: u64,
    /// What `expire-snapshots` with the table's settings would delete now.
    pub expirable_snapshots: u64,
    pub expirable_files: u64,
    pub expirable_bytes: u64,
    pub metadata_json_files: u64,
    pub metadata_json_bytes: u64,
    pub metadata_log_entries: u64,
    pub manifests: u64,
    pub manifest_bytes: u64,
    pub refs: Vec<String>,
    /// What keeps history beyond the current snapshot: each ref (other than `main`), each
    /// writer watermark and the retention window, with the files and bytes it keeps.
    pub retained_by: Vec<Retainer>,
    /// The writer's side: its pace, its commit duration and the table's freshness.
    pub writer: Option<WriterSide>,
}

/// One reason history is kept, and what it costs on storage.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Retainer {
    /// `branch:NAME`, `tag:NAME`, `writer:KIND:ID` or `retention-window`.
    pub retainer: String,
    /// `branch`, `tag`, `writer` or `window`.
    pub kind: &'static str,
    /// The snapshots it keeps.
    pub snapshots: u64,
    /// Files (and bytes) those snapshots reach that the current snapshot does not.
    pub held_files: u64,
    pub held_bytes: u64,
    /// Of those, the files nothing else kept reaches: what removing this retainer (dropping
    /// the ref, the writer finishing, a shorter window) would let expiry delete.
    pub exclusive_files: u64,
    pub exclusive_bytes: u64,
}

/// The writer's side of the table, from the recent commits that wrote data (appends,
/// overwrites) and the metadata files that made them current.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WriterSide {
    /// Recent commits that added data files.
    pub writing_commits: u64,
    /// Median interval between them (`None` under two commits).
    pub commit_interval_ms: Option<u64>,
    /// Data files each adds, on average.
    pub files_per_commit: f64,
    /// Median size of the files they add (a commit's bytes over its files).
    pub file_bytes: u64,
    /// Median time from a commit's snapshot timestamp to its metadata.json landing on storage
    /// (that file's modification time): the metadata part of the commit, the part that grows
    /// with history. `None` when no metadata file of a recent commit is still listed, or the
    /// storage reports whole seconds only.
    pub commit_duration_ms: Option<u64>,
    /// Commits the duration was measured on.
    pub commit_durations_measured: u64,
    /// Age of the newest data at report time: now minus the newest writing commit.
    pub freshness_ms: Option<u64>,
}

/// The object-store requests a full scan of the current snapshot makes, estimated from the
/// metadata (a request is a GET or ranged GET), now and after compacting to the target size.
///
/// Per scan: the metadata.json, the manifest list and each manifest. Per Parquet file (data,
/// position and equality deletes): its footer, then its row groups. `min` is a reader that
/// reads the footer in one suffix request and each row group in one coalesced range (DuckDB,
/// arrow with a footer hint); `max` one that reads the 8-byte tail then the footer, and each
/// column chunk alone. A deletion vector is one ranged read of its blob.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ScanRequests {
    pub metadata: u64,
    pub min: u64,
    pub max: u64,
    /// Row groups over the live data files (from their split offsets, else their size).
    pub row_groups: u64,
    /// Leaf columns of the current schema (column chunks per row group).
    pub columns: u64,
    /// Data files after compacting each partition to the target size, and the requests then
    /// (delete files resolved).
    pub compacted_files: u64,
    pub compacted_min: u64,
    pub compacted_max: u64,
}

/// Files on storage, from one listing of the table location.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Storage {
    pub listed_files: u64,
    pub listed_bytes: u64,
    pub unreferenced_files: u64,
    pub unreferenced_bytes: u64,
    /// Unreferenced files by age: < 1 h, 1 h - 1 d, 1 - 3 d, >= 3 d.
    pub unreferenced_by_age: Vec<(String, u64, u64)>,
    pub sample_unreferenced: Vec<String>,
    /// Why storage was not listed, when it was not.
    pub skipped: Option<String>,
}

/// Totals over the current snapshot.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Totals {
    pub partitions: u64,
    pub active_partitions: u64,
    pub data_files: u64,
    pub data_bytes: u64,
    pub records: u64,
    pub delete_files: u64,
    pub delete_bytes: u64,
    /// Of the delete files: deletion vectors (format v3), Parquet position delete files and
    /// equality delete files.
    pub deletion_vectors: u64,
    pub position_delete_files: u64,
    pub equality_delete_files: u64,
    /// Rows deleted by deletion vectors (exact: each vector counts its own positions).
    pub vector_deleted_rows: u64,
    pub files_under_min: u64,
    pub files_under_target: u64,
    pub median_bytes: u64,
}

/// Sizes diagnose judges files against.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Thresholds {
    pub target_file_size_bytes: u64,
    pub min_file_size_bytes: u64,
    pub min_input_files: u64,
}

/// The whole report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub table: String,
    pub location: String,
    /// The table's Iceberg format version (1, 2 or 3).
    pub format_version: u8,
    pub generated_at_ms: i64,
    pub duration_ms: u64,
    pub thresholds: Thresholds,
    pub totals: Totals,
    pub size_histogram: Vec<Bucket>,
    /// Partitions, most data files first.
    pub partitions: Vec<PartitionHealth>,
    pub history: History,
    pub storage: Storage,
    pub writers: Vec<Watermark>,
    /// Whether the current partition spec is finer than the data rate; `None` when the table
    /// is unpartitioned or its current spec holds no data.
    pub over_partitioned: Option<OverPartitioned>,
    /// What a full scan costs in object-store requests, now and compacted.
    pub scan_requests: ScanRequests,
    pub observations: Vec<Observation>,
    /// The timed full read (`--probe`, `--save`, `--compare`), when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
}

/// One row of the observation table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Observation {
    /// Stable id for scripts.
    pub id: &'static str,
    pub observation: &'static str,
    pub holds: bool,
    /// The numbers behind the verdict.
    pub evidence: String,
    pub investigate: &'static str,
    /// The first thing to run, when the observation holds.
    pub action: Option<String>,
}

/// A candidate spec and what its partitions would receive.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SpecOption {
    /// In `table create --partition` syntax; empty: unpartitioned.
    pub spec: String,
    /// Expected bytes per partition (per window) under this spec: the median times `factor`.
    pub bytes_per_partition: u64,
    /// How many of today's partitions merge into one.
    pub factor: f64,
}

/// The over-partitioning finding (see the module doc for the arithmetic).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OverPartitioned {
    /// The spec is finer than the data rate.
    pub holds: bool,
    /// The current spec, `table create --partition` syntax.
    pub spec: String,
    /// `closed-partitions` (a time transform: partitions no recent commit wrote to) or
    /// `daily-rate` (no time transform: bytes per partition per day of history).
    pub basis: &'static str,
    /// What one measured amount covers: the finest time transform's unit, or `day`.
    pub window: String,
    /// Partitions measured.
    pub partitions: u64,
    /// Median bytes a partition receives per window.
    pub bytes_per_partition_median: u64,
    /// Median over recent commits of bytes added per partition the commit wrote to.
    pub bytes_per_partition_per_commit_median: u64,
    /// `write.target-file-size-bytes`.
    pub target: u64,
    /// The finding holds under this many bytes per partition (target / 8).
    pub fire_below: u64,
    /// A suggested spec aims at this many bytes per partition (target / 4).
    pub aim: u64,
    /// Windows of data one target-size file needs (target / median).
    pub windows_for_target: f64,
    pub suggested_spec: Option<String>,
    pub suggested_bytes_per_partition: Option<u64>,
    /// One-field coarsenings and what each would give, finest first.
    pub alternatives: Vec<SpecOption>,
    /// The commands that apply the suggestion (evolve the spec, then rewrite the data).
    pub commands: Vec<String>,
    /// The numbers and the arithmetic, in words.
    pub evidence: String,
}

/// A timed full read of the table's live data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Probe {
    /// What was run.
    pub query: String,
    pub snapshot_id: Option<i64>,
    pub rows: u64,
    pub batches: u64,
    /// Planning and reading, until the last batch arrived.
    pub elapsed_ms: u64,
}

/// Human-readable byte count.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
