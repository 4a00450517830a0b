//! The table layer: what a table *is*, read from its metadata, with no catalog in sight.
//!
//! - [`ident`]: `ns.table` identifiers and the name rule (names become directories).
//! - [`manifests`]: manifest lists and manifests of a snapshot; live data and delete files.
//! - [`reach`]: every file a set of snapshots needs (reachability, for expiry and orphans).
//! - [`watermarks`]: writer watermarks kept in snapshot summaries (floe, Flink).
//! - [`schema`]: schema, partition and sort-order text as users write it.
//! - [`read_metadata`], [`refs`], [`default_spec`]: table metadata helpers.

pub mod ident;
pub mod manifests;
pub mod reach;
pub mod schema;
pub mod watermarks;

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{PartitionSpec, TableMetadata};
use iceberg::table::Table;

use crate::error::{Error, Result};
pub use ident::{ident_string, parse_namespace, parse_table_ident, validate_name};

/// Reads a `metadata.json`, mapping failures to a clear [`Error::Metadata`].
pub async fn read_metadata(file_io: &FileIO, location: &str) -> Result<TableMetadata> {
    TableMetadata::read_from(file_io, location)
        .await
        .map_err(|e| Error::Metadata {
            location: location.to_string(),
            reason: e.to_string(),
            source: Some(Box::new(e)),
        })
}

/// The partition spec a new data file must be written with.
pub fn default_spec(table: &Table) -> PartitionSpec {
    table.metadata().default_partition_spec().as_ref().clone()
}

/// The table's refs (branches and tags). The iceberg crate keeps them private, so they are read
/// back from the metadata's own JSON form (the `refs` object of the table spec).
pub fn refs(metadata: &TableMetadata) -> Result<HashMap<String, iceberg::spec::SnapshotReference>> {
    let mut json = serde_json::to_value(metadata).map_err(|e| Error::Metadata {
        location: metadata.location().to_string(),
        reason: e.to_string(),
        source: Some(Box::new(e)),
    })?;
    let refs = json
        .get_mut("refs")
        .map(serde_json::Value::take)
        .unwrap_or_default();
    if refs.is_null() {
        return Ok(HashMap::new());
    }
    serde_json::from_value(refs).map_err(|e| Error::Metadata {
        location: metadata.location().to_string(),
        reason: format!("bad refs: {e}"),
        source: Some(Box::new(e)),
    })
}

/// The rows of one Parquet file of `table` (`size` bytes), its columns taken as the current
/// schema's by field id and projected to `project`, in that order: how a delete file's rows
/// are read as table columns.
pub fn read_file_columns(
    table: &iceberg::table::Table,
    path: &str,
    size: u64,
    project: Vec<i32>,
) -> crate::error::Result<iceberg::scan::ArrowRecordBatchStream> {
    let task = iceberg::scan::FileScanTask {
        file_size_in_bytes: size,
        start: 0,
        length: size,
        record_count: None,
        data_file_path: path.to_string(),
        data_file_format: iceberg::spec::DataFileFormat::Parquet,
        schema: table.metadata().current_schema().clone(),
        project_field_ids: project,
        predicate: None,
        deletes: vec![],
        partition: None,
        partition_spec: None,
        name_mapping: None,
        case_sensitive: true,
    };
    Ok(table
        .reader_builder()
        .build()
        .read(Box::pin(futures::stream::iter([Ok(task)])))?
        .stream())
}
