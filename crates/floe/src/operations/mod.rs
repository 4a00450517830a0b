//! The operation contract: every operation that changes a table is planned, then applied.
//!
//! ```text
//!   XBuilder::new(&catalog, ident).with_*(..)      one Ctx: catalog, table, progress, clock
//!        │
//!        ├─ plan()   reads and decides; writes and deletes nothing. Returns a Planned value:
//!        │           the report `--dry-run` prints (serializable, Costed), the snapshot it was
//!        │           made against, and the work apply needs (kept in memory, never printed).
//!        ├─ apply(plan)   carries that plan out; its commit re-validates against the table as
//!        │                it then is (a concurrent change forces a re-plan or a refusal, never
//!        │                a blind write).
//!        └─ execute()     plan() then apply(): what the CLI runs without --dry-run.
//! ```
//!
//! A scheduler (`floe maintain`) keeps the plan it scored and applies it: each job is planned
//! once. The shape follows delta-rs's operations (`crates/core/src/operations/mod.rs` for the
//! builder trait, `vacuum.rs` for "plan, then execute that plan"), with the plan a value so
//! that it can be printed, weighed and kept.
//!
//! Read-only commands (`diagnose`, metadata tables, `sql`) follow the smaller [`Query`]
//! contract of `query.rs`: built the same way, then `query()`.

mod query;

pub use query::Query;

pub mod alter;
pub mod append;
pub mod change;
pub mod clean;
pub mod compact;
pub mod diagnose;
pub mod expire;
pub mod inspect;
pub mod refs;
pub mod sql;

use std::future::Future;
use std::sync::Arc;

use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::base::cost::{Cost, Costed, Progress, ProgressFn};
use crate::base::error::Result;
use crate::catalog::Catalog;

/// The clock an operation reads "now" from, in epoch milliseconds (tests set a fixed one).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock.
pub fn wall_clock() -> Clock {
    Arc::new(|| chrono::Utc::now().timestamp_millis())
}

/// What every operation is given: its catalog, its table, where progress goes and its clock.
#[derive(Clone)]
pub struct Ctx {
    pub catalog: Catalog,
    pub ident: TableIdent,
    pub progress: Option<ProgressFn>,
    pub clock: Clock,
}

impl Ctx {
    /// The operation on `ident`, without progress, on the wall clock.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Ctx {
            catalog: catalog.clone(),
            ident,
            progress: None,
            clock: wall_clock(),
        }
    }

    /// "Now", in epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    /// Reports `p` to the progress receiver, if any.
    pub fn report(&self, p: &Progress) {
        if let Some(f) = &self.progress {
            f(p);
        }
    }

    /// Loads the table.
    pub async fn load(&self) -> Result<Table> {
        self.catalog.load_table(&self.ident).await
    }

    /// Loads the table's head, for an append ([`Catalog::load_table_head`]).
    pub async fn load_head(&self) -> Result<Table> {
        self.catalog.load_table_head(&self.ident).await
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("ident", &self.ident).finish()
    }
}

/// A plan as a value: `report` is what `--dry-run` prints (the operation's metrics type, in
/// its dry-run form), `snapshot_id` the snapshot it was made against, `work` what `apply`
/// needs beyond the report (scan tasks, listings, read manifests), kept in memory only.
#[derive(Debug, Clone)]
pub struct Planned<R, W = ()> {
    pub report: R,
    /// The table's current snapshot when planned (`None`: the table had none).
    pub snapshot_id: Option<i64>,
    pub(crate) work: W,
}

impl<R, W> Planned<R, W> {
    pub(crate) fn new(report: R, snapshot_id: Option<i64>, work: W) -> Self {
        Planned {
            report,
            snapshot_id,
            work,
        }
    }
}

impl<R: Costed, W> Costed for Planned<R, W> {
    fn cost(&self) -> Cost {
        self.report.cost()
    }
}

/// Serializes as the report, so `--dry-run --json` prints what it always printed.
impl<R: Serialize, W> Serialize for Planned<R, W> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.report.serialize(s)
    }
}

/// The contract of an operation that changes a table (see the module docs).
pub trait Operation: Sized + Send {
    /// What `plan` decides: printable, costed, and enough for `apply`.
    type Plan: Costed + Serialize + Send;
    /// What `apply` did.
    type Metrics: Costed + Serialize + Send;

    /// Reads the table and decides, changing nothing.
    fn plan(&self) -> impl Future<Output = Result<Self::Plan>> + Send;

    /// Carries out `plan`; the commit re-validates it against the table as it then is.
    fn apply(self, plan: Self::Plan) -> impl Future<Output = Result<Self::Metrics>> + Send;

    /// `plan()`, then `apply()` of that plan.
    fn execute(self) -> impl Future<Output = Result<Self::Metrics>> + Send
    where
        Self: Sync,
    {
        async move {
            let plan = self.plan().await?;
            self.apply(plan).await
        }
    }

    /// What the CLI runs: with `dry_run`, the plan's report (nothing applied), else
    /// `execute()`.
    fn run(self, dry_run: bool) -> impl Future<Output = Result<Self::Metrics>> + Send
    where
        Self: Sync,
        Self::Plan: IntoReport<Self::Metrics>,
    {
        async move {
            let plan = self.plan().await?;
            if dry_run {
                return Ok(plan.into_report());
            }
            self.apply(plan).await
        }
    }
}

/// A plan's printable report.
pub trait IntoReport<R> {
    fn into_report(self) -> R;
}

impl<R, W> IntoReport<R> for Planned<R, W> {
    fn into_report(self) -> R {
        self.report
    }
}

/// The current snapshot id of `table`, the one a plan is made against.
pub(crate) fn snapshot_of(table: &Table) -> Option<i64> {
    table.metadata().current_snapshot_id()
}
