//! What an ingest asks of the table's maintenance, which it does not implement: its caller
//! gives a [`Maintenance`] (`floe ingest` gives `floe::maintain::in_stream::InStream`), so
//! ingest imports no maintenance code and the maintenance may build on ingest.
//!
//! ```text
//!  ingest ── start (--maintain or floe.ingest.maintain) ──> Maintenance::start ──> AfterCommit
//!     ├─ after each commit ──> AfterCommit::after_commit (a maintenance pass now)
//!     ├─ after a commit, when a debt limit is on ──> Maintenance::measure ──> backpressure
//!     ├─ each metrics scrape ──> AfterCommit::metrics (appended to the ingest's exposition)
//!     └─ at the end ──> AfterCommit::stop ──> its summary in the ingest's report
//! ```
//!
//! The ingest decides whether it maintains its table ([`crate::ingest::debt::maintain_enabled`])
//! and where the maintenance keeps its leases ([`Start`]); without a [`Maintenance`], an ingest
//! that should maintain its table fails at the start, and no debt is measured (no
//! backpressure).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::error::Result;
use crate::catalog::Catalog;
use crate::ingest::debt::{Debt, DebtLimits};

/// How the ingest starts its table's maintenance.
#[derive(Debug, Clone)]
pub struct Start {
    /// The lease and run-history store (`--lease-db`, the SQL catalog's database, or a
    /// SQLite file of the ingest).
    pub store: String,
    /// The lease holder, named after the writer id alone: a restarted ingest takes back the
    /// lease of the one it replaces.
    pub holder: String,
    /// Time between passes when no commit asks for one.
    pub interval: Duration,
}

/// The table's maintenance as an ingest uses it; given by the caller
/// ([`crate::ingest::stream::IngestBuilder::with_maintenance`]).
#[async_trait]
pub trait Maintenance: Send + Sync {
    /// Starts maintaining `ident` in this process; the ingest calls the hook it returns after
    /// every commit and stops it at the end.
    async fn start(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        start: Start,
    ) -> Result<Box<dyn AfterCommit>>;

    /// Measures `table`'s compaction debt against `limits` at `now_ms`, for backpressure.
    async fn measure(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        table: &Table,
        limits: &DebtLimits,
        now_ms: i64,
    ) -> Result<Debt>;
}

/// A maintenance running beside the ingest.
#[async_trait]
pub trait AfterCommit: Send + Sync {
    /// Called after each commit of the ingest, with the table as the commit left it.
    fn after_commit(&mut self, table: &Table);

    /// Its metrics, appended to the ingest's exposition on every scrape.
    fn metrics(&self) -> MetricsFn;

    /// Stops it (a running job gets its shutdown grace) and returns what it did, as it
    /// reports it, for the ingest's report (`maintenance`).
    async fn stop(self: Box<Self>) -> Result<serde_json::Value>;
}

/// Renders metrics in the Prometheus text format.
#[derive(Clone)]
pub struct MetricsFn(pub Arc<dyn Fn() -> String + Send + Sync>);

impl fmt::Debug for MetricsFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetricsFn")
    }
}
