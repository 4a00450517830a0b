//! Which partitions a compaction may touch now: the seeds' rule that partitions still being
//! written are left to their writers until they go idle (`partition-idle-time`), unless their
//! small files pass a hard limit, and that idle ("cold") partitions with small files go first.
//!
//! A partition still being written may also be rolled up by size tiers
//! (`floe.maintain.compact.roll-up-fan-in`, [`roll_up`]): what `floe ingest --maintain` does
//! so that short commit intervals do not pile up small files.
//!
//! [`activity`] reads it off the live files (the snapshot that added each file gives its
//! time); [`choose`] is the pure rule.

use std::collections::BTreeMap;

use iceberg::spec::DataContentType;
use iceberg::table::Table;

use crate::table::manifests::LiveFile;

use super::policy::{human_bytes, CompactTriggers};
use crate::base::properties::human_ms;

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
    /// The sizes of the small data files.
    #[serde(skip)]
    pub small_sizes: Vec<u64>,
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
        let name =
            crate::operations::compact::partition_path(table, f.spec_id, Some(f.file.partition()));
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
            p.small_sizes.push(size);
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
    /// May be compacted now: idle with work, active past the small-file hard limit, or active
    /// with a full tier to roll up.
    pub eligible: bool,
    /// With the roll-up on: only its small files under this size are merged, two or more
    /// (`u64::MAX` for an idle partition: all of them).
    pub roll_up_below: Option<u64>,
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
            // With the roll-up on, a partition that went idle is merged whole (two small
            // files are enough), and an active one by size tier.
            let tier = match (t.roll_up_fan_in >= 2, idle, forced) {
                (false, _, _) | (true, false, true) => None,
                (true, true, _) => (p.small_files >= 2).then_some((u64::MAX, p.small_files)),
                (true, false, false) => roll_up(&p.small_sizes, t.roll_up_fan_in),
            };
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
                Some(s) if tier.is_some() => {
                    let (below, files) = tier.expect("checked");
                    (
                        true,
                        format!(
                            "active ({} ago): roll-up of {files} small files under {} (roll-up-fan-in {})",
                            human_ms(s),
                            human_bytes(below),
                            t.roll_up_fan_in
                        ),
                    )
                }
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
                roll_up_below: tier.map(|(below, _)| below),
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

/// The roll-up due in a partition with small files of `sizes`, by size tiers of factor
/// `fan_in` (0: off): tier `k` holds the files of `[u * fan_in^k, u * fan_in^(k+1))`, `u` the
/// smallest file. The lowest tier holding `fan_in` files or more makes a roll-up of every small
/// file below its upper bound: returns that bound and the number of files under it.
pub fn roll_up(sizes: &[u64], fan_in: u64) -> Option<(u64, u64)> {
    if fan_in < 2 || (sizes.len() as u64) < fan_in {
        return None;
    }
    let unit = (*sizes.iter().min()?).max(1);
    let tier = |size: u64| -> u32 {
        let mut k = 0;
        let mut upper = unit.saturating_mul(fan_in);
        while size >= upper && upper < u64::MAX {
            upper = upper.saturating_mul(fan_in);
            k += 1;
        }
        k
    };
    let mut counts: std::collections::BTreeMap<u32, u64> = Default::default();
    for s in sizes {
        *counts.entry(tier(*s)).or_default() += 1;
    }
    let (full, _) = counts.iter().find(|(_, n)| **n >= fan_in)?;
    let below = unit.saturating_mul(fan_in.saturating_pow(full + 1));
    let files = sizes.iter().filter(|s| **s < below).count() as u64;
    Some((below, files))
}

#[cfg(test)]
mod tests;
