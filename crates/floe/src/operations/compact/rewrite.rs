//! Reading and rewriting: the scan planned once (live data files with their deletes), one
//! plan file per task, and one job of a file group read (deletes applied), sorted if asked and
//! written rolled at the target size.

use arrow::record_batch::RecordBatch;
use futures::{StreamExt, TryStreamExt};
use iceberg::scan::FileScanTask;
use iceberg::table::Table;

use super::plan::PlanFile;
use super::spill::TaskSpill;
use super::{filter, multi_file, parallel, sort, GroupResult};
use crate::base::error::{Error, Result};
use crate::table::deletion_vector::DeletionVectors;
use crate::write::{TableWriter, WriteOptions};

/// What the planning scan kept.
pub(super) enum Scanned {
    /// The kept tasks.
    Tasks(Vec<FileScanTask>),
    /// More kept tasks than the limit: all of them in a local file, and what the planner
    /// needs of each (`describe`), in the same order.
    Spilled(Box<TaskSpill>, Vec<PlanFile>),
}

/// Plans the scan once: live data files (optionally pruned by `--where`) with the delete files
/// that apply to them, keeping only the tasks `keep` accepts (the others are counted, not
/// held: memory grows with the candidates, not with the table). Past `limit` kept tasks, the
/// tasks go to a local file ([`TaskSpill`]) and only their [`PlanFile`] (`describe`) stays in
/// memory, so the caller plans them all at once and rewrites them in batches, without a
/// second scan. Returns what was kept, the total number of live data files, and the
/// snapshot's deletion vectors (attached to the tasks: each task carries its own file's
/// vector only).
pub(super) async fn plan_files(
    table: &Table,
    where_filter: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
    keep: impl Fn(&FileScanTask) -> bool,
    limit: usize,
    describe: impl Fn(usize, &FileScanTask) -> PlanFile,
) -> Result<(Scanned, usize, DeletionVectors)> {
    crate::base::fault::probe("scan", table.metadata().location());
    crate::table::opaque::refuse(
        table.metadata().current_schema(),
        &format!(
            "compact '{}'",
            crate::table::ident_string(table.identifier())
        ),
        "rewrite",
    )?;
    if table.metadata().current_snapshot().is_none() {
        return Ok((Scanned::Tasks(vec![]), 0, DeletionVectors::default()));
    }
    // Tasks read through the current schema, the one the outputs are written in.
    let table = &crate::table::current_state(table)?;
    let matching: Option<std::collections::HashSet<String>> = match where_filter {
        None => None,
        Some(w) => {
            let predicate = filter::parse_where(w, table.metadata().current_schema(), now)?;
            Some(
                table
                    .scan()
                    .with_filter(predicate)
                    .build()?
                    .plan_files()
                    .await?
                    .map_ok(|t| t.data_file_path)
                    .try_collect()
                    .await?,
            )
        }
    };
    let mut total = 0usize;
    let mut kept = Scanned::Tasks(Vec::new());
    let dvs = DeletionVectors::of_current(table).await?;
    super::scan::data_tasks(table, |mut task| {
        total += 1;
        dvs.attach(&mut task);
        if !(matching
            .as_ref()
            .is_none_or(|m| m.contains(&task.data_file_path))
            && keep(&task))
        {
            return Ok(());
        }
        match &mut kept {
            Scanned::Tasks(tasks) if tasks.len() < limit => tasks.push(task),
            Scanned::Tasks(tasks) => {
                let mut spill = TaskSpill::new(&task)?;
                let mut described = Vec::with_capacity(tasks.len() + 1);
                for t in tasks.iter().chain(std::iter::once(&task)) {
                    described.push(describe(spill.len(), t));
                    spill.push(t)?;
                }
                kept = Scanned::Spilled(Box::new(spill), described);
            }
            Scanned::Spilled(spill, described) => {
                described.push(describe(spill.len(), &task));
                spill.push(&task)?;
            }
        }
        Ok(())
    })
    .await?;
    if let Scanned::Spilled(spill, _) = &mut kept {
        spill.seal()?;
    }
    Ok((kept, total, dvs))
}

/// How a compaction names a partition (its file groups' `partition`, what
/// [`super::CompactBuilder::with_partitions`] selects): the spec's path form
/// (`ts_day=2026-11-30`), or `unpartitioned`.
pub fn partition_path(
    table: &Table,
    spec_id: i32,
    partition: Option<&iceberg::spec::Struct>,
) -> String {
    let md = table.metadata();
    match (partition, md.partition_spec_by_id(spec_id)) {
        (Some(p), Some(spec)) if !spec.is_unpartitioned() => {
            crate::write::location::partition_label(spec, p, md.current_schema())
        }
        _ => "unpartitioned".to_string(),
    }
}

/// What the planner knows of a task. `file` (the manifest entry) is given when the table has
/// several specs: a file of another spec than the default is grouped by where its rows land
/// in the default spec ([`respec_key`]).
pub(super) fn plan_file(
    index: usize,
    t: &FileScanTask,
    spec_id: i32,
    partition: Option<&iceberg::spec::Struct>,
    file: Option<&iceberg::spec::DataFile>,
    table: &Table,
) -> PlanFile {
    let mut path = partition_path(table, spec_id, partition);
    let other_spec = spec_id != table.metadata().default_partition_spec_id();
    if other_spec {
        // Grouped by the partition the rows go to: the old partitions of one new one merge.
        path = match file.and_then(|f| respec_key(table, f)) {
            Some(into) => format!("-> {into}"),
            None => format!("{path} -> (several partitions)"),
        };
    }
    PlanFile {
        index,
        size: t.file_size_in_bytes,
        records: t.record_count.unwrap_or(0),
        spec_id,
        partition: path,
        deletes: t.deletes.len(),
        other_spec,
    }
}

/// The default-spec partition all rows of `file` fall in, from its column bounds: each field's
/// transform applied to the lower and the upper bound of its source column gives one value
/// (`hour(ts)` files of one day give that day under `day(ts)`). `None` when a field has no
/// bounds or they give two values. Only a grouping key: the writer partitions every row.
pub(super) fn respec_key(table: &Table, file: &iceberg::spec::DataFile) -> Option<String> {
    let spec = table.metadata().default_partition_spec();
    if spec.is_unpartitioned() {
        return Some("unpartitioned".to_string());
    }
    let mut parts = Vec::new();
    for field in spec.fields() {
        let lower = file.lower_bounds().get(&field.source_id)?;
        let upper = file.upper_bounds().get(&field.source_id)?;
        let f = iceberg::transform::create_transform_function(&field.transform).ok()?;
        let (a, b) = (
            f.transform_literal(lower).ok()??,
            f.transform_literal(upper).ok()??,
        );
        if a != b {
            return None;
        }
        parts.push(format!("{}={a}", field.name));
    }
    Some(parts.join("/"))
}

/// Reads a group's files (applying their delete files) and writes them rolled at the target.
///
/// On a format v3 table the rows keep their lineage: they are read with `_row_id` and
/// `_last_updated_sequence_number` (stored, else inherited from the file's entry) and written
/// with them (spec v3, "Row Lineage": a rewrite must not change a row's id). That takes the
/// in-order reader, not the parallel decoder or the row-group copy (which decline lineage).
pub(super) async fn rewrite_group(
    table: &Table,
    group: usize,
    spec_id: i32,
    members: Vec<FileScanTask>,
    options: &WriteOptions,
    sort_keys: Option<&sort::SortSpec>,
    shared: &parallel::JobShared,
) -> Result<GroupResult> {
    if sort_keys.is_none() && shared.lineage.is_none() {
        if let (Some((spec, partition)), Some(target)) = (
            parallel::output_partition(table, spec_id, &members),
            options.target_file_size_bytes,
        ) {
            let (files, rows) =
                parallel::rewrite(table, members, options, target, spec, partition, shared).await?;
            return Ok(GroupResult { group, files, rows });
        }
    }
    let (mut writer, mut stream) = match &shared.lineage {
        None => {
            let writer = TableWriter::new(table, options).await?;
            let schema = writer.arrow_schema().clone();
            let stream = multi_file::read_rows(table, members, schema, &shared.dvs);
            (writer, stream)
        }
        Some(lineage) => {
            crate::write::rewrite::rewriter(table, options, members, &shared.dvs, Some(lineage))
                .await?
        }
    };
    let schema = writer.arrow_schema().clone();
    // Decode on another task while this one encodes: the two halves of a rewrite then use
    // two cores. The bounded channel keeps at most a few batches in flight (memory is bounded
    // by concurrency, not by group size).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(4);
    let reader = tokio::spawn(async move {
        while let Some(batch) = stream.next().await {
            let failed = batch.is_err();
            if tx.send(batch).await.is_err() || failed {
                break;
            }
        }
    });
    let step = async {
        let mut held = Vec::new();
        while let Some(batch) = rx.recv().await {
            let batch = batch?;
            match sort_keys {
                Some(_) => held.push(batch),
                None => writer.write(batch).await?,
            }
        }
        if let (Some(keys), false) = (sort_keys, held.is_empty()) {
            let sorted = sort::sort_batches(&schema, &held, keys)?;
            drop(held);
            let mut offset = 0;
            while offset < sorted.num_rows() {
                let len = (sorted.num_rows() - offset).min(crate::write::BATCH_ROWS);
                writer.write(sorted.slice(offset, len)).await?;
                offset += len;
            }
        }
        Ok::<_, Error>(())
    };
    let result = step.await;
    reader.abort();
    if let Err(e) = result {
        writer.abort().await;
        return Err(e);
    }
    let rows = writer.rows();
    let files = writer.close().await?;
    Ok(GroupResult { group, files, rows })
}
