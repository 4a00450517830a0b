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
//! 1. **Facts** ([`facts`]): from the table's metadata alone, the commits since the last
//!    compaction and what they added (snapshot summaries), the last write, the snapshots and
//!    the metadata log; manifest facts (one manifest list read, one listing) when gathered.
//! 2. **Triggers** ([`trigger`]): the table's [`policy::Policy`] (`floe.maintain.*`
//!    properties, compaction triggers named after Flink's `TableMaintenance`) weighed against
//!    the facts: every job either fired, with its numbers, or skipped, with the reason.
//! 3. **Plan and cost** (next): each due job's operation builds its `plan()` (the dry run)
//!    and its [`crate::operation::Cost`].
//! 4. **Scheduler** (next): due jobs of all tables ranked by benefit per cost, run under a
//!    budget of bytes and concurrent jobs.
//! 5. **Leases** ([`store`]): one runner per table across `floe maintain` instances, by
//!    expiring lease rows in a SQL database that also keeps the history of runs.
//! 6. **Run** (next): the operation's `execute()`, its [`crate::operation::Progress`] and
//!    the run recorded as the job's last run (an input of the triggers).
//!
//! This slice implements steps 1 and 2, pure and unit-tested: [`policy`], [`facts`]
//! ([`facts::compute`] over plain snapshot rows, [`facts::gather`] from a loaded table) and
//! [`trigger::evaluate`].
//!
//! What the service shows:
//!
//! - [`state`]: the shared [`state::ServiceState`] (each table's numbers, decision table and
//!   history; the jobs; the last pass) and its Prometheus exposition.
//! - [`http`]: `/metrics`, the JSON API (`/api/status`, `/api/tables`, `/api/tables/{name}`,
//!   `/api/jobs`) and the dashboard page on `--listen`.

pub mod facts;
pub mod http;
pub mod jobs;
pub mod partitions;
pub mod policy;
pub mod rates;
pub mod scheduler;
pub mod service;
pub mod state;
pub mod store;
pub mod trigger;

pub use facts::{ManifestFacts, TableFacts};
pub use policy::Policy;
pub use trigger::{evaluate, Candidate, JobKind};
