//! Verifying an improvement: `diagnose --save FILE` keeps a report, `diagnose --compare FILE`
//! sets it beside the table as it is now.
//!
//! ```text
//!  Report ──> Measures (the numbers worth comparing, plus the timed probe read)
//!         ──> SavedReport {format, format_version, table, measures, report} ── FILE
//!  FILE + Report now ──> Comparison {before, after, deltas}
//! ```
//!
//! The probe is a full read of the table's live data through the same scan `floe sql` uses
//! (the iceberg crate's scan of the current snapshot, all columns, deletes applied): it
//! records what it read (rows, batches) next to how long it took, so a comparison shows both
//! that the read got faster and that it read the same rows.

use std::time::Instant;

use futures::TryStreamExt;
use iceberg::TableIdent;

use super::facts::median;
pub use super::model::Probe;
use super::model::{Report, WriterSide};
use crate::base::error::{Error, Result};
use crate::catalog::{ident_string, Catalog};

/// The `format` of a saved report.
pub const SAVED_FORMAT: &str = "floe-diagnose-report";
/// The version of the saved report's layout; a file of another version is refused.
pub const SAVED_FORMAT_VERSION: u32 = 1;
/// The largest saved report `--compare` reads (a report `--save` writes is a few MiB at most):
/// a larger file, or a device such as `/dev/zero`, is refused, naming it.
pub const MAX_SAVED_BYTES: u64 = 64 << 20;

/// Reads every row of `ident`'s current snapshot (all columns, delete files and deletion
/// vectors applied), the read `floe sql 'SELECT * FROM ns.t'` does, and times it.
pub(crate) async fn probe(catalog: &Catalog, ident: &TableIdent) -> Result<Probe> {
    let table = catalog.load_table(ident).await?;
    let snapshot_id = table.metadata().current_snapshot_id();
    let started = Instant::now();
    let (mut rows, mut batches) = (0u64, 0u64);
    let mut stream = crate::table::rows::read_current(&table, None).await?;
    while let Some(b) = stream.try_next().await? {
        rows += b.num_rows() as u64;
        batches += 1;
    }
    Ok(Probe {
        query: format!(
            "SELECT * FROM {} (all rows, all columns)",
            ident_string(ident)
        ),
        snapshot_id,
        rows,
        batches,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

/// Files and bytes of one file-size bucket.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BucketCount {
    pub label: String,
    pub files: u64,
    pub bytes: u64,
}

/// The numbers of a report worth comparing before and after a change.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Measures {
    pub generated_at_ms: i64,
    pub data_files: u64,
    pub delete_files: u64,
    pub data_bytes: u64,
    pub delete_bytes: u64,
    pub records: u64,
    pub partitions: u64,
    pub files_per_partition_median: u64,
    pub files_per_partition_max: u64,
    /// Live data files by size.
    pub size_buckets: Vec<BucketCount>,
    pub snapshots: u64,
    pub manifests: u64,
    pub metadata_json_files: u64,
    /// Bytes of the current manifests and of the metadata.json files on storage.
    pub metadata_bytes: u64,
    /// Everything under the table location (`None`: storage was not listed).
    pub storage_files: Option<u64>,
    pub storage_bytes: Option<u64>,
    /// The compaction backlog: live data files under `min-file-size-bytes` (what compaction
    /// selects) and under the target size.
    pub small_files: u64,
    pub files_under_target: u64,
    /// The estimated object-store requests of a full scan (fewest, most); absent in reports
    /// saved before floe estimated them.
    #[serde(default)]
    pub scan_requests_min: Option<u64>,
    #[serde(default)]
    pub scan_requests_max: Option<u64>,
    /// The writer's side: commit interval, commit duration, freshness; absent in reports
    /// saved before floe measured it, or when no recent commit wrote data.
    #[serde(default)]
    pub writer: Option<WriterSide>,
    pub probe: Option<Probe>,
}

impl Measures {
    /// The first count over `i64::MAX` (no table holds that many), with its field name.
    fn out_of_range(&self) -> Option<(String, u64)> {
        let mut counts: Vec<(String, Option<u64>)> = vec![
            ("data_files".into(), Some(self.data_files)),
            ("delete_files".into(), Some(self.delete_files)),
            ("data_bytes".into(), Some(self.data_bytes)),
            ("delete_bytes".into(), Some(self.delete_bytes)),
            ("records".into(), Some(self.records)),
            ("partitions".into(), Some(self.partitions)),
            (
                "files_per_partition_median".into(),
                Some(self.files_per_partition_median),
            ),
            (
                "files_per_partition_max".into(),
                Some(self.files_per_partition_max),
            ),
            ("snapshots".into(), Some(self.snapshots)),
            ("manifests".into(), Some(self.manifests)),
            ("metadata_json_files".into(), Some(self.metadata_json_files)),
            ("metadata_bytes".into(), Some(self.metadata_bytes)),
            ("storage_files".into(), self.storage_files),
            ("storage_bytes".into(), self.storage_bytes),
            ("small_files".into(), Some(self.small_files)),
            ("files_under_target".into(), Some(self.files_under_target)),
            ("scan_requests_min".into(), self.scan_requests_min),
            ("scan_requests_max".into(), self.scan_requests_max),
        ];
        if let Some(w) = &self.writer {
            counts.push(("writer.writing_commits".into(), Some(w.writing_commits)));
            counts.push(("writer.commit_interval_ms".into(), w.commit_interval_ms));
            counts.push(("writer.file_bytes".into(), Some(w.file_bytes)));
            counts.push(("writer.commit_duration_ms".into(), w.commit_duration_ms));
            counts.push((
                "writer.commit_durations_measured".into(),
                Some(w.commit_durations_measured),
            ));
            counts.push(("writer.freshness_ms".into(), w.freshness_ms));
        }
        for (i, b) in self.size_buckets.iter().enumerate() {
            counts.push((format!("size_buckets[{i}].files"), Some(b.files)));
            counts.push((format!("size_buckets[{i}].bytes"), Some(b.bytes)));
        }
        if let Some(p) = &self.probe {
            counts.push(("probe.rows".into(), Some(p.rows)));
            counts.push(("probe.batches".into(), Some(p.batches)));
            counts.push(("probe.elapsed_ms".into(), Some(p.elapsed_ms)));
        }
        counts
            .into_iter()
            .find_map(|(field, v)| v.filter(|v| i64::try_from(*v).is_err()).map(|v| (field, v)))
    }

    pub fn of(r: &Report) -> Self {
        let mut per_part: Vec<u64> = r.partitions.iter().map(|p| p.data_files).collect();
        per_part.sort_unstable();
        let listed = r.storage.skipped.is_none();
        Self {
            generated_at_ms: r.generated_at_ms,
            data_files: r.totals.data_files,
            delete_files: r.totals.delete_files,
            data_bytes: r.totals.data_bytes,
            delete_bytes: r.totals.delete_bytes,
            records: r.totals.records,
            partitions: r.totals.partitions,
            files_per_partition_median: median(&per_part),
            files_per_partition_max: per_part.last().copied().unwrap_or(0),
            size_buckets: r
                .size_histogram
                .iter()
                .map(|b| BucketCount {
                    label: b.label.to_string(),
                    files: b.files,
                    bytes: b.bytes,
                })
                .collect(),
            snapshots: r.history.snapshots,
            manifests: r.history.manifests,
            metadata_json_files: r.history.metadata_json_files,
            metadata_bytes: r.history.manifest_bytes + r.history.metadata_json_bytes,
            storage_files: listed.then_some(r.storage.listed_files),
            storage_bytes: listed.then_some(r.storage.listed_bytes),
            small_files: r.totals.files_under_min,
            files_under_target: r.totals.files_under_target,
            scan_requests_min: Some(r.scan_requests.min),
            scan_requests_max: Some(r.scan_requests.max),
            writer: r.history.writer.clone(),
            probe: r.probe.clone(),
        }
    }
}

/// What `diagnose --save FILE` writes: the measures and the whole report, with the format,
/// its version and the table.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SavedReport {
    pub format: String,
    pub format_version: u32,
    pub table: String,
    pub measures: Measures,
    /// The report as `diagnose --json` prints it.
    pub report: serde_json::Value,
}

impl SavedReport {
    pub fn new(r: &Report) -> Result<Self> {
        Ok(Self {
            format: SAVED_FORMAT.to_string(),
            format_version: SAVED_FORMAT_VERSION,
            table: r.table.clone(),
            measures: Measures::of(r),
            report: serde_json::to_value(r).map_err(|e| Error::InvalidOption {
                option: "--save".into(),
                value: r.table.clone(),
                reason: e.to_string(),
            })?,
        })
    }

    /// Reads and parses the saved report at `path`, at most [`MAX_SAVED_BYTES`].
    pub fn read(path: &std::path::Path) -> Result<Self> {
        use std::io::Read;
        let source = path.display().to_string();
        let bad = |reason: String| Error::InvalidOption {
            option: "--compare".into(),
            value: source.clone(),
            reason,
        };
        let file = std::fs::File::open(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let mut bytes = Vec::new();
        file.take(MAX_SAVED_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(format!("cannot read it: {e}")))?;
        if bytes.len() as u64 > MAX_SAVED_BYTES {
            return Err(bad(format!(
                "larger than {} MiB: not a saved diagnose report",
                MAX_SAVED_BYTES >> 20
            )));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| bad("not a saved diagnose report (not UTF-8 text)".into()))?;
        Self::parse(&text, &source)
    }

    /// Parses a saved report read from `source` (named in errors). Every count must fit the
    /// signed 64-bit integers Iceberg counts in (a tampered file is refused naming the field).
    pub fn parse(text: &str, source: &str) -> Result<Self> {
        let bad = |reason: String| Error::InvalidOption {
            option: "--compare".into(),
            value: source.to_string(),
            reason,
        };
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("not a saved diagnose report (not JSON: {e})")))?;
        if v.get("format").and_then(|f| f.as_str()) != Some(SAVED_FORMAT) {
            return Err(bad(format!(
                "not a saved diagnose report (no \"format\": \"{SAVED_FORMAT}\"; write one with `floe diagnose NS.T --save FILE`)"
            )));
        }
        let version = v.get("format_version").and_then(|f| f.as_u64());
        if version != Some(u64::from(SAVED_FORMAT_VERSION)) {
            return Err(bad(format!(
                "format_version {} is not the version this floe reads ({SAVED_FORMAT_VERSION})",
                version.map_or("missing".to_string(), |v| v.to_string())
            )));
        }
        let saved: Self = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
        if let Some((field, value)) = saved.measures.out_of_range() {
            return Err(bad(format!(
                "measures.{field} = {value} is out of range (at most {})",
                i64::MAX
            )));
        }
        Ok(saved)
    }
}

/// One compared number.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Delta {
    pub metric: String,
    /// `files`, `bytes`, `count`, `rows` or `ms`.
    pub unit: &'static str,
    pub before: Option<u64>,
    pub after: Option<u64>,
    /// after - before.
    pub change: Option<i64>,
    /// 100 * change / before.
    pub change_pct: Option<f64>,
}

/// A saved report beside the table now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    pub table: String,
    /// The table the saved report is of (differs from `table` only with `force`).
    pub before_table: String,
    pub before: Measures,
    pub after: Measures,
    pub deltas: Vec<Delta>,
    pub warnings: Vec<String>,
}

fn delta(metric: impl Into<String>, unit: &'static str, b: Option<u64>, a: Option<u64>) -> Delta {
    let change = match (b, a) {
        // In i128: no pair of u64 wraps; saturated into i64 (parse refuses counts above it).
        (Some(b), Some(a)) => {
            let d = i128::from(a) - i128::from(b);
            Some(i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX }))
        }
        _ => None,
    };
    Delta {
        metric: metric.into(),
        unit,
        before: b,
        after: a,
        change,
        change_pct: match (b, change) {
            (Some(b), Some(c)) if b > 0 => Some(100.0 * c as f64 / b as f64),
            _ => None,
        },
    }
}

/// One number of the writer's side, before and after.
fn writer_delta(
    metric: &str,
    unit: &'static str,
    b: &Measures,
    a: &Measures,
    field: impl Fn(&WriterSide) -> Option<u64>,
) -> Delta {
    let of = |m: &Measures| m.writer.as_ref().and_then(&field);
    delta(metric, unit, of(b), of(a))
}

/// Compares `saved` (before) with `now` (after). A saved report of another table is refused,
/// unless `force`, which turns the refusal into a warning.
pub fn compare(saved: &SavedReport, now: &Report, force: bool) -> Result<Comparison> {
    let mut warnings = Vec::new();
    if saved.table != now.table {
        let msg = format!(
            "the saved report is of table {}, not {}",
            saved.table, now.table
        );
        if !force {
            return Err(Error::InvalidOption {
                option: "--compare".into(),
                value: saved.table.clone(),
                reason: format!("{msg} (--force compares anyway)"),
            });
        }
        warnings.push(msg);
    }
    let before = saved.measures.clone();
    let after = Measures::of(now);
    if after.generated_at_ms < before.generated_at_ms {
        warnings.push("the saved report is newer than this one".to_string());
    }
    let (b, a) = (&before, &after);
    let mut deltas = vec![
        delta(
            "live data files",
            "files",
            Some(b.data_files),
            Some(a.data_files),
        ),
        delta(
            "live delete files",
            "files",
            Some(b.delete_files),
            Some(a.delete_files),
        ),
        delta(
            "data bytes",
            "bytes",
            Some(b.data_bytes),
            Some(a.data_bytes),
        ),
        delta(
            "delete bytes",
            "bytes",
            Some(b.delete_bytes),
            Some(a.delete_bytes),
        ),
        delta("rows", "rows", Some(b.records), Some(a.records)),
        delta(
            "partitions",
            "count",
            Some(b.partitions),
            Some(a.partitions),
        ),
        delta(
            "files per partition (median)",
            "files",
            Some(b.files_per_partition_median),
            Some(a.files_per_partition_median),
        ),
        delta(
            "files per partition (max)",
            "files",
            Some(b.files_per_partition_max),
            Some(a.files_per_partition_max),
        ),
        delta(
            "compaction backlog (small files)",
            "files",
            Some(b.small_files),
            Some(a.small_files),
        ),
        delta(
            "files under target size",
            "files",
            Some(b.files_under_target),
            Some(a.files_under_target),
        ),
        delta("snapshots", "count", Some(b.snapshots), Some(a.snapshots)),
        delta("manifests", "count", Some(b.manifests), Some(a.manifests)),
        delta(
            "metadata bytes",
            "bytes",
            Some(b.metadata_bytes),
            Some(a.metadata_bytes),
        ),
        delta(
            "files on storage",
            "files",
            b.storage_files,
            a.storage_files,
        ),
        delta(
            "bytes on storage",
            "bytes",
            b.storage_bytes,
            a.storage_bytes,
        ),
        delta(
            "full scan requests (fewest)",
            "count",
            b.scan_requests_min,
            a.scan_requests_min,
        ),
        delta(
            "full scan requests (most)",
            "count",
            b.scan_requests_max,
            a.scan_requests_max,
        ),
        writer_delta("writer: commit interval (median)", "ms", b, a, |w| {
            w.commit_interval_ms
        }),
        writer_delta("writer: file size (median)", "bytes", b, a, |w| {
            Some(w.file_bytes)
        }),
        writer_delta("writer: commit duration (median)", "ms", b, a, |w| {
            w.commit_duration_ms
        }),
        writer_delta("writer: freshness (newest data's age)", "ms", b, a, |w| {
            w.freshness_ms
        }),
        delta(
            "probe rows",
            "rows",
            b.probe.as_ref().map(|p| p.rows),
            a.probe.as_ref().map(|p| p.rows),
        ),
        delta(
            "probe time",
            "ms",
            b.probe.as_ref().map(|p| p.elapsed_ms),
            a.probe.as_ref().map(|p| p.elapsed_ms),
        ),
    ];
    for bucket in &a.size_buckets {
        let was = b
            .size_buckets
            .iter()
            .find(|x| x.label == bucket.label)
            .map(|x| x.files);
        deltas.push(delta(
            format!("files {}", bucket.label),
            "files",
            was,
            Some(bucket.files),
        ));
    }
    if let (Some(pb), Some(pa)) = (&b.probe, &a.probe) {
        if pb.rows != pa.rows {
            warnings.push(format!(
                "the probe read {} rows before and {} now: the data changed, so its times are not comparable as such",
                pb.rows, pa.rows
            ));
        }
    }
    if b.probe.is_none() {
        warnings.push("the saved report has no probe (saved without one)".to_string());
    }
    Ok(Comparison {
        table: now.table.clone(),
        before_table: saved.table.clone(),
        before,
        after,
        deltas,
        warnings,
    })
}
