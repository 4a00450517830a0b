//! The table layer: what a table *is*, read from its metadata, with no catalog in sight.
//!
//! - [`ident`]: `ns.table` identifiers and the name rule (names become directories).
//! - [`manifests`]: manifest lists and manifests of a snapshot; live data and delete files.
//! - [`manifest_reader`], [`manifest_writer`] (on [`avro`]): manifest entries decoded from and
//!   encoded to their Avro bytes directly, in the iceberg crate's file layout.
//! - [`manifest_counts`]: a manifest list's counts read by field id (Java's v1 spelling), and
//!   counted from the entries where a list holds none.
//! - [`reach`]: every file a set of snapshots needs (reachability, for expiry and orphans).
//! - [`watermarks`]: writer watermarks kept in snapshot summaries (floe, Flink).
//! - [`exactly_once`]: a floe writer's positions in its commits, the fence against a
//!   zombie writer, the hand-off chain of a group.
//! - [`schema`]: schema, partition and sort-order text as users write it.
//! - [`deletion_vector`]: format v3 deletion vectors (the blob, and a snapshot's index of them).
//! - [`lineage`]: format v3 row lineage (first row id inheritance, the `_row_id` columns).
//! - [`metadata_json`]: a `metadata.json` split into a parsed head and an unparsed history,
//!   and the next one spliced from them (commit latency flat in the number of snapshots).
//! - [`reserved`]: `floe.internal.*` keys (another engine's ignored) and format v1's refs,
//!   carried in memory among them.
//! - [`opaque`]: columns of types the iceberg crate cannot parse (v3 variant, geometry...),
//!   carried through reads and commits, refused by name where rows are read or written.
//! - [`rows`]: the rows of planned scan tasks with every delete applied (vectors included).
//! - [`read_metadata`], [`refs`], [`default_spec`]: table metadata helpers.

pub(crate) mod avro;
pub mod deletion_vector;
pub mod exactly_once;
pub mod ident;
pub mod lineage;
pub mod manifest_counts;
pub mod manifest_reader;
pub mod manifest_writer;
pub mod manifests;
pub mod metadata_json;
pub mod opaque;
pub mod reach;
pub mod reserved;
pub mod rows;
pub mod schema;
pub mod watermarks;

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{PartitionSpec, TableMetadata};
use iceberg::table::Table;

use crate::base::error::{Error, Result};
pub use ident::{ident_string, parse_namespace, parse_table_ident, validate_name};

/// Reads a `metadata.json` (gzip-compressed or not), mapping failures to a clear
/// [`Error::Metadata`]. Columns of types the iceberg crate cannot parse are masked
/// ([`opaque`]): the table loads whatever its columns are.
pub async fn read_metadata(file_io: &FileIO, location: &str) -> Result<TableMetadata> {
    let json = read_metadata_json(file_io, location).await?;
    parse_metadata_json(&json, location)
}

/// Parses the JSON of the `metadata.json` at `location` (for the error only).
pub fn parse_metadata_json(json: &[u8], location: &str) -> Result<TableMetadata> {
    opaque::parse_metadata(json).map_err(|e| Error::Metadata {
        location: location.to_string(),
        reason: e.to_string(),
        source: Some(Box::new(e)),
    })
}

/// The JSON text of the `metadata.json` at `location`, gunzipped when it is compressed.
pub async fn read_metadata_json(file_io: &FileIO, location: &str) -> Result<bytes::Bytes> {
    let bad = |reason: String, source: Option<Box<dyn std::error::Error + Send + Sync>>| {
        Error::Metadata {
            location: location.to_string(),
            reason,
            source,
        }
    };
    let content = async { file_io.new_input(location)?.read().await }
        .await
        .map_err(|e| bad(e.to_string(), Some(Box::new(e))))?;
    // The gzip magic number, as Iceberg's readers check it (the file name may not say).
    if content.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&content[..]), &mut out)
            .map_err(|e| bad(format!("reading gzip-compressed metadata: {e}"), None))?;
        Ok(bytes::Bytes::from(out))
    } else {
        Ok(content)
    }
}

/// Writes `metadata` to `location` as Iceberg's writers do (gzip when the location's name says
/// `.gz.metadata.json`), masked columns restored ([`opaque::metadata_bytes`]). A head
/// ([`metadata_json::is_head`]) is refused: it lacks the table's history.
pub async fn write_metadata(
    file_io: &FileIO,
    metadata: &TableMetadata,
    location: &iceberg::MetadataLocation,
) -> iceberg::Result<()> {
    if metadata_json::is_head(metadata) {
        return Err(iceberg::Error::new(
            iceberg::ErrorKind::Unexpected,
            format!(
                "refusing to write {location}: the metadata holds only the head of the table's \
                 history (a bug in floe: a head is only ever spliced)"
            ),
        ));
    }
    if !opaque::is_masked(metadata) && !reserved::carries_refs(metadata) {
        return metadata.write_to(file_io, location).await;
    }
    let json = opaque::metadata_bytes(metadata)?;
    write_metadata_json(file_io, json, location).await
}

/// Writes a `metadata.json` given as pieces of its JSON text ([`metadata_json::splice`]). A
/// local file is written piece by piece (the history's text is not copied into one buffer);
/// object stores and gzip take one buffer (one PUT).
pub async fn write_metadata_pieces(
    file_io: &FileIO,
    pieces: Vec<bytes::Bytes>,
    location: &iceberg::MetadataLocation,
) -> iceberg::Result<()> {
    let path = location.to_string();
    let plain = matches!(
        location.compression_codec(),
        iceberg::compression::CompressionCodec::None
    );
    if !plain || crate::storage::listing::local_dir(&path).is_none() {
        let json = metadata_json::concat(&pieces);
        return write_metadata_json(file_io, json, location).await;
    }
    let mut w = file_io.new_output(path)?.writer().await?;
    for piece in pieces {
        w.write(piece).await?;
    }
    w.close().await
}

/// Writes the JSON text of a `metadata.json` to `location`, gzipped when its name says so.
pub async fn write_metadata_json(
    file_io: &FileIO,
    json: impl Into<bytes::Bytes>,
    location: &iceberg::MetadataLocation,
) -> iceberg::Result<()> {
    let json: bytes::Bytes = json.into();
    let bytes: bytes::Bytes = match location.compression_codec() {
        iceberg::compression::CompressionCodec::None => json,
        iceberg::compression::CompressionCodec::Gzip(_) => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut enc, &json)?;
            enc.finish()?.into()
        }
        other => {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::FeatureUnsupported,
                format!("metadata compression codec {}", other.name()),
            ))
        }
    };
    file_io.new_output(location.to_string())?.write(bytes).await
}

/// `table` as a read of its current state must see it: the current snapshot read through the
/// table's *current* schema (Iceberg spec, "Schema Evolution": readers of the current state
/// use the current schema and match columns by field id; Java's scans do the same).
///
/// The iceberg crate's scan reads a snapshot through the schema it was committed with, so
/// right after `evolve-schema` (before any data commit) an added or renamed column would be
/// unknown and a dropped or widened one would come back in its old shape. Every scan of the
/// current state (`sql`, compaction, locating rows for `delete`/upserts) goes through this view.
/// The view is marked read-only and is never a commit base (the committer reloads one).
pub fn current_state(table: &Table) -> Result<Table> {
    let md = table.metadata();
    let current = md.current_schema_id();
    let Some(snapshot) = md.current_snapshot() else {
        return Ok(table.clone());
    };
    if snapshot.schema_id().is_none_or(|id| id == current) {
        return Ok(table.clone());
    }
    let id = serde_json::Value::from(snapshot.snapshot_id());
    view_of(
        table,
        "reading the current snapshot in the current schema",
        |json| {
            if let Some(snapshots) = json.get_mut("snapshots").and_then(|s| s.as_array_mut()) {
                for s in snapshots {
                    if s.get("snapshot-id") == Some(&id) {
                        s["schema-id"] = serde_json::Value::from(current);
                    }
                }
            }
        },
    )
}

/// A read-only view of `table` whose metadata is the table's own, edited in its JSON form (the
/// table spec's field names) by `edit`: how [`current_state`] and time travel (a snapshot read
/// as if it were current) build the table the iceberg crate's scan reads. `purpose` names the
/// view in the error when the edited metadata does not parse. The view is never a commit base.
pub fn view_of(
    table: &Table,
    purpose: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Result<Table> {
    let md = table.metadata();
    let bad = |e: serde_json::Error| Error::Metadata {
        location: md.location().to_string(),
        reason: format!("{purpose}: {e}"),
        source: Some(Box::new(e)),
    };
    let mut json = serde_json::to_value(md).map_err(bad)?;
    edit(&mut json);
    let md: TableMetadata = serde_json::from_value(json).map_err(bad)?;
    let mut view = Table::builder()
        .metadata(md)
        .identifier(table.identifier().clone())
        .file_io(table.file_io().clone())
        .runtime(iceberg::Runtime::current())
        .disable_cache()
        .readonly(true);
    if let Some(l) = table.metadata_location() {
        view = view.metadata_location(l);
    }
    Ok(view.build()?)
}

/// The table's Iceberg format version as a number (1, 2 or 3).
pub fn format_version(md: &TableMetadata) -> u8 {
    match md.format_version() {
        iceberg::spec::FormatVersion::V1 => 1,
        iceberg::spec::FormatVersion::V2 => 2,
        iceberg::spec::FormatVersion::V3 => 3,
    }
}

/// The partition spec a new data file must be written with.
pub fn default_spec(table: &Table) -> PartitionSpec {
    table.metadata().default_partition_spec().as_ref().clone()
}

/// The table's refs (branches and tags). The iceberg crate keeps them private, so they are read
/// back from the metadata's own JSON form (the `refs` object of the table spec); a v1 table's
/// from where floe carries them ([`reserved::v1_refs`]).
pub fn refs(metadata: &TableMetadata) -> Result<HashMap<String, iceberg::spec::SnapshotReference>> {
    let bad_refs = |reason: String| Error::Metadata {
        location: metadata.location().to_string(),
        reason,
        source: None,
    };
    if let Some(refs) = reserved::v1_refs(metadata) {
        return refs.map_err(bad_refs);
    }
    let mut json = serde_json::to_value(metadata).map_err(|e| Error::Metadata {
        location: metadata.location().to_string(),
        reason: e.to_string(),
        source: Some(Box::new(e)),
    })?;
    let refs = json
        .get_mut("refs")
        .map(serde_json::Value::take)
        .unwrap_or_default();
    let mut out: HashMap<String, iceberg::spec::SnapshotReference> = if refs.is_null() {
        HashMap::new()
    } else {
        serde_json::from_value(refs).map_err(|e| bad_refs(format!("bad refs: {e}")))?
    };
    // A v1 file without refs: `main` is the current snapshot (spec, "Snapshot References": a
    // table without refs has an implied `main` branch at current-snapshot-id). Without it, the
    // current snapshot would head no branch at all.
    if let (false, Some(id)) = (
        out.contains_key(iceberg::spec::MAIN_BRANCH),
        metadata.current_snapshot_id(),
    ) {
        out.insert(
            iceberg::spec::MAIN_BRANCH.to_string(),
            iceberg::spec::SnapshotReference::new(
                id,
                iceberg::spec::SnapshotRetention::branch(None, None, None),
            ),
        );
    }
    Ok(out)
}

/// The rows of one Parquet file of `table` (`size` bytes), its columns taken as the current
/// schema's by field id and projected to `project`, in that order: how a delete file's rows
/// are read as table columns.
pub fn read_file_columns(
    table: &iceberg::table::Table,
    path: &str,
    size: u64,
    project: Vec<i32>,
) -> crate::base::error::Result<iceberg::scan::ArrowRecordBatchStream> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 table's metadata has no refs (its JSON form cannot hold them): its `main` is the
    /// current snapshot, or expiry would find no branch head and expire everything.
    #[test]
    fn a_v1_table_has_main_at_its_current_snapshot() {
        let json = r#"{
            "format-version": 1,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "/w/db/t",
            "last-updated-ms": 1700000000000,
            "last-column-id": 1,
            "schema": {"type": "struct", "schema-id": 0,
                       "fields": [{"id": 1, "name": "id", "required": false, "type": "long"}]},
            "partition-spec": [],
            "properties": {},
            "current-snapshot-id": 5,
            "snapshots": [
                {"snapshot-id": 4, "timestamp-ms": 1700000000000,
                 "manifest-list": "/w/db/t/metadata/snap-4.avro", "summary": {"operation": "append"}},
                {"snapshot-id": 5, "parent-snapshot-id": 4, "timestamp-ms": 1700000000001,
                 "manifest-list": "/w/db/t/metadata/snap-5.avro", "summary": {"operation": "append"}}
            ],
            "snapshot-log": [{"snapshot-id": 4, "timestamp-ms": 1700000000000},
                             {"snapshot-id": 5, "timestamp-ms": 1700000000001}],
            "metadata-log": []
        }"#;
        let md: TableMetadata = serde_json::from_str(json).unwrap();
        assert_eq!(format_version(&md), 1);
        let refs = refs(&md).unwrap();
        assert_eq!(refs.len(), 1, "{refs:?}");
        assert_eq!(refs[iceberg::spec::MAIN_BRANCH].snapshot_id, 5);
    }
}
