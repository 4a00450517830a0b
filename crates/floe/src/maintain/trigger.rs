//! Which maintenance jobs a table is due for: [`evaluate`] weighs a [`Policy`] against the
//! table's [`TableFacts`] and the last runs of each job, and says for every job either which
//! trigger fired (with its numbers) or why it is skipped. Pure: the time is an input.

use std::collections::HashMap;
use std::fmt;

use super::facts::TableFacts;
use super::policy::{human_bytes, Policy};
use crate::base::properties::human_ms;
use crate::base::properties::{MAINTAIN_ENABLED, MAINTAIN_EXPIRE_ENABLED};

/// The maintenance jobs `floe maintain` schedules, in the order it considers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobKind {
    /// `rewrite_data_files` (`floe compact`).
    Compact,
    /// `expire_snapshots` (`floe expire`).
    ExpireSnapshots,
    /// `remove_orphan_files`.
    RemoveOrphanFiles,
    /// `rewrite_manifests`.
    RewriteManifests,
    /// Old `metadata.json` files no longer in the metadata log.
    CleanMetadata,
}

impl JobKind {
    /// Every job, in [`evaluate`]'s order.
    pub const ALL: [JobKind; 5] = [
        JobKind::Compact,
        JobKind::ExpireSnapshots,
        JobKind::RemoveOrphanFiles,
        JobKind::RewriteManifests,
        JobKind::CleanMetadata,
    ];

    /// The job's name in reports and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            JobKind::Compact => "compact",
            JobKind::ExpireSnapshots => "expire-snapshots",
            JobKind::RemoveOrphanFiles => "remove-orphan-files",
            JobKind::RewriteManifests => "rewrite-manifests",
            JobKind::CleanMetadata => "clean-metadata",
        }
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job [`evaluate`] considered. It is due when `skipped` is `None`; a job can have fired
/// and still be skipped (a compaction held back by the rate limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub job: JobKind,
    /// The trigger(s) that fired, with their numbers: `data-file-count 73 >= 50`.
    pub fired: Option<String>,
    /// Why the job does not run now: `rate-limit: last compaction 2m ago < 5m`.
    pub skipped: Option<String>,
}

impl Candidate {
    /// True when the job is due: it fired and nothing holds it back.
    pub fn is_due(&self) -> bool {
        self.fired.is_some() && self.skipped.is_none()
    }

    fn fired(job: JobKind, why: String) -> Self {
        Candidate {
            job,
            fired: Some(why),
            skipped: None,
        }
    }

    fn skipped(job: JobKind, why: String) -> Self {
        Candidate {
            job,
            fired: None,
            skipped: Some(why),
        }
    }
}

/// Slack of old `metadata.json` files tolerated beyond the metadata log before cleaning them
/// (as `diagnose`'s `old-metadata-files` observation).
pub const METADATA_FILES_SLACK: u64 = 10;

/// Every job for one table at `now_ms`, in [`JobKind::ALL`]'s order, each fired or skipped.
/// `last_runs` holds when each job last ran on this table (ms since the epoch), as the
/// service recorded it; a compaction committed by anyone counts too (from the facts).
pub fn evaluate(
    policy: &Policy,
    facts: &TableFacts,
    last_runs: &HashMap<JobKind, i64>,
    now_ms: i64,
) -> Vec<Candidate> {
    if !policy.enabled {
        return JobKind::ALL
            .iter()
            .map(|job| Candidate::skipped(*job, format!("{}=false", MAINTAIN_ENABLED.key)))
            .collect();
    }
    vec![
        compact(policy, facts, last_runs, now_ms),
        expire(policy, facts, now_ms),
        orphans(policy, last_runs, now_ms),
        rewrite_manifests(policy, facts),
        clean_metadata(facts),
    ]
}

/// Milliseconds from `then` to `now`, 0 when `then` is in the future (clock skew).
fn age(now_ms: i64, then: i64) -> u64 {
    u64::try_from(now_ms.saturating_sub(then)).unwrap_or(0)
}

/// `name value >= threshold` when a non-zero threshold is reached, else `name value < threshold`
/// (`None` for a trigger that is off).
fn check(
    name: &str,
    value: u64,
    threshold: u64,
    show: fn(u64) -> String,
) -> Option<(bool, String)> {
    if threshold == 0 {
        return None;
    }
    let reached = value >= threshold;
    let op = if reached { ">=" } else { "<" };
    Some((
        reached,
        format!("{name} {} {op} {}", show(value), show(threshold)),
    ))
}

fn compact(
    policy: &Policy,
    facts: &TableFacts,
    last_runs: &HashMap<JobKind, i64>,
    now_ms: i64,
) -> Candidate {
    let job = JobKind::Compact;
    let t = &policy.compact;
    if facts.commits_since_compaction == 0 {
        return Candidate::skipped(job, "no commit since the last compaction".into());
    }
    let plain = |n: u64| n.to_string();
    let last = facts
        .last_compaction_ms
        .into_iter()
        .chain(last_runs.get(&job).copied())
        .max();
    // The interval counts from the last compaction, or from the first commit when none.
    let since = last.or(facts.first_uncompacted_ms);
    let checks: Vec<(bool, String)> = [
        check(
            "commit-count",
            facts.commits_since_compaction,
            t.commit_count,
            plain,
        ),
        check(
            "data-file-count",
            facts.data_files_since_compaction,
            t.data_file_count,
            plain,
        ),
        check(
            "data-file-size",
            facts.bytes_since_compaction,
            t.data_file_size,
            human_bytes,
        ),
        check(
            "pos-delete-file-count",
            facts.pos_delete_files_since_compaction,
            t.pos_delete_file_count,
            plain,
        ),
        check(
            "eq-delete-file-count",
            facts.eq_delete_files_since_compaction,
            t.eq_delete_file_count,
            plain,
        ),
        since.and_then(|s| check("interval", age(now_ms, s), t.interval_ms, human_ms)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let (reached, not): (Vec<_>, Vec<_>) = checks.into_iter().partition(|(r, _)| *r);
    let text =
        |v: Vec<(bool, String)>| v.into_iter().map(|(_, s)| s).collect::<Vec<_>>().join(", ");
    if reached.is_empty() {
        let why = if not.is_empty() {
            "no trigger reached: every trigger is off".to_string()
        } else {
            format!("no trigger reached: {}", text(not))
        };
        return Candidate::skipped(job, why);
    }
    let mut c = Candidate::fired(job, text(reached));
    if let Some(last) = last {
        let ago = age(now_ms, last);
        if ago < t.rate_limit_ms {
            c.skipped = Some(format!(
                "rate-limit: last compaction {} ago < {}",
                human_ms(ago),
                human_ms(t.rate_limit_ms)
            ));
        }
    }
    c
}

fn expire(policy: &Policy, facts: &TableFacts, now_ms: i64) -> Candidate {
    let job = JobKind::ExpireSnapshots;
    if !policy.expire_enabled {
        return Candidate::skipped(job, format!("{}=false", MAINTAIN_EXPIRE_ENABLED.key));
    }
    let keep = policy.min_snapshots_to_keep;
    if facts.snapshots <= keep {
        return Candidate::skipped(
            job,
            format!(
                "{} snapshot(s) <= history.expire.min-snapshots-to-keep {keep}",
                facts.snapshots
            ),
        );
    }
    let Some(oldest) = facts.oldest_snapshot_ms else {
        return Candidate::skipped(job, "no snapshot".into());
    };
    // The count bound fires with a slack of a tenth (at least 10 snapshots), so a table
    // committing every second expires in batches rather than after every commit.
    let max = policy.max_snapshots;
    if max > 0 {
        let bound = max.max(keep);
        let slack = (bound / 10).max(10);
        if facts.snapshots > bound + slack {
            return Candidate::fired(
                job,
                format!(
                    "{} snapshots > floe.maintain.expire.max-snapshots {bound} + {slack}",
                    facts.snapshots
                ),
            );
        }
    }
    let oldest_age = age(now_ms, oldest);
    let max_age = policy.max_snapshot_age_ms;
    if oldest_age <= max_age {
        return Candidate::skipped(
            job,
            format!(
                "oldest snapshot {} old <= history.expire.max-snapshot-age-ms {}",
                human_ms(oldest_age),
                human_ms(max_age)
            ),
        );
    }
    Candidate::fired(
        job,
        format!(
            "{} snapshots > {keep} to keep, oldest {} old > {}",
            facts.snapshots,
            human_ms(oldest_age),
            human_ms(max_age)
        ),
    )
}

fn orphans(policy: &Policy, last_runs: &HashMap<JobKind, i64>, now_ms: i64) -> Candidate {
    let job = JobKind::RemoveOrphanFiles;
    if !policy.gc_enabled {
        return Candidate::skipped(job, "gc.enabled=false".into());
    }
    let interval = policy.orphans_interval_ms;
    match last_runs.get(&job) {
        None => Candidate::fired(job, "orphans: never run".into()),
        Some(last) => {
            let ago = age(now_ms, *last);
            let text = format!("last run {} ago", human_ms(ago));
            if ago >= interval {
                Candidate::fired(
                    job,
                    format!("orphans.interval: {text} >= {}", human_ms(interval)),
                )
            } else {
                Candidate::skipped(
                    job,
                    format!("orphans.interval: {text} < {}", human_ms(interval)),
                )
            }
        }
    }
}

fn rewrite_manifests(policy: &Policy, facts: &TableFacts) -> Candidate {
    let job = JobKind::RewriteManifests;
    let Some(m) = &facts.manifests else {
        return Candidate::skipped(job, "manifests not gathered".into());
    };
    let small_bytes = policy.small_manifest_bytes;
    let small = m
        .manifest_bytes
        .iter()
        .filter(|b| **b < small_bytes)
        .count() as u64;
    let what = format!(
        "{small} of {} manifests under {}",
        m.manifest_bytes.len(),
        human_bytes(small_bytes)
    );
    if small >= policy.min_manifests {
        Candidate::fired(
            job,
            format!("min-manifests: {what} >= {}", policy.min_manifests),
        )
    } else {
        Candidate::skipped(
            job,
            format!("min-manifests: {what} < {}", policy.min_manifests),
        )
    }
}

fn clean_metadata(facts: &TableFacts) -> Candidate {
    let job = JobKind::CleanMetadata;
    let Some(m) = &facts.manifests else {
        return Candidate::skipped(job, "metadata files not listed".into());
    };
    // The metadata log plus the current metadata file are referenced.
    let referenced = facts.metadata_log_entries + 1;
    let old = m.metadata_json_files.saturating_sub(referenced);
    let what = format!(
        "{old} metadata.json file(s) outside the metadata log of {}",
        facts.metadata_log_entries
    );
    if old > METADATA_FILES_SLACK {
        Candidate::fired(job, format!("{what} > {METADATA_FILES_SLACK}"))
    } else {
        Candidate::skipped(job, format!("{what} <= {METADATA_FILES_SLACK}"))
    }
}

#[cfg(test)]
mod tests;
