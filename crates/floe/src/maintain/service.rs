//! The `floe maintain` loop: every pass lists the watched tables, evaluates each
//! ([`super::jobs::evaluate_table`]), lets the [`super::scheduler`] pick what runs under the
//! budget, takes each picked table's lease ([`crate::coordination`]) and runs the job in the
//! background, renewing the lease while it runs. `--once` repeats passes until no job is
//! due and every job finished; the service waits `--interval` between passes (or less, when a
//! job finishes and frees a slot).
//!
//! Time: lease expiries, run records and the triggers that compare with them read the lease
//! store's clock ([`Store::now_ms`]), not this machine's; each pass compares the two and warns
//! (once per interval) when they disagree by more than a quarter of the lease TTL.
//!
//! Failures never loop hot: a failed job is recorded and its table backs off
//! ([`super::jobs::backoff_ms`]); a table whose metadata cannot be read or whose policy is
//! invalid is reported as a problem and skipped, never cleaned; an unreachable catalog or
//! lease store is reported as what the service waits for while it retries.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::TableIdent;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::base::cost::Cost;
use crate::base::error::Result;
use crate::catalog::Catalog;
use crate::storage::listing::glob_match as glob;
use crate::table::ident::{ident_string, printable};

use super::jobs::{evaluate_table, run_job, Planned, TableEvaluation, Watched};
use super::policy::{human_bytes, Policy};
use super::rates::{fit, Rates};
use super::scheduler::{schedule, Budget, Proposal, Verdict};
use super::state::{Decision, ServiceState};
use super::trigger::JobKind;
use crate::base::properties::human_ms;
use crate::coordination::{LeaseOutcome, RunRecord, Store};

/// Receives the service's log lines (job started, finished, failed; what it waits for).
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How `floe maintain` runs.
#[derive(Clone)]
pub struct MaintainOptions {
    /// This maintainer's name in leases and run records (default: host and PID).
    pub holder: String,
    pub max_concurrent_jobs: usize,
    /// 0: unlimited.
    pub max_rewrite_bytes_per_hour: u64,
    /// Time between passes.
    pub interval: Duration,
    /// A lease not renewed for this long is free (its holder died).
    pub lease_ttl: Duration,
    /// Glob patterns (`*`, `?`) on namespaces; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Glob patterns on `ns.table`; empty: every table.
    pub tables: Vec<String>,
    /// Evaluate and plan only: no lease taken, no job run.
    pub dry_run: bool,
    /// How long SIGTERM waits for running jobs before abandoning them.
    pub shutdown_grace: Duration,
    /// Policy properties every table's own properties override (`floe ingest --maintain`
    /// turns the roll-up on by default this way).
    pub policy_defaults: HashMap<String, String>,
}

impl Default for MaintainOptions {
    fn default() -> Self {
        MaintainOptions {
            holder: default_holder(),
            max_concurrent_jobs: 2,
            max_rewrite_bytes_per_hour: 0,
            interval: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(60),
            namespaces: vec![],
            tables: vec![],
            dry_run: false,
            shutdown_grace: Duration::from_secs(60),
            policy_defaults: HashMap::new(),
        }
    }
}

/// `host:pid`, unique among the maintainers sharing a lease store.
pub fn default_holder() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// One catalog the service watches; `prefix` (the catalog name) qualifies its table names
/// when several are watched.
#[derive(Clone)]
pub struct Source {
    pub catalog: Catalog,
    pub prefix: Option<String>,
    /// Only these tables (not listed: `floe ingest --maintain` watches its own table).
    pub only: Option<Vec<TableIdent>>,
}

/// What one pass decided.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PassReport {
    pub started_ms: i64,
    pub tables: usize,
    /// Every job of every table, fired or skipped, scored; `chosen` for the ones started (or,
    /// in a dry run, the ones that would be).
    pub decisions: Vec<Decision>,
    /// Tables skipped, with the problem (unreadable metadata, invalid property).
    pub problems: Vec<(String, String)>,
    /// Catalogs that could not be listed.
    pub unreachable: Vec<String>,
    pub jobs_started: usize,
}

/// What the whole run did (`--once`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MaintainSummary {
    /// Passes made.
    pub passes_total: usize,
    /// The reports of the passes: every pass of `--once`, the last few of the service.
    pub passes: Vec<PassReport>,
    pub jobs_succeeded: usize,
    pub jobs_failed: usize,
    /// Jobs that succeeded, by job name.
    pub succeeded_by_job: std::collections::BTreeMap<String, usize>,
    pub rewritten_bytes: u64,
    pub deleted_files: u64,
}

struct Running {
    job: JobKind,
    planned_rewrite: u64,
}

struct Finished {
    scope: String,
    record: RunRecord,
}

/// The maintenance service.
pub struct Maintainer {
    sources: Vec<Source>,
    store: Arc<Store>,
    state: Arc<ServiceState>,
    opts: MaintainOptions,
    log: LogFn,
    running: JoinSet<Finished>,
    busy: HashMap<String, Running>,
    /// The lease scope of each running task, to free the right table if one panics.
    task_scopes: HashMap<tokio::task::Id, String>,
    summary: MaintainSummary,
    wake: Option<Arc<tokio::sync::Notify>>,
    /// Added to this machine's clock (tests stand a maintainer with a wrong clock up this way).
    clock_skew_ms: i64,
    /// When the last clock-skew warning was given.
    skew_warned: Option<Instant>,
    /// The store's clock minus this machine's, at the last pass.
    store_offset_ms: i64,
}

impl Maintainer {
    pub fn new(
        sources: Vec<Source>,
        store: Arc<Store>,
        state: Arc<ServiceState>,
        opts: MaintainOptions,
    ) -> Self {
        Maintainer {
            sources,
            store,
            state,
            opts,
            log: escaped(Arc::new(|line: &str| eprintln!("{line}"))),
            running: JoinSet::new(),
            busy: HashMap::new(),
            task_scopes: HashMap::new(),
            summary: MaintainSummary::default(),
            wake: None,
            clock_skew_ms: 0,
            skew_warned: None,
            store_offset_ms: 0,
        }
    }

    /// A pass starts as soon as `wake` is notified (after a commit of the ingest the service
    /// runs in), not only every `interval`.
    pub fn with_wake(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Runs as if this machine's clock were `skew_ms` off (ahead when positive): what a
    /// maintainer without NTP sees. Leases and run times follow the store's clock anyway.
    pub fn with_clock_skew_ms(mut self, skew_ms: i64) -> Self {
        self.clock_skew_ms = skew_ms;
        self
    }

    /// The store's clock as of the last pass, without asking it (for the times shown on the
    /// dashboard).
    fn shown_now_ms(&self) -> i64 {
        self.local_now_ms().saturating_add(self.store_offset_ms)
    }

    /// This machine's clock (with the injected skew).
    fn local_now_ms(&self) -> i64 {
        now_ms().saturating_add(self.clock_skew_ms)
    }

    /// The store's clock, and a warning (a tracing warning and a log line, once per interval)
    /// when this machine's clock disagrees with it by more than a quarter of the lease TTL.
    async fn store_now_ms(&mut self) -> Result<i64> {
        let before = self.local_now_ms();
        let store = self.store.now_ms().await?;
        let after = self.local_now_ms();
        // The store read its clock between `before` and `after`.
        let local = before + (after - before) / 2;
        let skew = local - store;
        self.store_offset_ms = -skew;
        let limit = i64::try_from(self.opts.lease_ttl.as_millis() / 4).unwrap_or(i64::MAX);
        let due = self
            .skew_warned
            .is_none_or(|t| t.elapsed() >= self.opts.interval);
        if skew.unsigned_abs() > limit.unsigned_abs() && due {
            self.skew_warned = Some(Instant::now());
            let line = format!(
                "clock skew: this machine's clock reads {} and the lease store's {} ({} {} it, \
                 over a quarter of the {} lease TTL); leases and run times follow the store's clock",
                fmt_ms(local),
                fmt_ms(store),
                human_ms(round_to_seconds(skew.unsigned_abs())),
                if skew > 0 { "ahead of" } else { "behind" },
                human_ms(self.opts.lease_ttl.as_millis() as u64),
            );
            tracing::warn!(local_ms = local, store_ms = store, skew_ms = skew, "{line}");
            (self.log)(&line);
        }
        Ok(store)
    }

    /// Where log lines go (default: stderr), each one line: control, bidirectional and
    /// zero-width characters (of table names made by other tools) are escaped
    /// ([`crate::table::ident::printable`]).
    pub fn with_log(mut self, log: LogFn) -> Self {
        self.log = escaped(log);
        self
    }

    pub fn state(&self) -> Arc<ServiceState> {
        self.state.clone()
    }

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
        let watched = self.watched(&mut report.unreachable).await;
        report.tables = watched.len();
        let rates = self.rates().await?;
        let mut evals: Vec<(Watched, TableEvaluation)> = Vec::new();
        let names: HashSet<String> = watched.iter().map(|w| w.name.clone()).collect();
        for w in watched {
            let scope = Self::scope(&w);
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
                Ok(e) => evals.push((w, e)),
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

    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        w: Watched,
        scope: String,
        history_scope: String,
        p: Planned,
        partitions: Option<Vec<String>>,
        rewrite_bytes: u64,
        policy: &Policy,
        d: Decision,
        reason: String,
    ) {
        let id = self.state.job_started(
            &w.name,
            &d.job,
            &d.scope,
            &reason,
            d.cost,
            self.shown_now_ms(),
        );
        (self.log)(&format!(
            "start {} on {} ({}): {reason}",
            d.job, w.name, d.scope
        ));
        self.busy.insert(
            scope.clone(),
            Running {
                job: p.job,
                planned_rewrite: rewrite_bytes,
            },
        );
        let (store, state, log) = (self.store.clone(), self.state.clone(), self.log.clone());
        let (holder, ttl, policy) = (
            self.opts.holder.clone(),
            self.opts.lease_ttl,
            policy.clone(),
        );
        let task_scope = scope.clone();
        let task = self.running.spawn(async move {
            // Run times on the store's clock (this machine's only if the store is gone, and
            // then the record cannot be written either).
            let started = store.now_ms().await.unwrap_or_else(|_| now_ms());
            let clock = Instant::now();
            let result = with_lease(&store, &scope, &holder, ttl, async {
                run_job(&w, &p, partitions, &policy).await
            })
            .await;
            let finished = store.now_ms().await.unwrap_or_else(|_| now_ms());
            let cost = result.as_ref().copied().unwrap_or_default();
            let record = RunRecord {
                scope: history_scope,
                job: p.job.to_string(),
                holder: holder.clone(),
                started_ms: started,
                finished_ms: finished,
                succeeded: result.is_ok(),
                error: result.as_ref().err().cloned(),
                files_read: cost.files_to_read,
                bytes_read: cost.bytes_to_read,
                files_written: cost.files_to_write,
                bytes_written: cost.bytes_to_write,
                files_deleted: cost.files_to_delete,
                bytes_deleted: cost.bytes_to_delete,
            };
            if let Err(e) = store.record_run(&record).await {
                log(&format!("{}: could not record the run: {e}", w.name));
            }
            if let Err(e) = store.release(&scope, &holder).await {
                log(&format!(
                    "{}: could not release the lease (it expires): {e}",
                    w.name
                ));
            }
            match &result {
                Ok(c) => log(&format!(
                    "done {} on {} in {:.1}s: read {} files ({}), wrote {} ({}), deleted {}",
                    p.job,
                    w.name,
                    clock.elapsed().as_secs_f64(),
                    c.files_to_read,
                    human_bytes(c.bytes_to_read),
                    c.files_to_write,
                    human_bytes(c.bytes_to_write),
                    c.files_to_delete
                )),
                Err(e) => log(&format!("failed {} on {}: {e}", p.job, w.name)),
            }
            state.job_finished(id, result, finished);
            Finished { scope, record }
        });
        self.task_scopes.insert(task.id(), task_scope);
    }

    /// Collects the jobs that finished.
    fn reap(&mut self) {
        while let Some(done) = self.running.try_join_next() {
            self.finish(done);
        }
    }

    fn finish(&mut self, done: std::result::Result<Finished, tokio::task::JoinError>) {
        match done {
            Ok(f) => {
                self.busy.remove(&f.scope);
                self.task_scopes.retain(|_, s| *s != f.scope);
                if f.record.succeeded {
                    self.summary.jobs_succeeded += 1;
                    *self
                        .summary
                        .succeeded_by_job
                        .entry(f.record.job.clone())
                        .or_default() += 1;
                    self.summary.rewritten_bytes += f.record.bytes_read;
                    self.summary.deleted_files += f.record.files_deleted;
                } else {
                    self.summary.jobs_failed += 1;
                }
            }
            Err(e) => {
                // A panicked job: its lease expires by itself; count it failed.
                (self.log)(&format!("a job task failed: {e}"));
                self.summary.jobs_failed += 1;
                if let Some(scope) = self.task_scopes.remove(&e.id()) {
                    self.busy.remove(&scope);
                }
            }
        }
    }

    /// Waits for every running job.
    async fn drain(&mut self) {
        while let Some(done) = self.running.join_next().await {
            self.finish(done);
        }
    }

    /// `--once`: passes until no job is due and every job finished (a dry run: one pass).
    pub async fn run_once(mut self) -> Result<MaintainSummary> {
        for _ in 0..1000 {
            let report = self.pass().await?;
            self.summary.passes_total += 1;
            let started = report.jobs_started;
            self.summary.passes.push(report);
            if self.opts.dry_run {
                break;
            }
            if started == 0 && self.busy.is_empty() {
                break;
            }
            // Wait for one job to free a slot, then plan again.
            if let Some(done) = self.running.join_next().await {
                self.finish(done);
            }
        }
        self.drain().await;
        Ok(self.summary)
    }

    /// The service: a pass every `interval` (sooner when a job finishes) until `shutdown`
    /// resolves; then running jobs get `shutdown_grace` to finish, and are abandoned after it
    /// (their uncommitted outputs are orphans `remove-orphan-files` can prove unreferenced;
    /// their leases expire).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<MaintainSummary> {
        tokio::pin!(shutdown);
        loop {
            match self.pass().await {
                Ok(report) => {
                    self.summary.passes_total += 1;
                    let keep = 5;
                    self.summary.passes.push(report);
                    if self.summary.passes.len() > keep {
                        self.summary.passes.remove(0);
                    }
                }
                Err(e) => {
                    let w = format!(
                        "{e}; retrying in {}",
                        human_ms(self.opts.interval.as_millis() as u64)
                    );
                    (self.log)(&format!("waiting: {w}"));
                    self.state.set_last_pass(self.shown_now_ms(), Some(w));
                }
            }
            let sleep = tokio::time::sleep(self.opts.interval);
            tokio::pin!(sleep);
            let wake = self.wake.clone();
            let woken = async move {
                match wake {
                    Some(w) => w.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(woken);
            loop {
                tokio::select! {
                    _ = &mut shutdown => {
                        (self.log)(&format!(
                            "stopping: waiting up to {} for {} running job(s)",
                            human_ms(self.opts.shutdown_grace.as_millis() as u64),
                            self.busy.len()
                        ));
                        let grace = self.opts.shutdown_grace;
                        if tokio::time::timeout(grace, self.drain()).await.is_err() {
                            (self.log)(&format!("abandoning {} job(s)", self.busy.len()));
                            self.running.abort_all();
                            for scope in self.busy.keys() {
                                let _ = self.store.release(scope, &self.opts.holder).await;
                            }
                        }
                        return Ok(self.summary);
                    }
                    _ = &mut sleep => break,
                    _ = &mut woken => break,
                    Some(done) = self.running.join_next(), if !self.running.is_empty() => {
                        self.finish(done);
                        // A slot is free: plan again soon, not at once (a finished job may
                        // have made its table due for the next job).
                        sleep.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(1).min(self.opts.interval));
                    }
                }
            }
        }
    }
}

/// Runs `job` while holding the lease of `scope`: renewed every third of `ttl`; when it is
/// lost (another maintainer took it after an expiry), the job is abandoned.
async fn with_lease<F>(
    store: &Store,
    scope: &str,
    holder: &str,
    ttl: Duration,
    job: F,
) -> std::result::Result<Cost, String>
where
    F: Future<Output = std::result::Result<Cost, String>>,
{
    tokio::pin!(job);
    let mut tick = tokio::time::interval(ttl / 3);
    tick.tick().await;
    loop {
        tokio::select! {
            r = &mut job => return r,
            _ = tick.tick() => {
                let renewed = match store.now_ms().await {
                    Ok(now) => store.renew(scope, holder, ttl, now).await,
                    Err(e) => Err(e),
                };
                match renewed {
                    Ok(true) => {}
                    Ok(false) => return Err(format!("lease on {scope} lost; job abandoned")),
                    // A store that does not answer: keep going until the lease would have
                    // expired, then give up.
                    Err(e) => {
                        tracing::warn!("renewing the lease on {scope}: {e}");
                    }
                }
            }
        }
    }
}

/// `log`, receiving each line escaped for humans.
fn escaped(log: LogFn) -> LogFn {
    Arc::new(move |line: &str| log(&printable(line)))
}

/// The first partitions of a list, for a scope line.
fn preview(parts: &[String]) -> String {
    let mut s = parts.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if parts.len() > 3 {
        s.push_str(", ...");
    }
    s
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `ms` to the nearest second, from one second up (a skew reads `30s`, not `29s998ms`).
fn round_to_seconds(ms: u64) -> u64 {
    if ms < 1000 {
        ms
    } else {
        ms.saturating_add(500) / 1000 * 1000
    }
}

/// A time for messages: `2026-12-02T03:25:07.123Z`.
fn fmt_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn backoff_doubles_to_an_hour() {
        use crate::maintain::jobs::backoff_ms;
        assert_eq!(backoff_ms(0), 0);
        assert_eq!(backoff_ms(1), 60_000);
        assert_eq!(backoff_ms(2), 120_000);
        assert_eq!(backoff_ms(7), 3_600_000);
        assert_eq!(backoff_ms(40), 3_600_000);
    }
}
