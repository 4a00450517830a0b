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
//!                  definite failure: delete the attempt's files and    ┘
//!                  settle the operation's ledger (discard, or hand back on a conflict)
//! ```
//!
//! Each attempt produces its commit against the table as it is *now*, so validation runs again
//! on every retry; the files an attempt wrote (manifests, manifest lists) are deleted when that
//! attempt loses. The files the operation wrote before committing (data and delete files) are
//! in its [`Ledger`], which the committer settles once: kept when the commit lands or its
//! outcome is unknown ([`Error::CommitStateUnknown`]: a commit that landed may reference
//! them), handed back on a conflict to a caller that lent the ledger
//! ([`Committer::lending`]), deleted on any other failure unless the caller keeps them
//! ([`Committer::keep_files_on_failure`]). An attempt may also find nothing to commit
//! ([`Produced::nothing`]): the commit ends unchanged and the staged files are deleted.
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
use iceberg::TableIdent;

use crate::base::error::{Error, Result};
use crate::base::properties;
use crate::catalog::Catalog;
use crate::commit::producer::{self, PreparedCommit};
use crate::commit::retry::{RetryPolicy, COMMIT_PATH_KEYS};
use crate::commit::{Ledger, SnapshotUpdate};
use crate::table::ident_string;

/// A check run against the table before every attempt (ingest's writer fence: nobody else
/// committed under this writer id). An error stops the commit; it is not retried.
pub type Precondition<'a> = Box<dyn Fn(&Table) -> Result<()> + Send + Sync + 'a>;

/// What one attempt of an action produced: a commit for the catalog (or nothing to commit:
/// a concurrent commit already did the work) and the plan it was made from (the plan of the
/// attempt that ended the commit is returned in [`Committed::plan`]).
#[derive(Debug)]
pub struct Produced<P> {
    /// `None`: nothing to commit on this table; the commit ends without a change.
    pub commit: Option<PreparedCommit>,
    pub plan: P,
    /// The commit holds new files in place of the operation's staged ones (rows re-encoded in
    /// a new schema): once it lands, the staged files are discarded, not kept.
    pub supersedes_staged: bool,
}

impl<P> Produced<P> {
    /// A commit, with its plan.
    pub fn new(commit: PreparedCommit, plan: P) -> Self {
        Self {
            commit: Some(commit),
            plan,
            supersedes_staged: false,
        }
    }

    /// Nothing to commit (the operation's staged files are discarded).
    pub fn nothing(plan: P) -> Self {
        Self {
            commit: None,
            plan,
            supersedes_staged: false,
        }
    }

    /// Marks the commit as holding replacements of the operation's staged files.
    pub fn superseding_staged(mut self, supersedes: bool) -> Self {
        self.supersedes_staged = supersedes;
        self
    }
}

impl Produced<()> {
    /// A commit with no plan to return.
    pub fn commit(commit: PreparedCommit) -> Self {
        Self::new(commit, ())
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

/// A commit that ended: landed (`changed`), or found nothing to commit; with the plan of the
/// attempt that ended it.
#[derive(Debug, Clone)]
pub struct Committed<P> {
    /// The table as committed (as read, when nothing was committed).
    pub table: Table,
    pub attempts: u32,
    pub plan: P,
    /// False when the last attempt had nothing to commit ([`Produced::nothing`]).
    pub changed: bool,
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
/// [`Committer::commit`] (a snapshot action, [`SnapshotUpdate`]) or [`Committer::commit_with`]
/// (any action, produced per attempt).
pub struct Committer<'a> {
    catalog: &'a Catalog,
    ident: TableIdent,
    base: Option<Table>,
    precondition: Option<Precondition<'a>>,
    keep_files: bool,
    /// The operation's staged files, settled by the outcome ([`Ledger`]).
    ledger: Ledger,
    /// A caller's ledger: its files join the commit and come back to it on a conflict.
    lent: Option<&'a mut Ledger>,
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
            ledger: Ledger::default(),
            lent: None,
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

    /// Files the operation wrote for this commit (data, delete files): the committer owns them
    /// and settles them by the outcome (kept when it lands or the outcome is unknown, deleted
    /// otherwise). [`Committer::commit`] stages the update's own files.
    pub fn owning(mut self, paths: impl IntoIterator<Item = String>) -> Self {
        self.ledger.stage(paths);
        self
    }

    /// Commits the files of the caller's `ledger`, settled like [`Committer::owning`] except on
    /// a conflict ([`Error::ValidationFailed`]): then they are handed back in `ledger`, for the
    /// caller to commit part of them again (compaction, group by group). The ledger is empty
    /// after any other outcome.
    pub fn lending(mut self, ledger: &'a mut Ledger) -> Self {
        self.lent = Some(ledger);
        self
    }

    /// Leaves the operation's files in place when the commit fails: another process commits
    /// them later (a group coordinator's hand-offs).
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

    /// Commits `update` (a new snapshot: a named snapshot action of [`crate::commit::action`]).
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

    /// Commits what `produce` makes of the table at each attempt (an action that plans per
    /// attempt: row deltas, expiry, metadata changes).
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
            mut ledger,
            lent,
            repairing,
            persistent,
        } = self;
        let mut lent = lent;
        if let Some(l) = lent.as_deref_mut() {
            ledger.absorb(l);
        }
        if let Some(t) = &base {
            ledger.locate(t);
        }
        let result = attempt_loop(
            catalog,
            &ident,
            base,
            precondition,
            (repairing, persistent),
            &mut ledger,
            produce,
        )
        .await;
        match &result {
            Ok((_, true)) => {
                // The commit holds re-encoded copies: the staged originals are referenced by
                // nothing.
                ledger.discard().await;
            }
            Ok((done, false)) if done.changed => {
                ledger.keep();
            }
            // Nothing to commit: the staged files are referenced by nothing.
            Ok(_) => ledger.discard().await,
            // The outcome is unknown: the files may be referenced by a commit that landed.
            Err(Error::CommitStateUnknown { .. }) => {
                ledger.keep();
            }
            Err(Error::ValidationFailed { .. }) if lent.is_some() => {
                if let Some(l) = lent {
                    l.absorb(&mut ledger);
                }
            }
            Err(_) if keep_files => {
                ledger.keep();
            }
            Err(_) => {
                if !ledger.is_empty() && !ledger.has_home() {
                    if let Ok(t) = catalog.load_table(&ident).await {
                        ledger.locate(&t);
                    }
                }
                ledger.discard().await;
            }
        }
        result.map(|(done, _)| done)
    }
}

async fn attempt_loop<P, F, Fut>(
    catalog: &Catalog,
    ident: &TableIdent,
    mut base: Option<Table>,
    precondition: Option<Precondition<'_>>,
    (repairing, persistent): (bool, bool),
    ledger: &mut Ledger,
    mut produce: F,
) -> Result<(Committed<P>, bool)>
where
    F: FnMut(Table) -> Fut,
    Fut: Future<Output = Result<Produced<P>>>,
{
    let name = ident_string(ident);
    let started = Instant::now();
    let mut attempt: u32 = 0;
    let slot = slot(catalog, ident);
    // A base that is a table's head (an append's, `Catalog::load_table_head`) is reloaded as one.
    let heads = base
        .as_ref()
        .is_some_and(|t| crate::table::metadata_json::is_head(t.metadata()));
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
            _ if heads => catalog.load_table_head(ident).await?,
            _ => catalog.load_table_kept(ident).await?,
        };
        ledger.locate(&table);
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
        // Getters deep in the producers see only the property map: name the table here.
        let Produced {
            commit,
            plan,
            supersedes_staged,
        } = produce(table.clone())
            .await
            .map_err(|e| e.for_table(&name))?;
        let Some(commit) = commit else {
            let done = Committed {
                table,
                attempts: attempt,
                plan,
                changed: false,
            };
            return Ok((done, false));
        };
        // The files this attempt wrote (manifests, manifest lists, re-encoded data).
        let mut written = Ledger::of(&table).with(commit.written);
        match catalog
            .commit(&table, &commit.requirements, commit.updates)
            .await
        {
            Ok(table) => {
                *last_commit = table.metadata_location().map(str::to_string);
                written.keep();
                let done = Committed {
                    table,
                    attempts: attempt,
                    plan,
                    changed: true,
                };
                return Ok((done, supersedes_staged));
            }
            // The outcome is unknown: the files may be referenced by a commit that landed.
            Err(e @ Error::CommitStateUnknown { .. }) => {
                written.keep();
                return Err(e);
            }
            Err(e) => {
                drop(last_commit);
                written.discard().await;
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
