//! Rewriting live rows into new data files (compaction, copy-on-write changes): the writer
//! and the rows of the files to rewrite, with their delete files applied, and on a format v3
//! table their lineage kept.
//!
//! Format v3 (spec "Row Lineage"): a row rewritten into a new file keeps its `_row_id` and
//! `_last_updated_sequence_number`. The rows are read with both columns (stored, else
//! inherited from the file's manifest entry, [`crate::table::rows::read_tasks_with_lineage`])
//! and written in the table schema plus the two fields ([`crate::table::lineage`]), as
//! Iceberg's Java implementation writes them.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::scan::FileScanTask;
use iceberg::spec::DataFile;
use iceberg::table::Table;

use crate::base::error::Result;
use crate::table::deletion_vector::DeletionVectors;
use crate::table::lineage::{self, FileLineage};
use crate::write::{conform, TableWriter, WriteOptions};

/// What a rewrite of `table`'s live rows needs to know of it: its deletion vectors and, when it
/// has row lineage (format v3), each live data file's lineage; both from one read of the
/// manifests (none before v3: no vectors, no lineage).
pub async fn lineage_of(
    table: &Table,
) -> Result<(DeletionVectors, Option<Arc<HashMap<String, FileLineage>>>)> {
    if table.metadata().format_version() < iceberg::spec::FormatVersion::V3 {
        return Ok((DeletionVectors::default(), None));
    }
    let live = crate::table::manifests::live_files(table).await?;
    Ok((
        DeletionVectors::from_live(&live),
        Some(Arc::new(crate::table::manifests::lineage_of(&live))),
    ))
}

/// A writer for the rewritten rows of `tasks` (attached to `dvs`), and those rows as batches
/// of the writer's schema. With `lineage`, both carry the two lineage columns.
pub async fn rewriter(
    table: &Table,
    options: &WriteOptions,
    tasks: Vec<FileScanTask>,
    dvs: &DeletionVectors,
    lineage: Option<&Arc<HashMap<String, FileLineage>>>,
) -> Result<(TableWriter, BoxStream<'static, Result<RecordBatch>>)> {
    let tasks: Vec<FileScanTask> = tasks.into_iter().map(unfiltered).collect();
    let writer = writer_for(table, options, lineage.is_some()).await?;
    let rows = match lineage {
        None => crate::table::rows::read_tasks(table, tasks, dvs),
        Some(lineage) => {
            crate::table::rows::read_tasks_with_lineage(table, tasks, dvs, lineage.clone())
        }
    };
    Ok(conformed(writer, rows))
}

/// [`rewriter`] for a copy-on-write change: the rows of each `(task, drop)` without those at
/// positions `drop` ([`crate::table::rows::read_tasks_without`]).
pub async fn rewriter_without(
    table: &Table,
    options: &WriteOptions,
    tasks: Vec<(FileScanTask, Vec<i64>)>,
    dvs: &DeletionVectors,
    lineage: Option<&Arc<HashMap<String, FileLineage>>>,
) -> Result<(TableWriter, BoxStream<'static, Result<RecordBatch>>)> {
    let tasks = tasks
        .into_iter()
        .map(|(t, drop)| (unfiltered(t), drop))
        .collect();
    let writer = writer_for(table, options, lineage.is_some()).await?;
    let rows = crate::table::rows::read_tasks_without(table, tasks, dvs, lineage.cloned());
    Ok(conformed(writer, rows))
}

/// Writes every batch of `rows` through `keep` (which may drop rows; nothing is written for a
/// batch it empties) and closes `writer`: the files written. On an error the writer is aborted,
/// so a failed rewrite leaves no file behind.
pub async fn write_all(
    mut writer: TableWriter,
    mut rows: BoxStream<'static, Result<RecordBatch>>,
    mut keep: impl FnMut(RecordBatch) -> Result<RecordBatch>,
) -> Result<Vec<DataFile>> {
    let step = async {
        while let Some(batch) = rows.try_next().await? {
            let kept = keep(batch)?;
            if kept.num_rows() > 0 {
                writer.write(kept).await?;
            }
        }
        Ok::<_, crate::base::error::Error>(())
    };
    if let Err(e) = step.await {
        writer.abort().await;
        return Err(e);
    }
    writer.close().await
}

/// A rewrite reads every live row of a file: no scan predicate.
fn unfiltered(mut task: FileScanTask) -> FileScanTask {
    task.predicate = None;
    task
}

/// The writer of rewritten rows: the table schema, plus the two lineage fields `with_lineage`.
async fn writer_for(
    table: &Table,
    options: &WriteOptions,
    with_lineage: bool,
) -> Result<TableWriter> {
    if with_lineage {
        let schema = lineage::with_lineage_fields(table.metadata().current_schema())?;
        TableWriter::in_schema(table, options, Arc::new(schema)).await
    } else {
        TableWriter::new(table, options).await
    }
}

/// The writer with `rows` conformed to its schema.
fn conformed(
    writer: TableWriter,
    rows: BoxStream<'static, Result<RecordBatch>>,
) -> (TableWriter, BoxStream<'static, Result<RecordBatch>>) {
    let schema = writer.arrow_schema().clone();
    let rows = rows.map(move |b| conform::to_schema(b?, &schema)).boxed();
    (writer, rows)
}
