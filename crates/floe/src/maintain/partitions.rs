//! Which partitions a compaction may touch now: the seeds' rule that partitions still being
//! written are left to their writers until they go idle (`partition-idle-time`), unless their
//! small files pass a hard limit, and that idle ("cold") partitions with small files go first.
//!
//! [`activity`] reads it off the live files (the snapshot that added each file gives its
//! time); [`choose`] is the pure rule.

use std::collections::BTreeMap;

use iceberg::spec::DataContentType;
use iceberg::table::Table;

use crate::table::manifests::LiveFile;

use super::policy::{human_ms, CompactTriggers};

/// The live files of one partition, as the compaction trigger sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartitionActivity {
    /// The partition as compaction names it (`ts_day=2026-11-30`, `unpartitioned`).
    pub partition: String,
    pub data_files: u64,
    pub data_bytes: u64,
    /// Data files under the compaction's `min-file-size-bytes`.
    pub small_files: u64,
    pub small_bytes: u64,
    pub delete_files: u64,
    /// When the newest of its live files was added (its snapshot's time); `None` when every
    /// adding snapshot was expired (the partition is old).
    pub last_added_ms: Option<i64>,
}

/// The per-partition activity of a table's live files, sorted by partition. `small_below` is
/// the compaction's `min-file-size-bytes`.
pub fn activity(table: &Table, live: &[LiveFile], small_below: u64) -> Vec<PartitionActivity> {
    let md = table.metadata();
    let mut by: BTreeMap<String, PartitionActivity> = BTreeMap::new();
    for f in live {
        let name = crate::compact::partition_path(table, f.spec_id, Some(f.file.partition()));
        let p = by.entry(name.clone()).or_insert_with(|| PartitionActivity {
            partition: name,
            ..PartitionActivity::default()
        });
        if f.file.content_type() != DataContentType::Data {
            p.delete_files += 1;
            continue;
        }
        let size = f.file.file_size_in_bytes();
        p.data_files += 1;
        p.data_bytes += size;
        if size < small_below {
            p.small_files += 1;
            p.small_bytes += size;
        }
        let added = md.snapshot_by_id(f.snapshot_id).map(|s| s.timestamp_ms());
        p.last_added_ms = p.last_added_ms.max(added);
    }
    by.into_values().collect()
}

/// One partition's standing for the next compaction.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionChoice {
    pub partition: String,
    pub small_files: u64,
    pub small_bytes: u64,
    pub delete_files: u64,
    /// Idle for at least `partition-idle-time` (or never written in a known snapshot).
    pub idle: bool,
    /// May be compacted now: idle with work, or active past the small-file hard limit.
    pub eligible: bool,
    /// Why, in words: `idle 3h`, `active 2m ago, 120 small files >= hard limit 100`.
    pub reason: String,
}

/// The partitions with compaction work (two or more small files, or delete files), each
/// eligible or held back, in the order a compaction should take them: eligible idle
/// partitions first (most small files first), then active ones forced by the hard limit,
/// then the held-back ones.
pub fn choose(
    partitions: &[PartitionActivity],
    t: &CompactTriggers,
    now_ms: i64,
) -> Vec<PartitionChoice> {
    let mut out: Vec<PartitionChoice> = partitions
        .iter()
        .filter(|p| p.small_files >= 2 || p.delete_files > 0)
        .map(|p| {
            let since = p
                .last_added_ms
                .map(|ms| u64::try_from(now_ms.saturating_sub(ms)).unwrap_or(0));
            let idle = since.is_none_or(|s| s >= t.partition_idle_time_ms);
            let forced = p.small_files >= t.small_file_hard_limit;
            let (eligible, reason) = match since {
                None => (true, "idle (no recent write)".to_string()),
                Some(s) if idle => (true, format!("idle {}", human_ms(s))),
                Some(s) if forced => (
                    true,
                    format!(
                        "active ({} ago) but {} small files >= small-file-hard-limit {}",
                        human_ms(s),
                        p.small_files,
                        t.small_file_hard_limit
                    ),
                ),
                Some(s) => (
                    false,
                    format!(
                        "active: last write {} ago < partition-idle-time {}, {} small files < small-file-hard-limit {}",
                        human_ms(s),
                        human_ms(t.partition_idle_time_ms),
                        p.small_files,
                        t.small_file_hard_limit
                    ),
                ),
            };
            PartitionChoice {
                partition: p.partition.clone(),
                small_files: p.small_files,
                small_bytes: p.small_bytes,
                delete_files: p.delete_files,
                idle,
                eligible,
                reason,
            }
        })
        .collect();
    // Eligible before held back, idle before forced, then most small files, then name.
    out.sort_by(|a, b| {
        (
            !a.eligible,
            !a.idle,
            std::cmp::Reverse(a.small_files),
            &a.partition,
        )
            .cmp(&(
                !b.eligible,
                !b.idle,
                std::cmp::Reverse(b.small_files),
                &b.partition,
            ))
    });
    out
}

#[cfg(test)]
mod tests;
