//! The retention rule, pure: from the snapshots, refs and writer watermarks of a table, which
//! snapshots expire and which are protected (and why). No I/O; the builder in `mod.rs` reads
//! the table and deletes what the plan frees.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{SnapshotReference, SnapshotRetention, MAIN_BRANCH};

use crate::base::error::{Error, Result};
use crate::table::watermarks::Watermark;

/// A snapshot as retention sees it.
#[derive(Debug, Clone)]
pub struct SnapshotInfo {
    pub id: i64,
    pub parent: Option<i64>,
    pub timestamp_ms: i64,
}

/// Retention settings after options and table properties are resolved.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Snapshots older than this (epoch ms) may expire.
    pub older_than_ms: i64,
    /// Snapshots kept per branch whatever their age.
    pub min_snapshots_to_keep: u64,
    /// Age after which branches and tags other than main are removed.
    pub max_ref_age_ms: Option<i64>,
    /// Whether age-based expiry applies (false when only explicit ids are expired).
    pub by_age: bool,
    /// At most this many snapshots per branch, however young (Paimon's
    /// `snapshot.num-retained.max`): a table committing every second keeps a bounded history,
    /// so its metadata.json, rewritten on every commit, stops growing. Never fewer than
    /// `min_snapshots_to_keep`; ref heads and writer watermarks are kept whatever the count.
    pub max_snapshots: Option<u64>,
    /// Writers whose newest snapshot is at most this old (ms) keep the parent chain from each
    /// branch head down to it (`floe.expire.writer-max-age`); `None`: every writer does.
    pub writer_chain_max_age_ms: Option<i64>,
}

/// A snapshot kept only because a writer's watermark is in it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Protected {
    pub snapshot_id: i64,
    pub writer: String,
}

/// A writer's recovery chain on one branch: the snapshots from the branch head down to the
/// writer's newest snapshot, which its committer walks on restart.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Chain {
    pub writer: String,
    pub branch: String,
    /// Snapshots on the chain, head and recovery point included.
    pub snapshots: usize,
    /// Whether expiry keeps the chain; when not, `reason` says why.
    pub kept: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What expiry decides, before any change.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ExpirePlan {
    pub expired_snapshots: Vec<i64>,
    pub expired_refs: Vec<String>,
    pub retained_snapshots: usize,
    pub protected: Vec<Protected>,
    /// Every writer's recovery chain on every branch, kept or not (and why).
    pub chains: Vec<Chain>,
}

/// Decides which snapshots and refs expire. Pure: unit-tested on synthetic histories.
pub fn plan(
    snapshots: &[SnapshotInfo],
    refs: &HashMap<String, SnapshotReference>,
    writers: &[Watermark],
    explicit: &[i64],
    retention: &Retention,
    now_ms: i64,
) -> Result<ExpirePlan> {
    let by_id: HashMap<i64, &SnapshotInfo> = snapshots.iter().map(|s| (s.id, s)).collect();
    let mut names: Vec<&String> = refs.keys().collect();
    names.sort();
    let mut expired_refs = Vec::new();
    let mut live_refs = Vec::new();
    for name in names {
        let r = &refs[name];
        let Some(head) = by_id.get(&r.snapshot_id) else {
            continue;
        };
        let max_age = match &r.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. }
            | SnapshotRetention::Tag { max_ref_age_ms } => {
                max_ref_age_ms.or(retention.max_ref_age_ms)
            }
        };
        let too_old = max_age.is_some_and(|a| now_ms.saturating_sub(head.timestamp_ms) > a);
        if name != MAIN_BRANCH && too_old && retention.by_age {
            expired_refs.push(name.clone());
        } else {
            live_refs.push((name, r));
        }
    }

    let ancestors = |head: i64| {
        let mut out = Vec::new();
        let mut cur = by_id.get(&head).copied();
        while let Some(s) = cur {
            out.push(s);
            cur = s.parent.and_then(|p| by_id.get(&p).copied());
        }
        out
    };
    let mut retain: HashSet<i64> = HashSet::new();
    let mut referenced: HashSet<i64> = HashSet::new();
    let mut heads: HashMap<i64, String> = HashMap::new();
    for (name, r) in &live_refs {
        heads.insert(r.snapshot_id, (*name).clone());
        let line = ancestors(r.snapshot_id);
        referenced.extend(line.iter().map(|s| s.id));
        match &r.retention {
            SnapshotRetention::Tag { .. } => {
                retain.insert(r.snapshot_id);
            }
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                ..
            } => {
                let min_keep = min_snapshots_to_keep
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(retention.min_snapshots_to_keep)
                    .max(1);
                let older_than = max_snapshot_age_ms
                    .map(|a| now_ms.saturating_sub(a))
                    .unwrap_or(retention.older_than_ms);
                let max_keep = retention.max_snapshots.map(|m| m.max(min_keep));
                for (kept, s) in line.into_iter().enumerate() {
                    let within_count = max_keep.is_none_or(|m| (kept as u64) < m);
                    let keep = (kept as u64) < min_keep
                        || !retention.by_age
                        || (s.timestamp_ms >= older_than && within_count);
                    if !keep {
                        break;
                    }
                    retain.insert(s.id);
                }
            }
        }
    }
    for s in snapshots {
        if !referenced.contains(&s.id)
            && (!retention.by_age || s.timestamp_ms >= retention.older_than_ms)
        {
            retain.insert(s.id);
        }
    }
    // Recovery chains (safety: other writers' recovery stays reachable): from each live
    // branch's head down to each writer's newest snapshot on its line.
    let mut chains = Vec::new();
    let mut on_chain: HashMap<i64, String> = HashMap::new();
    for (name, r) in &live_refs {
        if !matches!(r.retention, SnapshotRetention::Branch { .. }) {
            continue;
        }
        let line = ancestors(r.snapshot_id);
        for w in writers {
            let Some(at) = line.iter().position(|s| s.id == w.snapshot_id) else {
                continue;
            };
            let age = now_ms.saturating_sub(w.timestamp_ms);
            let kept = retention
                .writer_chain_max_age_ms
                .is_none_or(|max| max > 0 && age <= max);
            chains.push(Chain {
                writer: w.writer(),
                branch: (*name).clone(),
                snapshots: at + 1,
                kept,
                reason: (!kept).then(|| {
                    format!(
                        "its newest snapshot is {} old, older than floe.expire.writer-max-age ({}): \
                         a restart of this writer would not find it by walking from the head",
                        crate::base::properties::human_ms(age.max(0) as u64),
                        crate::base::properties::human_ms(retention.writer_chain_max_age_ms.unwrap_or(0).max(0) as u64)
                    )
                }),
            });
            if kept {
                for s in &line[..=at] {
                    on_chain.entry(s.id).or_insert_with(|| w.writer());
                }
            }
        }
    }
    for id in explicit {
        if let Some(writer) = on_chain.get(id) {
            return Err(Error::invalid_option(
                "snapshot-id",
                id,
                format!(
                    "it lies on the recovery chain of writer {writer} (from a branch head down to \
                     its newest snapshot); expiring it would break that writer's restart"
                ),
            ));
        }
        if !by_id.contains_key(id) {
            return Err(Error::invalid_option(
                "snapshot-id",
                id,
                "no such snapshot in the table",
            ));
        }
        if let Some(name) = heads.get(id) {
            return Err(Error::invalid_option(
                "snapshot-id",
                id,
                format!("it is the head of ref '{name}'; remove the ref first"),
            ));
        }
        if let Some(w) = writers.iter().find(|w| w.snapshot_id == *id) {
            return Err(Error::invalid_option(
                "snapshot-id",
                id,
                format!(
                    "it holds the recovery point of writer {}; expiring it would break that writer's restart",
                    w.writer()
                ),
            ));
        }
        retain.remove(id);
    }
    if !retention.by_age {
        // Only the explicit ids expire.
        let explicit: HashSet<i64> = explicit.iter().copied().collect();
        retain = snapshots
            .iter()
            .map(|s| s.id)
            .filter(|id| !explicit.contains(id))
            .collect();
    }
    let mut protected = Vec::new();
    for w in writers {
        if by_id.contains_key(&w.snapshot_id) && retain.insert(w.snapshot_id) {
            protected.push(Protected {
                snapshot_id: w.snapshot_id,
                writer: w.writer(),
            });
        }
    }
    retain.extend(on_chain.keys().copied());
    let mut expired: Vec<i64> = snapshots
        .iter()
        .map(|s| s.id)
        .filter(|id| !retain.contains(id))
        .collect();
    expired.sort_unstable();
    Ok(ExpirePlan {
        retained_snapshots: snapshots.len() - expired.len(),
        expired_snapshots: expired,
        expired_refs,
        protected,
        chains,
    })
}
