//! `diagnose`: what kind of small files a table is growing, why, and what to run, from metadata
//! alone (no data file is opened) plus one listing of the table location.
//!
//! ```text
//!  live files (current manifests) ──> per partition: count, sizes, deletes, activity
//!  all snapshots (ReachIndex)      ──> history: commits, files per commit, what expiry frees
//!  one listing of the location     ──> storage: unreferenced files by age
//!  snapshot summaries              ──> writer watermarks
//!  recent commits + metadata log   ──> the writer's side: pace, commit duration, freshness
//!  refs, watermarks, expiry's plan ──> who keeps history, and what only each keeps
//!  live files' split offsets       ──> a full scan's object-store requests, now and compacted
//!                                  ──> observations (the seeds' table) -> first action
//! ```
//!
//! Gather, then compute: `diagnose` reads everything into plain facts first (`gather`, the
//! only I/O), then computes the report from them (`compute`, pure, unit-tested on synthetic
//! tables).

pub mod compare;
mod compute;
mod facts;
mod model;
mod observe;
mod partitioning;
pub mod render;

use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use iceberg::spec::{DataContentType, PartitionSpec, Struct, Transform, Type};
use iceberg::TableIdent;

use crate::base::error::Result;
use crate::base::properties;
use crate::catalog::{ident_string, refs, Catalog};
use crate::operations::compact::CompactBuilder;
use crate::operations::expire;
use crate::operations::{Ctx, Query};
use crate::storage::listing::list_files;
use crate::table::reach::{metadata_files, ReachIndex, Reached};
use crate::table::watermarks::watermarks;
use facts::{Expirable, Facts, LiveEntry, SizedPath, SnapshotFacts, SpecField};

use compare::probe;
pub use compare::{compare, Comparison, Delta, Measures, SavedReport};
pub use model::{
    bytes as human_bytes, Bucket, CommitPoint, History, Observation, OverPartitioned,
    PartitionHealth, Probe, Report, SpecOption, Storage, Thresholds, Totals, ACTIVE_COMMITS,
    RECENT_COMMITS,
};

/// The health report of one table (`floe diagnose`): a [`Query`].
#[derive(Clone)]
pub struct DiagnoseBuilder {
    ctx: Ctx,
    probe: bool,
}

impl DiagnoseBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            probe: false,
        }
    }

    /// Also time a full read of the table's live data (the probe); the only part of the
    /// report that opens data files.
    pub fn with_probe(mut self, probe: bool) -> Self {
        self.probe = probe;
        self
    }
}

impl Query for DiagnoseBuilder {
    type Output = Report;

    /// Gathers and computes the report (and the probe, when asked).
    async fn query(self) -> Result<Report> {
        let mut report = diagnose(&self.ctx.catalog, &self.ctx.ident).await?;
        if self.probe {
            report.probe = Some(probe(&self.ctx.catalog, &self.ctx.ident).await?);
        }
        Ok(report)
    }
}

/// Computes the report of `ident`: one step reads everything (`gather`), a pure one computes
/// the numbers and observations from what was read (`compute::report`).
async fn diagnose(catalog: &Catalog, ident: &TableIdent) -> Result<Report> {
    let started = Instant::now();
    let facts = gather(catalog, ident).await?;
    let mut report = compute::report(facts);
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Reads everything the report is computed from, from metadata alone plus one listing of the
/// table location: the table, every manifest of every snapshot (each once), the listing and
/// what expiry would remove now.
pub(crate) async fn gather(catalog: &Catalog, ident: &TableIdent) -> Result<Facts> {
    let table = catalog.load_table(ident).await?;
    let md = table.metadata();
    let opts = CompactBuilder::new(catalog, ident.clone()).plan_options(&table)?;
    let thresholds = Thresholds {
        target_file_size_bytes: opts.target_file_size_bytes,
        min_file_size_bytes: opts.min_file_size_bytes,
        min_input_files: opts.min_input_files as u64,
    };

    let mut snaps: Vec<_> = md.snapshots().cloned().collect();
    snaps.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    let snapshots: Vec<SnapshotFacts> = snaps
        .iter()
        .map(|s| {
            let p = &s.summary().additional_properties;
            let get = |k: &str| p.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            SnapshotFacts {
                snapshot_id: s.snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
                sequence_number: s.sequence_number(),
                operation: s.summary().operation.as_str().to_string(),
                added_data_files: get("added-data-files"),
                added_bytes: get("added-files-size"),
            }
        })
        .collect();

    // Every manifest of every snapshot, read once: the current snapshot's live entries for the
    // partition view, reachability for the history view. The location is listed meanwhile.
    let all_ids: Vec<i64> = snaps.iter().map(|s| s.snapshot_id()).collect();
    let (index, listing) = tokio::join!(
        ReachIndex::load_with_live(&table, &all_ids, md.current_snapshot_id()),
        list_files(table.file_io(), md.location()),
    );
    let mut index = index?;
    let listing = listing.map_err(|e| e.to_string());
    let schema = md.current_schema().clone();
    let default_spec = md.default_partition_spec();
    let spec_id = default_spec.spec_id();
    let spec: Vec<SpecField> = default_spec
        .fields()
        .iter()
        .map(|f| SpecField {
            source: schema
                .name_by_field_id(f.source_id)
                .map(str::to_string)
                .unwrap_or_else(|| format!("field-{}", f.source_id)),
            transform: f.transform,
        })
        .collect();
    let spec_type = default_spec.partition_type(&schema).ok();
    // One filter per partition, from its first entry.
    let mut filters: HashMap<(i32, String), Option<String>> = HashMap::new();
    let live: Vec<LiveEntry> = index
        .take_live()
        .into_iter()
        .map(|f| {
            let spec = md.partition_spec_by_id(f.spec_id);
            let partition = match spec {
                Some(spec) if !spec.is_unpartitioned() => {
                    crate::write::location::partition_label(spec, f.file.partition(), &schema)
                }
                _ => "unpartitioned".to_string(),
            };
            let filter = filters
                .entry((f.spec_id, partition.clone()))
                .or_insert_with(|| {
                    spec.and_then(|s| partition_filter(s, &schema, f.file.partition()))
                })
                .clone();
            let values = match &spec_type {
                Some(ptype) if f.spec_id == spec_id => default_spec
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, field)| {
                        match (f.file.partition().fields().get(i), ptype.fields().get(i)) {
                            (Some(Some(lit)), Some(pf)) => {
                                field.transform.to_human_string(&pf.field_type, Some(lit))
                            }
                            _ => "null".to_string(),
                        }
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let vector = crate::table::deletion_vector::location_of(&f.file);
            LiveEntry {
                spec_id: f.spec_id,
                partition,
                filter,
                values,
                data: f.file.content_type() == DataContentType::Data,
                equality: f.file.content_type() == DataContentType::EqualityDeletes,
                size: vector
                    .as_ref()
                    .map_or(f.file.file_size_in_bytes(), |v| v.length),
                vector: vector.is_some(),
                records: f.file.record_count(),
                snapshot_id: f.snapshot_id,
                row_groups: f.file.split_offsets().map(|o| o.len() as u64),
            }
        })
        .collect();

    // Reachability over all snapshots: what only old snapshots hold, what expiry would free.
    let table_refs = refs(md)?;
    let mut heads: Vec<i64> = table_refs.values().map(|r| r.snapshot_id).collect();
    heads.extend(md.current_snapshot_id());
    let sized = |files: Vec<(String, Reached)>| -> Vec<SizedPath> {
        files.into_iter().map(|(p, r)| (p, r.size)).collect()
    };
    let reach_all = index.reachable(&all_ids);
    let only_old = sized(reach_all.minus(&index.reachable(&heads)));
    let writers = watermarks(md);
    let plan = expire::ExpireBuilder::new(catalog, ident.clone())
        .preview(&table)
        .ok();
    // Without a plan (a retention setting does not parse), every snapshot counts as kept.
    let kept: Vec<i64> = all_ids
        .iter()
        .copied()
        .filter(|id| {
            plan.as_ref()
                .is_none_or(|p| !p.expired_snapshots.contains(id))
        })
        .collect();
    let expirable = plan.as_ref().map(|plan| Expirable {
        snapshots: plan.expired_snapshots.len() as u64,
        files: sized(
            index
                .reachable(&plan.expired_snapshots)
                .minus(&index.reachable(&kept)),
        ),
    });
    let ref_kinds: Vec<(String, i64, &'static str)> = table_refs
        .iter()
        .map(|(name, r)| {
            let kind = if r.is_branch() { "branch" } else { "tag" };
            (name.clone(), r.snapshot_id, kind)
        })
        .collect();
    let retainers = retained(
        &index,
        &facts::retainers(&kept, md.current_snapshot_id(), &ref_kinds, &writers),
        md.current_snapshot_id(),
    );
    // The current snapshot's manifests were read with the rest of the history.
    let manifest_lengths = md
        .current_snapshot_id()
        .map(|id| index.manifests_of(id))
        .unwrap_or_default()
        .into_iter()
        .map(|(_, len)| len)
        .collect();
    // Everything any snapshot or the metadata log references.
    let mut referenced = reach_all;
    referenced.extend(metadata_files(&table));

    let mut metadata_files: Vec<(i64, String)> = md
        .metadata_log()
        .iter()
        .map(|e| (e.timestamp_ms, e.metadata_file.clone()))
        .collect();
    if let Some(current) = table.metadata_location() {
        metadata_files.push((md.last_updated_ms(), current.to_string()));
    }
    let leaf_columns = schema
        .field_id_to_fields()
        .values()
        .filter(|f| f.field_type.is_primitive())
        .count() as u64;
    let row_group_bytes = properties::table_u64_prop(
        &table,
        properties::WRITE_PARQUET_ROW_GROUP_SIZE_BYTES.key,
        properties::WRITE_PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT,
    )?;
    let previous_versions_max = properties::table_u64_prop(
        &table,
        properties::METADATA_PREVIOUS_VERSIONS_MAX.key,
        properties::METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT,
    )?;
    Ok(Facts {
        table: ident_string(ident),
        location: md.location().to_string(),
        format_version: crate::table::format_version(md),
        thresholds,
        spec_id,
        spec,
        previous_versions_max,
        snapshots,
        metadata_log_entries: md.metadata_log().len() as u64,
        live,
        refs: table_refs
            .iter()
            .map(|(n, r)| (n.clone(), r.snapshot_id))
            .collect(),
        only_old,
        expirable,
        manifest_lengths,
        referenced: referenced.files.into_keys().collect(),
        listing,
        writers,
        retainers,
        metadata_files,
        leaf_columns,
        row_group_bytes,
        now: SystemTime::now(),
    })
}

/// What each retainer (`(name, kind, snapshots)`) keeps beyond the `current` snapshot, and
/// what only it keeps: each file is counted once per retainer that reaches it, so the whole
/// attribution is one pass over each retainer's reach.
fn retained(
    index: &ReachIndex,
    retainers: &[(String, &'static str, Vec<i64>)],
    current: Option<i64>,
) -> Vec<facts::RetainerFacts> {
    let live = index.reachable(&current.into_iter().collect::<Vec<_>>());
    let held: Vec<Vec<(String, Reached)>> = retainers
        .iter()
        .map(|(_, _, ids)| index.reachable(ids).minus(&live))
        .collect();
    let mut holders: HashMap<&str, u32> = HashMap::new();
    for files in &held {
        for (path, _) in files {
            *holders.entry(path.as_str()).or_default() += 1;
        }
    }
    let sized = |files: &[(String, Reached)], only: bool| -> Vec<SizedPath> {
        files
            .iter()
            .filter(|(p, _)| !only || holders.get(p.as_str()) == Some(&1))
            .map(|(p, r)| (p.clone(), r.size))
            .collect()
    };
    retainers
        .iter()
        .zip(&held)
        .map(|((name, kind, ids), files)| facts::RetainerFacts {
            retainer: name.clone(),
            kind,
            snapshots: ids.len() as u64,
            held: sized(files, false),
            exclusive: sized(files, true),
        })
        .collect()
}

/// A `--where` filter selecting exactly the partition `value` of `spec`, for identity, year,
/// month and day transforms (others have no exact column filter).
fn partition_filter(
    spec: &PartitionSpec,
    schema: &iceberg::spec::Schema,
    value: &Struct,
) -> Option<String> {
    let ptype = spec.partition_type(schema).ok()?;
    let mut conds = Vec::new();
    for (i, field) in spec.fields().iter().enumerate() {
        let col = schema.name_by_field_id(field.source_id)?;
        let lit = value.fields().get(i)?.as_ref();
        let Some(lit) = lit else {
            conds.push(format!("{col} IS NULL"));
            continue;
        };
        let human = field
            .transform
            .to_human_string(&ptype.fields()[i].field_type, Some(lit));
        let next = |d: chrono::NaiveDate| d.format("%Y-%m-%d").to_string();
        match field.transform {
            Transform::Identity => {
                let numeric = matches!(
                    schema.field_by_id(field.source_id).map(|f| f.field_type.as_ref()),
                    Some(Type::Primitive(p)) if matches!(p,
                        iceberg::spec::PrimitiveType::Int
                        | iceberg::spec::PrimitiveType::Long
                        | iceberg::spec::PrimitiveType::Float
                        | iceberg::spec::PrimitiveType::Double
                        | iceberg::spec::PrimitiveType::Boolean
                        | iceberg::spec::PrimitiveType::Decimal { .. })
                );
                if numeric {
                    conds.push(format!("{col} = {human}"));
                } else {
                    conds.push(format!("{col} = '{}'", human.replace('\'', "''")));
                }
            }
            Transform::Day => {
                let d = chrono::NaiveDate::parse_from_str(&human, "%Y-%m-%d").ok()?;
                conds.push(format!(
                    "{col} >= '{}' AND {col} < '{}'",
                    next(d),
                    next(d.succ_opt()?)
                ));
            }
            Transform::Month => {
                let d =
                    chrono::NaiveDate::parse_from_str(&format!("{human}-01"), "%Y-%m-%d").ok()?;
                let n = d.checked_add_months(chrono::Months::new(1))?;
                conds.push(format!("{col} >= '{}' AND {col} < '{}'", next(d), next(n)));
            }
            Transform::Year => {
                let d = chrono::NaiveDate::parse_from_str(&format!("{human}-01-01"), "%Y-%m-%d")
                    .ok()?;
                let n = d.checked_add_months(chrono::Months::new(12))?;
                conds.push(format!("{col} >= '{}' AND {col} < '{}'", next(d), next(n)));
            }
            _ => return None,
        }
    }
    (!conds.is_empty()).then(|| conds.join(" AND "))
}
