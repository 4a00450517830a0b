//! One Parquet decoder over many small files: how a compaction reads its small inputs.
//!
//! ```text
//!  slice's files ──(whole-file reads, several in flight, in order)──> bytes + footer
//!    -> file eligible? (no position delete applies, schema = the output's, column for column)
//!    -> consecutive eligible files with one Parquet schema = one collection of row groups
//!    -> one arrow-rs record batch reader over the collection (batches span files)
//!    -> ZSTD pages decompressed with this thread's one context
//!    -> rows an equality delete matches dropped (its keys read once per run, hashed)
//!  other files -> the iceberg crate's reader (position deletes, schema evolution, name mapping)
//! ```
//!
//! Why: a compaction of thousands of KB-sized files spent most of its time on what every file
//! costs before its first row: a reader pipeline per file (delete loader, footer fetch, one
//! ranged read per column chunk, projection, a stream per file), and per column chunk a new
//! ZSTD codec, which in arrow-rs 58 creates both a compression and a decompression context.
//! Creating a context runs CPUID, which a virtual machine traps: 4.3 µs per instruction on
//! the benchmark machine, about 25 µs per column chunk, a quarter of the whole compaction's CPU
//! on 2,000 files of 200 rows (`perf`, BENCHMARKS.md). Here a file costs one read and one
//! footer parse; pages of ZSTD column chunks are read as stored (the chunk's metadata says
//! UNCOMPRESSED, so arrow-rs creates no codec) and decompressed with one reusable context per
//! thread; batches are full (8,192 rows) however small the files.
//!
//! The result is the rows the iceberg crate's reader gives for the same files: a file takes
//! this path only when its Parquet schema is the output's (same paths, physical and logical
//! types, repetition and field ids, as for a row-group merge), so decoding it with the table's
//! Arrow types is what the iceberg reader's projection does; and no position delete applies.
//! Equality deletes are applied by key: the iceberg reader turns them into one predicate of
//! `NOT (key = v)` terms evaluated against every row, rows x deleted keys (390 s for 3.4
//! million rows and 170,000 deleted keys); here each row is one hash lookup.

use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::scan::FileScanTask;
use iceberg::spec::DataContentType;
use iceberg::table::Table;
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;
use parquet::arrow::{parquet_to_arrow_field_levels, ProjectionMask};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::schema::types::SchemaDescriptor;

mod equality;
mod pages;

pub(super) use equality::EqualityDeletes;
use equality::EqualityKeys;
use pages::Files;

use super::row_group_merge::same_schema;
use crate::base::error::{Error, Result};
use crate::table::deletion_vector::{DeletionVector, DeletionVectors};

/// Files larger than this are streamed through the iceberg reader, not read whole.
pub(super) const MAX_WHOLE_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Whole-file reads in flight per slice.
const READS_IN_FLIGHT: usize = 16;
/// Rows per decoded batch.
const BATCH_ROWS: usize = 8192;

/// One input read whole.
struct FileBytes {
    bytes: Bytes,
    meta: Arc<ParquetMetaData>,
    /// The keys of the equality delete files that apply to it.
    deletes: Vec<Arc<EqualityKeys>>,
    /// Its deletion vector (format v3), if it has one.
    vector: Option<Arc<DeletionVector>>,
}

/// What a slice's inputs become, in input order.
enum Unit {
    /// Files decoded together by one reader.
    Together(Vec<FileBytes>),
    /// A file the iceberg reader reads.
    Alone(Box<FileScanTask>),
}

/// Whether `task` may be read whole here: only equality deletes attached (applied here by
/// key) besides its deletion vector (applied here by position; position delete files go
/// through the iceberg reader), and small enough to hold.
fn eligible(task: &FileScanTask, dvs: &DeletionVectors) -> bool {
    let vector = dvs.of_task(task).map(|d| d.puffin.as_str());
    task.deletes.iter().all(|d| {
        d.file_type == DataContentType::EqualityDeletes || Some(d.file_path.as_str()) == vector
    }) && task.file_size_in_bytes <= MAX_WHOLE_FILE_BYTES
}

/// Calls `push` with every row of `tasks` (their deletes applied), in input order, as batches
/// of `schema` (the table's Arrow schema; `output` its Parquet form).
pub(super) async fn for_each_batch(
    table: &Table,
    tasks: Vec<FileScanTask>,
    schema: &SchemaRef,
    output: &SchemaDescriptor,
    equality: &EqualityDeletes,
    dvs: &DeletionVectors,
    mut push: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    for unit in units(table, tasks, output, equality, dvs).await? {
        match unit {
            Unit::Together(files) => {
                for batch in decode(files, schema)? {
                    push(batch?)?;
                }
            }
            Unit::Alone(task) => {
                let mut stream = read_rows(table, vec![*task], schema.clone(), dvs);
                while let Some(batch) = stream.next().await {
                    push(batch?)?;
                }
            }
        }
    }
    Ok(())
}

/// Reads the eligible inputs whole (several at a time, in order) and groups consecutive ones
/// that share a Parquet schema equal to the output's.
async fn units(
    table: &Table,
    tasks: Vec<FileScanTask>,
    output: &SchemaDescriptor,
    equality: &EqualityDeletes,
    dvs: &DeletionVectors,
) -> Result<Vec<Unit>> {
    let io = table.file_io().clone();
    let mut fetched = futures::stream::iter(tasks.into_iter().map(|task| {
        let io = io.clone();
        async move {
            // Whether it is read here is known before reading it.
            let deletes = match eligible(&task, dvs) {
                true => equality.of(table, &task, dvs).await,
                false => None,
            };
            let Some(deletes) = deletes else {
                return Ok::<_, Error>((task, None));
            };
            let vector = match dvs.of_task(&task) {
                Some(dv) => Some(Arc::new(dv.read(&io).await?)),
                None => None,
            };
            let bytes = io.new_input(&task.data_file_path)?.read().await?;
            Ok((task, Some((bytes, deletes, vector))))
        }
    }))
    .buffered(READS_IN_FLIGHT);
    let mut out: Vec<Unit> = Vec::new();
    while let Some(next) = fetched.next().await {
        let (task, read) = next?;
        let Some((bytes, deletes, vector)) = read else {
            out.push(Unit::Alone(Box::new(task)));
            continue;
        };
        let meta = ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .map_err(|e| file_error(&task, e))?;
        let descr = meta.file_metadata().schema_descr();
        if !same_schema(descr, output) {
            out.push(Unit::Alone(Box::new(task)));
            continue;
        }
        let file = FileBytes {
            bytes,
            meta: Arc::new(meta),
            deletes,
            vector,
        };
        match out.last_mut() {
            Some(Unit::Together(files))
                if files[0].meta.file_metadata().schema_descr().root_schema()
                    == file.meta.file_metadata().schema_descr().root_schema() =>
            {
                files.push(file)
            }
            _ => out.push(Unit::Together(vec![file])),
        }
    }
    Ok(out)
}

fn file_error(task: &FileScanTask, e: parquet::errors::ParquetError) -> Error {
    Error::Io(std::io::Error::other(format!(
        "reading Parquet footer of {}: {e}",
        task.data_file_path
    )))
}

/// One record batch reader over `files` (same Parquet schema), giving batches of `schema`,
/// the rows their equality deletes match left out.
fn decode(
    files: Vec<FileBytes>,
    schema: &SchemaRef,
) -> Result<impl Iterator<Item = Result<RecordBatch>>> {
    let descr = files[0].meta.file_metadata().schema_descr_ptr();
    let levels =
        parquet_to_arrow_field_levels(&descr, ProjectionMask::all(), Some(schema.fields()))?;
    // Where each file's rows end in the collection, and its deletes.
    let mut ends = Vec::with_capacity(files.len());
    let mut end = 0u64;
    for f in &files {
        let start = end;
        end += f.meta.file_metadata().num_rows().max(0) as u64;
        ends.push((end, f.deletes.clone(), start, f.vector.clone()));
    }
    let any_deletes = ends.iter().any(|(_, d, _, v)| !d.is_empty() || v.is_some());
    let row_groups = Files::new(files);
    let reader =
        ParquetRecordBatchReader::try_new_with_row_groups(&levels, &row_groups, BATCH_ROWS, None)?;
    let schema = schema.clone();
    let mut row = 0u64;
    let mut file = 0usize;
    Ok(reader.map(move |batch| {
        let batch = RecordBatch::try_new(schema.clone(), batch?.columns().to_vec())?;
        if !any_deletes {
            return Ok(batch);
        }
        let n = batch.num_rows();
        let mut keep: Option<Vec<bool>> = None;
        let mut offset = 0usize;
        while offset < n {
            while file < ends.len() && ends[file].0 <= row {
                file += 1;
            }
            let Some((end, deletes, start, vector)) = ends.get(file) else {
                return Err(Error::Io(std::io::Error::other(
                    "compaction reader: more rows than the files' footers count",
                )));
            };
            let len = ((end - row) as usize).min(n - offset);
            if let Some(v) = vector {
                // Positions in the file: rows before this batch's part, from the file's start.
                let first = row - start;
                let k = keep.get_or_insert_with(|| vec![true; n]);
                for j in 0..len {
                    if v.contains(first + j as u64) {
                        k[offset + j] = false;
                    }
                }
            }
            if !deletes.is_empty() {
                let part = batch.slice(offset, len);
                let k = keep.get_or_insert_with(|| vec![true; n]);
                for keys in deletes {
                    let hit = keys.matches(&part)?;
                    for j in 0..len {
                        if hit.value(j) {
                            k[offset + j] = false;
                        }
                    }
                }
            }
            offset += len;
            row += len as u64;
        }
        Ok(match keep {
            None => batch,
            Some(k) => arrow::compute::filter_record_batch(&batch, &BooleanArray::from(k))?,
        })
    }))
}

/// Every row of `members`, their delete files applied (all rows, not only those matching a
/// `--where` filter), as batches in `schema`: the table's Arrow schema with field ids. Read by
/// [`crate::table::rows`]: the iceberg crate's reader, and floe's pass for files with a
/// deletion vector.
pub(super) fn read_rows(
    table: &Table,
    members: Vec<FileScanTask>,
    schema: arrow_schema::SchemaRef,
    dvs: &DeletionVectors,
) -> BoxStream<'static, Result<RecordBatch>> {
    let tasks: Vec<FileScanTask> = members
        .into_iter()
        .map(|mut t| {
            t.predicate = None;
            t
        })
        .collect();
    crate::table::rows::read_tasks(table, tasks, dvs)
        .map(move |b| crate::write::conform::to_schema(b?, &schema))
        .boxed()
}

#[cfg(test)]
mod tests;
