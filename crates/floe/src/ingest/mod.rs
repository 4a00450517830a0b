//! Getting records in.
//!
//! - [`files`], [`convert`]: input files (NDJSON, CSV, Parquet) decoded and converted to a
//!   table's schema with per-record errors (`floe append`).
//! - [`stream`]: `floe ingest`, built from [`source`] (Kafka, files, stdin) -> [`decode`]
//!   (bad records to [`dead_letter`]) -> [`buffer`] (per-partition buffers, spill) -> one
//!   exactly-once commit per trigger, with [`metrics`].

pub mod buffer;
pub mod convert;
pub mod dead_letter;
pub mod decode;
pub mod files;
pub mod metrics;
pub mod source;
pub mod stream;
