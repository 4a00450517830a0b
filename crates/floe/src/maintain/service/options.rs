//! What `floe maintain` is given and what it reports: its options, the catalogs it watches,
//! and the report of a pass and of a whole run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use iceberg::TableIdent;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::coordination::Store;
use crate::maintain::state::{Decision, ReplicaView};

/// Receives the service's log lines (job started, finished, failed; what it waits for).
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How `floe maintain` runs.
#[derive(Clone)]
pub struct MaintainOptions {
    /// This maintainer's name in leases and run records (default: host and PID).
    pub holder: String,
    pub max_concurrent_jobs: usize,
    /// 0: unlimited.
    pub max_rewrite_bytes_per_hour: u64,
    /// Time between passes.
    pub interval: Duration,
    /// A lease not renewed for this long is free (its holder died).
    pub lease_ttl: Duration,
    /// Glob patterns (`*`, `?`) on namespaces; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Glob patterns on `ns.table`; empty: every table.
    pub tables: Vec<String>,
    /// Evaluate and plan only: no lease taken, no job run.
    pub dry_run: bool,
    /// How long SIGTERM waits for running jobs before abandoning them.
    pub shutdown_grace: Duration,
    /// Policy properties every table's own properties override (`floe ingest --maintain`
    /// turns the roll-up on by default this way).
    pub policy_defaults: HashMap<String, String>,
    /// The service (not `--once`, not a dry run) divides the watched tables with the other
    /// live replicas of this group ([`crate::coordination::replicas`]); `None`: it maintains
    /// every watched table itself.
    pub replica_group: Option<String>,
    /// Compactions this large go to the distributed-compaction queue (`floe worker`s rewrite
    /// them, this service plans and commits); `None`: every job runs in place.
    pub queue: Option<QueueOptions>,
}

/// Where and when `floe maintain` hands large compactions to workers.
#[derive(Clone)]
pub struct QueueOptions {
    pub store: Arc<Store>,
    /// A compaction that rewrites at least this many bytes goes to the queue; smaller ones run
    /// in place (their queue round trips would cost more than they save).
    pub distribute_above: u64,
    /// Fail a queued compaction when no worker works on it for this long.
    pub worker_timeout: Option<Duration>,
}

impl Default for MaintainOptions {
    fn default() -> Self {
        MaintainOptions {
            holder: default_holder(),
            max_concurrent_jobs: 2,
            max_rewrite_bytes_per_hour: 0,
            interval: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(60),
            namespaces: vec![],
            tables: vec![],
            dry_run: false,
            shutdown_grace: Duration::from_secs(60),
            policy_defaults: HashMap::new(),
            replica_group: None,
            queue: None,
        }
    }
}

/// `host:pid`, unique among the maintainers sharing a lease store.
pub fn default_holder() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// One catalog the service watches; `prefix` (the catalog name) qualifies its table names
/// when several are watched.
#[derive(Clone)]
pub struct Source {
    pub catalog: Catalog,
    pub prefix: Option<String>,
    /// Only these tables (not listed: `floe ingest --maintain` watches its own table).
    pub only: Option<Vec<TableIdent>>,
}

/// What one pass decided.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PassReport {
    pub started_ms: i64,
    pub tables: usize,
    /// Every job of every table, fired or skipped, scored; `chosen` for the ones started (or,
    /// in a dry run, the ones that would be).
    pub decisions: Vec<Decision>,
    /// Tables skipped, with the problem (unreadable metadata, invalid property).
    pub problems: Vec<(String, String)>,
    /// Catalogs that could not be listed.
    pub unreachable: Vec<String>,
    pub jobs_started: usize,
    /// When replicas divide the tables: the group, its live replicas, and how many watched
    /// tables this pass left to the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicaView>,
}

/// What the whole run did (`--once`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MaintainSummary {
    /// Passes made.
    pub passes_total: usize,
    /// The reports of the passes: every pass of `--once`, the last few of the service.
    pub passes: Vec<PassReport>,
    pub jobs_succeeded: usize,
    pub jobs_failed: usize,
    /// Jobs that succeeded, by job name.
    pub succeeded_by_job: std::collections::BTreeMap<String, usize>,
    pub rewritten_bytes: u64,
    pub deleted_files: u64,
}
