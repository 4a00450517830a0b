//! The step of one table: its picked job started in the background under the table's lease
//! (renewed while it runs), and recorded when it finishes.

use std::future::Future;
use std::time::{Duration, Instant};

use super::clock::now_ms;
use super::{Finished, Maintainer, Running};
use crate::base::cost::Cost;
use crate::coordination::{RunRecord, Store};
use crate::maintain::jobs::{run_job, Planned, Watched};
use crate::maintain::policy::{human_bytes, Policy};
use crate::maintain::state::Decision;
use crate::maintain::trigger::JobKind;
use crate::operations::compact::distributed::Distributed;

impl Maintainer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        &mut self,
        w: Watched,
        scope: String,
        history_scope: String,
        p: Planned,
        partitions: Option<Vec<String>>,
        rewrite_bytes: u64,
        policy: &Policy,
        d: Decision,
        reason: String,
    ) {
        // A large compaction goes to the workers of the queue; this service plans and commits.
        let distributed = self
            .opts
            .queue
            .as_ref()
            .filter(|q| p.job == JobKind::Compact && rewrite_bytes >= q.distribute_above)
            .map(|q| Distributed {
                store: q.store.clone(),
                coordinator: self.opts.holder.clone(),
                lease_ttl: self.opts.lease_ttl,
                poll: Distributed::POLL,
                worker_timeout: q.worker_timeout,
            });
        let through = match &distributed {
            Some(d) => format!(
                ", {} through the queue in {}",
                human_bytes(rewrite_bytes),
                d.store.display_uri()
            ),
            None => String::new(),
        };
        let id = self.state.job_started(
            &w.name,
            &d.job,
            &format!("{}{through}", d.scope),
            &reason,
            d.cost,
            self.shown_now_ms(),
        );
        (self.log)(&format!(
            "start {} on {} ({}{through}): {reason}",
            d.job, w.name, d.scope
        ));
        self.busy.insert(
            scope.clone(),
            Running {
                job: p.job,
                planned_rewrite: rewrite_bytes,
            },
        );
        let (store, state, log) = (self.store.clone(), self.state.clone(), self.log.clone());
        let (holder, ttl, policy) = (
            self.opts.holder.clone(),
            self.opts.lease_ttl,
            policy.clone(),
        );
        let task_scope = scope.clone();
        let task = self.running.spawn(async move {
            // Run times on the store's clock (this machine's only if the store is gone, and
            // then the record cannot be written either).
            let started = store.now_ms().await.unwrap_or_else(|_| now_ms());
            let clock = Instant::now();
            let result = with_lease(&store, &scope, &holder, ttl, async {
                run_job(&w, &p, partitions, &policy, distributed).await
            })
            .await;
            let finished = store.now_ms().await.unwrap_or_else(|_| now_ms());
            let cost = result.as_ref().copied().unwrap_or_default();
            let record = RunRecord {
                scope: history_scope,
                job: p.job.to_string(),
                holder: holder.clone(),
                started_ms: started,
                finished_ms: finished,
                succeeded: result.is_ok(),
                error: result.as_ref().err().cloned(),
                files_read: cost.files_to_read,
                bytes_read: cost.bytes_to_read,
                files_written: cost.files_to_write,
                bytes_written: cost.bytes_to_write,
                files_deleted: cost.files_to_delete,
                bytes_deleted: cost.bytes_to_delete,
            };
            if let Err(e) = store.record_run(&record).await {
                log(&format!("{}: could not record the run: {e}", w.name));
            }
            if let Err(e) = store.release(&scope, &holder).await {
                log(&format!(
                    "{}: could not release the lease (it expires): {e}",
                    w.name
                ));
            }
            match &result {
                Ok(c) => log(&format!(
                    "done {} on {} in {:.1}s: read {} files ({}), wrote {} ({}), deleted {}",
                    p.job,
                    w.name,
                    clock.elapsed().as_secs_f64(),
                    c.files_to_read,
                    human_bytes(c.bytes_to_read),
                    c.files_to_write,
                    human_bytes(c.bytes_to_write),
                    c.files_to_delete
                )),
                Err(e) => log(&format!("failed {} on {}: {e}", p.job, w.name)),
            }
            state.job_finished(id, result, finished);
            Finished { scope, record }
        });
        self.task_scopes.insert(task.id(), task_scope);
    }

    /// Collects the jobs that finished.
    pub(super) fn reap(&mut self) {
        while let Some(done) = self.running.try_join_next() {
            self.finish(done);
        }
    }

    pub(super) fn finish(&mut self, done: std::result::Result<Finished, tokio::task::JoinError>) {
        match done {
            Ok(f) => {
                self.busy.remove(&f.scope);
                self.task_scopes.retain(|_, s| *s != f.scope);
                if f.record.succeeded {
                    self.summary.jobs_succeeded += 1;
                    *self
                        .summary
                        .succeeded_by_job
                        .entry(f.record.job.clone())
                        .or_default() += 1;
                    self.summary.rewritten_bytes += f.record.bytes_read;
                    self.summary.deleted_files += f.record.files_deleted;
                } else {
                    self.summary.jobs_failed += 1;
                }
            }
            Err(e) => {
                // A panicked job: its lease expires by itself; count it failed.
                (self.log)(&format!("a job task failed: {e}"));
                self.summary.jobs_failed += 1;
                if let Some(scope) = self.task_scopes.remove(&e.id()) {
                    self.busy.remove(&scope);
                }
            }
        }
    }

    /// Waits for every running job.
    pub(super) async fn drain(&mut self) {
        while let Some(done) = self.running.join_next().await {
            self.finish(done);
        }
    }
}

/// Runs `job` while holding the lease of `scope`: renewed every third of `ttl`; when it is
/// lost (another maintainer took it after an expiry), the job is abandoned.
async fn with_lease<F>(
    store: &Store,
    scope: &str,
    holder: &str,
    ttl: Duration,
    job: F,
) -> std::result::Result<Cost, String>
where
    F: Future<Output = std::result::Result<Cost, String>>,
{
    tokio::pin!(job);
    let mut tick = tokio::time::interval(ttl / 3);
    tick.tick().await;
    loop {
        tokio::select! {
            r = &mut job => return r,
            _ = tick.tick() => {
                let renewed = match store.now_ms().await {
                    Ok(now) => store.renew(scope, holder, ttl, now).await,
                    Err(e) => Err(e),
                };
                match renewed {
                    Ok(true) => {}
                    Ok(false) => return Err(format!("lease on {scope} lost; job abandoned")),
                    // A store that does not answer: keep going until the lease would have
                    // expired, then give up.
                    Err(e) => {
                        tracing::warn!("renewing the lease on {scope}: {e}");
                    }
                }
            }
        }
    }
}
