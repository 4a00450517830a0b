//! The `floe maintain` loop: every pass lists the watched tables, evaluates each
//! ([`super::jobs::evaluate_table`]), lets the [`super::scheduler`] pick what runs under the
//! budget, takes each picked table's lease ([`crate::coordination`]) and runs the job in the
//! background, renewing the lease while it runs. `--once` repeats passes until no job is
//! due and every job finished; the service waits `--interval` between passes (or less, when a
//! job finishes and frees a slot).
//!
//! Time: lease expiries, run records and the triggers that compare with them read the lease
//! store's clock ([`Store::now_ms`]), not this machine's; each pass compares the two and warns
//! (once per interval) when they disagree by more than a quarter of the lease TTL.
//!
//! Failures never loop hot: a failed job is recorded and its table backs off
//! ([`super::jobs::backoff_ms`]); a table whose metadata cannot be read or whose policy is
//! invalid is reported as a problem and skipped, never cleaned; an unreachable catalog or
//! lease store is reported as what the service waits for while it retries.

mod clock;
mod job;
mod options;
mod pass;
mod replicas;
mod run;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinSet;

use super::state::ServiceState;
use super::trigger::JobKind;
use crate::coordination::{RunRecord, Store};
use crate::table::ident::printable;

pub use crate::maintain::state::ReplicaView;
pub use options::{
    default_holder, LogFn, MaintainOptions, MaintainSummary, PassReport, QueueOptions, Source,
};

struct Running {
    job: JobKind,
    planned_rewrite: u64,
}

struct Finished {
    scope: String,
    record: RunRecord,
}

/// The maintenance service.
pub struct Maintainer {
    sources: Vec<Source>,
    store: Arc<Store>,
    state: Arc<ServiceState>,
    opts: MaintainOptions,
    log: LogFn,
    running: JoinSet<Finished>,
    busy: HashMap<String, Running>,
    /// The lease scope of each running task, to free the right table if one panics.
    task_scopes: HashMap<tokio::task::Id, String>,
    summary: MaintainSummary,
    wake: Option<Arc<tokio::sync::Notify>>,
    /// Added to this machine's clock (tests stand a maintainer with a wrong clock up this way).
    clock_skew_ms: i64,
    /// When the last clock-skew warning was given.
    skew_warned: Option<Instant>,
    /// The store's clock minus this machine's, at the last pass.
    store_offset_ms: i64,
    /// This process's id among the replicas (two processes given one holder name differ here).
    instance: String,
    /// The service divides the tables with the other replicas of `opts.replica_group`.
    dividing: bool,
    /// Notified by the heartbeat when the live replicas changed: a pass re-divides at once.
    membership: Arc<tokio::sync::Notify>,
}

impl Maintainer {
    pub fn new(
        sources: Vec<Source>,
        store: Arc<Store>,
        state: Arc<ServiceState>,
        opts: MaintainOptions,
    ) -> Self {
        Maintainer {
            sources,
            store,
            state,
            opts,
            log: escaped(Arc::new(|line: &str| eprintln!("{line}"))),
            running: JoinSet::new(),
            busy: HashMap::new(),
            task_scopes: HashMap::new(),
            summary: MaintainSummary::default(),
            wake: None,
            clock_skew_ms: 0,
            skew_warned: None,
            store_offset_ms: 0,
            instance: uuid::Uuid::new_v4().to_string(),
            dividing: false,
            membership: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// A pass starts as soon as `wake` is notified (after a commit of the ingest the service
    /// runs in), not only every `interval`.
    pub fn with_wake(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Runs as if this machine's clock were `skew_ms` off (ahead when positive): what a
    /// maintainer without NTP sees. Leases and run times follow the store's clock anyway.
    pub fn with_clock_skew_ms(mut self, skew_ms: i64) -> Self {
        self.clock_skew_ms = skew_ms;
        self
    }

    /// Where log lines go (default: stderr), each one line: control, bidirectional and
    /// zero-width characters (of table names made by other tools) are escaped
    /// ([`crate::table::ident::printable`]).
    pub fn with_log(mut self, log: LogFn) -> Self {
        self.log = escaped(log);
        self
    }

    pub fn state(&self) -> Arc<ServiceState> {
        self.state.clone()
    }
}

/// `log`, receiving each line escaped for humans.
fn escaped(log: LogFn) -> LogFn {
    Arc::new(move |line: &str| log(&printable(line)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn backoff_doubles_to_an_hour() {
        use crate::maintain::jobs::backoff_ms;
        assert_eq!(backoff_ms(0), 0);
        assert_eq!(backoff_ms(1), 60_000);
        assert_eq!(backoff_ms(2), 120_000);
        assert_eq!(backoff_ms(7), 3_600_000);
        assert_eq!(backoff_ms(40), 3_600_000);
    }
}
