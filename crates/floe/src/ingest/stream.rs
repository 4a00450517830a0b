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

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::catalog::{ident_string, Catalog};
use crate::commit::{Committer, SnapshotUpdate};
use crate::error::{Error, Result};
use crate::ingest::buffer::{write_parts, PartitionBuffers, PartitionRouter, RowsToWrite};
use crate::ingest::change::IngestMode;
use crate::ingest::dead_letter::{DeadLetter, DeadLetterSink};
use crate::ingest::decode::decode_records;
use crate::ingest::group::{Coordinated, Group};
use crate::ingest::maintain::{maintain_enabled, measure, next_interval, DebtLimits, InProcess};
use crate::ingest::metrics::Metrics;
use crate::ingest::range::RangeDistributor;
use crate::ingest::source::{committed_lag, Positions, Source, Unreachable};
use crate::ingest::upsert::{last_changes, ChangeState};
use crate::maintain::policy::duration;
use crate::maintain::service::LogFn;
use crate::operation::{Amount, Phase, Progress, ProgressFn};
use crate::properties::u64_prop;
use crate::storage::delete::delete_quietly_in;
use crate::table::watermarks::FLOE_WRITER_ID;
use crate::write::staged::{commit_append, Staged};

pub use crate::ingest::options::{
    Distribution, IngestOptions, POSITION_PREFIX, SOURCE_KEY, SOURCE_TIMEOUT, WRITE_BUFFER_SIZE,
    WRITE_BUFFER_SIZE_DEFAULT, WRITE_DISTRIBUTION_MODE,
};

pub use crate::ingest::report::{
    peak_rss_bytes, CommitReport, IngestMetrics, IngestPlan, SourceStatus,
};

/// How often the wait for an unreachable source is reported.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// The positions in the newest snapshot of `writer_id` on `main`'s history, if any.
///
/// The walk follows parent ids from the current snapshot. Expiry may have removed snapshots
/// between the current one and the writer's (it keeps the writer's newest snapshot, its
/// watermark, but not what lies between): where the chain breaks, the newest snapshot of the
/// writer older than the break (by sequence number) is the one it would have reached.
pub fn writer_positions(table: &Table, writer_id: &str) -> Option<(i64, Positions)> {
    let md = table.metadata();
    let of_writer = |s: &iceberg::spec::Snapshot| {
        s.summary()
            .additional_properties
            .get(FLOE_WRITER_ID)
            .map(String::as_str)
            == Some(writer_id)
    };
    let positions = |s: &iceberg::spec::Snapshot| -> (i64, Positions) {
        let p = s
            .summary()
            .additional_properties
            .iter()
            .filter_map(|(k, v)| {
                let stream = k.strip_prefix(POSITION_PREFIX)?;
                Some((stream.to_string(), v.parse::<i64>().ok()?))
            })
            .collect();
        (s.snapshot_id(), p)
    };
    let mut cur = md.current_snapshot().cloned();
    while let Some(s) = cur {
        if of_writer(&s) {
            return Some(positions(&s));
        }
        match s.parent_snapshot_id() {
            None => return None,
            Some(p) => match md.snapshot_by_id(p) {
                Some(parent) => cur = Some(parent.clone()),
                None => {
                    // The chain breaks at an expired snapshot.
                    let below = s.sequence_number();
                    return md
                        .snapshots()
                        .filter(|o| o.sequence_number() < below && of_writer(o))
                        .max_by_key(|o| (o.sequence_number(), o.timestamp_ms()))
                        .map(|o| positions(o));
                }
            },
        }
    }
    None
}

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
    maintenance_log: Option<LogFn>,
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
            maintenance_log: None,
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

    /// Where the in-process maintenance (`--maintain`) logs its jobs (default: stderr,
    /// prefixed `[maintain]`).
    pub fn with_maintenance_log(mut self, log: LogFn) -> Self {
        self.maintenance_log = Some(log);
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

    /// What [`IngestBuilder::execute`] would do, changing nothing and reading no record: the
    /// settings in effect (options, then table properties, then defaults) and the positions
    /// it would resume from. A stream has no cost known ahead, so the plan has none.
    pub async fn plan(&self) -> Result<IngestPlan> {
        self.options.validate()?;
        let table = self.catalog.load_table(&self.ident).await?;
        let (write_buffer_size, distribution) = self.settings(&table)?;
        let resume_from = writer_positions(&table, &self.options.writer_id);
        let props = table.metadata().properties();
        let maintain = maintain_enabled(self.options.maintain, props)?;
        let debt_limits =
            DebtLimits::from_properties(props, self.options.commit_interval, maintain)?;
        Ok(IngestPlan {
            table: ident_string(&self.ident),
            writer_id: self.options.writer_id.clone(),
            source: self.source.uri(),
            resumes_after_snapshot: resume_from.as_ref().map(|(id, _)| *id),
            resume_from: resume_from.map(|(_, p)| p).unwrap_or_default(),
            write_buffer_size,
            distribution,
            write_parallelism: self.options.write_parallelism,
            commit_interval_ms: self.options.commit_interval.as_millis() as u64,
            commit_bytes: self.options.commit_bytes,
            commit_records: self.options.commit_records,
            maintain,
            debt_limits,
        })
    }

    /// The write buffer budget and distribution in effect for `table`, and a check of the
    /// writer id.
    fn settings(&self, table: &Table) -> Result<(u64, Distribution)> {
        let props = table.metadata().properties();
        let budget = match self.options.write_buffer_size {
            Some(b) => b,
            None => u64_prop(props, WRITE_BUFFER_SIZE, WRITE_BUFFER_SIZE_DEFAULT)
                .map_err(|e| e.for_table(&ident_string(table.identifier())))?,
        };
        let distribution = match self.options.distribution {
            Some(d) => d,
            None => match props.get(WRITE_DISTRIBUTION_MODE) {
                Some(v) => v.parse()?,
                None => Distribution::None,
            },
        };
        if self.options.writer_id.trim().is_empty() {
            return Err(Error::invalid_option(
                "--writer-id",
                "",
                "must not be empty",
            ));
        }
        Ok((budget, distribution))
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
        let mut writers = (0..n)
            .map(|i| {
                PartitionBuffers::new(
                    (budget as usize / n).max(1),
                    spill_root.path().join(format!("w{i}")),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        // Records are decoded in the table's schema; after a commit that finds another schema
        // (`evolve-schema` meanwhile), the next records are read in that one.
        let mut router = PartitionRouter::new(&table)?;
        let mut arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
            table.metadata().current_schema(),
        )?);
        let mut decoding_schema = table.metadata().current_schema_id();

        let props = table.metadata().properties();
        let maintaining =
            maintain_enabled(self.options.maintain, props).map_err(|e| e.for_table(&name))?;
        let base_interval = self.options.commit_interval;
        let limits = DebtLimits::from_properties(props, base_interval, maintaining)
            .map_err(|e| e.for_table(&name))?;
        let mut interval = base_interval;
        let source_timeout = match self.options.source_timeout {
            Some(d) => Some(d),
            None => match duration(props, SOURCE_TIMEOUT, 0, 1).map_err(|e| e.for_table(&name))? {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        };
        let resumed = match &self.options.group {
            Some(opts) => {
                let g = Group::join(
                    &self.catalog,
                    &self.ident,
                    &self.options.writer_id,
                    opts.clone(),
                )
                .await?;
                let p = g.resume_positions(&self.catalog, &self.ident).await?;
                self.group = Some(g);
                p
            }
            None => writer_positions(&table, &self.options.writer_id)
                .map(|(_, p)| p)
                .unwrap_or_default(),
        };
        let maintenance = if maintaining {
            let store = match &self.options.maintain_store {
                Some(uri) => uri.clone(),
                None => format!(
                    "sqlite://{}?mode=rwc",
                    spill_root.path().join("maintain.db").display()
                ),
            };
            let log = self
                .maintenance_log
                .clone()
                .unwrap_or_else(|| Arc::new(|line: &str| eprintln!("[maintain] {line}")));
            // Named after the writer id alone: a restarted ingest takes back the lease of the one it
            // replaces (a second process under the same id is refused at its first commit).
            let holder = format!("ingest {}", self.options.writer_id);
            let m = InProcess::start(
                &self.catalog,
                &self.ident,
                &store,
                holder,
                self.options.maintain_interval,
                log,
            )
            .await?;
            self.metrics.attach_maintenance(m.state());
            Some(m)
        } else {
            None
        };
        self.metrics
            .effective_commit_interval_ms
            .store(interval.as_millis() as u64, Ordering::Relaxed);
        self.source.start(&resumed).await?;
        let uri = self.source.uri();
        let mut committed = resumed.clone();
        let mut pending = resumed.clone();
        let mut shutdown = self
            .shutdown
            .take()
            .unwrap_or_else(|| Box::pin(std::future::pending()));

        let mut summary = IngestMetrics {
            table: name.clone(),
            writer_id: self.options.writer_id.clone(),
            source: uri.clone(),
            resumed_from: resumed,
            positions: Positions::new(),
            commits: 0,
            records: 0,
            bad_records: 0,
            data_files: 0,
            duration_ms: 0,
            stopped_by: String::new(),
            peak_rss_bytes: None,
            throttled_ms: 0,
            maintenance: None,
        };
        let batch_records = self
            .options
            .batch_records
            .min(self.options.commit_records.unwrap_or(u64::MAX).max(1) as usize)
            .max(1);
        let mut progress = Progress::start(Phase::Commit, Amount::default());
        if let Some(f) = &self.progress {
            f(&progress);
        }
        let mut since = Window::default();
        let mut last_commit = Instant::now();
        let mut last_record = Instant::now();
        let mut rr = 0usize;
        let mut range = RangeDistributor::new(n);
        let mut last_debt: Option<Instant> = None;
        // The source's current outage and when it was last reported; why the ingest gave up.
        let mut outage: Option<Unreachable> = None;
        let mut reported: Option<Instant> = None;
        let mut gave_up: Option<(Unreachable, Duration)> = None;
        loop {
            let due_in = interval.saturating_sub(last_commit.elapsed());
            let wait = due_in.clamp(Duration::from_millis(10), Duration::from_millis(200));
            // Never read past --commit-records: a commit holds exactly that many records.
            let max = match self.options.commit_records {
                Some(r) => batch_records.min(r.saturating_sub(since.records).max(1) as usize),
                None => batch_records,
            };
            let stop = tokio::select! {
                biased;
                _ = &mut shutdown => Some("signal"),
                got = self.source.next(max, wait) => match got? {
                    None => Some("end of input"),
                    Some(records) if records.is_empty() => None,
                    Some(records) => {
                        last_record = Instant::now();
                        let payloads: Vec<&[u8]> = records.iter().map(|r| r.payload.as_slice()).collect();
                        let decoded = match &mut self.changes {
                            Some(c) => c.decode(&records)?,
                            None => decode_records(&arrow_schema, &payloads),
                        };
                        let bytes: u64 = payloads.iter().map(|p| p.len() as u64).sum();
                        self.metrics.records_in.fetch_add(records.len() as u64, Ordering::Relaxed);
                        summary.records += records.len() as u64;
                        if !decoded.bad.is_empty() {
                            let entries: Vec<DeadLetter> = decoded
                                .bad
                                .iter()
                                .map(|(i, b)| {
                                    let r = &records[*i];
                                    DeadLetter::new(&uri, &r.stream, r.position, &r.payload, b.clone())
                                })
                                .collect();
                            let count = entries.len() as u64;
                            summary.bad_records += count;
                            since.bad += count;
                            self.metrics.bad_records.fetch_add(count, Ordering::Relaxed);
                            match &mut self.dead_letter {
                                Some(sink) => sink.write(&entries).await?,
                                None => {
                                    for e in &entries {
                                        tracing::warn!(stream = %e.stream, position = e.position, column = %e.column, reason = %e.reason, "bad record");
                                    }
                                }
                            }
                            if let Some(max) = self.options.max_bad_records {
                                if summary.bad_records > max {
                                    let last = entries.last().expect("not empty");
                                    return Err(Error::TooManyBadRecords {
                                        count: summary.bad_records,
                                        max,
                                        last: format!(
                                            "{} at {}: column '{}' value {}: {}",
                                            last.stream, last.position, last.column, last.value, last.reason
                                        ),
                                    });
                                }
                            }
                        }
                        for r in &records {
                            pending.insert(r.stream.to_string(), r.next_position);
                        }
                        if let Some(batch) = decoded.batch {
                            since.records += batch.num_rows() as u64;
                            since.bytes += bytes;
                            let pieces = router.split(batch)?;
                            let target_rr = rr;
                            rr = (rr + 1) % n;
                            for (label, piece) in pieces {
                                let w = match distribution {
                                    Distribution::Hash => hash_of(&label) % n,
                                    Distribution::None => target_rr,
                                    Distribution::Range => range.route(
                                        &label,
                                        piece.get_array_memory_size() as u64,
                                        target_rr,
                                    ),
                                };
                                writers[w].push(label, piece)?;
                            }
                            let spilled: u64 = writers.iter().map(|w| w.spilled_bytes).sum();
                            self.metrics.spilled_bytes.store(spilled, Ordering::Relaxed);
                        }
                        None
                    }
                },
            };
            let lag = self.source.lag();
            self.metrics
                .set_lag_committed(committed_lag(&lag, &committed));
            self.metrics.set_lag(lag);
            let mut stop = stop;
            match self.source.unreachable() {
                Some(u) => {
                    let down = u.since.elapsed();
                    self.metrics.set_source_unreachable(Some(
                        chrono::Utc::now().timestamp_millis() - down.as_millis() as i64,
                    ));
                    let status = |event| SourceStatus {
                        event,
                        what: u.what.clone(),
                        reason: u.reason.clone(),
                        unreachable_s: down.as_secs(),
                        position: u.position,
                        gives_up_in_s: source_timeout.map(|t| t.saturating_sub(down).as_secs()),
                    };
                    match source_timeout {
                        Some(limit) if down >= limit && gave_up.is_none() => {
                            self.report_source(&status("gave_up"));
                            gave_up = Some((u.clone(), limit));
                            // Commits what was read, then stops with the error below.
                            stop.get_or_insert("source unreachable");
                        }
                        // Given up already: the stop is under way.
                        Some(limit) if down >= limit => {}
                        _ if reported.is_none_or(|t| t.elapsed() >= REPORT_EVERY) => {
                            self.report_source(&status("waiting"));
                            reported = Some(Instant::now());
                        }
                        _ => {}
                    }
                    outage = Some(u);
                }
                None => {
                    self.metrics.set_source_unreachable(None);
                    if let Some(u) = outage.take() {
                        // Only a reported outage is announced over.
                        if reported.is_some() {
                            self.report_source(&SourceStatus {
                                event: "reachable",
                                unreachable_s: u.since.elapsed().as_secs(),
                                what: u.what,
                                reason: u.reason,
                                position: u.position,
                                gives_up_in_s: None,
                            });
                        }
                    }
                    reported = None;
                }
            }
            let idle = self
                .options
                .stop_when_idle
                .is_some_and(|d| last_record.elapsed() >= d);
            let due = last_commit.elapsed() >= interval
                || self.options.commit_bytes.is_some_and(|b| since.bytes >= b)
                || self
                    .options
                    .commit_records
                    .is_some_and(|r| since.records >= r)
                || self.changes.as_ref().is_some_and(|c| c.full());
            if due || stop.is_some() || idle {
                let window = self.changes.as_ref().is_some_and(|c| c.has_changes());
                if window || writers.iter().any(|w| !w.is_empty()) {
                    let (mut report, table) = self
                        .commit(
                            &mut writers,
                            &pending,
                            &mut committed,
                            &uri,
                            &since,
                            summary.commits + 1,
                        )
                        .await?;
                    range.end_window();
                    let now_schema = table.metadata().current_schema_id();
                    if now_schema != decoding_schema && self.changes.is_none() {
                        tracing::info!(
                            table = %name,
                            from = decoding_schema,
                            to = now_schema,
                            "the table's schema changed: records from here on are read in the new schema"
                        );
                        router = PartitionRouter::new(&table)?;
                        arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
                            table.metadata().current_schema(),
                        )?);
                        decoding_schema = now_schema;
                    }
                    if let Some(m) = &maintenance {
                        m.wake();
                    }
                    if interval > base_interval {
                        let extra = (interval - base_interval).as_millis() as u64;
                        summary.throttled_ms += extra;
                        self.metrics
                            .throttled_ms
                            .fetch_add(extra, Ordering::Relaxed);
                    }
                    // The debt is read after a commit, at most every 2 s (one read of the
                    // live files).
                    let debt_every = Duration::from_secs(2);
                    if limits.any() && last_debt.is_none_or(|t| t.elapsed() >= debt_every) {
                        last_debt = Some(Instant::now());
                        let now = chrono::Utc::now().timestamp_millis();
                        match measure(&self.catalog, &self.ident, &table, &limits, now).await {
                            Ok(d) => {
                                let next = next_interval(
                                    interval,
                                    base_interval,
                                    !d.over.is_empty(),
                                    Duration::from_millis(limits.max_commit_interval_ms),
                                );
                                if next != interval {
                                    tracing::warn!(
                                        table = %name,
                                        interval_ms = next.as_millis() as u64,
                                        over = ?d.over,
                                        "backpressure: commit interval changed"
                                    );
                                }
                                interval = next;
                                self.metrics.set_debt(&d);
                                report.debt = Some(d);
                            }
                            Err(e) => {
                                tracing::warn!(table = %name, "measuring the compaction debt: {e}")
                            }
                        }
                        self.metrics
                            .effective_commit_interval_ms
                            .store(interval.as_millis() as u64, Ordering::Relaxed);
                    }
                    report.commit_interval_ms = interval.as_millis() as u64;
                    summary.commits += 1;
                    summary.data_files += report.data_files;
                    progress.done += Amount {
                        steps: 1,
                        files: report.data_files,
                        bytes: report.bytes,
                        rows: report.records,
                    };
                    if let Some(f) = &self.progress {
                        f(&progress);
                    }
                    if let Some(f) = &self.on_commit {
                        f(&report);
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
                        Err(e) => tracing::warn!(table = %name, "coordinating the group: {e}"),
                    }
                }
                since = Window::default();
                last_commit = Instant::now();
            }
            if let Some(why) = stop {
                summary.stopped_by = why.to_string();
                break;
            }
            if idle {
                summary.stopped_by = "idle".to_string();
                break;
            }
        }
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
        if let Some((u, limit)) = gave_up {
            let at: Vec<String> = committed.iter().map(|(s, p)| format!("{s}={p}")).collect();
            return Err(Error::InputFile {
                path: uri.into(),
                reason: format!(
                    "{} unreachable for {} s (--source-timeout {} s): {}; the table holds everything read before (positions {}), a restart resumes there",
                    u.what,
                    u.since.elapsed().as_secs(),
                    limit.as_secs_f64(),
                    u.reason,
                    if at.is_empty() { "none".to_string() } else { at.join(", ") }
                ),
            });
        }
        summary.positions = committed;
        summary.peak_rss_bytes = peak_rss_bytes();
        summary.duration_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
    }

    /// Flushes every writer's buffers into data files and commits them with the positions.
    async fn commit(
        &mut self,
        writers: &mut [PartitionBuffers],
        pending: &Positions,
        committed: &mut Positions,
        uri: &str,
        since: &Window,
        seq: u64,
    ) -> Result<(CommitReport, Table)> {
        if let Some(sink) = &mut self.dead_letter {
            sink.sync().await?;
        }
        let flush_started = Instant::now();
        // Buffered rows are written in this table's schema, converted by field id when it
        // changed since they were read (`TableWriter::write`).
        let table = self.catalog.load_table(&self.ident).await?;
        let schema_id = table.metadata().current_schema_id();
        // An upsert window: its keys, and only each key's last change is written.
        let window = match &mut self.changes {
            Some(c) => Some(c.take_window()?),
            None => None,
        };
        let crossed = window.as_ref().map_or(0, |k| k.crossed_streams());
        if crossed > 0 {
            tracing::warn!(
                table = %ident_string(&self.ident),
                changes = crossed,
                "keys changed from several source partitions in one window: applied in arrival order, which the source does not define across partitions (write each key to one partition)"
            );
        }
        let rows: Option<RowsToWrite> = window.clone().map(|keys| {
            let f: RowsToWrite = Arc::new(move |b| last_changes(&keys, b));
            f
        });
        let mut partitions = 0u64;
        let mut tasks = Vec::new();
        for w in writers.iter_mut() {
            let parts = w.take()?;
            partitions += parts.len() as u64;
            let table = table.clone();
            let options = self.options.write.clone();
            let rows = rows.clone();
            tasks.push(tokio::spawn(async move {
                write_parts(&table, parts, &options, rows).await
            }));
        }
        let mut files: Vec<DataFile> = Vec::new();
        let mut failure = None;
        for t in tasks {
            match t.await {
                Ok(Ok(f)) => files.extend(f),
                Ok(Err(e)) => failure = Some(e),
                Err(e) => {
                    failure = Some(Error::Task {
                        what: "file write",
                        source: e,
                    })
                }
            }
        }
        if let Some(e) = failure {
            let paths = files.iter().map(|f| f.file_path().to_string()).collect();
            delete_quietly_in(table.file_io(), table.metadata().location(), paths).await;
            return Err(e);
        }
        let flush_ms = flush_started.elapsed().as_millis() as u64;
        self.metrics
            .last_flush_duration_ms
            .store(flush_ms, Ordering::Relaxed);
        self.metrics
            .observe_files(files.iter().map(|f| f.file_size_in_bytes()));
        let records: u64 = files.iter().map(|f| f.record_count()).sum();
        let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
        let data_files = files.len() as u64;

        let mut props: BTreeMap<String, String> = BTreeMap::new();
        props.insert(FLOE_WRITER_ID.to_string(), self.options.writer_id.clone());
        props.insert(SOURCE_KEY.to_string(), uri.to_string());
        for (stream, pos) in pending {
            props.insert(format!("{POSITION_PREFIX}{stream}"), pos.to_string());
        }
        let update =
            SnapshotUpdate::append(files).with_summary_properties(props.into_iter().collect());
        let commit_started = Instant::now();
        let writer_id = self.options.writer_id.clone();
        let expected = committed.clone();
        crate::fault::pause("INGEST_BEFORE_COMMIT").await;
        if let Some(d) = self.options.pause_before_commit {
            tokio::time::sleep(d).await;
        }
        // The writer fence is checked on every attempt; the committer deletes the data files
        // when the commit definitely fails (never on an unknown outcome).
        let (table, attempts, handoff, replaced) = match &self.group {
            // A worker of a group hands its files off to the coordinator. A failed hand-off
            // keeps the files: the row may have been written (they are orphans otherwise).
            Some(g) => {
                let changed: Positions = pending
                    .iter()
                    .filter(|(s, p)| committed.get(*s) != Some(*p))
                    .map(|(s, p)| (s.clone(), *p))
                    .collect();
                let from: Positions = changed
                    .keys()
                    .filter_map(|s| Some((s.clone(), *committed.get(s)?)))
                    .collect();
                let id = g
                    .hand_off(
                        &self.catalog,
                        &self.ident,
                        &update.added_data_files,
                        &from,
                        &changed,
                    )
                    .await?;
                (table, 0, Some(id), 0)
            }
            None => {
                // Written in the schema of the table loaded above; an attempt on a table whose
                // schema changed since commits the rows re-encoded by field id.
                let staged = Staged::new(update.added_data_files, schema_id);
                let summary = update.summary_properties;
                let committer = Committer::new(&self.catalog, &self.ident)
                    .on(table)
                    .retrying_conflicts()
                    .with_precondition(move |t| fence(t, &writer_id, &expected));
                match window {
                    None => {
                        let done =
                            commit_append(committer, staged, summary, &self.options.write).await?;
                        (done.table, done.attempts, None, 0)
                    }
                    // Every attempt deletes the window's keys from the table it commits on.
                    Some(keys) => {
                        let delta = crate::change::commit_row_delta_with(
                            committer,
                            None,
                            staged,
                            None,
                            summary,
                            move |t| {
                                let keys = keys.clone();
                                async move { crate::change::keys::locate_keys(&t, &keys).await }
                            },
                        )
                        .await?;
                        // The committed table (a commit with positions always lands one).
                        let table = match delta.table {
                            Some(t) => t,
                            None => self.catalog.load_table(&self.ident).await?,
                        };
                        (table, delta.attempts, None, delta.deletes.rows)
                    }
                }
            }
        };
        let committed_at_ms = chrono::Utc::now().timestamp_millis();
        let commit_ms = commit_started.elapsed().as_millis() as u64;
        *committed = pending.clone();
        let lag = self.source.lag();
        let m = &self.metrics;
        // A hand-off is not a commit: its rows are not readable until the coordinator's.
        if handoff.is_none() {
            self.source.committed(committed);
            m.last_commit_duration_ms
                .store(commit_ms, Ordering::Relaxed);
            m.last_commit_epoch_ms
                .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
            m.committed_data_files_count
                .fetch_add(data_files, Ordering::Relaxed);
            m.committed_data_files_record_count
                .fetch_add(records, Ordering::Relaxed);
            m.commits.fetch_add(1, Ordering::Relaxed);
        }
        let report = CommitReport {
            commit: seq,
            // 0 for a hand-off (the coordinator commits it later).
            snapshot_id: match handoff {
                Some(_) => 0,
                None => table.metadata().current_snapshot_id().unwrap_or_default(),
            },
            records,
            bad_records: since.bad,
            data_files,
            bytes,
            partitions,
            flush_ms,
            commit_ms,
            spilled_bytes: m.spilled_bytes.load(Ordering::Relaxed),
            lag_committed: committed_lag(&lag, committed),
            lag,
            positions: pending.clone(),
            committed_at_ms,
            attempts,
            commit_interval_ms: 0,
            debt: None,
            handoff,
            replaced_rows: replaced,
            keys_across_streams: crossed,
        };
        Ok((report, table))
    }
}

/// Refuses a commit when the newest snapshot of `writer_id` no longer holds `expected`: another
/// process committed under the same id since this one last did.
fn fence(table: &Table, writer_id: &str, expected: &Positions) -> Result<()> {
    let found = writer_positions(table, writer_id)
        .map(|(_, p)| p)
        .unwrap_or_default();
    if &found == expected {
        Ok(())
    } else {
        Err(Error::Refused {
            operation: format!("commit as writer '{writer_id}'"),
            reason: format!(
                "another process committed under the same writer id (table positions {found:?}, this process expected {expected:?}); restart to resume from the table"
            ),
        })
    }
}

#[derive(Debug, Default)]
struct Window {
    records: u64,
    bytes: u64,
    bad: u64,
}

fn hash_of(s: &str) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish() as usize
}
