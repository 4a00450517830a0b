//! # floe
//!
//! Keeps streaming-fed Apache Iceberg tables healthy: writes streams into tables without a flood
//! of small files, shows what is wrong with a table, and fixes it.
//!
//! ```text
//!  input/stream ──> ingest ──> write ──> commit ──> [table: metadata.json, manifests, data files]
//!                                          ^                 │
//!                                          │                 v
//!                      compact / expire / clean <── inspect / sql (metadata tables)
//! ```
//!
//! - [`catalog`]: SQL catalog (SQLite, PostgreSQL) in the Iceberg JDBC schema; compare-and-swap.
//! - [`commit`]: the only commit path: snapshot producers for append, replace and delete, with
//!   validation and retry.
//! - [`write`]: partitioned, size-rolled Parquet writer.
//! - [`ingest`]: input decoding and conversion to the table schema.
//! - [`append`]: the `append` operation.
//! - [`inspect`]: metadata tables (`$files`, `$snapshots`, ...) as Arrow.
//! - [`sql`]: DataFusion over tables and metadata tables.
//! - [`diagnose`]: health report from metadata: observations, evidence, first action.
//! - [`expire`]: snapshot expiry and cleanup of the files it unreferences.
//! - [`clean`]: orphan files, old metadata files, manifest rewrite, table drop with purge;
//!   reachability; the delete fence (`clean::fence`): every delete in floe stays inside its
//!   table's location, out of other tables' locations and the catalog's files.

pub mod append;
pub mod catalog;
pub mod clean;
pub mod commit;
pub mod compact;
pub mod diagnose;
pub mod error;
pub mod expire;
pub mod fault;
pub mod ingest;
pub mod inspect;
pub mod properties;
pub mod schema;
pub mod sql;
pub mod write;

pub use catalog::{Catalog, CatalogConfig};
pub use error::{Error, Result};
/// The iceberg crate floe builds on (spec types, tables), re-exported for callers.
pub use iceberg;
