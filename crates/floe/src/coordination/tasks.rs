//! The task queue of distributed compaction (`floe compact --distributed`, `floe worker`):
//! a coordinator plans file groups into task rows, workers claim them under a lease they renew,
//! write the outputs and report them; the coordinator commits finished groups.
//!
//! Tables (in the coordination database, which may be the lease store's):
//!
//! - `floe_compact_runs(run_id PK, scope, coordinator, expires_ms, state, created_ms,
//!   finished_ms)`: one row per coordinator run. The coordinator renews `expires_ms` while it
//!   waits; a run whose coordinator stopped renewing is **abandoned**: workers claim none of
//!   its tasks any more and stop the ones they hold.
//! - `floe_compact_tasks(run_id, task_id, group_index, state, worker, attempt, expires_ms,
//!   spec, output, rows_written, bytes_read, bytes_written, started_ms, finished_ms, error)`:
//!   one row per rewrite job (a file group split into jobs of about one output file). States:
//!   `queued` -> `running` (claimed: `worker`, `attempt` + 1, lease until `expires_ms`) ->
//!   `done` (outputs reported in `output`) -> `committed` or `dropped` (the coordinator
//!   committed the group, or gave it up and deleted the outputs); `failed` after
//!   [`MAX_ATTEMPTS`] failures.
//!
//! Claiming is one statement: an `UPDATE` of the first claimable row (queued, or running with
//! its lease expired: its worker died) of a live run. On PostgreSQL the row is picked with
//! `FOR UPDATE SKIP LOCKED`, so workers claiming at once take different rows without waiting on
//! each other; SQLite serializes writers, so there the plain subquery is enough. Every later
//! statement of a worker (renew, report, fail) names the attempt it claimed: once a lease
//! expired and another worker claimed the task, the first one's statements change nothing, so
//! it learns it lost the task and deletes what it wrote (no commit can reference outputs that
//! were never reported).
//!
//! All times come from the database's clock ([`Store::now_ms`]).

use std::time::Duration;

use sqlx::Row;

use super::{expiry, Store};
use crate::base::error::Result;

/// Claims of one task before it is failed for good (a worker that crashes on it each time, or
/// an input that cannot be read).
pub const MAX_ATTEMPTS: i64 = 3;

/// A task a worker claimed.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub run_id: String,
    pub task_id: i64,
    /// The attempt this claim is (1 for the first): every later statement names it.
    pub attempt: i64,
    /// The task's JSON description (what to read, where to write).
    pub spec: String,
}

/// A task's row, as the coordinator reads it.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub task_id: i64,
    pub group_index: i64,
    pub state: String,
    pub worker: Option<String>,
    pub attempt: i64,
    /// The lease of a running task (its worker renews it).
    pub expires_ms: i64,
    pub output: Option<String>,
    pub rows_written: i64,
    pub bytes_read: i64,
    pub bytes_written: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub error: Option<String>,
}

/// What a worker did in one run, summed over its tasks.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct WorkerShare {
    pub worker: String,
    pub tasks: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Wall-clock seconds its tasks took, summed.
    pub seconds: f64,
}

/// A worker's report of a finished task.
#[derive(Debug, Clone, Default)]
pub struct TaskDone {
    pub output: String,
    pub rows: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Task ids bound in one statement (SQLite before 3.32 accepts 999 parameters).
const IDS_PER_STATEMENT: usize = 500;

/// `$first, $first+1, ...`: `count` placeholders.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn n(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Store {
    pub(super) async fn ensure_task_schema(&self) -> Result<()> {
        self.create_if_missing(
            "CREATE TABLE IF NOT EXISTS floe_compact_runs (\
               run_id VARCHAR(36) NOT NULL PRIMARY KEY, \
               scope VARCHAR(1000) NOT NULL, \
               coordinator VARCHAR(255) NOT NULL, \
               expires_ms BIGINT NOT NULL, \
               state VARCHAR(16) NOT NULL, \
               created_ms BIGINT NOT NULL, \
               finished_ms BIGINT)",
            "SELECT run_id FROM floe_compact_runs WHERE 1 = 0",
        )
        .await?;
        self.create_if_missing(
            "CREATE TABLE IF NOT EXISTS floe_compact_tasks (\
               run_id VARCHAR(36) NOT NULL, \
               task_id BIGINT NOT NULL, \
               group_index BIGINT NOT NULL, \
               state VARCHAR(16) NOT NULL, \
               worker VARCHAR(255), \
               attempt BIGINT NOT NULL, \
               expires_ms BIGINT NOT NULL, \
               spec TEXT NOT NULL, \
               output TEXT, \
               rows_written BIGINT NOT NULL, \
               bytes_read BIGINT NOT NULL, \
               bytes_written BIGINT NOT NULL, \
               started_ms BIGINT, \
               finished_ms BIGINT, \
               error TEXT, \
               PRIMARY KEY (run_id, task_id))",
            "SELECT run_id FROM floe_compact_tasks WHERE 1 = 0",
        )
        .await?;
        // Workers look for claimable rows by state.
        self.create_if_missing(
            "CREATE INDEX IF NOT EXISTS floe_compact_tasks_state \
             ON floe_compact_tasks (state, run_id, task_id)",
            "SELECT state FROM floe_compact_tasks WHERE 1 = 0",
        )
        .await
    }

    /// Starts a run of `coordinator` on `scope` with `tasks` (group index, spec), leased until
    /// `now_ms + ttl`; the tasks are queued in the given order (claimed in that order).
    pub async fn create_run(
        &self,
        run_id: &str,
        scope: &str,
        coordinator: &str,
        tasks: &[(usize, String)],
        ttl: Duration,
        now_ms: i64,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(|e| self.err(e))?;
        sqlx::query(
            "INSERT INTO floe_compact_runs \
             (run_id, scope, coordinator, expires_ms, state, created_ms) \
             VALUES ($1, $2, $3, $4, 'running', $5)",
        )
        .bind(run_id)
        .bind(scope)
        .bind(coordinator)
        .bind(expiry(now_ms, ttl))
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.err(e))?;
        for (i, (group, spec)) in tasks.iter().enumerate() {
            sqlx::query(
                "INSERT INTO floe_compact_tasks \
                 (run_id, task_id, group_index, state, attempt, expires_ms, spec, \
                  rows_written, bytes_read, bytes_written) \
                 VALUES ($1, $2, $3, 'queued', 0, 0, $4, 0, 0, 0)",
            )
            .bind(run_id)
            .bind(i as i64)
            .bind(*group as i64)
            .bind(spec.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.err(e))?;
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        self.notify(super::wakeups::NEW_TASKS).await;
        Ok(())
    }

    /// Extends the coordinator's lease on its run; `false` when the run is no longer its own
    /// (abandoned by a timeout and taken over).
    pub async fn renew_run(
        &self,
        run_id: &str,
        coordinator: &str,
        ttl: Duration,
        now_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE floe_compact_runs SET expires_ms = $1 \
             WHERE run_id = $2 AND coordinator = $3 AND state = 'running'",
        )
        .bind(expiry(now_ms, ttl))
        .bind(run_id)
        .bind(coordinator)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(done.rows_affected() == 1)
    }

    /// Ends a run (`done` or `failed`): its tasks still queued or running are dropped, so no
    /// worker starts or finishes one.
    pub async fn finish_run(&self, run_id: &str, state: &str, now_ms: i64) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(|e| self.err(e))?;
        sqlx::query("UPDATE floe_compact_runs SET state = $1, finished_ms = $2 WHERE run_id = $3")
            .bind(state)
            .bind(now_ms)
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.err(e))?;
        sqlx::query(
            "UPDATE floe_compact_tasks SET state = 'dropped' \
             WHERE run_id = $1 AND state IN ('queued', 'running')",
        )
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))
    }

    /// Claims the first claimable task of a live run for `worker`, leased until
    /// `now_ms + ttl`: a queued one, or a running one whose lease expired (its worker died).
    pub async fn claim_task(
        &self,
        worker: &str,
        ttl: Duration,
        now_ms: i64,
    ) -> Result<Option<Claimed>> {
        let lock = if self.is_postgres() {
            " FOR UPDATE OF k SKIP LOCKED"
        } else {
            ""
        };
        let sql = format!(
            "UPDATE floe_compact_tasks SET state = 'running', worker = $1, \
               attempt = attempt + 1, expires_ms = $2, started_ms = $3, error = NULL \
             WHERE (run_id, task_id) = (\
               SELECT k.run_id, k.task_id FROM floe_compact_tasks k \
               JOIN floe_compact_runs r ON r.run_id = k.run_id \
               WHERE r.state = 'running' AND r.expires_ms > $4 \
                 AND (k.state = 'queued' OR (k.state = 'running' AND k.expires_ms <= $5)) \
               ORDER BY k.run_id, k.task_id LIMIT 1{lock}) \
             RETURNING run_id, task_id, attempt, spec"
        );
        let row = sqlx::query(&sql)
            .bind(worker)
            .bind(expiry(now_ms, ttl))
            .bind(now_ms)
            .bind(now_ms)
            .bind(now_ms)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let get = |i: usize| row.try_get::<i64, _>(i).map_err(|e| self.err(e));
        Ok(Some(Claimed {
            run_id: row.try_get(0).map_err(|e| self.err(e))?,
            task_id: get(1)?,
            attempt: get(2)?,
            spec: row.try_get(3).map_err(|e| self.err(e))?,
        }))
    }

    /// Extends a worker's lease on its task while its run is live; `false` when the task is
    /// no longer its own (the lease expired and another worker claimed it, or the run ended or
    /// was abandoned): the worker must stop and delete what it wrote.
    pub async fn renew_task(
        &self,
        task: &Claimed,
        worker: &str,
        ttl: Duration,
        now_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE floe_compact_tasks SET expires_ms = $1 \
             WHERE run_id = $2 AND task_id = $3 AND worker = $4 AND attempt = $5 \
               AND state = 'running' \
               AND EXISTS (SELECT 1 FROM floe_compact_runs r WHERE r.run_id = $6 \
                           AND r.state = 'running' AND r.expires_ms > $7)",
        )
        .bind(expiry(now_ms, ttl))
        .bind(&task.run_id)
        .bind(task.task_id)
        .bind(worker)
        .bind(task.attempt)
        .bind(&task.run_id)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(done.rows_affected() == 1)
    }

    /// Reports a finished task; `false` when the task is no longer this attempt's (then its
    /// outputs are referenced by nothing and the worker deletes them).
    pub async fn complete_task(
        &self,
        task: &Claimed,
        worker: &str,
        done: &TaskDone,
        now_ms: i64,
    ) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE floe_compact_tasks SET state = 'done', output = $1, rows_written = $2, \
               bytes_read = $3, bytes_written = $4, finished_ms = $5 \
             WHERE run_id = $6 AND task_id = $7 AND worker = $8 AND attempt = $9 \
               AND state = 'running'",
        )
        .bind(done.output.as_str())
        .bind(n(done.rows))
        .bind(n(done.bytes_read))
        .bind(n(done.bytes_written))
        .bind(now_ms)
        .bind(&task.run_id)
        .bind(task.task_id)
        .bind(worker)
        .bind(task.attempt)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        if r.rows_affected() == 1 {
            self.notify(&super::wakeups::run_channel(&task.run_id))
                .await;
        }
        Ok(r.rows_affected() == 1)
    }

    /// Reports a task that failed on this attempt: queued again while it has attempts left,
    /// else `failed` with `error`.
    pub async fn fail_task(
        &self,
        task: &Claimed,
        worker: &str,
        error: &str,
        now_ms: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE floe_compact_tasks SET \
               state = CASE WHEN attempt >= $1 THEN 'failed' ELSE 'queued' END, \
               error = $2, finished_ms = $3 \
             WHERE run_id = $4 AND task_id = $5 AND worker = $6 AND attempt = $7 \
               AND state = 'running'",
        )
        .bind(MAX_ATTEMPTS)
        .bind(error)
        .bind(now_ms)
        .bind(&task.run_id)
        .bind(task.task_id)
        .bind(worker)
        .bind(task.attempt)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        // Queued again (another worker may take it) or failed (its coordinator settles it).
        self.notify(super::wakeups::NEW_TASKS).await;
        self.notify(&super::wakeups::run_channel(&task.run_id))
            .await;
        Ok(())
    }

    /// The tasks of a run, by id, with their outputs.
    pub async fn run_tasks(&self, run_id: &str) -> Result<Vec<TaskRow>> {
        self.tasks_of(run_id, true).await
    }

    /// The tasks of a run, by id, without their outputs (`output` is `None`): what a
    /// coordinator polls, so each look at a run of thousands of tasks stays small; it reads a
    /// group's outputs with [`Store::task_outputs`] once the group is done.
    pub async fn run_task_states(&self, run_id: &str) -> Result<Vec<TaskRow>> {
        self.tasks_of(run_id, false).await
    }

    async fn tasks_of(&self, run_id: &str, outputs: bool) -> Result<Vec<TaskRow>> {
        let sql = format!(
            "SELECT task_id, group_index, state, worker, attempt, rows_written, bytes_read, \
               bytes_written, started_ms, finished_ms, error, expires_ms{} \
             FROM floe_compact_tasks WHERE run_id = $1 ORDER BY task_id",
            if outputs { ", output" } else { "" }
        );
        let rows = sqlx::query(&sql)
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| -> std::result::Result<TaskRow, sqlx::Error> {
                Ok(TaskRow {
                    task_id: r.try_get(0)?,
                    group_index: r.try_get(1)?,
                    state: r.try_get(2)?,
                    worker: r.try_get(3)?,
                    attempt: r.try_get(4)?,
                    rows_written: r.try_get(5)?,
                    bytes_read: r.try_get(6)?,
                    bytes_written: r.try_get(7)?,
                    started_ms: r.try_get(8)?,
                    finished_ms: r.try_get(9)?,
                    error: r.try_get(10)?,
                    expires_ms: r.try_get(11)?,
                    output: if outputs { r.try_get(12)? } else { None },
                })
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// The reported outputs of tasks `task_ids` of a run (tasks not done have none): one
    /// statement per [`IDS_PER_STATEMENT`] ids.
    pub async fn task_outputs(
        &self,
        run_id: &str,
        task_ids: &[i64],
    ) -> Result<std::collections::HashMap<i64, String>> {
        let mut out = std::collections::HashMap::new();
        for ids in task_ids.chunks(IDS_PER_STATEMENT) {
            let sql = format!(
                "SELECT task_id, output FROM floe_compact_tasks \
                 WHERE run_id = $1 AND output IS NOT NULL AND task_id IN ({})",
                placeholders(2, ids.len())
            );
            let mut query = sqlx::query(&sql).bind(run_id);
            for id in ids {
                query = query.bind(*id);
            }
            let rows = query.fetch_all(&self.pool).await.map_err(|e| self.err(e))?;
            for r in rows {
                let id: i64 = r.try_get(0).map_err(|e| self.err(e))?;
                out.insert(id, r.try_get(1).map_err(|e| self.err(e))?);
            }
        }
        Ok(out)
    }

    /// Marks tasks of a run `committed` or `dropped` (the coordinator settled their group):
    /// one statement per [`IDS_PER_STATEMENT`] ids.
    pub async fn settle_tasks(&self, run_id: &str, task_ids: &[i64], state: &str) -> Result<()> {
        for ids in task_ids.chunks(IDS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE floe_compact_tasks SET state = $1 WHERE run_id = $2 AND task_id IN ({})",
                placeholders(3, ids.len())
            );
            let mut query = sqlx::query(&sql).bind(state).bind(run_id);
            for id in ids {
                query = query.bind(*id);
            }
            query.execute(&self.pool).await.map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Runs of `scope` still marked running whose coordinator stopped renewing before
    /// `now_ms`: marked `abandoned` (their tasks dropped); returns their ids.
    pub async fn abandon_stale_runs(&self, scope: &str, now_ms: i64) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT run_id FROM floe_compact_runs \
             WHERE scope = $1 AND state = 'running' AND expires_ms <= $2",
        )
        .bind(scope)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        let mut ids = Vec::new();
        for r in rows {
            let id: String = r.try_get(0).map_err(|e| self.err(e))?;
            self.finish_run(&id, "abandoned", now_ms).await?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// Tasks queued or running over all live runs (what an autoscaler reads).
    pub async fn queue_depth(&self, now_ms: i64) -> Result<i64> {
        let row = sqlx::query(
            "SELECT COUNT(*) FROM floe_compact_tasks k JOIN floe_compact_runs r \
             ON r.run_id = k.run_id \
             WHERE r.state = 'running' AND r.expires_ms > $1 \
               AND k.state IN ('queued', 'running')",
        )
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        row.try_get::<i64, _>(0).map_err(|e| self.err(e))
    }

    /// Per worker: its finished tasks of `run_id`, bytes and seconds.
    pub async fn worker_shares(&self, run_id: &str) -> Result<Vec<WorkerShare>> {
        let mut by: std::collections::BTreeMap<String, WorkerShare> = Default::default();
        for t in self.run_tasks(run_id).await? {
            if !matches!(t.state.as_str(), "done" | "committed" | "dropped") || t.output.is_none() {
                continue;
            }
            let Some(w) = t.worker else { continue };
            let s = by.entry(w.clone()).or_insert_with(|| WorkerShare {
                worker: w,
                ..Default::default()
            });
            s.tasks += 1;
            s.bytes_read += t.bytes_read.max(0) as u64;
            s.bytes_written += t.bytes_written.max(0) as u64;
            if let (Some(a), Some(b)) = (t.started_ms, t.finished_ms) {
                s.seconds += (b - a).max(0) as f64 / 1000.0;
            }
        }
        Ok(by.into_values().collect())
    }
}
