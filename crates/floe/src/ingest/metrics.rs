//! Ingest metrics, in Prometheus text format on `--metrics-addr`, with the names of Iceberg's
//! Flink sink (`flushedDataFiles`, `dataFilesSizeHistogram`, `lastFlushDurationMs`,
//! `committedDataFilesCount`, `committedDataFilesRecordCount`, `lastCommitDurationMs`,
//! `elapsedSecondsSinceLastSuccessfulCommit`) plus records in, bad records, spilled bytes and
//! Kafka lag per partition (`sourceLag` from the fetched offset, `sourceLagCommitted` from the
//! position in the table), the source's reachability (`sourceConnected`,
//! `elapsedSecondsSinceSourceReachable`), the compaction debt and backpressure (`debtSmallFilesPerPartition`,
//! `debtSnapshotsSinceCompaction`, `debtSecondsSinceCompaction`, `commitIntervalMs`,
//! `throttledSeconds`), and with `--maintain` the in-process maintenance's `floe_maintain_*`
//! metrics.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::base::error::Result;
use crate::base::server;
use crate::base::server::exposition::{self, Family};
use crate::ingest::debt::Debt;
use crate::ingest::hook::MetricsFn;
use crate::ingest::source::StreamLag;

/// Upper bounds of the data file size histogram (bytes).
const SIZE_BUCKETS: [u64; 8] = [
    1 << 20,
    8 << 20,
    32 << 20,
    64 << 20,
    128 << 20,
    256 << 20,
    512 << 20,
    1 << 30,
];

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
    size_buckets: Mutex<[u64; SIZE_BUCKETS.len() + 1]>,
    size_sum: AtomicU64,
    lag: Mutex<Vec<StreamLag>>,
    lag_committed: Mutex<Vec<StreamLag>>,
    /// Epoch ms the source last answered while it does not (0: it answers).
    source_unreachable_since_ms: AtomicI64,
}

impl Metrics {
    /// New metrics, started now.
    pub fn new() -> Arc<Self> {
        let m = Self::default();
        m.started_epoch_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
        Arc::new(m)
    }

    /// Records the sizes of flushed data files.
    pub fn observe_files(&self, sizes: impl IntoIterator<Item = u64>) {
        let mut b = self.size_buckets.lock().expect("not poisoned");
        for s in sizes {
            let i = SIZE_BUCKETS
                .iter()
                .position(|u| s <= *u)
                .unwrap_or(SIZE_BUCKETS.len());
            b[i] += 1;
            self.size_sum.fetch_add(s, Ordering::Relaxed);
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
        let b = *self.size_buckets.lock().expect("not poisoned");
        let mut cum = 0;
        let mut buckets = Vec::with_capacity(SIZE_BUCKETS.len());
        for (i, upper) in SIZE_BUCKETS.iter().enumerate() {
            cum += b[i];
            buckets.push((*upper as f64, cum));
        }
        cum += b[SIZE_BUCKETS.len()];
        out.push(Family::histogram(
            "dataFilesSizeHistogram",
            "Sizes of flushed data files.",
            &buckets,
            self.size_sum.load(Ordering::Relaxed) as f64,
            cum,
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

/// Serves `metrics` at `addr` through [`crate::base::server`] (any path answers with the
/// exposition).
pub async fn serve(addr: &str, metrics: Arc<Metrics>) -> Result<tokio::task::JoinHandle<()>> {
    let (_, task) = server::spawn("--metrics-addr", addr, move |_, _| {
        let mut r = http::Response::new(metrics.render());
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(prometheus::TEXT_FORMAT),
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
}
