//! Ingest metrics, in Prometheus text format on `--metrics-addr`, with the names of Iceberg's
//! Flink sink (`flushedDataFiles`, `dataFilesSizeHistogram`, `lastFlushDurationMs`,
//! `committedDataFilesCount`, `committedDataFilesRecordCount`, `lastCommitDurationMs`,
//! `elapsedSecondsSinceLastSuccessfulCommit`) plus records in, bad records, spilled bytes and
//! Kafka lag per partition (`sourceLag` from the fetched offset, `sourceLagCommitted` from the
//! position in the table), the source's reachability (`sourceConnected`,
//! `elapsedSecondsSinceSourceReachable`), the compaction debt and backpressure (`debtSmallFilesPerPartition`,
//! `debtSnapshotsSinceCompaction`, `debtSecondsSinceCompaction`, `commitIntervalMs`,
//! `throttledSeconds`), commit outcomes (`failedCommits`, `retriedCommits`, `commitConflicts`,
//! the `commitDurationSeconds` histogram, `pendingRecords` read and not committed yet), and with
//! `--maintain` the in-process maintenance's `floe_maintain_*` metrics.
//!
//! The same address serves the process like a service: `/api/status` (JSON: state and what it
//! waits for, last commit and snapshot, last error, per-stream committed position, source end
//! and lag, debt and backpressure), `/healthz` (the process answers) and `/readyz` (200 while
//! the source answers and the last commit did not fail, else 503 with the reason). Alert rules
//! over these metrics: `deploy/prometheus/floe-ingest-alerts.yaml`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::base::error::Result;
use crate::base::server;
use crate::base::server::exposition::{self, Family};
use crate::ingest::debt::Debt;
use crate::ingest::hook::MetricsFn;
use crate::ingest::source::{Positions, StreamLag};

/// Upper bounds of the data file size histogram (bytes).
const SIZE_BUCKETS: [f64; 8] = [
    (1u64 << 20) as f64,
    (8u64 << 20) as f64,
    (32u64 << 20) as f64,
    (64u64 << 20) as f64,
    (128u64 << 20) as f64,
    (256u64 << 20) as f64,
    (512u64 << 20) as f64,
    (1u64 << 30) as f64,
];

/// Upper bounds of the commit duration histogram (seconds).
const COMMIT_SECONDS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// A histogram's counts per bucket (the last one above every bound) and the sum of what it
/// observed, in a raw integer unit (bytes, milliseconds) that is `scale` times the exposed one,
/// so sums stay exact. The bounds are the caller's constant.
#[derive(Debug, Default)]
struct Histogram(Mutex<(Vec<u64>, u64)>);

impl Histogram {
    fn observe(&self, bounds: &[f64], scale: f64, raw: u64) {
        let v = raw as f64 / scale;
        let i = bounds.iter().position(|u| v <= *u).unwrap_or(bounds.len());
        let mut h = self.0.lock().expect("not poisoned");
        h.0.resize(bounds.len() + 1, 0);
        h.0[i] += 1;
        h.1 += raw;
    }

    /// The exposition family: cumulative counts per bound, the sum and the count.
    fn family(&self, bounds: &[f64], scale: f64, name: &str, help: &str) -> Family {
        let (counts, sum) = self.0.lock().expect("not poisoned").clone();
        let count = |i: usize| counts.get(i).copied().unwrap_or(0);
        let mut cum = 0;
        let mut buckets = Vec::with_capacity(bounds.len());
        for (i, upper) in bounds.iter().enumerate() {
            cum += count(i);
            buckets.push((*upper, cum));
        }
        cum += count(bounds.len());
        Family::histogram(name, help, &buckets, sum as f64 / scale, cum)
    }
}

/// What one landed commit did, for [`Metrics::commit_landed`].
#[derive(Debug)]
pub struct Landed<'a> {
    pub attempts: u32,
    pub duration_ms: u64,
    pub snapshot_id: Option<i64>,
    /// The positions the table now holds.
    pub positions: &'a Positions,
    pub data_files: u64,
    pub records: u64,
    /// `records_in` at the end of the window it committed (later records are pending).
    pub records_in: u64,
}

/// Where the ingest loop is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Loading the table, resuming positions, connecting to the source.
    #[default]
    Starting,
    /// Reading, writing and committing.
    Running,
    /// The loop ended (the source ended, a signal, idle, or an error).
    Stopped,
}

/// What `/api/status` shows besides the counters.
#[derive(Debug, Default)]
struct Status {
    phase: Phase,
    table: String,
    source: String,
    /// Epoch ms and message of the last error (a failed commit, coordination, debt reading).
    last_error: Option<(i64, String)>,
    /// The snapshot of the last commit.
    last_snapshot_id: Option<i64>,
    /// The positions in the table after the last commit (where a restart resumes).
    positions: Positions,
}

/// Counters and gauges of one ingest.
#[derive(Debug, Default)]
pub struct Metrics {
    pub records_in: AtomicU64,
    pub bad_records: AtomicU64,
    pub flushed_data_files: AtomicU64,
    pub committed_data_files_count: AtomicU64,
    pub committed_data_files_record_count: AtomicU64,
    pub commits: AtomicU64,
    pub last_flush_duration_ms: AtomicU64,
    pub last_commit_duration_ms: AtomicU64,
    /// Epoch ms of the last successful commit (0: none yet; the start time is used).
    pub last_commit_epoch_ms: AtomicI64,
    pub started_epoch_ms: AtomicI64,
    pub spilled_bytes: AtomicU64,
    /// The commit interval in effect (stretched by backpressure).
    pub effective_commit_interval_ms: AtomicU64,
    /// Time the interval was stretched beyond `--commit-interval`, summed.
    pub throttled_ms: AtomicU64,
    debt: Mutex<Option<Debt>>,
    maintenance: Mutex<Option<MetricsFn>>,
    file_sizes: Histogram,
    lag: Mutex<Vec<StreamLag>>,
    lag_committed: Mutex<Vec<StreamLag>>,
    /// Epoch ms the source last answered while it does not (0: it answers).
    source_unreachable_since_ms: AtomicI64,
    /// Epoch ms the ingest started connecting to its source, while it has not started (0:
    /// not connecting).
    connecting_since_ms: AtomicI64,
    /// Commits that failed (the ingest stops after one; a group's coordinator retries).
    pub failed_commits: AtomicU64,
    /// Commits that needed more than one attempt.
    pub retried_commits: AtomicU64,
    /// Attempts that met a concurrent commit and were retried.
    pub commit_conflicts: AtomicU64,
    /// `records_in` when the last commit landed: the records since are pending.
    committed_records_in: AtomicU64,
    commit_durations: Histogram,
    /// Epoch ms the commit in progress started (0: none).
    commit_started_ms: AtomicI64,
    /// `--commit-interval` as given (the interval in effect may be stretched).
    pub configured_commit_interval_ms: AtomicU64,
    status: Mutex<Status>,
}

impl Metrics {
    /// New metrics, started now.
    pub fn new() -> Arc<Self> {
        let m = Self::default();
        m.started_epoch_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
        Arc::new(m)
    }

    /// The ingest connects to `source` (its metadata, its positions) before it starts.
    pub fn connecting(&self, source: &str) {
        self.status.lock().expect("not poisoned").source = source.to_string();
        self.connecting_since_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
    }

    /// Seconds spent connecting to the source, while not started (0 otherwise).
    fn connecting_for(&self) -> f64 {
        match self.connecting_since_ms.load(Ordering::Relaxed) {
            0 => 0.0,
            t => (chrono::Utc::now().timestamp_millis() - t).max(0) as f64 / 1000.0,
        }
    }

    /// The ingest of `table` from `source` runs, resuming at `positions`.
    pub fn started(&self, table: &str, source: &str, positions: &Positions) {
        self.connecting_since_ms.store(0, Ordering::Relaxed);
        let mut s = self.status.lock().expect("not poisoned");
        s.phase = Phase::Running;
        s.table = table.to_string();
        s.source = source.to_string();
        s.positions = positions.clone();
    }

    /// The ingest loop ended.
    pub fn stopped(&self) {
        self.status.lock().expect("not poisoned").phase = Phase::Stopped;
    }

    /// A commit starts (its data files are being written and committed).
    pub fn commit_started(&self) {
        self.commit_started_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
    }

    /// A commit of `c.data_files` files holding `c.records` records landed. A group worker's
    /// hand-off is not a commit ([`Metrics::handed_off`]).
    pub fn commit_landed(&self, c: &Landed<'_>) {
        self.handed_off(c.records_in);
        self.last_commit_duration_ms
            .store(c.duration_ms, Ordering::Relaxed);
        self.last_commit_epoch_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
        self.committed_data_files_count
            .fetch_add(c.data_files, Ordering::Relaxed);
        self.committed_data_files_record_count
            .fetch_add(c.records, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
        if c.attempts > 1 {
            self.retried_commits.fetch_add(1, Ordering::Relaxed);
            self.commit_conflicts
                .fetch_add(u64::from(c.attempts - 1), Ordering::Relaxed);
        }
        self.commit_durations
            .observe(&COMMIT_SECONDS, 1000.0, c.duration_ms);
        let (snapshot_id, positions) = (c.snapshot_id, c.positions);
        let mut s = self.status.lock().expect("not poisoned");
        if snapshot_id.is_some() {
            s.last_snapshot_id = snapshot_id;
        }
        s.positions = positions.clone();
    }

    /// The records read up to `records_in` are out of this process's hands: committed, or (a
    /// group worker) handed off to the coordinator. Nothing of them is pending here.
    pub fn handed_off(&self, records_in: u64) {
        self.commit_started_ms.store(0, Ordering::Relaxed);
        self.committed_records_in
            .store(records_in, Ordering::Relaxed);
    }

    /// A commit failed with `error`.
    pub fn commit_failed(&self, error: &str) {
        self.commit_started_ms.store(0, Ordering::Relaxed);
        self.failed_commits.fetch_add(1, Ordering::Relaxed);
        self.error(error);
    }

    /// Records `error` as the last error `/api/status` shows.
    pub fn error(&self, error: &str) {
        self.status.lock().expect("not poisoned").last_error =
            Some((chrono::Utc::now().timestamp_millis(), error.to_string()));
    }

    /// Records read and not committed yet (data rows and dead letters alike).
    pub fn pending_records(&self) -> u64 {
        self.records_in
            .load(Ordering::Relaxed)
            .saturating_sub(self.committed_records_in.load(Ordering::Relaxed))
    }

    /// The state (`starting`, `running`, `committing`, `throttled`, `waiting_for_source`,
    /// `stopped`) and what the ingest waits for, in words.
    pub fn state(&self) -> (&'static str, Option<String>) {
        let now = chrono::Utc::now().timestamp_millis();
        let (phase, source) = {
            let s = self.status.lock().expect("not poisoned");
            (s.phase, s.source.clone())
        };
        let pending = self.pending_records();
        let effective = self.effective_commit_interval_ms.load(Ordering::Relaxed);
        let configured = self.configured_commit_interval_ms.load(Ordering::Relaxed);
        match phase {
            Phase::Starting if self.connecting_for() >= 1.0 => (
                "waiting_for_source",
                Some(format!(
                    "{source}: no answer yet, connecting for {:.0} s (the broker may be down or \
                     unreachable)",
                    self.connecting_for()
                )),
            ),
            Phase::Starting => (
                "starting",
                Some("the table, its committed positions and the source".into()),
            ),
            Phase::Stopped => ("stopped", None),
            Phase::Running => {
                let commit = self.commit_started_ms.load(Ordering::Relaxed);
                if self.source_unreachable_since_ms.load(Ordering::Relaxed) != 0 {
                    return (
                        "waiting_for_source",
                        Some(format!(
                            "{source}: not answering for {:.0} s (the reader retries)",
                            self.elapsed_since_source_reachable()
                        )),
                    );
                }
                if commit != 0 {
                    return (
                        "committing",
                        Some(format!(
                            "the commit of {pending} records: running for {:.1} s",
                            (now - commit).max(0) as f64 / 1000.0
                        )),
                    );
                }
                if effective > configured && configured > 0 {
                    let over = self
                        .debt
                        .lock()
                        .expect("not poisoned")
                        .as_ref()
                        .map(|d| d.over.join("; "))
                        .unwrap_or_default();
                    return (
                        "throttled",
                        Some(format!(
                            "compaction: the commit interval is stretched to {:.1} s ({over})",
                            effective as f64 / 1000.0
                        )),
                    );
                }
                if pending > 0 {
                    (
                        "running",
                        Some(format!(
                            "the commit interval: {pending} records wait for the next commit"
                        )),
                    )
                } else {
                    ("running", Some(format!("records from {source}")))
                }
            }
        }
    }

    /// `Ok` when ready: started, the source answers, and no commit failed since the last
    /// that landed; otherwise the reason.
    pub fn ready(&self) -> std::result::Result<(), String> {
        let s = self.status.lock().expect("not poisoned");
        match s.phase {
            Phase::Starting if self.connecting_for() >= 1.0 => {
                return Err(format!(
                    "the source {} has not answered for {:.0} s",
                    s.source,
                    self.connecting_for()
                ))
            }
            Phase::Starting => return Err("starting".into()),
            Phase::Stopped => return Err("stopped".into()),
            Phase::Running => {}
        }
        if self.source_unreachable_since_ms.load(Ordering::Relaxed) != 0 {
            return Err(format!(
                "the source {} is not answering for {:.0} s",
                s.source,
                self.elapsed_since_source_reachable()
            ));
        }
        let last_commit = self.last_commit_epoch_ms.load(Ordering::Relaxed);
        match &s.last_error {
            Some((at, e))
                if *at >= last_commit && self.failed_commits.load(Ordering::Relaxed) > 0 =>
            {
                Err(format!("the last commit failed: {e}"))
            }
            _ => Ok(()),
        }
    }

    /// The `/api/status` document.
    pub fn status_json(&self) -> serde_json::Value {
        use serde_json::json;
        let (state, waiting_for) = self.state();
        let ready = self.ready();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let ms = |v: i64| {
            (v > 0).then(|| {
                chrono::DateTime::from_timestamp_millis(v)
                    .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            })
        };
        let s = self.status.lock().expect("not poisoned");
        let lag = self.lag.lock().expect("not poisoned").clone();
        let lag_committed = self.lag_committed.lock().expect("not poisoned").clone();
        let mut streams: std::collections::BTreeMap<String, serde_json::Value> = s
            .positions
            .iter()
            .map(|(k, p)| (k.clone(), json!({ "committed_position": p })))
            .collect();
        for l in &lag {
            let e = streams.entry(l.stream.clone()).or_insert_with(|| json!({}));
            e["lag_fetched"] = json!(l.lag);
            e["source_end"] = json!(l.high_watermark);
        }
        for l in &lag_committed {
            let e = streams.entry(l.stream.clone()).or_insert_with(|| json!({}));
            e["lag"] = json!(l.lag);
        }
        let last_commit = self.last_commit_epoch_ms.load(Ordering::Relaxed);
        json!({
            "table": s.table,
            "source": s.source,
            "state": state,
            "waiting_for": waiting_for,
            "ready": ready.is_ok(),
            "not_ready_because": ready.err(),
            "started_at": ms(self.started_epoch_ms.load(Ordering::Relaxed)),
            "last_commit": {
                "at": ms(last_commit),
                "snapshot_id": s.last_snapshot_id,
                "duration_ms": get(&self.last_commit_duration_ms),
                "seconds_ago": self.elapsed_since_commit(),
            },
            "last_error": s.last_error.as_ref().map(|(at, e)| json!({"at": ms(*at), "message": e})),
            "records_in": get(&self.records_in),
            "pending_records": self.pending_records(),
            "bad_records": get(&self.bad_records),
            "commits": {
                "succeeded": get(&self.commits),
                "failed": get(&self.failed_commits),
                "retried": get(&self.retried_commits),
                "conflicts": get(&self.commit_conflicts),
            },
            "streams": streams.into_iter().map(|(k, mut v)| { v["stream"] = json!(k); v }).collect::<Vec<_>>(),
            "source_connected": self.source_unreachable_since_ms.load(Ordering::Relaxed) == 0,
            "debt": self.debt.lock().expect("not poisoned").clone(),
            "backpressure": {
                "commit_interval_ms": get(&self.configured_commit_interval_ms),
                "effective_commit_interval_ms": get(&self.effective_commit_interval_ms),
                "throttled_seconds": get(&self.throttled_ms) / 1000,
            },
        })
    }

    /// Records the sizes of flushed data files.
    pub fn observe_files(&self, sizes: impl IntoIterator<Item = u64>) {
        for s in sizes {
            self.file_sizes.observe(&SIZE_BUCKETS, 1.0, s);
            self.flushed_data_files.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Replaces the debt gauges.
    pub fn set_debt(&self, d: &Debt) {
        *self.debt.lock().expect("not poisoned") = Some(d.clone());
    }

    /// Adds the in-process maintenance's metrics to the exposition.
    pub fn attach_maintenance(&self, render: MetricsFn) {
        *self.maintenance.lock().expect("not poisoned") = Some(render);
    }

    /// Replaces the lag gauges.
    pub fn set_lag(&self, lag: Vec<StreamLag>) {
        *self.lag.lock().expect("not poisoned") = lag;
    }

    /// Replaces the committed-lag gauges.
    pub fn set_lag_committed(&self, lag: Vec<StreamLag>) {
        *self.lag_committed.lock().expect("not poisoned") = lag;
    }

    /// The source answers (`None`) or has not since `since_epoch_ms`.
    pub fn set_source_unreachable(&self, since_epoch_ms: Option<i64>) {
        self.source_unreachable_since_ms
            .store(since_epoch_ms.unwrap_or(0).max(0), Ordering::Relaxed);
    }

    /// Seconds since the source last answered; 0 while it answers.
    pub fn elapsed_since_source_reachable(&self) -> f64 {
        match self.source_unreachable_since_ms.load(Ordering::Relaxed) {
            0 => 0.0,
            t => (chrono::Utc::now().timestamp_millis() - t).max(0) as f64 / 1000.0,
        }
    }

    /// Seconds since the last successful commit (or since the start).
    pub fn elapsed_since_commit(&self) -> f64 {
        let last = match self.last_commit_epoch_ms.load(Ordering::Relaxed) {
            0 => self.started_epoch_ms.load(Ordering::Relaxed),
            t => t,
        };
        (chrono::Utc::now().timestamp_millis() - last).max(0) as f64 / 1000.0
    }

    /// The Prometheus text exposition (format 0.0.4), through [`crate::base::server::exposition`].
    pub fn render(&self) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let mut out = Vec::new();
        for (name, help, v) in [
            (
                "recordsIn",
                "Records read from the source.",
                get(&self.records_in),
            ),
            (
                "badRecords",
                "Records sent to the dead-letter sink.",
                get(&self.bad_records),
            ),
            (
                "flushedDataFiles",
                "Data files written.",
                get(&self.flushed_data_files),
            ),
            (
                "committedDataFilesCount",
                "Data files committed.",
                get(&self.committed_data_files_count),
            ),
            (
                "committedDataFilesRecordCount",
                "Records in committed data files.",
                get(&self.committed_data_files_record_count),
            ),
            ("commits", "Successful commits.", get(&self.commits)),
            (
                "failedCommits",
                "Commits that failed (the ingest stops after one; a group's coordinator retries).",
                get(&self.failed_commits),
            ),
            (
                "retriedCommits",
                "Commits that needed more than one attempt.",
                get(&self.retried_commits),
            ),
            (
                "commitConflicts",
                "Commit attempts that met a concurrent commit and were retried.",
                get(&self.commit_conflicts),
            ),
            (
                "throttledSeconds",
                "Seconds the commit interval was stretched beyond --commit-interval by backpressure.",
                (self.throttled_ms.load(Ordering::Relaxed) / 1000) as f64,
            ),
            (
                "spilledBytes",
                "Bytes spilled to local disk by the write buffers.",
                get(&self.spilled_bytes),
            ),
        ] {
            out.push(Family::counter(name, help).with_value(v));
        }
        let mut gauges = vec![
            (
                "lastFlushDurationMs",
                "Duration of the last flush.",
                get(&self.last_flush_duration_ms),
            ),
            (
                "lastCommitDurationMs",
                "Duration of the last commit.",
                get(&self.last_commit_duration_ms),
            ),
            (
                "elapsedSecondsSinceLastSuccessfulCommit",
                "Seconds since the last successful commit.",
                self.elapsed_since_commit(),
            ),
            (
                "pendingRecords",
                "Records read and not committed yet.",
                self.pending_records() as f64,
            ),
            (
                "commitIntervalMs",
                "The commit interval in effect (longer than --commit-interval under backpressure).",
                get(&self.effective_commit_interval_ms),
            ),
            (
                "sourceConnected",
                "1 while the source answers, 0 while its reader retries (a Kafka broker gone).",
                f64::from(u8::from(
                    self.source_unreachable_since_ms.load(Ordering::Relaxed) == 0,
                )),
            ),
            (
                "elapsedSecondsSinceSourceReachable",
                "Seconds since the source last answered (0 while it answers).",
                self.elapsed_since_source_reachable(),
            ),
        ];
        if let Some(d) = self.debt.lock().expect("not poisoned").as_ref() {
            gauges.extend([
                (
                    "debtSmallFilesPerPartition",
                    "Small data files in the partition holding the most.",
                    d.max_small_files as f64,
                ),
                (
                    "debtSnapshotsSinceCompaction",
                    "Snapshots since the last compaction.",
                    d.snapshots_since_compaction as f64,
                ),
                (
                    "debtSecondsSinceCompaction",
                    "Seconds small files have waited since the last compaction.",
                    d.ms_since_compaction as f64 / 1000.0,
                ),
                (
                    "debtOverLimit",
                    "1 while a debt limit (floe.ingest.max-*) is passed.",
                    f64::from(u8::from(!d.over.is_empty())),
                ),
            ]);
        }
        for (name, help, v) in gauges {
            out.push(Family::gauge(name, help).with_value(v));
        }
        out.push(self.file_sizes.family(
            &SIZE_BUCKETS,
            1.0,
            "dataFilesSizeHistogram",
            "Sizes of flushed data files.",
        ));
        out.push(self.commit_durations.family(
            &COMMIT_SECONDS,
            1000.0,
            "commitDurationSeconds",
            "Durations of successful commits (seconds).",
        ));
        for (name, help, lag) in [
            (
                "sourceLag",
                "Records not yet fetched, per stream: high watermark minus the next offset to fetch.",
                &self.lag,
            ),
            (
                "sourceLagCommitted",
                "Records not yet committed to the table, per stream: high watermark minus the position in the table.",
                &self.lag_committed,
            ),
        ] {
            let mut f = Family::gauge(name, help);
            for l in lag.lock().expect("not poisoned").iter() {
                f.sample(&[("stream", &l.stream.replace('"', "'"))], l.lag as f64);
            }
            out.push(f);
        }
        let mut s = exposition::encode(out);
        if let Some(render) = self.maintenance.lock().expect("not poisoned").as_ref() {
            s.push_str(&(render.0)());
        }
        s
    }
}

/// Serves `metrics` at `addr` through [`crate::base::server`]: `/metrics` (the exposition),
/// `/api/status` (JSON), `/healthz`, `/readyz`; any other path is 404, any method but GET and
/// HEAD 405 (as `floe maintain --listen` answers).
pub async fn serve(addr: &str, metrics: Arc<Metrics>) -> Result<tokio::task::JoinHandle<()>> {
    let (_, task) = server::spawn("--metrics-addr", addr, move |method, target| {
        let path = target.split('?').next().unwrap_or("/");
        let known = matches!(path, "/metrics" | "/api/status" | "/healthz" | "/readyz");
        if known && method != http::Method::GET && method != http::Method::HEAD {
            let mut r = http::Response::new(format!("{method} is not allowed on {path}\n"));
            *r.status_mut() = http::StatusCode::METHOD_NOT_ALLOWED;
            r.headers_mut().insert(
                http::header::ALLOW,
                http::HeaderValue::from_static("GET, HEAD"),
            );
            return r;
        }
        let (status, body, content_type) = match path {
            "/api/status" => (
                http::StatusCode::OK,
                serde_json::to_string_pretty(&metrics.status_json()).unwrap_or_default(),
                "application/json",
            ),
            "/healthz" => (http::StatusCode::OK, "ok\n".to_string(), "text/plain"),
            "/readyz" => match metrics.ready() {
                Ok(()) => (http::StatusCode::OK, "ready\n".to_string(), "text/plain"),
                Err(why) => (
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                    "text/plain",
                ),
            },
            "/metrics" => (
                http::StatusCode::OK,
                metrics.render(),
                prometheus::TEXT_FORMAT,
            ),
            _ => (
                http::StatusCode::NOT_FOUND,
                format!("no such path: {path} (try /metrics, /api/status, /healthz, /readyz)\n"),
                "text/plain",
            ),
        };
        let mut r = http::Response::new(body);
        *r.status_mut() = status;
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(content_type),
        );
        r
    })
    .await?;
    Ok(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_flink_sink_names_and_a_cumulative_histogram() {
        let m = Metrics::new();
        m.observe_files([100, 2 << 20, 600 << 20]);
        m.records_in.fetch_add(7, Ordering::Relaxed);
        m.set_lag(vec![StreamLag {
            stream: "kafka:t:0".into(),
            lag: 3,
            ..Default::default()
        }]);
        m.set_lag_committed(vec![StreamLag {
            stream: "kafka:t:0".into(),
            lag: 9,
            ..Default::default()
        }]);
        let text = m.render();
        assert!(text.contains("recordsIn 7"));
        assert!(text.contains("flushedDataFiles 3"));
        assert!(text.contains("dataFilesSizeHistogram_bucket{le=\"1048576\"} 1"));
        assert!(text.contains("dataFilesSizeHistogram_bucket{le=\"8388608\"} 2"));
        assert!(text.contains("dataFilesSizeHistogram_bucket{le=\"+Inf\"} 3"));
        assert!(text.contains("sourceLag{stream=\"kafka:t:0\"} 3"));
        assert!(text.contains("elapsedSecondsSinceLastSuccessfulCommit"));
        assert!(text.contains("sourceLagCommitted{stream=\"kafka:t:0\"} 9"));
        assert!(text.contains("sourceConnected 1\n"));
        assert!(text.contains("elapsedSecondsSinceSourceReachable 0\n"));
        m.set_source_unreachable(Some(chrono::Utc::now().timestamp_millis() - 4_000));
        let text = m.render();
        assert!(text.contains("sourceConnected 0\n"), "{text}");
        let since = text
            .lines()
            .find_map(|l| l.strip_prefix("elapsedSecondsSinceSourceReachable "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap();
        assert!((4.0..10.0).contains(&since), "{since}");
        m.set_source_unreachable(None);
        assert!(m.render().contains("sourceConnected 1\n"));
    }

    #[test]
    fn status_follows_commits_failures_and_the_source() {
        let m = Metrics::new();
        assert_eq!(m.state().0, "starting");
        // Connecting to a source that does not answer is waiting for it, not starting.
        m.connecting("kafka://127.0.0.1:1/t");
        m.connecting_since_ms.store(
            chrono::Utc::now().timestamp_millis() - 5_000,
            Ordering::Relaxed,
        );
        let (state, why) = m.state();
        assert_eq!(state, "waiting_for_source");
        assert!(why.unwrap().contains("kafka://127.0.0.1:1/t"));
        assert!(m.ready().unwrap_err().contains("has not answered"));
        assert!(m.ready().is_err());
        m.configured_commit_interval_ms
            .store(1000, Ordering::Relaxed);
        m.effective_commit_interval_ms
            .store(1000, Ordering::Relaxed);
        let positions = Positions::from([("kafka:t:0".to_string(), 5)]);
        m.started("db.t", "kafka://k/t", &positions);
        assert_eq!(m.ready(), Ok(()));
        let (state, waiting) = m.state();
        assert_eq!(state, "running");
        assert!(waiting.unwrap().contains("kafka://k/t"));
        m.records_in.fetch_add(40, Ordering::Relaxed);
        assert_eq!(m.pending_records(), 40);
        assert!(m.render().contains("pendingRecords 40\n"));
        m.commit_started();
        assert_eq!(m.state().0, "committing");
        let after = Positions::from([("kafka:t:0".to_string(), 45)]);
        m.commit_landed(&Landed {
            attempts: 3,
            duration_ms: 1_500,
            snapshot_id: Some(77),
            positions: &after,
            data_files: 2,
            records: 40,
            records_in: 40,
        });
        assert_eq!(m.pending_records(), 0);
        let text = m.render();
        for line in [
            "retriedCommits 1\n",
            "commitConflicts 2\n",
            "failedCommits 0\n",
            "commitDurationSeconds_bucket{le=\"1\"} 0\n",
            "commitDurationSeconds_bucket{le=\"2.5\"} 1\n",
            "commitDurationSeconds_sum 1.5\n",
            "commitDurationSeconds_count 1\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
        let j = m.status_json();
        assert_eq!(j["last_commit"]["snapshot_id"], 77);
        assert_eq!(j["streams"][0]["committed_position"], 45);
        assert_eq!(j["commits"]["conflicts"], 2);
        // Backpressure stretches the interval: throttled.
        m.effective_commit_interval_ms
            .store(4000, Ordering::Relaxed);
        assert_eq!(m.state().0, "throttled");
        // A failed commit: not ready, and the error is shown.
        m.commit_failed("catalog: connection refused");
        assert!(m.ready().unwrap_err().contains("connection refused"));
        assert_eq!(
            m.status_json()["last_error"]["message"],
            "catalog: connection refused"
        );
        assert!(m.render().contains("failedCommits 1\n"));
        // The source gone: waiting for it, not ready.
        m.set_source_unreachable(Some(chrono::Utc::now().timestamp_millis() - 3_000));
        let (state, waiting) = m.state();
        assert_eq!(state, "waiting_for_source");
        assert!(waiting.unwrap().contains("not answering"));
        assert!(m.ready().unwrap_err().contains("not answering"));
        m.stopped();
        assert_eq!(m.state().0, "stopped");
    }
}
