//! Integration tests of the floe library, in one binary (named after the invariants they prove).

mod catalog;
mod change;
mod commit;
mod common;
mod compact;
mod diagnose;
mod evolve;
mod formats;
mod ingest;
mod ingest_changes;
mod ingest_maintain;
mod interop;
mod maintain;
mod maintain_dashboard;
mod maintain_store;
mod maintenance;
mod position_deletes;
mod refs;
mod row_group_merge;
mod safety;
mod sql;
mod strict_input;
mod table_properties;
mod untrusted;
mod v1;
mod write_stats;
