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

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::StreamExt;
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::DataContentType;
use iceberg::table::Table;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, RowGroups};
use parquet::arrow::{parquet_to_arrow_field_levels, ProjectionMask};
use parquet::basic::Compression;
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData};
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::SchemaDescriptor;

use super::row_group_merge::same_schema;
use crate::error::{Error, Result};

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
}

/// The keys of the equality delete files a compaction run applies, each read once.
#[derive(Default)]
pub(super) struct EqualityDeletes {
    /// Delete file path -> its keys, `None` when they cannot be held (a null key, a nested
    /// column): the files it applies to go through the iceberg reader.
    loaded: tokio::sync::Mutex<HashMap<String, Option<Arc<EqualityKeys>>>>,
}

impl EqualityDeletes {
    async fn keys(&self, table: &Table, d: &FileScanTaskDeleteFile) -> Option<Arc<EqualityKeys>> {
        let mut loaded = self.loaded.lock().await;
        if let Some(k) = loaded.get(&d.file_path) {
            return k.clone();
        }
        let keys = EqualityKeys::read(table, d)
            .await
            .ok()
            .flatten()
            .map(Arc::new);
        loaded.insert(d.file_path.clone(), keys.clone());
        keys
    }

    /// The keys of every delete file of `task` (all equality deletes), or `None`.
    async fn of(&self, table: &Table, task: &FileScanTask) -> Option<Vec<Arc<EqualityKeys>>> {
        let mut out = Vec::new();
        for d in &task.deletes {
            if d.file_type != DataContentType::EqualityDeletes {
                return None;
            }
            out.push(self.keys(table, d).await?);
        }
        Some(out)
    }
}

/// What a slice's inputs become, in input order.
enum Unit {
    /// Files decoded together by one reader.
    Together(Vec<FileBytes>),
    /// A file the iceberg reader reads.
    Alone(Box<FileScanTask>),
}

/// The keys of one equality delete file: its equality columns (top-level primitives of the
/// current schema), row-encoded and hashed.
pub(super) struct EqualityKeys {
    /// The key columns' indices in the table's Arrow schema.
    indices: Vec<usize>,
    converter: RowConverter,
    keys: HashSet<Box<[u8]>>,
}

impl EqualityKeys {
    /// Reads equality delete file `d`; `None` when its keys cannot be applied by hashing: a
    /// column not a top-level primitive, or a null key (which matches null values: left to the
    /// iceberg reader).
    async fn read(table: &Table, d: &FileScanTaskDeleteFile) -> Result<Option<Self>> {
        let ids = d.equality_ids.clone().unwrap_or_default();
        let schema = table.metadata().current_schema();
        let arrow = iceberg::arrow::schema_to_arrow_schema(schema)?;
        let top = schema.as_struct().fields();
        let mut indices = Vec::new();
        let mut fields = Vec::new();
        for id in &ids {
            let Some(i) = top.iter().position(|f| f.id == *id) else {
                return Ok(None);
            };
            if !matches!(*top[i].field_type, iceberg::spec::Type::Primitive(_)) {
                return Ok(None);
            }
            indices.push(i);
            fields.push(SortField::new(arrow.field(i).data_type().clone()));
        }
        if indices.is_empty() {
            return Ok(None);
        }
        let mut stream =
            crate::table::read_file_columns(table, &d.file_path, d.file_size_in_bytes, ids)?;
        let converter = RowConverter::new(fields)?;
        let mut keys = HashSet::new();
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            if batch.columns().iter().any(|c| c.null_count() > 0) {
                return Ok(None);
            }
            for row in converter.convert_columns(batch.columns())?.iter() {
                keys.insert(Box::<[u8]>::from(row.as_ref()));
            }
        }
        Ok(Some(Self {
            indices,
            converter,
            keys,
        }))
    }

    /// Rows of `batch` (the table's Arrow schema) whose key is deleted; a null key column never
    /// matches (no key held is null).
    fn matches(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let cols: Vec<_> = self
            .indices
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let rows = self.converter.convert_columns(&cols)?;
        Ok(rows
            .iter()
            .map(|r| Some(self.keys.contains(r.as_ref())))
            .collect())
    }
}

/// Whether `task` may be read whole here: only equality deletes attached (applied here by
/// key; position deletes go through the iceberg reader) and small enough to hold.
fn eligible(task: &FileScanTask) -> bool {
    task.deletes
        .iter()
        .all(|d| d.file_type == DataContentType::EqualityDeletes)
        && task.file_size_in_bytes <= MAX_WHOLE_FILE_BYTES
}

/// Calls `push` with every row of `tasks` (their deletes applied), in input order, as batches
/// of `schema` (the table's Arrow schema; `output` its Parquet form).
pub(super) async fn for_each_batch(
    table: &Table,
    tasks: Vec<FileScanTask>,
    schema: &SchemaRef,
    output: &SchemaDescriptor,
    equality: &EqualityDeletes,
    mut push: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    for unit in units(table, tasks, output, equality).await? {
        match unit {
            Unit::Together(files) => {
                for batch in decode(files, schema)? {
                    push(batch?)?;
                }
            }
            Unit::Alone(task) => {
                let mut stream = super::rewrite::read_rows(table, vec![*task], schema.clone())?;
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
) -> Result<Vec<Unit>> {
    let io = table.file_io().clone();
    let mut fetched = futures::stream::iter(tasks.into_iter().map(|task| {
        let io = io.clone();
        async move {
            // Whether it is read here is known before reading it.
            let deletes = match eligible(&task) {
                true => equality.of(table, &task).await,
                false => None,
            };
            let Some(deletes) = deletes else {
                return Ok::<_, Error>((task, None));
            };
            let bytes = io.new_input(&task.data_file_path)?.read().await?;
            Ok((task, Some((bytes, deletes))))
        }
    }))
    .buffered(READS_IN_FLIGHT);
    let mut out: Vec<Unit> = Vec::new();
    while let Some(next) = fetched.next().await {
        let (task, read) = next?;
        let Some((bytes, deletes)) = read else {
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
        end += f.meta.file_metadata().num_rows().max(0) as u64;
        ends.push((end, f.deletes.clone()));
    }
    let any_deletes = ends.iter().any(|(_, d)| !d.is_empty());
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
            let Some((end, deletes)) = ends.get(file) else {
                return Err(Error::Io(std::io::Error::other(
                    "compaction reader: more rows than the files' footers count",
                )));
            };
            let len = ((end - row) as usize).min(n - offset);
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

/// Row groups of several files, in order, seen by arrow-rs as one collection.
struct Files {
    files: Vec<FileBytes>,
    rows: usize,
}

impl Files {
    fn new(files: Vec<FileBytes>) -> Self {
        let rows = files
            .iter()
            .map(|f| f.meta.file_metadata().num_rows().max(0) as usize)
            .sum();
        Self { files, rows }
    }
}

impl RowGroups for Files {
    fn num_rows(&self) -> usize {
        self.rows
    }

    fn column_chunks(&self, i: usize) -> parquet::errors::Result<Box<dyn PageIterator>> {
        let chunks: Vec<(Bytes, parquet::file::metadata::ColumnChunkMetaData, usize)> = self
            .files
            .iter()
            .flat_map(|f| {
                f.meta.row_groups().iter().map(|rg| {
                    (
                        f.bytes.clone(),
                        rg.column(i).clone(),
                        rg.num_rows().max(0) as usize,
                    )
                })
            })
            .collect();
        Ok(Box::new(Chunks(chunks.into_iter())))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.files.iter().flat_map(|f| f.meta.row_groups().iter()))
    }

    fn metadata(&self) -> &ParquetMetaData {
        &self.files[0].meta
    }
}

/// The column chunks of one column across the collection's row groups.
struct Chunks(std::vec::IntoIter<(Bytes, parquet::file::metadata::ColumnChunkMetaData, usize)>);

impl Iterator for Chunks {
    type Item = parquet::errors::Result<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (bytes, meta, rows) = self.0.next()?;
        Some(page_reader(bytes, meta, rows))
    }
}

impl PageIterator for Chunks {}

/// Pages of one column chunk. A ZSTD chunk is read as stored (its metadata rewritten to
/// UNCOMPRESSED, so no codec is created) and its pages decompressed by [`ZstdPages`].
fn page_reader(
    bytes: Bytes,
    meta: parquet::file::metadata::ColumnChunkMetaData,
    rows: usize,
) -> parquet::errors::Result<Box<dyn PageReader>> {
    let data = Arc::new(bytes);
    if matches!(meta.compression(), Compression::ZSTD(_)) {
        let stored = meta
            .into_builder()
            .set_compression(Compression::UNCOMPRESSED)
            .build()?;
        let inner = SerializedPageReader::new(data, &stored, rows, None)?;
        Ok(Box::new(ZstdPages(inner)))
    } else {
        Ok(Box::new(SerializedPageReader::new(
            data, &meta, rows, None,
        )?))
    }
}

thread_local! {
    /// This thread's ZSTD decompression context, reused for every page.
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Decompresses one ZSTD frame (a page's compressed part) with this thread's context.
fn zstd_decompress(frame: &[u8]) -> parquet::errors::Result<Vec<u8>> {
    let err = |e: std::io::Error| parquet::errors::ParquetError::External(Box::new(e));
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(ctx) => ctx,
            None => slot.insert(zstd::bulk::Decompressor::new().map_err(err)?),
        };
        // Writers record the frame's size (arrow-rs, parquet-cpp); for one that does not,
        // grow the buffer until the frame fits.
        let known = zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten();
        let mut capacity = known.map(|n| n as usize).unwrap_or(frame.len().max(64) * 4);
        loop {
            match ctx.decompress(frame, capacity) {
                Ok(out) => return Ok(out),
                Err(_) if known.is_none() && capacity < (1 << 31) => capacity *= 2,
                Err(e) => return Err(err(e)),
            }
        }
    })
}

/// A page reader that decompresses the ZSTD pages of a chunk read as stored.
struct ZstdPages(SerializedPageReader<Bytes>);

impl ZstdPages {
    fn decompress(mut page: Page) -> parquet::errors::Result<Page> {
        match &mut page {
            Page::DataPage { buf, .. } | Page::DictionaryPage { buf, .. } => {
                *buf = Bytes::from(zstd_decompress(buf)?);
            }
            Page::DataPageV2 {
                buf,
                def_levels_byte_len,
                rep_levels_byte_len,
                is_compressed,
                ..
            } => {
                // Levels are stored uncompressed ahead of the values (Parquet format, data
                // page V2); an empty value section was not compressed at all.
                let levels = (*def_levels_byte_len + *rep_levels_byte_len) as usize;
                if levels > buf.len() {
                    return Err(parquet::errors::ParquetError::General(
                        "data page V2: level lengths exceed the page".into(),
                    ));
                }
                if *is_compressed && buf.len() > levels {
                    let mut out = Vec::with_capacity(buf.len() * 4);
                    out.extend_from_slice(&buf[..levels]);
                    out.extend_from_slice(&zstd_decompress(&buf[levels..])?);
                    *buf = Bytes::from(out);
                }
                *is_compressed = false;
            }
        }
        Ok(page)
    }
}

impl Iterator for ZstdPages {
    type Item = parquet::errors::Result<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl PageReader for ZstdPages {
    fn get_next_page(&mut self) -> parquet::errors::Result<Option<Page>> {
        self.0.get_next_page()?.map(Self::decompress).transpose()
    }

    fn peek_next_page(&mut self) -> parquet::errors::Result<Option<PageMetadata>> {
        self.0.peek_next_page()
    }

    fn skip_next_page(&mut self) -> parquet::errors::Result<()> {
        self.0.skip_next_page()
    }

    fn at_record_boundary(&mut self) -> parquet::errors::Result<bool> {
        self.0.at_record_boundary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        ArrayRef, Int64Array, ListBuilder, MapBuilder, StringArray, StringBuilder, StructArray,
    };
    use arrow::compute::concat_batches;
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::ZstdLevel;
    use parquet::file::properties::{WriterProperties, WriterVersion};

    fn schema() -> SchemaRef {
        let id = |f: Field, n: i32| {
            f.with_metadata([("PARQUET:field_id".to_string(), n.to_string())].into())
        };
        let item = id(Field::new("element", DataType::Utf8, true), 10);
        let point = vec![
            id(Field::new("x", DataType::Int64, false), 11),
            id(Field::new("y", DataType::Utf8, true), 12),
        ];
        let entries = Field::new(
            "key_value",
            DataType::Struct(
                vec![
                    id(Field::new("key", DataType::Utf8, false), 13),
                    id(Field::new("value", DataType::Int64, true), 14),
                ]
                .into(),
            ),
            false,
        );
        Arc::new(Schema::new(vec![
            id(Field::new("id", DataType::Int64, false), 1),
            id(Field::new("name", DataType::Utf8, true), 2),
            id(Field::new("tags", DataType::List(Arc::new(item)), true), 3),
            id(Field::new("point", DataType::Struct(point.into()), true), 4),
            id(
                Field::new("attrs", DataType::Map(Arc::new(entries), false), true),
                5,
            ),
        ]))
    }

    /// A batch of `n` rows from `from`, with nulls, empty lists and an all-null stretch.
    fn rows(schema: &SchemaRef, from: i64, n: i64) -> RecordBatch {
        let ids: Vec<i64> = (from..from + n).collect();
        let names: StringArray = ids
            .iter()
            .map(|i| (i % 7 != 0).then(|| format!("name-{}", i % 13)))
            .collect();
        let mut tags =
            ListBuilder::new(StringBuilder::new()).with_field(match schema.field(2).data_type() {
                DataType::List(f) => f.clone(),
                _ => unreachable!(),
            });
        for i in &ids {
            if i % 5 == 0 {
                tags.append_null();
            } else {
                for k in 0..(i % 3) {
                    tags.values().append_value(format!("t{k}"));
                }
                tags.append(true);
            }
        }
        let DataType::Struct(point_fields) = schema.field(3).data_type() else {
            unreachable!()
        };
        let point = StructArray::new(
            point_fields.clone(),
            vec![
                Arc::new(Int64Array::from(
                    ids.iter().map(|i| i * 2).collect::<Vec<_>>(),
                )) as ArrayRef,
                Arc::new(
                    ids.iter()
                        .map(|i| (i % 4 != 0).then(|| format!("y{i}")))
                        .collect::<StringArray>(),
                ),
            ],
            Some(ids.iter().map(|i| i % 11 != 0).collect::<Vec<_>>().into()),
        );
        let DataType::Map(entries, _) = schema.field(4).data_type() else {
            unreachable!()
        };
        let DataType::Struct(kv) = entries.data_type() else {
            unreachable!()
        };
        let mut attrs = MapBuilder::new(
            Some(arrow::array::MapFieldNames {
                entry: "key_value".into(),
                key: "key".into(),
                value: "value".into(),
            }),
            StringBuilder::new(),
            arrow::array::Int64Builder::new(),
        )
        .with_keys_field(kv[0].clone())
        .with_values_field(kv[1].clone());
        for i in &ids {
            if i % 6 == 0 {
                attrs.append(false).unwrap();
            } else {
                attrs.keys().append_value("k");
                attrs.values().append_value(*i);
                attrs.append(true).unwrap();
            }
        }
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(names),
                Arc::new(tags.finish()),
                Arc::new(point),
                Arc::new(attrs.finish()),
            ],
        )
        .unwrap()
    }

    fn file(schema: &SchemaRef, batch: &RecordBatch, props: WriterProperties) -> Bytes {
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
        w.write(batch).unwrap();
        Bytes::from(w.into_inner().unwrap())
    }

    /// arrow-rs's own reader, one file at a time.
    fn plain(schema: &SchemaRef, files: &[Bytes]) -> RecordBatch {
        let mut all = Vec::new();
        for f in files {
            for b in ParquetRecordBatchReaderBuilder::try_new(f.clone())
                .unwrap()
                .build()
                .unwrap()
            {
                all.push(
                    RecordBatch::try_new(schema.clone(), b.unwrap().columns().to_vec()).unwrap(),
                );
            }
        }
        concat_batches(schema, &all).unwrap()
    }

    #[test]
    fn many_files_through_one_reader_give_each_files_rows_in_order() {
        let schema = schema();
        let zstd = |v| {
            WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
                .set_writer_version(v)
                .set_data_page_row_count_limit(7)
                .set_write_batch_size(7)
                .build()
        };
        let configs = [
            zstd(WriterVersion::PARQUET_1_0),
            zstd(WriterVersion::PARQUET_2_0),
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build(),
            WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .set_dictionary_enabled(false)
                .set_max_row_group_row_count(Some(16))
                .build(),
        ];
        for (c, props) in configs.into_iter().enumerate() {
            // Files of 1 to 60 rows, one with several row groups.
            let files: Vec<Bytes> = (0..12)
                .map(|i| {
                    let n = [1, 60, 3, 17][i % 4];
                    file(&schema, &rows(&schema, i as i64 * 100, n), props.clone())
                })
                .collect();
            let read: Vec<FileBytes> = files
                .iter()
                .map(|b| FileBytes {
                    bytes: b.clone(),
                    meta: Arc::new(ParquetMetaDataReader::new().parse_and_finish(b).unwrap()),
                    deletes: vec![],
                })
                .collect();
            let batches: Vec<RecordBatch> = decode(read, &schema)
                .unwrap()
                .collect::<Result<_>>()
                .unwrap();
            assert!(batches.iter().all(|b| b.num_rows() <= BATCH_ROWS));
            let got = concat_batches(&schema, &batches).unwrap();
            assert_eq!(got, plain(&schema, &files), "config {c}");
            assert_eq!(got.num_rows(), 3 * (1 + 60 + 3 + 17), "config {c}");
        }
    }

    #[test]
    fn a_frame_without_its_size_still_decompresses() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let frame = enc.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&frame)
                .ok()
                .flatten(),
            None
        );
        assert_eq!(zstd_decompress(&frame).unwrap(), data);
    }
}
