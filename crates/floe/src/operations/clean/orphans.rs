//! `remove-orphan-files`: delete files under the table location that no snapshot, ref,
//! statistics file or metadata log entry references (Iceberg's `DeleteOrphanFiles` with its
//! options and defaults: `older_than` 3 days, `prefix_mismatch_mode`, `equal_schemes`).
//!
//! Safety, in order: the threshold must be at least an hour unless forced (an in-flight write
//! is younger than that); the table's fence ([`crate::storage::fence`]) decides what may be
//! deleted: nothing outside the table location (`..`, `//`, symlinks and schemes resolved),
//! nothing inside another table's location, none of the catalog's files, and a table whose
//! location is shared with another table or holds the catalog's database or warehouse is
//! refused outright (its orphans cannot be told from their files); reachability
//! reads every manifest list and manifest and aborts before deleting if one cannot be read;
//! fresh metadata is re-read right before deleting and anything that became referenced is
//! skipped; a path matching a referenced one except for scheme or authority is reported, not
//! deleted, unless `prefix-mismatch-mode` says otherwise.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::{ident_string, Catalog};
use crate::operations::clean::check_gc_enabled;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::storage::delete::{delete_files, DeleteStats};
use crate::storage::fence::{Fence, KeptFiles};
use crate::storage::listing::{list_files, parse_equal_schemes, ListedFile, SplitPath};
use crate::table::reach::{reachable_from_table, Reachable};

/// Iceberg's default age threshold: 3 days.
pub const DEFAULT_OLDER_THAN: Duration = Duration::from_secs(3 * 24 * 3600);
/// Thresholds under this are refused unless forced.
pub const MIN_SAFE_OLDER_THAN: Duration = Duration::from_secs(3600);

/// What to do with a file whose path matches a referenced file's except for the scheme or
/// authority (for example `s3a://b/x` listed, `s3://c/x` referenced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrefixMismatchMode {
    /// Abort without deleting anything (Iceberg's default).
    Error,
    /// Keep such files.
    Ignore,
    /// Treat them as orphans.
    Delete,
}

impl std::str::FromStr for PrefixMismatchMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(Self::Error),
            "ignore" => Ok(Self::Ignore),
            "delete" => Ok(Self::Delete),
            _ => Err(Error::invalid_option(
                "prefix-mismatch-mode",
                s,
                "expected error, ignore or delete",
            )),
        }
    }
}

/// What `remove-orphan-files` found and did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OrphanMetrics {
    pub table: String,
    pub dry_run: bool,
    pub location: String,
    pub older_than_ms: u64,
    pub listed_files: u64,
    pub listed_bytes: u64,
    /// Unreferenced files younger than the threshold (never deleted).
    pub too_recent: u64,
    /// Listed files the metadata references, whatever their age.
    pub referenced: u64,
    pub orphan_files: u64,
    pub orphan_bytes: u64,
    /// Candidates a commit made during the run started referencing (kept).
    pub became_referenced: u64,
    /// Paths differing from referenced ones only by scheme/authority (kept unless mode=delete).
    pub prefix_mismatches: u64,
    /// Up to 20 orphan paths, for the report.
    pub sample: Vec<String>,
    /// Unreferenced files the table's fence kept (another table's, the catalog's, behind a
    /// symlink out of the table).
    pub kept: KeptFiles,
    pub deleted: DeleteStats,
    pub duration_ms: u64,
}

impl Costed for OrphanMetrics {
    /// The orphans deleted (or to delete); the listing is the read.
    fn cost(&self) -> Cost {
        Cost {
            files_to_read: self.listed_files,
            files_to_delete: self.orphan_files,
            bytes_to_delete: self.orphan_bytes,
            ..Cost::default()
        }
    }
}

/// Builds and runs an orphan removal.
#[derive(Clone)]
pub struct OrphanBuilder {
    ctx: Ctx,
    older_than: Duration,
    location: Option<String>,
    mode: PrefixMismatchMode,
    equal_schemes: Option<String>,
    force: bool,
}

impl OrphanBuilder {
    /// Orphan removal on `ident` with Iceberg's defaults.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            older_than: DEFAULT_OLDER_THAN,
            location: None,
            mode: PrefixMismatchMode::Error,
            equal_schemes: None,
            force: false,
        }
    }

    /// Only files last modified longer ago than `age` are candidates (default 3 days).
    pub fn with_older_than(mut self, age: Duration) -> Self {
        self.older_than = age;
        self
    }

    /// List this directory (inside the table location) instead of the whole table location.
    pub fn with_location(mut self, location: Option<String>) -> Self {
        self.location = location;
        self
    }

    /// How to treat scheme/authority mismatches.
    pub fn with_prefix_mismatch_mode(mut self, mode: PrefixMismatchMode) -> Self {
        self.mode = mode;
        self
    }

    /// Equivalent schemes, `s3a,s3n=s3` by default.
    pub fn with_equal_schemes(mut self, spec: Option<String>) -> Self {
        self.equal_schemes = spec;
        self
    }

    /// Allow thresholds under one hour (files being written right now may be deleted).
    pub fn with_force(mut self, yes: bool) -> Self {
        self.force = yes;
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
}

/// What an orphan removal's `apply` needs: the table it listed, its fence, the candidates.
pub struct OrphanWork {
    table: Table,
    fence: Fence,
    equal: HashMap<String, String>,
    candidates: Vec<ListedFile>,
    planning: std::time::Duration,
}

impl std::fmt::Debug for OrphanWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OrphanWork({} candidates)", self.candidates.len())
    }
}

/// An orphan removal's plan: the dry-run report and the files it would delete.
pub type OrphanPlan = Planned<OrphanMetrics, OrphanWork>;

impl Operation for OrphanBuilder {
    type Plan = OrphanPlan;
    type Metrics = OrphanMetrics;

    /// Lists the location once and sorts every file against the metadata, deleting nothing.
    async fn plan(&self) -> Result<OrphanPlan> {
        let started = Instant::now();
        let op = "remove orphan files";
        if self.older_than < MIN_SAFE_OLDER_THAN && !self.force {
            return Err(Error::Refused {
                operation: op.into(),
                reason: format!(
                    "older-than {}s is under one hour: files of commits in flight could be deleted (pass --force to insist)",
                    self.older_than.as_secs()
                ),
            });
        }
        let equal = parse_equal_schemes(self.equal_schemes.as_deref())?;
        let table = self.ctx.load().await?;
        let table_location = table
            .metadata()
            .location()
            .trim_end_matches('/')
            .to_string();
        let fence = Fence::for_table(&self.ctx.catalog, &table).await?;
        if let Some(why) = fence.shared_location(self.ctx.catalog.warehouse()) {
            return Err(Error::Refused {
                operation: op.into(),
                reason: format!(
                    "{why}: files there cannot be told apart from this table's orphans"
                ),
            });
        }
        let location = match &self.location {
            None => table_location.clone(),
            Some(l) => {
                let l = l.trim_end_matches('/').to_string();
                if !fence.holds_dir(&l) {
                    return Err(Error::Refused {
                        operation: op.into(),
                        reason: format!(
                            "{l} is outside the table location {table_location} \
                             (after resolving '..', '//' and symlinks)"
                        ),
                    });
                }
                l
            }
        };
        let now = std::time::UNIX_EPOCH
            + Duration::from_millis(u64::try_from(self.ctx.now_ms()).unwrap_or(0));
        let cutoff = now
            .checked_sub(self.older_than)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let listed = list_files(table.file_io(), &location).await?;
        let mut reach = reachable_from_table(&table).await?;
        // Iceberg's Hadoop catalog finds the current version through `version-hint.text`
        // beside the metadata files; no snapshot references it, and Java's orphan removal
        // keeps it too (a table Spark or Flink reach through a Hadoop catalog needs it).
        if let Some((dir, _)) = table.metadata_location().and_then(|l| l.rsplit_once('/')) {
            reach.add(
                &format!("{dir}/version-hint.text"),
                crate::table::reach::FileKind::Metadata,
                None,
            );
        }
        let listed_files = listed.len() as u64;
        let listed_bytes: u64 = listed.iter().map(|f| f.size).sum();
        let classified = classify(listed, &reach, &equal, cutoff, self.mode);

        let mut result = OrphanMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            location: location.clone(),
            older_than_ms: self.older_than.as_millis() as u64,
            listed_files,
            listed_bytes,
            too_recent: classified.too_recent,
            referenced: classified.referenced,
            orphan_files: 0,
            orphan_bytes: 0,
            became_referenced: 0,
            prefix_mismatches: classified.prefix_mismatches,
            sample: vec![],
            kept: KeptFiles::default(),
            deleted: DeleteStats::default(),
            duration_ms: 0,
        };
        if !classified.refused.is_empty() {
            let mut mismatched = classified.refused;
            mismatched.truncate(5);
            return Err(Error::Refused {
                operation: op.into(),
                reason: format!(
                    "{} file(s) match referenced files except for scheme or authority, e.g. {}; \
                     pass --equal-schemes, or --prefix-mismatch-mode ignore|delete",
                    result.prefix_mismatches,
                    mismatched.join(", ")
                ),
            });
        }
        let settled = settle(classified.candidates.clone(), None, &equal, |paths| {
            fence.partition(paths)
        });
        result.report_orphans(&settled);
        result.duration_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            result,
            snapshot_id,
            OrphanWork {
                table,
                fence,
                equal,
                candidates: classified.candidates,
                planning: started.elapsed(),
            },
        ))
    }

    /// Deletes the planned orphans, without those the table, reloaded now, references.
    async fn apply(self, plan: OrphanPlan) -> Result<OrphanMetrics> {
        let started = Instant::now();
        let OrphanWork {
            table,
            fence,
            equal,
            candidates,
            planning,
        } = plan.work;
        let mut result = plan.report;
        result.dry_run = false;
        check_gc_enabled(&table, "remove orphan files")?;
        // Fresh metadata right before deleting: a commit since the listing may reference a
        // candidate (for example a file a slow writer just committed).
        let fresh = self.ctx.load().await?;
        let fresh_reach = if fresh.metadata_location() != table.metadata_location() {
            Some(reachable_from_table(&fresh).await?)
        } else {
            None
        };
        let settled = settle(candidates, fresh_reach.as_ref(), &equal, |paths| {
            fence.partition(paths)
        });
        result.report_orphans(&settled);
        let paths = settled.orphans.into_iter().map(|f| f.path).collect();
        result.deleted =
            delete_files(table.file_io(), &fence, paths, self.ctx.progress.clone()).await;
        result.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(result)
    }
}

impl OrphanMetrics {
    /// The orphans `settled` leaves: their count, bytes and a sample.
    fn report_orphans(&mut self, settled: &Settled) {
        self.became_referenced = settled.became_referenced;
        self.kept = settled.kept.clone();
        self.orphan_files = settled.orphans.len() as u64;
        self.orphan_bytes = settled.orphans.iter().map(|f| f.size).sum();
        self.sample = settled
            .orphans
            .iter()
            .take(20)
            .map(|f| f.path.clone())
            .collect();
    }
}

/// Listed files sorted by what orphan removal does with them (see [`classify`]).
#[derive(Debug, Default)]
struct Classified {
    /// Files the metadata references, whatever their age.
    referenced: u64,
    /// Unreferenced files (mismatched ones included) modified at or after the cutoff.
    too_recent: u64,
    /// Files older than the cutoff matching a referenced path except for scheme or authority.
    prefix_mismatches: u64,
    /// Mismatched paths that stop the run (mode `error`).
    refused: Vec<String>,
    /// Files to delete, before the fresh-metadata check and the fence.
    candidates: Vec<ListedFile>,
}

/// Sorts `listed` against the files `reach` references: a referenced file is kept whatever its
/// age; an unreferenced one modified at or after `cutoff` is too recent; an older one is a
/// candidate, unless it matches a referenced path except for scheme or authority, when `mode`
/// decides (refuse the run, keep it, or make it a candidate).
fn classify(
    listed: Vec<ListedFile>,
    reach: &Reachable,
    equal: &HashMap<String, String>,
    cutoff: SystemTime,
    mode: PrefixMismatchMode,
) -> Classified {
    let index = Index::new(reach, equal);
    let mut out = Classified::default();
    for f in listed {
        let found = index.lookup(&f.path, equal);
        if found == Lookup::Referenced {
            out.referenced += 1;
            continue;
        }
        if f.modified >= cutoff {
            out.too_recent += 1;
            continue;
        }
        match found {
            Lookup::Referenced => {}
            Lookup::Mismatch => {
                out.prefix_mismatches += 1;
                match mode {
                    PrefixMismatchMode::Error => out.refused.push(f.path),
                    PrefixMismatchMode::Ignore => {}
                    PrefixMismatchMode::Delete => out.candidates.push(f),
                }
            }
            Lookup::Unreferenced => out.candidates.push(f),
        }
    }
    out
}

/// The candidates that are orphans after the last checks (see [`settle`]).
#[derive(Debug)]
struct Settled {
    orphans: Vec<ListedFile>,
    /// Candidates the fresh metadata references.
    became_referenced: u64,
    /// Candidates the fence kept back.
    kept: KeptFiles,
}

/// What is left of `candidates` to delete: without those the `fresh` metadata references (when
/// the table changed during the run), then without those `fence` keeps back (`fence` takes
/// the remaining paths and returns the deletable ones and what it kept).
fn settle(
    mut candidates: Vec<ListedFile>,
    fresh: Option<&Reachable>,
    equal: &HashMap<String, String>,
    fence: impl FnOnce(Vec<String>) -> (Vec<String>, KeptFiles),
) -> Settled {
    let mut became_referenced = 0;
    if let Some(reach) = fresh {
        let index = Index::new(reach, equal);
        let before = candidates.len();
        candidates.retain(|f| index.lookup(&f.path, equal) != Lookup::Referenced);
        became_referenced = (before - candidates.len()) as u64;
    }
    let (allowed, kept) = fence(candidates.iter().map(|f| f.path.clone()).collect());
    let allowed: HashSet<String> = allowed.into_iter().collect();
    candidates.retain(|f| allowed.contains(&f.path));
    Settled {
        orphans: candidates,
        became_referenced,
        kept,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Lookup {
    Referenced,
    Mismatch,
    Unreferenced,
}

/// Referenced paths keyed by their path part, so `file:/x`, `file:///x` and `/x` meet.
struct Index {
    by_path: HashMap<String, Vec<SplitPath>>,
}

impl Index {
    fn new(reach: &Reachable, equal: &HashMap<String, String>) -> Self {
        let mut by_path: HashMap<String, Vec<SplitPath>> = HashMap::new();
        for p in reach.files.keys() {
            let s = SplitPath::parse(p, equal);
            by_path.entry(s.path.clone()).or_default().push(s);
        }
        Self { by_path }
    }

    fn lookup(&self, path: &str, equal: &HashMap<String, String>) -> Lookup {
        let s = SplitPath::parse(path, equal);
        match self.by_path.get(&s.path) {
            None => Lookup::Unreferenced,
            Some(refs) if refs.iter().any(|r| !r.mismatches(&s)) => Lookup::Referenced,
            Some(_) => Lookup::Mismatch,
        }
    }
}

#[cfg(test)]
mod tests;
