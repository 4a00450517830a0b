//! The observation table (from the seeds' "diagnose before tuning"): each row is checked
//! against the report's numbers, and when it holds, names its evidence and the first action as
//! an exact floe command.

use super::facts::{writer_pace, writing};
use super::model::{
    bytes, CommitPoint, History, Observation, OverPartitioned, PartitionHealth, ScanRequests,
    Storage, Thresholds, Totals,
};
use crate::table::watermarks::Watermark;

pub(super) struct Inputs<'a> {
    pub table: &'a str,
    pub thresholds: &'a Thresholds,
    pub totals: &'a Totals,
    pub partitions: &'a [PartitionHealth],
    pub history: &'a History,
    pub scan_requests: &'a ScanRequests,
    pub storage: &'a Storage,
    pub writers: &'a [Watermark],
    pub previous_versions_max: u64,
    /// `None`: unpartitioned, or no data in the current spec.
    pub over_partitioned: Option<&'a OverPartitioned>,
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// A compaction command for a set of partitions: with a `--where` when exactly one partition
/// is meant and it has a filter.
fn compact_cmd(table: &str, parts: &[&PartitionHealth]) -> String {
    match parts {
        [one] => match &one.filter {
            Some(f) => format!("floe compact {table} --where \"{f}\""),
            None => format!("floe compact {table}"),
        },
        _ => format!("floe compact {table}"),
    }
}

pub(super) fn observe(i: &Inputs<'_>) -> Vec<Observation> {
    let t = i.table;
    let min = i.thresholds.min_file_size_bytes;
    let min_input = i.thresholds.min_input_files.max(1);
    let mut out = Vec::new();

    // 1. Many small live files in active partitions.
    let active: Vec<&PartitionHealth> = i.partitions.iter().filter(|p| p.active).collect();
    let a_files: u64 = active.iter().map(|p| p.data_files).sum();
    let a_small: u64 = active.iter().map(|p| p.files_under_min).sum();
    let holds = a_small >= min_input && pct(a_small, a_files) >= 50.0;
    out.push(Observation {
        id: "small-files-in-active-partitions",
        observation: "Many small live files in active partitions",
        holds,
        evidence: format!(
            "{a_small} of {a_files} live data files in {} active partition(s) are under {} ({:.0}%); recent commits add {:.1} files / {} each; a full scan makes {}-{} object-store requests, {}-{} once compacted to {} files",
            active.len(),
            bytes(min),
            pct(a_small, a_files),
            i.history.avg_files_per_commit,
            bytes(i.history.avg_bytes_per_commit as u64),
            i.scan_requests.min,
            i.scan_requests.max,
            i.scan_requests.compacted_min,
            i.scan_requests.compacted_max,
            i.scan_requests.compacted_files,
        ),
        investigate: "Commit interval, input per partition, writer parallelism and buffer pressure: measure bytes arriving per commit before changing settings",
        action: holds.then(|| format!("floe compact {t}  # then raise the writer's commit interval so each commit writes bigger files")),
    });

    // 1b. The writer is the cause: its commits make small files (with the numbers to fix it).
    out.extend(writer_side(i));

    // 2. Uncompacted files piling up in a few partitions.
    let mut backlog: Vec<&PartitionHealth> = i
        .partitions
        .iter()
        .filter(|p| p.files_under_min >= min_input)
        .collect();
    backlog.sort_by_key(|p| std::cmp::Reverse(p.files_under_min));
    let top: Vec<&PartitionHealth> = backlog.iter().take(3).copied().collect();
    let top_small: u64 = top.iter().map(|p| p.files_under_min).sum();
    let holds = i.partitions.len() >= 4
        && !top.is_empty()
        && top_small >= 4 * min_input
        && pct(top_small, i.totals.files_under_min) >= 50.0;
    out.push(Observation {
        id: "uncompacted-files-in-few-partitions",
        observation: "Uncompacted small files piling up in a few partitions",
        holds,
        evidence: format!(
            "the top {} of {} partitions hold {top_small} of {} small files ({:.0}%){}",
            top.len(),
            i.partitions.len(),
            i.totals.files_under_min,
            pct(top_small, i.totals.files_under_min),
            top.first()
                .map(|p| format!("; worst: {} with {} files", p.partition, p.files_under_min))
                .unwrap_or_default(),
        ),
        investigate: "Compaction progress and skew: is maintenance running, and keeping up with these partitions?",
        action: holds.then(|| compact_cmd(t, &top[..1])),
    });

    // 3. Few live files, many old files kept by history.
    let live_files = i.totals.data_files + i.totals.delete_files;
    let live_bytes = i.totals.data_bytes + i.totals.delete_bytes;
    let holds = i.history.only_old_files > 0
        && (i.history.only_old_files > live_files || i.history.only_old_bytes > live_bytes / 2);
    let protect = if i.writers.is_empty() {
        String::new()
    } else {
        format!(
            "; writer watermarks kept: {}",
            i.writers
                .iter()
                .map(|w| w.writer())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    // Who keeps the most that only it keeps.
    let mut keepers: Vec<&super::model::Retainer> = i
        .history
        .retained_by
        .iter()
        .filter(|r| r.held_files > 0)
        .collect();
    keepers.sort_by_key(|r| {
        (
            std::cmp::Reverse(r.exclusive_bytes),
            std::cmp::Reverse(r.held_bytes),
        )
    });
    let kept_by = if keepers.is_empty() {
        String::new()
    } else {
        format!(
            "; kept by: {}",
            keepers
                .iter()
                .take(5)
                .map(|r| format!(
                    "{} {} files ({}), {} ({}) only by it",
                    r.retainer,
                    r.held_files,
                    bytes(r.held_bytes),
                    r.exclusive_files,
                    bytes(r.exclusive_bytes)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    out.push(Observation {
        id: "history-retains-old-files",
        observation: "Few live files, many old files retained by history",
        holds,
        evidence: format!(
            "{} files ({}) are referenced only by old snapshots vs {live_files} live ({}); {} snapshots, {} expirable now under the table's retention ({} files, {}); refs: {}{protect}",
            i.history.only_old_files,
            bytes(i.history.only_old_bytes),
            bytes(live_bytes),
            i.history.snapshots,
            i.history.expirable_snapshots,
            i.history.expirable_files,
            bytes(i.history.expirable_bytes),
            if i.history.refs.is_empty() { "none".to_string() } else { i.history.refs.join(", ") },
        ) + &kept_by,
        investigate: "Snapshot retention (history.expire.*), tags and branches, writer recovery points, and whether expiry runs at all",
        action: holds.then(|| {
            if i.history.expirable_snapshots > 0 {
                format!("floe expire-snapshots {t}")
            } else {
                // Nothing is old enough for the table's retention: show what a shorter one frees.
                let span = match (i.history.oldest_ms, i.history.newest_ms) {
                    (Some(a), Some(b)) => b - a,
                    _ => 0,
                };
                let age = if span >= 2 * 86_400_000 {
                    "1d"
                } else if span >= 2 * 3_600_000 {
                    "1h"
                } else {
                    "0s"
                };
                format!("floe expire-snapshots {t} --older-than {age} --retain-last 1 --dry-run")
            }
        }),
    });

    // 4. Small delete files dominate.
    let d = i.totals.delete_files;
    let avg_delete = i.totals.delete_bytes.checked_div(d).unwrap_or(0);
    let holds = d >= min_input && d * 2 >= i.totals.data_files && avg_delete < min;
    out.push(Observation {
        id: "small-delete-files-dominate",
        observation: "Small delete files dominate",
        holds,
        evidence: format!(
            "{d} live delete files (average {}) for {} data files",
            bytes(avg_delete),
            i.totals.data_files
        ),
        investigate: "Row-level delete rate and the writer's commit fan-out: every commit with deletes adds delete files per partition",
        // Compaction removes the position delete files whose every data file it rewrote, in
        // the rewrite's commit (and, with remove-dangling-deletes, equality deletes left
        // matching nothing); rewrite-position-delete-files merges position deletes, data
        // untouched.
        action: holds.then(|| {
            format!(
                "floe compact {t} --option delete-file-threshold=1 --option remove-dangling-deletes=true  \
                 # or, leaving data files as they are: floe rewrite-position-delete-files {t}"
            )
        }),
    });

    // 5. Inactive partitions keep many small files.
    let mut idle: Vec<&PartitionHealth> = i
        .partitions
        .iter()
        .filter(|p| !p.active && p.files_under_min >= min_input)
        .collect();
    idle.sort_by_key(|p| std::cmp::Reverse(p.files_under_min));
    let idle_small: u64 = idle.iter().map(|p| p.files_under_min).sum();
    let holds = !idle.is_empty();
    out.push(Observation {
        id: "inactive-partitions-keep-small-files",
        observation: "Inactive partitions keep many small files",
        holds,
        evidence: format!(
            "{} partition(s) no recent commit wrote to hold {idle_small} files under {}{}",
            idle.len(),
            bytes(min),
            idle.first()
                .map(|p| format!("; worst: {} with {}", p.partition, p.files_under_min))
                .unwrap_or_default()
        ),
        investigate: "Whether maintenance still selects those partitions",
        action: holds.then(|| compact_cmd(t, &idle[..1])),
    });

    // 6. Unreferenced files after failed jobs.
    let s = i.storage;
    let old_orphans: u64 = s
        .unreferenced_by_age
        .iter()
        .skip(1)
        .map(|(_, n, _)| n)
        .sum();
    let holds = s.unreferenced_files > 0 && s.skipped.is_none();
    let ages = s
        .unreferenced_by_age
        .iter()
        .map(|(l, n, b)| format!("{l}: {n} ({})", bytes(*b)))
        .collect::<Vec<_>>()
        .join(", ");
    out.push(Observation {
        id: "unreferenced-files",
        observation: "Unreferenced files remain on storage (failed or crashed jobs)",
        holds,
        evidence: match &s.skipped {
            Some(why) => format!("storage not listed: {why}"),
            None => format!(
                "{} of {} files under the table location ({}) are referenced by no snapshot; by age: {ages}",
                s.unreferenced_files,
                s.listed_files,
                bytes(s.unreferenced_bytes)
            ),
        },
        investigate: "Uncommitted writer output: jobs killed between writing files and committing",
        action: holds.then(|| {
            if old_orphans > 0 {
                format!("floe remove-orphan-files {t} --older-than 3d --dry-run")
            } else {
                format!("floe remove-orphan-files {t} --dry-run  # all are under 1 h old: a writer may still commit them")
            }
        }),
    });

    // 7. Many small manifests (planning cost).
    let h = i.history;
    let avg_manifest = h.manifest_bytes.checked_div(h.manifests).unwrap_or(0);
    let holds = h.manifests >= 10 && avg_manifest < (1 << 20);
    out.push(Observation {
        id: "many-small-manifests",
        observation: "Many small manifests slow down scan planning",
        holds,
        evidence: format!("{} manifests, average {}", h.manifests, bytes(avg_manifest)),
        investigate: "Commit rate and commit.manifest.min-count-to-merge",
        action: holds.then(|| format!("floe rewrite-manifests {t}")),
    });

    // 8. Old metadata.json files pile up.
    let holds = h.metadata_json_files > h.metadata_log_entries + 1 + 10
        || h.metadata_json_files > i.previous_versions_max + 1 + 10;
    out.push(Observation {
        id: "old-metadata-files",
        observation: "Old metadata.json files pile up",
        holds,
        evidence: format!(
            "{} metadata.json files ({}) on storage, {} in the metadata log (write.metadata.previous-versions-max = {})",
            h.metadata_json_files,
            bytes(h.metadata_json_bytes),
            h.metadata_log_entries,
            i.previous_versions_max
        ),
        investigate: "write.metadata.delete-after-commit.enabled and previous-versions-max",
        action: holds.then(|| format!("floe clean-metadata {t}")),
    });

    // 9. The partition spec is finer than the data rate (over-partitioning).
    let op = i.over_partitioned;
    out.push(Observation {
        id: "over-partitioned",
        observation: "Partition spec is finer than the data rate (over-partitioning)",
        holds: op.is_some_and(|o| o.holds),
        evidence: match op {
            Some(o) => o.evidence.clone(),
            None => "the table is unpartitioned, or its current spec holds no data".to_string(),
        },
        investigate: "Bytes each partition receives (per commit, per day or per its time span) against the target file size: every partition of every commit is at least one file",
        action: op
            .filter(|o| o.holds && !o.commands.is_empty())
            .map(|o| o.commands.join(" && ")),
    });
    out
}

#[cfg(test)]
mod tests;

/// Seconds as people write them: one decimal under 10 s.
fn secs_text(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// A `--commit-interval` value: milliseconds under 10 s, whole seconds above.
fn interval_flag(s: f64) -> String {
    if s < 10.0 {
        format!("{}ms", (s * 1000.0).ceil().max(1.0))
    } else {
        format!("{}s", s.ceil())
    }
}

/// The write-side observations: the writer's commits make files under `min-file-size-bytes`
/// (with the commit interval that would make them big enough), and small files regrowing after
/// the last compaction (the writer, not a missed compaction, is the cause).
fn writer_side(i: &Inputs<'_>) -> Vec<Observation> {
    let t = i.table;
    let min = i.thresholds.min_file_size_bytes.max(1);
    let target = i.thresholds.target_file_size_bytes.max(1);
    let min_input = i.thresholds.min_input_files.max(1) as usize;
    let commits: Vec<&CommitPoint> = i.history.recent.iter().filter(writing).collect();
    let pace = writer_pace(&commits)
        .filter(|p| p.commits > min_input && p.interval_ms.is_some_and(|ms| ms > 0));
    let mut out = Vec::new();

    // The interval that makes files of at least `min` (and of about the target): a file grows
    // with the data a commit gathers, so linearly with the interval.
    let holds = pace.as_ref().is_some_and(|p| p.file_bytes < min);
    let (evidence, action) = match &pace {
        Some(p) => {
            let secs = p.interval_ms.unwrap_or(0) as f64 / 1000.0;
            let scale = |goal: u64| secs * goal as f64 / p.file_bytes.max(1) as f64;
            (
                format!(
                    "{} recent writing commits, one every {} (median), each adding {:.1} files of {} (median file); files reach {} (min-file-size-bytes) at a commit interval of {} and {} (the target) at {}",
                    p.commits,
                    secs_text(secs),
                    p.files_per_commit,
                    bytes(p.file_bytes),
                    bytes(min),
                    secs_text(scale(min).ceil()),
                    bytes(target),
                    secs_text(scale(target).ceil()),
                ),
                holds.then(|| {
                    format!(
                        "keep commits every {} and compact behind the writer (floe ingest --maintain, or floe maintain with floe.maintain.enabled on {t}), or raise the writer's commit interval to {} for files of at least {} (--commit-interval {}; Flink: execution.checkpointing.interval)",
                        secs_text(secs),
                        secs_text(scale(min).ceil()),
                        bytes(min),
                        interval_flag(scale(min).ceil()),
                    )
                }),
            )
        }
        None => (
            format!(
                "{} recent writing commits: too few to measure the writer's pace",
                commits.len()
            ),
            None,
        ),
    };
    out.push(Observation {
        id: "writer-makes-small-files",
        observation: "The writer's commits make small files",
        holds,
        evidence,
        investigate: "The writer's commit interval (or checkpoint interval) against its input rate: the file size a commit can reach is the bytes that arrive between two commits, per partition it writes",
        action,
    });

    // Small files regrowing after the last compaction: the compaction worked, the writer keeps
    // making them.
    let last_replace = i
        .history
        .recent
        .iter()
        .rposition(|c| c.operation == "replace");
    let since: Vec<&CommitPoint> = match last_replace {
        Some(r) => i.history.recent[r + 1..].iter().filter(writing).collect(),
        None => vec![],
    };
    let small_since: u64 = since
        .iter()
        .filter(|c| c.added_bytes / c.added_data_files.max(1) < min)
        .map(|c| c.added_data_files)
        .sum();
    let holds = last_replace.is_some() && small_since >= min_input as u64;
    out.push(Observation {
        id: "small-files-regrow-after-compaction",
        observation: "Small files regrow after a compaction",
        holds,
        evidence: match last_replace {
            Some(r) => format!(
                "since the last compaction (snapshot {}), {} writing commits added {} files under {}",
                i.history.recent[r].snapshot_id,
                since.len(),
                small_since,
                bytes(min),
            ),
            None => "no compaction among the recent commits".to_string(),
        },
        investigate: "Compaction keeps up but the writer is the cause: fix the commit interval (see writer-makes-small-files) rather than compacting more often",
        action: holds.then(|| format!("floe diagnose {t}  # see writer-makes-small-files for the interval; meanwhile floe compact {t}")),
    });
    out
}
