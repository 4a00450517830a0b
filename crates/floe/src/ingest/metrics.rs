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

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::ingest::maintain::Debt;
use crate::ingest::source::StreamLag;
use crate::maintain::state::ServiceState;

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
    maintenance: Mutex<Option<Arc<ServiceState>>>,
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
    pub fn attach_maintenance(&self, state: Arc<ServiceState>) {
        *self.maintenance.lock().expect("not poisoned") = Some(state);
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

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let mut counter = |name: &str, help: &str, v: u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(
            "recordsIn",
            "Records read from the source.",
            get(&self.records_in),
        );
        counter(
            "badRecords",
            "Records sent to the dead-letter sink.",
            get(&self.bad_records),
        );
        counter(
            "flushedDataFiles",
            "Data files written.",
            get(&self.flushed_data_files),
        );
        counter(
            "committedDataFilesCount",
            "Data files committed.",
            get(&self.committed_data_files_count),
        );
        counter(
            "committedDataFilesRecordCount",
            "Records in committed data files.",
            get(&self.committed_data_files_record_count),
        );
        counter("commits", "Successful commits.", get(&self.commits));
        counter(
            "throttledSeconds",
            "Seconds the commit interval was stretched beyond --commit-interval by backpressure.",
            get(&self.throttled_ms) / 1000,
        );
        counter(
            "spilledBytes",
            "Bytes spilled to local disk by the write buffers.",
            get(&self.spilled_bytes),
        );
        let mut gauge = |name: &str, help: &str, v: String| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        gauge(
            "lastFlushDurationMs",
            "Duration of the last flush.",
            get(&self.last_flush_duration_ms).to_string(),
        );
        gauge(
            "lastCommitDurationMs",
            "Duration of the last commit.",
            get(&self.last_commit_duration_ms).to_string(),
        );
        gauge(
            "elapsedSecondsSinceLastSuccessfulCommit",
            "Seconds since the last successful commit.",
            format!("{:.3}", self.elapsed_since_commit()),
        );
        gauge(
            "commitIntervalMs",
            "The commit interval in effect (longer than --commit-interval under backpressure).",
            get(&self.effective_commit_interval_ms).to_string(),
        );
        gauge(
            "sourceConnected",
            "1 while the source answers, 0 while its reader retries (a Kafka broker gone).",
            u8::from(self.source_unreachable_since_ms.load(Ordering::Relaxed) == 0).to_string(),
        );
        gauge(
            "elapsedSecondsSinceSourceReachable",
            "Seconds since the source last answered (0 while it answers).",
            format!("{:.3}", self.elapsed_since_source_reachable()),
        );
        if let Some(d) = self.debt.lock().expect("not poisoned").as_ref() {
            gauge(
                "debtSmallFilesPerPartition",
                "Small data files in the partition holding the most.",
                d.max_small_files.to_string(),
            );
            gauge(
                "debtSnapshotsSinceCompaction",
                "Snapshots since the last compaction.",
                d.snapshots_since_compaction.to_string(),
            );
            gauge(
                "debtSecondsSinceCompaction",
                "Seconds small files have waited since the last compaction.",
                format!("{:.3}", d.ms_since_compaction as f64 / 1000.0),
            );
            gauge(
                "debtOverLimit",
                "1 while a debt limit (floe.ingest.max-*) is passed.",
                u8::from(!d.over.is_empty()).to_string(),
            );
        }
        let b = *self.size_buckets.lock().expect("not poisoned");
        let _ = writeln!(s, "# HELP dataFilesSizeHistogram Sizes of flushed data files.\n# TYPE dataFilesSizeHistogram histogram");
        let mut cum = 0;
        for (i, upper) in SIZE_BUCKETS.iter().enumerate() {
            cum += b[i];
            let _ = writeln!(s, "dataFilesSizeHistogram_bucket{{le=\"{upper}\"}} {cum}");
        }
        cum += b[SIZE_BUCKETS.len()];
        let _ = writeln!(s, "dataFilesSizeHistogram_bucket{{le=\"+Inf\"}} {cum}");
        let _ = writeln!(
            s,
            "dataFilesSizeHistogram_sum {}",
            self.size_sum.load(Ordering::Relaxed)
        );
        let _ = writeln!(s, "dataFilesSizeHistogram_count {cum}");
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
            let lag = lag.lock().expect("not poisoned");
            if lag.is_empty() {
                continue;
            }
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
            for l in lag.iter() {
                let _ = writeln!(
                    s,
                    "{name}{{stream=\"{}\"}} {}",
                    l.stream.replace('"', "'"),
                    l.lag
                );
            }
        }
        if let Some(state) = self.maintenance.lock().expect("not poisoned").as_ref() {
            s.push_str(&state.render_metrics());
        }
        s
    }
}

/// Serves `metrics` at `addr` (any path answers with the exposition).
pub async fn serve(addr: &str, metrics: Arc<Metrics>) -> Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::invalid_option("--metrics-addr", addr, e.to_string()))?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ =
                    tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf))
                        .await;
                let body = metrics.render();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    }))
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
        assert!(text.contains("elapsedSecondsSinceSourceReachable 0.000\n"));
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
