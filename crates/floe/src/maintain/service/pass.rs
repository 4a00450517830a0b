//! One pass of the service: the watched tables listed, each evaluated, the due jobs
//! scheduled under the budget, and the picked ones started under their table's lease.

use std::collections::{HashMap, HashSet};

use iceberg::TableIdent;

use super::options::PassReport;
use super::Maintainer;
use crate::base::error::Result;
use crate::base::properties::human_ms;
use crate::coordination::LeaseOutcome;
use crate::maintain::jobs::{evaluate_table, Planned, TableEvaluation, Watched};
use crate::maintain::policy::human_bytes;
use crate::maintain::rates::{fit, Rates};
use crate::maintain::scheduler::{schedule, Budget, Proposal, Verdict};
use crate::maintain::state::Decision;
use crate::maintain::streaming::Streaming;
use crate::maintain::trigger::JobKind;
use crate::operations::alter::AlterPropertiesBuilder;
use crate::operations::Operation;
use crate::storage::listing::glob_match as glob;
use crate::table::ident::ident_string;

impl Maintainer {
    /// The tables of every source that the patterns select.
    async fn watched(&self, unreachable: &mut Vec<String>) -> Vec<Watched> {
        let mut out = Vec::new();
        for s in &self.sources {
            let listed = match &s.only {
                Some(only) => Ok(only.clone()),
                None => s.catalog.list_tables(None).await,
            };
            let idents: Vec<TableIdent> = match listed {
                Ok(t) => t,
                Err(e) => {
                    unreachable.push(format!("catalog {}: {e}", s.catalog.name()));
                    continue;
                }
            };
            for ident in idents {
                let ns = ident.namespace().clone().inner().join(".");
                let name = ident_string(&ident);
                if !self.opts.namespaces.is_empty()
                    && !self.opts.namespaces.iter().any(|p| glob(p, &ns))
                {
                    continue;
                }
                if !self.opts.tables.is_empty() && !self.opts.tables.iter().any(|p| glob(p, &name))
                {
                    continue;
                }
                let name = match &s.prefix {
                    Some(c) => format!("{c}.{name}"),
                    None => name,
                };
                out.push(Watched {
                    name,
                    catalog: s.catalog.clone(),
                    ident,
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The lease scope of a table: the catalog name and the table, the same for every
    /// maintainer of that catalog.
    fn scope(w: &Watched) -> String {
        format!("{}.{}", w.catalog.name(), ident_string(&w.ident))
    }

    /// Cost rates per job kind, fitted on the store's recent runs.
    async fn rates(&self) -> Result<HashMap<JobKind, Rates>> {
        let mut out = HashMap::new();
        for k in JobKind::ALL {
            let runs = self.store.recent_runs(Some(k.as_str()), 50).await?;
            out.insert(k, fit(&runs));
        }
        Ok(out)
    }

    /// Bytes rewritten within the last hour by every maintainer sharing the store, plus the
    /// planned rewrites of the jobs running here.
    async fn rewritten_last_hour(&self, now_ms: i64) -> Result<u64> {
        let mut used = 0;
        for k in [JobKind::Compact, JobKind::RewriteManifests] {
            used += self
                .store
                .recent_runs(Some(k.as_str()), 10_000)
                .await?
                .iter()
                .filter(|r| r.finished_ms >= now_ms - 3_600_000)
                .map(|r| r.bytes_read)
                .sum::<u64>();
        }
        Ok(used + self.busy.values().map(|r| r.planned_rewrite).sum::<u64>())
    }

    /// One pass: evaluate every watched table, schedule, start the picked jobs.
    pub async fn pass(&mut self) -> Result<PassReport> {
        self.reap();
        let now = self.store_now_ms().await?;
        let mut report = PassReport {
            started_ms: now,
            ..PassReport::default()
        };
        let live = self.live_replicas().await?;
        let watched = self.watched(&mut report.unreachable).await;
        report.tables = watched.len();
        let rates = self.rates().await?;
        let mut evals: Vec<(Watched, TableEvaluation)> = Vec::new();
        let mut names: HashSet<String> = HashSet::new();
        let mut elsewhere = 0usize;
        for w in watched {
            let scope = Self::scope(&w);
            // Another live replica maintains it (a job of it still running here finishes).
            if !self.busy.contains_key(&scope) && !self.owns(&scope, &live) {
                elsewhere += 1;
                continue;
            }
            names.insert(w.name.clone());
            if let Some(r) = self.busy.get(&scope) {
                report.decisions.push(Decision {
                    table: w.name.clone(),
                    job: r.job.to_string(),
                    scope: "table".into(),
                    skipped: Some("running".into()),
                    ..Decision::default()
                });
                continue;
            }
            match evaluate_table(
                &w,
                &self.store,
                &scope,
                &rates,
                &self.opts.policy_defaults,
                now,
            )
            .await
            {
                Ok(e) => {
                    // Not fatal when it fails: the retention applies this pass all the same,
                    // and the next pass records it again.
                    if !self.opts.dry_run && !e.streaming.to_set.is_empty() {
                        match record_streaming(&w, &e.streaming).await {
                            Ok(()) => (self.log)(&e.streaming.recorded(&w.name)),
                            Err(err) => {
                                let problem = format!("recording its streaming defaults: {err}");
                                (self.log)(&format!("{}: {problem}", w.name));
                                self.state.record_problem(&w.name, problem, now);
                            }
                        }
                    }
                    evals.push((w, e))
                }
                Err(e) => {
                    let problem = format!("skipped: {e}");
                    (self.log)(&format!("{}: {problem}", w.name));
                    self.state.record_problem(&w.name, problem.clone(), now);
                    report.problems.push((w.name.clone(), problem));
                }
            }
        }
        if report.unreachable.is_empty() {
            self.state.retain_tables(&names);
        }
        report.replicas = self.replica_view(&live, names.len(), elsewhere);
        self.state.set_replicas(report.replicas.clone());

        // Every due job of every table, offered to the scheduler.
        let mut offers: Vec<(usize, usize)> = Vec::new(); // (eval, planned)
        let mut proposals = Vec::new();
        for (ei, (w, e)) in evals.iter().enumerate() {
            for (pi, p) in e.planned.iter().enumerate() {
                let d = &e.status.decisions[p.decision];
                offers.push((ei, pi));
                proposals.push(Proposal {
                    table: Self::scope(w),
                    job: p.job.to_string(),
                    score: d.score,
                    rewrite_bytes: p.rewrite_bytes,
                    partitions: p.partitions.clone(),
                });
            }
        }
        let budget = Budget {
            max_concurrent_jobs: self.opts.max_concurrent_jobs.max(1),
            max_rewrite_bytes_per_hour: self.opts.max_rewrite_bytes_per_hour,
            running: self.busy.len(),
            busy_tables: self.busy.keys().cloned().collect(),
            rewritten_last_hour: if self.opts.max_rewrite_bytes_per_hour > 0 {
                self.rewritten_last_hour(now).await?
            } else {
                0
            },
        };
        let verdicts = schedule(&proposals, &budget);
        for ((ei, pi), verdict) in offers.into_iter().zip(verdicts) {
            let (w, e) = &mut evals[ei];
            let p: Planned = e.planned[pi].clone();
            match verdict {
                Verdict::Wait(why) => e.status.decisions[p.decision].skipped = Some(why),
                Verdict::Run {
                    partitions,
                    rewrite_bytes,
                } => {
                    let d = &mut e.status.decisions[p.decision];
                    if let Some(parts) = &partitions {
                        d.scope = format!(
                            "{} of {} partition(s) within the hourly budget, {} ({})",
                            parts.len(),
                            p.partitions.len(),
                            human_bytes(rewrite_bytes),
                            preview(parts)
                        );
                    }
                    if self.opts.dry_run {
                        d.chosen = true;
                        continue;
                    }
                    let scope = Self::scope(w);
                    let lease_now = self.store.now_ms().await?;
                    match self
                        .store
                        .try_acquire(&scope, &self.opts.holder, self.opts.lease_ttl, lease_now)
                        .await?
                    {
                        LeaseOutcome::HeldBy { holder, expires_ms } => {
                            d.skipped = Some(format!(
                                "leased by {holder} for {} more",
                                human_ms((expires_ms - lease_now).max(0) as u64)
                            ));
                        }
                        LeaseOutcome::Acquired => {
                            // Another maintainer may have run this job between the
                            // evaluation and the lease: then the plan is stale.
                            let last = self.store.last_runs(&e.history_scope).await?;
                            if let Some(t) = last
                                .get(p.job.as_str())
                                .and_then(|l| l.last_success_ms.max(l.last_failure_ms))
                                .filter(|t| *t >= now)
                            {
                                self.store.release(&scope, &self.opts.holder).await?;
                                d.skipped = Some(format!(
                                    "another maintainer ran it {} ago, after this evaluation",
                                    human_ms((lease_now - t).max(0) as u64)
                                ));
                                continue;
                            }
                            d.chosen = true;
                            let reason = d.fired.clone().unwrap_or_default();
                            let d = d.clone();
                            // Uncut, a compaction still covers only its planned (eligible)
                            // partitions.
                            let partitions = partitions.or_else(|| {
                                (!p.partitions.is_empty())
                                    .then(|| p.partitions.iter().map(|(n, _)| n.clone()).collect())
                            });
                            self.start(
                                w.clone(),
                                scope,
                                e.history_scope.clone(),
                                p,
                                partitions,
                                rewrite_bytes,
                                &e.policy,
                                d,
                                reason,
                            );
                            report.jobs_started += 1;
                        }
                    }
                }
            }
        }
        for (_, e) in evals {
            report.decisions.extend(e.status.decisions.iter().cloned());
            self.state.record_table(e.status);
        }
        let waiting = (!report.unreachable.is_empty()).then(|| {
            format!(
                "{}; retrying in {}",
                report.unreachable.join("; "),
                human_ms(self.opts.interval.as_millis() as u64)
            )
        });
        if let Some(w) = &waiting {
            (self.log)(&format!("waiting: {w}"));
        }
        self.state.set_last_pass(self.shown_now_ms(), waiting);
        Ok(report)
    }
}

/// The first partitions of a list, for a scope line.
fn preview(parts: &[String]) -> String {
    let mut s = parts.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if parts.len() > 3 {
        s.push_str(", ...");
    }
    s
}

/// Sets what [`crate::maintain::streaming::judge`] found to record on the table (one property
/// commit).
async fn record_streaming(w: &Watched, streaming: &Streaming) -> Result<()> {
    AlterPropertiesBuilder::new(&w.catalog, w.ident.clone())
        .with_properties(
            streaming
                .to_set
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .execute()
        .await?;
    Ok(())
}
