//! `floe append`: input files -> data files -> one `append` commit.
//!
//! Reads every input (NDJSON, CSV, Parquet), converts records to the table schema, partitions by
//! the default spec, rolls files at `write.target-file-size-bytes`, and commits once. Any bad
//! record aborts the whole call: written files are deleted and nothing is committed.
//!
//! [`AppendBuilder`] is an [`Operation`]: `plan()` (the `--dry-run` report) reads and checks
//! every record the same way and writes nothing; `apply()` reads, writes and commits;
//! `execute()` does both in one pass over the inputs. [`AppendBuilder::from_batches`] appends
//! (or upserts) batches already in memory.
//!
//! `--mode upsert` (Iceberg's upsert by key, PyIceberg's `table.upsert()`): a first pass over
//! the inputs records each key's last row ([`crate::operations::change::keys::KeyIndex`]: the distinct keys
//! in memory, not the rows); the second writes only those rows; the commit then deletes every
//! live row of the table with one of the keys (position deletes, [`crate::operations::change`]) and adds
//! the new rows in one `overwrite` snapshot, located again on each commit attempt, so the last
//! committed upsert of a key wins and a key is never live twice.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::base::cost::{Amount, Cost, Costed, Phase, Progress};
use crate::base::error::Result;
use crate::catalog::Catalog;
use crate::commit::Committer;
use crate::operations::change::keys::KeyIndex;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
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
            _ => Err(crate::base::error::Error::invalid_option(
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
    /// Upsert on format v3: deletion vectors written (instead of position delete files).
    pub deletion_vectors: usize,
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
            deletion_vectors: 0,
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
    fn committed(&mut self, delta: crate::operations::change::RowDelta) {
        self.replaced_rows = delta.deletes.rows;
        self.removed_data_files = delta.deletes.removed_data_files.len();
        let vectors = delta
            .deletes
            .delete_files
            .iter()
            .filter(|f| f.file_format() == iceberg::spec::DataFileFormat::Puffin)
            .count();
        self.deletion_vectors = vectors;
        self.position_delete_files = delta.deletes.delete_files.len() - vectors;
        self.files_scanned = delta.searched.files;
        self.snapshot_id = delta.snapshot_id;
        self.commit_attempts = delta.attempts;
    }
}

/// What an append reads: input files, or batches already in memory.
#[derive(Clone)]
enum Source {
    Files(Vec<PathBuf>),
    /// Already in the table's Arrow schema.
    Batches(Vec<RecordBatch>),
}

/// Builder of an append (or upsert) of input files ([`AppendBuilder::new`] and
/// [`AppendBuilder::with_inputs`]) or of in-memory batches ([`AppendBuilder::from_batches`]).
/// `plan()` reads and checks every record and counts what would land (the dry run), writing
/// nothing; `apply()` reads them again, writes the data files and commits.
#[derive(Clone)]
pub struct AppendBuilder {
    ctx: Ctx,
    source: Source,
    format: Option<InputFormat>,
    options: WriteOptions,
    mode: AppendMode,
    key: Option<Vec<String>>,
}

impl AppendBuilder {
    /// Appends input files (see [`AppendBuilder::with_inputs`]) to `ident`.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            source: Source::Files(vec![]),
            format: None,
            options: WriteOptions::default(),
            mode: AppendMode::Append,
            key: None,
        }
    }

    /// Appends in-memory batches (already in the table's Arrow schema) in one commit.
    pub fn from_batches(catalog: &Catalog, ident: TableIdent, batches: Vec<RecordBatch>) -> Self {
        Self {
            source: Source::Batches(batches),
            ..Self::new(catalog, ident)
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

    /// Receives progress events: the write phase, one step per input file.
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.ctx.progress = Some(Arc::new(f));
        self
    }

    /// Input files.
    pub fn with_inputs(mut self, inputs: Vec<PathBuf>) -> Self {
        self.source = Source::Files(inputs);
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

    /// Upsert, pass one: each key's last input row (every record read and checked).
    fn keys(&self, table: &Table, schema: &SchemaRef) -> Result<Option<Arc<KeyIndex>>> {
        if self.mode == AppendMode::Append {
            return Ok(None);
        }
        let mut keys = KeyIndex::for_table(table, self.key.as_deref())?;
        match &self.source {
            Source::Files(inputs) => {
                for path in inputs {
                    let mut reader = InputReader::open(path, self.format, schema.clone())?;
                    while let Some(batch) = reader.next_batch()? {
                        keys.observe(&batch)?;
                    }
                }
            }
            Source::Batches(batches) => {
                for b in batches {
                    keys.observe(b)?;
                }
            }
        }
        Ok(Some(Arc::new(keys)))
    }

    /// One pass over the inputs: every record read and checked, and, with `write`, written
    /// (the written files are deleted on failure); progress is reported with `report`. Returns the counts, the data files and the
    /// upsert's keys.
    async fn pass(&self, table: &Table, write: bool, report: bool) -> Result<Pass> {
        let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
            table.metadata().current_schema(),
        )?);
        let keys = self.keys(table, &arrow_schema)?;
        let key = keys.as_ref().map(|k| k.names.clone()).unwrap_or_default();
        let mut m = AppendMetrics::new(&self.ctx.ident, self.mode, key);
        let inputs = match &self.source {
            Source::Files(inputs) => inputs,
            Source::Batches(batches) => {
                let total: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
                let mut ordinal = 0u64;
                let mut last = Vec::with_capacity(batches.len());
                for b in batches {
                    last.push(match &keys {
                        Some(k) => {
                            let mask = k.last_rows(b, &mut ordinal)?;
                            arrow::compute::filter_record_batch(b, &mask)?
                        }
                        None => b.clone(),
                    });
                }
                m.rows = last.iter().map(|b| b.num_rows() as u64).sum();
                m.duplicate_rows = total - m.rows;
                let files = if write {
                    write_files(table, last, &self.options).await?
                } else {
                    vec![]
                };
                m.wrote(&files);
                return Ok(Pass { m, files, keys });
            }
        };
        let sizes: Vec<u64> = inputs
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .collect();
        let mut progress = Progress::start(
            Phase::Write,
            Amount {
                steps: inputs.len() as u64,
                files: inputs.len() as u64,
                bytes: sizes.iter().sum(),
                rows: 0,
            },
        );
        let progress_to = |p: &Progress| {
            if report {
                self.ctx.report(p)
            }
        };
        progress_to(&progress);
        let mut writer = if write {
            Some(TableWriter::new(table, &self.options).await?)
        } else {
            None
        };
        let schema = match &writer {
            Some(w) => w.arrow_schema().clone(),
            None => arrow_schema.clone(),
        };
        let mut ordinal = 0u64;
        let mut written_rows = 0u64;
        for (path, size) in inputs.iter().zip(&sizes) {
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
                Ok::<_, crate::base::error::Error>(rows)
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
            progress_to(&progress);
        }
        let files = match writer {
            Some(w) => w.close().await?,
            None => vec![],
        };
        m.input_files = inputs.len();
        m.input_bytes = progress.total.bytes;
        m.rows = written_rows;
        m.duplicate_rows = progress.done.rows - written_rows;
        m.wrote(&files);
        Ok(Pass { m, files, keys })
    }

    /// Writes the inputs into `table` and commits them: an `append`, or for an upsert a row
    /// delta that deletes the keys' live rows (located again on each commit attempt).
    async fn write_and_commit(&self, table: Table, started: Instant) -> Result<AppendMetrics> {
        let Pass { mut m, files, keys } = self.pass(&table, true, true).await?;
        match keys {
            None => {
                if !files.is_empty() {
                    let staged = Staged::new(files, table.metadata().current_schema_id());
                    let committer = Committer::new(&self.ctx.catalog, &self.ctx.ident).on(table);
                    let outcome =
                        commit_append(committer, staged, Default::default(), &self.options).await?;
                    m.snapshot_id = Some(outcome.snapshot_id);
                    m.commit_attempts = outcome.attempts;
                }
            }
            Some(keys) => {
                let keys = &keys;
                let delta = crate::operations::change::commit_row_delta(
                    &self.ctx.catalog,
                    &self.ctx.ident,
                    table,
                    files,
                    None,
                    |t| async move { crate::operations::change::keys::locate_keys(&t, keys).await },
                )
                .await?;
                m.committed(delta);
            }
        }
        m.duration_ms = duration_ms(started.elapsed());
        Ok(m)
    }
}

impl AppendBuilder {
    /// The plan: one pass that reads and checks every record, reporting progress with
    /// `report`.
    async fn check(&self, report: bool) -> Result<AppendPlan> {
        let started = Instant::now();
        let table = self.ctx.load().await?;
        let Pass { mut m, keys, .. } = self.pass(&table, false, report).await?;
        m.dry_run = true;
        if let Some(keys) = &keys {
            let (matched, searched) =
                crate::operations::change::keys::locate_keys(&table, keys).await?;
            m.replaced_rows = matched.iter().map(|x| x.positions.len() as u64).sum();
            m.removed_data_files = matched.iter().filter(|x| x.all_live_rows()).count();
            m.files_scanned = searched.files;
        }
        m.duration_ms = duration_ms(started.elapsed());
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(m, snapshot_id, AppendWork { table }))
    }
}

/// One pass over the inputs: the counts, the data files written (none when checking only) and
/// the upsert's keys.
struct Pass {
    m: AppendMetrics,
    files: Vec<DataFile>,
    keys: Option<Arc<KeyIndex>>,
}

/// The table an append was planned on (its inputs are read again by `apply`: they are not
/// kept in memory).
pub struct AppendWork {
    table: Table,
}

impl std::fmt::Debug for AppendWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppendWork")
    }
}

/// An append plan: the dry-run report (every record read and checked, rows counted).
pub type AppendPlan = Planned<AppendMetrics, AppendWork>;

impl Operation for AppendBuilder {
    type Plan = AppendPlan;
    type Metrics = AppendMetrics;

    /// Reads and checks every input record and counts the rows that would land (an upsert
    /// also locates the live rows its keys would replace); writes nothing and reports no
    /// progress (`run(true)`, the CLI's dry run, does).
    async fn plan(&self) -> Result<AppendPlan> {
        self.check(false).await
    }

    /// Reads the inputs again, writes them and commits; the commit validates against the
    /// table as it then is (an upsert locates the keys' rows again on each attempt).
    async fn apply(self, plan: AppendPlan) -> Result<AppendMetrics> {
        self.write_and_commit(plan.work.table, Instant::now()).await
    }

    /// One pass that checks and writes each record (the inputs are read once, not planned
    /// first), then the commit: what `floe append` runs.
    async fn execute(self) -> Result<AppendMetrics> {
        let started = Instant::now();
        // A plain append reads nothing of the history: its head is enough, at any length.
        let table = match self.mode {
            AppendMode::Append => self.ctx.load_head().await?,
            _ => self.ctx.load().await?,
        };
        self.write_and_commit(table, started).await
    }

    /// With `dry_run`, the plan's report; else [`Operation::execute`] (one pass).
    async fn run(self, dry_run: bool) -> Result<AppendMetrics> {
        if dry_run {
            return Ok(self.check(true).await?.report);
        }
        self.execute().await
    }
}

fn duration_ms(d: Duration) -> u64 {
    d.as_millis() as u64
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
