//! Row-group merge: an input's row groups are copied into the output as they are, column chunk
//! by column chunk, without decoding (the idea of Iceberg Java's `ParquetFileMerger` and
//! Amoro's row-group merging; written here on arrow-rs's `SerializedRowGroupWriter::
//! append_column`).
//!
//! ```text
//!  input footer (page indexes too) -> is the input eligible? (see below)
//!    -> per row group: one ranged read of its bytes -> append each column chunk to the output
//!       (offsets re-based, statistics, encodings, page index kept) -> next row group
//! ```
//!
//! An input is merged this way only when that gives the same table as decoding it:
//! - no delete file applies to it (rows would have to be dropped): no equality delete, and no
//!   position delete whose rows point at it (targets from `referenced_data_file`, equal
//!   `file_path` bounds, or its `file_path` column, as for dropping deletes);
//! - its Parquet schema is the output's, column for column (same paths, physical and logical
//!   types, repetition and field ids): a file written before a schema change is decoded, so
//!   new columns are filled and renamed or widened ones converted;
//! - the rewrite is not sorted (row groups keep their order of rows);
//! - every float and double field of the table has a NaN count in the input's manifest entry
//!   (Parquet keeps none; the output's counts are the inputs' sums);
//! - `auto`: its row groups average at least `row-group-merge-min-bytes` (8 MiB, Amoro's
//!   threshold): copying small row groups would keep them small, so they are decoded and
//!   re-encoded into full row groups instead. `always` merges whatever the size.
//!
//! The output's metrics come from its own footer, as for a decoded rewrite, so they are exact:
//! counts add up, and bounds are the row groups' statistics merged.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use iceberg::io::FileRead;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, PrimitiveType, Schema};
use iceberg::table::Table;
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use parquet::schema::types::SchemaDescriptor;
use serde::Serialize;

use super::options::RowGroupMerge;
use crate::base::error::Result;

/// How a compaction run merges row groups, shared by its jobs.
#[derive(Debug)]
pub struct MergeConfig {
    pub mode: RowGroupMerge,
    pub min_row_group_bytes: u64,
    /// NaN counts of the live data files, by path (from their manifest entries).
    pub nans: HashMap<String, HashMap<i32, u64>>,
    /// Position delete file -> the data files its rows point at.
    pub position_targets: HashMap<String, BTreeSet<String>>,
    pub stats: MergeStats,
}

impl MergeConfig {
    /// No row-group merge (sorted or re-partitioning rewrites, tests).
    pub fn never() -> Self {
        Self {
            mode: RowGroupMerge::Never,
            min_row_group_bytes: u64::MAX,
            nans: HashMap::new(),
            position_targets: HashMap::new(),
            stats: MergeStats::default(),
        }
    }

    /// Whether `task` may be merged before its footer is read: no delete applies to it, and
    /// (for `auto`) it is large enough to hold one row group of the threshold.
    pub fn may_merge(&self, task: &FileScanTask) -> bool {
        match self.mode {
            RowGroupMerge::Never => false,
            _ if self.deletes_apply(task) => false,
            RowGroupMerge::Always => true,
            RowGroupMerge::Auto => task.file_size_in_bytes >= self.min_row_group_bytes,
        }
    }
}

impl MergeConfig {
    /// True when a delete file attached to `task` may delete one of its rows: any equality
    /// delete, and a position delete unless its known targets exclude this file.
    fn deletes_apply(&self, task: &FileScanTask) -> bool {
        task.deletes.iter().any(|d| {
            d.file_type != DataContentType::PositionDeletes
                || self
                    .position_targets
                    .get(&d.file_path)
                    .is_none_or(|targets| targets.contains(&task.data_file_path))
        })
    }
}

/// A [`MergeConfig`] as a distributed compaction task carries it: the settings, and the NaN
/// counts and position delete targets of the task's own files only.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct MergeSettings {
    pub mode: RowGroupMerge,
    pub min_row_group_bytes: u64,
    pub nans: Vec<(String, Vec<(i32, u64)>)>,
    pub position_targets: Vec<(String, BTreeSet<String>)>,
}

impl MergeSettings {
    /// The part of `config` that concerns `members`.
    pub fn of(config: &MergeConfig, members: &[FileScanTask]) -> Self {
        let paths: std::collections::HashSet<&str> =
            members.iter().map(|t| t.data_file_path.as_str()).collect();
        let deletes: std::collections::HashSet<&str> = members
            .iter()
            .flat_map(|t| t.deletes.iter().map(|d| d.file_path.as_str()))
            .collect();
        Self {
            mode: config.mode,
            min_row_group_bytes: config.min_row_group_bytes,
            nans: config
                .nans
                .iter()
                .filter(|(p, _)| paths.contains(p.as_str()))
                .map(|(p, n)| (p.clone(), n.iter().map(|(k, v)| (*k, *v)).collect()))
                .collect(),
            position_targets: config
                .position_targets
                .iter()
                .filter(|(p, _)| deletes.contains(p.as_str()))
                .map(|(p, t)| (p.clone(), t.clone()))
                .collect(),
        }
    }

    /// The config a worker's jobs share.
    pub fn config(&self) -> MergeConfig {
        MergeConfig {
            mode: self.mode,
            min_row_group_bytes: self.min_row_group_bytes,
            nans: self
                .nans
                .iter()
                .map(|(p, n)| (p.clone(), n.iter().copied().collect()))
                .collect(),
            position_targets: self.position_targets.iter().cloned().collect(),
            stats: MergeStats::default(),
        }
    }
}

/// What a run merged by row group.
#[derive(Debug, Default)]
pub struct MergeStats {
    pub files: AtomicU64,
    pub row_groups: AtomicU64,
    pub bytes: AtomicU64,
}

/// The counters as reported.
#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct MergeReport {
    /// Input files whose row groups were copied without decoding.
    pub files: u64,
    pub row_groups: u64,
    /// Compressed bytes of the copied column chunks.
    pub bytes: u64,
}

impl MergeStats {
    pub fn report(&self) -> MergeReport {
        MergeReport {
            files: self.files.load(Ordering::Relaxed),
            row_groups: self.row_groups.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// An input whose row groups will be copied: its footer (with page indexes when it has them)
/// and its NaN counts.
pub struct MergeInput {
    pub task: FileScanTask,
    pub footer: Arc<ParquetMetaData>,
    pub nans: HashMap<i32, u64>,
}

impl MergeInput {
    /// True when some float or double column has NaNs: then the file's row groups must all go
    /// to one output (the counts are per file, not per row group).
    pub fn has_nans(&self) -> bool {
        self.nans.values().any(|&n| n > 0)
    }
}

/// Reads the footer of `task` and decides whether it is merged by row group (module docs).
/// `Ok(None)`: decode it.
/// The footer of the Parquet file at `path` (page indexes as `page_index` says), read alone.
pub(super) async fn read_footer(
    table: &Table,
    path: &str,
    page_index: PageIndexPolicy,
) -> Result<ParquetMetaData> {
    let input = table.file_io().new_input(path)?;
    let meta = input.metadata().await?;
    let size = meta.size;
    let mut reader = iceberg::arrow::ArrowFileReader::new(meta, input.reader().await?);
    Ok(ParquetMetaDataReader::new()
        .with_page_index_policy(page_index)
        .load_and_finish(&mut reader, size)
        .await?)
}

pub async fn examine(
    table: &Table,
    task: &FileScanTask,
    output: &SchemaDescriptor,
    config: &MergeConfig,
) -> Result<Option<MergeInput>> {
    let Some(nans) = nan_counts(table.metadata().current_schema(), config, task) else {
        return Ok(None);
    };
    // The page indexes too (when the file has them), so the copy keeps them.
    let footer =
        Arc::new(read_footer(table, &task.data_file_path, PageIndexPolicy::Optional).await?);
    if !same_schema(footer.file_metadata().schema_descr(), output) {
        return Ok(None);
    }
    let groups = footer.num_row_groups() as u64;
    if groups == 0 {
        return Ok(None);
    }
    if config.mode == RowGroupMerge::Auto {
        let bytes: u64 = footer
            .row_groups()
            .iter()
            .map(|rg| rg.compressed_size().max(0) as u64)
            .sum();
        if bytes / groups < config.min_row_group_bytes {
            return Ok(None);
        }
    }
    Ok(Some(MergeInput {
        task: task.clone(),
        footer,
        nans,
    }))
}

/// The input's NaN counts for every float and double field of `schema`, or `None` when its
/// manifest entry lacks one (the output's count would then be unknown, not the sum).
fn nan_counts(
    schema: &Schema,
    config: &MergeConfig,
    task: &FileScanTask,
) -> Option<HashMap<i32, u64>> {
    let known = config.nans.get(&task.data_file_path);
    let mut out = HashMap::new();
    for field in schema.as_struct().fields() {
        collect_float_ids(&field.field_type, field.id, &mut |id| {
            out.insert(id, known.and_then(|k| k.get(&id)).copied());
        });
    }
    out.into_iter().map(|(id, n)| n.map(|n| (id, n))).collect()
}

fn collect_float_ids(t: &iceberg::spec::Type, id: i32, f: &mut impl FnMut(i32)) {
    use iceberg::spec::Type;
    match t {
        Type::Primitive(PrimitiveType::Float | PrimitiveType::Double) => f(id),
        Type::Primitive(_) => {}
        Type::Struct(s) => {
            for c in s.fields() {
                collect_float_ids(&c.field_type, c.id, f);
            }
        }
        Type::List(l) => collect_float_ids(&l.element_field.field_type, l.element_field.id, f),
        Type::Map(m) => {
            collect_float_ids(&m.key_field.field_type, m.key_field.id, f);
            collect_float_ids(&m.value_field.field_type, m.value_field.id, f);
        }
    }
}

/// Column for column the same Parquet schema: what `append_column` requires of each chunk,
/// plus the same tree below the root (names, repetition, logical types and field ids of
/// groups). The root's own name is not part of the data (writers name it differently).
pub fn same_schema(a: &SchemaDescriptor, b: &SchemaDescriptor) -> bool {
    a.num_columns() == b.num_columns()
        && a.root_schema().get_fields() == b.root_schema().get_fields()
        && (0..a.num_columns()).all(|i| a.column(i) == b.column(i))
}

/// The bytes of one row group: a ranged read, answering reads at the file's offsets.
struct RowGroupBytes {
    start: u64,
    data: Bytes,
}

impl Length for RowGroupBytes {
    fn len(&self) -> u64 {
        self.start + self.data.len() as u64
    }
}

impl ChunkReader for RowGroupBytes {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

impl RowGroupBytes {
    fn slice(&self, start: u64, length: Option<usize>) -> parquet::errors::Result<Bytes> {
        let from = start
            .checked_sub(self.start)
            .filter(|&f| f <= self.data.len() as u64)
            .ok_or_else(|| {
                parquet::errors::ParquetError::General(format!(
                    "read at {start} outside the fetched row group [{}, {})",
                    self.start,
                    self.len()
                ))
            })? as usize;
        let to = match length {
            Some(l) => from + l,
            None => self.data.len(),
        };
        if to > self.data.len() {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "read of {to} bytes past the fetched row group"
            )));
        }
        Ok(self.data.slice(from..to))
    }
}

/// One input row group, fetched, ready to be appended.
pub struct FetchedRowGroup {
    bytes: RowGroupBytes,
    chunks: Vec<ColumnCloseResult>,
    pub rows: u64,
    pub compressed: u64,
}

/// Opens `input` for [`fetch`] (once per input, for all its row groups).
pub async fn open(table: &Table, input: &MergeInput) -> Result<Box<dyn FileRead>> {
    Ok(table
        .file_io()
        .new_input(&input.task.data_file_path)?
        .reader()
        .await?)
}

/// Fetches row group `index` of `input` through `reader` (one ranged read covering its column
/// chunks).
pub async fn fetch(
    reader: &dyn FileRead,
    input: &MergeInput,
    index: usize,
) -> Result<FetchedRowGroup> {
    let rg = input.footer.row_group(index);
    let mut range: Option<Range<u64>> = None;
    for c in rg.columns() {
        let (start, len) = c.byte_range();
        let r = start..start + len;
        range = Some(match range {
            None => r,
            Some(x) => x.start.min(r.start)..x.end.max(r.end),
        });
    }
    let range = range.unwrap_or(0..0);
    let data = reader.read(range.clone()).await?;
    let column_index = input.footer.column_index().and_then(|ci| ci.get(index));
    let offset_index = input.footer.offset_index().and_then(|oi| oi.get(index));
    let chunks = rg
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| ColumnCloseResult {
            bytes_written: c.compressed_size().max(0) as u64,
            rows_written: rg.num_rows().max(0) as u64,
            metadata: c.clone(),
            bloom_filter: None,
            column_index: column_index.and_then(|v| v.get(i)).cloned(),
            offset_index: offset_index.and_then(|v| v.get(i)).cloned(),
        })
        .collect();
    Ok(FetchedRowGroup {
        bytes: RowGroupBytes {
            start: range.start,
            data,
        },
        chunks,
        rows: rg.num_rows().max(0) as u64,
        compressed: rg.compressed_size().max(0) as u64,
    })
}

impl FetchedRowGroup {
    /// Appends the row group to `writer` as its next row group.
    pub fn append_to<W: std::io::Write + Send>(
        self,
        writer: &mut parquet::file::writer::SerializedFileWriter<W>,
    ) -> Result<()> {
        let mut group = writer.next_row_group()?;
        for chunk in self.chunks {
            group.append_column(&self.bytes, chunk)?;
        }
        group.close()?;
        Ok(())
    }
}
