//! Data files written for a commit that has not landed yet, with the schema they were written in.
//!
//! A commit attempt runs on the table as it is *now*; another engine may have changed the schema
//! since the files were written (`evolve-schema`, PyIceberg's `update_schema()`). Files are
//! committed only in the schema they are committed against ([`crate::commit::SnapshotUpdate::written_in`]),
//! so an attempt on a table whose schema moved re-encodes them first ([`Staged::on`]): each file's
//! rows are read back by field id and written in the current schema and default spec (a dropped
//! column's values go, an added column is null, a widened type is cast). The re-encoded files
//! belong to that attempt (deleted if it loses); the originals stay in the operation's ledger
//! ([`crate::commit::Ledger`]) until one attempt lands, and are deleted then
//! ([`crate::commit::Produced::superseding_staged`]): no commit references them.

use std::collections::HashMap;

use futures::TryStreamExt;
use iceberg::spec::DataFile;
use iceberg::table::Table;

use crate::base::error::Result;
use crate::commit::{producer, CommitOutcome, Committer, Produced, SnapshotUpdate};
use crate::write::{TableWriter, WriteOptions};

/// Data files of one commit and the id of the schema they were written in.
#[derive(Debug, Clone)]
pub struct Staged {
    pub files: Vec<DataFile>,
    pub schema_id: i32,
}

impl Staged {
    /// Files written by a writer in schema `schema_id` ([`TableWriter::schema_id`]).
    pub fn new(files: Vec<DataFile>, schema_id: i32) -> Self {
        Self { files, schema_id }
    }

    /// Their paths.
    pub fn paths(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|f| f.file_path().to_string())
            .collect()
    }

    /// True when `table`'s current schema is the one these files were written in.
    fn fits(&self, table: &Table) -> bool {
        self.files.is_empty() || table.metadata().current_schema_id() == self.schema_id
    }

    /// The files to commit on `table`: these when they fit its schema, otherwise new files with
    /// the same rows in its current schema (the caller deletes them if the attempt loses).
    pub async fn on(&self, table: &Table, options: &WriteOptions) -> Result<Staged> {
        if self.fits(table) {
            return Ok(self.clone());
        }
        let schema = table.metadata().current_schema();
        let ids: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
        let mut writer = TableWriter::new(table, options).await?;
        let schema_id = writer.schema_id();
        for f in &self.files {
            let read = async {
                let mut rows = crate::table::read_file_columns(
                    table,
                    f.file_path(),
                    f.file_size_in_bytes(),
                    ids.clone(),
                )?;
                while let Some(batch) = rows.try_next().await? {
                    writer.write(batch).await?;
                }
                Ok::<_, crate::base::error::Error>(())
            };
            if let Err(e) = read.await {
                writer.abort().await;
                return Err(e);
            }
        }
        let files = writer.close().await?;
        tracing::info!(
            table = %crate::table::ident_string(table.identifier()),
            from = self.schema_id,
            to = schema_id,
            files = files.len(),
            "the schema changed before the commit: rows re-encoded by field id"
        );
        Ok(Staged { files, schema_id })
    }
}

/// Commits `staged` as an append through `committer`, with `summary` properties: an attempt on
/// a table whose schema moved commits the rows re-encoded in it ([`Staged::on`]). The
/// committer's ledger holds the staged files: kept when the commit lands as they are or its
/// outcome is unknown, deleted when it fails or lands re-encoded (no commit holds them).
pub async fn commit_append(
    committer: Committer<'_>,
    staged: Staged,
    summary: HashMap<String, String>,
    options: &WriteOptions,
) -> Result<CommitOutcome> {
    let done = committer
        .owning(staged.paths())
        .commit_with(|t| {
            let (staged, summary, options) = (staged.clone(), summary.clone(), options.clone());
            async move {
                let files = staged.on(&t, &options).await?;
                let update = SnapshotUpdate::append(files.files.clone())
                    .written_in(files.schema_id)
                    .with_summary_properties(summary);
                // Re-encoded files belong to this attempt.
                let converted = files.schema_id != staged.schema_id;
                let own = if converted { files.paths() } else { vec![] };
                let commit = producer::prepare_with(&t, &update, own).await?;
                Ok(Produced::new(commit, ()).superseding_staged(converted))
            }
        })
        .await?;
    Ok(done.into_outcome().0)
}
