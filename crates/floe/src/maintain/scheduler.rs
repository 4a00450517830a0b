//! Which due jobs run now, across every watched table: greedy by score (benefit per second
//! of estimated work, the way LinkedIn's AutoComp ranks compactions), under a global budget
//! of concurrent jobs and of rewrite bytes per hour, with a fair share so that one large
//! table cannot take the budget of all the others.
//!
//! The rules, in order, for each proposal from the best score down:
//! 1. **One job per table at a time**: a table with a job running (here or, through its
//!    lease, elsewhere) or already picked in this pass waits.
//! 2. **Concurrency**: at most `max_concurrent_jobs` jobs run at once.
//! 3. **Rewrite budget** (compaction and manifest rewrites; 0 = unlimited): bytes rewritten
//!    in the last hour plus the job's must stay within `max_rewrite_bytes_per_hour`.
//! 4. **Fair share**: a rewrite larger than its share of what is left this hour (the
//!    remainder divided among the tables with rewrite work) is cut to its first partitions
//!    that fit the share (cold partitions come first, see [`super::partitions::choose`]):
//!    never below one partition, as long as that partition fits the remainder. The rest of
//!    the table waits for the next pass, while the other tables get their share.
//!
//! Pure: the caller passes what runs and what the last hour used.

use std::collections::HashSet;

use super::policy::human_bytes;

/// One due job offered to the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The table (lease scope).
    pub table: String,
    pub job: String,
    pub score: f64,
    /// Bytes the job rewrites (counted against the hourly budget); 0 for jobs that only
    /// delete.
    pub rewrite_bytes: u64,
    /// For a compaction: its partitions in the order to take them, with the bytes each
    /// rewrites. Empty when the job cannot be cut.
    pub partitions: Vec<(String, u64)>,
}

/// What runs and what was used.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    pub max_concurrent_jobs: usize,
    /// 0: unlimited.
    pub max_rewrite_bytes_per_hour: u64,
    /// Jobs running now.
    pub running: usize,
    /// Tables with a job running now.
    pub busy_tables: HashSet<String>,
    /// Bytes rewritten by jobs finished or running within the last hour.
    pub rewritten_last_hour: u64,
}

/// The scheduler's answer for one proposal (same index).
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Runs now: with these partitions when cut (`None`: the whole plan).
    Run {
        partitions: Option<Vec<String>>,
        rewrite_bytes: u64,
    },
    /// Waits, and why.
    Wait(String),
}

/// A verdict for every proposal, in the proposals' order.
pub fn schedule(proposals: &[Proposal], budget: &Budget) -> Vec<Verdict> {
    let mut order: Vec<usize> = (0..proposals.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&proposals[a], &proposals[b]);
        pb.score
            .total_cmp(&pa.score)
            .then_with(|| pa.table.cmp(&pb.table))
            .then_with(|| pa.job.cmp(&pb.job))
    });
    let limited = budget.max_rewrite_bytes_per_hour > 0;
    let mut left = budget
        .max_rewrite_bytes_per_hour
        .saturating_sub(budget.rewritten_last_hour);
    let mut slots = budget.max_concurrent_jobs.saturating_sub(budget.running);
    let mut picked: HashSet<&str> = HashSet::new();
    // Tables still waiting for rewrite budget in this pass: the share divides among them.
    let mut rewrite_tables: HashSet<&str> = proposals
        .iter()
        .filter(|p| p.rewrite_bytes > 0 && !budget.busy_tables.contains(&p.table))
        .map(|p| p.table.as_str())
        .collect();
    let mut out = vec![Verdict::Wait(String::new()); proposals.len()];
    for i in order {
        let p = &proposals[i];
        out[i] = if budget.busy_tables.contains(&p.table) {
            Verdict::Wait("one job per table: a job on this table is running".into())
        } else if picked.contains(p.table.as_str()) {
            Verdict::Wait("one job per table: a better-scored job of this table runs first".into())
        } else if slots == 0 {
            Verdict::Wait(format!(
                "max-concurrent-jobs {} reached",
                budget.max_concurrent_jobs
            ))
        } else if p.rewrite_bytes == 0 || !limited {
            Verdict::Run {
                partitions: None,
                rewrite_bytes: p.rewrite_bytes,
            }
        } else {
            let share = left / rewrite_tables.len().max(1) as u64;
            rewrite_tables.remove(p.table.as_str());
            fit_budget(p, share, left)
        };
        if let Verdict::Run { rewrite_bytes, .. } = &out[i] {
            picked.insert(p.table.as_str());
            slots -= 1;
            left = left.saturating_sub(*rewrite_bytes);
        }
    }
    out
}

/// The part of a rewrite that fits `share` (at least its first partition when that fits
/// `left`).
fn fit_budget(p: &Proposal, share: u64, left: u64) -> Verdict {
    if p.rewrite_bytes <= share {
        return Verdict::Run {
            partitions: None,
            rewrite_bytes: p.rewrite_bytes,
        };
    }
    let wait = || {
        Verdict::Wait(format!(
            "max-rewrite-bytes-per-hour: needs {} at least, {} left this hour",
            human_bytes(p.partitions.first().map_or(p.rewrite_bytes, |x| x.1)),
            human_bytes(left)
        ))
    };
    if p.partitions.is_empty() {
        return if p.rewrite_bytes <= left {
            Verdict::Run {
                partitions: None,
                rewrite_bytes: p.rewrite_bytes,
            }
        } else {
            wait()
        };
    }
    let mut taken = Vec::new();
    let mut bytes = 0u64;
    for (name, b) in &p.partitions {
        let room = if taken.is_empty() { left } else { share };
        if bytes + b > room {
            break;
        }
        bytes += b;
        taken.push(name.clone());
    }
    if taken.is_empty() {
        return wait();
    }
    if taken.len() == p.partitions.len() {
        return Verdict::Run {
            partitions: None,
            rewrite_bytes: bytes,
        };
    }
    Verdict::Run {
        partitions: Some(taken),
        rewrite_bytes: bytes,
    }
}

#[cfg(test)]
mod tests;
