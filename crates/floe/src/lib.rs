//! # floe
//!
//! Keeps streaming-fed Apache Iceberg tables healthy: writes streams into tables without a flood
//! of small files, shows what is wrong with a table, and fixes it (compaction, snapshot expiry,
//! orphan and metadata cleanup).
//!
//! ## Architecture: the folders are the layers
//!
//! Every folder of `src/` is a layer, listed here from the top down. Every `use crate::` points
//! down the stack (or sideways between the operations, without cycles); `layers.rs` (a unit
//! test) fails the build on an import that points up, a cycle between units, or a circle
//! between the files of one unit. Two folders are floors rather than modules: each child of
//! `base/` and of `operations/` is a unit of its own, placed and checked alone.
//!
//! ```text
//!  maintain/      the self-driving service: facts, triggers, scheduling of the operations;
//!      v          in_stream: the maintenance `floe ingest --maintain` runs, through ingest's hook
//!  ingest/        streams in: exactly-once commits, backpressure on compaction debt, scale-out
//!      v          (--group); the pure trigger and outage tracker; the after-commit hook
//!  operations/    mod.rs: the contract (plan, apply, execute; Ctx; Planned) and query.rs (Query)
//!      │            append  alter  refs  compact  change  expire  clean      (change a table)
//!      │            diagnose  inspect  sql                                    (read only)
//!      v
//!  records/       input (NDJSON, CSV, Parquet, stream payloads) decoded into the table's schema
//!      v
//!  write/         partitioned, size-rolled Parquet writer; deletes what a failed write left
//!      v
//!  coordination/  leases, run history and ingest hand-offs in one SQL database
//!      v
//!  commit/        one file per action (append, rewrite, row delta, ...), the staged-files
//!      v          ledger, validation, conflicts, retry
//!  catalog/       connect, load, create, drop, and the compare-and-swap of the table pointer
//!      v          (SQLite/PostgreSQL in the Iceberg JDBC schema, or an Iceberg REST server);
//!      v          the metadata it keeps between commits
//!  table/         identifiers, metadata and manifest readers, reachability, writer watermarks,
//!      v          the exactly-once protocol, schema/partition text, metadata.json split into
//!      v          a parsed head and an unparsed history (appends splice onto it)
//!  storage/       FileIO by scheme, S3 listing, the delete fence and the only delete functions
//!      v
//!  base/          error, properties (every table property floe reads), secrets, fault, cost
//!                 (what operations report), server (the HTTP server and Prometheus text)
//! ```
//!
//! ## The data flow
//!
//! ```text
//!  input/stream ──> ingest ──> records ──> write ──> commit ──> catalog CAS ──> [metadata.json,
//!                                                      ^          manifests, data files]
//!                                                      │                    │
//!           compact / expire / clean / change ─────────┘ <── inspect / sql / diagnose <─┘
//! ```
//!
//! A compaction, end to end: the CLI builds [`operations::compact::CompactBuilder`] and calls
//! the [`operations::Operation`] contract. `plan()` loads the table through its
//! [`operations::Ctx`], walks its manifests once (delete manifests into an index, then each
//! live data file as a scan task with its delete files; past `plan-batch-files` candidates the
//! tasks go to a local file), and plans file groups ([`operations::compact::plan`]): a
//! [`operations::compact::CompactPlan`] value, printed by `--dry-run`. `apply(plan)` rewrites
//! each group (in batches read back from that file, when it was spilled) with
//! [`write::TableWriter`], registers the
//! outputs in a [`commit::Ledger`], and commits a replace ([`commit::action`]) through
//! [`commit::Committer`]: the producer ([`commit::producer`]) writes manifests and a manifest
//! list, the committer retries under its [`commit::retry::RetryPolicy`] and hands each attempt
//! to the catalog's compare-and-swap (`Catalog::commit`, crate-private), which makes the
//! snapshot current. On a conflict ([`commit::Conflict`]) the ledger comes back and each group
//! is committed alone with its part; on any other definite failure the committer deletes the
//! ledger's files through the table's fence ([`storage::delete`]); on an unknown outcome it
//! keeps them.
//!
//! An ingest commit: the driver (`ingest::stream`) reads the source, decodes records
//! ([`records`]) into per-partition buffers, and when the pure trigger (`ingest::trigger`) says
//! a window is due, writes the buffers ([`write`]) and commits an append (or a row delta) whose
//! summary carries the writer's positions ([`table::exactly_once`]) through the same
//! committer; it checks the writer fence on every attempt, so a zombie writer cannot commit,
//! and a restart resumes from the positions in the table. After the commit the driver calls
//! its hook ([`ingest::hook`]), which `floe ingest --maintain` fills with
//! [`maintain::in_stream`].
//!
//! ## Where things live
//!
//! - [`base`]: [`base::error`] (one error type; every variant names what to fix),
//!   [`base::properties`] (names, defaults and validation of table properties),
//!   [`base::secrets`] (the one masking function for everything printed), [`base::fault`]
//!   (fault injection for crash tests), [`base::cost`] (what every operation reports:
//!   [`base::cost::Cost`], [`base::cost::Progress`]), [`base::server`] (the one HTTP server,
//!   axum, of `floe maintain --listen` and `floe ingest --metrics-addr`, and their Prometheus
//!   text exposition).
//! - [`storage`]: FileIO construction, the S3 lister, listings ([`storage::listing`]), the delete
//!   fence ([`storage::fence`]: nothing outside the table's own location is ever deleted) and
//!   batched deletes ([`storage::delete`]).
//! - [`table`]: `ns.table` identifiers and the name rule, manifests and live files,
//!   reachability, writer watermarks, the exactly-once protocol ([`table::exactly_once`]),
//!   schema text, and format v3's deletion vectors ([`table::deletion_vector`]: the
//!   `deletion-vector-v1` blob, decoded and checked) and row lineage ([`table::lineage`]).
//! - [`catalog`]: the catalogs and their configuration (`floe.toml`, environment).
//! - [`commit`]: the commit path floe owns (the iceberg crate gives spec types and writers): one
//!   file per action ([`commit::action`]), the staged-files [`commit::Ledger`], conflicts as
//!   [`commit::Conflict`].
//! - [`coordination`]: leases, run history and ingest hand-offs in one SQL database.
//! - [`mod@write`]: Parquet data and delete files with full column metrics, deletion vectors in
//!   Puffin files (format v3), and the rewriter of live rows that keeps their lineage
//!   ([`write::rewrite`]).
//! - [`records`]: the record codec: NDJSON records, CSV and Parquet files and stream payloads
//!   decoded into Arrow batches of a table's schema, every value converted exactly or the
//!   record set aside with its reason (shared by `append` and `ingest`).
//! - [`operations`]: the contract every operation that changes a table implements (`plan()` a
//!   value that changes nothing, `apply(plan)` re-validated at commit, `execute()`), the
//!   read-only one ([`operations::Query`]), and the operations:
//!   [`operations::compact`] (`rewrite_data_files`, and `rewrite_position_delete_files`),
//!   [`operations::change`] (`delete --where`, `convert-equality-deletes`, upserts by key with
//!   position deletes), [`operations::expire`] (`expire_snapshots`), [`operations::clean`]
//!   (`remove_orphan_files`, old metadata files, `rewrite_manifests`, `table drop --purge`),
//!   [`operations::append`] (input files in one commit), [`operations::alter`] (property
//!   updates, schema and partition-spec evolution), [`operations::refs`] (create and drop tags
//!   and branches), [`operations::diagnose`] (health report), [`operations::inspect`]
//!   (metadata tables `$files`, `$snapshots`, ...), [`operations::sql`] (read-only DataFusion).
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
