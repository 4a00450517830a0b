//! Stream and maintenance as one: `floe ingest --maintain` runs the table's maintenance policy
//! inside the ingest process, and every ingest measures the table's compaction debt and slows
//! its commits when the debt passes its limits (backpressure).
//!
//! ```text
//!  ingest loop ── commit ──> Committer (the table's one commit slot in this process)
//!      │  └─ wake ──> Maintainer (this table only) ── compact / expire / ... ──┘
//!      └─ debt after each commit ──> commit interval x2 while over a limit, /2 once paid
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
//! - **Backpressure.** After each commit the ingest reads the table's debt: the most small
//!   files in one partition, the snapshots since the last compaction, and how long small
//!   files have waited since the last compaction. While one is over its limit
//!   (`floe.ingest.max-*`), the commit interval doubles (up to `floe.ingest.max-commit-interval`);
//!   once all are under, it halves back. Buffered rows spill to disk past the write buffer, so
//!   memory stays within it.
//! - **Beside another maintainer.** The in-process maintainer takes the table's lease in the
//!   same store `floe maintain` uses (the SQL catalog's database, or `--lease-db`), so the two
//!   never run a job on the table at once. A commit of anyone else is a conflict the
//!   Committer resolves: the writer's append rebases and retries until the commit timeout; a
//!   compaction that loses is validated again or fails cleanly.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::compact::CompactBuilder;
use crate::coordination::Store;
use crate::error::{Error, Result};
use crate::maintain::facts;
use crate::maintain::partitions::activity;
use crate::maintain::policy::{duration, ROLL_UP_FAN_IN};
use crate::maintain::service::{LogFn, MaintainOptions, MaintainSummary, Maintainer, Source};
use crate::maintain::state::ServiceState;
use crate::properties::{bool_prop, u64_prop};
use crate::table::ident_string;
use crate::table::manifests::live_files;

/// Table property: `true` runs the table's maintenance in every `floe ingest` into it
/// (as `--maintain` does).
pub const INGEST_MAINTAIN: &str = "floe.ingest.maintain";
/// The roll-up fan-in `floe ingest --maintain` uses unless the table sets
/// `floe.maintain.compact.roll-up-fan-in`.
pub const ROLL_UP_FAN_IN_DEFAULT: &str = "4";
/// The maintenance policy of an ingest that maintains its table, where the table sets
/// nothing: the roll-up on, and the snapshot retention of a streaming table (Paimon's
/// `snapshot.time-retained` 1 h and `snapshot.num-retained.min` 10) rather than Iceberg's
/// five days, which at a commit every few seconds is tens of thousands of snapshots in every
/// `metadata.json`. The writer's newest snapshot (its recovery point) is always kept.
pub const POLICY_DEFAULTS: &[(&str, &str)] = &[
    (ROLL_UP_FAN_IN, ROLL_UP_FAN_IN_DEFAULT),
    (
        crate::properties::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS,
        "3600000",
    ),
    (
        crate::properties::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP,
        "10",
    ),
];

/// Table property: small files in one partition above which the writer slows down.
pub const MAX_SMALL_FILES: &str = "floe.ingest.max-small-files-per-partition";
/// Table property: snapshots since the last compaction above which the writer slows down.
pub const MAX_SNAPSHOTS: &str = "floe.ingest.max-snapshots-since-compaction";
/// Table property: how long small files may wait since the last compaction before the writer
/// slows down.
pub const MAX_TIME: &str = "floe.ingest.max-time-since-compaction";
/// Table property: the longest commit interval backpressure stretches to.
pub const MAX_COMMIT_INTERVAL: &str = "floe.ingest.max-commit-interval";

/// Every `floe.ingest.*` backpressure property with its default with `--maintain` (without it,
/// unset limits are off: nothing pays the debt but another maintainer).
pub const PROPERTIES: &[(&str, &str)] = &[
    (INGEST_MAINTAIN, "false"),
    (MAX_SMALL_FILES, "200"),
    (MAX_SNAPSHOTS, "1000"),
    (MAX_TIME, "1h"),
    (MAX_COMMIT_INTERVAL, "10x --commit-interval, at least 60s"),
];

/// Whether an ingest into a table with `props` maintains it: `--maintain` when given, else
/// `floe.ingest.maintain`.
pub fn maintain_enabled(flag: Option<bool>, props: &HashMap<String, String>) -> Result<bool> {
    match flag {
        Some(b) => Ok(b),
        None => bool_prop(props, INGEST_MAINTAIN, false),
    }
}

/// The debt limits; a limit of 0 is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DebtLimits {
    pub max_small_files_per_partition: u64,
    pub max_snapshots_since_compaction: u64,
    pub max_ms_since_compaction: u64,
    pub max_commit_interval_ms: u64,
}

impl DebtLimits {
    /// The limits `props` set for an ingest committing every `interval`; unset limits take
    /// the defaults of [`PROPERTIES`] when the ingest maintains the table, else are off.
    pub fn from_properties(
        props: &HashMap<String, String>,
        interval: Duration,
        maintaining: bool,
    ) -> Result<DebtLimits> {
        let on = |d: u64| if maintaining { d } else { 0 };
        let interval_ms = interval.as_millis() as u64;
        Ok(DebtLimits {
            max_small_files_per_partition: u64_prop(props, MAX_SMALL_FILES, on(200))?,
            max_snapshots_since_compaction: u64_prop(props, MAX_SNAPSHOTS, on(1000))?,
            max_ms_since_compaction: duration(props, MAX_TIME, on(3_600_000), 0)?,
            max_commit_interval_ms: duration(
                props,
                MAX_COMMIT_INTERVAL,
                (interval_ms * 10).max(60_000),
                0,
            )?
            .max(interval_ms),
        })
    }

    /// Any limit on.
    pub fn any(&self) -> bool {
        self.max_small_files_per_partition > 0
            || self.max_snapshots_since_compaction > 0
            || self.max_ms_since_compaction > 0
    }
}

/// A table's compaction debt, as the writer measures it after a commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Debt {
    /// The most small data files in one partition, and that partition.
    pub max_small_files: u64,
    pub partition: Option<String>,
    /// Snapshots (commits) since the last compaction on the current branch.
    pub snapshots_since_compaction: u64,
    /// How long small files have waited since the last compaction (0 when no partition has
    /// two small files: nothing to compact is no debt).
    pub ms_since_compaction: u64,
    /// The limits passed, in words (`small files 230 > 200`); empty when none.
    pub over: Vec<String>,
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

/// The limits `d` passes, in words.
pub fn over(d: &Debt, l: &DebtLimits) -> Vec<String> {
    let mut out = vec![];
    if l.max_small_files_per_partition > 0 && d.max_small_files > l.max_small_files_per_partition {
        out.push(format!(
            "{} small files in {} > {MAX_SMALL_FILES} {}",
            d.max_small_files,
            d.partition.as_deref().unwrap_or("?"),
            l.max_small_files_per_partition
        ));
    }
    if l.max_snapshots_since_compaction > 0
        && d.snapshots_since_compaction > l.max_snapshots_since_compaction
    {
        out.push(format!(
            "{} snapshots since the last compaction > {MAX_SNAPSHOTS} {}",
            d.snapshots_since_compaction, l.max_snapshots_since_compaction
        ));
    }
    if l.max_ms_since_compaction > 0 && d.ms_since_compaction > l.max_ms_since_compaction {
        out.push(format!(
            "{} s since the last compaction > {MAX_TIME} {} s",
            d.ms_since_compaction / 1000,
            l.max_ms_since_compaction / 1000
        ));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ingest_property_is_known_to_the_property_rules() {
        for (key, _) in PROPERTIES {
            assert!(
                crate::properties::INGEST_PROPERTIES.contains(key),
                "{key} is refused by `floe table set-properties`"
            );
        }
        assert!(crate::properties::validate(MAX_TIME, "10m").is_ok());
        assert!(crate::properties::validate(MAX_TIME, "soon").is_err());
    }

    #[test]
    fn limits_default_on_only_when_maintaining_and_name_what_is_over() {
        let none = HashMap::new();
        let l = DebtLimits::from_properties(&none, Duration::from_secs(5), false).unwrap();
        assert!(!l.any());
        assert_eq!(l.max_commit_interval_ms, 60_000);
        let l = DebtLimits::from_properties(&none, Duration::from_secs(5), true).unwrap();
        assert_eq!(l.max_small_files_per_partition, 200);
        let props = HashMap::from([
            (MAX_SMALL_FILES.to_string(), "10".to_string()),
            (MAX_TIME.to_string(), "30s".to_string()),
            (MAX_COMMIT_INTERVAL.to_string(), "2m".to_string()),
        ]);
        let l = DebtLimits::from_properties(&props, Duration::from_secs(5), false).unwrap();
        assert_eq!(
            (
                l.max_small_files_per_partition,
                l.max_snapshots_since_compaction,
                l.max_ms_since_compaction,
                l.max_commit_interval_ms
            ),
            (10, 0, 30_000, 120_000)
        );
        let d = Debt {
            max_small_files: 11,
            partition: Some("h=1".into()),
            snapshots_since_compaction: 5000,
            ms_since_compaction: 31_000,
            over: vec![],
        };
        let o = over(&d, &l);
        assert_eq!(o.len(), 2, "{o:?}");
        assert!(o[0].contains("11 small files in h=1"), "{o:?}");
        assert!(o[1].contains("31 s since the last compaction"), "{o:?}");
        let bad = HashMap::from([(MAX_TIME.to_string(), "soon".to_string())]);
        let e = DebtLimits::from_properties(&bad, Duration::from_secs(5), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains(MAX_TIME) && e.contains("soon"), "{e}");
    }
}
