//! Metadata tables as Arrow, with Iceberg's names and columns (as Spark shows them):
//! `snapshots`, `history`, `refs`, `metadata_log_entries`, `manifests`, `files` (and
//! `data_files`, `delete_files`), `entries`, `partitions`.
//!
//! Computed from metadata only: the current snapshot's manifest list and manifests (one read
//! each), never data files. DataFusion adapts these batches in [`crate::sql`].

mod arrays;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, MapBuilder, StringArray, StringBuilder,
    TimestampMillisecondArray,
};
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use iceberg::spec::{DataContentType, ManifestContentType, ManifestStatus, Struct, StructType};
use iceberg::table::Table;

use crate::error::{Error, Result};
use crate::table::manifests::{current_manifests, read_manifests};

/// The metadata tables floe serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataTable {
    Snapshots,
    History,
    Refs,
    MetadataLogEntries,
    Manifests,
    Files,
    DataFiles,
    DeleteFiles,
    Entries,
    Partitions,
}

impl MetadataTable {
    /// All tables, for listings.
    pub const ALL: [MetadataTable; 10] = [
        Self::Snapshots,
        Self::History,
        Self::Refs,
        Self::MetadataLogEntries,
        Self::Manifests,
        Self::Files,
        Self::DataFiles,
        Self::DeleteFiles,
        Self::Entries,
        Self::Partitions,
    ];

    /// The suffix after `$`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Snapshots => "snapshots",
            Self::History => "history",
            Self::Refs => "refs",
            Self::MetadataLogEntries => "metadata_log_entries",
            Self::Manifests => "manifests",
            Self::Files => "files",
            Self::DataFiles => "data_files",
            Self::DeleteFiles => "delete_files",
            Self::Entries => "entries",
            Self::Partitions => "partitions",
        }
    }

    /// Parses the suffix after `$`.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|t| t.name()).collect();
                Error::invalid_option(
                    "metadata table",
                    s,
                    format!("expected one of {}", names.join(", ")),
                )
            })
    }

    /// Computes the table's rows.
    pub async fn scan(self, table: &Table) -> Result<RecordBatch> {
        match self {
            Self::Snapshots => snapshots(table),
            Self::History => history(table),
            Self::Refs => refs(table),
            Self::MetadataLogEntries => metadata_log_entries(table),
            Self::Manifests => manifests(table).await,
            Self::Files => files(table, None).await,
            Self::DataFiles => files(table, Some(true)).await,
            Self::DeleteFiles => files(table, Some(false)).await,
            Self::Entries => entries(table).await,
            Self::Partitions => partitions(table).await,
        }
    }
}

fn ts_field(name: &str, nullable: bool) -> Field {
    Field::new(
        name,
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        nullable,
    )
}

fn ts_array(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC"))
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

fn snapshots(table: &Table) -> Result<RecordBatch> {
    let md = table.metadata();
    let mut snaps: Vec<_> = md.snapshots().collect();
    snaps.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    let mut summary = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for s in &snaps {
        let mut kv: Vec<_> = s.summary().additional_properties.iter().collect();
        kv.sort();
        summary.keys().append_value("operation");
        summary
            .values()
            .append_value(s.summary().operation.as_str());
        for (k, v) in kv {
            summary.keys().append_value(k);
            summary.values().append_value(v);
        }
        summary.append(true)?;
    }
    let summary = summary.finish();
    batch(
        vec![
            ts_field("committed_at", false),
            Field::new("snapshot_id", DataType::Int64, false),
            Field::new("parent_id", DataType::Int64, true),
            Field::new("operation", DataType::Utf8, true),
            Field::new("manifest_list", DataType::Utf8, true),
            Field::new("summary", summary.data_type().clone(), true),
            Field::new("sequence_number", DataType::Int64, false),
        ],
        vec![
            ts_array(snaps.iter().map(|s| Some(s.timestamp_ms())).collect()),
            Arc::new(Int64Array::from_iter_values(
                snaps.iter().map(|s| s.snapshot_id()),
            )),
            Arc::new(Int64Array::from(
                snaps
                    .iter()
                    .map(|s| s.parent_snapshot_id())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from_iter_values(
                snaps.iter().map(|s| s.summary().operation.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                snaps.iter().map(|s| s.manifest_list()),
            )),
            Arc::new(summary),
            Arc::new(Int64Array::from_iter_values(
                snaps.iter().map(|s| s.sequence_number()),
            )),
        ],
    )
}

fn current_ancestors(table: &Table) -> std::collections::HashSet<i64> {
    let md = table.metadata();
    let mut out = std::collections::HashSet::new();
    let mut cur = md.current_snapshot();
    while let Some(s) = cur {
        if !out.insert(s.snapshot_id()) {
            break;
        }
        cur = s.parent_snapshot_id().and_then(|p| md.snapshot_by_id(p));
    }
    out
}

fn history(table: &Table) -> Result<RecordBatch> {
    let md = table.metadata();
    let ancestors = current_ancestors(table);
    let log = md.history();
    batch(
        vec![
            ts_field("made_current_at", false),
            Field::new("snapshot_id", DataType::Int64, false),
            Field::new("parent_id", DataType::Int64, true),
            Field::new("is_current_ancestor", DataType::Boolean, false),
        ],
        vec![
            ts_array(log.iter().map(|l| Some(l.timestamp_ms)).collect()),
            Arc::new(Int64Array::from_iter_values(
                log.iter().map(|l| l.snapshot_id),
            )),
            Arc::new(Int64Array::from(
                log.iter()
                    .map(|l| {
                        md.snapshot_by_id(l.snapshot_id)
                            .and_then(|s| s.parent_snapshot_id())
                    })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(BooleanArray::from(
                log.iter()
                    .map(|l| ancestors.contains(&l.snapshot_id))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

fn refs(table: &Table) -> Result<RecordBatch> {
    use iceberg::spec::SnapshotRetention;
    let refs: BTreeMap<_, _> = crate::catalog::refs(table.metadata())?
        .into_iter()
        .collect();
    let mut name = vec![];
    let mut kind = vec![];
    let mut id = vec![];
    let mut max_ref_age = vec![];
    let mut min_keep = vec![];
    let mut max_snap_age = vec![];
    for (n, r) in refs {
        name.push(n.clone());
        id.push(r.snapshot_id);
        match r.retention {
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                max_ref_age_ms,
            } => {
                kind.push("BRANCH");
                max_ref_age.push(max_ref_age_ms);
                min_keep.push(min_snapshots_to_keep);
                max_snap_age.push(max_snapshot_age_ms);
            }
            SnapshotRetention::Tag { max_ref_age_ms } => {
                kind.push("TAG");
                max_ref_age.push(max_ref_age_ms);
                min_keep.push(None);
                max_snap_age.push(None);
            }
        }
    }
    batch(
        vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("type", DataType::Utf8, false),
            Field::new("snapshot_id", DataType::Int64, false),
            Field::new("max_reference_age_in_ms", DataType::Int64, true),
            Field::new("min_snapshots_to_keep", DataType::Int32, true),
            Field::new("max_snapshot_age_in_ms", DataType::Int64, true),
        ],
        vec![
            Arc::new(StringArray::from(name)),
            Arc::new(StringArray::from(kind)),
            Arc::new(Int64Array::from(id)),
            Arc::new(Int64Array::from(max_ref_age)),
            Arc::new(Int32Array::from(min_keep)),
            Arc::new(Int64Array::from(max_snap_age)),
        ],
    )
}

fn metadata_log_entries(table: &Table) -> Result<RecordBatch> {
    let md = table.metadata();
    // Previous metadata files, then the current one (as Spark shows them).
    let mut rows: Vec<(i64, String)> = md
        .metadata_log()
        .iter()
        .map(|l| (l.timestamp_ms, l.metadata_file.clone()))
        .collect();
    rows.push((
        md.last_updated_ms(),
        table.metadata_location().unwrap_or_default().to_string(),
    ));
    // The latest snapshot at each time: last snapshot-log entry not after it.
    let latest = |ts: i64| {
        md.history()
            .iter()
            .rev()
            .find(|h| h.timestamp_ms <= ts)
            .map(|h| h.snapshot_id)
    };
    let latest_ids: Vec<Option<i64>> = rows.iter().map(|(ts, _)| latest(*ts)).collect();
    batch(
        vec![
            ts_field("timestamp", false),
            Field::new("file", DataType::Utf8, false),
            Field::new("latest_snapshot_id", DataType::Int64, true),
            Field::new("latest_schema_id", DataType::Int32, true),
            Field::new("latest_sequence_number", DataType::Int64, true),
        ],
        vec![
            ts_array(rows.iter().map(|(t, _)| Some(*t)).collect()),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|(_, f)| f.as_str()),
            )),
            Arc::new(Int64Array::from(latest_ids.clone())),
            Arc::new(Int32Array::from(
                latest_ids
                    .iter()
                    .map(|id| {
                        id.and_then(|id| md.snapshot_by_id(id))
                            .and_then(|s| s.schema_id())
                    })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                latest_ids
                    .iter()
                    .map(|id| {
                        id.and_then(|id| md.snapshot_by_id(id))
                            .map(|s| s.sequence_number())
                    })
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

async fn manifests(table: &Table) -> Result<RecordBatch> {
    let ms = current_manifests(table).await?;
    let is_data = |m: &iceberg::spec::ManifestFile| m.content == ManifestContentType::Data;
    let count = |m: &iceberg::spec::ManifestFile, data: bool, c: Option<u32>| -> i32 {
        if is_data(m) == data {
            c.unwrap_or(0) as i32
        } else {
            0
        }
    };
    let col = |data: bool, f: fn(&iceberg::spec::ManifestFile) -> Option<u32>| -> ArrayRef {
        Arc::new(Int32Array::from_iter_values(
            ms.iter().map(|m| count(m, data, f(m))),
        ))
    };
    batch(
        vec![
            Field::new("content", DataType::Int32, false),
            Field::new("path", DataType::Utf8, false),
            Field::new("length", DataType::Int64, false),
            Field::new("partition_spec_id", DataType::Int32, false),
            Field::new("added_snapshot_id", DataType::Int64, false),
            Field::new("sequence_number", DataType::Int64, false),
            Field::new("min_sequence_number", DataType::Int64, false),
            Field::new("added_data_files_count", DataType::Int32, false),
            Field::new("existing_data_files_count", DataType::Int32, false),
            Field::new("deleted_data_files_count", DataType::Int32, false),
            Field::new("added_delete_files_count", DataType::Int32, false),
            Field::new("existing_delete_files_count", DataType::Int32, false),
            Field::new("deleted_delete_files_count", DataType::Int32, false),
        ],
        vec![
            Arc::new(Int32Array::from_iter_values(ms.iter().map(|m| {
                if is_data(m) {
                    0
                } else {
                    1
                }
            }))),
            Arc::new(StringArray::from_iter_values(
                ms.iter().map(|m| m.manifest_path.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(
                ms.iter().map(|m| m.manifest_length),
            )),
            Arc::new(Int32Array::from_iter_values(
                ms.iter().map(|m| m.partition_spec_id),
            )),
            Arc::new(Int64Array::from_iter_values(
                ms.iter().map(|m| m.added_snapshot_id),
            )),
            Arc::new(Int64Array::from_iter_values(
                ms.iter().map(|m| m.sequence_number),
            )),
            Arc::new(Int64Array::from_iter_values(
                ms.iter().map(|m| m.min_sequence_number),
            )),
            col(true, |m| m.added_files_count),
            col(true, |m| m.existing_files_count),
            col(true, |m| m.deleted_files_count),
            col(false, |m| m.added_files_count),
            col(false, |m| m.existing_files_count),
            col(false, |m| m.deleted_files_count),
        ],
    )
}

fn content_code(c: DataContentType) -> i32 {
    match c {
        DataContentType::Data => 0,
        DataContentType::PositionDeletes => 1,
        DataContentType::EqualityDeletes => 2,
    }
}

/// One manifest entry with the spec id of its manifest.
struct EntryRow {
    status: ManifestStatus,
    snapshot_id: Option<i64>,
    sequence_number: Option<i64>,
    file_sequence_number: Option<i64>,
    spec_id: i32,
    file: iceberg::spec::DataFile,
}

async fn current_entries(table: &Table, live_only: bool) -> Result<Vec<EntryRow>> {
    let ms = current_manifests(table).await?;
    let loaded = read_manifests(table, &ms).await?;
    let mut out = vec![];
    for (mf, m) in ms.iter().zip(loaded) {
        for e in m.entries() {
            if live_only && !e.is_alive() {
                continue;
            }
            out.push(EntryRow {
                status: e.status(),
                snapshot_id: e.snapshot_id(),
                sequence_number: e.sequence_number(),
                file_sequence_number: e.file_sequence_number,
                spec_id: mf.partition_spec_id,
                file: e.data_file().clone(),
            });
        }
    }
    Ok(out)
}

/// The table's unified partition type: the default spec's fields (files of older specs show
/// the fields they share by id).
fn partition_type(table: &Table) -> Result<StructType> {
    let md = table.metadata();
    Ok(md
        .default_partition_spec()
        .partition_type(md.current_schema())?)
}

fn file_columns(table: &Table, rows: &[&EntryRow]) -> Result<(Vec<Field>, Vec<ArrayRef>)> {
    let ptype = partition_type(table)?;
    let partitions: Vec<&Struct> = rows.iter().map(|r| r.file.partition()).collect();
    let (pfield, parray) =
        arrays::partition_column(&ptype, &partitions, table, rows.iter().map(|r| r.spec_id))?;
    let fields = vec![
        Field::new("content", DataType::Int32, false),
        Field::new("file_path", DataType::Utf8, false),
        Field::new("file_format", DataType::Utf8, false),
        Field::new("spec_id", DataType::Int32, false),
        pfield,
        Field::new("record_count", DataType::Int64, false),
        Field::new("file_size_in_bytes", DataType::Int64, false),
        Field::new("sort_order_id", DataType::Int32, true),
        Field::new("referenced_data_file", DataType::Utf8, true),
    ];
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| content_code(r.file.content_type())),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.file.file_path()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter()
                .map(|r| r.file.file_format().to_string().to_ascii_uppercase()),
        )),
        Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.spec_id))),
        parray,
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.file.record_count() as i64),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.file.file_size_in_bytes() as i64),
        )),
        Arc::new(Int32Array::from(
            rows.iter()
                .map(|r| r.file.sort_order_id())
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter()
                .map(|r| r.file.referenced_data_file())
                .collect::<Vec<_>>(),
        )),
    ];
    Ok((fields, cols))
}

async fn files(table: &Table, data: Option<bool>) -> Result<RecordBatch> {
    let entries = current_entries(table, true).await?;
    let rows: Vec<&EntryRow> = entries
        .iter()
        .filter(|r| match data {
            None => true,
            Some(d) => (r.file.content_type() == DataContentType::Data) == d,
        })
        .collect();
    let (fields, cols) = file_columns(table, &rows)?;
    batch(fields, cols)
}

async fn entries(table: &Table) -> Result<RecordBatch> {
    let entries = current_entries(table, false).await?;
    let rows: Vec<&EntryRow> = entries.iter().collect();
    let (file_fields, file_cols) = file_columns(table, &rows)?;
    let data_file =
        arrow::array::StructArray::try_new(file_fields.clone().into(), file_cols, None)?;
    batch(
        vec![
            Field::new("status", DataType::Int32, false),
            Field::new("snapshot_id", DataType::Int64, true),
            Field::new("sequence_number", DataType::Int64, true),
            Field::new("file_sequence_number", DataType::Int64, true),
            Field::new("data_file", data_file.data_type().clone(), false),
        ],
        vec![
            Arc::new(Int32Array::from_iter_values(rows.iter().map(
                |r| match r.status {
                    ManifestStatus::Existing => 0,
                    ManifestStatus::Added => 1,
                    ManifestStatus::Deleted => 2,
                },
            ))),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.snapshot_id).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.sequence_number).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter()
                    .map(|r| r.file_sequence_number)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(data_file),
        ],
    )
}

async fn partitions(table: &Table) -> Result<RecordBatch> {
    #[derive(Default)]
    struct Agg {
        records: i64,
        files: i32,
        bytes: i64,
        pos_records: i64,
        pos_files: i32,
        eq_records: i64,
        eq_files: i32,
        last_snapshot: Option<i64>,
        last_seq: i64,
    }
    let entries = current_entries(table, true).await?;
    let mut groups: BTreeMap<(i32, String), (usize, Agg)> = BTreeMap::new();
    for (i, r) in entries.iter().enumerate() {
        let key = (r.spec_id, format!("{:?}", r.file.partition()));
        let (_, agg) = groups.entry(key).or_insert_with(|| (i, Agg::default()));
        let n = r.file.record_count() as i64;
        match r.file.content_type() {
            DataContentType::Data => {
                agg.records += n;
                agg.files += 1;
                agg.bytes += r.file.file_size_in_bytes() as i64;
            }
            DataContentType::PositionDeletes => {
                agg.pos_records += n;
                agg.pos_files += 1;
            }
            DataContentType::EqualityDeletes => {
                agg.eq_records += n;
                agg.eq_files += 1;
            }
        }
        let seq = r.sequence_number.unwrap_or_default();
        if agg.last_snapshot.is_none() || seq > agg.last_seq {
            agg.last_seq = seq;
            agg.last_snapshot = r.snapshot_id;
        }
    }
    let groups: Vec<_> = groups.into_values().collect();
    let ptype = partition_type(table)?;
    let parts: Vec<&Struct> = groups
        .iter()
        .map(|(i, _)| entries[*i].file.partition())
        .collect();
    let (pfield, parray) = arrays::partition_column(
        &ptype,
        &parts,
        table,
        groups.iter().map(|(i, _)| entries[*i].spec_id),
    )?;
    let md = table.metadata();
    let last_at: Vec<Option<i64>> = groups
        .iter()
        .map(|(_, a)| {
            a.last_snapshot
                .and_then(|s| md.snapshot_by_id(s))
                .map(|s| s.timestamp_ms())
        })
        .collect();
    let i64col = |f: fn(&Agg) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            groups.iter().map(|(_, a)| f(a)),
        ))
    };
    let i32col = |f: fn(&Agg) -> i32| -> ArrayRef {
        Arc::new(Int32Array::from_iter_values(
            groups.iter().map(|(_, a)| f(a)),
        ))
    };
    batch(
        vec![
            pfield,
            Field::new("spec_id", DataType::Int32, false),
            Field::new("record_count", DataType::Int64, false),
            Field::new("file_count", DataType::Int32, false),
            Field::new("total_data_file_size_in_bytes", DataType::Int64, false),
            Field::new("position_delete_record_count", DataType::Int64, false),
            Field::new("position_delete_file_count", DataType::Int32, false),
            Field::new("equality_delete_record_count", DataType::Int64, false),
            Field::new("equality_delete_file_count", DataType::Int32, false),
            ts_field("last_updated_at", true),
            Field::new("last_updated_snapshot_id", DataType::Int64, true),
        ],
        vec![
            parray,
            Arc::new(Int32Array::from_iter_values(
                groups.iter().map(|(i, _)| entries[*i].spec_id),
            )),
            i64col(|a| a.records),
            i32col(|a| a.files),
            i64col(|a| a.bytes),
            i64col(|a| a.pos_records),
            i32col(|a| a.pos_files),
            i64col(|a| a.eq_records),
            i32col(|a| a.eq_files),
            ts_array(last_at),
            Arc::new(Int64Array::from(
                groups
                    .iter()
                    .map(|(_, a)| a.last_snapshot)
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}
