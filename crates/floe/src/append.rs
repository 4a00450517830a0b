//! `floe append`: input files -> data files -> one `append` commit.
//!
//! Reads every input (NDJSON, CSV, Parquet), converts records to the table schema, partitions by
//! the default spec, rolls files at `write.target-file-size-bytes`, and commits once. Any bad
//! record aborts the whole call: written files are deleted and nothing is committed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use iceberg::spec::DataFile;
use iceberg::TableIdent;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::commit::{Committer, SnapshotUpdate};
use crate::error::Result;
use crate::ingest::files::{InputFormat, InputReader};
use crate::write::{TableWriter, WriteOptions};

/// What an append did.
#[derive(Debug, Clone, Serialize)]
pub struct AppendMetrics {
    pub table: String,
    pub input_files: usize,
    pub rows: u64,
    pub data_files: usize,
    pub bytes_written: u64,
    /// `None` when there was nothing to append (no snapshot is made).
    pub snapshot_id: Option<i64>,
    pub commit_attempts: u32,
    pub duration_ms: u64,
}

/// Builder of an append of input files.
pub struct AppendBuilder {
    catalog: Catalog,
    ident: TableIdent,
    inputs: Vec<PathBuf>,
    format: Option<InputFormat>,
    options: WriteOptions,
}

impl AppendBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            catalog: catalog.clone(),
            ident,
            inputs: vec![],
            format: None,
            options: WriteOptions::default(),
        }
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

    /// Runs the append.
    pub async fn execute(self) -> Result<AppendMetrics> {
        let started = Instant::now();
        let table = self.catalog.load_table(&self.ident).await?;
        let mut writer = TableWriter::new(&table, &self.options).await?;
        let schema = writer.arrow_schema().clone();
        for path in &self.inputs {
            let step = async {
                let mut reader = InputReader::open(path, self.format, schema.clone())?;
                while let Some(batch) = reader.next_batch()? {
                    writer.write(batch).await?;
                }
                Ok::<_, crate::error::Error>(())
            };
            if let Err(e) = step.await {
                writer.abort().await;
                return Err(e);
            }
        }
        let rows = writer.rows();
        let files = writer.close().await?;
        commit_files(
            &self.catalog,
            &self.ident,
            table,
            files,
            self.inputs.len(),
            rows,
            started,
        )
        .await
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
        input_files: inputs,
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
