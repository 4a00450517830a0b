//! [`Ledger`]: the files an operation wrote for a commit that has not landed yet, and the one
//! place they are deleted from when it will not land.
//!
//! An operation registers every file it writes for a commit (data, delete, re-encoded files)
//! in a ledger and hands it to the [`crate::commit::Committer`], which settles it by the
//! commit's outcome:
//!
//! ```text
//!  landed ─────────────────────────> kept (the table references them)
//!  outcome unknown ────────────────> kept (a commit that landed may reference them)
//!  conflict (validation failed) ───> handed back to a lending caller (compaction retries
//!                                    group by group), discarded otherwise
//!  any other failure ──────────────> discarded
//! ```
//!
//! A ledger also settles the files of work that failed before any commit (a writer that
//! failed half-way, a group whose rewrite failed): [`Ledger::discard`]. Deletion goes through
//! the table's fence (`crate::storage::delete`): nothing outside the table location.

use iceberg::io::FileIO;
use iceberg::spec::DataFile;
use iceberg::table::Table;

use crate::storage::delete::delete_quietly_in;

/// Files written for a commit that has not landed, and where their table lives.
#[derive(Debug, Default)]
pub struct Ledger {
    /// The table's FileIO and location (the fence deletions stay inside); the committer fills
    /// it from the table it commits on when the ledger was made without one.
    home: Option<(FileIO, String)>,
    paths: Vec<String>,
}

impl Ledger {
    /// An empty ledger for files of `table`.
    pub fn of(table: &Table) -> Self {
        Self::at(table.file_io().clone(), table.metadata().location())
    }

    /// An empty ledger for files of the table at `location`.
    pub fn at(file_io: FileIO, location: &str) -> Self {
        Self {
            home: Some((file_io, location.to_string())),
            paths: vec![],
        }
    }

    /// Registers written files.
    pub fn stage(&mut self, paths: impl IntoIterator<Item = String>) {
        self.paths.extend(paths);
    }

    /// Registers written data or delete files.
    pub fn stage_files<'f>(&mut self, files: impl IntoIterator<Item = &'f DataFile>) {
        self.stage(files.into_iter().map(|f| f.file_path().to_string()));
    }

    /// `self` with `paths` registered.
    pub fn with(mut self, paths: impl IntoIterator<Item = String>) -> Self {
        self.stage(paths);
        self
    }

    /// The registered files.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Moves `paths` (those registered here) into a ledger of their own, with the same home:
    /// one part of the work committed on its own.
    pub fn split_off(&mut self, paths: &[String]) -> Ledger {
        let wanted: std::collections::HashSet<&str> = paths.iter().map(String::as_str).collect();
        let (taken, left) = std::mem::take(&mut self.paths)
            .into_iter()
            .partition(|p| wanted.contains(p.as_str()));
        self.paths = left;
        Ledger {
            home: self.home.clone(),
            paths: taken,
        }
    }

    /// Moves every file of `other` into this ledger.
    pub fn absorb(&mut self, other: &mut Ledger) {
        if self.home.is_none() {
            self.home = other.home.take();
        }
        self.paths.append(&mut other.paths);
    }

    /// Sets the home from `table` when the ledger has none.
    pub(crate) fn locate(&mut self, table: &Table) {
        if self.home.is_none() {
            self.home = Some((
                table.file_io().clone(),
                table.metadata().location().to_string(),
            ));
        }
    }

    pub(crate) fn has_home(&self) -> bool {
        self.home.is_some()
    }

    /// Forgets the files without deleting them: a commit references them (or may).
    pub fn keep(&mut self) -> Vec<String> {
        std::mem::take(&mut self.paths)
    }

    /// Deletes the files (quietly: they are unreferenced by construction; a failure is logged
    /// and leaves orphans) and empties the ledger.
    pub async fn discard(&mut self) {
        let paths = std::mem::take(&mut self.paths);
        if paths.is_empty() {
            return;
        }
        match &self.home {
            Some((file_io, location)) => delete_quietly_in(file_io, location, paths).await,
            None => tracing::warn!(
                files = paths.len(),
                "cannot reach the table to delete the files of a failed commit; they are orphans now"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ledger;

    fn local(dir: &std::path::Path) -> (iceberg::io::FileIO, String) {
        let io = iceberg::io::FileIO::new_with_fs();
        (io, format!("file://{}", dir.display()))
    }

    fn touch(dir: &std::path::Path, name: &str) -> String {
        let p = dir.join("data").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"x").unwrap();
        format!("file://{}", p.display())
    }

    fn exists(path: &str) -> bool {
        std::path::Path::new(path.trim_start_matches("file://")).exists()
    }

    #[tokio::test]
    async fn discard_deletes_inside_the_table_only_and_empties() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let (io, location) = local(dir.path());
        let (a, b) = (
            touch(dir.path(), "a.parquet"),
            touch(dir.path(), "b.parquet"),
        );
        let outside = touch(other.path(), "c.parquet");
        let mut ledger = Ledger::at(io, &location).with([a.clone(), b.clone(), outside.clone()]);
        ledger.discard().await;
        assert!(ledger.is_empty());
        assert!(!exists(&a) && !exists(&b));
        assert!(exists(&outside), "the table's fence applies");
    }

    #[tokio::test]
    async fn keep_forgets_and_split_off_moves_files() {
        let dir = tempfile::tempdir().unwrap();
        let (io, location) = local(dir.path());
        let (a, b) = (
            touch(dir.path(), "a.parquet"),
            touch(dir.path(), "b.parquet"),
        );
        let mut all = Ledger::at(io, &location).with([a.clone(), b.clone()]);
        let mut part = all.split_off(std::slice::from_ref(&b));
        assert_eq!(all.paths(), std::slice::from_ref(&a));
        assert_eq!(part.paths(), std::slice::from_ref(&b));
        part.discard().await;
        assert!(!exists(&b));
        assert_eq!(all.keep(), vec![a.clone()]);
        all.discard().await;
        assert!(exists(&a), "kept files are never deleted");
    }

    #[tokio::test]
    async fn a_ledger_without_a_home_deletes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = touch(dir.path(), "a.parquet");
        let mut ledger = Ledger::default().with([a.clone()]);
        ledger.discard().await;
        assert!(ledger.is_empty());
        assert!(exists(&a));
    }
}
