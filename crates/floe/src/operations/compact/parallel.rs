//! The rewrite of one compaction job, with its row groups encoded in parallel.
//!
//! ```text
//!  job's input files -> slices of about one row group (by record count, in order)
//!    -> each slice on its own task: decode (deletes applied) + encode into column chunks
//!    -> in slice order: append the row groups to the output, roll at the target size
//!    -> footer -> DataFile (metrics from the footer, NaN counts from the batches)
//! ```
//!
//! The iceberg crate's writer encodes a file on one core, and a compaction of small files
//! usually produces a single output, so that core was the limit. Row groups are independent in
//! Parquet, so slices of the input can be decoded and encoded on every core and appended to the
//! same file in their order. Memory: each slice in flight holds at most one row group's encoded
//! column chunks, and at most `available_parallelism` slices run at once, across all jobs.
//!
//! Inputs eligible for a row-group merge ([`super::row_group_merge`]) skip decoding: after the
//! decoded slices, their row groups are copied into the same outputs (a hybrid job: small
//! files decode-merged into full row groups, large ones copied).
//!
//! Used for unsorted rewrites of files in the table's default partition spec (the output keeps
//! the inputs' partition); sorted and re-partitioning rewrites go through
//! [`crate::write::TableWriter`].

use std::collections::HashMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::StreamExt;
use iceberg::io::FileWrite;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataFile, DataFileFormat, PartitionKey, PartitionSpecRef, Struct};
use iceberg::table::Table;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, FileNameGenerator, LocationGenerator,
};
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::SchemaDescPtr;

use super::row_group_merge::{self, MergeConfig, MergeInput};
use crate::base::error::{Error, Result};
use crate::commit::Ledger;
use crate::write::parquet_stats::{count_nans, data_file_from_parquet, FilePlacement};

/// What the jobs of one compaction run share: one permit per core for encoding slices (more
/// in flight would only add memory) and the row-group merge settings and counters.
pub(super) struct JobShared {
    pub cores: Arc<tokio::sync::Semaphore>,
    pub merge: Arc<MergeConfig>,
    /// Equality delete keys, read once per run.
    pub equality: Arc<super::multi_file::EqualityDeletes>,
    /// The deletion vectors of the planned snapshot (format v3).
    pub dvs: crate::table::deletion_vector::DeletionVectors,
    /// Format v3: each live data file's row lineage; the rewrite then keeps every row's
    /// `_row_id` and `_last_updated_sequence_number` (`rewrite::rewrite_group`).
    pub lineage: Option<Arc<HashMap<String, crate::table::lineage::FileLineage>>>,
}

/// Rows in a row group when the writer properties set no bound (arrow-rs's default).
const DEFAULT_ROW_GROUP_ROWS: usize = 1024 * 1024;

/// The partition a job's output takes, if the job can take the parallel path: its group is in
/// the table's default spec (`spec_id`, from the manifests: scan tasks do not carry it), so the
/// output keeps the inputs' partition tuple, which all members of a group share.
pub(super) fn output_partition(
    table: &Table,
    spec_id: i32,
    members: &[FileScanTask],
) -> Option<(PartitionSpecRef, Struct)> {
    let spec = table.metadata().default_partition_spec().clone();
    if spec.spec_id() != spec_id {
        return None;
    }
    if spec.fields().is_empty() {
        return Some((spec, Struct::empty()));
    }
    let partition = members.first()?.partition.clone()?;
    members
        .iter()
        .all(|t| t.partition.as_ref() == Some(&partition))
        .then_some((spec, partition))
}

/// Cores to encode on (the slices of all jobs share this many permits).
pub(super) fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// One row group, encoded.
struct EncodedRowGroup {
    chunks: Vec<ArrowColumnChunk>,
    rows: usize,
    nans: HashMap<i32, u64>,
}

/// Fewest rows a slice is cut to so that a job of less than a row group still uses every
/// core (its output then has one row group per slice, of at least this many rows).
const MIN_SLICE_ROWS: usize = 40_000;

/// Rows per slice for a job's `members`: a row group's worth, or less when the whole job is
/// smaller than one row group per core, so that one job alone still decodes and encodes on
/// every core (a table of one partition is one job).
fn slice_rows(members: &[FileScanTask], rows_per_group: usize, cores: usize) -> usize {
    let total: usize = members
        .iter()
        .map(|t| t.record_count.unwrap_or(0) as usize)
        .sum();
    let per_core = total.div_ceil(cores.max(1));
    if per_core >= rows_per_group {
        rows_per_group
    } else {
        per_core.max(MIN_SLICE_ROWS).min(rows_per_group)
    }
}

/// Splits the inputs, in order, into slices of at most `rows` records (a larger file is a
/// slice of its own).
fn slices(members: Vec<FileScanTask>, rows: usize) -> Vec<Vec<FileScanTask>> {
    let mut out: Vec<Vec<FileScanTask>> = Vec::new();
    let mut filled = 0usize;
    for t in members {
        let n = t.record_count.unwrap_or(0) as usize;
        match out.last_mut() {
            Some(last) if filled + n <= rows => {
                last.push(t);
                filled += n;
            }
            _ => {
                out.push(vec![t]);
                filled = n;
            }
        }
    }
    out
}

fn write_batch(writers: &mut [ArrowColumnWriter], batch: &RecordBatch) -> Result<()> {
    let mut next = writers.iter_mut();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        for leaf in compute_leaves(field, column)? {
            let writer = next.next().ok_or_else(|| {
                Error::Io(std::io::Error::other(
                    "compaction writer: more leaf columns than column writers",
                ))
            })?;
            writer.write(&leaf)?;
        }
    }
    Ok(())
}

fn close_row_group(
    writers: Vec<ArrowColumnWriter>,
    rows: usize,
    nans: HashMap<i32, u64>,
) -> Result<EncodedRowGroup> {
    let chunks = writers
        .into_iter()
        .map(|w| w.close())
        .collect::<parquet::errors::Result<Vec<_>>>()?;
    Ok(EncodedRowGroup { chunks, rows, nans })
}

/// Decodes one slice (applying its delete files) and encodes it into row groups of at most
/// `rows_per_group` rows. `output` is the Parquet schema of the outputs.
#[allow(clippy::too_many_arguments)]
async fn encode_slice(
    table: Table,
    tasks: Vec<FileScanTask>,
    factory: Arc<ArrowRowGroupWriterFactory>,
    schema: SchemaRef,
    output: SchemaDescPtr,
    rows_per_group: usize,
    index: usize,
    cores: Arc<tokio::sync::Semaphore>,
    equality: Arc<super::multi_file::EqualityDeletes>,
    dvs: crate::table::deletion_vector::DeletionVectors,
) -> Result<Vec<EncodedRowGroup>> {
    // The semaphore is never closed while jobs run.
    let _core = cores
        .acquire_owned()
        .await
        .map_err(|e| Error::Io(std::io::Error::other(e)))?;
    let mut done = Vec::new();
    let mut open: Option<(Vec<ArrowColumnWriter>, usize, HashMap<i32, u64>)> = None;
    super::multi_file::for_each_batch(&table, tasks, &schema, &output, &equality, &dvs, |batch| {
        let mut offset = 0;
        while offset < batch.num_rows() {
            if open.is_none() {
                open = Some((factory.create_column_writers(index)?, 0, HashMap::new()));
            }
            let Some((writers, rows, nans)) = open.as_mut() else {
                unreachable!("a row group was just opened")
            };
            let take = (batch.num_rows() - offset).min(rows_per_group - *rows);
            let part = batch.slice(offset, take);
            write_batch(writers, &part)?;
            count_nans(&part, nans);
            *rows += take;
            offset += take;
            if *rows >= rows_per_group {
                if let Some((w, r, n)) = open.take() {
                    done.push(close_row_group(w, r, n)?);
                }
            }
        }
        Ok(())
    })
    .await?;
    if let Some((w, r, n)) = open.take() {
        done.push(close_row_group(w, r, n)?);
    }
    Ok(done)
}

/// An output file being assembled from encoded row groups.
struct OutputFile {
    writer: SerializedFileWriter<Vec<u8>>,
    sink: Box<dyn FileWrite>,
    path: String,
    nans: HashMap<i32, u64>,
}

impl OutputFile {
    async fn create(
        table: &Table,
        path: String,
        schema: &SchemaRef,
        props: &WriterProperties,
    ) -> Result<(Self, ArrowRowGroupWriterFactory)> {
        let (writer, factory) =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone()))?
                .into_serialized_writer()?;
        let sink = table.file_io().new_output(&path)?.writer().await?;
        Ok((
            Self {
                writer,
                sink,
                path,
                nans: HashMap::new(),
            },
            factory,
        ))
    }

    /// Appends a row group copied from an input (no decoding); `nans` are the input's NaN
    /// counts when this is its first row group in this output.
    async fn append_copied(
        &mut self,
        rg: row_group_merge::FetchedRowGroup,
        nans: Option<&HashMap<i32, u64>>,
    ) -> Result<()> {
        rg.append_to(&mut self.writer)?;
        for (id, n) in nans.into_iter().flatten() {
            *self.nans.entry(*id).or_insert(0) += n;
        }
        self.drain().await
    }

    async fn append(&mut self, rg: EncodedRowGroup) -> Result<()> {
        let mut group = self.writer.next_row_group()?;
        for chunk in rg.chunks {
            chunk.append_to_row_group(&mut group)?;
        }
        group.close()?;
        for (id, n) in rg.nans {
            *self.nans.entry(id).or_insert(0) += n;
        }
        self.drain().await
    }

    /// Hands the bytes encoded so far to storage.
    async fn drain(&mut self) -> Result<()> {
        let buf = std::mem::take(self.writer.inner_mut());
        if !buf.is_empty() {
            self.sink.write(Bytes::from(buf)).await?;
        }
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.writer.bytes_written() as u64
    }

    async fn finish(
        mut self,
        table: &Table,
        spec: &PartitionSpecRef,
        partition: &Struct,
    ) -> Result<DataFile> {
        let metadata = self.writer.finish()?;
        self.drain().await?;
        self.sink.close().await?;
        let size = self.bytes_written();
        data_file_from_parquet(
            table.metadata().current_schema(),
            &metadata,
            size,
            FilePlacement {
                path: self.path,
                partition: partition.clone(),
                spec_id: spec.spec_id(),
            },
            self.nans,
        )
    }
}

/// Rewrites `members` into files of about `target` bytes in `partition`. Returns the data
/// files and the rows written; on failure deletes what it wrote.
pub(super) async fn rewrite(
    table: &Table,
    members: Vec<FileScanTask>,
    options: &crate::write::WriteOptions,
    target: u64,
    spec: PartitionSpecRef,
    partition: Struct,
    shared: &JobShared,
) -> Result<(Vec<DataFile>, u64)> {
    let mut written: Vec<String> = Vec::new();
    let result = rewrite_inner(
        table,
        members,
        options.file_prefix.as_deref(),
        target,
        &spec,
        &partition,
        shared,
        &mut written,
    )
    .await;
    if result.is_err() {
        Ledger::of(table).with(written).discard().await;
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn rewrite_inner(
    table: &Table,
    members: Vec<FileScanTask>,
    prefix: Option<&str>,
    target: u64,
    spec: &PartitionSpecRef,
    partition: &Struct,
    shared: &JobShared,
    written: &mut Vec<String>,
) -> Result<(Vec<DataFile>, u64)> {
    let merge: &MergeConfig = &shared.merge;
    let cores = shared.cores.clone();
    let md = table.metadata();
    let iceberg_schema = md.current_schema().clone();
    let schema: SchemaRef = Arc::new(iceberg::arrow::schema_to_arrow_schema(&iceberg_schema)?);
    let props = crate::write::parquet_properties(table)?;
    let props = super::dictionary::for_group(table, &members, props).await;
    let rows_per_group = props
        .max_row_group_row_count()
        .unwrap_or(DEFAULT_ROW_GROUP_ROWS)
        .max(1);
    let location = crate::write::location::Locations::new(md)?;
    let names = DefaultFileNameGenerator::new(
        crate::write::file_prefix(prefix),
        None,
        DataFileFormat::Parquet,
    );
    let key = (!spec.is_unpartitioned()).then(|| {
        PartitionKey::new(
            spec.as_ref().clone(),
            iceberg_schema.clone(),
            partition.clone(),
        )
    });
    let new_path = || location.generate_location(key.as_ref(), &names.generate_file_name());

    // The first output is opened up front: its writer gives the column-writer factory every
    // slice encodes with (same schema and properties for every output).
    let path = new_path();
    written.push(path.clone());
    let (first, factory) = OutputFile::create(table, path, &schema, &props).await?;
    let factory = Arc::new(factory);
    let output: SchemaDescPtr = Arc::new(first.writer.schema_descr().clone());

    // Inputs whose row groups are copied as they are; the others are decoded.
    let mut copied: Vec<MergeInput> = Vec::new();
    let mut decoded: Vec<FileScanTask> = Vec::new();
    for task in members {
        if merge.may_merge(&task) {
            let schema = first.writer.schema_descr();
            if let Some(input) = row_group_merge::examine(table, &task, schema, merge).await? {
                copied.push(input);
                continue;
            }
        }
        decoded.push(task);
    }
    let members = decoded;
    let mut current = Some(first);

    let parallel = self::cores();
    let slice_rows = slice_rows(&members, rows_per_group, parallel);
    let mut encoded = futures::stream::iter(slices(members, slice_rows).into_iter().enumerate())
        .map(|(i, tasks)| {
            let job = encode_slice(
                table.clone(),
                tasks,
                factory.clone(),
                schema.clone(),
                output.clone(),
                rows_per_group,
                i,
                cores.clone(),
                shared.equality.clone(),
                shared.dvs.clone(),
            );
            async move {
                tokio::spawn(job)
                    .await
                    .map_err(Error::task("row-group encoding"))?
            }
        })
        .buffered(parallel);

    let mut files = Vec::new();
    let mut rows = 0u64;
    while let Some(groups) = encoded.next().await {
        for rg in groups? {
            let out = open_output(&mut current, table, &new_path, written, &schema, &props).await?;
            rows += rg.rows as u64;
            out.append(rg).await?;
            if out.bytes_written() >= target {
                if let Some(out) = current.take() {
                    files.push(out.finish(table, spec, partition).await?);
                }
            }
        }
    }
    drop(encoded);

    // Then the copied row groups, rolled at the target like the encoded ones. A file with NaNs
    // keeps all its row groups in one output (its NaN counts are per file).
    for input in copied {
        let groups = input.footer.num_row_groups();
        merge
            .stats
            .files
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let reader = row_group_merge::open(table, &input).await?;
        for index in 0..groups {
            let out = open_output(&mut current, table, &new_path, written, &schema, &props).await?;
            let rg = row_group_merge::fetch(reader.as_ref(), &input, index).await?;
            rows += rg.rows;
            merge
                .stats
                .row_groups
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            merge
                .stats
                .bytes
                .fetch_add(rg.compressed, std::sync::atomic::Ordering::Relaxed);
            let first_here = index == 0 || out.writer.flushed_row_groups().is_empty();
            out.append_copied(rg, first_here.then_some(&input.nans))
                .await?;
            let last = index + 1 == groups;
            if out.bytes_written() >= target && (last || !input.has_nans()) {
                if let Some(out) = current.take() {
                    files.push(out.finish(table, spec, partition).await?);
                }
            }
        }
    }

    if let Some(mut out) = current.take() {
        if out.writer.flushed_row_groups().is_empty() {
            // No row left (every input row deleted): no file.
            let _ = out.sink.close().await;
            Ledger::of(table).with([out.path]).discard().await;
        } else {
            files.push(out.finish(table, spec, partition).await?);
        }
    }
    Ok((files, rows))
}

/// The output being filled; a new one (recorded in `written`, for clean-up on failure) when
/// the last was finished.
async fn open_output<'a>(
    current: &'a mut Option<OutputFile>,
    table: &Table,
    new_path: &impl Fn() -> String,
    written: &mut Vec<String>,
    schema: &SchemaRef,
    props: &WriterProperties,
) -> Result<&'a mut OutputFile> {
    if current.is_none() {
        let path = new_path();
        written.push(path.clone());
        *current = Some(OutputFile::create(table, path, schema, props).await?.0);
    }
    current.as_mut().ok_or_else(|| {
        Error::Io(std::io::Error::other(
            "compaction writer: no output after opening one",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(path: &str, records: u64) -> FileScanTask {
        FileScanTask {
            file_size_in_bytes: 1,
            start: 0,
            length: 1,
            record_count: Some(records),
            data_file_path: path.to_string(),
            data_file_format: DataFileFormat::Parquet,
            schema: Arc::new(iceberg::spec::Schema::builder().build().unwrap()),
            project_field_ids: vec![],
            predicate: None,
            deletes: vec![],
            partition: None,
            partition_spec: None,
            name_mapping: None,
            case_sensitive: true,
        }
    }

    #[test]
    fn slices_keep_order_and_stay_within_a_row_group() {
        let members = vec![
            task("a", 40),
            task("b", 50),
            task("c", 20),
            task("d", 250),
            task("e", 10),
        ];
        let s = slices(members, 100);
        let names: Vec<Vec<&str>> = s
            .iter()
            .map(|s| s.iter().map(|t| t.data_file_path.as_str()).collect())
            .collect();
        assert_eq!(names, vec![vec!["a", "b"], vec!["c"], vec!["d"], vec!["e"]]);
    }
}
