//! `floe delete NS.T --where ...`: Iceberg's row-level `DELETE FROM t WHERE ...`.
//!
//! Merge-on-read (floe's default, and `write.delete.mode=merge-on-read`): the matching live
//! rows get position deletes, one delete file per partition, in one `delete` snapshot; a data
//! file whose every live row matches is removed instead (a metadata-only delete). Copy-on-write
//! (`write.delete.mode=copy-on-write`, or `--mode`): each affected data file is rewritten
//! without the matching rows (its delete files applied) in one `overwrite` snapshot. Iceberg's
//! Java default for `write.delete.mode` is copy-on-write; floe defaults to merge-on-read
//! because a streaming table is deleted from often and compaction folds the deletes in later.
//!
//! [`DeleteBuilder`] is an [`Operation`]: `plan()` finds and counts the matching rows (the
//! `--dry-run` report) and keeps them; `apply()` deletes them, finding them again on a commit
//! attempt against a table that moved.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::Array;
use iceberg::scan::FileScanTask;
use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::base::cost::{Amount, Cost, Costed, Phase, Progress};
use crate::base::error::Result;
use crate::base::properties;
use crate::catalog::{ident_string, Catalog};
use crate::commit::producer::prepare_with;
use crate::commit::{Committer, Produced, SnapshotUpdate};
use crate::operations::change::locate::{candidates, locate, Matched, OnFile, Searched};
pub use crate::operations::change::mode::DeleteMode;
use crate::operations::change::predicate::RowFilter;
use crate::operations::change::{commit_row_delta_noting, RowDelta};
use crate::operations::compact::filter::format_now;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::write::WriteOptions;

/// What a delete did (or, dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct DeleteMetrics {
    pub table: String,
    pub dry_run: bool,
    pub mode: DeleteMode,
    /// The `--where` text.
    pub filter: String,
    /// The filter pruned files by partition and column metrics before reading.
    pub pruned: bool,
    /// Data files read to find the rows, their bytes and rows.
    pub files_scanned: usize,
    pub bytes_scanned: u64,
    pub rows_scanned: u64,
    /// Data files holding at least one matching live row.
    pub files_matched: usize,
    pub rows_deleted: u64,
    /// Data files removed whole (every live row matched).
    pub removed_data_files: usize,
    /// Position delete files written (merge-on-read, format 2).
    pub position_delete_files: usize,
    /// Deletion vectors written (merge-on-read, format 3: one per data file, in one Puffin
    /// file).
    pub deletion_vectors: usize,
    /// Data files rewritten without the rows (copy-on-write), and the files they became.
    pub rewritten_data_files: usize,
    pub added_data_files: usize,
    pub bytes_written: u64,
    /// The instant the filter's time functions (`now()`, `current_date`...) meant, when it
    /// calls one (recorded in the snapshot summary as `floe.delete.now`).
    pub now: Option<String>,
    /// `None` when no row matched (nothing committed) or a dry run.
    pub snapshot_id: Option<i64>,
    pub commit_attempts: u32,
    pub duration_ms: u64,
}

impl Costed for DeleteMetrics {
    fn cost(&self) -> Cost {
        Cost {
            files_to_read: self.files_scanned as u64,
            bytes_to_read: self.bytes_scanned,
            files_to_write: (self.position_delete_files
                + self.added_data_files
                + usize::from(self.deletion_vectors > 0)) as u64,
            bytes_to_write: self.bytes_written,
            ..Cost::default()
        }
    }
}

/// Snapshot summary property: the instant a delete's time functions meant.
pub const DELETE_NOW: &str = "floe.delete.now";

/// Builder of a row-level delete: `plan()` finds and counts the rows (the dry run),
/// `apply()` deletes them.
#[derive(Clone)]
pub struct DeleteBuilder {
    ctx: Ctx,
    filter: String,
    mode: Option<DeleteMode>,
}

/// What a delete was planned on: the table, the parsed filter, the mode, and the rows found
/// (reused by the first commit attempt when the table has not moved).
pub struct DeleteWork {
    table: Table,
    filter: Arc<RowFilter>,
    matched: Vec<Matched>,
    searched: Searched,
    note: HashMap<String, String>,
    planning: std::time::Duration,
}

impl std::fmt::Debug for DeleteWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeleteWork")
            .field("matched", &self.matched.len())
            .finish()
    }
}

/// A delete plan: the dry-run report (the rows found and counted).
pub type DeletePlan = Planned<DeleteMetrics, DeleteWork>;

impl DeleteBuilder {
    /// Deletes the rows of `ident` where `filter` (SQL) is true.
    pub fn new(catalog: &Catalog, ident: TableIdent, filter: impl Into<String>) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            filter: filter.into(),
            mode: None,
        }
    }

    /// Overrides `write.delete.mode`.
    pub fn with_mode(mut self, mode: Option<DeleteMode>) -> Self {
        self.mode = mode;
        self
    }

    /// Receives progress: the data files read (a write phase, one step per file).
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.ctx.progress = Some(Arc::new(f));
        self
    }
}

impl Operation for DeleteBuilder {
    type Plan = DeletePlan;
    type Metrics = DeleteMetrics;

    /// Finds and counts the matching live rows; writes nothing.
    async fn plan(&self) -> Result<DeletePlan> {
        let started = Instant::now();
        let table = self.ctx.load().await?;
        let filter = Arc::new(RowFilter::parse(&table, &self.filter)?);
        let mode = match self.mode {
            Some(m) => m,
            None => DeleteMode::of_table(&table, properties::WRITE_DELETE_MODE.key)?,
        };
        let (matched, searched) = self.find(&table, &filter).await?;
        let mut m = DeleteMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            mode,
            filter: self.filter.clone(),
            pruned: filter.prune.is_some(),
            files_scanned: searched.files,
            bytes_scanned: searched.bytes,
            rows_scanned: searched.rows,
            files_matched: matched.len(),
            rows_deleted: matched.iter().map(|m| m.positions.len() as u64).sum(),
            removed_data_files: matched.iter().filter(|m| m.all_live_rows()).count(),
            position_delete_files: 0,
            deletion_vectors: 0,
            rewritten_data_files: 0,
            added_data_files: 0,
            bytes_written: 0,
            now: filter.uses_now.then(|| format_now(&filter.now)),
            snapshot_id: None,
            commit_attempts: 0,
            duration_ms: 0,
        };
        let note: HashMap<String, String> = m
            .now
            .iter()
            .map(|n| (DELETE_NOW.to_string(), n.clone()))
            .collect();
        m.duration_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            m,
            snapshot_id,
            DeleteWork {
                table,
                filter,
                matched,
                searched,
                note,
                planning: started.elapsed(),
            },
        ))
    }

    /// Deletes the planned rows in one commit (nothing when none matched); each commit attempt
    /// on a table that moved since the plan finds the rows again.
    async fn apply(self, plan: DeletePlan) -> Result<DeleteMetrics> {
        let started = Instant::now();
        let mut m = plan.report;
        m.dry_run = false;
        let DeleteWork {
            table,
            filter,
            matched,
            searched,
            note,
            planning,
        } = plan.work;
        if !matched.is_empty() {
            match m.mode {
                DeleteMode::MergeOnRead => {
                    let me = &self;
                    let filter = &filter;
                    let delta: RowDelta = commit_row_delta_noting(
                        &self.ctx.catalog,
                        &self.ctx.ident,
                        table,
                        vec![],
                        Some((matched, searched)),
                        note,
                        |t| async move { me.find(&t, filter).await },
                    )
                    .await?;
                    m.files_scanned = delta.searched.files;
                    m.bytes_scanned = delta.searched.bytes;
                    m.rows_scanned = delta.searched.rows;
                    m.rows_deleted = delta.deletes.rows;
                    m.removed_data_files = delta.deletes.removed_data_files.len();
                    let (vectors, files): (Vec<_>, Vec<_>) =
                        delta.deletes.delete_files.iter().partition(|f| {
                            f.file_format() == iceberg::spec::DataFileFormat::Puffin
                        });
                    m.position_delete_files = files.len();
                    m.deletion_vectors = vectors.len();
                    m.bytes_written = delta
                        .deletes
                        .delete_files
                        .iter()
                        .map(|f| f.file_size_in_bytes())
                        .sum();
                    m.snapshot_id = delta.snapshot_id;
                    m.commit_attempts = delta.attempts;
                }
                DeleteMode::CopyOnWrite => {
                    let cow = self.copy_on_write(table, &filter, matched, note).await?;
                    m.rows_deleted = cow.rows_deleted;
                    m.files_matched = cow.files_matched;
                    m.removed_data_files = cow.removed;
                    m.rewritten_data_files = cow.rewritten;
                    m.added_data_files = cow.added;
                    m.bytes_written = cow.bytes_written;
                    m.snapshot_id = cow.snapshot_id;
                    m.commit_attempts = cow.attempts;
                }
            }
        }
        m.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(m)
    }
}

impl DeleteBuilder {
    /// Candidate files (pruned by the filter when it can be) and the matching live rows.
    async fn find(
        &self,
        table: &Table,
        filter: &Arc<RowFilter>,
    ) -> Result<(Vec<Matched>, Searched)> {
        let tasks = candidates(table, filter.prune.clone()).await?;
        let total = Amount {
            steps: tasks.len() as u64,
            files: tasks.len() as u64,
            bytes: tasks.iter().map(|t| t.file_size_in_bytes).sum(),
            rows: 0,
        };
        let on_file: Option<OnFile> = self.ctx.progress.clone().map(|f| {
            let state = std::sync::Mutex::new(Progress::start(Phase::Write, total));
            f(&state.lock().expect("not poisoned"));
            let on: OnFile = Arc::new(move |bytes: u64| {
                let mut p = state.lock().expect("not poisoned");
                p.done += Amount {
                    steps: 1,
                    files: 1,
                    bytes,
                    rows: 0,
                };
                f(&p);
            });
            on
        });
        locate(table, tasks, &filter.field_ids, filter.matcher(), on_file).await
    }

    /// Rewrites the affected files without the matching rows, one `overwrite` commit; every
    /// attempt finds the rows again on the table it commits on.
    async fn copy_on_write(
        &self,
        base: Table,
        filter: &Arc<RowFilter>,
        first: Vec<Matched>,
        note: HashMap<String, String>,
    ) -> Result<CowOutcome> {
        let planned_on = base.metadata().current_snapshot_id();
        let mut first = Some(first);
        let me = &self;
        let done = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(base)
            .commit_with(|t| {
                let reuse = first
                    .take()
                    .filter(|_| t.metadata().current_snapshot_id() == planned_on);
                let note = note.clone();
                async move {
                    let matched = match reuse {
                        Some(m) => m,
                        None => me.find(&t, filter).await?.0,
                    };
                    if matched.is_empty() {
                        return Ok(Produced::nothing(CowOutcome::default()));
                    }
                    let (plan, data) = rewrite_without(&t, filter, &matched).await?;
                    let written: Vec<String> =
                        data.iter().map(|f| f.file_path().to_string()).collect();
                    let removed: Vec<String> = matched.iter().map(|m| m.path.clone()).collect();
                    let update = SnapshotUpdate::overwrite(&t, removed, vec![], data)
                        .with_summary_properties(note);
                    let commit = prepare_with(&t, &update, written).await?;
                    Ok(Produced::new(commit, plan))
                }
            })
            .await?;
        if !done.changed {
            return Ok(CowOutcome::default());
        }
        Ok(CowOutcome {
            snapshot_id: done.table.metadata().current_snapshot_id(),
            attempts: done.attempts,
            ..done.plan
        })
    }
}

#[derive(Debug, Clone, Default)]
struct CowOutcome {
    rows_deleted: u64,
    files_matched: usize,
    removed: usize,
    rewritten: usize,
    added: usize,
    bytes_written: u64,
    snapshot_id: Option<i64>,
    attempts: u32,
}

/// Reads the files of `matched` that keep some rows (their delete files applied) and writes
/// the rows the filter does not select; files whose every live row matched are only removed.
/// Returns the counts and the new data files (deleted here on failure).
async fn rewrite_without(
    table: &Table,
    filter: &RowFilter,
    matched: &[Matched],
) -> Result<(CowOutcome, Vec<iceberg::spec::DataFile>)> {
    let partial: std::collections::HashSet<&str> = matched
        .iter()
        .filter(|m| !m.all_live_rows())
        .map(|m| m.path.as_str())
        .collect();
    let mut out = CowOutcome {
        files_matched: matched.len(),
        removed: matched.len() - partial.len(),
        rewritten: partial.len(),
        rows_deleted: matched
            .iter()
            .filter(|m| m.all_live_rows())
            .map(|m| m.live_rows)
            .sum(),
        ..CowOutcome::default()
    };
    if partial.is_empty() {
        return Ok((out, vec![]));
    }
    // The partial files' scan tasks, with the delete files that apply to them.
    let tasks: Vec<FileScanTask> = matched
        .iter()
        .filter(|m| !m.all_live_rows())
        .map(|m| m.task.clone())
        .collect();
    // Format v3: the kept rows keep their row ids, and the tasks carry deletion vectors.
    let (dvs, lineage) = crate::write::rewrite::lineage_of(table).await?;
    let (writer, stream) = crate::write::rewrite::rewriter(
        table,
        &WriteOptions::default(),
        tasks,
        &dvs,
        lineage.as_ref(),
    )
    .await?;
    let mut deleted = 0u64;
    let files = crate::write::rewrite::write_all(writer, stream, |batch| {
        // NULL (not TRUE) keeps the row.
        let gone = filter.eval_full(&batch)?;
        let gone = match gone.nulls() {
            Some(_) => arrow::compute::prep_null_mask_filter(&gone),
            None => gone,
        };
        let keep = arrow::compute::not(&gone)?;
        let kept = arrow::compute::filter_record_batch(&batch, &keep)?;
        deleted += (batch.num_rows() - kept.num_rows()) as u64;
        Ok(kept)
    })
    .await?;
    out.rows_deleted += deleted;
    out.added = files.len();
    out.bytes_written = files.iter().map(|f| f.file_size_in_bytes()).sum();
    Ok((out, files))
}
