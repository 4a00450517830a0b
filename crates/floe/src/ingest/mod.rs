//! Getting records in.
//!
//! - [`stream`]: `floe ingest` (its [`options`] and [`report`]s), built from [`source`] (Kafka,
//!   files, stdin) -> [`crate::records::decode`]
//!   (bad records to [`dead_letter`]) -> [`buffer`] (per-partition buffers, spill; [`range`]: the
//!   `range` distribution over writer tasks) -> one
//!   exactly-once commit per trigger, with [`metrics`]; [`hook`]: the table's maintenance
//!   run beside the ingest (`--maintain`), given by the caller; [`debt`]: backpressure on
//!   compaction debt; [`group`]:
//!   one stream over several worker processes, one coordinator committing for all (`--group`).

pub mod buffer;
pub mod change;
pub mod dead_letter;
pub mod debezium;
pub mod debt;
pub mod group;
pub mod hook;
pub mod metrics;
pub mod options;
pub mod outage;
pub mod range;
pub mod report;
pub mod source;
pub mod stream;
pub mod trigger;
pub mod upsert;
