//! `floe worker`: pulls distributed-compaction tasks ([`super::distributed`]) from the queue,
//! rewrites each on the planned snapshot, reports the outputs; `--listen` serves `/healthz`,
//! `/readyz` and `/metrics` for Kubernetes probes and Prometheus.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iceberg::table::Table;
use serde::Serialize;

use super::distributed::{encode_outputs, TaskSpec};
use super::{parallel, sort, GroupResult};
use crate::base::error::Result;
use crate::base::server::exposition::{encode, Family};
use crate::commit::Ledger;
use crate::coordination::tasks::{Claimed, TaskDone};
use crate::coordination::Store;
use crate::table::deletion_vector::DeletionVectors;
use crate::write::WriteOptions;

/// What a worker needs from its own configuration.
#[derive(Clone, Default)]
pub struct WorkerOptions {
    /// This worker's name in the queue.
    pub worker_id: String,
    /// Storage properties of its own (credentials), over the task's.
    pub storage: HashMap<String, String>,
    /// How long its task leases last (renewed every third of it).
    pub lease_ttl: Duration,
    /// Exit after this long without a task (`None`: run until stopped).
    pub stop_when_idle: Option<Duration>,
    /// How often an idle worker asks the queue.
    pub poll: Duration,
}

/// What one worker did, over its life.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkerReport {
    pub worker: String,
    pub tasks_done: u64,
    pub tasks_failed: u64,
    /// Tasks it was rewriting when they stopped being its own (lease expired and claimed
    /// again, or the run ended): their outputs deleted.
    pub tasks_lost: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub rows: u64,
    pub seconds: f64,
}

/// A task's table, read from its metadata file: kept for the run's next tasks.
struct TableCache {
    tables: Vec<(String, Table)>,
}

impl TableCache {
    async fn get(&mut self, spec: &TaskSpec, extra: &HashMap<String, String>) -> Result<Table> {
        if let Some((_, t)) = self
            .tables
            .iter()
            .find(|(loc, _)| *loc == spec.metadata_location)
        {
            return Ok(t.clone());
        }
        let mut props: HashMap<String, String> = spec.storage.clone().into_iter().collect();
        props.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        let io = crate::storage::file_io_for(&spec.metadata_location, props);
        let md = crate::table::read_metadata(&io, &spec.metadata_location).await?;
        let ident = crate::table::parse_table_ident(&spec.table)?;
        // As the catalogs load tables: the manifest cache off (see `table_from`).
        let table = crate::catalog::table_from(&io, ident, md, spec.metadata_location.clone())?;
        if self.tables.len() >= 8 {
            self.tables.remove(0);
        }
        self.tables
            .push((spec.metadata_location.clone(), table.clone()));
        Ok(table)
    }
}

/// Rewrites one task's job on `table` (the planned snapshot), its outputs named after the
/// run and task (`prefix`, [`super::queue_checks::output_prefix`]).
async fn rewrite_task(table: &Table, spec: &TaskSpec, prefix: String) -> Result<GroupResult> {
    let arrow_schema: arrow_schema::SchemaRef = Arc::new(iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    let sort_keys = match &spec.sort_by {
        Some(s) => Some(sort::parse_sort_by(s, &arrow_schema)?),
        None => sort::table_sort_order(table, &arrow_schema)?,
    };
    let shared = parallel::JobShared {
        cores: Arc::new(tokio::sync::Semaphore::new(parallel::cores())),
        equality: Default::default(),
        dvs: DeletionVectors::from_parts(spec.dvs.clone(), spec.puffin.clone()),
        lineage: spec
            .lineage
            .clone()
            .map(|l| Arc::new(l.into_iter().collect())),
        merge: Arc::new(spec.merge.config()),
    };
    let members = spec
        .members
        .iter()
        .cloned()
        .map(|m| m.into_task(table))
        .collect::<Result<Vec<_>>>()?;
    super::rewrite::rewrite_group(
        table,
        spec.group,
        spec.spec_id,
        members,
        &WriteOptions {
            target_file_size_bytes: spec.target_file_size_bytes,
            file_prefix: Some(prefix),
        },
        sort_keys.as_ref(),
        &shared,
    )
    .await
}

/// What a running worker shows on `--listen`: its report so far and the task in hand.
#[derive(Default)]
pub struct WorkerState {
    report: Mutex<WorkerReport>,
    /// `run/task` being rewritten.
    current: Mutex<Option<String>>,
    /// Connected to the queue, pulling tasks.
    ready: std::sync::atomic::AtomicBool,
}

impl WorkerState {
    pub fn report(&self) -> WorkerReport {
        self.report.lock().expect("not poisoned").clone()
    }

    fn set(&self, report: &WorkerReport, current: Option<String>) {
        *self.report.lock().expect("not poisoned") = report.clone();
        *self.current.lock().expect("not poisoned") = current;
    }
}

/// The answer of a worker's `--listen` endpoint to `method target`: `/healthz` (the process
/// serves: liveness), `/readyz` (connected to the queue, pulling tasks: readiness) and
/// `/metrics` (Prometheus).
pub fn route(state: &WorkerState, method: &http::Method, target: &str) -> http::Response<String> {
    let path = target.split('?').next().unwrap_or(target);
    let answer = |status: u16, kind: &str, body: String| {
        http::Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, kind)
            .body(body)
            .expect("valid response")
    };
    if method != http::Method::GET {
        return answer(
            405,
            "text/plain",
            format!("method {method} not allowed: GET only\n"),
        );
    }
    let ready = state.ready.load(std::sync::atomic::Ordering::Relaxed);
    match path {
        "/healthz" => answer(200, "text/plain", "ok\n".into()),
        "/readyz" if ready => answer(200, "text/plain", "ready\n".into()),
        "/readyz" => answer(
            503,
            "text/plain",
            "not connected to the task queue yet\n".into(),
        ),
        "/metrics" => {
            let r = state.report();
            let busy = state.current.lock().expect("not poisoned").is_some();
            let mut tasks = Family::counter(
                "floe_worker_tasks_total",
                "Compaction tasks this worker ended, by result (done, failed, lost).",
            );
            tasks
                .sample(&[("result", "done")], r.tasks_done as f64)
                .sample(&[("result", "failed")], r.tasks_failed as f64)
                .sample(&[("result", "lost")], r.tasks_lost as f64);
            let body = encode(vec![
                tasks,
                Family::counter(
                    "floe_worker_read_bytes_total",
                    "Bytes of input files of the tasks this worker reported.",
                )
                .with_value(r.bytes_read as f64),
                Family::counter(
                    "floe_worker_written_bytes_total",
                    "Bytes of output files of the tasks this worker reported.",
                )
                .with_value(r.bytes_written as f64),
                Family::counter(
                    "floe_worker_rows_total",
                    "Rows written by the tasks this worker reported.",
                )
                .with_value(r.rows as f64),
                Family::gauge("floe_worker_busy", "1 while a task is being rewritten.")
                    .with_value(if busy { 1.0 } else { 0.0 }),
                Family::gauge("floe_worker_ready", "1 once connected to the task queue.")
                    .with_value(if ready { 1.0 } else { 0.0 }),
            ]);
            answer(200, "text/plain; version=0.0.4", body)
        }
        _ => answer(404, "text/plain", format!("no such path: {path}\n")),
    }
}

/// Pulls tasks from `store` until stopped (`stop` becomes true: the task in hand is finished
/// first) or idle for `stop_when_idle`; `state` follows along.
pub async fn work(
    store: &Store,
    opts: &WorkerOptions,
    stop: Arc<std::sync::atomic::AtomicBool>,
    state: Arc<WorkerState>,
) -> Result<WorkerReport> {
    let started = Instant::now();
    let mut report = WorkerReport {
        worker: opts.worker_id.clone(),
        ..Default::default()
    };
    state.set(&report, None);
    state
        .ready
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let mut cache = TableCache { tables: vec![] };
    let mut idle_since = Instant::now();
    let mut said_waiting = false;
    // Woken by a coordinator queueing tasks (PostgreSQL); polls every `poll` anyway.
    let mut wakeups = store.wakeups(crate::coordination::wakeups::NEW_TASKS).await;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let now = store.now_ms().await?;
        let Some(task) = store
            .claim_task(&opts.worker_id, opts.lease_ttl, now)
            .await?
        else {
            if let Some(limit) = opts.stop_when_idle {
                if idle_since.elapsed() >= limit {
                    break;
                }
            }
            if !said_waiting {
                tracing::info!("waiting for tasks in {}", store.display_uri());
                said_waiting = true;
            }
            wakeups.wait(opts.poll).await;
            continue;
        };
        said_waiting = false;
        state.set(&report, Some(format!("{}/{}", task.run_id, task.task_id)));
        run_task(store, opts, &mut cache, task, &mut report).await?;
        idle_since = Instant::now();
        report.seconds = started.elapsed().as_secs_f64();
        state.set(&report, None);
        tracing::info!(
            "worker {}: {} task(s) done, {} failed, {} lost",
            report.worker,
            report.tasks_done,
            report.tasks_failed,
            report.tasks_lost
        );
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Rewrites a claimed task under its lease and reports it.
async fn run_task(
    store: &Store,
    opts: &WorkerOptions,
    cache: &mut TableCache,
    task: Claimed,
    report: &mut WorkerReport,
) -> Result<()> {
    let worker = &opts.worker_id;
    let spec: TaskSpec = match serde_json::from_str(&task.spec) {
        Ok(s) => s,
        Err(e) => {
            let now = store.now_ms().await?;
            let why = format!(
                "run {}, task {}: unreadable task: {e}",
                task.run_id, task.task_id
            );
            store.fail_task(&task, worker, &why, now).await?;
            report.tasks_failed += 1;
            return Ok(());
        }
    };
    tracing::info!(
        "task {} of run {} (attempt {}): {} file(s) of {}",
        task.task_id,
        task.run_id,
        task.attempt,
        spec.members.len(),
        spec.table
    );
    let bytes_read: u64 = spec.members.iter().map(|m| m.task.file_size_in_bytes).sum();
    let table = match cache.get(&spec, &opts.storage).await {
        Ok(t) => t,
        Err(e) => {
            let now = store.now_ms().await?;
            store.fail_task(&task, worker, &e.to_string(), now).await?;
            report.tasks_failed += 1;
            return Ok(());
        }
    };
    // The queue is less trusted than the table's storage: read only the table's own files.
    if let Err(why) =
        super::queue_checks::check_task(&table, &spec.table, &spec.metadata_location, spec.reads())
    {
        let why = format!("run {}, task {}: refused: {why}", task.run_id, task.task_id);
        tracing::warn!("{why}");
        let now = store.now_ms().await?;
        store.fail_task(&task, worker, &why, now).await?;
        report.tasks_failed += 1;
        return Ok(());
    }
    let renew_every = opts.lease_ttl / 3;
    let prefix = super::queue_checks::output_prefix(&task.run_id, task.task_id);
    let rewrite = rewrite_task(&table, &spec, prefix);
    tokio::pin!(rewrite);
    let result = loop {
        tokio::select! {
            r = &mut rewrite => break Some(r),
            _ = tokio::time::sleep(renew_every) => {
                let now = store.now_ms().await?;
                if !store.renew_task(&task, worker, opts.lease_ttl, now).await? {
                    break None;
                }
            }
        }
    };
    let Some(result) = result else {
        // The task is no longer this attempt's: stopping the rewrite drops its writers; what
        // they finished is referenced by nothing (never reported) and left for orphan removal.
        tracing::warn!(
            "task {} of run {}: lease lost (claimed again, or the run ended); stopped",
            task.task_id,
            task.run_id
        );
        report.tasks_lost += 1;
        return Ok(());
    };
    match result {
        Ok(g) => {
            let done = TaskDone {
                output: encode_outputs(&table, &g.files)?,
                rows: g.rows,
                bytes_read,
                bytes_written: g.files.iter().map(|f| f.file_size_in_bytes()).sum(),
            };
            crate::base::fault::pause("WORKER_BEFORE_REPORT").await;
            let now = store.now_ms().await?;
            if store.complete_task(&task, worker, &done, now).await? {
                report.tasks_done += 1;
                report.bytes_read += done.bytes_read;
                report.bytes_written += done.bytes_written;
                report.rows += done.rows;
            } else {
                // Never reported, so never committed: certain to be unreferenced.
                let mut written = Ledger::of(&table);
                written.stage_files(&g.files);
                written.discard().await;
                tracing::warn!(
                    "task {} of run {}: no longer this worker's when it finished; its {} \
                     output file(s) deleted",
                    task.task_id,
                    task.run_id,
                    g.files.len()
                );
                report.tasks_lost += 1;
            }
        }
        Err(e) => {
            tracing::warn!("task {} of run {} failed: {e}", task.task_id, task.run_id);
            let now = store.now_ms().await?;
            store.fail_task(&task, worker, &e.to_string(), now).await?;
            report.tasks_failed += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_and_metrics_follow_the_worker() {
        let s = WorkerState::default();
        let get = |p: &str| route(&s, &http::Method::GET, p);
        assert_eq!(get("/healthz").status(), 200);
        assert_eq!(get("/readyz").status(), 503);
        s.ready.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(get("/readyz").status(), 200);
        let report = WorkerReport {
            worker: "w".into(),
            tasks_done: 3,
            tasks_lost: 1,
            bytes_read: 4096,
            ..Default::default()
        };
        s.set(&report, Some("run/7".into()));
        let m = get("/metrics").into_body();
        assert!(
            m.contains("floe_worker_tasks_total{result=\"done\"} 3"),
            "{m}"
        );
        assert!(
            m.contains("floe_worker_tasks_total{result=\"lost\"} 1"),
            "{m}"
        );
        assert!(m.contains("floe_worker_read_bytes_total 4096"), "{m}");
        assert!(m.contains("floe_worker_busy 1"), "{m}");
        assert_eq!(get("/nope").status(), 404);
        assert_eq!(route(&s, &http::Method::POST, "/metrics").status(), 405);
    }
}
