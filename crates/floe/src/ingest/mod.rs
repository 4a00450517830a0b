//! Getting records in.
//!
//! - [`ndjson`]: what one NDJSON record is (one JSON object), and [`value`]: the checked
//!   conversion of every input value to its column type; both shared by `append` and `ingest`.
//! - [`files`], [`convert`]: input files (NDJSON, CSV, Parquet) decoded and converted to a
//!   table's schema with per-record errors (`floe append`).
//! - [`stream`]: `floe ingest` (its [`options`] and [`report`]s), built from [`source`] (Kafka, files, stdin) -> [`decode`]
//!   (bad records to [`dead_letter`]) -> [`buffer`] (per-partition buffers, spill; [`range`]: the
//!   `range` distribution over writer tasks) -> one
//!   exactly-once commit per trigger, with [`metrics`]; [`maintain`]: the table's maintenance
//!   run by the ingest itself (`--maintain`) and backpressure on compaction debt; [`group`]:
//!   one stream over several worker processes, one coordinator committing for all (`--group`).

pub mod buffer;
pub mod change;
pub mod convert;
pub mod dead_letter;
pub mod debezium;
pub mod decode;
pub mod files;
pub mod group;
pub mod maintain;
pub mod metrics;
pub mod ndjson;
pub mod options;
pub mod outage;
#[cfg(test)]
mod proptests;
pub mod range;
pub mod report;
pub mod source;
pub mod stream;
pub mod trigger;
pub mod upsert;
pub mod value;
