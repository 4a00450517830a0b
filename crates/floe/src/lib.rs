//! # floe
//!
//! Keeps streaming-fed Apache Iceberg tables healthy: writes streams into tables without a flood
//! of small files, shows what is wrong with a table, and fixes it (compaction, snapshot expiry,
//! orphan and metadata cleanup).
//!
//! ## Architecture
//!
//! floe is a stack of layers. Every `use crate::` points down the stack (or sideways inside the
//! operations layer, without cycles); `layers.rs` (a unit test) fails the build on an import that
//! points up, a module cycle, or a circle between the files of one module.
//!
//! ```text
//!  maintain     the self-driving service: facts, triggers, scheduling of the operations;
//!      v        in_stream: the maintenance `floe ingest --maintain` runs, through ingest's hook
//!  ingest       records in: streams with exactly-once commits, backpressure on compaction
//!      v        debt, scale-out (--group); the maintenance beside it is its caller's hook
//!  operations   compact  change  expire  clean  diagnose  inspect  sql  alter  refs  append
//!      │            each reads tables, plans, writes files and commits through the layers below
//!      v
//!  records      input (NDJSON, CSV, Parquet, stream payloads) decoded into the table's schema
//!      v
//!  write        partitioned, size-rolled Parquet writer; deletes what a failed write left
//!      v
//!  coordination leases, run history and ingest hand-offs in one SQL database
//!      v
//!  commit       snapshot producers (append, replace, delete), validation, retry, cleanup
//!      v
//!  catalog      connect, load, create, drop, and the compare-and-swap of the table pointer
//!      v        (SQLite/PostgreSQL in the Iceberg JDBC schema, or an Iceberg REST server)
//!  table        identifiers, metadata and manifest readers, reachability, writer watermarks
//!      v        and exactly-once positions, schema/partition text
//!  storage      FileIO by scheme, S3 listing, the delete fence and the only delete functions
//!      v
//!  base         error, properties (every table property floe reads), secrets, fault, operation,
//!               server (the HTTP server and Prometheus exposition of the endpoints)
//! ```
//!
//! ## The data flow
//!
//! ```text
//!  input/stream ──> ingest ──> write ──> commit ──> catalog CAS ──> [metadata.json, manifests,
//!                                          ^                         data files on storage]
//!                                          │                                │
//!           compact / expire / clean ──────┘ <── inspect / sql / diagnose <─┘
//! ```
//!
//! A compaction, end to end: the CLI builds [`compact::CompactBuilder`] and calls the
//! [`operations::Operation`] contract. `plan()` loads the table through its
//! [`operations::Ctx`], scans it once with delete files attached, and plans file groups
//! ([`compact::plan`]): a [`compact::CompactPlan`] value, printed by `--dry-run`. `apply(plan)`
//! rewrites each group with [`write::TableWriter`], registers the outputs in a
//! [`commit::Ledger`], and commits a replace through [`commit::Committer`]: the producer
//! ([`commit::producer`]) writes manifests and a manifest list, the committer retries under its
//! [`commit::retry::RetryPolicy`] and hands each attempt to the catalog's compare-and-swap
//! (`Catalog::commit`, crate-private), which makes the snapshot current. On a conflict
//! ([`commit::Conflict`]) the ledger comes back and each group is committed alone with its part;
//! on any other definite failure the committer deletes the ledger's files through the table's
//! fence ([`storage::delete`]); on an unknown outcome it keeps them.
//!
//! An ingest commit: the driver (`ingest::stream`) reads the source, decodes into per-partition
//! buffers, and when the pure trigger (`ingest::trigger`) says a window is due, writes the
//! buffers and commits an append (or a row delta) whose summary carries the writer's positions
//! ([`table::exactly_once`]); the committer checks the writer fence on every attempt, so a
//! zombie writer cannot commit, and a restart resumes from the positions in the table.
//!
//! ## Where things live
//!
//! - [`operation`]: what every operation reports ([`operation::Cost`], [`operation::Progress`]).
//! - [`operations`]: the contract every operation that changes a table implements: `plan()` a
//!   value that changes nothing, `apply(plan)` re-validated at commit, `execute()`; and the
//!   read-only one ([`operations::Query`]: `query()`) of `diagnose`, `inspect` and `sql`.
//! - [`error`]: one error type; every variant names what to fix. [`properties`]: names,
//!   defaults and validation of table properties. [`secrets`]: the one masking function for
//!   everything printed. [`fault`]: fault injection for crash tests. [`server`]: the one HTTP
//!   server (axum) of `floe maintain --listen` and `floe ingest --metrics-addr`, and their
//!   Prometheus text exposition ([`server::exposition`]).
//! - [`storage`]: FileIO construction, the S3 lister, listings ([`storage::listing`]), the delete
//!   fence ([`storage::fence`]: nothing outside the table's own location is ever deleted) and
//!   batched deletes ([`storage::delete`]).
//! - [`table`]: `ns.table` identifiers and the name rule, manifests and live files,
//!   reachability, writer watermarks, the exactly-once protocol ([`table::exactly_once`]),
//!   schema text.
//! - [`catalog`]: the catalogs and their configuration (`floe.toml`, environment).
//! - [`commit`]: the commit path floe owns (the iceberg crate gives spec types and writers): one
//!   file per action ([`commit::action`]), the staged-files [`commit::Ledger`], conflicts as
//!   [`commit::Conflict`].
//! - [`coordination`]: leases, run history and ingest hand-offs in one SQL database.
//! - [`mod@write`]: Parquet data and delete files with full column metrics.
//! - [`records`]: the record codec: NDJSON records, CSV and Parquet files and stream payloads
//!   decoded into Arrow batches of a table's schema, every value converted exactly or the
//!   record set aside with its reason (shared by `append` and `ingest`).
//! - Operations: [`compact`]
//!   (`rewrite_data_files`), [`change`] (row-level changes: `delete --where`, upserts by key
//!   with position deletes), [`expire`] (`expire_snapshots`), [`clean`] (`remove_orphan_files`,
//!   old metadata files, `rewrite_manifests`, `table drop --purge`), [`diagnose`] (health
//!   report), [`inspect`] (metadata tables `$files`, `$snapshots`, ...), [`sql`] (read-only
//!   DataFusion), [`alter`] (property updates, schema and partition-spec evolution),
//!   [`refs`] (create and drop tags and branches).
//! - [`append`]: input files in one commit.
//! - [`ingest`]: `floe ingest`, streams with exactly-once commits, backpressure on compaction
//!   debt, and scale-out over worker processes with one coordinator (`--group`); the table's
//!   maintenance run in the same process through one committer (`--maintain`) is given by the
//!   caller through [`ingest::hook`].
//! - [`maintain`]: `floe maintain`, which decides per table which operation is due (policy
//!   from `floe.maintain.*` properties, facts from metadata, triggers) and runs them;
//!   [`maintain::in_stream`] is the same service for one table inside `floe ingest`.

pub mod base;
pub mod catalog;
pub mod commit;
pub mod coordination;
pub mod ingest;
pub mod maintain;
pub mod operations;
pub mod records;
pub mod storage;
pub mod table;
pub mod write;

#[cfg(test)]
mod layers;

pub use base::error::{Error, Result};
pub use catalog::{Catalog, CatalogConfig};
/// The iceberg crate floe builds on (spec types, tables), re-exported for callers.
pub use iceberg;
