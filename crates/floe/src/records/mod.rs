//! Records in: decoding input (NDJSON records and files, CSV, Parquet) into Arrow batches of
//! the table's schema, with a checked conversion of every value and a reason for every record
//! that does not fit. Shared by `floe append` (files) and `floe ingest` (streams).
//!
//! - [`ndjson`]: what one NDJSON record is (one JSON object), and [`value`]: the checked
//!   conversion of every input value to its column type.
//! - [`files`], [`convert`]: input files (NDJSON, CSV, Parquet) decoded and converted to a
//!   table's schema with per-record errors (`floe append`).
//! - [`decode`]: a micro-batch of stream payloads into one batch, bad records set aside
//!   (`floe ingest`).

pub mod convert;
pub mod decode;
pub mod files;
pub mod ndjson;
#[cfg(test)]
mod proptests;
pub mod value;
