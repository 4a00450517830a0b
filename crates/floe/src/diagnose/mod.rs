//! `diagnose`: what kind of small files a table is growing, why, and what to run, from metadata
//! alone (no data file is opened) plus one listing of the table location.
//!
//! ```text
//!  live files (current manifests) ──> per partition: count, sizes, deletes, activity
//!  all snapshots (ReachIndex)      ──> history: commits, files per commit, what expiry frees
//!  one listing of the location     ──> storage: unreferenced files by age
//!  snapshot summaries              ──> writer watermarks
//!                                  ──> observations (the seeds' table) -> first action
//! ```

mod observe;
pub mod render;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Instant, SystemTime};

use iceberg::spec::{DataContentType, PartitionSpec, Struct, Transform, Type};
use iceberg::TableIdent;

use crate::catalog::{ident_string, refs, Catalog};
use crate::clean::metadata_files::metadata_version;
use crate::compact::CompactBuilder;
use crate::error::Result;
use crate::expire;
use crate::properties::{self, u64_prop};
use crate::storage::listing::{list_files, SplitPath};
use crate::table::reach::{metadata_files, ReachIndex};
use crate::table::watermarks::{watermarks, Watermark};

pub use observe::{bytes as human_bytes, Observation};

/// A partition is active when one of the last this-many commits added a data file to it.
pub const ACTIVE_COMMITS: usize = 10;
/// Commits shown in the history (files added per commit over time).
pub const RECENT_COMMITS: usize = 200;

/// File-size histogram bucket upper bounds (bytes); the last bucket is open.
const BUCKETS: [(u64, &str); 9] = [
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
    /// Commits per hour over the recent commits.
    pub commits_per_hour: f64,
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
    pub observations: Vec<Observation>,
}

fn median(sorted: &[u64]) -> u64 {
    if sorted.is_empty() {
        0
    } else {
        sorted[sorted.len() / 2]
    }
}

/// Computes the report of `ident`.
pub async fn diagnose(catalog: &Catalog, ident: &TableIdent) -> Result<Report> {
    let started = Instant::now();
    let table = catalog.load_table(ident).await?;
    let md = table.metadata();
    let opts = CompactBuilder::new(catalog, ident.clone()).plan_options(&table)?;
    let thresholds = Thresholds {
        target_file_size_bytes: opts.target_file_size_bytes,
        min_file_size_bytes: opts.min_file_size_bytes,
        min_input_files: opts.min_input_files as u64,
    };

    // History first: which snapshots are recent decides which partitions are active.
    let mut snaps: Vec<_> = md.snapshots().cloned().collect();
    snaps.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    let ts_of: HashMap<i64, i64> = snaps
        .iter()
        .map(|s| (s.snapshot_id(), s.timestamp_ms()))
        .collect();
    let adds = |s: &iceberg::spec::Snapshot| {
        let p = &s.summary().additional_properties;
        let get = |k: &str| p.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        (get("added-data-files"), get("added-files-size"))
    };
    let recent: Vec<CommitPoint> = snaps
        .iter()
        .rev()
        .take(RECENT_COMMITS)
        .rev()
        .map(|s| {
            let (files, bytes) = adds(s);
            CommitPoint {
                snapshot_id: s.snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
                operation: s.summary().operation.as_str().to_string(),
                added_data_files: files,
                added_bytes: bytes,
            }
        })
        .collect();
    let active_snapshots: HashSet<i64> = snaps
        .iter()
        .rev()
        .filter(|s| adds(s).0 > 0)
        .take(ACTIVE_COMMITS)
        .map(|s| s.snapshot_id())
        .collect();
    let writing: Vec<&CommitPoint> = recent.iter().filter(|c| c.added_data_files > 0).collect();
    let span_h = match (recent.first(), recent.last()) {
        // Under a minute of history says nothing about a rate.
        (Some(a), Some(b)) if b.timestamp_ms - a.timestamp_ms >= 60_000 => {
            (b.timestamp_ms - a.timestamp_ms) as f64 / 3_600_000.0
        }
        _ => 0.0,
    };
    let mut history = History {
        snapshots: snaps.len() as u64,
        oldest_ms: snaps.first().map(|s| s.timestamp_ms()),
        newest_ms: snaps.last().map(|s| s.timestamp_ms()),
        commits_per_hour: if span_h > 0.0 {
            (recent.len() as f64 - 1.0) / span_h
        } else {
            0.0
        },
        avg_files_per_commit: if writing.is_empty() {
            0.0
        } else {
            writing.iter().map(|c| c.added_data_files).sum::<u64>() as f64 / writing.len() as f64
        },
        avg_bytes_per_commit: if writing.is_empty() {
            0.0
        } else {
            writing.iter().map(|c| c.added_bytes).sum::<u64>() as f64 / writing.len() as f64
        },
        recent,
        metadata_log_entries: md.metadata_log().len() as u64,
        ..Default::default()
    };

    // Every manifest of every snapshot, read once: the current snapshot's live entries for the
    // partition view, reachability for the history view below.
    let all_ids: Vec<i64> = snaps.iter().map(|s| s.snapshot_id()).collect();
    let mut index = ReachIndex::load_with_live(&table, &all_ids, md.current_snapshot_id()).await?;
    // Partitions of the current snapshot.
    let live = index.take_live();
    let mut parts: BTreeMap<(i32, String), (Vec<u64>, PartitionHealth)> = BTreeMap::new();
    let mut all_sizes = Vec::new();
    let mut size_histogram: Vec<Bucket> = BUCKETS
        .iter()
        .map(|(upper, label)| Bucket {
            label,
            upper_bytes: *upper,
            files: 0,
            bytes: 0,
        })
        .collect();
    let schema = md.current_schema().clone();
    for f in &live {
        let spec = md.partition_spec_by_id(f.spec_id);
        let label = match spec {
            Some(spec) if !spec.is_unpartitioned() => {
                spec.partition_to_path(f.file.partition(), schema.clone())
            }
            _ => "unpartitioned".to_string(),
        };
        let (sizes, p) = parts.entry((f.spec_id, label.clone())).or_insert_with(|| {
            let filter = spec.and_then(|s| partition_filter(s, &schema, f.file.partition()));
            (
                Vec::new(),
                PartitionHealth {
                    partition: label,
                    spec_id: f.spec_id,
                    filter,
                    data_files: 0,
                    records: 0,
                    total_bytes: 0,
                    avg_bytes: 0,
                    median_bytes: 0,
                    files_under_min: 0,
                    files_under_target: 0,
                    delete_files: 0,
                    delete_bytes: 0,
                    delete_ratio: 0.0,
                    active: false,
                    last_added_ms: None,
                },
            )
        });
        let size = f.file.file_size_in_bytes();
        if f.file.content_type() == DataContentType::Data {
            sizes.push(size);
            all_sizes.push(size);
            p.data_files += 1;
            p.records += f.file.record_count();
            p.total_bytes += size;
            p.files_under_min += u64::from(size < opts.min_file_size_bytes);
            p.files_under_target += u64::from(size < opts.target_file_size_bytes);
            p.active |= active_snapshots.contains(&f.snapshot_id);
            if let Some(ts) = ts_of.get(&f.snapshot_id) {
                p.last_added_ms = Some(p.last_added_ms.map_or(*ts, |t| t.max(*ts)));
            }
            if let Some(b) = size_histogram.iter_mut().find(|b| size < b.upper_bytes) {
                b.files += 1;
                b.bytes += size;
            }
        } else {
            p.delete_files += 1;
            p.delete_bytes += size;
        }
    }
    let mut partitions: Vec<PartitionHealth> = parts
        .into_values()
        .map(|(mut sizes, mut p)| {
            sizes.sort_unstable();
            p.median_bytes = median(&sizes);
            p.avg_bytes = p.total_bytes.checked_div(p.data_files).unwrap_or(0);
            p.delete_ratio = if p.data_files > 0 {
                p.delete_files as f64 / p.data_files as f64
            } else {
                p.delete_files as f64
            };
            p
        })
        .collect();
    partitions.sort_by(|a, b| {
        b.data_files
            .cmp(&a.data_files)
            .then(a.partition.cmp(&b.partition))
    });
    all_sizes.sort_unstable();
    let totals = Totals {
        partitions: partitions.len() as u64,
        active_partitions: partitions.iter().filter(|p| p.active).count() as u64,
        data_files: partitions.iter().map(|p| p.data_files).sum(),
        data_bytes: partitions.iter().map(|p| p.total_bytes).sum(),
        records: partitions.iter().map(|p| p.records).sum(),
        delete_files: partitions.iter().map(|p| p.delete_files).sum(),
        delete_bytes: partitions.iter().map(|p| p.delete_bytes).sum(),
        files_under_min: partitions.iter().map(|p| p.files_under_min).sum(),
        files_under_target: partitions.iter().map(|p| p.files_under_target).sum(),
        median_bytes: median(&all_sizes),
    };

    // One listing of the table location; its sizes also fill in files metadata does not size
    // (manifest lists).
    let eq = HashMap::new();
    let listing = list_files(table.file_io(), md.location()).await;
    let listed_size: HashMap<String, u64> = match &listing {
        Ok(files) => files
            .iter()
            .map(|f| (SplitPath::parse(&f.path, &eq).path, f.size))
            .collect(),
        Err(_) => HashMap::new(),
    };
    let size_of = |path: &str, r: &crate::table::reach::Reached| {
        r.size
            .or_else(|| listed_size.get(&SplitPath::parse(path, &eq).path).copied())
            .unwrap_or(0)
    };

    // Reachability over all snapshots: what only old snapshots hold, what expiry would free.
    let table_refs = refs(md)?;
    let mut heads: Vec<i64> = table_refs.values().map(|r| r.snapshot_id).collect();
    heads.extend(md.current_snapshot_id());
    let mut ref_names: Vec<String> = table_refs
        .iter()
        .map(|(n, r)| format!("{n} -> {}", r.snapshot_id))
        .collect();
    ref_names.sort();
    history.refs = ref_names;
    let reach_all = index.reachable(&all_ids);
    for (path, r) in reach_all.minus(&index.reachable(&heads)) {
        history.only_old_files += 1;
        history.only_old_bytes += size_of(&path, &r);
    }
    let writers = watermarks(md);
    // What `expire-snapshots` with the table's own settings would remove now.
    if let Ok(plan) = expire::ExpireBuilder::new(catalog, ident.clone()).preview(&table) {
        let kept: Vec<i64> = all_ids
            .iter()
            .copied()
            .filter(|id| !plan.expired_snapshots.contains(id))
            .collect();
        history.expirable_snapshots = plan.expired_snapshots.len() as u64;
        for (path, r) in index
            .reachable(&plan.expired_snapshots)
            .minus(&index.reachable(&kept))
        {
            history.expirable_files += 1;
            history.expirable_bytes += size_of(&path, &r);
        }
    }
    // The current snapshot's manifests were read with the rest of the history.
    let manifests = md
        .current_snapshot_id()
        .map(|id| index.manifests_of(id))
        .unwrap_or_default();
    history.manifests = manifests.len() as u64;
    history.manifest_bytes = manifests.iter().filter_map(|(_, len)| *len).sum();

    // Storage: one listing, minus everything any snapshot or the metadata log references.
    let mut storage = Storage::default();
    let mut referenced = reach_all;
    referenced.extend(metadata_files(&table));
    let known: HashSet<String> = referenced
        .files
        .keys()
        .map(|p| SplitPath::parse(p, &eq).path)
        .collect();
    match listing {
        Err(e) => storage.skipped = Some(e.to_string()),
        Ok(listed) => {
            let now = SystemTime::now();
            let mut ages = [(0u64, 0u64); 4];
            for f in &listed {
                storage.listed_files += 1;
                storage.listed_bytes += f.size;
                if metadata_version(&f.path).is_some() {
                    history.metadata_json_files += 1;
                    history.metadata_json_bytes += f.size;
                }
                if known.contains(&SplitPath::parse(&f.path, &eq).path) {
                    continue;
                }
                storage.unreferenced_files += 1;
                storage.unreferenced_bytes += f.size;
                if storage.sample_unreferenced.len() < 10 {
                    storage.sample_unreferenced.push(f.path.clone());
                }
                let age_h = now
                    .duration_since(f.modified)
                    .map(|d| d.as_secs() / 3600)
                    .unwrap_or(0);
                let i = match age_h {
                    0 => 0,
                    1..=23 => 1,
                    24..=71 => 2,
                    _ => 3,
                };
                ages[i].0 += 1;
                ages[i].1 += f.size;
            }
            storage.unreferenced_by_age = ["< 1 h", "1 h - 1 d", "1 - 3 d", ">= 3 d"]
                .iter()
                .zip(ages)
                .map(|(l, (n, b))| (l.to_string(), n, b))
                .collect();
        }
    }

    let name = ident_string(ident);
    let previous_max = u64_prop(
        md.properties(),
        properties::METADATA_PREVIOUS_VERSIONS_MAX,
        properties::METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT,
    )?;
    let observations = observe::observe(&observe::Inputs {
        table: &name,
        thresholds: &thresholds,
        totals: &totals,
        partitions: &partitions,
        history: &history,
        storage: &storage,
        writers: &writers,
        previous_versions_max: previous_max,
    });
    Ok(Report {
        table: name,
        location: md.location().to_string(),
        generated_at_ms: chrono::Utc::now().timestamp_millis(),
        duration_ms: started.elapsed().as_millis() as u64,
        thresholds,
        totals,
        size_histogram,
        partitions,
        history,
        storage,
        writers,
        observations,
    })
}

/// A `--where` filter selecting exactly the partition `value` of `spec`, for identity, year,
/// month and day transforms (others have no exact column filter).
pub fn partition_filter(
    spec: &PartitionSpec,
    schema: &iceberg::spec::Schema,
    value: &Struct,
) -> Option<String> {
    let ptype = spec.partition_type(schema).ok()?;
    let mut conds = Vec::new();
    for (i, field) in spec.fields().iter().enumerate() {
        let col = schema.name_by_field_id(field.source_id)?;
        let lit = value.fields().get(i)?.as_ref();
        let Some(lit) = lit else {
            conds.push(format!("{col} IS NULL"));
            continue;
        };
        let human = field
            .transform
            .to_human_string(&ptype.fields()[i].field_type, Some(lit));
        let next = |d: chrono::NaiveDate| d.format("%Y-%m-%d").to_string();
        match field.transform {
            Transform::Identity => {
                let numeric = matches!(
                    schema.field_by_id(field.source_id).map(|f| f.field_type.as_ref()),
                    Some(Type::Primitive(p)) if matches!(p,
                        iceberg::spec::PrimitiveType::Int
                        | iceberg::spec::PrimitiveType::Long
                        | iceberg::spec::PrimitiveType::Float
                        | iceberg::spec::PrimitiveType::Double
                        | iceberg::spec::PrimitiveType::Boolean
                        | iceberg::spec::PrimitiveType::Decimal { .. })
                );
                if numeric {
                    conds.push(format!("{col} = {human}"));
                } else {
                    conds.push(format!("{col} = '{}'", human.replace('\'', "''")));
                }
            }
            Transform::Day => {
                let d = chrono::NaiveDate::parse_from_str(&human, "%Y-%m-%d").ok()?;
                conds.push(format!(
                    "{col} >= '{}' AND {col} < '{}'",
                    next(d),
                    next(d.succ_opt()?)
                ));
            }
            Transform::Month => {
                let d =
                    chrono::NaiveDate::parse_from_str(&format!("{human}-01"), "%Y-%m-%d").ok()?;
                let n = d.checked_add_months(chrono::Months::new(1))?;
                conds.push(format!("{col} >= '{}' AND {col} < '{}'", next(d), next(n)));
            }
            Transform::Year => {
                let d = chrono::NaiveDate::parse_from_str(&format!("{human}-01-01"), "%Y-%m-%d")
                    .ok()?;
                let n = d.checked_add_months(chrono::Months::new(12))?;
                conds.push(format!("{col} >= '{}' AND {col} < '{}'", next(d), next(n)));
            }
            _ => return None,
        }
    }
    (!conds.is_empty()).then(|| conds.join(" AND "))
}
