//! The coordination layer: what several processes agree on through one SQL database (SQLite
//! or PostgreSQL), below the operations that use it. The lease and run-history store of
//! `floe maintain` (with a SQL catalog the catalog's own database, with a REST catalog the one
//! given by `--lease-db`), also used by `floe ingest --maintain` and, for its coordinator
//! lease and hand-offs, by `floe ingest --group`.
//!
//! ## Leases: one runner per table
//!
//! Table `floe_maintain_leases(scope PRIMARY KEY, holder, expires_ms)` holds one row per table
//! scope (`catalog.ns.table`) that a maintainer holds or held. A maintainer runs a job on a
//! table only while it holds the table's lease:
//!
//! - [`Store::try_acquire`] takes the lease in one atomic upsert when the row is missing,
//!   expired (`expires_ms <= now`) or already the caller's (then it extends it). Otherwise
//!   it reports who holds it and until when. The database serializes concurrent upserts on
//!   one row, so of two maintainers racing for a free lease exactly one wins.
//! - While the job runs, the holder calls [`Store::renew`] well within the TTL (say every
//!   third of it). When `renew` returns `false` the lease was lost (it expired, and maybe
//!   another maintainer took it): the holder must stop the job, and not commit.
//! - When the job ends the holder calls [`Store::release`], which frees the table at once.
//! - A holder that dies without releasing blocks nobody for long: its lease expires after
//!   its TTL, and the next `try_acquire` takes it over.
//!
//! Every time a lease is compared with, and every run's start and end, is read from one clock:
//! the database's ([`Store::now_ms`], `now()` of PostgreSQL, `julianday('now')` of SQLite), never
//! the maintainer's own. A maintainer whose clock runs 30 s behind, with a 10 s TTL, therefore
//! neither takes a lease that is still held nor runs a job inside its interval twice; it warns
//! when its clock and the store's disagree by more than a quarter of the TTL (see
//! `crate::maintain::service`). The lease is a scheduling guard, not the last line of defence: every commit is still validated by the catalog (optimistic concurrency on the
//! metadata pointer), which also protects the table against other engines that know nothing
//! of these leases.
//!
//! ## Run history
//!
//! Table `floe_maintain_runs` records every finished job ([`RunRecord`]: what ran where, when,
//! whether it succeeded, and the files and bytes it read, wrote and deleted), indexed on
//! `(scope, job, finished_ms)`. [`Store::last_runs`] summarizes it per job for one table (the
//! last success and failure, the failures since the last success: inputs of the triggers and
//! of the backoff), [`Store::recent_runs`] lists it (cost rates, reports).
//!
//! ## Replicas
//!
//! [`replicas`]: the heartbeat rows of `floe maintain` replicas, and which replica maintains
//! which table (rendezvous hashing over the live ones).
//!
//! ## Task queue
//!
//! [`tasks`]: the rewrite jobs of distributed compaction (`floe compact --distributed`),
//! claimed by `floe worker` processes under leases.
//!
//! ## Hand-offs
//!
//! [`handoffs`]: the data files `floe ingest --group` workers wrote, waiting for their
//! coordinator's commit.
//!
//! Every statement is plain SQL accepted by both SQLite (3.24 or later, for the upsert) and
//! PostgreSQL, with `$N` placeholders; timestamps are milliseconds since the epoch in BIGINT
//! columns, counters are BIGINT (saturating at `i64::MAX`), booleans BIGINT 0 or 1.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::{AnyPool, Row};

use crate::base::error::{Error, Result};
use crate::catalog::sql::{connect_pool, describe_sqlx};

/// What [`Store::try_acquire`] got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum LeaseOutcome {
    /// The caller holds the lease (newly, or extended).
    Acquired,
    /// Another maintainer holds the lease until `expires_ms`.
    HeldBy { holder: String, expires_ms: i64 },
}

/// A lease row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Lease {
    pub scope: String,
    pub holder: String,
    pub expires_ms: i64,
}

/// One finished maintenance job.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// `catalog.ns.table`.
    pub scope: String,
    /// `compact`, `expire-snapshots`, ...
    pub job: String,
    /// The maintainer that ran it.
    pub holder: String,
    pub started_ms: i64,
    pub finished_ms: i64,
    pub succeeded: bool,
    pub error: Option<String>,
    pub files_read: u64,
    pub bytes_read: u64,
    pub files_written: u64,
    pub bytes_written: u64,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
}

/// The run history of one job on one table, summarized.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LastRuns {
    /// `finished_ms` of the last successful run.
    pub last_success_ms: Option<i64>,
    /// `finished_ms` of the last failed run.
    pub last_failure_ms: Option<i64>,
    /// Failed runs that finished after the last success (all failures when none succeeded).
    pub consecutive_failures: u32,
    /// The error of the last failed run (even when a success followed it).
    pub last_error: Option<String>,
}

/// The lease and run-history store: a connection pool on its database.
pub struct Store {
    pool: AnyPool,
    /// The statement that reads the database's clock, in ms since the epoch.
    now_sql: &'static str,
    /// URI without credentials, for messages.
    display_uri: String,
    /// The URI as given (credentials included), for the queue's notification listener; never
    /// shown.
    uri: String,
}

const RUN_COLUMNS: &str = "scope, job, holder, started_ms, finished_ms, succeeded, error, \
     files_read, bytes_read, files_written, bytes_written, files_deleted, bytes_deleted";

/// How many times [`Store::try_acquire`] retries when the lease row vanished between its
/// upsert and its read (released meanwhile).
const ACQUIRE_ATTEMPTS: usize = 8;

impl Store {
    /// Connects; creates `floe_maintain_leases(scope PK, holder, expires_ms)` and
    /// `floe_maintain_runs(...)` (with an index on (scope, job, finished_ms)) when missing.
    pub async fn connect(uri: &str) -> Result<Store> {
        let (pool, display_uri) = connect_pool(uri).await.map_err(|e| match e {
            Error::InvalidOption { value, reason, .. } => Error::InvalidOption {
                option: "lease database".into(),
                value,
                reason,
            },
            other => other,
        })?;
        let now_sql = if uri.starts_with("postgres") {
            "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
        } else {
            "SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
        };
        let store = Store {
            pool,
            display_uri,
            now_sql,
            uri: uri.to_string(),
        };
        store.ensure_schema().await?;
        Ok(store)
    }

    /// The store's clock: the database's current time, in ms since the epoch. Lease expiries
    /// and run times are taken from it, so that maintainers whose own clocks disagree still
    /// agree on who holds a lease.
    pub async fn now_ms(&self) -> Result<i64> {
        let row = sqlx::query(self.now_sql)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        row.try_get::<i64, _>(0).map_err(|e| self.err(e))
    }

    /// The database URI without credentials.
    pub fn display_uri(&self) -> &str {
        &self.display_uri
    }

    fn err(&self, e: sqlx::Error) -> Error {
        Error::catalog_with(
            self.display_uri.clone(),
            format!("maintain store: {}", describe_sqlx(&e)),
            e,
        )
    }

    async fn ensure_schema(&self) -> Result<()> {
        self.create_if_missing(
            "CREATE TABLE IF NOT EXISTS floe_maintain_leases (\
               scope VARCHAR(1000) NOT NULL PRIMARY KEY, \
               holder VARCHAR(255) NOT NULL, \
               expires_ms BIGINT NOT NULL)",
            "SELECT scope, holder, expires_ms FROM floe_maintain_leases WHERE 1 = 0",
        )
        .await?;
        self.create_if_missing(
            "CREATE TABLE IF NOT EXISTS floe_maintain_runs (\
               run_id VARCHAR(36) NOT NULL PRIMARY KEY, \
               scope VARCHAR(1000) NOT NULL, \
               job VARCHAR(255) NOT NULL, \
               holder VARCHAR(255) NOT NULL, \
               started_ms BIGINT NOT NULL, \
               finished_ms BIGINT NOT NULL, \
               succeeded BIGINT NOT NULL, \
               error TEXT, \
               files_read BIGINT NOT NULL, \
               bytes_read BIGINT NOT NULL, \
               files_written BIGINT NOT NULL, \
               bytes_written BIGINT NOT NULL, \
               files_deleted BIGINT NOT NULL, \
               bytes_deleted BIGINT NOT NULL)",
            "SELECT run_id FROM floe_maintain_runs WHERE 1 = 0",
        )
        .await?;
        // Index names are schema-wide in PostgreSQL: prefixed with the table's name.
        self.create_if_missing(
            "CREATE INDEX IF NOT EXISTS floe_maintain_runs_scope_job_finished \
             ON floe_maintain_runs (scope, job, finished_ms)",
            "SELECT scope, job, finished_ms FROM floe_maintain_runs WHERE 1 = 0",
        )
        .await?;
        // recent_runs() reads the newest runs of all tables.
        self.create_if_missing(
            "CREATE INDEX IF NOT EXISTS floe_maintain_runs_finished \
             ON floe_maintain_runs (finished_ms)",
            "SELECT finished_ms FROM floe_maintain_runs WHERE 1 = 0",
        )
        .await?;
        self.ensure_handoff_schema().await?;
        self.ensure_replica_schema().await?;
        self.ensure_task_schema().await
    }

    /// The database is PostgreSQL (else SQLite).
    pub fn is_postgres(&self) -> bool {
        self.now_sql.contains("clock_timestamp")
    }

    /// Runs `create` (a `... IF NOT EXISTS`). Two PostgreSQL sessions creating the same table
    /// at once may fail one of them (a unique violation in the system catalogs), although the
    /// object then exists: such a failure is ignored when `probe` succeeds afterwards.
    async fn create_if_missing(&self, create: &str, probe: &str) -> Result<()> {
        let Err(e) = sqlx::query(create).execute(&self.pool).await else {
            return Ok(());
        };
        // Let the winner's transaction commit before probing.
        tokio::time::sleep(Duration::from_millis(200)).await;
        if sqlx::query(create).execute(&self.pool).await.is_ok()
            || sqlx::query(probe).fetch_all(&self.pool).await.is_ok()
        {
            return Ok(());
        }
        Err(self.err(e))
    }

    /// Takes the lease of `scope` for `holder` until `now_ms + ttl` when it is free, expired
    /// (`expires_ms <= now_ms`) or already held by `holder` (then extends it). Atomic: one
    /// upsert statement; when it changed no row, the current holder is read and returned.
    pub async fn try_acquire(
        &self,
        scope: &str,
        holder: &str,
        ttl: Duration,
        now_ms: i64,
    ) -> Result<LeaseOutcome> {
        let expires_ms = expiry(now_ms, ttl);
        for _ in 0..ACQUIRE_ATTEMPTS {
            let done = sqlx::query(
                "INSERT INTO floe_maintain_leases (scope, holder, expires_ms) \
                 VALUES ($1, $2, $3) \
                 ON CONFLICT (scope) DO UPDATE \
                 SET holder = excluded.holder, expires_ms = excluded.expires_ms \
                 WHERE floe_maintain_leases.expires_ms <= $4 \
                    OR floe_maintain_leases.holder = $5",
            )
            .bind(scope)
            .bind(holder)
            .bind(expires_ms)
            .bind(now_ms)
            .bind(holder)
            .execute(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
            if done.rows_affected() == 1 {
                return Ok(LeaseOutcome::Acquired);
            }
            let row =
                sqlx::query("SELECT holder, expires_ms FROM floe_maintain_leases WHERE scope = $1")
                    .bind(scope)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|e| self.err(e))?;
            if let Some(row) = row {
                let held_by: String = row.try_get(0).map_err(|e| self.err(e))?;
                let until: i64 = row.try_get(1).map_err(|e| self.err(e))?;
                return Ok(LeaseOutcome::HeldBy {
                    holder: held_by,
                    expires_ms: until,
                });
            }
            // Released between the two statements: try again.
        }
        Err(Error::catalog(
            self.display_uri.clone(),
            format!("maintain store: the lease of {scope} changes hands too fast to be taken"),
        ))
    }

    /// Extends a lease `holder` still holds (and has not expired) to `now_ms + ttl`; `false`
    /// when it was lost: the holder must then stop its job.
    pub async fn renew(
        &self,
        scope: &str,
        holder: &str,
        ttl: Duration,
        now_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE floe_maintain_leases SET expires_ms = $1 \
             WHERE scope = $2 AND holder = $3 AND expires_ms > $4",
        )
        .bind(expiry(now_ms, ttl))
        .bind(scope)
        .bind(holder)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(done.rows_affected() == 1)
    }

    /// Drops the lease if `holder` holds it (no-op otherwise).
    pub async fn release(&self, scope: &str, holder: &str) -> Result<()> {
        sqlx::query("DELETE FROM floe_maintain_leases WHERE scope = $1 AND holder = $2")
            .bind(scope)
            .bind(holder)
            .execute(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Unexpired leases (`expires_ms > now_ms`), by scope.
    pub async fn leases(&self, now_ms: i64) -> Result<Vec<Lease>> {
        let rows = sqlx::query(
            "SELECT scope, holder, expires_ms FROM floe_maintain_leases \
             WHERE expires_ms > $1 ORDER BY scope",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|row| {
                Ok(Lease {
                    scope: row.try_get(0)?,
                    holder: row.try_get(1)?,
                    expires_ms: row.try_get(2)?,
                })
            })
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(|e| self.err(e))
    }

    /// Records a finished run.
    pub async fn record_run(&self, run: &RunRecord) -> Result<()> {
        // Version 7: time-ordered, the tie-breaker of runs that finished in the same ms.
        let run_id = uuid::Uuid::now_v7().to_string();
        sqlx::query(&format!(
            "INSERT INTO floe_maintain_runs (run_id, {RUN_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(run_id)
        .bind(&run.scope)
        .bind(&run.job)
        .bind(&run.holder)
        .bind(run.started_ms)
        .bind(run.finished_ms)
        .bind(i64::from(run.succeeded))
        .bind(run.error.clone())
        .bind(to_sql(run.files_read))
        .bind(to_sql(run.bytes_read))
        .bind(to_sql(run.files_written))
        .bind(to_sql(run.bytes_written))
        .bind(to_sql(run.files_deleted))
        .bind(to_sql(run.bytes_deleted))
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Runs of all tables, most recent (by `finished_ms`) first; `job` filters by job name;
    /// `limit` rows at most.
    pub async fn recent_runs(&self, job: Option<&str>, limit: usize) -> Result<Vec<RunRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let order = "ORDER BY finished_ms DESC, run_id DESC LIMIT";
        let sql = match job {
            Some(_) => {
                format!("SELECT {RUN_COLUMNS} FROM floe_maintain_runs WHERE job = $1 {order} $2")
            }
            None => format!("SELECT {RUN_COLUMNS} FROM floe_maintain_runs {order} $1"),
        };
        let mut query = sqlx::query(&sql);
        if let Some(job) = job {
            query = query.bind(job);
        }
        query = query.bind(limit);
        let rows = query.fetch_all(&self.pool).await.map_err(|e| self.err(e))?;
        rows.iter()
            .map(run_of_row)
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(|e| self.err(e))
    }

    /// Per job name, for one scope: last success, last failure, failures since the last
    /// success (counted from the runs table), the last error.
    pub async fn last_runs(&self, scope: &str) -> Result<HashMap<String, LastRuns>> {
        let mut out: HashMap<String, LastRuns> = HashMap::new();
        let rows = sqlx::query(
            "SELECT job, \
               MAX(CASE WHEN succeeded = 1 THEN finished_ms END), \
               MAX(CASE WHEN succeeded = 0 THEN finished_ms END) \
             FROM floe_maintain_runs WHERE scope = $1 GROUP BY job",
        )
        .bind(scope)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        for row in &rows {
            let job: String = row.try_get(0).map_err(|e| self.err(e))?;
            let last = out.entry(job).or_default();
            last.last_success_ms = row.try_get(1).map_err(|e| self.err(e))?;
            last.last_failure_ms = row.try_get(2).map_err(|e| self.err(e))?;
        }
        // Failures after the job's last success (a failure in the same ms does not count).
        let rows = sqlx::query(
            "SELECT f.job, COUNT(*) FROM floe_maintain_runs f \
             WHERE f.scope = $1 AND f.succeeded = 0 AND NOT EXISTS (\
               SELECT 1 FROM floe_maintain_runs s \
               WHERE s.scope = f.scope AND s.job = f.job AND s.succeeded = 1 \
                 AND s.finished_ms >= f.finished_ms) \
             GROUP BY f.job",
        )
        .bind(scope)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        for row in &rows {
            let job: String = row.try_get(0).map_err(|e| self.err(e))?;
            let count: i64 = row.try_get(1).map_err(|e| self.err(e))?;
            out.entry(job).or_default().consecutive_failures =
                u32::try_from(count).unwrap_or(u32::MAX);
        }
        // The error of each job's last failure.
        let rows = sqlx::query(
            "SELECT f.job, f.error, f.run_id FROM floe_maintain_runs f \
             WHERE f.scope = $1 AND f.succeeded = 0 AND f.finished_ms = (\
               SELECT MAX(l.finished_ms) FROM floe_maintain_runs l \
               WHERE l.scope = f.scope AND l.job = f.job AND l.succeeded = 0) \
             ORDER BY f.run_id",
        )
        .bind(scope)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        // Ordered by run id: the last row of a job (the latest of a same-ms tie) wins.
        for row in &rows {
            let job: String = row.try_get(0).map_err(|e| self.err(e))?;
            let error: Option<String> = row.try_get(1).map_err(|e| self.err(e))?;
            out.entry(job).or_default().last_error = error;
        }
        Ok(out)
    }

    /// Closes the pool: waits for connections in use, closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `now_ms + ttl`, saturating.
fn expiry(now_ms: i64, ttl: Duration) -> i64 {
    now_ms.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// A counter as stored (BIGINT), saturating.
fn to_sql(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A counter as read back (a negative value, written by someone else, reads as 0).
fn from_sql(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn run_of_row(row: &sqlx::any::AnyRow) -> std::result::Result<RunRecord, sqlx::Error> {
    Ok(RunRecord {
        scope: row.try_get(0)?,
        job: row.try_get(1)?,
        holder: row.try_get(2)?,
        started_ms: row.try_get(3)?,
        finished_ms: row.try_get(4)?,
        succeeded: row.try_get::<i64, _>(5)? != 0,
        error: row.try_get(6)?,
        files_read: from_sql(row.try_get(7)?),
        bytes_read: from_sql(row.try_get(8)?),
        files_written: from_sql(row.try_get(9)?),
        bytes_written: from_sql(row.try_get(10)?),
        files_deleted: from_sql(row.try_get(11)?),
        bytes_deleted: from_sql(row.try_get(12)?),
    })
}

pub mod handoffs;
pub mod replicas;
pub mod tasks;
#[cfg(test)]
mod tests;
pub mod wakeups;
