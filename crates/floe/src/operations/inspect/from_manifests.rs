//! The metadata tables that read the current snapshot's manifest list and manifests (one read
//! each, never a data file): `manifests`, `files` (and `data_files`, `delete_files`),
//! `entries` (every manifest entry, deleted ones included) and `partitions` (live files
//! aggregated per partition).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field};
use iceberg::spec::{DataContentType, ManifestContentType, ManifestStatus, Struct, StructType};
use iceberg::table::Table;

use super::{arrays, batch, ts_array, ts_field};
use crate::base::error::Result;
use crate::table::manifests::{current_manifests, read_manifests};

pub(super) async fn manifests(table: &Table) -> Result<RecordBatch> {
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

/// The table's unified partition type, as Spark shows it: every field of every partition spec
/// (by field id, in spec order), so each file shows its partition in its own spec's fields and
/// null in the fields its spec lacks. A name two fields share gets its field id appended.
fn partition_type(table: &Table) -> Result<StructType> {
    let md = table.metadata();
    let mut specs: Vec<_> = md.partition_specs_iter().collect();
    specs.sort_by_key(|s| s.spec_id());
    let mut ids = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    let mut fields = Vec::new();
    for spec in specs {
        // A spec whose source column was dropped binds to the schema it was made under.
        let Some(ptype) = std::iter::once(md.current_schema())
            .chain(md.schemas_iter())
            .find_map(|schema| spec.partition_type(schema).ok())
        else {
            continue;
        };
        for (pf, f) in spec.fields().iter().zip(ptype.fields()) {
            if pf.transform == iceberg::spec::Transform::Void || !ids.insert(f.id) {
                continue;
            }
            let mut f = f.as_ref().clone();
            if !names.insert(f.name.clone()) {
                f.name = format!("{}_{}", f.name, f.id);
                names.insert(f.name.clone());
            }
            fields.push(Arc::new(f));
        }
    }
    Ok(StructType::new(fields))
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
        // Deletion vectors (format v3): where the blob is in its Puffin file (Java's names).
        Field::new("content_offset", DataType::Int64, true),
        Field::new("content_size_in_bytes", DataType::Int64, true),
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
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|r| r.file.content_offset())
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|r| r.file.content_size_in_bytes())
                .collect::<Vec<_>>(),
        )),
    ];
    Ok((fields, cols))
}

pub(super) async fn files(table: &Table, data: Option<bool>) -> Result<RecordBatch> {
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

pub(super) async fn entries(table: &Table) -> Result<RecordBatch> {
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

pub(super) async fn partitions(table: &Table) -> Result<RecordBatch> {
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
