//! The arithmetic of `diagnose`: the report computed from [`Facts`] (read by
//! `super::gather`) with no I/O and no clock, so every number is unit-tested on synthetic
//! tables.
//!
//! ```text
//!  Facts ──> commit_history      snapshots -> commits, commits/hour, files per commit
//!        ──> partitions, totals  live entries -> per partition counts, medians, histogram
//!        ──> storage             listing - referenced -> unreferenced files by age
//!        ──> report              all of it, the weight of history, and the observations
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::SystemTime;

use super::facts::{
    active_snapshots, by_time, median, writer_pace, writing, Facts, LiveEntry, RetainerFacts,
    SizedPath, SnapshotFacts,
};
use super::model::{
    Bucket, CommitPoint, History, PartitionHealth, Report, Retainer, ScanRequests, Storage,
    Thresholds, Totals, WriterSide, BUCKETS, RECENT_COMMITS,
};
use super::observe;
use super::partitioning::over_partitioning;
use crate::operations::clean::metadata_files::metadata_version;
use crate::storage::listing::{ListedFile, SplitPath};

/// The commit history: counts, the last [`RECENT_COMMITS`] commits, their rate and their
/// average size. The fields about files and metadata weight are left at their defaults.
pub(crate) fn commit_history(snapshots: &[SnapshotFacts]) -> History {
    let snaps = by_time(snapshots);
    let recent: Vec<CommitPoint> = snaps
        .iter()
        .rev()
        .take(RECENT_COMMITS)
        .rev()
        .map(|s| CommitPoint {
            snapshot_id: s.snapshot_id,
            timestamp_ms: s.timestamp_ms,
            operation: s.operation.clone(),
            added_data_files: s.added_data_files,
            added_bytes: s.added_bytes,
        })
        .collect();
    let writing: Vec<&CommitPoint> = recent.iter().filter(|c| c.added_data_files > 0).collect();
    // The rate over the intervals between the recent commits, however short their span (40
    // commits within 10 s are 3,510 per hour); undefined only when they share one millisecond.
    let span_ms = match (recent.first(), recent.last()) {
        (Some(a), Some(b)) => (b.timestamp_ms - a.timestamp_ms).max(0),
        _ => 0,
    };
    History {
        snapshots: snaps.len() as u64,
        oldest_ms: snaps.first().map(|s| s.timestamp_ms),
        newest_ms: snaps.last().map(|s| s.timestamp_ms),
        recent_span_ms: span_ms,
        commits_per_hour: if span_ms > 0 {
            (recent.len() as f64 - 1.0) * 3_600_000.0 / span_ms as f64
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
        ..Default::default()
    }
}

/// Health of every partition of `live` (most data files first) and the file-size histogram of
/// its data files; `snapshots` tell which partitions are active and when they were written.
pub(crate) fn partitions(
    live: &[LiveEntry],
    snapshots: &[SnapshotFacts],
    thresholds: &Thresholds,
) -> (Vec<PartitionHealth>, Vec<Bucket>) {
    let active_snapshots = active_snapshots(snapshots);
    let ts_of: HashMap<i64, i64> = snapshots
        .iter()
        .map(|s| (s.snapshot_id, s.timestamp_ms))
        .collect();
    let mut parts: BTreeMap<(i32, String), (Vec<u64>, PartitionHealth)> = BTreeMap::new();
    let mut size_histogram: Vec<Bucket> = BUCKETS
        .iter()
        .map(|(upper, label)| Bucket {
            label,
            upper_bytes: *upper,
            files: 0,
            bytes: 0,
        })
        .collect();
    for f in live {
        let (sizes, p) = parts
            .entry((f.spec_id, f.partition.clone()))
            .or_insert_with(|| {
                (
                    Vec::new(),
                    PartitionHealth {
                        partition: f.partition.clone(),
                        spec_id: f.spec_id,
                        filter: f.filter.clone(),
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
                        deleted_rows: 0,
                        deleted_row_ratio: 0.0,
                        deletion_vectors: 0,
                        position_delete_files: 0,
                        equality_delete_files: 0,
                        vector_deleted_rows: 0,
                        vector_deleted_row_ratio: 0.0,
                        active: false,
                        last_added_ms: None,
                    },
                )
            });
        let size = f.size;
        if f.data {
            sizes.push(size);
            p.data_files += 1;
            p.records += f.records;
            p.total_bytes += size;
            p.files_under_min += u64::from(size < thresholds.min_file_size_bytes);
            p.files_under_target += u64::from(size < thresholds.target_file_size_bytes);
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
            p.deleted_rows += f.records;
            if f.vector {
                p.deletion_vectors += 1;
                p.vector_deleted_rows += f.records;
            } else if f.equality {
                p.equality_delete_files += 1;
            } else {
                p.position_delete_files += 1;
            }
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
            p.deleted_row_ratio = match p.records {
                0 => 0.0,
                n => p.deleted_rows as f64 / n as f64,
            };
            p.vector_deleted_row_ratio = match p.records {
                0 => 0.0,
                n => p.vector_deleted_rows as f64 / n as f64,
            };
            p
        })
        .collect();
    partitions.sort_by(|a, b| {
        b.data_files
            .cmp(&a.data_files)
            .then(a.partition.cmp(&b.partition))
    });
    (partitions, size_histogram)
}

/// Totals over `partitions`; the median is over every live data file of `live`.
pub(crate) fn totals(partitions: &[PartitionHealth], live: &[LiveEntry]) -> Totals {
    let mut all_sizes: Vec<u64> = live.iter().filter(|f| f.data).map(|f| f.size).collect();
    all_sizes.sort_unstable();
    Totals {
        partitions: partitions.len() as u64,
        active_partitions: partitions.iter().filter(|p| p.active).count() as u64,
        data_files: partitions.iter().map(|p| p.data_files).sum(),
        data_bytes: partitions.iter().map(|p| p.total_bytes).sum(),
        records: partitions.iter().map(|p| p.records).sum(),
        delete_files: partitions.iter().map(|p| p.delete_files).sum(),
        delete_bytes: partitions.iter().map(|p| p.delete_bytes).sum(),
        deletion_vectors: partitions.iter().map(|p| p.deletion_vectors).sum(),
        position_delete_files: partitions.iter().map(|p| p.position_delete_files).sum(),
        equality_delete_files: partitions.iter().map(|p| p.equality_delete_files).sum(),
        vector_deleted_rows: partitions.iter().map(|p| p.vector_deleted_rows).sum(),
        files_under_min: partitions.iter().map(|p| p.files_under_min).sum(),
        files_under_target: partitions.iter().map(|p| p.files_under_target).sum(),
        median_bytes: median(&all_sizes),
    }
}

/// The path part of `location` (`file:///a`, `/a` -> `/a`), the key listings and metadata meet on.
fn path_key(location: &str, eq: &HashMap<String, String>) -> String {
    SplitPath::parse(location, eq).path
}

/// Storage from one listing at `now`: what neither a snapshot nor the metadata log
/// (`referenced`) references, by age.
pub(crate) fn storage(listed: &[ListedFile], referenced: &[String], now: SystemTime) -> Storage {
    let eq = HashMap::new();
    let known: HashSet<String> = referenced.iter().map(|p| path_key(p, &eq)).collect();
    let mut storage = Storage::default();
    let mut ages = [(0u64, 0u64); 4];
    for f in listed {
        storage.listed_files += 1;
        storage.listed_bytes += f.size;
        if known.contains(&path_key(&f.path, &eq)) {
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
    storage
}

/// Number and bytes of the metadata.json files in `listed`.
pub(crate) fn metadata_json(listed: &[ListedFile]) -> (u64, u64) {
    listed
        .iter()
        .filter(|f| metadata_version(&f.path).is_some())
        .fold((0, 0), |(n, b), f| (n + 1, b + f.size))
}

/// Number and bytes of `files`; a file the metadata does not size takes its size from
/// `listed_size` (path key -> size), else counts 0 bytes.
fn count_sized(files: &[SizedPath], listed_size: &HashMap<String, u64>) -> (u64, u64) {
    let eq = HashMap::new();
    files.iter().fold((0, 0), |(n, b), (path, size)| {
        let size = size
            .or_else(|| listed_size.get(&path_key(path, &eq)).copied())
            .unwrap_or(0);
        (n + 1, b + size)
    })
}

/// The writer's side at `now_ms`: the pace of the recent writing commits, their commit
/// duration, and the table's freshness. A commit's duration is measured from its snapshot's
/// timestamp to the modification time of the metadata.json written with it (the file whose
/// `last-updated-ms` is that timestamp, as the spec's builders write it), as `listed` reports it;
/// `None` when the storage reports whole seconds (S3's listing) or none of those files is listed.
pub(crate) fn writer_side(
    recent: &[CommitPoint],
    metadata_files: &[(i64, String)],
    listed: &[ListedFile],
    now_ms: i64,
) -> Option<WriterSide> {
    let commits: Vec<&CommitPoint> = recent.iter().filter(writing).collect();
    let pace = writer_pace(&commits)?;
    let eq = HashMap::new();
    let by_time: HashMap<i64, &str> = metadata_files
        .iter()
        .map(|(ts, path)| (*ts, path.as_str()))
        .collect();
    let modified: HashMap<String, i64> = listed
        .iter()
        .filter_map(|f| {
            let ms = f.modified.duration_since(SystemTime::UNIX_EPOCH).ok()?;
            Some((path_key(&f.path, &eq), ms.as_millis() as i64))
        })
        .collect();
    let landed: Vec<(i64, i64)> = commits
        .iter()
        .filter_map(|c| {
            let file = by_time.get(&c.timestamp_ms)?;
            Some((c.timestamp_ms, *modified.get(&path_key(file, &eq))?))
        })
        .collect();
    let sub_second = landed.iter().any(|(_, m)| m % 1000 != 0);
    let mut durations: Vec<u64> = landed
        .iter()
        .map(|(ts, m)| (m - ts).max(0) as u64)
        .collect();
    durations.sort_unstable();
    let newest = commits.last().map(|c| c.timestamp_ms);
    Some(WriterSide {
        writing_commits: pace.commits as u64,
        commit_interval_ms: pace.interval_ms.map(|ms| ms as u64),
        files_per_commit: pace.files_per_commit,
        file_bytes: pace.file_bytes,
        commit_duration_ms: (sub_second && !durations.is_empty()).then(|| median(&durations)),
        commit_durations_measured: if sub_second {
            durations.len() as u64
        } else {
            0
        },
        freshness_ms: newest.map(|ts| (now_ms - ts).max(0) as u64),
    })
}

/// Row groups of `f`: its split offsets, else its size over `row_group_bytes` (at least one).
fn row_groups_of(f: &LiveEntry, row_group_bytes: u64) -> u64 {
    f.row_groups
        .filter(|n| *n > 0)
        .unwrap_or_else(|| f.size.div_ceil(row_group_bytes.max(1)).max(1))
}

/// The object-store requests of a full scan of `live` (see [`ScanRequests`] for the model),
/// and after compacting each of `partitions` to `target` bytes per file.
pub(crate) fn scan_requests(
    live: &[LiveEntry],
    partitions: &[PartitionHealth],
    manifests: u64,
    columns: u64,
    row_group_bytes: u64,
    target: u64,
) -> ScanRequests {
    let columns = columns.max(1);
    let metadata = 2 + manifests;
    let (mut min, mut max, mut row_groups) = (metadata, metadata, 0);
    for f in live {
        if f.vector {
            min += 1;
            max += 1;
            continue;
        }
        let groups = row_groups_of(f, row_group_bytes);
        if f.data {
            row_groups += groups;
        }
        min += 1 + groups;
        max += 2 + groups * columns;
    }
    let compacted_files: u64 = partitions
        .iter()
        .filter(|p| p.data_files > 0)
        .map(|p| p.total_bytes.div_ceil(target.max(1)).max(1))
        .sum();
    let groups = target.div_ceil(row_group_bytes.max(1)).max(1);
    ScanRequests {
        metadata,
        min,
        max,
        row_groups,
        columns,
        compacted_files,
        compacted_min: metadata + compacted_files * (1 + groups),
        compacted_max: metadata + compacted_files * (2 + groups * columns),
    }
}

/// The retainers with their files counted (sizes from the metadata, else the listing).
fn retained_by(retainers: &[RetainerFacts], listed_size: &HashMap<String, u64>) -> Vec<Retainer> {
    retainers
        .iter()
        .map(|r| {
            let (held_files, held_bytes) = count_sized(&r.held, listed_size);
            let (exclusive_files, exclusive_bytes) = count_sized(&r.exclusive, listed_size);
            Retainer {
                retainer: r.retainer.clone(),
                kind: r.kind,
                snapshots: r.snapshots,
                held_files,
                held_bytes,
                exclusive_files,
                exclusive_bytes,
            }
        })
        .collect()
}

/// Computes the report from `facts`. `duration_ms` is left 0: only the caller knows how long
/// reading took.
pub(crate) fn report(facts: Facts) -> Report {
    let Facts {
        table,
        location,
        format_version,
        thresholds,
        spec_id,
        spec,
        previous_versions_max,
        snapshots,
        metadata_log_entries,
        live,
        refs,
        only_old,
        expirable,
        manifest_lengths,
        referenced,
        listing,
        writers,
        retainers,
        metadata_files,
        leaf_columns,
        row_group_bytes,
        now,
    } = facts;
    let (partitions, size_histogram) = partitions(&live, &snapshots, &thresholds);
    let totals = totals(&partitions, &live);

    let mut history = commit_history(&snapshots);
    history.metadata_log_entries = metadata_log_entries;
    // The listing's sizes fill in files metadata does not size (manifest lists).
    let eq = HashMap::new();
    let listed_size: HashMap<String, u64> = match &listing {
        Ok(files) => files
            .iter()
            .map(|f| (path_key(&f.path, &eq), f.size))
            .collect(),
        Err(_) => HashMap::new(),
    };
    let mut ref_names: Vec<String> = refs.iter().map(|(n, id)| format!("{n} -> {id}")).collect();
    ref_names.sort();
    history.refs = ref_names;
    (history.only_old_files, history.only_old_bytes) = count_sized(&only_old, &listed_size);
    if let Some(e) = &expirable {
        history.expirable_snapshots = e.snapshots;
        (history.expirable_files, history.expirable_bytes) = count_sized(&e.files, &listed_size);
    }
    history.manifests = manifest_lengths.len() as u64;
    history.manifest_bytes = manifest_lengths.iter().flatten().sum();
    history.retained_by = retained_by(&retainers, &listed_size);
    let now_ms = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    history.writer = writer_side(
        &history.recent,
        &metadata_files,
        listing.as_deref().unwrap_or_default(),
        now_ms,
    );
    let scan_requests = scan_requests(
        &live,
        &partitions,
        history.manifests,
        leaf_columns,
        row_group_bytes,
        thresholds.target_file_size_bytes,
    );

    let storage = match &listing {
        Err(e) => Storage {
            skipped: Some(e.clone()),
            ..Default::default()
        },
        Ok(listed) => {
            (history.metadata_json_files, history.metadata_json_bytes) = metadata_json(listed);
            storage(listed, &referenced, now)
        }
    };

    let over_partitioned = over_partitioning(
        &table,
        &spec,
        spec_id,
        &live,
        &snapshots,
        thresholds.target_file_size_bytes,
        now_ms,
    );
    let observations = observe::observe(&observe::Inputs {
        over_partitioned: over_partitioned.as_ref(),
        table: &table,
        thresholds: &thresholds,
        totals: &totals,
        partitions: &partitions,
        history: &history,
        scan_requests: &scan_requests,
        storage: &storage,
        writers: &writers,
        previous_versions_max,
    });
    Report {
        table,
        location,
        format_version,
        generated_at_ms: now_ms,
        duration_ms: 0,
        thresholds,
        totals,
        size_histogram,
        partitions,
        history,
        storage,
        writers,
        over_partitioned,
        scan_requests,
        observations,
        probe: None,
    }
}

#[cfg(test)]
mod tests;
