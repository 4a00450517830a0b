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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array};
use arrow::datatypes::{DataType, Int64Type};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow::row::{RowConverter, SortField};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::DataContentType;
use iceberg::table::Table;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::deletion_vector::{DeletionVector, DeletionVectors};
use super::lineage::{self, FileLineage};
use crate::base::error::{Error, Result};

/// Rows per batch of the iceberg reader.
const BATCH_ROWS: usize = 8192;

/// Every live row of `table`'s current snapshot (as [`crate::table::current_state`] sees it),
/// `columns` projected (`None`: all, `Some(vec![])`: none, for counts): planned with the
/// iceberg crate's scan and read by [`read_tasks`], deletion vectors applied.
pub async fn read_current(
    table: &Table,
    columns: Option<Vec<String>>,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    if table.metadata().current_snapshot().is_none() {
        return Ok(futures::stream::empty().boxed());
    }
    let table = crate::table::current_state(table)?;
    let scan = match columns {
        None => table.scan().select_all().build()?,
        Some(c) if c.is_empty() => table.scan().select_empty().build()?,
        Some(c) => table.scan().select(c).build()?,
    };
    let mut tasks: Vec<FileScanTask> = scan.plan_files().await?.try_collect().await?;
    let dvs = DeletionVectors::of_current(&table).await?;
    for t in &mut tasks {
        dvs.attach(t);
    }
    Ok(read_tasks(&table, tasks, &dvs))
}

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
                    in_order(&table, *task, vector, None).await
                })
                .try_flatten()
                .boxed()
            }
        })
        .flatten()
        .boxed()
}

/// The live rows of each `(task, drop)` in file order, without the rows at positions `drop`:
/// what a copy-on-write change writes for a file it changes some rows of. The deletes that
/// already apply to the file (its position delete files or deletion vector, and its equality
/// deletes) are applied too. With `lineage` (format v3) each batch carries `_row_id` and
/// `_last_updated_sequence_number` after the projected columns, as
/// [`read_tasks_with_lineage`] gives them, so the kept rows keep their identity.
pub fn read_tasks_without(
    table: &Table,
    tasks: Vec<(FileScanTask, Vec<i64>)>,
    dvs: &DeletionVectors,
    lineage: Option<Arc<HashMap<String, FileLineage>>>,
) -> BoxStream<'static, Result<RecordBatch>> {
    let table = table.clone();
    let dvs = dvs.clone();
    futures::stream::iter(tasks)
        .map(move |(task, drop)| {
            let (table, dvs) = (table.clone(), dvs.clone());
            let of_file = lineage
                .as_ref()
                .map(|l| l.get(&task.data_file_path).copied());
            futures::stream::once(async move {
                let mut deleted = deleted_positions(&table, &task, &dvs).await?;
                deleted.union(&DeletionVector::from_positions(
                    drop.iter().map(|&p| p as u64),
                ));
                let of_file = match of_file {
                    None => None,
                    Some(Some(l)) => Some(l),
                    Some(None) => {
                        return Err(Error::Metadata {
                            location: task.data_file_path.clone(),
                            reason: "no manifest entry for this data file (row lineage unknown)"
                                .into(),
                            source: None,
                        })
                    }
                };
                in_order(&table, task, deleted, of_file).await
            })
            .try_flatten()
            .boxed()
        })
        .flatten()
        .boxed()
}

/// [`read_tasks`] keeping row lineage (format v3, spec "Row Lineage"): every task is read in
/// file order by floe's pass (its vector, or its position delete files, applied by position),
/// and each batch carries `_row_id` and `_last_updated_sequence_number` after the projected
/// columns: the value stored in the file, else the one inherited from `lineage` (the data
/// file's `first_row_id` plus the row's position; the file's data sequence number). What a
/// compaction writes so that every row keeps its identity.
pub fn read_tasks_with_lineage(
    table: &Table,
    tasks: Vec<FileScanTask>,
    dvs: &DeletionVectors,
    lineage: Arc<HashMap<String, FileLineage>>,
) -> BoxStream<'static, Result<RecordBatch>> {
    let tasks = tasks.into_iter().map(|t| (t, Vec::new())).collect();
    read_tasks_without(table, tasks, dvs, Some(lineage))
}

/// The positions of `task`'s data file its deletion vector deletes, or (no vector) its
/// position delete files.
async fn deleted_positions(
    table: &Table,
    task: &FileScanTask,
    dvs: &DeletionVectors,
) -> Result<DeletionVector> {
    if let Some(dv) = dvs.of_task(task) {
        return dv.read(table.file_io()).await;
    }
    let mut positions = Vec::new();
    for d in task
        .deletes
        .iter()
        .filter(|d| d.file_type == DataContentType::PositionDeletes)
    {
        for (path, pos) in read_position_deletes(table, &d.file_path).await? {
            if path == task.data_file_path {
                positions.push(pos.max(0) as u64);
            }
        }
    }
    Ok(DeletionVector::from_positions(positions))
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

/// One task read whole in file order (no predicate, no delete file), the positions `vector`
/// holds and the rows its equality deletes match dropped. With `lineage`, each batch also
/// carries the rows' `_row_id` and `_last_updated_sequence_number` after the projected columns.
async fn in_order(
    table: &Table,
    mut task: FileScanTask,
    vector: DeletionVector,
    lineage: Option<FileLineage>,
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
    // The lineage columns are read by field id like any other (null when the file has none):
    // the task's schema gets the two reserved fields.
    let lineage_at = match lineage {
        Some(_) => {
            task.schema = Arc::new(lineage::with_lineage_fields(&task.schema)?);
            task.project_field_ids.push(lineage::ROW_ID_FIELD_ID);
            task.project_field_ids
                .push(lineage::LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID);
            Some(task.project_field_ids.len() - 2)
        }
        None => None,
    };
    let path = task.data_file_path.clone();
    // The iceberg reader (0.10.1) never reads reserved field ids from a file (it gives nulls
    // for them), so the stored values are read here, by field id, in file order.
    let stored = match lineage {
        Some(_) => stored_lineage(table, &path).await?,
        None => None,
    };
    task.deletes.clear();
    task.predicate = None;
    let rows = plain(table, vec![task]);
    let mut next = 0u64;
    Ok(rows
        .map(move |batch| {
            let mut batch = batch?;
            let n = batch.num_rows();
            if let (Some(at), Some(of_file)) = (lineage_at, lineage) {
                let stored = stored
                    .as_ref()
                    .map(|[ids, seqs]| [ids.slice(next as usize, n), seqs.slice(next as usize, n)]);
                batch = with_lineage(batch, at, next, of_file, stored)?;
            }
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
            match lineage_at {
                Some(at) => {
                    Ok(batch.project(&(0..wanted).chain([at, at + 1]).collect::<Vec<_>>())?)
                }
                None => project(batch, wanted),
            }
        })
        .boxed())
}

/// `batch` with its lineage columns (at `at` and `at + 1`) filled in where the file stored
/// none: `_row_id` = first row id + position (rows start at position `first`), and
/// `_last_updated_sequence_number` = the file's data sequence number. A file from before the
/// table had lineage (no first row id) keeps null row ids: the commit of the new file assigns
/// them.
fn with_lineage(
    batch: RecordBatch,
    at: usize,
    first: u64,
    of_file: FileLineage,
    stored: Option<[Int64Array; 2]>,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let (stored_ids, stored_seq) = match stored {
        Some([ids, seqs]) => (Some(ids), Some(seqs)),
        None => (None, None),
    };
    let ids: Int64Array = (0..n)
        .map(|i| match &stored_ids {
            Some(s) if s.is_valid(i) => Some(s.value(i)),
            _ => of_file.first_row_id.map(|f| f + (first + i as u64) as i64),
        })
        .collect();
    let seqs: Int64Array = (0..n)
        .map(|i| match &stored_seq {
            Some(s) if s.is_valid(i) => Some(s.value(i)),
            _ => Some(of_file.sequence_number),
        })
        .collect();
    let mut columns = batch.columns().to_vec();
    columns[at] = Arc::new(ids);
    columns[at + 1] = Arc::new(seqs);
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The `_row_id` and `_last_updated_sequence_number` columns a data file stores (a file a
/// compaction or an update wrote), all rows in file order, a column the file lacks all null;
/// `None` when it stores neither.
async fn stored_lineage(table: &Table, path: &str) -> Result<Option<[Int64Array; 2]>> {
    use parquet::arrow::ParquetRecordBatchStreamBuilder;
    let input = table.file_io().new_input(path)?;
    let meta = input.metadata().await?;
    let reader = iceberg::arrow::ArrowFileReader::new(meta, input.reader().await?);
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let wanted = [
        lineage::ROW_ID_FIELD_ID,
        lineage::LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
    ];
    let roots = builder.parquet_schema().root_schema().get_fields();
    let found: Vec<(usize, usize)> = roots
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let info = f.get_basic_info();
            let id = info.has_id().then(|| info.id())?;
            Some((i, wanted.iter().position(|w| *w == id)?))
        })
        .collect();
    if found.is_empty() {
        return Ok(None);
    }
    let rows = builder.metadata().file_metadata().num_rows().max(0) as usize;
    let mask = ProjectionMask::roots(builder.parquet_schema(), found.iter().map(|f| f.0));
    let mut stream = builder.with_projection(mask).build()?;
    let mut parts: [Vec<ArrayRef>; 2] = [Vec::new(), Vec::new()];
    while let Some(batch) = stream.try_next().await? {
        // Projected columns come in file order, as `found` lists them.
        for (col, (_, which)) in found.iter().enumerate() {
            let values = arrow::compute::cast(batch.column(col), &DataType::Int64)?;
            parts[*which].push(values);
        }
    }
    let mut out = Vec::with_capacity(2);
    for part in parts {
        let column = if part.is_empty() {
            Int64Array::new_null(rows)
        } else {
            let refs: Vec<&dyn Array> = part.iter().map(|a| a.as_ref()).collect();
            arrow::compute::concat(&refs)?
                .as_primitive::<Int64Type>()
                .clone()
        };
        if column.len() != rows {
            return Err(Error::Metadata {
                location: path.to_string(),
                reason: format!(
                    "lineage columns hold {} rows, the file {rows}",
                    column.len()
                ),
                source: None,
            });
        }
        out.push(column);
    }
    let [ids, seqs]: [Int64Array; 2] = out.try_into().expect("two columns");
    Ok(Some([ids, seqs]))
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

/// Every (data file path, position) row of the position delete file at `path`.
pub async fn read_position_deletes(table: &Table, path: &str) -> Result<Vec<(String, i64)>> {
    let bytes = table.file_io().new_input(path)?.read().await?;
    let bad = |reason: String| Error::Metadata {
        location: path.to_string(),
        reason,
        source: None,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let schema = builder.schema().clone();
    let (Ok(pi), Ok(qi)) = (schema.index_of("file_path"), schema.index_of("pos")) else {
        return Err(bad(
            "not a position delete file (no file_path and pos columns)".into(),
        ));
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [pi, qi]);
    let reader = builder.with_projection(mask).build()?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch?;
        let s = batch.schema();
        let paths = arrow::compute::cast(batch.column(s.index_of("file_path")?), &DataType::Utf8)?;
        let pos = arrow::compute::cast(batch.column(s.index_of("pos")?), &DataType::Int64)?;
        let paths = paths.as_string::<i32>();
        let pos = pos.as_primitive::<Int64Type>();
        if paths.null_count() > 0 || pos.null_count() > 0 {
            return Err(bad("null file_path or pos in a position delete file".into()));
        }
        for i in 0..batch.num_rows() {
            out.push((paths.value(i).to_string(), pos.value(i)));
        }
    }
    Ok(out)
}
