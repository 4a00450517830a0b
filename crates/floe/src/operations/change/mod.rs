//! Row-level changes: `floe delete --where` and upserts by primary key (`floe append --mode
//! upsert`, `floe ingest --mode upsert|cdc`).
//!
//! ```text
//!  --where / keys ──> locate: candidate files (pruned by partition + metrics), read the
//!                     matcher's columns in file order -> (file, positions) of live rows
//!        │
//!        v            merge-on-read (default): one position delete file per partition,
//!  row delta  ──────> a file whose every live row goes is removed instead
//!        │            copy-on-write (`write.delete.mode` for deletes, `write.merge.mode` /
//!        │            `write.update.mode` for upserts and CDC, see `mode`): affected files
//!        │            rewritten without the rows, in the same commit as the new rows
//!        v
//!  commit_with: every attempt locates again on the table it commits on (a concurrent commit
//!  that added, rewrote or deleted rows is seen), so the delete and the data land together or
//!  not at all, or nothing is committed when nothing is left (`Produced::nothing`); files
//!  written by a losing attempt are deleted, the staged data settled by the committer's ledger.
//! ```
//!
//! Position deletes are the default because every reader floe supports applies them (PyIceberg
//! 0.12 reads no equality deletes). They are written with `referenced_data_file` when a file
//! targets one data file (Iceberg spec v2, "Position Delete Files"). A position delete in the
//! same snapshot as new data applies only to the files it names, so an upsert's new rows are
//! never hit by its own deletes.

pub mod convert;
pub mod delete;
pub mod keys;
pub mod locate;
pub mod mode;
pub mod predicate;

use std::collections::HashMap;

use std::future::Future;

use futures::future::Either;

use iceberg::spec::{DataFile, Struct};
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::error::Result;
use crate::catalog::Catalog;
use crate::commit::producer::prepare_with;
use crate::commit::{Committer, Ledger, Produced, SnapshotUpdate};
use crate::write::deletes::write_position_delete_file;
use crate::write::staged::Staged;
use crate::write::WriteOptions;
use locate::{Matched, Searched};

/// The deletes of one attempt: data files that leave the table (every live row selected, or
/// rewritten by copy-on-write) and position delete files for the rest.
#[derive(Debug, Clone, Default)]
pub struct Deletes {
    pub removed_data_files: Vec<String>,
    /// Format v3: deletion vectors replaced by merged ones, as (Puffin file, data file).
    pub removed_vectors: Vec<(String, String)>,
    pub delete_files: Vec<DataFile>,
    /// Copy-on-write: the files the changed data files were rewritten into (their kept rows).
    pub rewritten: Vec<DataFile>,
    /// The partition spec of each delete file (that of the data files it names), by
    /// [`crate::commit::placement_key`].
    pub specs: HashMap<String, i32>,
    /// Rows deleted (live rows of removed files + positions written).
    pub rows: u64,
}

impl Deletes {
    fn is_empty(&self) -> bool {
        self.removed_data_files.is_empty()
            && self.delete_files.is_empty()
            && self.removed_vectors.is_empty()
    }

    fn written(&self) -> Vec<String> {
        let mut paths = crate::write::deletes::distinct_paths(&self.delete_files);
        paths.extend(self.rewritten.iter().map(|f| f.file_path().to_string()));
        paths
    }
}

/// Writes the position deletes of `matched`: one file per partition (spec + partition of the
/// data files it targets); a data file whose every live row is selected is removed instead.
/// A format v3 table gets deletion vectors instead ([`write_vectors`]). On failure deletes
/// what it wrote.
pub async fn write_deletes(table: &Table, matched: &[Matched]) -> Result<Deletes> {
    if table.metadata().format_version() >= iceberg::spec::FormatVersion::V3 {
        return write_vectors(table, matched).await;
    }
    let mut out = Deletes::default();
    let mut groups: HashMap<(i32, Struct), Vec<(String, i64)>> = HashMap::new();
    for m in matched {
        out.rows += m.positions.len() as u64;
        if m.all_live_rows() {
            out.removed_data_files.push(m.path.clone());
        } else {
            groups
                .entry((m.spec_id, m.partition.clone()))
                .or_default()
                .extend(m.positions.iter().map(|&p| (m.path.clone(), p)));
        }
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by(|a, b| a.1[0].0.cmp(&b.1[0].0));
    for ((spec, partition), rows) in groups {
        match write_position_delete_file(table, spec, partition, rows, true).await {
            Ok(Some(f)) => {
                out.specs.insert(crate::commit::placement_key(&f), spec);
                out.delete_files.push(f);
            }
            Ok(None) => {}
            Err(e) => {
                Ledger::of(table).with(out.written()).discard().await;
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// Copy-on-write: every file of `matched` leaves the table, and those that keep some rows are
/// rewritten without the selected ones (their other deletes applied; on format v3 the kept rows
/// keep their row ids). On failure deletes what it wrote.
pub async fn rewrite_matched(table: &Table, matched: &[Matched]) -> Result<Deletes> {
    let mut out = Deletes::default();
    let mut partial = Vec::new();
    for m in matched {
        out.rows += m.positions.len() as u64;
        out.removed_data_files.push(m.path.clone());
        if !m.all_live_rows() {
            partial.push((m.task.clone(), m.positions.clone()));
        }
    }
    if partial.is_empty() {
        return Ok(out);
    }
    let (dvs, lineage) = crate::write::rewrite::lineage_of(table).await?;
    let (writer, rows) = crate::write::rewrite::rewriter_without(
        table,
        &WriteOptions::default(),
        partial,
        &dvs,
        lineage.as_ref(),
    )
    .await?;
    out.rewritten = crate::write::rewrite::write_all(writer, rows, Ok).await?;
    Ok(out)
}

/// [`write_deletes`] on a format v3 table: one deletion vector per data file, the positions
/// deleted before merged in (its old vector, or position delete files from before an upgrade),
/// all in one Puffin file; each old vector is removed in the same commit, so a data file never
/// has two (spec v3, "Deletion Vectors").
async fn write_vectors(table: &Table, matched: &[Matched]) -> Result<Deletes> {
    use crate::table::deletion_vector::DeletionVector;
    use crate::write::deletion_vectors::{write_deletion_vectors, VectorOf};
    let mut out = Deletes::default();
    let mut vectors = Vec::new();
    for m in matched {
        out.rows += m.positions.len() as u64;
        if m.all_live_rows() {
            // Its vector leaves with it (the producer removes the vector of a removed file).
            out.removed_data_files.push(m.path.clone());
            continue;
        }
        let before = m.deleted_before.iter().map(|&p| p as u64);
        let vector =
            DeletionVector::from_positions(before.chain(m.positions.iter().map(|&p| p as u64)));
        if let Some(puffin) = &m.vector {
            out.removed_vectors.push((puffin.clone(), m.path.clone()));
        }
        vectors.push(VectorOf {
            data_file: m.path.clone(),
            spec_id: m.spec_id,
            partition: m.partition.clone(),
            vector,
        });
    }
    for (f, spec) in write_deletion_vectors(table, vectors).await? {
        out.specs.insert(crate::commit::placement_key(&f), spec);
        out.delete_files.push(f);
    }
    Ok(out)
}

/// A committed row delta.
#[derive(Debug, Clone, Default)]
pub struct RowDelta {
    /// `None` when there was nothing to commit.
    pub snapshot_id: Option<i64>,
    pub attempts: u32,
    pub deletes: Deletes,
    /// What the attempt that landed read to find its rows.
    pub searched: Searched,
    /// The table as committed (`None` when nothing was).
    pub table: Option<Table>,
}

/// Commits `data` (written already, owned: deleted if the commit finally fails) with position
/// deletes for the rows `find` locates. Every attempt locates on the table it commits on,
/// except the first when `first` was located on `base` itself.
pub async fn commit_row_delta<F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Table,
    data: Vec<DataFile>,
    first: Option<(Vec<Matched>, Searched)>,
    find: F,
) -> Result<RowDelta>
where
    F: Fn(Table) -> Fut,
    Fut: Future<Output = Result<(Vec<Matched>, Searched)>>,
{
    let planned_on = base.metadata().current_snapshot_id();
    let data = Staged::new(data, base.metadata().current_schema_id());
    let committer = Committer::new(catalog, ident).on(base);
    let (summary, note) = (HashMap::new(), HashMap::new());
    row_delta(
        committer, planned_on, data, first, summary, note, None, find,
    )
    .await
}

/// A merge-on-read row delta (`floe delete`, which takes copy-on-write on its own path) with
/// `note` properties on the snapshot it commits (what the change depended on, as
/// `floe.delete.now`); unlike an ingest's summary, a note alone commits nothing.
pub async fn commit_row_delta_noting<F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    base: Table,
    data: Vec<DataFile>,
    first: Option<(Vec<Matched>, Searched)>,
    note: HashMap<String, String>,
    find: F,
) -> Result<RowDelta>
where
    F: Fn(Table) -> Fut,
    Fut: Future<Output = Result<(Vec<Matched>, Searched)>>,
{
    let planned_on = base.metadata().current_snapshot_id();
    // `data` was written on `base`, in its schema.
    let data = Staged::new(data, base.metadata().current_schema_id());
    let committer = Committer::new(catalog, ident).on(base);
    let merge_on_read = Some(mode::DeleteMode::MergeOnRead);
    let summary = HashMap::new();
    row_delta(
        committer,
        planned_on,
        data,
        first,
        summary,
        note,
        merge_on_read,
        find,
    )
    .await
}

/// [`commit_row_delta`] through a configured `committer` (its base, precondition), with
/// `summary` properties on the snapshot (an ingest's writer id and source positions: with
/// them, a snapshot is committed even when nothing else changes); `planned_on` is the
/// snapshot `first` was located on. An attempt on a table whose schema changed since `data`
/// was written commits its rows re-encoded in the new schema ([`Staged::on`]). Upserts and
/// CDC: each attempt writes in the mode the table it commits on asks for
/// ([`mode::upsert_mode`]).
pub async fn commit_row_delta_with<F, Fut>(
    committer: Committer<'_>,
    planned_on: Option<i64>,
    data: Staged,
    first: Option<(Vec<Matched>, Searched)>,
    summary: HashMap<String, String>,
    find: F,
) -> Result<RowDelta>
where
    F: Fn(Table) -> Fut,
    Fut: Future<Output = Result<(Vec<Matched>, Searched)>>,
{
    row_delta(
        committer,
        planned_on,
        data,
        first,
        summary,
        HashMap::new(),
        None,
        find,
    )
    .await
}

/// The row delta of every entry point: `fixed_mode`, or `None` for the upsert mode of the
/// table each attempt commits on.
#[allow(clippy::too_many_arguments)]
async fn row_delta<F, Fut>(
    committer: Committer<'_>,
    planned_on: Option<i64>,
    data: Staged,
    first: Option<(Vec<Matched>, Searched)>,
    summary: HashMap<String, String>,
    note: HashMap<String, String>,
    fixed_mode: Option<mode::DeleteMode>,
    find: F,
) -> Result<RowDelta>
where
    F: Fn(Table) -> Fut,
    Fut: Future<Output = Result<(Vec<Matched>, Searched)>>,
{
    let mut first = first;
    if let Some((m, _)) = &first {
        if m.is_empty() && data.files.is_empty() && summary.is_empty() {
            return Ok(RowDelta::default());
        }
    }
    let owned: Vec<String> = data.paths();
    // Each attempt's future owns what it uses (no borrow of this frame), so the whole
    // commit stays `Send` inside spawned tasks.
    let done = committer
        .owning(owned)
        .commit_with(move |t| {
            let reuse = first
                .take()
                .filter(|_| t.metadata().current_snapshot_id() == planned_on);
            let search = match reuse {
                Some(found) => Either::Left(futures::future::ready(Ok(found))),
                None => Either::Right(find(t.clone())),
            };
            let data = data.clone();
            let summary = summary.clone();
            let note = note.clone();
            async move {
                let (matched, searched) = search.await?;
                let written = data.on(&t, &WriteOptions::default()).await?;
                // Re-encoded files belong to this attempt; the staged ones are superseded.
                let converted = written.schema_id != data.schema_id;
                let mut attempt = Ledger::of(&t);
                if converted {
                    attempt.stage(written.paths());
                }
                let cow = match fixed_mode.map_or_else(|| mode::upsert_mode(&t), Ok) {
                    Ok(m) => m == mode::DeleteMode::CopyOnWrite,
                    Err(e) => {
                        attempt.discard().await;
                        return Err(e);
                    }
                };
                let written_deletes = if cow {
                    rewrite_matched(&t, &matched).await
                } else {
                    write_deletes(&t, &matched).await
                };
                let deletes = match written_deletes {
                    Ok(d) => d,
                    Err(e) => {
                        attempt.discard().await;
                        return Err(e);
                    }
                };
                let data = written;
                // The new rows and, copy-on-write, the changed files' kept rows.
                let mut added = data.files.clone();
                added.extend(deletes.rewritten.iter().cloned());
                // Summary properties (a stream's positions) are committed even alone; a
                // concurrent commit may have deleted the rows first: nothing to commit.
                if deletes.is_empty() && added.is_empty() && summary.is_empty() {
                    return Ok(Produced::nothing(None));
                }
                let update = if deletes.is_empty() {
                    SnapshotUpdate::append(added)
                } else if added.is_empty() {
                    SnapshotUpdate::delete(
                        &t,
                        deletes.removed_data_files.clone(),
                        deletes.delete_files.clone(),
                    )
                } else {
                    SnapshotUpdate::overwrite(
                        &t,
                        deletes.removed_data_files.clone(),
                        deletes.delete_files.clone(),
                        added,
                    )
                };
                let update = update
                    .removing_vectors(deletes.removed_vectors.clone())
                    .with_delete_specs(&deletes.specs)
                    .with_summary_properties(summary)
                    .with_summary_properties(note)
                    .written_in(data.schema_id);
                attempt.stage(deletes.written());
                let commit = prepare_with(&t, &update, attempt.keep()).await?;
                Ok(Produced::new(commit, Some((deletes, searched))).superseding_staged(converted))
            }
        })
        .await?;
    Ok(match done.plan {
        Some((deletes, searched)) if done.changed => RowDelta {
            snapshot_id: done.table.metadata().current_snapshot_id(),
            attempts: done.attempts,
            deletes,
            searched,
            table: Some(done.table),
        },
        _ => RowDelta::default(),
    })
}

/// Compile-time check: the futures of a row delta are `Send` (an ingest runs them inside
/// spawned tasks; a borrow held by a stream combinator or a closure breaks that silently).
#[cfg(test)]
#[allow(dead_code)]
fn send_check(
    c: Committer<'static>,
    keys: std::sync::Arc<crate::operations::change::keys::KeyIndex>,
    t: Table,
    m: Vec<Matched>,
) {
    fn is_send<T: Send>(_: T) {}
    is_send(write_deletes(&t, &m));
    is_send(crate::operations::change::keys::locate_keys(&t, &keys));
    is_send(commit_row_delta_with(
        c,
        None,
        Staged::new(vec![], 0),
        None,
        HashMap::new(),
        move |t| {
            let keys = keys.clone();
            async move { crate::operations::change::keys::locate_keys(&t, &keys).await }
        },
    ));
}
