//! What `floe maintain` shows: the shared [`ServiceState`] the passes and the runners write
//! (each table's numbers, its decision table and a bounded history of samples; the jobs that
//! ran or run; the last pass) and the HTTP side reads: Prometheus `/metrics`
//! ([`ServiceState::render_metrics`]), the JSON API and the dashboard ([`super::http`]).
//!
//! Times are inputs (`now_ms`, epoch milliseconds), so the state is deterministic in tests.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use crate::base::cost::Cost;
use crate::base::server::exposition::{self, Family};

/// Samples kept per table (a day at one pass every 30 s).
pub const HISTORY_LEN: usize = 2880;
/// Finished jobs kept (running ones are always kept).
pub const FINISHED_JOBS_LEN: usize = 1000;
/// The job kinds the counters list even at 0 (the names of
/// [`super::trigger::JobKind::as_str`]).
pub const JOB_KINDS: [&str; 5] = [
    "compact",
    "expire-snapshots",
    "remove-orphan-files",
    "rewrite-manifests",
    "clean-metadata",
];

/// One row of the decision table: a job considered for a table, fired or skipped, scored.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Decision {
    /// `ns.table` (catalog-qualified `cat.ns.table` when several catalogs).
    pub table: String,
    /// `compact`, `expire-snapshots`, ...
    pub job: String,
    /// `table`, or `3 of 12 partitions: day=2026-11-30, ...`.
    pub scope: String,
    /// The trigger that fired, with its numbers.
    pub fired: Option<String>,
    /// Why the job does not run now.
    pub skipped: Option<String>,
    pub benefit: f64,
    pub cost: Cost,
    /// Estimated run time.
    pub cost_seconds: f64,
    /// Benefit per cost second.
    pub score: f64,
    /// Scheduled to run in this pass.
    pub chosen: bool,
}

/// A table's numbers at its last evaluation, and its decision table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TableStatus {
    pub table: String,
    pub sampled_ms: i64,
    pub live_data_files: u64,
    pub small_files: u64,
    pub delete_files: u64,
    pub snapshots: u64,
    pub manifests: u64,
    pub data_bytes: u64,
    pub metadata_bytes: u64,
    /// Sum of the benefit of the due jobs.
    pub debt: f64,
    /// Why the table could not be evaluated (unreadable metadata, invalid property): the
    /// table is skipped.
    pub problem: Option<String>,
    pub decisions: Vec<Decision>,
}

/// One point of a table's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sample {
    pub ts_ms: i64,
    pub live_data_files: u64,
    pub small_files: u64,
    pub snapshots: u64,
    pub data_bytes: u64,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Succeeded,
    Failed,
}

/// A job that runs or ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    pub id: u64,
    pub table: String,
    pub job: String,
    pub scope: String,
    /// The trigger that fired.
    pub reason: String,
    pub started_ms: i64,
    pub finished_ms: Option<i64>,
    pub state: JobState,
    pub error: Option<String>,
    pub planned: Cost,
    pub actual: Option<Cost>,
}

/// The replicas a pass saw (when the service's replicas divide the tables).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplicaView {
    pub group: String,
    /// Live replicas' holder names (this one included).
    pub live: Vec<String>,
    /// Watched tables this replica maintains.
    pub owned_tables: usize,
    /// Watched tables the other replicas maintain.
    pub tables_elsewhere: usize,
}

/// The service summary of `/api/status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusView {
    pub holder: String,
    pub started_ms: i64,
    pub last_pass_ms: Option<i64>,
    /// What the service waits for (`catalog unreachable: ..., retrying in 30s`).
    pub waiting_for: Option<String>,
    pub running_jobs: usize,
    pub tables: usize,
    pub tables_with_problems: usize,
    /// When replicas divide the tables: the group, the live replicas, and the split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicaView>,
}

#[derive(Debug, Default, Clone, Copy)]
struct JobCounters {
    started: u64,
    succeeded: u64,
    failed: u64,
}

#[derive(Debug, Default)]
struct Inner {
    holder: String,
    started_ms: i64,
    last_pass_ms: Option<i64>,
    waiting_for: Option<String>,
    tables: BTreeMap<String, (TableStatus, VecDeque<Sample>)>,
    next_job_id: u64,
    running: BTreeMap<u64, JobView>,
    /// Oldest first.
    finished: VecDeque<JobView>,
    counters: BTreeMap<String, JobCounters>,
    bytes_read: u64,
    bytes_written: u64,
    files_deleted: u64,
    replicas: Option<ReplicaView>,
}

/// The state `floe maintain` shares between its passes, its runners and its HTTP endpoints.
#[derive(Debug)]
pub struct ServiceState {
    inner: Mutex<Inner>,
}

impl ServiceState {
    /// A state for the instance `holder` (its lease holder name), started at `started_ms`.
    pub fn new(holder: &str, started_ms: i64) -> Arc<Self> {
        Arc::new(ServiceState {
            inner: Mutex::new(Inner {
                holder: holder.to_string(),
                started_ms,
                next_job_id: 1,
                ..Inner::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind: keep serving it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The instance's holder name.
    pub fn holder(&self) -> String {
        self.lock().holder.clone()
    }

    /// Replaces the table's status and appends a [`Sample`] to its history (the last
    /// [`HISTORY_LEN`] samples are kept).
    pub fn record_table(&self, status: TableStatus) {
        let sample = Sample {
            ts_ms: status.sampled_ms,
            live_data_files: status.live_data_files,
            small_files: status.small_files,
            snapshots: status.snapshots,
            data_bytes: status.data_bytes,
        };
        let mut inner = self.lock();
        let entry = inner
            .tables
            .entry(status.table.clone())
            .or_insert_with(|| (TableStatus::default(), VecDeque::new()));
        entry.0 = status;
        let history = &mut entry.1;
        history.push_back(sample);
        while history.len() > HISTORY_LEN {
            history.pop_front();
        }
    }

    /// The table could not be evaluated: keeps its last numbers and history, sets `problem`
    /// and `sampled_ms`, and clears its decisions (nothing was considered in this pass).
    pub fn record_problem(&self, table: &str, problem: String, now_ms: i64) {
        let mut inner = self.lock();
        let entry = inner.tables.entry(table.to_string()).or_insert_with(|| {
            (
                TableStatus {
                    table: table.to_string(),
                    ..TableStatus::default()
                },
                VecDeque::new(),
            )
        });
        entry.0.problem = Some(problem);
        entry.0.sampled_ms = now_ms;
        entry.0.decisions.clear();
    }

    /// Forgets the tables not in `names` (dropped, or no longer watched).
    pub fn retain_tables(&self, names: &HashSet<String>) {
        self.lock().tables.retain(|name, _| names.contains(name));
    }

    /// Records a job that starts now; returns its id for [`Self::job_finished`].
    pub fn job_started(
        &self,
        table: &str,
        job: &str,
        scope: &str,
        reason: &str,
        planned: Cost,
        now_ms: i64,
    ) -> u64 {
        let mut inner = self.lock();
        let id = inner.next_job_id;
        inner.next_job_id += 1;
        inner.counters.entry(job.to_string()).or_default().started += 1;
        inner.running.insert(
            id,
            JobView {
                id,
                table: table.to_string(),
                job: job.to_string(),
                scope: scope.to_string(),
                reason: reason.to_string(),
                started_ms: now_ms,
                finished_ms: None,
                state: JobState::Running,
                error: None,
                planned,
                actual: None,
            },
        );
        id
    }

    /// Records the end of job `id`: its actual cost, or its error. An unknown id (finished
    /// twice) is ignored.
    pub fn job_finished(&self, id: u64, result: std::result::Result<Cost, String>, now_ms: i64) {
        let mut inner = self.lock();
        let Some(mut view) = inner.running.remove(&id) else {
            tracing::debug!(id, "maintain state: finish of an unknown job ignored");
            return;
        };
        view.finished_ms = Some(now_ms);
        let counters = inner.counters.entry(view.job.clone()).or_default();
        match result {
            Ok(actual) => {
                counters.succeeded += 1;
                view.state = JobState::Succeeded;
                view.actual = Some(actual);
                inner.bytes_read += actual.bytes_to_read;
                inner.bytes_written += actual.bytes_to_write;
                inner.files_deleted += actual.files_to_delete;
            }
            Err(e) => {
                counters.failed += 1;
                view.state = JobState::Failed;
                view.error = Some(e);
            }
        }
        inner.finished.push_back(view);
        while inner.finished.len() > FINISHED_JOBS_LEN {
            inner.finished.pop_front();
        }
    }

    /// Every table's status, sorted by name.
    pub fn tables(&self) -> Vec<TableStatus> {
        self.lock()
            .tables
            .values()
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// One table's status and history (oldest sample first).
    pub fn table(&self, name: &str) -> Option<(TableStatus, Vec<Sample>)> {
        self.lock()
            .tables
            .get(name)
            .map(|(s, h)| (s.clone(), h.iter().copied().collect()))
    }

    /// The `limit` newest jobs (by start), running and finished, newest first.
    pub fn jobs(&self, limit: usize) -> Vec<JobView> {
        let inner = self.lock();
        let mut all: Vec<&JobView> = inner.running.values().chain(&inner.finished).collect();
        all.sort_by_key(|j| std::cmp::Reverse((j.started_ms, j.id)));
        all.into_iter().take(limit).cloned().collect()
    }

    /// When the last pass over the tables ended.
    pub fn last_pass_ms(&self) -> Option<i64> {
        self.lock().last_pass_ms
    }

    /// Records the end of a pass, and what the service waits for, if anything
    /// (`catalog unreachable: ..., retrying in 30s`).
    pub fn set_last_pass(&self, now_ms: i64, waiting_for: Option<String>) {
        let mut inner = self.lock();
        inner.last_pass_ms = Some(now_ms);
        inner.waiting_for = waiting_for;
    }

    /// Records the replicas the last pass saw (`None`: this service maintains every watched
    /// table).
    pub fn set_replicas(&self, replicas: Option<ReplicaView>) {
        self.lock().replicas = replicas;
    }

    /// The summary of `/api/status`.
    pub fn status(&self) -> StatusView {
        let inner = self.lock();
        StatusView {
            holder: inner.holder.clone(),
            started_ms: inner.started_ms,
            last_pass_ms: inner.last_pass_ms,
            waiting_for: inner.waiting_for.clone(),
            running_jobs: inner.running.len(),
            tables: inner.tables.len(),
            tables_with_problems: problems(&inner),
            replicas: inner.replicas.clone(),
        }
    }

    /// The Prometheus text exposition (format 0.0.4), through [`crate::base::server::exposition`].
    pub fn render_metrics(&self) -> String {
        let inner = self.lock();
        let mut out: Vec<Family> = Vec::new();

        let mut kinds: Vec<&str> = JOB_KINDS.to_vec();
        for k in inner.counters.keys() {
            if !kinds.contains(&k.as_str()) {
                kinds.push(k);
            }
        }
        let per_job: [Series<JobCounters, u64>; 3] = [
            (
                "floe_maintain_jobs_started_total",
                "Maintenance jobs started, per job kind.",
                |c| c.started,
            ),
            (
                "floe_maintain_jobs_succeeded_total",
                "Maintenance jobs that succeeded, per job kind.",
                |c| c.succeeded,
            ),
            (
                "floe_maintain_jobs_failed_total",
                "Maintenance jobs that failed, per job kind.",
                |c| c.failed,
            ),
        ];
        for (name, help, get) in per_job {
            let mut f = Family::counter(name, help);
            for k in &kinds {
                let v = inner.counters.get(*k).map(get).unwrap_or(0);
                f.sample(&[("job", k)], v as f64);
            }
            out.push(f);
        }
        for (name, help, v) in [
            (
                "floe_maintain_bytes_read_total",
                "Bytes read by the maintenance jobs that succeeded.",
                inner.bytes_read,
            ),
            (
                "floe_maintain_bytes_written_total",
                "Bytes written by the maintenance jobs that succeeded.",
                inner.bytes_written,
            ),
            (
                "floe_maintain_files_deleted_total",
                "Files deleted by the maintenance jobs that succeeded.",
                inner.files_deleted,
            ),
        ] {
            out.push(Family::counter(name, help).with_value(v as f64));
        }
        for (name, help, v) in [
            (
                "floe_maintain_running_jobs",
                "Maintenance jobs running now.",
                inner.running.len(),
            ),
            (
                "floe_maintain_tables",
                "Tables watched.",
                inner.tables.len(),
            ),
            (
                "floe_maintain_tables_with_problems",
                "Tables skipped because they could not be evaluated.",
                problems(&inner),
            ),
            (
                "floe_maintain_live_replicas",
                "Live replicas of this service's replica group (1 when it does not divide).",
                inner.replicas.as_ref().map_or(1, |r| r.live.len()),
            ),
            (
                "floe_maintain_tables_elsewhere",
                "Watched tables another replica of the group maintains.",
                inner.replicas.as_ref().map_or(0, |r| r.tables_elsewhere),
            ),
        ] {
            out.push(Family::gauge(name, help).with_value(v as f64));
        }
        let per_table: [Series<TableStatus, f64>; 6] = [
            (
                "floe_table_live_data_files",
                "Data files of the table's current snapshot.",
                |t| t.live_data_files as f64,
            ),
            (
                "floe_table_small_files",
                "Data files below the table's small-file threshold.",
                |t| t.small_files as f64,
            ),
            (
                "floe_table_delete_files",
                "Delete files of the table's current snapshot.",
                |t| t.delete_files as f64,
            ),
            (
                "floe_table_snapshots",
                "Snapshots in the table's metadata.",
                |t| t.snapshots as f64,
            ),
            (
                "floe_table_data_bytes",
                "Bytes of the data files of the table's current snapshot.",
                |t| t.data_bytes as f64,
            ),
            (
                "floe_table_debt",
                "Sum of the benefit of the table's due maintenance jobs.",
                |t| t.debt,
            ),
        ];
        // A skipped table is a series of its own, with the reason.
        let mut skipped = Family::gauge(
            "floe_maintain_table_skipped",
            "Tables floe maintain skips (an invalid property, unreadable metadata), with the reason.",
        );
        for (table, (status, _)) in &inner.tables {
            if let Some(p) = &status.problem {
                skipped.sample(&[("table", table), ("reason", p)], 1.0);
            }
        }
        out.push(skipped);
        for (name, help, get) in per_table {
            let mut f = Family::gauge(name, help);
            for (table, (status, history)) in &inner.tables {
                // A table skipped before any evaluation has no numbers: zeros would read
                // as a healthy table (one evaluated before keeps its last numbers).
                if status.problem.is_some() && history.is_empty() {
                    continue;
                }
                f.sample(&[("table", table)], get(status));
            }
            out.push(f);
        }
        exposition::encode(out)
    }
}

/// A metric family read from each `T`: name, help, value.
type Series<T, V> = (&'static str, &'static str, fn(&T) -> V);

fn problems(inner: &Inner) -> usize {
    inner
        .tables
        .values()
        .filter(|(s, _)| s.problem.is_some())
        .count()
}

#[cfg(test)]
mod tests;
