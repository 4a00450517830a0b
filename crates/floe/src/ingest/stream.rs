//! `floe ingest`: a stream into a table, with few large files and exactly-once commits.
//!
//! ```text
//!  source ──> micro-batch ──> decode ──┬─> bad: dead-letter sink (payload, position, reason)
//!  (kafka,      (positions)            └─> router (partition) ──> writer buffers (memory budget,
//!   files,                                                         spill to Arrow IPC)
//!   stdin)                        trigger (interval | bytes | records | end | signal)
//!                                   ──> write files per partition, rolled at the target size
//!                                   ──> one append commit with floe.writer-id + positions
//! ```
//!
//! Exactly-once: the positions after the last consumed record are stored in the snapshot
//! summary of the same atomic commit as the data (`floe.writer-id`, `floe.position.<stream>`).
//! On start the newest snapshot of this writer id on `main`'s history (walking past other
//! writers' and compaction snapshots) gives the positions to resume from. Every commit attempt
//! first checks that the newest snapshot of the writer id still holds the positions this
//! process last committed: a second process writing under the same id is refused instead of
//! duplicating data.

mod batch;
mod flush;
mod setup;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use iceberg::TableIdent;

use crate::base::cost::{Amount, Phase, Progress, ProgressFn};
use crate::base::error::Result;
use crate::catalog::{ident_string, Catalog};
use crate::ingest::change::IngestMode;
use crate::ingest::dead_letter::DeadLetterSink;
use crate::ingest::debt::{maintain_enabled, DebtLimits};
use crate::ingest::group::{Coordinated, Group};
use crate::ingest::hook::Maintenance;
use crate::ingest::metrics::Metrics;
use crate::ingest::outage::Outage;
use crate::ingest::source::{committed_lag, Rebalance, Source};
use crate::ingest::trigger::{Trigger, Window};
use crate::ingest::upsert::ChangeState;
use batch::Writers;
use flush::{land, After, InFlight};

pub use crate::ingest::options::{Distribution, IngestOptions, POSITION_PREFIX, SOURCE_KEY};

pub use crate::ingest::report::{
    peak_rss_bytes, CommitReport, IngestMetrics, IngestPlan, SourceStatus,
};
pub use crate::table::exactly_once::writer_positions;

type OnCommit = Box<dyn Fn(&CommitReport) + Send + Sync>;
type OnCoordinate = Box<dyn Fn(&Coordinated) + Send + Sync>;
type OnSourceStatus = Box<dyn Fn(&SourceStatus) + Send + Sync>;

/// Builds and runs an ingest.
pub struct IngestBuilder {
    catalog: Catalog,
    ident: TableIdent,
    source: Box<dyn Source>,
    dead_letter: Option<DeadLetterSink>,
    options: IngestOptions,
    metrics: Arc<Metrics>,
    on_commit: Option<OnCommit>,
    on_coordinate: Option<OnCoordinate>,
    on_source_status: Option<OnSourceStatus>,
    progress: Option<ProgressFn>,
    /// The table's maintenance (`--maintain`) and the debt measure of backpressure.
    maintenance: Option<Arc<dyn Maintenance>>,
    group: Option<Group>,
    /// `--mode upsert|cdc`: the current window's changes by key.
    changes: Option<ChangeState>,
    shutdown: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
}

impl IngestBuilder {
    /// An ingest of `source` into `ident`.
    pub fn new(
        catalog: &Catalog,
        ident: TableIdent,
        source: Box<dyn Source>,
        options: IngestOptions,
    ) -> Self {
        Self {
            catalog: catalog.clone(),
            ident,
            source,
            dead_letter: None,
            options,
            metrics: Metrics::new(),
            on_commit: None,
            on_coordinate: None,
            on_source_status: None,
            progress: None,
            maintenance: None,
            group: None,
            changes: None,
            shutdown: None,
        }
    }

    /// Where rejected records go (without one they are logged and counted).
    pub fn with_dead_letter(mut self, sink: DeadLetterSink) -> Self {
        self.dead_letter = Some(sink);
        self
    }

    /// Shares `metrics` (served by [`crate::ingest::metrics::serve`]).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Receives progress events: the commit phase, one step per commit, with the rows, files
    /// and bytes committed so far (no total: a stream has no end known ahead).
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Called after each commit with its full report (positions, lag, timings): the line a
    /// long-running ingest logs.
    pub fn on_commit(mut self, f: impl Fn(&CommitReport) + Send + Sync + 'static) -> Self {
        self.on_commit = Some(Box::new(f));
        self
    }

    /// The table's maintenance: run in this process when the ingest maintains its table
    /// (`--maintain` or `floe.ingest.maintain`), and the measure of the table's compaction
    /// debt for backpressure (`floe ingest` gives `floe::maintain::in_stream::InStream`).
    /// Without one, an ingest that should maintain its table fails at the start, and no
    /// debt is measured.
    pub fn with_maintenance(mut self, m: impl Maintenance + 'static) -> Self {
        self.maintenance = Some(Arc::new(m));
        self
    }

    /// Called after each commit this worker made as its group's coordinator (`--group`).
    pub fn on_coordinate(mut self, f: impl Fn(&Coordinated) + Send + Sync + 'static) -> Self {
        self.on_coordinate = Some(Box::new(f));
        self
    }

    /// Called while the source does not answer (every 5 s), when it answers again, and when
    /// `--source-timeout` gives up (default: the line on stderr, prefixed `[ingest]`).
    pub fn on_source_status(mut self, f: impl Fn(&SourceStatus) + Send + Sync + 'static) -> Self {
        self.on_source_status = Some(Box::new(f));
        self
    }

    fn report_source(&self, status: &SourceStatus) {
        match &self.on_source_status {
            Some(f) => f(status),
            None => eprintln!("[ingest] {}", status.line()),
        }
    }

    /// When `signal` completes, buffered data is committed and the ingest stops.
    pub fn with_shutdown(
        mut self,
        signal: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.shutdown = Some(Box::pin(signal));
        self
    }

    /// Runs until the source ends, the idle timeout, or the shutdown signal.
    pub async fn execute(mut self) -> Result<IngestMetrics> {
        let started = Instant::now();
        self.options.validate()?;
        let name = ident_string(&self.ident);
        let table = self.catalog.load_table(&self.ident).await?;
        let (budget, distribution) = self.settings(&table).map_err(|e| e.for_table(&name))?;
        if self.options.changes.mode != IngestMode::Append {
            self.changes = Some(ChangeState::new(&table, &self.options.changes, budget)?);
        }
        let n = self.options.write_parallelism.max(1);
        let spill_root = tempfile::Builder::new().prefix("floe-spill-").tempdir()?;
        let mut writers = Writers::new(&table, budget, distribution, n, spill_root.path())?;
        let props = table.metadata().properties();
        let maintaining =
            maintain_enabled(self.options.maintain, props).map_err(|e| e.for_table(&name))?;
        let limits = DebtLimits::from_properties(props, self.options.commit_interval, maintaining)
            .map_err(|e| e.for_table(&name))?;
        let mut outage = Outage::new(self.source_timeout(&table)?);
        let resumed = self.resume(&table).await?;
        let mut maintenance = match maintaining {
            true => Some(self.start_maintenance(spill_root.path()).await?),
            false => None,
        };
        self.metrics.effective_commit_interval_ms.store(
            self.options.commit_interval.as_millis() as u64,
            Ordering::Relaxed,
        );
        // A worker of a group whose source has a group protocol of its own (Kafka's consumer
        // group) lets it assign the streams; each assignment resolves the group's chain anew.
        // Such a worker is not idle before the group first assigned it a stream: its
        // `--stop-when-idle` clock starts at the first assignment.
        let mut assigned_once = true;
        if let Some(g) = &self.group {
            let resolver = g.resolver(&self.catalog, &self.ident);
            if self.source.assign_by_group(g.name(), resolver) {
                assigned_once = false;
                tracing::info!(table = %name, group = %g.name(), "streams assigned by the source's consumer group; waiting for the first assignment");
            }
        }
        let connecting = self.source.uri();
        tracing::info!(table = %name, "connecting to {connecting}");
        self.metrics.connecting(&connecting);
        self.source.start(&resumed).await?;
        let uri = self.source.uri();
        self.metrics.configured_commit_interval_ms.store(
            self.options.commit_interval.as_millis() as u64,
            Ordering::Relaxed,
        );
        self.metrics.started(&name, &uri, &resumed);
        let mut committed = resumed.clone();
        let mut pending = resumed.clone();
        let mut shutdown = self
            .shutdown
            .take()
            .unwrap_or_else(|| Box::pin(std::future::pending()));
        let mut summary = IngestMetrics::start(&name, &self.options.writer_id, &uri, resumed);
        let mut progress = Progress::start(Phase::Commit, Amount::default());
        if let Some(f) = &self.progress {
            f(&progress);
        }
        let mut since = Window::default();
        let mut trigger = Trigger::new(&self.options, Instant::now());
        // Streams taken away from this worker: answered once what was read is handed off.
        let mut revoked: Vec<tokio::sync::oneshot::Sender<()>> = Vec::new();
        let lander = self.lander(&uri);
        // The window landing while the next one is read (at most one: see `InFlight`).
        let mut inflight: Option<InFlight> = None;
        macro_rules! after {
            () => {
                After {
                    name: &name,
                    maintenance: maintenance.as_mut(),
                    limits: &limits,
                    trigger: &mut trigger,
                    summary: &mut summary,
                    progress: &mut progress,
                }
            };
        }
        let run: Result<()> = async {
            loop {
                let (wait, max) = (trigger.wait(Instant::now()), trigger.max_read(&since));
                let got = tokio::select! {
                    biased;
                    _ = &mut shutdown => None,
                    got = self.source.next(max, wait) => Some(got?),
                };
                let mut stop = match got {
                    None => Some("signal"),
                    Some(None) => Some("end of input"),
                    Some(Some(records)) if records.is_empty() => None,
                    Some(Some(records)) => {
                        trigger.record_arrived(Instant::now());
                        let (w, p, s) = (&mut writers, &mut pending, &mut since);
                        self.accept(&records, w, p, s, &mut summary, &uri).await?;
                        None
                    }
                };
                // A window that landed in the background is reported as soon as it did (and a
                // failed one stops the ingest now, not at the next window's end).
                if inflight.as_ref().is_some_and(|f| f.is_finished()) {
                    let f = inflight.take().expect("in flight");
                    let (c, w) = (&mut committed, &mut writers);
                    self.settle(f.outcome().await, c, w, after!()).await?;
                }
                while let Some(change) = self.source.rebalance() {
                    match change {
                        Rebalance::Assigned(streams) => {
                            if !assigned_once {
                                assigned_once = true;
                                trigger.record_arrived(Instant::now());
                            }
                            for (s, p) in streams {
                                tracing::info!(table = %name, stream = %s, position = ?p, "stream assigned to this worker");
                                match p {
                                    Some(p) => {
                                        committed.insert(s.clone(), p);
                                        pending.insert(s, p);
                                    }
                                    None => {
                                        committed.remove(&s);
                                        pending.remove(&s);
                                    }
                                }
                            }
                        }
                        Rebalance::Revoked { streams, done } => {
                            tracing::info!(table = %name, streams = ?streams, "streams taken from this worker: handing off what was read");
                            revoked.push(done);
                        }
                    }
                }
                let lag = self.source.lag();
                self.metrics
                    .set_lag_committed(committed_lag(&lag, &committed));
                self.metrics.set_lag(lag);
                let seen = outage.observe(self.source.unreachable(), Instant::now());
                self.metrics.set_source_unreachable(
                    seen.down
                        .map(|d| chrono::Utc::now().timestamp_millis() - d.as_millis() as i64),
                );
                if let Some(status) = &seen.status {
                    self.report_source(status);
                }
                if seen.give_up {
                    // Commits what was read, then stops with the error below.
                    stop.get_or_insert("source unreachable");
                }
                let now = Instant::now();
                let idle = assigned_once && trigger.idle(now);
                let full = self.changes.as_ref().is_some_and(|c| c.full());
                if trigger.due(now, &since, full) || stop.is_some() || idle || !revoked.is_empty() {
                    let window = self.changes.as_ref().is_some_and(|c| c.has_changes());
                    let taking = window || !writers.is_empty();
                    // The window lands in the background while the next one is read, unless the
                    // loop stops or waits for it: a stop, a hand-off of revoked streams, a group
                    // worker's hand-off (which needs the group).
                    let wait = stop.is_some() || idle || !revoked.is_empty();
                    // Windows land in their order: the one before lands first (and before the
                    // loop stops or answers a revocation, whether or not a window follows).
                    if taking || wait {
                        if let Some(f) = inflight.take() {
                            let (c, w) = (&mut committed, &mut writers);
                            self.settle(f.outcome().await, c, w, after!()).await?;
                        }
                    }
                    if taking {
                        let seq = summary.commits + 1;
                        let positions = (&pending, &committed);
                        let taken = self.take_window(&mut writers, positions, &since, seq).await?;
                        let done = match &self.group {
                            Some(g) => Some(land(&lander, taken, Some(g)).await),
                            None => {
                                let f = InFlight::spawn(lander.clone(), taken);
                                match wait {
                                    true => Some(f.outcome().await),
                                    false => {
                                        inflight = Some(f);
                                        None
                                    }
                                }
                            }
                        };
                        if let Some(done) = done {
                            let (c, w) = (&mut committed, &mut writers);
                            self.settle(done, c, w, after!()).await?;
                        }
                    }
                    // The coordinator's turn (whichever worker of the group holds its lease),
                    // also when this worker had nothing to hand off.
                    if let Some(g) = &self.group {
                        match g.coordinate(&self.catalog, &self.ident, &uri).await {
                            Ok(Some(c)) if c.snapshot_id != 0 || !c.refused.is_empty() => {
                                if let Some(f) = &self.on_coordinate {
                                    f(&c);
                                }
                            }
                            Ok(_) => {}
                            // Another coordinator, an unreachable store: the hand-offs wait.
                            Err(e) => {
                                tracing::warn!(table = %name, "coordinating the group: {e}");
                                self.metrics.error(&format!("coordinating the group: {e}"));
                            }
                        }
                    }
                    since = Window::default();
                    trigger.window_ended(Instant::now());
                    for done in revoked.drain(..) {
                        let _ = done.send(());
                    }
                }
                if let Some(why) = stop.or(idle.then_some("idle")) {
                    summary.stopped_by = why.to_string();
                    break Ok(());
                }
            }
        }
        .await;
        // A window still landing when the loop failed lands (or fails) before the loop's error
        // is returned: the process never leaves a commit running behind it. (A loop that
        // stopped landed every window.)
        if let Some(f) = inflight.take() {
            let (c, w) = (&mut committed, &mut writers);
            let _ = self.settle(f.outcome().await, c, w, after!()).await;
        }
        run?;
        self.metrics.stopped();
        if let Some(sink) = &mut self.dead_letter {
            sink.sync().await?;
        }
        if let Some(m) = maintenance {
            summary.maintenance = Some(m.stop().await?);
        }
        if let Some(g) = self.group.take() {
            let done = g.finish(&self.catalog, &self.ident, &uri).await;
            g.leave().await;
            if let (Some(c), Some(f)) = (done?, &self.on_coordinate) {
                f(&c);
            }
        }
        self.source.finish().await;
        if let Some(e) = outage.error(&uri, &committed, Instant::now()) {
            return Err(e);
        }
        summary.positions = committed;
        summary.peak_rss_bytes = peak_rss_bytes();
        summary.duration_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
    }
}
