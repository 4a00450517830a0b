//! One table's pass: gather its facts, weigh its triggers, plan every due job with the
//! operation's own `plan()` (a value that changes nothing, so the scheduler sees the real
//! cost), score it, and later apply that same plan for the jobs the scheduler picks
//! (`Operation::apply`): each job is planned once per pass.
//!
//! ## Benefit
//!
//! A job's benefit counts what it takes off readers, writers and storage, in "files": the
//! unit every engine pays per query (open, footer, stats) and per planning.
//! - **compact**: data files removed from the live set (inputs minus expected outputs) plus
//!   delete files that stop applying, times the table's activity weight.
//! - **rewrite-manifests**: manifests removed, times the activity weight.
//! - **expire-snapshots**: a tenth of a file per snapshot expired (metadata every commit
//!   rewrites and every planner parses), plus a file per 64 MiB freed.
//! - **remove-orphan-files**, **clean-metadata**: a file per 64 MiB freed, plus a hundredth
//!   per file deleted.
//!
//! The activity weight is `1 + ln(1 + writes per hour over the last day)`: a table written
//! often is read often, and its files cost most. floe sees writes only (reads happen in other
//! engines); writes stand in for both.
//!
//! The cost in seconds comes from [`super::rates`]: rates fitted on floe's past runs of the
//! same job kind on this machine. The score is benefit per estimated second.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use iceberg::spec::ManifestFile;
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::operations::clean::metadata_files::{
    metadata_version, CleanMetadataBuilder, CleanMetadataPlan,
};
use crate::operations::clean::orphans::{OrphanBuilder, OrphanPlan};
use crate::operations::clean::rewrite_manifests::{RewriteManifestsBuilder, RewriteManifestsPlan};
use crate::operations::compact::distributed::Distributed;
use crate::operations::compact::{CompactBuilder, CompactPlan};
use crate::operations::expire::{ExpireBuilder, ExpireRun};
use crate::operations::Operation;
use crate::storage::listing::list_files;
use crate::table::manifests::{current_manifests, live_files_of};

use super::facts::{self, ManifestFacts, TableFacts};
use super::partitions::{activity, choose, PartitionActivity, PartitionChoice};
use super::policy::Policy;
use super::rates::Rates;
use super::state::{Decision, TableStatus};
use super::streaming::{self, Streaming};
use super::trigger::{evaluate, Candidate, JobKind};
use crate::base::properties::human_ms;
use crate::coordination::{LastRuns, Store};

const HOUR_MS: i64 = 3_600_000;
const FILE_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// A table `floe maintain` watches.
#[derive(Clone, Debug)]
pub struct Watched {
    /// `ns.table`, or `catalog.ns.table` when several catalogs are watched: the name in
    /// reports and the lease scope.
    pub name: String,
    pub catalog: Catalog,
    pub ident: TableIdent,
}

/// A due job, planned: what the scheduler weighs and the runner runs.
#[derive(Debug, Clone)]
pub struct Planned {
    pub job: JobKind,
    /// Index of its row in [`TableEvaluation::status`]`.decisions`.
    pub decision: usize,
    /// Compaction: its partitions in the order to take them, with their input bytes.
    pub partitions: Vec<(String, u64)>,
    /// Bytes the job rewrites (compaction, manifest rewrite).
    pub rewrite_bytes: u64,
    /// Compaction: the partitions rolled up by size tier, with their bound.
    pub roll_up: BTreeMap<String, u64>,
    /// The plan that was scored, applied when the job runs (taken once).
    pub run: KeptPlan,
}

/// A job's plan, as its operation made it.
pub enum JobRun {
    Compact(Box<CompactPlan>),
    Expire(Box<ExpireRun>),
    Orphans(Box<OrphanPlan>),
    RewriteManifests(Box<RewriteManifestsPlan>),
    CleanMetadata(Box<CleanMetadataPlan>),
}

/// The plan a [`Planned`] job keeps until it runs: shared so that the job can be copied into
/// reports, taken by the one run that applies it.
#[derive(Clone, Default)]
pub struct KeptPlan(std::sync::Arc<std::sync::Mutex<Option<JobRun>>>);

impl KeptPlan {
    fn new(run: JobRun) -> Self {
        KeptPlan(std::sync::Arc::new(std::sync::Mutex::new(Some(run))))
    }

    /// The plan, once; `None` after it was taken.
    pub fn take(&self) -> Option<JobRun> {
        self.0.lock().ok()?.take()
    }
}

impl std::fmt::Debug for KeptPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map(|g| g.is_some()).unwrap_or(false);
        write!(f, "KeptPlan({})", if kept { "kept" } else { "taken" })
    }
}

/// One table's pass.
#[derive(Debug, Clone)]
pub struct TableEvaluation {
    /// Where the table's runs are recorded: its lease scope and its `table-uuid`, so that a
    /// table dropped and created again under the same name starts a fresh history.
    pub history_scope: String,
    pub status: TableStatus,
    pub policy: Policy,
    pub planned: Vec<Planned>,
    pub partitions: Vec<PartitionChoice>,
    /// Whether the table gets the streaming defaults, and what the pass records on it.
    pub streaming: Streaming,
}

/// Backoff after `failures` consecutive failures: 1 min, doubling, at most 1 h.
pub fn backoff_ms(failures: u32) -> i64 {
    if failures == 0 {
        return 0;
    }
    let exp = (failures - 1).min(6);
    (60_000i64 << exp).min(HOUR_MS)
}

/// Evaluates one table at `now_ms`: its status (numbers and the decision table) and its due
/// jobs, planned. Past runs come from `store` (under `scope@table-uuid`); `rates` are the cost
/// rates per job kind; `defaults` are policy properties the table's own override (how
/// `floe ingest --maintain` turns the roll-up on).
pub async fn evaluate_table(
    w: &Watched,
    store: &Store,
    scope: &str,
    rates: &HashMap<JobKind, Rates>,
    defaults: &HashMap<String, String>,
    now_ms: i64,
) -> Result<TableEvaluation> {
    let table = w.catalog.load_table(&w.ident).await?;
    let history_scope = format!("{scope}@{}", table.metadata().uuid());
    let last = &store.last_runs(&history_scope).await?;
    let props = table.metadata().properties();
    // A stream's table gets the streaming retention beneath its own keys (see
    // `maintain::streaming`).
    let streaming = streaming::judge(table.metadata(), props, defaults, now_ms)
        .map_err(|e| e.for_table(&w.name))?;
    let mut with_defaults = match streaming.on {
        true => streaming::with_streaming_defaults(defaults),
        false => defaults.clone(),
    };
    with_defaults.extend(props.iter().map(|(k, v)| (k.clone(), v.clone())));
    let policy = Policy::from_properties(&with_defaults).map_err(|e| e.for_table(&w.name))?;
    let compact = CompactBuilder::new(&w.catalog, w.ident.clone());
    let small_below = compact
        .plan_options(&table)
        .map_err(|e| e.for_table(&w.name))?
        .min_file_size_bytes;

    let mut facts = facts::gather(&table);
    // One manifest list read serves the manifest facts and the live files.
    let manifests = current_manifests(&table).await?;
    facts.manifests = Some(manifest_facts(&table, &manifests).await?);
    let live = live_files_of(&table, &manifests).await?;
    let parts = activity(&table, &live, small_below);
    let mut status = status_of(&w.name, &facts, &parts, now_ms);
    if !policy.enabled {
        status.decisions = JobKind::ALL
            .iter()
            .map(|job| Decision {
                table: w.name.clone(),
                job: job.to_string(),
                scope: "table".into(),
                skipped: Some(format!(
                    "{}=false",
                    crate::base::properties::MAINTAIN_ENABLED.key
                )),
                ..Decision::default()
            })
            .collect();
        return Ok(TableEvaluation {
            history_scope,
            status,
            policy,
            planned: vec![],
            partitions: vec![],
            streaming,
        });
    }

    let last_success: HashMap<JobKind, i64> = JobKind::ALL
        .iter()
        .filter_map(|k| Some((*k, last.get(k.as_str())?.last_success_ms?)))
        .collect();
    let candidates = evaluate(&policy, &facts, &last_success, now_ms);
    let weight = activity_weight(&table, now_ms);
    let choices = choose(&parts, &policy.compact, now_ms);
    let mut planned = Vec::new();
    for c in candidates {
        let rate = rates.get(&c.job).copied().unwrap_or(Rates::PRIOR);
        let mut d = Decision {
            table: w.name.clone(),
            job: c.job.to_string(),
            scope: "table".into(),
            fired: c.fired.clone(),
            skipped: c.skipped.clone(),
            ..Decision::default()
        };
        // The hard limit is a cap: a partition past it is compacted even within the rate
        // limit, which otherwise lets a 1-commit/s stream pile up a rate-limit's worth of files.
        if c.job == JobKind::Compact && c.fired.is_some() {
            let limit = policy.compact.small_file_hard_limit;
            let over = choices.iter().find(|p| p.small_files >= limit);
            if let (Some(held), Some(p)) = (d.skipped.as_deref(), over) {
                if held.starts_with("rate-limit") {
                    d.fired = Some(format!(
                        "{}; {} has {} small files >= small-file-hard-limit {} (overrides the rate limit)",
                        d.fired.as_deref().unwrap_or(""),
                        p.partition,
                        p.small_files,
                        limit
                    ));
                    d.skipped = None;
                }
            }
        }
        // A full size tier in an active partition is due whatever the other triggers say:
        // it is what keeps a short commit interval from piling up small files.
        if c.job == JobKind::Compact && d.skipped.is_some() {
            if let Some(p) = choices.iter().find(|p| p.roll_up_below.is_some()) {
                d.fired = Some(format!("{}: {}", p.partition, p.reason));
                d.skipped = None;
            }
        }
        if d.fired.is_some() && d.skipped.is_none() {
            if let Some(wait) = backoff(last.get(c.job.as_str()), now_ms) {
                d.skipped = Some(wait);
            }
        }
        if d.fired.is_some() && d.skipped.is_none() {
            match plan_job(w, &c, &policy, &choices, weight).await {
                Ok(p) => {
                    d.scope = p.scope;
                    d.benefit = p.benefit;
                    d.cost = p.cost;
                    d.cost_seconds = rate.seconds(&p.cost);
                    d.score = d.benefit / d.cost_seconds.max(0.1);
                    planned.push(Planned {
                        job: c.job,
                        decision: status.decisions.len(),
                        partitions: p.partitions,
                        rewrite_bytes: p.rewrite_bytes,
                        roll_up: p.roll_up,
                        run: KeptPlan::new(p.run),
                    });
                }
                Err(Skip(why)) => d.skipped = Some(why),
            }
        }
        status.debt += if d.skipped.is_none() { d.benefit } else { 0.0 };
        status.decisions.push(d);
    }
    Ok(TableEvaluation {
        history_scope,
        status,
        policy,
        planned,
        partitions: choices,
        streaming,
    })
}

/// Why a due job was not planned.
struct Skip(String);

impl From<Error> for Skip {
    fn from(e: Error) -> Self {
        Skip(format!("planning failed: {e}"))
    }
}

struct JobPlan {
    scope: String,
    benefit: f64,
    cost: Cost,
    partitions: Vec<(String, u64)>,
    rewrite_bytes: u64,
    roll_up: BTreeMap<String, u64>,
    run: JobRun,
}

fn backoff(last: Option<&LastRuns>, now_ms: i64) -> Option<String> {
    let l = last?;
    if l.consecutive_failures == 0 {
        return None;
    }
    let failed = l.last_failure_ms?;
    let wait = backoff_ms(l.consecutive_failures);
    let ago = now_ms.saturating_sub(failed);
    (ago < wait).then(|| {
        format!(
            "backoff: {} failure(s), last {} ago, retry in {}: {}",
            l.consecutive_failures,
            human_ms(ago.max(0) as u64),
            human_ms((wait - ago) as u64),
            l.last_error.as_deref().unwrap_or("?")
        )
    })
}

async fn plan_job(
    w: &Watched,
    c: &Candidate,
    policy: &Policy,
    choices: &[PartitionChoice],
    weight: f64,
) -> std::result::Result<JobPlan, Skip> {
    let (catalog, ident) = (&w.catalog, w.ident.clone());
    Ok(match c.job {
        JobKind::Compact => {
            let eligible: Vec<&PartitionChoice> = choices.iter().filter(|p| p.eligible).collect();
            if eligible.is_empty() {
                let why = match choices.first() {
                    Some(held) => format!(
                        "no partition may be compacted now: {} ({})",
                        held.partition, held.reason
                    ),
                    None => "no partition holds two small files or a delete file".into(),
                };
                return Err(Skip(why));
            }
            let names: BTreeSet<String> = eligible.iter().map(|p| p.partition.clone()).collect();
            let roll_up: BTreeMap<String, u64> = eligible
                .iter()
                .filter_map(|p| Some((p.partition.clone(), p.roll_up_below?)))
                .collect();
            let planned = CompactBuilder::new(catalog, ident)
                .with_partitions(Some(names))
                .with_roll_up(roll_up.clone())
                .plan()
                .await?;
            let m = &planned.report;
            if m.plan.groups.is_empty() {
                return Err(Skip(format!(
                    "nothing to rewrite in {} eligible partition(s): no file group reaches min-input-files {}",
                    eligible.len(),
                    m.options.min_input_files
                )));
            }
            let mut by_part: HashMap<&str, (u64, u64)> = HashMap::new();
            for g in &m.plan.groups {
                let e = by_part.entry(g.partition.as_str()).or_default();
                e.0 += g.input_bytes;
                e.1 += (g.input_files as u64).saturating_sub(g.expected_output_files);
            }
            let partitions: Vec<(String, u64)> = eligible
                .iter()
                .filter_map(|p| Some((p.partition.clone(), by_part.get(p.partition.as_str())?.0)))
                .collect();
            let files_removed: u64 = by_part.values().map(|v| v.1).sum();
            let deletes: u64 = eligible
                .iter()
                .filter(|p| by_part.contains_key(p.partition.as_str()))
                .map(|p| p.delete_files)
                .sum();
            let held = choices.iter().filter(|p| !p.eligible).count();
            let mut scope = format!("{} partition(s)", partitions.len());
            if held > 0 {
                scope.push_str(&format!(", {held} active left alone"));
            }
            JobPlan {
                scope,
                benefit: (files_removed + deletes) as f64 * weight,
                cost: m.cost(),
                rewrite_bytes: m.plan.input_bytes(),
                partitions,
                roll_up,
                run: JobRun::Compact(Box::new(planned)),
            }
        }
        JobKind::ExpireSnapshots => {
            let planned = expiry(catalog, ident, policy).plan().await?;
            let m = &planned.report;
            if m.plan.expired_snapshots.is_empty() {
                return Err(Skip(
                    "nothing expires: the snapshots past the age are kept (refs, min-snapshots-to-keep, writer watermarks)".into(),
                ));
            }
            let cost = m.cost();
            JobPlan {
                scope: format!("{} snapshot(s)", m.plan.expired_snapshots.len()),
                benefit: m.plan.expired_snapshots.len() as f64 * 0.1
                    + freed(cost.files_to_delete, cost.bytes_to_delete),
                cost,
                partitions: vec![],
                rewrite_bytes: 0,
                roll_up: BTreeMap::new(),
                run: JobRun::Expire(Box::new(planned)),
            }
        }
        JobKind::RemoveOrphanFiles => {
            let planned = OrphanBuilder::new(catalog, ident)
                .with_older_than(Duration::from_millis(policy.orphans_older_than_ms))
                .plan()
                .await?;
            let m = &planned.report;
            let cost = m.cost();
            JobPlan {
                scope: format!(
                    "{} file(s) listed, {} orphan(s) older than {}",
                    m.listed_files,
                    m.orphan_files,
                    human_ms(policy.orphans_older_than_ms)
                ),
                // Even with nothing found, the run is recorded so the interval restarts.
                benefit: freed(cost.files_to_delete, cost.bytes_to_delete).max(0.01),
                cost: Cost {
                    files_to_read: m.listed_files,
                    ..cost
                },
                partitions: vec![],
                rewrite_bytes: 0,
                roll_up: BTreeMap::new(),
                run: JobRun::Orphans(Box::new(planned)),
            }
        }
        JobKind::RewriteManifests => {
            let planned = RewriteManifestsBuilder::new(catalog, ident).plan().await?;
            let m = &planned.report;
            if !m.worth_rewriting {
                return Err(Skip(
                    "manifests already one per partition spec and content".into(),
                ));
            }
            let cost = m.cost();
            JobPlan {
                scope: format!(
                    "{} manifests -> about {}",
                    m.manifests_before, m.min_manifests_after
                ),
                benefit: m.manifests_before.saturating_sub(m.min_manifests_after) as f64 * weight,
                rewrite_bytes: cost.bytes_to_read,
                cost,
                partitions: vec![],
                roll_up: BTreeMap::new(),
                run: JobRun::RewriteManifests(Box::new(planned)),
            }
        }
        JobKind::CleanMetadata => {
            let planned = CleanMetadataBuilder::new(catalog, ident).plan().await?;
            let m = &planned.report;
            if m.removable == 0 {
                return Err(Skip("no metadata file outside the metadata log".into()));
            }
            let cost = m.cost();
            JobPlan {
                scope: format!("{} metadata file(s)", m.removable),
                benefit: freed(cost.files_to_delete, cost.bytes_to_delete),
                cost,
                partitions: vec![],
                rewrite_bytes: 0,
                roll_up: BTreeMap::new(),
                run: JobRun::CleanMetadata(Box::new(planned)),
            }
        }
    })
}

/// The policy's expiry: its age and snapshots to keep are the table's `history.expire.*`, or
/// the service's defaults for them (`floe ingest --maintain` keeps an hour).
fn expiry(catalog: &Catalog, ident: TableIdent, policy: &Policy) -> ExpireBuilder {
    let b = ExpireBuilder::new(catalog, ident)
        .with_older_than_age(Duration::from_millis(policy.max_snapshot_age_ms))
        .with_retain_last(policy.min_snapshots_to_keep.max(1));
    match policy.max_snapshots {
        0 => b,
        n => b.with_max_snapshots(n),
    }
}

/// The benefit of deleting `files` holding `bytes`.
fn freed(files: u64, bytes: u64) -> f64 {
    files as f64 * 0.01 + bytes as f64 / FILE_BYTES
}

/// `1 + ln(1 + writes per hour over the last day)`.
fn activity_weight(table: &Table, now_ms: i64) -> f64 {
    let since = now_ms - 24 * HOUR_MS;
    let writes = table
        .metadata()
        .snapshots()
        .filter(|s| s.timestamp_ms() >= since)
        .filter(|s| {
            facts::commit_kind(
                s.summary().operation.as_str(),
                &s.summary().additional_properties,
            ) == facts::CommitKind::Write
        })
        .count();
    1.0 + (1.0 + writes as f64 / 24.0).ln()
}

/// The sizes of the current snapshot's `manifests` and the `metadata.json` files on storage.
async fn manifest_facts(table: &Table, manifests: &[ManifestFile]) -> Result<ManifestFacts> {
    let dir = format!(
        "{}/metadata",
        table.metadata().location().trim_end_matches('/')
    );
    let metadata_json_files = list_files(table.file_io(), &dir)
        .await?
        .iter()
        .filter(|f| metadata_version(&f.path).is_some())
        .count() as u64;
    Ok(ManifestFacts {
        manifest_bytes: manifests.iter().map(|m| m.manifest_length as u64).collect(),
        metadata_json_files,
    })
}

fn status_of(
    name: &str,
    facts: &TableFacts,
    parts: &[PartitionActivity],
    now_ms: i64,
) -> TableStatus {
    let m = facts.manifests.clone().unwrap_or_default();
    TableStatus {
        table: name.to_string(),
        sampled_ms: now_ms,
        live_data_files: parts.iter().map(|p| p.data_files).sum(),
        small_files: parts.iter().map(|p| p.small_files).sum(),
        delete_files: parts.iter().map(|p| p.delete_files).sum(),
        snapshots: facts.snapshots,
        manifests: m.manifest_bytes.len() as u64,
        data_bytes: parts.iter().map(|p| p.data_bytes).sum(),
        // Manifests of the current snapshot (manifest lists and metadata.json files are not
        // sized without more reads; manifests dominate).
        metadata_bytes: m.manifest_bytes.iter().sum::<u64>(),
        debt: 0.0,
        problem: None,
        decisions: vec![],
    }
}

/// How long a job may be held up at its start and still apply the plan it was scored with.
const KEPT_PLAN_WAIT: Duration = Duration::from_secs(1);

/// Runs one planned job on the table: applies the plan it was scored with (`partitions`, the
/// scheduler's pick, cuts a compaction). A job held up at its start for longer than
/// [`KEPT_PLAN_WAIT`] (`FLOE_FAULT_PAUSE_MAINTAIN_JOB_MS` stands in for a slow start) plans
/// again against the table as it then is, as does one whose plan was already taken: a plan
/// as old as the wait would leave out what was written meanwhile (a streaming table's new
/// small files). Returns what it did, or the error as the run record keeps it.
pub async fn run_job(
    w: &Watched,
    p: &Planned,
    partitions: Option<Vec<String>>,
    policy: &Policy,
    distributed: Option<Distributed>,
) -> std::result::Result<Cost, String> {
    if let Some(e) = crate::base::fault::fail("MAINTAIN_JOB") {
        return Err(e);
    }
    let entered = std::time::Instant::now();
    crate::base::fault::pause("MAINTAIN_JOB").await;
    let kept = p.run.take().filter(|_| entered.elapsed() <= KEPT_PLAN_WAIT);
    run(
        w,
        p.job,
        kept,
        partitions,
        p.roll_up.clone(),
        policy,
        distributed,
    )
    .await
    .map_err(|e| e.to_string())?
}

/// `op.apply(plan)` with the kept plan, else `op.execute()`.
async fn apply_or_execute<O: Operation + Sync>(op: O, kept: Option<O::Plan>) -> Result<O::Metrics> {
    match kept {
        Some(plan) => op.apply(plan).await,
        None => op.execute().await,
    }
}

async fn run(
    w: &Watched,
    job: JobKind,
    kept: Option<JobRun>,
    partitions: Option<Vec<String>>,
    roll_up: BTreeMap<String, u64>,
    policy: &Policy,
    distributed: Option<Distributed>,
) -> Result<std::result::Result<Cost, String>> {
    let (catalog, ident) = (&w.catalog, w.ident.clone());
    Ok(Ok(match job {
        JobKind::Compact => {
            let cut: Option<BTreeSet<String>> = partitions.map(|p| p.into_iter().collect());
            let kept = match kept {
                Some(JobRun::Compact(mut plan)) => {
                    if let Some(cut) = &cut {
                        plan.retain_partitions(cut);
                    }
                    Some(*plan)
                }
                _ => None,
            };
            let mut op = CompactBuilder::new(catalog, ident)
                .with_partitions(cut)
                .with_roll_up(roll_up);
            if let Some(d) = distributed {
                op = op.with_distributed(d);
            }
            let m = apply_or_execute(op, kept).await?;
            if let Some(f) = m.failed_groups.first() {
                return Ok(Err(format!(
                    "{} of {} file group(s) failed, first in {}: {}",
                    m.failed_groups.len(),
                    m.plan.groups.len(),
                    f.partition,
                    f.reason
                )));
            }
            m.cost()
        }
        JobKind::ExpireSnapshots => {
            let kept = match kept {
                Some(JobRun::Expire(plan)) => Some(*plan),
                _ => None,
            };
            apply_or_execute(expiry(catalog, ident, policy), kept)
                .await?
                .cost()
        }
        JobKind::RemoveOrphanFiles => {
            let kept = match kept {
                Some(JobRun::Orphans(plan)) => Some(*plan),
                _ => None,
            };
            let op = OrphanBuilder::new(catalog, ident)
                .with_older_than(Duration::from_millis(policy.orphans_older_than_ms));
            let m = apply_or_execute(op, kept).await?;
            Cost {
                files_to_read: m.listed_files,
                ..m.cost()
            }
        }
        JobKind::RewriteManifests => {
            let kept = match kept {
                Some(JobRun::RewriteManifests(plan)) => Some(*plan),
                _ => None,
            };
            apply_or_execute(RewriteManifestsBuilder::new(catalog, ident), kept)
                .await?
                .cost()
        }
        JobKind::CleanMetadata => {
            let kept = match kept {
                Some(JobRun::CleanMetadata(plan)) => Some(*plan),
                _ => None,
            };
            apply_or_execute(CleanMetadataBuilder::new(catalog, ident), kept)
                .await?
                .cost()
        }
    }))
}
