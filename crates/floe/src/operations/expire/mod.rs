//! `expire-snapshots`: drop old snapshots from table metadata, then delete the files only they
//! reached.
//!
//! Retention follows the Iceberg spec v2 ("Snapshot Retention Policy") with Java's
//! `ExpireSnapshots` semantics:
//! - a branch or tag other than `main` older than its `max-ref-age-ms` (default
//!   `history.expire.max-ref-age-ms`, unset = forever) is removed;
//! - each remaining branch keeps its ancestors while fewer than `min-snapshots-to-keep` are kept
//!   or they are newer than `max-snapshot-age-ms` (ref settings first, then `--retain-last` /
//!   `--older-than`, then `history.expire.*`); a tag keeps its snapshot;
//! - snapshots on no ref are kept while newer than the age limit;
//! - floe's own rule: the newest snapshot of every streaming writer (its watermark, see
//!   [`crate::table::watermarks`]) is always kept, so a restarting writer finds its recovery
//!   point; and for a writer that committed within `floe.expire.writer-max-age` (7 d), so is
//!   every snapshot from each branch head down to it, since Flink's and Kafka Connect's
//!   committers find it by walking parent ids and stop at the first missing one. The plan
//!   lists every such chain, and why one is not kept ([`Chain`]).
//!
//! File cleanup is reachability-based and a separate step after the metadata commit: files
//! reached by expired snapshots minus files reached by everything the freshly reloaded table
//! still holds. Every manifest list and manifest of the table is read *before* the commit, so
//! an unreadable one aborts with nothing changed (never a committed expiry whose files cannot
//! be found). Deletes obey the table's fence ([`crate::storage::fence`]): never outside the table
//! location (unless [`ExpireBuilder::delete_external_files`]), never inside another table's
//! location or the catalog's files; what was kept is reported. A crash between the two steps
//! leaves only unreferenced files, which `remove-orphan-files` proves and removes.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::base::properties;
use crate::catalog::{ident_string, refs, Catalog};
use crate::commit::{action, Committer, Produced};
use crate::operations::clean::check_gc_enabled;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::storage::delete::{delete_files, DeleteStats};
use crate::storage::fence::{Fence, KeptFiles};
use crate::table::reach::{metadata_files, reachable_from_table, FileKind, ReachIndex};
use crate::table::watermarks::watermarks;

mod older_than;
mod retention;
pub use older_than::OlderThan;
pub use retention::{plan, Chain, ExpirePlan, Protected, Retention, SnapshotInfo};

/// Files deleted (or, in a dry run, to delete) of one kind.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KindCount {
    pub kind: &'static str,
    pub files: u64,
    pub bytes: u64,
}

/// What `expire-snapshots` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExpireMetrics {
    pub table: String,
    pub dry_run: bool,
    pub older_than_ms: Option<i64>,
    pub retain_last: u64,
    #[serde(flatten)]
    pub plan: ExpirePlan,
    /// Unreachable files by kind (deleted, or to delete in a dry run).
    pub files: Vec<KindCount>,
    pub deleted: DeleteStats,
    /// Unreachable files kept because they lie outside the table location.
    pub kept_outside_location: u64,
    /// Every unreachable file kept by the table's fence, by reason, with a sample.
    pub kept: KeptFiles,
    pub duration_ms: u64,
}

impl Costed for ExpireMetrics {
    /// The files the expired snapshots alone held (deleted, or to delete in a dry run); the
    /// metadata commit itself writes one metadata file.
    fn cost(&self) -> Cost {
        Cost {
            files_to_delete: self.files.iter().map(|k| k.files).sum(),
            bytes_to_delete: self.files.iter().map(|k| k.bytes).sum(),
            ..Cost::default()
        }
    }
}

/// Builds and runs an expiry.
#[derive(Clone)]
pub struct ExpireBuilder {
    ctx: Ctx,
    older_than: Option<OlderThan>,
    retain_last: Option<u64>,
    max_snapshots: Option<u64>,
    snapshot_ids: Vec<i64>,
    clean_files: bool,
    delete_external: bool,
}

impl ExpireBuilder {
    /// Expiry of `ident` with the table's `history.expire.*` settings.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            older_than: None,
            retain_last: None,
            max_snapshots: None,
            snapshot_ids: vec![],
            clean_files: true,
            delete_external: false,
        }
    }

    /// Expire snapshots older than `age` (default `history.expire.max-snapshot-age-ms`, 5 d).
    pub fn with_older_than_age(mut self, age: Duration) -> Self {
        self.older_than = Some(OlderThan::Age(age));
        self
    }

    /// Expire snapshots committed before `timestamp_ms` (epoch milliseconds), as Spark's
    /// `expire_snapshots(older_than => TIMESTAMP '...')`. A time in the future expires
    /// everything the other rules do not keep, as an age of zero does.
    pub fn with_older_than_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.older_than = Some(OlderThan::TimestampMs(timestamp_ms));
        self
    }

    /// Either form of the age limit ([`OlderThan::parse`] reads both from one flag).
    pub fn with_older_than(mut self, limit: OlderThan) -> Self {
        self.older_than = Some(limit);
        self
    }

    /// Keep at least `n` snapshots per branch (default `history.expire.min-snapshots-to-keep`).
    pub fn with_retain_last(mut self, n: u64) -> Self {
        self.retain_last = Some(n);
        self
    }

    /// Keeps at most `n` snapshots per branch however young they are (never fewer than
    /// `retain_last`; ref heads and writer watermarks always stay): bounded history for a
    /// table that commits every few seconds. `0` refused.
    pub fn with_max_snapshots(mut self, n: u64) -> Self {
        self.max_snapshots = Some(n);
        self
    }

    /// Expire exactly these snapshots (plus age-based expiry only if `older_than` is also set).
    pub fn with_snapshot_ids(mut self, ids: Vec<i64>) -> Self {
        self.snapshot_ids = ids;
        self
    }

    /// Whether to delete the files expiry unreferences (default true; false leaves them to
    /// `remove-orphan-files`).
    pub fn with_clean_files(mut self, yes: bool) -> Self {
        self.clean_files = yes;
        self
    }

    /// Also delete unreachable files outside the table location (for example files added with
    /// `add_files`); by default they are kept and listed. Never files inside another table's
    /// location or the catalog's.
    pub fn with_delete_external_files(mut self, yes: bool) -> Self {
        self.delete_external = yes;
        self
    }

    /// Receives delete progress.
    pub fn with_progress(
        mut self,
        f: impl Fn(&crate::base::cost::Progress) + Send + Sync + 'static,
    ) -> Self {
        self.ctx.progress = Some(std::sync::Arc::new(f));
        self
    }

    fn retention(&self, table: &Table, now_ms: i64) -> Result<Retention> {
        let p = table.metadata().properties();
        let min_keep = match self.retain_last {
            Some(0) => {
                return Err(Error::invalid_option(
                    "retain-last",
                    0,
                    "must be at least 1: the current snapshot is never expired",
                ))
            }
            Some(n) => n,
            None => properties::table_u64_prop(
                table,
                properties::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key,
                properties::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP_DEFAULT,
            )?,
        };
        if self.max_snapshots == Some(0) {
            return Err(Error::invalid_option(
                "max-snapshots",
                0,
                "must be at least 1: the current snapshot is never expired",
            ));
        }
        let older_than_ms = match self.older_than {
            Some(limit) => limit.cutoff_ms(now_ms),
            None => now_ms.saturating_sub(properties::table_u64_prop(
                table,
                properties::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key,
                properties::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS_DEFAULT,
            )? as i64),
        };
        let max_ref_age_ms = match p.get(properties::HISTORY_EXPIRE_MAX_REF_AGE_MS.key) {
            Some(_) => Some(properties::table_u64_prop(
                table,
                properties::HISTORY_EXPIRE_MAX_REF_AGE_MS.key,
                0,
            )? as i64),
            None => None,
        };
        let writer_chain_max_age_ms = properties::duration_prop(
            p,
            properties::EXPIRE_WRITER_MAX_AGE.key,
            properties::EXPIRE_WRITER_MAX_AGE_DEFAULT_MS,
            0,
        )? as i64;
        Ok(Retention {
            writer_chain_max_age_ms: Some(writer_chain_max_age_ms),
            older_than_ms,
            min_snapshots_to_keep: min_keep,
            max_ref_age_ms,
            by_age: self.snapshot_ids.is_empty() || self.older_than.is_some(),
            max_snapshots: self.max_snapshots,
        })
    }

    /// What this expiry would decide on `table` now, without changing anything.
    pub fn preview(&self, table: &Table) -> Result<ExpirePlan> {
        Ok(self.plan_for(table, self.ctx.now_ms())?.0)
    }

    fn plan_for(&self, table: &Table, now_ms: i64) -> Result<(ExpirePlan, Retention)> {
        let md = table.metadata();
        let snapshots: Vec<SnapshotInfo> = md
            .snapshots()
            .map(|s| SnapshotInfo {
                id: s.snapshot_id(),
                parent: s.parent_snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
            })
            .collect();
        let retention = self.retention(table, now_ms)?;
        let p = plan(
            &snapshots,
            &refs(md)?,
            &watermarks(md),
            &self.snapshot_ids,
            &retention,
            now_ms,
        )?;
        // Whatever the refs say, the current snapshot is the table: never expired.
        if let Some(current) = md
            .current_snapshot_id()
            .filter(|c| p.expired_snapshots.contains(c))
        {
            return Err(Error::Refused {
                operation: format!("expire snapshots of '{}'", ident_string(&self.ctx.ident)),
                reason: format!("snapshot {current} would expire, and it is the current one"),
            });
        }
        Ok((p, retention))
    }
}

/// What an expiry's `apply` needs beyond the report: the table it planned on, the retention
/// it applied at that instant, and every manifest of that table, read once.
pub struct ExpireWork {
    table: Table,
    now_ms: i64,
    index: Option<ReachIndex>,
    planning: std::time::Duration,
}

impl std::fmt::Debug for ExpireWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpireWork")
            .field("now_ms", &self.now_ms)
            .finish()
    }
}

/// An expiry's plan: the dry-run report (snapshots and refs to expire, the files only they
/// reach, by kind) and what it was read from.
pub type ExpireRun = Planned<ExpireMetrics, ExpireWork>;

impl Operation for ExpireBuilder {
    type Plan = ExpireRun;
    type Metrics = ExpireMetrics;

    /// Decides the snapshots and refs to expire and the files only they reach, changing
    /// nothing.
    async fn plan(&self) -> Result<ExpireRun> {
        let started = Instant::now();
        let now_ms = self.ctx.now_ms();
        let table = self.ctx.load().await?;
        let (plan, retention) = self.plan_for(&table, now_ms)?;
        let index = if plan.expired_snapshots.is_empty() {
            None
        } else {
            Some(ReachIndex::load(&table, &all_snapshot_ids(&table)).await?)
        };
        let mut report = ExpireMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            older_than_ms: retention.by_age.then_some(retention.older_than_ms),
            retain_last: retention.min_snapshots_to_keep,
            plan,
            files: vec![],
            deleted: DeleteStats::default(),
            kept_outside_location: 0,
            kept: KeptFiles::default(),
            duration_ms: 0,
        };
        if let Some(index) = &index {
            let kept_ids: Vec<i64> = all_snapshot_ids(&table)
                .into_iter()
                .filter(|id| !report.plan.expired_snapshots.contains(id))
                .collect();
            let mut still = index.reachable(&kept_ids);
            still.extend(metadata_files(&table));
            let gone = index.reachable(&report.plan.expired_snapshots);
            let fence = self.fence(&table).await?;
            let (files, _, kept) = doomed(&table, &fence, gone.minus(&still)).await;
            report.files = files;
            report.kept_outside_location = kept.outside_location;
            report.kept = kept;
        }
        report.duration_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            report,
            snapshot_id,
            ExpireWork {
                table,
                now_ms,
                index,
                planning: started.elapsed(),
            },
        ))
    }

    /// Commits the expiry (each attempt plans again against the table it commits on, at the
    /// planned instant, reusing the manifests already read), then deletes the files only the
    /// expired snapshots reached, checked against freshly reloaded metadata.
    async fn apply(self, planned: ExpireRun) -> Result<ExpireMetrics> {
        let started = Instant::now();
        let ExpireWork {
            table,
            now_ms,
            index,
            planning,
        } = planned.work;
        let mut report = planned.report;
        report.dry_run = false;
        report.files = vec![];
        report.kept = KeptFiles::default();
        report.kept_outside_location = 0;
        if self.clean_files {
            check_gc_enabled(&table, "delete expired files")?;
        }
        let (plan, base, index) = if report.plan.expired_snapshots.is_empty()
            && report.plan.expired_refs.is_empty()
        {
            (report.plan.clone(), table, None)
        } else {
            let this = &self;
            // Each attempt plans against the table it commits on; the plan of the attempt
            // that landed comes back with the outcome. The manifests read for the cleanup are
            // kept across attempts (the plan's first): a retry reads only what the commits it
            // lost to added, so it is fast enough to land between a streaming writer's commits.
            let shared: tokio::sync::Mutex<Option<ReachIndex>> =
                tokio::sync::Mutex::new(index.filter(|_| self.clean_files));
            let shared = &shared;
            let committed = Committer::new(&self.ctx.catalog, &self.ctx.ident)
                .on(table)
                .commit_with(|t| async move {
                    let (p, _) = this.plan_for(&t, now_ms)?;
                    // Read everything the cleanup needs before committing: an unreadable
                    // manifest list or manifest aborts here, with the metadata unchanged.
                    if this.clean_files && !p.expired_snapshots.is_empty() {
                        let mut index = shared.lock().await;
                        let index = index.get_or_insert_with(ReachIndex::default);
                        index.extend_to(&t, &all_snapshot_ids(&t)).await?;
                    }
                    Ok(Produced::new(
                        action::expire::expire(t.metadata(), &p.expired_refs, &p.expired_snapshots),
                        (p, t),
                    ))
                })
                .await?;
            let (p, t) = committed.plan;
            let index = shared.lock().await.take();
            (p, t, index)
        };
        report.plan = plan;

        // Files only the expired snapshots reached.
        if let Some(index) =
            index.filter(|_| self.clean_files && !report.plan.expired_snapshots.is_empty())
        {
            let gone = index.reachable(&report.plan.expired_snapshots);
            // Fresh metadata, right before deleting: includes anything committed since.
            let fresh = self.ctx.load().await?;
            let still = reachable_from_table(&fresh).await?;
            let fence = self.fence(&base).await?;
            let (files, doomed, kept) = doomed(&base, &fence, gone.minus(&still)).await;
            report.files = files;
            report.kept_outside_location = kept.outside_location;
            report.kept = kept;
            report.deleted =
                delete_files(base.file_io(), &fence, doomed, self.ctx.progress.clone()).await;
        }
        report.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(report)
    }
}

impl ExpireBuilder {
    /// The delete fence of `base`, with this expiry's rule for files outside its location.
    async fn fence(&self, base: &Table) -> Result<Fence> {
        Ok(Fence::for_table(&self.ctx.catalog, base)
            .await?
            .allow_external(self.delete_external))
    }
}

/// The `unreachable` files `fence` lets go, counted by kind, and what it kept.
async fn doomed(
    base: &Table,
    fence: &Fence,
    unreachable: Vec<(String, crate::table::reach::Reached)>,
) -> (Vec<KindCount>, Vec<String>, KeptFiles) {
    let (allowed, kept) = fence.partition(unreachable.iter().map(|(p, _)| p.clone()));
    let allowed: HashSet<String> = allowed.into_iter().collect();
    let mut by_kind: std::collections::BTreeMap<FileKind, KindCount> = Default::default();
    let mut doomed = Vec::new();
    for (path, r) in unreachable {
        if !allowed.contains(&path) {
            continue;
        }
        let k = by_kind.entry(r.kind).or_insert_with(|| KindCount {
            kind: r.kind.name(),
            ..Default::default()
        });
        k.files += 1;
        k.bytes += match r.size {
            Some(n) => n,
            // Manifest lists carry no size in metadata: ask storage.
            None => match base.file_io().new_input(&path) {
                Ok(input) => input.metadata().await.map(|m| m.size).unwrap_or(0),
                Err(_) => 0,
            },
        };
        doomed.push(path);
    }
    (by_kind.into_values().collect(), doomed, kept)
}

fn all_snapshot_ids(table: &Table) -> Vec<i64> {
    table
        .metadata()
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect()
}

#[cfg(test)]
mod tests;
