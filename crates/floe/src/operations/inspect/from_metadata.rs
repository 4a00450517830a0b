//! The metadata tables computed from the table metadata alone, without reading a manifest:
//! `snapshots` (every snapshot with its summary), `history` (the snapshot log, with whether
//! each entry is an ancestor of the current snapshot), `refs` (branches and tags with their
//! retention) and `metadata_log_entries` (previous metadata files and the current one, with the
//! snapshot that was latest at each).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, BooleanArray, Int32Array, Int64Array, MapBuilder, StringArray, StringBuilder,
};
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field};
use iceberg::table::Table;

use super::{batch, ts_array, ts_field};
use crate::base::error::Result;

pub(super) fn snapshots(table: &Table) -> Result<RecordBatch> {
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

pub(super) fn history(table: &Table) -> Result<RecordBatch> {
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

pub(super) fn refs(table: &Table) -> Result<RecordBatch> {
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

pub(super) fn metadata_log_entries(table: &Table) -> Result<RecordBatch> {
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
