//! Stream and maintenance as one: the maintenance `floe ingest` runs in its own process
//! (`--maintain`), given to the ingest as its [`crate::ingest::hook::Maintenance`] ([`InStream`]):
//! the table's maintenance policy run by a [`Maintainer`] of this one table, and the compaction
//! debt the ingest's backpressure reads ([`crate::ingest::debt`]).
//!
//! ```text
//!  ingest loop ── commit ──> Committer (the table's one commit slot in this process)
//!      │  └─ after_commit ──> Maintainer (this table only) ── compact / expire / ... ──┘
//!      └─ debt after each commit (InStream::measure) ──> backpressure
//! ```
//!
//! - **One committer.** Data commits and maintenance commits of the process go through
//!   [`crate::commit::Committer`], which serializes the commits one process makes to a table:
//!   they never conflict with each other, and the writer's positions stay in the data commits
//!   only (a compaction carries none, and the writer finds its positions past it).
//! - **Freshness and file size.** The maintainer runs [`crate::maintain`]'s policy with the
//!   roll-up on (`floe.maintain.compact.roll-up-fan-in`, default [`ROLL_UP_FAN_IN_DEFAULT`]
//!   here): a partition still being written is merged by size tiers as soon as a tier is
//!   full, and compacted to target-size files once idle. Short commit intervals keep data
//!   fresh; the small files they make stay few.
//! - **Backpressure.** After each commit the ingest has [`InStream`] read the table's debt
//!   ([`measure`]) and slows its commits while the debt passes a limit.
//! - **Beside another maintainer.** The in-process maintainer takes the table's lease in the
//!   same store `floe maintain` uses (the SQL catalog's database, or `--lease-db`), so the two
//!   never run a job on the table at once. A commit of anyone else is a conflict the
//!   Committer resolves: the writer's append rebases and retries until the commit timeout; a
//!   compaction that loses is validated again or fails cleanly.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::coordination::Store;
use crate::ingest::debt::{over, Debt, DebtLimits};
use crate::ingest::hook::{AfterCommit, Maintenance, MetricsFn, Start};
use crate::maintain::facts;
use crate::maintain::partitions::activity;
use crate::maintain::service::{LogFn, MaintainOptions, MaintainSummary, Maintainer, Source};
use crate::maintain::state::ServiceState;
use crate::operations::alter::AlterPropertiesBuilder;
use crate::operations::compact::CompactBuilder;
use crate::operations::Operation;
use crate::table::ident_string;
use crate::table::manifests::live_files;

pub use crate::maintain::streaming::{
    MAX_SNAPSHOTS_DEFAULT, METADATA_DEFAULTS, POLICY_DEFAULTS, ROLL_UP_FAN_IN_DEFAULT,
};

/// Sets [`METADATA_DEFAULTS`] on `ident` when it sets neither key (one property commit, said
/// in `log`); returns what was set.
pub async fn bound_metadata(
    catalog: &Catalog,
    ident: &TableIdent,
    log: &LogFn,
) -> Result<Vec<(String, String)>> {
    let table = catalog.load_table(ident).await?;
    let props = table.metadata().properties();
    if METADATA_DEFAULTS
        .iter()
        .any(|(k, _)| props.contains_key(*k))
    {
        return Ok(vec![]);
    }
    AlterPropertiesBuilder::new(catalog, ident.clone())
        .with_properties(METADATA_DEFAULTS.iter().copied())
        .execute()
        .await?;
    let set: Vec<(String, String)> = METADATA_DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    log(&format!(
        "{}: set the streaming metadata defaults {} (set either key on the table to keep your own)",
        ident_string(ident),
        set.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(set)
}

/// Measures `table`'s debt against `limits` at `now_ms` (one read of the live files).
pub async fn measure(
    catalog: &Catalog,
    ident: &TableIdent,
    table: &Table,
    limits: &DebtLimits,
    now_ms: i64,
) -> Result<Debt> {
    let small_below = CompactBuilder::new(catalog, ident.clone())
        .plan_options(table)?
        .min_file_size_bytes;
    let live = live_files(table).await?;
    let parts = activity(table, &live, small_below);
    let worst = parts.iter().max_by_key(|p| p.small_files);
    let f = facts::gather(table);
    let waiting = parts.iter().any(|p| p.small_files >= 2);
    let since = f.last_compaction_ms.or(f.first_uncompacted_ms);
    let mut d = Debt {
        max_small_files: worst.map(|p| p.small_files).unwrap_or(0),
        partition: worst
            .filter(|p| p.small_files > 0)
            .map(|p| p.partition.clone()),
        snapshots_since_compaction: f.commits_since_compaction,
        ms_since_compaction: match (waiting, since) {
            (true, Some(s)) => u64::try_from(now_ms.saturating_sub(s)).unwrap_or(0),
            _ => 0,
        },
        over: vec![],
    };
    d.over = over(&d, limits);
    Ok(d)
}

/// The maintenance service of one table, running inside an ingest.
pub struct InProcess {
    wake: Arc<tokio::sync::Notify>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<MaintainSummary>>,
    state: Arc<ServiceState>,
    store: Arc<Store>,
}

impl InProcess {
    /// Starts maintaining `ident` as `holder`, with leases and run history in the store at
    /// `store_uri`; a pass every `interval` and after every [`InProcess::wake`].
    pub async fn start(
        catalog: &Catalog,
        ident: &TableIdent,
        store_uri: &str,
        holder: String,
        interval: Duration,
        log: LogFn,
    ) -> Result<InProcess> {
        let store = Arc::new(Store::connect(store_uri).await?);
        let opts = MaintainOptions {
            holder: holder.clone(),
            max_concurrent_jobs: 1,
            interval,
            tables: vec![ident_string(ident)],
            shutdown_grace: Duration::from_secs(30),
            policy_defaults: POLICY_DEFAULTS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..MaintainOptions::default()
        };
        let state = ServiceState::new(&holder, chrono::Utc::now().timestamp_millis());
        let wake = Arc::new(tokio::sync::Notify::new());
        let source = Source {
            catalog: catalog.clone(),
            prefix: None,
            only: Some(vec![ident.clone()]),
        };
        let maintainer = Maintainer::new(vec![source], store.clone(), state.clone(), opts)
            .with_log(log)
            .with_wake(wake.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(maintainer.run(async move {
            let _ = stopped.await;
        }));
        Ok(InProcess {
            wake,
            stop: Some(stop),
            task,
            state,
            store,
        })
    }

    /// Asks for a pass now (after a commit).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The service's state (tables, jobs) for metrics.
    pub fn state(&self) -> Arc<ServiceState> {
        self.state.clone()
    }

    /// Stops: a running job gets the shutdown grace to finish, then is abandoned (its
    /// uncommitted outputs are orphans; its lease expires).
    pub async fn stop(mut self) -> Result<MaintainSummary> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let summary = match self.task.await {
            Ok(r) => r?,
            Err(e) => {
                return Err(Error::Task {
                    what: "in-process maintenance",
                    source: e,
                })
            }
        };
        self.store.close().await;
        Ok(summary)
    }
}

#[async_trait]
impl AfterCommit for InProcess {
    fn after_commit(&mut self, _table: &Table) {
        self.wake();
    }

    fn metrics(&self) -> MetricsFn {
        let state = self.state();
        MetricsFn(Arc::new(move || state.render_metrics()))
    }

    async fn stop(self: Box<Self>) -> Result<serde_json::Value> {
        let summary = InProcess::stop(*self).await?;
        Ok(serde_json::to_value(summary).map_err(std::io::Error::from)?)
    }
}

/// The maintenance of `floe ingest --maintain`, given to the ingest
/// ([`crate::ingest::stream::IngestBuilder::with_maintenance`]): starts an [`InProcess`]
/// maintainer of the table when the ingest maintains it, and measures the table's debt for the
/// ingest's backpressure.
#[derive(Clone)]
pub struct InStream {
    log: LogFn,
}

impl Default for InStream {
    fn default() -> Self {
        Self::new()
    }
}

impl InStream {
    /// Logs the maintenance's jobs on stderr, prefixed `[maintain]`.
    pub fn new() -> Self {
        Self {
            log: Arc::new(|line: &str| eprintln!("[maintain] {line}")),
        }
    }

    /// Where the maintenance logs its jobs.
    pub fn with_log(mut self, log: LogFn) -> Self {
        self.log = log;
        self
    }
}

#[async_trait]
impl Maintenance for InStream {
    async fn start(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        start: Start,
    ) -> Result<Box<dyn AfterCommit>> {
        bound_metadata(catalog, ident, &self.log).await?;
        let m = InProcess::start(
            catalog,
            ident,
            &start.store,
            start.holder,
            start.interval,
            self.log.clone(),
        )
        .await?;
        Ok(Box::new(m))
    }

    async fn measure(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        table: &Table,
        limits: &DebtLimits,
        now_ms: i64,
    ) -> Result<Debt> {
        measure(catalog, ident, table, limits, now_ms).await
    }
}
