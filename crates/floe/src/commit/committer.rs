//! [`Committer`]: the one public way to change a table.
//!
//! A commit is an attempt loop (Iceberg spec, "Commit Conflict Resolution and Retry"):
//!
//! ```text
//!  base (given, or loaded) ──> precondition? ──> produce(table) ──> Catalog CAS
//!        ^                                                             │
//!        └──── reload, backoff ◄──── conflict, budget left ◄───────────┤
//!                                                                      ├── landed: outcome
//!                                    outcome unknown: keep every file ◄┤
//!                  definite failure: delete the attempt's files and,   ┘
//!                  unless kept, the operation's own written files
//! ```
//!
//! Each attempt produces its commit against the table as it is *now*, so validation runs again
//! on every retry; the files an attempt wrote (manifests, manifest lists) are deleted when that
//! attempt loses. The files the operation wrote before committing (data and delete files) are
//! deleted when the commit finally fails, unless the caller keeps them
//! ([`Committer::keep_files_on_failure`]), and never when the outcome is unknown
//! ([`Error::CommitStateUnknown`]): they may be referenced by a commit that landed.
//!
//! A bad stored value of a property the commit path reads fails the commit before anything is
//! written, naming the table, the key and the repair command; except for property updates,
//! which must be able to repair such a table (they fall back to Iceberg's defaults).
//!
//! **One committer per table in a process.** Every attempt holds the table's process-wide
//! commit slot from the moment it picks its base until the catalog answers, so the commits one
//! process makes to one table (an ingest's data commits and the maintenance it runs beside
//! them) are serialized and never conflict with each other: an attempt starts from the
//! metadata the previous one committed. Conflicts come only from other processes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use iceberg::table::Table;
use iceberg::{TableIdent, TableUpdate};

use crate::catalog::Catalog;
use crate::commit::producer::{self, PreparedCommit};
use crate::commit::retry::{RetryPolicy, COMMIT_PATH_KEYS};
use crate::commit::SnapshotUpdate;
use crate::error::{Error, Result};
use crate::properties;
use crate::storage::delete::delete_quietly_in;
use crate::table::ident_string;

/// A check run against the table before every attempt (ingest's writer fence: nobody else
/// committed under this writer id). An error stops the commit; it is not retried.
pub type Precondition<'a> = Box<dyn Fn(&Table) -> Result<()> + Send + Sync + 'a>;

/// What one attempt produced: the commit for the catalog and the plan it was made from (the
/// plan of the attempt that landed is returned in [`Committed::plan`]).
#[derive(Debug)]
pub struct Produced<P> {
    pub commit: PreparedCommit,
    pub plan: P,
}

impl Produced<()> {
    /// A commit with no plan to return.
    pub fn commit(commit: PreparedCommit) -> Self {
        Self { commit, plan: () }
    }
}

/// A snapshot commit that landed.
#[derive(Debug, Clone)]
pub struct CommitOutcome {
    /// The table as committed.
    pub table: Table,
    /// The new snapshot.
    pub snapshot_id: i64,
    /// Attempts it took (1 without a conflict).
    pub attempts: u32,
}

/// A commit that landed, with the plan of the attempt that landed.
#[derive(Debug, Clone)]
pub struct Committed<P> {
    pub table: Table,
    pub attempts: u32,
    pub plan: P,
}

impl<P> Committed<P> {
    /// The landed snapshot commit, and the plan of the attempt that landed.
    pub fn into_outcome(self) -> (CommitOutcome, P) {
        let snapshot_id = self
            .table
            .metadata()
            .current_snapshot_id()
            .expect("a committed snapshot is current");
        let outcome = CommitOutcome {
            table: self.table,
            snapshot_id,
            attempts: self.attempts,
        };
        (outcome, self.plan)
    }
}

/// Commits to one table. Build it, set what the operation needs, then call
/// [`Committer::commit`] (a [`SnapshotUpdate`]) or [`Committer::commit_with`] (any metadata
/// change, produced per attempt).
pub struct Committer<'a> {
    catalog: &'a Catalog,
    ident: TableIdent,
    base: Option<Table>,
    precondition: Option<Precondition<'a>>,
    keep_files: bool,
    owned_files: Vec<String>,
    repairing: bool,
    persistent: bool,
}

/// A table's commit slot: held by one attempt at a time; holds the metadata location of the
/// last commit this process made to the table.
type Slot = Arc<tokio::sync::Mutex<Option<String>>>;

static SLOTS: LazyLock<Mutex<HashMap<String, Slot>>> = LazyLock::new(Default::default);

/// The commit slot of `ident` in `catalog` (one per catalog and table in this process).
fn slot(catalog: &Catalog, ident: &TableIdent) -> Slot {
    let key = format!("{catalog:?}|{}", ident_string(ident));
    SLOTS
        .lock()
        .expect("not poisoned")
        .entry(key)
        .or_default()
        .clone()
}

impl<'a> Committer<'a> {
    /// A commit to `ident` in `catalog`; the first attempt loads the table.
    pub fn new(catalog: &'a Catalog, ident: &TableIdent) -> Self {
        Self {
            catalog,
            ident: ident.clone(),
            base: None,
            precondition: None,
            keep_files: false,
            owned_files: vec![],
            repairing: false,
            persistent: false,
        }
    }

    /// Retries conflicts until `commit.retry.total-timeout-ms`, however many attempts that
    /// takes (`commit.retry.num-retries` does not apply): for an append, which always rebases,
    /// from a writer that must not fail because maintenance committed in between.
    pub fn retrying_conflicts(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// Builds the first attempt on `base` (a table the caller just loaded), saving a read;
    /// later attempts reload.
    pub fn on(mut self, base: Table) -> Self {
        self.base = Some(base);
        self
    }

    /// Checks `check` against the table before every attempt.
    pub fn with_precondition(
        mut self,
        check: impl Fn(&Table) -> Result<()> + Send + Sync + 'a,
    ) -> Self {
        self.precondition = Some(Box::new(check));
        self
    }

    /// Files the operation wrote for this commit (data, delete files), deleted when the commit
    /// finally fails. [`Committer::commit`] adds the update's own files.
    pub fn owning(mut self, paths: impl IntoIterator<Item = String>) -> Self {
        self.owned_files.extend(paths);
        self
    }

    /// Leaves the operation's files in place when the commit fails: the caller owns them
    /// (compaction retries groups one by one after a joint commit failed).
    pub fn keep_files_on_failure(mut self) -> Self {
        self.keep_files = true;
        self
    }

    /// A property update: must succeed on a table whose stored settings are bad (it is how
    /// such a table is repaired), so bad retry settings fall back to Iceberg's defaults.
    pub fn repairing(mut self) -> Self {
        self.repairing = true;
        self
    }

    /// Commits `update` (a new snapshot).
    pub async fn commit(self, update: SnapshotUpdate) -> Result<CommitOutcome> {
        let this = self.owning(update.added_paths());
        let update = &update;
        let done = this
            .commit_with(|table| async move {
                Ok(Produced::commit(producer::prepare(&table, update).await?))
            })
            .await?;
        Ok(done.into_outcome().0)
    }

    /// Commits metadata `updates` as they are, with no requirement (a property or ref change
    /// another engine could have made; floe's own validation is the caller's).
    pub async fn commit_updates(self, updates: Vec<TableUpdate>) -> Result<Table> {
        let done = self
            .commit_with(|_| {
                let updates = updates.clone();
                async move {
                    Ok(Produced::commit(PreparedCommit {
                        requirements: vec![],
                        updates,
                        written: vec![],
                    }))
                }
            })
            .await?;
        Ok(done.table)
    }

    /// Commits what `produce` makes of the table at each attempt.
    pub async fn commit_with<P, F, Fut>(self, produce: F) -> Result<Committed<P>>
    where
        F: FnMut(Table) -> Fut,
        Fut: Future<Output = Result<Produced<P>>>,
    {
        let Committer {
            catalog,
            ident,
            base,
            precondition,
            keep_files,
            owned_files,
            repairing,
            persistent,
        } = self;
        // Where the operation's files live, known without a read when a base was given.
        let home = base
            .as_ref()
            .map(|t| (t.file_io().clone(), t.metadata().location().to_string()));
        let result = attempt_loop(
            catalog,
            &ident,
            base,
            precondition,
            (repairing, persistent),
            produce,
        )
        .await;
        if let Err(e) = &result {
            let definite = !matches!(e, Error::CommitStateUnknown { .. });
            if definite && !keep_files && !owned_files.is_empty() {
                let home = match home {
                    Some(h) => Some(h),
                    None => catalog
                        .load_table(&ident)
                        .await
                        .ok()
                        .map(|t| (t.file_io().clone(), t.metadata().location().to_string())),
                };
                match home {
                    Some((file_io, location)) => {
                        delete_quietly_in(&file_io, &location, owned_files).await
                    }
                    None => tracing::warn!(
                        table = %ident_string(&ident),
                        "cannot reach the table to delete the files of a failed commit; they are orphans now"
                    ),
                }
            }
        }
        result
    }
}

async fn attempt_loop<P, F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    mut base: Option<Table>,
    precondition: Option<Precondition<'_>>,
    (repairing, persistent): (bool, bool),
    mut produce: F,
) -> Result<Committed<P>>
where
    F: FnMut(Table) -> Fut,
    Fut: Future<Output = Result<Produced<P>>>,
{
    let name = ident_string(ident);
    let started = Instant::now();
    let mut attempt: u32 = 0;
    let slot = slot(catalog, ident);
    loop {
        attempt += 1;
        let mut last_commit = slot.lock().await;
        // A given base older than this process's last commit to the table is reloaded, and so
        // is a read-only view (`table::current_state`), which is never committed on.
        let table = match base.take() {
            Some(t)
                if !t.readonly()
                    && last_commit
                        .as_deref()
                        .is_none_or(|l| t.metadata_location() == Some(l)) =>
            {
                t
            }
            _ => catalog.load_table(ident).await?,
        };
        let policy = if repairing {
            RetryPolicy::or_defaults(&name, table.metadata().properties())
        } else {
            properties::check_stored(
                Some(name.as_str()),
                table.metadata().properties(),
                &COMMIT_PATH_KEYS,
            )?;
            RetryPolicy::from_table(&table)?
        };
        if let Some(check) = &precondition {
            check(&table)?;
        }
        let file_io = table.file_io().clone();
        // Getters deep in the producers see only the property map: name the table here.
        let Produced { commit, plan } = produce(table.clone())
            .await
            .map_err(|e| e.for_table(&name))?;
        match catalog
            .commit(&table, &commit.requirements, commit.updates)
            .await
        {
            Ok(table) => {
                *last_commit = table.metadata_location().map(str::to_string);
                return Ok(Committed {
                    table,
                    attempts: attempt,
                    plan,
                });
            }
            // The outcome is unknown: the files may be referenced by a commit that landed.
            Err(e @ Error::CommitStateUnknown { .. }) => return Err(e),
            Err(e) => {
                drop(last_commit);
                delete_quietly_in(&file_io, table.metadata().location(), commit.written).await;
                let out_of_budget = (!persistent && u64::from(attempt) > policy.num_retries)
                    || started.elapsed() >= policy.total_timeout;
                match e {
                    Error::CommitConflict { reason, .. } if !out_of_budget => {
                        let wait = policy.backoff(attempt);
                        tracing::info!(table = %name, attempt, ?wait, %reason, "commit conflict, retrying");
                        tokio::time::sleep(wait).await;
                    }
                    Error::CommitConflict { reason, .. } => {
                        return Err(Error::CommitConflict {
                            table: name,
                            attempts: attempt,
                            reason,
                        });
                    }
                    other => return Err(other.for_table(&name)),
                }
            }
        }
    }
}
