//! `floe append`: input files -> data files -> one `append` commit.
//!
//! Reads every input (NDJSON, CSV, Parquet), converts records to the table schema, partitions by
//! the default spec, rolls files at `write.target-file-size-bytes`, and commits once. Any bad
//! record aborts the whole call: written files are deleted and nothing is committed. A dry run
//! reads and checks every record the same way and writes nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use iceberg::spec::DataFile;
use iceberg::TableIdent;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::commit::{Committer, SnapshotUpdate};
use crate::error::Result;
use crate::ingest::files::{InputFormat, InputReader};
use crate::operation::{Amount, Cost, Costed, Phase, Progress, ProgressFn};
use crate::write::{TableWriter, WriteOptions};

/// What an append did.
#[derive(Debug, Clone, Serialize)]
pub struct AppendMetrics {
    pub table: String,
    /// Inputs read and checked, nothing written.
    pub dry_run: bool,
    pub input_files: usize,
    /// Bytes of the input files.
    pub input_bytes: u64,
    pub rows: u64,
    pub data_files: usize,
    pub bytes_written: u64,
    /// `None` when there was nothing to append (no snapshot is made).
    pub snapshot_id: Option<i64>,
    pub commit_attempts: u32,
    pub duration_ms: u64,
}

impl Costed for AppendMetrics {
    fn cost(&self) -> Cost {
        Cost {
            files_to_read: self.input_files as u64,
            bytes_to_read: self.input_bytes,
            files_to_write: self.data_files as u64,
            bytes_to_write: self.bytes_written,
            ..Cost::default()
        }
    }
}

/// Builder of an append of input files.
#[derive(Clone)]
pub struct AppendBuilder {
    catalog: Catalog,
    ident: TableIdent,
    inputs: Vec<PathBuf>,
    format: Option<InputFormat>,
    options: WriteOptions,
    dry_run: bool,
    progress: Option<ProgressFn>,
}

impl AppendBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            catalog: catalog.clone(),
            ident,
            inputs: vec![],
            format: None,
            options: WriteOptions::default(),
            dry_run: false,
            progress: None,
        }
    }

    /// Reads and checks every input record, writes and commits nothing.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Receives progress events: the write phase, one step per input file.
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(std::sync::Arc::new(f));
        self
    }

    /// What [`AppendBuilder::execute`] would do: the dry run (every input read and checked,
    /// rows counted), changing nothing.
    pub async fn plan(&self) -> Result<AppendMetrics> {
        let mut dry = self.clone().with_dry_run(true);
        dry.progress = None;
        dry.execute().await
    }

    /// Input files.
    pub fn with_inputs(mut self, inputs: Vec<PathBuf>) -> Self {
        self.inputs = inputs;
        self
    }

    /// Forces an input format instead of guessing from extensions.
    pub fn with_format(mut self, format: Option<InputFormat>) -> Self {
        self.format = format;
        self
    }

    /// Write options (target file size).
    pub fn with_write_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// Runs the append (or, with `with_dry_run`, only reads and checks the inputs).
    pub async fn execute(self) -> Result<AppendMetrics> {
        let started = Instant::now();
        let table = self.catalog.load_table(&self.ident).await?;
        let sizes: Vec<u64> = self
            .inputs
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .collect();
        let mut progress = Progress::start(
            Phase::Write,
            Amount {
                steps: self.inputs.len() as u64,
                files: self.inputs.len() as u64,
                bytes: sizes.iter().sum(),
                rows: 0,
            },
        );
        let report = |p: &Progress| {
            if let Some(f) = &self.progress {
                f(p)
            }
        };
        report(&progress);
        // One pass over the inputs: every record read and checked; written unless dry run.
        let mut writer = if self.dry_run {
            None
        } else {
            Some(TableWriter::new(&table, &self.options).await?)
        };
        let schema = match &writer {
            Some(w) => w.arrow_schema().clone(),
            None => Arc::new(iceberg::arrow::schema_to_arrow_schema(
                table.metadata().current_schema(),
            )?),
        };
        for (path, size) in self.inputs.iter().zip(&sizes) {
            let step = async {
                let mut rows = 0u64;
                let mut reader = InputReader::open(path, self.format, schema.clone())?;
                while let Some(batch) = reader.next_batch()? {
                    rows += batch.num_rows() as u64;
                    if let Some(w) = writer.as_mut() {
                        w.write(batch).await?;
                    }
                }
                Ok::<_, crate::error::Error>(rows)
            };
            let rows = match step.await {
                Ok(rows) => rows,
                Err(e) => {
                    if let Some(w) = writer {
                        w.abort().await;
                    }
                    return Err(e);
                }
            };
            progress.done += Amount {
                steps: 1,
                files: 1,
                bytes: *size,
                rows,
            };
            report(&progress);
        }
        let files = match writer {
            Some(w) => w.close().await?,
            None => vec![],
        };
        let mut m = if self.dry_run {
            AppendMetrics {
                table: crate::catalog::ident_string(&self.ident),
                dry_run: true,
                input_files: self.inputs.len(),
                input_bytes: 0,
                rows: progress.done.rows,
                data_files: 0,
                bytes_written: 0,
                snapshot_id: None,
                commit_attempts: 0,
                duration_ms: duration_ms(started.elapsed()),
            }
        } else {
            commit_files(
                &self.catalog,
                &self.ident,
                table,
                files,
                self.inputs.len(),
                progress.done.rows,
                started,
            )
            .await?
        };
        m.input_bytes = progress.total.bytes;
        Ok(m)
    }
}

async fn commit_files(
    catalog: &Catalog,
    ident: &TableIdent,
    base: iceberg::table::Table,
    files: Vec<DataFile>,
    inputs: usize,
    rows: u64,
    started: Instant,
) -> Result<AppendMetrics> {
    let data_files = files.len();
    let bytes_written = files.iter().map(|f| f.file_size_in_bytes()).sum();
    let (snapshot_id, commit_attempts) = if files.is_empty() {
        (None, 0)
    } else {
        let outcome = Committer::new(catalog, ident)
            .on(base)
            .commit(SnapshotUpdate::append(files))
            .await?;
        (Some(outcome.snapshot_id), outcome.attempts)
    };
    Ok(AppendMetrics {
        table: crate::catalog::ident_string(ident),
        dry_run: false,
        input_files: inputs,
        input_bytes: 0,
        rows,
        data_files,
        bytes_written,
        snapshot_id,
        commit_attempts,
        duration_ms: duration_ms(started.elapsed()),
    })
}

fn duration_ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Appends in-memory batches (already in the table's Arrow schema) in one commit.
pub async fn append_batches(
    catalog: &Catalog,
    ident: &TableIdent,
    batches: Vec<RecordBatch>,
) -> Result<AppendMetrics> {
    let started = Instant::now();
    let table = catalog.load_table(ident).await?;
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    let files = write_files(&table, batches, &WriteOptions::default()).await?;
    commit_files(catalog, ident, table, files, 0, rows, started).await
}

/// Writes batches into data files of `table` without committing (for callers that build their
/// own [`SnapshotUpdate`], such as a rewrite).
pub async fn write_files(
    table: &iceberg::table::Table,
    batches: Vec<RecordBatch>,
    options: &WriteOptions,
) -> Result<Vec<DataFile>> {
    let mut writer = TableWriter::new(table, options).await?;
    for b in batches {
        if let Err(e) = writer.write(b).await {
            writer.abort().await;
            return Err(e);
        }
    }
    writer.close().await
}
