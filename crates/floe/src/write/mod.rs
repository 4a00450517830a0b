//! The write stage: Arrow batches in the table schema -> partitioned, size-rolled Parquet data
//! files (not yet committed).
//!
//! Stack: floe's [`partition::PartitionSplitter`], then the iceberg crate's `FanoutWriter` (one
//! writer per partition) -> `DataFileWriter` -> `RollingFileWriter` (rolls at
//! `write.target-file-size-bytes`) -> `ParquetWriter` (zstd, row groups per
//! `write.parquet.row-group-size-bytes`; no dictionary for the columns near-distinct in the
//! first batch written, see [`dictionary`]). File names carry a fresh UUID per writer, so no
//! path is ever reused; partition values are escaped in paths ([`location`]), so a record's
//! value never steers where a file goes.
//!
//! Invariant: on failure the caller calls [`TableWriter::abort`], which deletes every file this
//! writer completed; a crash leaves only unreferenced files (orphans).

pub mod conform;
pub mod deletes;
pub mod deletion_vectors;
pub mod dictionary;
pub mod location;
pub mod parquet_stats;
pub mod partition;
pub mod rewrite;
pub mod staged;

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use iceberg::spec::{DataFile, DataFileFormat};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::location_generator::DefaultFileNameGenerator;
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::base::error::{Error, Result};
use crate::base::properties;

/// Rows per Arrow batch floe reads and writes (input files, compaction's sorted output).
pub const BATCH_ROWS: usize = 8192;

type Builder =
    DataFileWriterBuilder<ParquetWriterBuilder, location::Locations, DefaultFileNameGenerator>;

enum Inner {
    /// Nothing written yet: the Parquet writer is made at the first batch, which says which
    /// columns go without a dictionary ([`dictionary`]).
    Pending(Box<Pending>),
    Unpartitioned(Box<<Builder as IcebergWriterBuilder>::R>),
    Partitioned {
        splitter: Box<partition::PartitionSplitter>,
        fanout: Box<FanoutWriter<Builder>>,
    },
}

/// What a writer needs to make its Parquet writers.
struct Pending {
    props: WriterProperties,
    schema: iceberg::spec::SchemaRef,
    /// The table's partition splitter (None when unpartitioned), made with the writer so that
    /// a spec it cannot serve fails the writer's creation, not its first write.
    splitter: Option<Box<partition::PartitionSplitter>>,
    target: usize,
    file_io: iceberg::io::FileIO,
    location: location::Locations,
    names: DefaultFileNameGenerator,
}

impl Pending {
    /// The writers for batches like `first` (the splitter moves into them; nothing can fail
    /// after it has).
    async fn start(&mut self, first: &RecordBatch) -> Result<Inner> {
        let props =
            dictionary::without_dictionary(self.props.clone(), dictionary::near_distinct(first));
        let parquet = ParquetWriterBuilder::new(props, self.schema.clone());
        let rolling = RollingFileWriterBuilder::new(
            parquet,
            self.target,
            self.file_io.clone(),
            self.location.clone(),
            self.names.clone(),
        );
        let builder = DataFileWriterBuilder::new(rolling);
        Ok(match self.splitter.take() {
            None => Inner::Unpartitioned(Box::new(builder.build(None).await?)),
            Some(splitter) => Inner::Partitioned {
                splitter,
                fanout: Box::new(FanoutWriter::new(builder)),
            },
        })
    }
}

/// A new writer's file-name prefix: `prefix` (default `00000`) and a fresh UUID.
pub fn file_prefix(prefix: Option<&str>) -> String {
    format!("{}-{}", prefix.unwrap_or("00000"), uuid::Uuid::now_v7())
}

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Overrides `write.target-file-size-bytes`.
    pub target_file_size_bytes: Option<u64>,
    /// What every file name starts with, before the writer's UUID (default `00000`): a
    /// distributed compaction's worker names its outputs after its run and task, so the
    /// coordinator accepts (and may delete) only files of its own run.
    pub file_prefix: Option<String>,
}

/// Writes batches of one table into data files.
pub struct TableWriter {
    inner: Inner,
    schema: iceberg::spec::SchemaRef,
    schema_id: i32,
    spec_id: i32,
    arrow_schema: arrow_schema::SchemaRef,
    rows: u64,
    /// Where this writer's files are, to delete them after a failure.
    files: WriterFiles,
}

/// Where one writer's files are: every file it creates starts with `prefix` (a fresh UUID), so
/// after a failure (a full disk fails the write or the close of a file the writer never
/// returned) the files it left are found by name and deleted.
struct WriterFiles {
    file_io: iceberg::io::FileIO,
    /// The table location (the delete fence of a cleanup).
    location: String,
    /// Where data files go (`write.data.path`, else `<location>/data`).
    data_dir: String,
    prefix: String,
}

/// Parquet writer properties from table properties.
pub fn parquet_properties(table: &Table) -> Result<WriterProperties> {
    let row_group_bytes = properties::table_u64_prop(
        table,
        properties::WRITE_PARQUET_ROW_GROUP_SIZE_BYTES.key,
        properties::WRITE_PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT,
    )?;
    parquet_properties_from(table.metadata().properties(), row_group_bytes)
}

/// Parquet writer properties from table properties `props` (compression codec and level)
/// with row groups of about `row_group_bytes` (`write.parquet.row-group-size-bytes`).
pub fn parquet_properties_from(
    props: &std::collections::HashMap<String, String>,
    row_group_bytes: u64,
) -> Result<WriterProperties> {
    let compression = match props
        .get(properties::WRITE_PARQUET_COMPRESSION_CODEC.key)
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("zstd") => {
            let level = match props.get(properties::WRITE_PARQUET_COMPRESSION_LEVEL.key) {
                None => properties::WRITE_PARQUET_ZSTD_LEVEL_DEFAULT,
                Some(v) => v.trim().parse::<i32>().map_err(|_| {
                    Error::invalid_option(
                        format!(
                            "table property {}",
                            properties::WRITE_PARQUET_COMPRESSION_LEVEL.key
                        ),
                        v,
                        "expected an integer zstd level (1-22)",
                    )
                })?,
            };
            Compression::ZSTD(ZstdLevel::try_new(level).map_err(|e| {
                Error::invalid_option(
                    format!(
                        "table property {}",
                        properties::WRITE_PARQUET_COMPRESSION_LEVEL.key
                    ),
                    level,
                    e.to_string(),
                )
            })?)
        }
        Some("snappy") => Compression::SNAPPY,
        Some("uncompressed") | Some("none") => Compression::UNCOMPRESSED,
        Some(other) => {
            return Err(Error::invalid_option(
                format!(
                    "table property {}",
                    properties::WRITE_PARQUET_COMPRESSION_CODEC.key
                ),
                other,
                "supported: zstd, snappy, uncompressed",
            ))
        }
    };
    // arrow-rs bounds row groups by rows; derive a row bound from the byte target assuming
    // ~64 bytes per row in memory, within [8Ki, 1Mi] rows.
    let rows = (row_group_bytes / 64).clamp(8 * 1024, 1024 * 1024) as usize;
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(rows))
        .build())
}

impl TableWriter {
    /// A writer for `table`'s current schema and default partition spec.
    pub async fn new(table: &Table, options: &WriteOptions) -> Result<Self> {
        Self::in_schema(table, options, table.metadata().current_schema().clone()).await
    }

    /// A writer for `schema`: the table's current schema with more fields by id (the lineage
    /// fields a format v3 compaction writes, `crate::table::lineage`), its schema id the
    /// current one.
    pub async fn in_schema(
        table: &Table,
        options: &WriteOptions,
        schema: iceberg::spec::SchemaRef,
    ) -> Result<Self> {
        crate::table::opaque::refuse(
            &schema,
            &format!(
                "write to '{}'",
                crate::table::ident_string(table.identifier())
            ),
            "write",
        )?;
        let md = table.metadata();
        let target = match options.target_file_size_bytes {
            Some(t) => t,
            None => properties::table_u64_prop(
                table,
                properties::WRITE_TARGET_FILE_SIZE_BYTES.key,
                properties::WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
            )?,
        };
        if target == 0 {
            return Err(Error::invalid_option(
                "target file size",
                0,
                "must be positive",
            ));
        }
        let location = location::Locations::new(md)?;
        let prefix = file_prefix(options.file_prefix.as_deref());
        let names = DefaultFileNameGenerator::new(prefix.clone(), None, DataFileFormat::Parquet);
        let data_dir = md
            .properties()
            .get("write.data.path")
            .cloned()
            .unwrap_or_else(|| format!("{}/data", md.location().trim_end_matches('/')));
        let spec = md.default_partition_spec();
        // A spec of void fields only is unpartitioned to readers, but its files still carry
        // one (null) value per field: it goes through the splitter.
        let splitter = match spec.fields().is_empty() {
            true => None,
            false => Some(Box::new(partition::PartitionSplitter::new(
                spec.clone(),
                schema.clone(),
            )?)),
        };
        let inner = Inner::Pending(Box::new(Pending {
            props: parquet_properties(table)?,
            schema: schema.clone(),
            splitter,
            target: target as usize,
            file_io: table.file_io().clone(),
            location,
            names,
        }));
        Ok(Self {
            inner,
            arrow_schema: Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?),
            schema,
            schema_id: md.current_schema_id(),
            spec_id: md.default_partition_spec_id(),
            rows: 0,
            files: WriterFiles {
                file_io: table.file_io().clone(),
                location: md.location().to_string(),
                data_dir,
                prefix,
            },
        })
    }

    /// The Arrow schema (with Iceberg field ids) batches must have.
    pub fn arrow_schema(&self) -> &arrow_schema::SchemaRef {
        &self.arrow_schema
    }

    /// The id of the schema this writer writes in (the table's current schema when it was
    /// made): a commit of its files must be made against that schema
    /// ([`crate::commit::SnapshotUpdate::written_in`]).
    pub fn schema_id(&self) -> i32 {
        self.schema_id
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes one batch. A batch in another schema of the table (rows buffered or read before a
    /// schema change) is converted by field id first ([`conform::to_schema`]), never by
    /// position. A failed write names the file being written.
    pub async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = conform::to_schema(batch, &self.arrow_schema)?;
        match self.write_batch(batch).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.files.naming(e).await),
        }
    }

    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        loop {
            match &mut self.inner {
                Inner::Pending(pending) => {
                    let started = pending.start(&batch).await?;
                    self.inner = started;
                }
                Inner::Unpartitioned(w) => return Ok(w.write(batch).await?),
                Inner::Partitioned { splitter, fanout } => {
                    for (key, part) in splitter.split(&batch)? {
                        fanout.write(splitter.key(key), part).await?;
                    }
                    return Ok(());
                }
            }
        }
    }

    async fn close_files(inner: Inner) -> Result<Vec<DataFile>> {
        Ok(match inner {
            Inner::Pending(_) => vec![],
            Inner::Unpartitioned(mut w) => w.close().await?,
            Inner::Partitioned { fanout, .. } => fanout.close().await?,
        })
    }

    /// Closes every open file and returns the data files written (files of several row groups
    /// get their metrics from their footer, see [`parquet_stats::exact_metrics`]).
    pub async fn close(self) -> Result<Vec<DataFile>> {
        let files = match Self::close_files(self.inner).await {
            Ok(files) => files,
            Err(e) => {
                let e = self.files.naming(e).await;
                self.files.sweep(vec![]).await;
                return Err(e);
            }
        };
        let paths: Vec<String> = files.iter().map(|f| f.file_path().to_string()).collect();
        let file_io = &self.files.file_io;
        match parquet_stats::exact_metrics(file_io, &self.schema, self.spec_id, files).await {
            Ok(files) => Ok(files),
            Err(e) => {
                self.files.sweep(paths).await;
                Err(e)
            }
        }
    }

    /// Closes and deletes everything written (used when the operation fails before commit),
    /// including files left half-written by a failed write.
    pub async fn abort(self) {
        let paths = match Self::close_files(self.inner).await {
            Ok(files) => files.iter().map(|f| f.file_path().to_string()).collect(),
            Err(_) => vec![],
        };
        self.files.sweep(paths).await;
    }
}

impl WriterFiles {
    /// `e` naming the file being written: the writer's newest file (file names count up). The
    /// writer's own errors (a full disk, a failed upload) do not say which file failed.
    async fn naming(&self, e: Error) -> Error {
        match self.own_files().await.into_iter().flatten().max() {
            Some(path) => Error::Storage {
                location: path,
                reason: e.to_string(),
                source: Some(Box::new(e)),
            },
            None => e,
        }
    }

    /// The files under the data directory whose name starts with the writer's prefix.
    async fn own_files(&self) -> Result<Vec<String>> {
        let listed = crate::storage::listing::list_files(&self.file_io, &self.data_dir).await?;
        Ok(listed
            .into_iter()
            .map(|f| f.path)
            .filter(|p| {
                p.rsplit('/')
                    .next()
                    .is_some_and(|name| name.starts_with(&self.prefix))
            })
            .collect())
    }

    /// Deletes `known` files and every file under the data directory whose name starts with
    /// the writer's prefix (the files a failed writer created but never returned), inside the
    /// table location only.
    async fn sweep(&self, mut known: Vec<String>) {
        match self.own_files().await {
            Ok(own) => known.extend(own),
            // Debug, not a warning: the listing fails for the reason the write failed (no
            // credentials, no network), and the command's own error already says it.
            Err(e) => {
                tracing::debug!(dir = %self.data_dir, error = %e, "cannot list the files of a failed write; any left are orphans now")
            }
        }
        known.sort();
        known.dedup();
        crate::commit::Ledger::at(self.file_io.clone(), &self.location)
            .with(known)
            .discard()
            .await;
    }
}
