//! `floe worker`: a distributed-compaction worker (see floe's
//! `operations::compact::distributed`): claims rewrite tasks from the queue, writes their
//! outputs to the table's storage, reports them; SIGINT/SIGTERM finish the task in hand.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use floe::base::properties::parse_duration;
use floe::operations::compact::worker::{route, work, WorkerOptions, WorkerState};

use crate::output::Out;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The task queue: postgres://... (or sqlite:///path for one machine); the database
    /// coordinators (`floe compact --distributed`) queue into.
    #[arg(long, value_name = "URI", env = "FLOE_QUEUE")]
    queue: String,
    /// This worker's name in the queue (default: host:pid; in Kubernetes, the pod name).
    #[arg(long)]
    worker_id: Option<String>,
    /// Exit after this long without a task (e.g. 30s; default: run until stopped).
    #[arg(long, value_name = "DURATION")]
    stop_when_idle: Option<String>,
    /// A task lease not renewed for this long is given to another worker.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    lease_ttl: String,
    /// Serve /healthz, /readyz and /metrics on this address (e.g. 0.0.0.0:9465).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

pub async fn run(
    storage: std::collections::HashMap<String, String>,
    a: WorkerArgs,
    out: &Out,
) -> Result<()> {
    let opts = WorkerOptions {
        worker_id: a
            .worker_id
            .clone()
            .unwrap_or_else(floe::maintain::service::default_holder),
        storage,
        lease_ttl: parse_duration("--lease-ttl", &a.lease_ttl)?,
        stop_when_idle: a
            .stop_when_idle
            .as_deref()
            .map(|s| parse_duration("--stop-when-idle", s))
            .transpose()?,
        poll: std::time::Duration::from_millis(500),
    };
    let state = Arc::new(WorkerState::default());
    // Served before the queue is reached: /readyz says 503 until it is.
    let _server = match &a.listen {
        Some(addr) => {
            let s = state.clone();
            let (bound, task) =
                floe::base::server::spawn("--listen", addr, move |m, t| route(&s, m, t)).await?;
            out.note(format!(
                "serving /healthz, /readyz and /metrics on http://{bound}"
            ));
            Some(AbortOnDrop(task))
        }
        None => None,
    };
    let store = floe::coordination::Store::connect(&a.queue).await?;
    out.note(format!(
        "worker {} pulling compaction tasks from {}",
        opts.worker_id,
        store.display_uri()
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        crate::ingest::shutdown_signal().await;
        flag.store(true, Ordering::Relaxed);
    });
    let report = work(&store, &opts, stop, state).await;
    store.close().await;
    let report = report?;
    out.result(&serde_json::to_value(&report)?, || {
        format!(
            "worker {}: {} task(s) done ({} rows, {} read, {} written), {} failed, {} lost, {:.1}s",
            report.worker,
            report.tasks_done,
            report.rows,
            crate::output::human_bytes(report.bytes_read),
            crate::output::human_bytes(report.bytes_written),
            report.tasks_failed,
            report.tasks_lost,
            report.seconds
        )
    });
    Ok(())
}

/// Stops the HTTP server when the worker ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
