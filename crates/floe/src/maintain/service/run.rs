//! The run loop: `--once` (passes until nothing is due and every job finished) and the
//! service (a pass every `--interval` until shutdown).

use std::future::Future;
use std::time::Duration;

use super::options::MaintainSummary;
use super::Maintainer;
use crate::base::error::Result;
use crate::base::properties::human_ms;

impl Maintainer {
    /// `--once`: passes until no job is due and every job finished (a dry run: one pass).
    pub async fn run_once(mut self) -> Result<MaintainSummary> {
        for _ in 0..1000 {
            let report = self.pass().await?;
            self.summary.passes_total += 1;
            let started = report.jobs_started;
            self.summary.passes.push(report);
            if self.opts.dry_run {
                break;
            }
            if started == 0 && self.busy.is_empty() {
                break;
            }
            // Wait for one job to free a slot, then plan again.
            if let Some(done) = self.running.join_next().await {
                self.finish(done);
            }
        }
        self.drain().await;
        Ok(self.summary)
    }

    /// The service: a pass every `interval` (sooner when a job finishes) until `shutdown`
    /// resolves; then running jobs get `shutdown_grace` to finish, and are abandoned after it
    /// (their uncommitted outputs are orphans `remove-orphan-files` can prove unreferenced;
    /// their leases expire).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<MaintainSummary> {
        tokio::pin!(shutdown);
        let heartbeat = self.start_dividing();
        let membership = self.membership.clone();
        loop {
            match self.pass().await {
                Ok(report) => {
                    self.summary.passes_total += 1;
                    let keep = 5;
                    self.summary.passes.push(report);
                    if self.summary.passes.len() > keep {
                        self.summary.passes.remove(0);
                    }
                }
                Err(e) => {
                    let w = format!(
                        "{e}; retrying in {}",
                        human_ms(self.opts.interval.as_millis() as u64)
                    );
                    (self.log)(&format!("waiting: {w}"));
                    self.state.set_last_pass(self.shown_now_ms(), Some(w));
                }
            }
            let sleep = tokio::time::sleep(self.opts.interval);
            tokio::pin!(sleep);
            let wake = self.wake.clone();
            let woken = async move {
                match wake {
                    Some(w) => w.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(woken);
            loop {
                tokio::select! {
                    _ = &mut shutdown => {
                        (self.log)(&format!(
                            "stopping: waiting up to {} for {} running job(s)",
                            human_ms(self.opts.shutdown_grace.as_millis() as u64),
                            self.busy.len()
                        ));
                        let grace = self.opts.shutdown_grace;
                        if tokio::time::timeout(grace, self.drain()).await.is_err() {
                            (self.log)(&format!("abandoning {} job(s)", self.busy.len()));
                            self.running.abort_all();
                            for scope in self.busy.keys() {
                                let _ = self.store.release(scope, &self.opts.holder).await;
                            }
                        }
                        self.stop_dividing(heartbeat).await;
                        return Ok(self.summary);
                    }
                    _ = &mut sleep => break,
                    _ = &mut woken => break,
                    _ = membership.notified() => {
                        (self.log)("the live replicas changed: dividing the tables again");
                        break;
                    }
                    Some(done) = self.running.join_next(), if !self.running.is_empty() => {
                        self.finish(done);
                        // A slot is free: plan again soon, not at once (a finished job may
                        // have made its table due for the next job).
                        sleep.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(1).min(self.opts.interval));
                    }
                }
            }
        }
    }
}
