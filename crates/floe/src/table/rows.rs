//! The rows of planned scan tasks with every delete applied: the iceberg crate's reader for
//! what it reads (position and equality deletes, schema evolution, name mapping), and floe's
//! own pass for data files with a deletion vector (Iceberg format v3), which that reader
//! (0.10.1) cannot open.
//!
//! ```text
//!  tasks (attached: DeletionVectors::attach) ──> runs of tasks without a vector ──> iceberg reader
//!                                           └──> a task with a vector: its file read whole, in
//!                                                file order, without its delete files; a row's
//!                                                position is its ordinal; rows the vector holds
//!                                                and rows an equality delete matches are dropped
//! ```
//!
//! A row's position is only known when nothing is filtered before it is counted, so a task
//! with a vector is read with no predicate and no delete file, and its equality deletes (the
//! only other kind that still applies: position delete files are replaced by the vector) are
//! matched here by key, with Iceberg's equality semantics (a null key matches a null value).

use std::collections::HashSet;

use arrow::array::{ArrayRef, BooleanArray};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow::row::{RowConverter, SortField};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::DataContentType;
use iceberg::table::Table;

use super::deletion_vector::{DeletionVector, DeletionVectors};
use crate::base::error::{Error, Result};

/// Rows per batch of the iceberg reader.
const BATCH_ROWS: usize = 8192;

/// Every live row of `tasks` (attached to `dvs`), as batches of each task's projected columns
/// (`project_field_ids`, in that order), in task order for tasks with a vector and in the
/// iceberg reader's order within a run of tasks without one.
pub fn read_tasks(
    table: &Table,
    tasks: Vec<FileScanTask>,
    dvs: &DeletionVectors,
) -> BoxStream<'static, Result<RecordBatch>> {
    enum Run {
        Plain(Vec<FileScanTask>),
        Vector(Box<FileScanTask>, super::deletion_vector::DvLocation),
    }
    let mut runs: Vec<Run> = Vec::new();
    for task in tasks {
        match dvs.of_task(&task).cloned() {
            Some(dv) => runs.push(Run::Vector(Box::new(task), dv)),
            None => match runs.last_mut() {
                Some(Run::Plain(ts)) => ts.push(task),
                _ => runs.push(Run::Plain(vec![task])),
            },
        }
    }
    let table = table.clone();
    futures::stream::iter(runs)
        .map(move |run| match run {
            Run::Plain(tasks) => plain(&table, tasks),
            Run::Vector(task, dv) => {
                let table = table.clone();
                futures::stream::once(async move {
                    let vector = dv.read(table.file_io()).await?;
                    with_vector(&table, *task, vector).await
                })
                .try_flatten()
                .boxed()
            }
        })
        .flatten()
        .boxed()
}

/// Tasks without a vector, through the iceberg reader.
fn plain(table: &Table, tasks: Vec<FileScanTask>) -> BoxStream<'static, Result<RecordBatch>> {
    let stream = table
        .reader_builder()
        .with_batch_size(BATCH_ROWS)
        .build()
        .read(futures::stream::iter(tasks.into_iter().map(Ok)).boxed());
    match stream {
        Ok(s) => s.stream().map_err(Error::from).boxed(),
        Err(e) => futures::stream::once(async move { Err(e.into()) }).boxed(),
    }
}

/// One task with a deletion vector: read whole in file order (no predicate, no delete file),
/// the vector's positions and its equality deletes' keys dropped.
async fn with_vector(
    table: &Table,
    mut task: FileScanTask,
    vector: DeletionVector,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let equality: Vec<FileScanTaskDeleteFile> = task
        .deletes
        .iter()
        .filter(|d| d.file_type == DataContentType::EqualityDeletes)
        .cloned()
        .collect();
    let wanted = task.project_field_ids.len();
    let mut keys = Vec::with_capacity(equality.len());
    for d in &equality {
        let ids = d.equality_ids.clone().unwrap_or_default();
        let mut columns = Vec::with_capacity(ids.len());
        for id in &ids {
            let at = match task.project_field_ids.iter().position(|p| p == id) {
                Some(at) => at,
                None => {
                    task.project_field_ids.push(*id);
                    task.project_field_ids.len() - 1
                }
            };
            columns.push(at);
        }
        keys.push((
            columns,
            EqualityRows::read(table, &d.file_path, d.file_size_in_bytes, ids).await?,
        ));
    }
    let path = task.data_file_path.clone();
    task.deletes.clear();
    task.predicate = None;
    let rows = plain(table, vec![task]);
    let mut next = 0u64;
    Ok(rows
        .map(move |batch| {
            let batch = batch?;
            let n = batch.num_rows();
            let mut keep: Vec<bool> = (0..n as u64).map(|i| !vector.contains(next + i)).collect();
            next += n as u64;
            for (columns, k) in &keys {
                let cols: Vec<ArrayRef> =
                    columns.iter().map(|&i| batch.column(i).clone()).collect();
                let hit = k.deletes(&cols).map_err(|e| key_error(&path, e))?;
                for (i, h) in hit.iter().enumerate() {
                    if *h {
                        keep[i] = false;
                    }
                }
            }
            let batch = arrow::compute::filter_record_batch(&batch, &BooleanArray::from(keep))?;
            project(batch, wanted)
        })
        .boxed())
}

/// The first `n` columns of `batch` (the equality key columns read only to match are dropped).
fn project(batch: RecordBatch, n: usize) -> Result<RecordBatch> {
    if batch.num_columns() == n {
        return Ok(batch);
    }
    let schema = std::sync::Arc::new(batch.schema().project(&(0..n).collect::<Vec<_>>())?);
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        schema,
        batch.columns()[..n].to_vec(),
        &options,
    )?)
}

fn key_error(path: &str, e: Error) -> Error {
    Error::Io(std::io::Error::other(format!(
        "applying equality deletes to {path} (it has a deletion vector): {e}"
    )))
}

/// The rows of one equality delete file: its equality field ids and each row's values on them,
/// encoded in arrow's row format (a null equals a null, as the spec says: a null key matches a
/// null value).
pub struct EqualityRows {
    ids: Vec<i32>,
    /// `None` when the file has no row.
    converter: Option<RowConverter>,
    keys: HashSet<Box<[u8]>>,
}

impl EqualityRows {
    /// Reads equality delete file `path` (`size` bytes) on its equality fields `ids`, through
    /// the table's current schema.
    pub async fn read(table: &Table, path: &str, size: u64, ids: Vec<i32>) -> Result<Self> {
        let mut stream = super::read_file_columns(table, path, size, ids.clone())?;
        let mut converter: Option<RowConverter> = None;
        let mut keys = HashSet::new();
        while let Some(batch) = stream.try_next().await? {
            if converter.is_none() {
                converter = Some(RowConverter::new(
                    batch
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| SortField::new(f.data_type().clone()))
                        .collect(),
                )?);
            }
            let Some(conv) = converter.as_ref() else {
                continue;
            };
            let rows = conv.convert_columns(batch.columns())?;
            keys.extend(rows.iter().map(|r| Box::<[u8]>::from(r.as_ref())));
        }
        Ok(Self {
            ids,
            converter,
            keys,
        })
    }

    /// Its equality field ids, in the order [`Self::deletes`] takes the columns.
    pub fn ids(&self) -> &[i32] {
        &self.ids
    }

    /// Rows of `cols` (the equality columns, in [`Self::ids`] order) it deletes.
    pub fn deletes(&self, cols: &[ArrayRef]) -> Result<Vec<bool>> {
        let Some(converter) = &self.converter else {
            return Ok(vec![false; cols.first().map_or(0, |c| c.len())]);
        };
        let rows = converter.convert_columns(cols)?;
        Ok(rows
            .iter()
            .map(|r| self.keys.contains(r.as_ref()))
            .collect())
    }
}
