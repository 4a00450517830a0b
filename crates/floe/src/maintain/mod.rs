//! `floe maintain`: a self-driving service that keeps every table of a catalog healthy, by
//! deciding per table which maintenance job is due, and running the most useful ones first.
//!
//! ## The pipeline
//!
//! ```text
//!  table metadata ──> facts ──> triggers ──> plan() + Cost ──> scheduler ──> leases ──> run
//!  (+ properties)     what       which job     of each due     benefit per    one runner   the
//!                     changed    is due, and   operation       cost, under    per table    operation's
//!                     since the  why (or why   (dry run)       a budget                    execute()
//!                     last run   not)
//! ```
//!
//! 1. **Facts** ([`facts`], [`partitions`]): from the table's metadata, the commits since the
//!    last compaction and what they added (snapshot summaries), the last write, the snapshots
//!    and the metadata log; the manifests of the current snapshot and the metadata files on
//!    storage; per partition its live and small files and when it was last written.
//! 2. **Triggers** ([`trigger`]): the table's [`policy::Policy`] (`floe.maintain.*`
//!    properties, compaction triggers named after Flink's `TableMaintenance`) weighed against
//!    the facts: every job either fired, with its numbers, or skipped, with the reason. A
//!    table fed by a stream gets the streaming retention ([`streaming`]: judged from its
//!    commits, recorded on the table as `floe.maintain.streaming=true`).
//!    [`partitions::choose`] leaves partitions still being written to their writers and puts
//!    idle ones first.
//! 3. **Plan, benefit and cost** ([`jobs`]): each due job's operation builds its `plan()` (the
//!    dry run) and its [`crate::base::cost::Cost`]; the benefit counts the files it takes off
//!    readers, the cost in seconds comes from rates fitted on past runs ([`rates`]).
//! 4. **Scheduler** ([`scheduler`]): due jobs of all tables ranked by benefit per second, run
//!    under a budget of concurrent jobs and rewrite bytes per hour, with a fair share.
//! 5. **Leases** ([`crate::coordination`]): one runner per table across `floe maintain` instances, by
//!    expiring lease rows in a SQL database that also keeps the history of runs.
//! 6. **Run** ([`service`]): the pass loop (`--once` or every `--interval`), the operation's
//!    `execute()` under a renewed lease, the run recorded (an input of the triggers, the
//!    backoff and the rates), SIGTERM handling.
//!
//! Steps 2 and 4 are pure and unit-tested ([`trigger::evaluate`], [`partitions::choose`],
//! [`scheduler::schedule`], [`rates::fit`]); the rest is tested on real tables.
//!
//! What the service shows:
//!
//! - [`state`]: the shared [`state::ServiceState`] (each table's numbers, decision table and
//!   history; the jobs; the last pass) and its Prometheus exposition.
//! - [`http`]: `/metrics`, the JSON API (`/api/status`, `/api/tables`, `/api/tables/{name}`,
//!   `/api/jobs`) and the dashboard page on `--listen`.
//!
//! [`in_stream`]: the service of one table run inside `floe ingest --maintain`, given to the
//! ingest as its maintenance hook ([`crate::ingest::hook`]), and the compaction debt its
//! backpressure reads.

pub mod facts;
pub mod http;
pub mod in_stream;
pub mod jobs;
pub mod partitions;
pub mod policy;
pub mod rates;
pub mod scheduler;
pub mod service;
pub mod state;
pub mod streaming;
/// The lease and run-history store, now the coordination layer ([`crate::coordination`]).
pub use crate::coordination as store;
pub mod trigger;

pub use facts::{ManifestFacts, TableFacts};
pub use policy::Policy;
pub use trigger::{evaluate, Candidate, JobKind};
