//! Position delete files: which data files they target, and `floe rewrite-position-delete-files`
//! (Iceberg's `rewrite_position_delete_files` procedure).
//!
//! Targets (Iceberg spec v2, "Position Delete Files" and "Scan Planning"): a position delete
//! file names the data files it deletes from in its `file_path` column. `referenced_data_file`,
//! when set, is its only target; otherwise the column's bounds in the file's metrics (reserved
//! field id 2147483546) prove a single target when lower == upper; otherwise the column itself
//! is read.
//!
//! The rewrite reads the position delete files of each selected (spec, partition), keeps only
//! the rows that still apply (their data file is live, in the same spec and partition, with a
//! data sequence number <= the delete file's), and writes them back sorted into files of about
//! `target-file-size-bytes` (`referenced_data_file` set when a file targets one data file).
//! Files whose rows all point at files gone from the table are removed with nothing written.
//! One `replace` commit removes the old delete files and adds the new ones; data files are
//! untouched. The new files of a group take the largest data sequence number of the files they
//! replace (as Iceberg's rewrite of position deletes does): a row only ever names a data file
//! whose sequence number is <= its original file's, so a larger number changes nothing it
//! matches, while a smaller one could stop it applying.
//!
//! [`RewriteDeletesBuilder`] is an [`Operation`]: `plan()` selects the groups from metadata
//! (the `--dry-run` report), `apply()` reads, rewrites and commits them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataContentType, DataFile, PrimitiveLiteral};
use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::base::cost::{Amount, Cost, Costed, Phase, Progress};
use crate::base::error::{Error, Result};
use crate::base::properties::{self, parse_bool, parse_size};
use crate::catalog::{ident_string, Catalog};
use crate::commit::{Committer, Ledger, LiveFile, SnapshotUpdate};
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::write::deletes::{write_position_delete_file, POSITION_DELETE_FILE_PATH_ID};

/// Delete files read at once.
const READ_CONCURRENCY: usize = 8;

/// Largest position delete file compaction reads to learn its targets; a larger one (rare:
/// deletes are small) is kept live.
pub const MAX_TARGET_READ_BYTES: u64 = 64 << 20;

/// The data files a position delete file targets, when its metadata proves them:
/// `referenced_data_file`, or equal `file_path` bounds.
pub fn targets_from_metadata(f: &DataFile) -> Option<BTreeSet<String>> {
    if let Some(r) = f.referenced_data_file() {
        return Some(BTreeSet::from([r]));
    }
    let lo = f.lower_bounds().get(&POSITION_DELETE_FILE_PATH_ID)?;
    let hi = f.upper_bounds().get(&POSITION_DELETE_FILE_PATH_ID)?;
    match (lo.literal(), hi.literal()) {
        (PrimitiveLiteral::String(a), PrimitiveLiteral::String(b)) if a == b => {
            Some(BTreeSet::from([a.clone()]))
        }
        _ => None,
    }
}

pub use crate::table::rows::read_position_deletes;

/// The targets of each of `files` (position delete files) that can be known: from metadata,
/// else by reading files up to [`MAX_TARGET_READ_BYTES`]. Files left out are of unknown target.
pub async fn targets_of(
    table: &Table,
    files: &[&DataFile],
) -> Result<HashMap<String, BTreeSet<String>>> {
    let mut out = HashMap::new();
    let mut to_read = Vec::new();
    for f in files {
        match targets_from_metadata(f) {
            Some(t) => {
                out.insert(f.file_path().to_string(), t);
            }
            None if f.file_size_in_bytes() <= MAX_TARGET_READ_BYTES => {
                to_read.push(f.file_path().to_string())
            }
            None => {}
        }
    }
    let read: Vec<(String, BTreeSet<String>)> =
        futures::stream::iter(to_read.into_iter().map(|p| async move {
            let rows = read_position_deletes(table, &p).await?;
            Ok::<_, Error>((p, rows.into_iter().map(|r| r.0).collect()))
        }))
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    out.extend(read);
    Ok(out)
}

/// Every option name of `rewrite-position-delete-files`, as `--option` spells it (Iceberg's).
pub const OPTION_NAMES: [&str; 5] = [
    "rewrite-all",
    "min-input-files",
    "target-file-size-bytes",
    "min-file-size-bytes",
    "max-file-size-bytes",
];

/// Options of `rewrite-position-delete-files`; `None` is Iceberg's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RewriteDeletesOptions {
    pub rewrite_all: Option<bool>,
    pub min_input_files: Option<u64>,
    pub target_file_size_bytes: Option<u64>,
    pub min_file_size_bytes: Option<u64>,
    pub max_file_size_bytes: Option<u64>,
}

impl RewriteDeletesOptions {
    /// Sets option `key` from text; an unknown key or a bad value is an error naming it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let size = || parse_size(key, value);
        match key {
            "rewrite-all" => self.rewrite_all = Some(parse_bool(key, value)?),
            "min-input-files" => self.min_input_files = Some(size()?),
            "target-file-size-bytes" => self.target_file_size_bytes = Some(size()?),
            "min-file-size-bytes" => self.min_file_size_bytes = Some(size()?),
            "max-file-size-bytes" => self.max_file_size_bytes = Some(size()?),
            _ => {
                return Err(Error::invalid_option(
                    "rewrite-position-delete-files option",
                    key,
                    format!("known options: {}", OPTION_NAMES.join(", ")),
                ))
            }
        }
        Ok(())
    }

    /// The values in effect: Iceberg's defaults (target `write.delete.target-file-size-bytes`,
    /// 64 MiB; min 75% and max 180% of it; 5 input files).
    pub fn resolve(&self, table: &Table) -> Result<ResolvedDeletesOptions> {
        let target = match self.target_file_size_bytes {
            Some(t) => t,
            None => properties::table_u64_prop(
                table,
                properties::WRITE_DELETE_TARGET_FILE_SIZE_BYTES.key,
                properties::WRITE_DELETE_TARGET_FILE_SIZE_BYTES_DEFAULT,
            )?,
        };
        let positive = |name: &str, v: u64| {
            if v == 0 {
                Err(Error::invalid_option(name, v, "must be positive"))
            } else {
                Ok(v)
            }
        };
        let target = positive("target-file-size-bytes", target)?;
        let min = self.min_file_size_bytes.unwrap_or(target / 4 * 3);
        let max = self.max_file_size_bytes.unwrap_or(target / 10 * 18);
        if min > target {
            return Err(Error::invalid_option(
                "min-file-size-bytes",
                min,
                format!("must not exceed target-file-size-bytes ({target})"),
            ));
        }
        if max < target {
            return Err(Error::invalid_option(
                "max-file-size-bytes",
                max,
                format!("must not be below target-file-size-bytes ({target})"),
            ));
        }
        Ok(ResolvedDeletesOptions {
            rewrite_all: self.rewrite_all.unwrap_or(false),
            min_input_files: positive("min-input-files", self.min_input_files.unwrap_or(5))?,
            target_file_size_bytes: target,
            min_file_size_bytes: min,
            max_file_size_bytes: max,
        })
    }
}

/// The options a rewrite ran with.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedDeletesOptions {
    pub rewrite_all: bool,
    pub min_input_files: u64,
    pub target_file_size_bytes: u64,
    pub min_file_size_bytes: u64,
    pub max_file_size_bytes: u64,
}

/// One (spec, partition) of position delete files to rewrite.
#[derive(Debug, Clone, Serialize)]
pub struct DeleteGroup {
    pub spec_id: i32,
    pub partition: String,
    pub input_files: usize,
    pub input_bytes: u64,
    /// Rows (deleted positions) the input files hold.
    pub input_deletes: u64,
    /// Input files whose metadata already shows they target no live data file.
    pub dangling_files: usize,
    #[serde(skip)]
    files: Vec<LiveFile>,
}

/// What `rewrite-position-delete-files` did (or, planned with `dry_run`, would do). The counts are
/// Iceberg's `RewritePositionDeleteFiles` result names.
#[derive(Debug, Clone, Serialize)]
pub struct RewriteDeletesMetrics {
    pub table: String,
    pub dry_run: bool,
    pub options: ResolvedDeletesOptions,
    /// Live position delete files before.
    pub live_position_delete_files: usize,
    pub groups: Vec<DeleteGroup>,
    pub rewritten_delete_files_count: usize,
    pub added_delete_files_count: usize,
    pub rewritten_bytes_count: u64,
    pub added_bytes_count: u64,
    /// Rows read, and rows written back (the rest named data files no longer live).
    pub rewritten_deletes: u64,
    pub added_deletes: u64,
    pub dangling_deletes_removed: u64,
    /// Format v3: rows dropped because their data file has a deletion vector already, which
    /// holds what applies (readers ignore position deletes for such a file).
    pub superseded_by_vectors: u64,
    /// Input files none of whose rows still applied (removed, nothing written for them).
    pub emptied_delete_files: usize,
    pub snapshot_id: Option<i64>,
    pub duration_ms: u64,
}

impl Costed for RewriteDeletesMetrics {
    fn cost(&self) -> Cost {
        let (files, bytes): (usize, u64) = self
            .groups
            .iter()
            .fold((0, 0), |a, g| (a.0 + g.input_files, a.1 + g.input_bytes));
        Cost {
            files_to_read: files as u64,
            bytes_to_read: bytes,
            files_to_write: if self.dry_run {
                self.groups.len() as u64
            } else {
                self.added_delete_files_count as u64
            },
            bytes_to_write: if self.dry_run {
                bytes
            } else {
                self.added_bytes_count
            },
            ..Cost::default()
        }
    }
}

/// `rewrite-position-delete-files` on one table: `plan()` selects the groups (the dry run),
/// `apply()` rewrites them and commits.
#[derive(Clone)]
pub struct RewriteDeletesBuilder {
    ctx: Ctx,
    options: RewriteDeletesOptions,
    bad_option: Option<(String, String)>,
}

/// What the table's data files look like to a delete row: spec, partition, sequence number.
struct DataInfo {
    spec_id: i32,
    partition: String,
    value: iceberg::spec::Struct,
    seq: i64,
}

impl RewriteDeletesBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            options: RewriteDeletesOptions::default(),
            bad_option: None,
        }
    }

    /// Sets the options (typed).
    pub fn with_options(mut self, options: RewriteDeletesOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets one option by its Iceberg name from text; a bad one fails `plan`, naming it.
    pub fn with_option(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        let (key, value) = (key.into(), value.to_string());
        if self.options.set(&key, &value).is_err() && self.bad_option.is_none() {
            self.bad_option = Some((key, value));
        }
        self
    }

    /// Receives progress events: one step per group rewritten.
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.ctx.progress = Some(Arc::new(f));
        self
    }
}

/// What a rewrite of position deletes was planned on: the table, its live data files (by
/// path) and the options in effect.
pub struct RewriteDeletesWork {
    table: Table,
    data: HashMap<String, DataInfo>,
    opts: ResolvedDeletesOptions,
    planning: std::time::Duration,
}

impl std::fmt::Debug for RewriteDeletesWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RewriteDeletesWork")
    }
}

/// A `rewrite-position-delete-files` plan: the dry-run report (the groups to rewrite).
pub type RewriteDeletesPlan = Planned<RewriteDeletesMetrics, RewriteDeletesWork>;

impl Operation for RewriteDeletesBuilder {
    type Plan = RewriteDeletesPlan;
    type Metrics = RewriteDeletesMetrics;

    /// Reads the live files and selects the groups worth rewriting; reads no delete file's
    /// rows and writes nothing.
    async fn plan(&self) -> Result<RewriteDeletesPlan> {
        let started = Instant::now();
        if let Some((key, value)) = &self.bad_option {
            RewriteDeletesOptions::default().set(key, value)?;
        }
        let table = self.ctx.load().await?;
        let opts = self.options.resolve(&table)?;
        let live = crate::table::manifests::live_files(&table).await?;
        let data: HashMap<String, DataInfo> = live
            .iter()
            .filter(|f| f.file.content_type() == DataContentType::Data)
            .map(|f| {
                (
                    f.file.file_path().to_string(),
                    DataInfo {
                        spec_id: f.spec_id,
                        partition: format!("{:?}", f.file.partition()),
                        value: f.file.partition().clone(),
                        seq: f.sequence_number,
                    },
                )
            })
            .collect();
        let mut by_partition: BTreeMap<(i32, String), Vec<LiveFile>> = BTreeMap::new();
        for f in live
            .iter()
            .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
            // Deletion vectors (format v3) are not Parquet position delete files.
            .filter(|f| crate::table::deletion_vector::location_of(&f.file).is_none())
        {
            by_partition
                .entry((f.spec_id, format!("{:?}", f.file.partition())))
                .or_default()
                .push(f.clone());
        }
        let live_position = by_partition.values().map(Vec::len).sum();
        // Format v3 takes no position delete file: every one is converted into deletion
        // vectors, whatever its size (what Iceberg's Java implementation does on v3).
        let mut opts = opts;
        if table.metadata().format_version() >= iceberg::spec::FormatVersion::V3 {
            opts.rewrite_all = true;
        }
        let groups = plan_groups(&table, by_partition, &data, &opts);
        let report = RewriteDeletesMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            options: opts.clone(),
            live_position_delete_files: live_position,
            groups,
            rewritten_delete_files_count: 0,
            added_delete_files_count: 0,
            rewritten_bytes_count: 0,
            added_bytes_count: 0,
            rewritten_deletes: 0,
            added_deletes: 0,
            dangling_deletes_removed: 0,
            superseded_by_vectors: 0,
            emptied_delete_files: 0,
            snapshot_id: None,
            duration_ms: started.elapsed().as_millis() as u64,
        };
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            report,
            snapshot_id,
            RewriteDeletesWork {
                table,
                data,
                opts,
                planning: started.elapsed(),
            },
        ))
    }

    /// Rewrites the planned groups and commits them in one `replace`; the commit re-checks
    /// that each replaced file is still live.
    async fn apply(self, plan: RewriteDeletesPlan) -> Result<RewriteDeletesMetrics> {
        let started = Instant::now();
        let mut m = plan.report;
        m.dry_run = false;
        let RewriteDeletesWork {
            table,
            data,
            opts,
            planning,
        } = plan.work;
        let mut progress = Progress::start(
            Phase::Write,
            Amount {
                steps: m.groups.len() as u64,
                files: m.groups.iter().map(|g| g.input_files as u64).sum(),
                bytes: m.groups.iter().map(|g| g.input_bytes).sum(),
                rows: 0,
            },
        );
        self.ctx.report(&progress);
        if m.groups.is_empty() {
            m.duration_ms = (started.elapsed() + planning).as_millis() as u64;
            return Ok(m);
        }

        let mut removed = Vec::new();
        let mut added: Vec<DataFile> = Vec::new();
        let mut placement: HashMap<String, (i32, i64)> = HashMap::new();
        let v3 = table.metadata().format_version() >= iceberg::spec::FormatVersion::V3;
        if v3 {
            let converted = to_vectors(&table, &mut m, &data).await?;
            for (f, spec) in &converted {
                placement.insert(crate::commit::placement_key(f), (*spec, -1));
            }
            added = converted.into_iter().map(|(f, _)| f).collect();
            removed = m
                .groups
                .iter()
                .flat_map(|g| g.files.iter().map(|f| f.file.file_path().to_string()))
                .collect();
            progress.done = progress.total;
            self.ctx.report(&progress);
        }
        let result: Result<()> = async {
            // (Format v3 was converted above.)
            for g in m.groups.iter().filter(|_| !v3) {
                let (files, kept_in, emptied) = rewrite_group(&table, g, &data, &opts).await?;
                let max_seq = g.files.iter().map(|f| f.sequence_number).max();
                for f in &files {
                    if let Some(s) = max_seq {
                        placement.insert(f.file_path().to_string(), (g.spec_id, s));
                    }
                }
                let read: u64 = kept_in.iter().map(|k| k.1).sum();
                let kept: u64 = kept_in.iter().map(|k| k.0).sum();
                m.rewritten_deletes += read;
                m.added_deletes += files.iter().map(|f| f.record_count()).sum::<u64>();
                m.dangling_deletes_removed += read - kept;
                m.emptied_delete_files += emptied;
                m.rewritten_delete_files_count += g.input_files;
                m.rewritten_bytes_count += g.input_bytes;
                m.added_delete_files_count += files.len();
                m.added_bytes_count += files.iter().map(|f| f.file_size_in_bytes()).sum::<u64>();
                removed.extend(g.files.iter().map(|f| f.file.file_path().to_string()));
                added.extend(files);
                progress.done += Amount {
                    steps: 1,
                    files: g.input_files as u64,
                    bytes: g.input_bytes,
                    rows: read,
                };
                self.ctx.report(&progress);
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let mut written = Ledger::of(&table);
            written.stage_files(&added);
            written.discard().await;
            return Err(e);
        }
        let mut props = HashMap::new();
        props.insert(
            "floe.operation".to_string(),
            "rewrite-position-delete-files".to_string(),
        );
        let update = SnapshotUpdate::rewrite_deletes(&table, removed, added, placement)
            .with_summary_properties(props);
        // The commit path re-checks on every attempt that each replaced file is still live
        // and deletes the new files when the commit definitely fails.
        let outcome = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(table)
            .commit(update)
            .await?;
        m.snapshot_id = Some(outcome.snapshot_id);
        m.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(m)
    }
}

/// Format v3: the rows of every planned position delete file that still apply, as one deletion
/// vector per data file, written into one Puffin file (returned with each vector's spec). A
/// data file that has a vector already is not touched: readers ignore position delete files
/// for it (its vector holds what applies), so their rows for it are dropped, not merged.
async fn to_vectors(
    table: &Table,
    m: &mut RewriteDeletesMetrics,
    data: &HashMap<String, DataInfo>,
) -> Result<Vec<(DataFile, i32)>> {
    let dvs = crate::table::deletion_vector::DeletionVectors::of_current(table).await?;
    let mut by_file: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for g in &m.groups {
        let (rows, counts, emptied) = applying_rows(table, g, data).await?;
        let read: u64 = counts.iter().map(|c| c.1).sum();
        let applying = rows.len() as u64;
        let mut kept = 0u64;
        for (path, pos) in rows {
            if dvs.of_file(&path).is_none() {
                kept += 1;
                by_file.entry(path).or_default().push(pos.max(0) as u64);
            }
        }
        m.rewritten_deletes += read;
        m.added_deletes += kept;
        // Rows naming a data file no longer live are dangling; rows of a data file that has a
        // deletion vector already are superseded by it (readers ignore them), not dangling.
        m.dangling_deletes_removed += read.saturating_sub(applying);
        m.superseded_by_vectors += applying - kept;
        m.emptied_delete_files += emptied;
        m.rewritten_delete_files_count += g.input_files;
        m.rewritten_bytes_count += g.input_bytes;
    }
    let vectors: Vec<crate::write::deletion_vectors::VectorOf> = by_file
        .into_iter()
        .filter_map(|(path, positions)| {
            let info = data.get(&path)?;
            Some(crate::write::deletion_vectors::VectorOf {
                data_file: path,
                spec_id: info.spec_id,
                partition: info.value.clone(),
                vector: crate::table::deletion_vector::DeletionVector::from_positions(positions),
            })
        })
        .collect();
    let written = crate::write::deletion_vectors::write_deletion_vectors(table, vectors).await?;
    m.added_delete_files_count += written.len();
    m.added_bytes_count += written.first().map_or(0, |(f, _)| f.file_size_in_bytes());
    Ok(written)
}

/// Groups per (spec, partition) worth rewriting: Iceberg's size-based selection (files under
/// `min-file-size-bytes` or over `max-file-size-bytes`, all with `rewrite-all`; a group needs
/// `min-input-files` of them, or more than a target's worth, or an oversized one), plus any
/// file whose metadata shows it targets no live data file.
fn plan_groups(
    table: &Table,
    by_partition: BTreeMap<(i32, String), Vec<LiveFile>>,
    data: &HashMap<String, DataInfo>,
    opts: &ResolvedDeletesOptions,
) -> Vec<DeleteGroup> {
    let mut out = Vec::new();
    for ((spec_id, _), files) in by_partition {
        let dangling = |f: &LiveFile| {
            targets_from_metadata(&f.file)
                .is_some_and(|t| t.iter().all(|p| !data.contains_key(p.as_str())))
        };
        let too_small = |f: &LiveFile| f.file.file_size_in_bytes() < opts.min_file_size_bytes;
        let too_large = |f: &LiveFile| f.file.file_size_in_bytes() > opts.max_file_size_bytes;
        let candidates: Vec<LiveFile> = files
            .iter()
            .filter(|f| opts.rewrite_all || too_small(f) || too_large(f) || dangling(f))
            .cloned()
            .collect();
        let bytes: u64 = candidates.iter().map(|f| f.file.file_size_in_bytes()).sum();
        let n_dangling = candidates.iter().filter(|f| dangling(f)).count();
        let worth = !candidates.is_empty()
            && (opts.rewrite_all
                || candidates.len() as u64 >= opts.min_input_files
                || (candidates.len() > 1 && bytes > opts.target_file_size_bytes)
                || candidates.iter().any(too_large)
                || n_dangling > 0);
        if !worth {
            continue;
        }
        let partition = super::partition_path(table, spec_id, Some(candidates[0].file.partition()));
        out.push(DeleteGroup {
            spec_id,
            partition,
            input_files: candidates.len(),
            input_bytes: bytes,
            input_deletes: candidates.iter().map(|f| f.file.record_count()).sum(),
            dangling_files: n_dangling,
            files: candidates,
        });
    }
    out
}

/// The rows of a group's files that still apply (sorted, deduplicated), per input file (rows
/// kept, rows read), and how many inputs kept no row.
async fn applying_rows(
    table: &Table,
    g: &DeleteGroup,
    data: &HashMap<String, DataInfo>,
) -> Result<(Vec<(String, i64)>, Vec<(u64, u64)>, usize)> {
    // Owned paths: a stream over borrowed files is not `Send` inside `apply`'s future.
    let paths: Vec<(usize, String)> = g
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.file.file_path().to_string()))
        .collect();
    let read: Vec<(usize, Vec<(String, i64)>)> =
        futures::stream::iter(paths.into_iter().map(|(i, p)| async move {
            Ok::<_, Error>((i, read_position_deletes(table, &p).await?))
        }))
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut rows = Vec::new();
    let mut counts = vec![(0u64, 0u64); g.files.len()];
    for (i, file_rows) in read {
        let d = &g.files[i];
        let part = format!("{:?}", d.file.partition());
        counts[i].1 = file_rows.len() as u64;
        for r in file_rows {
            // The row applied before: its data file is live, in the delete's spec and
            // partition, and not newer than the delete (Iceberg spec v2, "Scan Planning").
            let applies = data.get(r.0.as_str()).is_some_and(|x| {
                x.spec_id == d.spec_id && x.partition == part && x.seq <= d.sequence_number
            });
            if applies {
                counts[i].0 += 1;
                rows.push(r);
            }
        }
    }
    let emptied = counts.iter().filter(|c| c.0 == 0).count();
    rows.sort();
    rows.dedup();
    Ok((rows, counts, emptied))
}

/// Reads a group's files, keeps the rows that still apply and writes them back. Returns the
/// new files, per input file (rows kept, rows read), and how many inputs kept no row.
async fn rewrite_group(
    table: &Table,
    g: &DeleteGroup,
    data: &HashMap<String, DataInfo>,
    opts: &ResolvedDeletesOptions,
) -> Result<(Vec<DataFile>, Vec<(u64, u64)>, usize)> {
    let (rows, counts, emptied) = applying_rows(table, g, data).await?;
    let mut out = Vec::new();
    if rows.is_empty() {
        return Ok((out, counts, emptied));
    }
    // Rows per output file from the inputs' bytes per row.
    let in_rows = g.input_deletes.max(1);
    let per_row = (g.input_bytes / in_rows).max(1);
    let per_file = (opts.target_file_size_bytes / per_row).max(1) as usize;
    let partition = g.files[0].file.partition().clone();
    let written: Result<()> = async {
        for chunk in rows.chunks(per_file) {
            if let Some(f) = write_position_delete_file(
                table,
                g.spec_id,
                partition.clone(),
                chunk.to_vec(),
                true,
            )
            .await?
            {
                out.push(f);
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = written {
        let mut written = Ledger::of(table);
        written.stage_files(&out);
        written.discard().await;
        return Err(e);
    }
    Ok((out, counts, emptied))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_parsed_and_refused_by_name() {
        let mut o = RewriteDeletesOptions::default();
        o.set("rewrite-all", "true").unwrap();
        o.set("min-input-files", "2").unwrap();
        assert_eq!(o.rewrite_all, Some(true));
        assert_eq!(o.min_input_files, Some(2));
        let e = o.set("nope", "1").unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("min-input-files"), "{e}");
        let e = o.set("min-input-files", "x").unwrap_err().to_string();
        assert!(e.contains("min-input-files"), "{e}");
    }
}
