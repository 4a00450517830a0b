//! `floe append`: input files -> data files -> one `append` commit.
//!
//! Reads every input (NDJSON, CSV, Parquet), converts records to the table schema, partitions by
//! the default spec, rolls files at `write.target-file-size-bytes`, and commits once. Any bad
//! record aborts the whole call: written files are deleted and nothing is committed. A dry run
//! reads and checks every record the same way and writes nothing.
//!
//! `--mode upsert` (Iceberg's upsert by key, PyIceberg's `table.upsert()`): a first pass over
//! the inputs records each key's last row ([`crate::change::keys::KeyIndex`]: the distinct keys
//! in memory, not the rows); the second writes only those rows; the commit then deletes every
//! live row of the table with one of the keys (position deletes, [`crate::change`]) and adds
//! the new rows in one `overwrite` snapshot, located again on each commit attempt, so the last
//! committed upsert of a key wins and a key is never live twice.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use iceberg::spec::DataFile;
use iceberg::TableIdent;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::change::keys::KeyIndex;
use crate::commit::Committer;
use crate::error::Result;
use crate::operation::{Amount, Cost, Costed, Phase, Progress, ProgressFn};
use crate::records::files::{InputFormat, InputReader};
use crate::write::staged::{commit_append, Staged};
use crate::write::{TableWriter, WriteOptions};

/// How input rows land.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppendMode {
    /// Every row is added.
    #[default]
    Append,
    /// The last input row of each key replaces the table's rows with that key.
    Upsert,
}

impl AppendMode {
    /// Parses `append` / `upsert`.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "append" => Ok(Self::Append),
            "upsert" => Ok(Self::Upsert),
            _ => Err(crate::error::Error::invalid_option(
                "--mode",
                s,
                "expected append or upsert",
            )),
        }
    }
}

/// What an append did.
#[derive(Debug, Clone, Serialize)]
pub struct AppendMetrics {
    pub table: String,
    /// Inputs read and checked, nothing written.
    pub dry_run: bool,
    pub mode: AppendMode,
    /// Upsert: the key columns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
    pub input_files: usize,
    /// Bytes of the input files.
    pub input_bytes: u64,
    pub rows: u64,
    pub data_files: usize,
    pub bytes_written: u64,
    /// Upsert: input rows not written because a later input row has the same key.
    pub duplicate_rows: u64,
    /// Upsert: live table rows replaced (deleted) by the new rows.
    pub replaced_rows: u64,
    /// Upsert: data files removed whole, position delete files written, and the data files
    /// read to find the replaced rows.
    pub removed_data_files: usize,
    pub position_delete_files: usize,
    pub files_scanned: usize,
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

impl AppendMetrics {
    /// Nothing done yet.
    fn new(ident: &TableIdent, mode: AppendMode, key: Vec<String>) -> Self {
        Self {
            table: crate::catalog::ident_string(ident),
            dry_run: false,
            mode,
            key,
            input_files: 0,
            input_bytes: 0,
            rows: 0,
            data_files: 0,
            bytes_written: 0,
            duplicate_rows: 0,
            replaced_rows: 0,
            removed_data_files: 0,
            position_delete_files: 0,
            files_scanned: 0,
            snapshot_id: None,
            commit_attempts: 0,
            duration_ms: 0,
        }
    }

    /// The written data files.
    fn wrote(&mut self, files: &[DataFile]) {
        self.data_files = files.len();
        self.bytes_written = files.iter().map(|f| f.file_size_in_bytes()).sum();
    }

    /// What an upsert's commit did.
    fn committed(&mut self, delta: crate::change::RowDelta) {
        self.replaced_rows = delta.deletes.rows;
        self.removed_data_files = delta.deletes.removed_data_files.len();
        self.position_delete_files = delta.deletes.delete_files.len();
        self.files_scanned = delta.searched.files;
        self.snapshot_id = delta.snapshot_id;
        self.commit_attempts = delta.attempts;
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
    mode: AppendMode,
    key: Option<Vec<String>>,
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
            mode: AppendMode::Append,
            key: None,
        }
    }

    /// Append (default) or upsert by key.
    pub fn with_mode(mut self, mode: AppendMode) -> Self {
        self.mode = mode;
        self
    }

    /// Upsert: the key columns (default: the table's primary key).
    pub fn with_key(mut self, key: Option<Vec<String>>) -> Self {
        self.key = key;
        self
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
        let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
            table.metadata().current_schema(),
        )?);
        // Upsert, pass one: each key's last input row (every record read and checked).
        let keys = match self.mode {
            AppendMode::Append => None,
            AppendMode::Upsert => {
                let mut keys = KeyIndex::for_table(&table, self.key.as_deref())?;
                for path in &self.inputs {
                    let mut reader = InputReader::open(path, self.format, arrow_schema.clone())?;
                    while let Some(batch) = reader.next_batch()? {
                        keys.observe(&batch)?;
                    }
                }
                Some(Arc::new(keys))
            }
        };
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
            None => arrow_schema.clone(),
        };
        let mut ordinal = 0u64;
        let mut written_rows = 0u64;
        for (path, size) in self.inputs.iter().zip(&sizes) {
            let step = async {
                let mut rows = 0u64;
                let mut reader = InputReader::open(path, self.format, schema.clone())?;
                while let Some(mut batch) = reader.next_batch()? {
                    rows += batch.num_rows() as u64;
                    if let Some(k) = &keys {
                        let last = k.last_rows(&batch, &mut ordinal)?;
                        batch = arrow::compute::filter_record_batch(&batch, &last)?;
                    }
                    written_rows += batch.num_rows() as u64;
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
        let key = keys.as_ref().map(|k| k.names.clone()).unwrap_or_default();
        let mut m = AppendMetrics::new(&self.ident, self.mode, key);
        m.dry_run = self.dry_run;
        m.input_files = self.inputs.len();
        m.input_bytes = progress.total.bytes;
        m.rows = written_rows;
        m.duplicate_rows = progress.done.rows - written_rows;
        m.wrote(&files);
        match (&keys, self.dry_run) {
            (None, true) => {}
            (None, false) => {
                if !files.is_empty() {
                    let staged = Staged::new(files, table.metadata().current_schema_id());
                    let committer = Committer::new(&self.catalog, &self.ident).on(table);
                    let outcome =
                        commit_append(committer, staged, Default::default(), &self.options).await?;
                    m.snapshot_id = Some(outcome.snapshot_id);
                    m.commit_attempts = outcome.attempts;
                }
            }
            (Some(keys), true) => {
                let (matched, searched) = crate::change::keys::locate_keys(&table, keys).await?;
                m.replaced_rows = matched.iter().map(|x| x.positions.len() as u64).sum();
                m.removed_data_files = matched.iter().filter(|x| x.all_live_rows()).count();
                m.files_scanned = searched.files;
            }
            (Some(keys), false) => {
                let delta = crate::change::commit_row_delta(
                    &self.catalog,
                    &self.ident,
                    table,
                    files,
                    None,
                    |t| async move { crate::change::keys::locate_keys(&t, keys).await },
                )
                .await?;
                m.committed(delta);
            }
        }
        m.duration_ms = duration_ms(started.elapsed());
        Ok(m)
    }
}

async fn commit_files(
    catalog: &Catalog,
    ident: &TableIdent,
    base: iceberg::table::Table,
    files: Vec<DataFile>,
    rows: u64,
    started: Instant,
) -> Result<AppendMetrics> {
    let mut m = AppendMetrics::new(ident, AppendMode::Append, vec![]);
    m.rows = rows;
    m.wrote(&files);
    if !files.is_empty() {
        let staged = Staged::new(files, base.metadata().current_schema_id());
        let committer = Committer::new(catalog, ident).on(base);
        let outcome = commit_append(
            committer,
            staged,
            Default::default(),
            &WriteOptions::default(),
        )
        .await?;
        m.snapshot_id = Some(outcome.snapshot_id);
        m.commit_attempts = outcome.attempts;
    }
    m.duration_ms = duration_ms(started.elapsed());
    Ok(m)
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
    commit_files(catalog, ident, table, files, rows, started).await
}

/// Upserts in-memory batches (in the table's Arrow schema) by `key` (default: the primary
/// key) in one commit: the last row of each key replaces the table's rows with that key.
pub async fn upsert_batches(
    catalog: &Catalog,
    ident: &TableIdent,
    batches: Vec<RecordBatch>,
    key: Option<Vec<String>>,
) -> Result<AppendMetrics> {
    let started = Instant::now();
    let table = catalog.load_table(ident).await?;
    let mut keys = KeyIndex::for_table(&table, key.as_deref())?;
    for b in &batches {
        keys.observe(b)?;
    }
    let keys = Arc::new(keys);
    let mut ordinal = 0u64;
    let mut last = Vec::with_capacity(batches.len());
    for b in &batches {
        let mask = keys.last_rows(b, &mut ordinal)?;
        last.push(arrow::compute::filter_record_batch(b, &mask)?);
    }
    let rows: u64 = last.iter().map(|b| b.num_rows() as u64).sum();
    let files = write_files(&table, last, &WriteOptions::default()).await?;
    let mut m = AppendMetrics::new(ident, AppendMode::Upsert, keys.names.clone());
    m.rows = rows;
    m.duplicate_rows = keys.rows() - rows;
    m.wrote(&files);
    let keys = &keys;
    let delta =
        crate::change::commit_row_delta(catalog, ident, table, files, None, |t| async move {
            crate::change::keys::locate_keys(&t, keys).await
        })
        .await?;
    m.committed(delta);
    m.duration_ms = duration_ms(started.elapsed());
    Ok(m)
}

/// Writes batches into data files of `table` without committing (for callers that build their
/// own [`crate::commit::SnapshotUpdate`], such as a rewrite).
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
