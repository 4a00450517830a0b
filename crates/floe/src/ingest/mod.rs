//! Getting records in: input files (NDJSON, CSV, Parquet) decoded and converted to a table's
//! schema with per-record errors. Streaming sources (Kafka, stdin, followed files) build on the
//! same conversion.

pub mod convert;
pub mod files;
