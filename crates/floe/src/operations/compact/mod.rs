//! `floe compact`: Iceberg's `rewrite_data_files` (bin-pack), done beside a streaming writer.
//!
//! ```text
//!  scan planning (one manifest pass, --where pruning, deletes attached)
//!     -> plan (pure: candidates, bin-packing, groups)       [--dry-run stops here]
//!     -> rewrite groups, max-concurrent-file-group-rewrites at a time (read + apply deletes,
//!        write rolled at the target size)
//!     -> commit: one `replace`, or with partial progress one per batch of finished groups
//! ```
//!
//! Position delete files whose every target data file a commit rewrites are removed in that
//! same commit (their rows were applied while rewriting; left live they would still match the
//! new files by partition and sequence number, and readers would keep opening them).
//!
//! Safety: new files take the starting snapshot's sequence number; commits validate against the
//! starting snapshot and retry through the commit path; a group whose files were removed (or got
//! new position deletes) meanwhile fails alone, its output deleted, and is reported. A crash
//! leaves the table as it was plus unreferenced files (orphans).

mod commit;
pub mod dangling;
mod dictionary;
pub mod distributed;
pub mod filter;
mod multi_file;
pub mod options;
mod parallel;
pub mod plan;
pub mod position_deletes;
pub mod queue_checks;
mod rewrite;
pub mod row_group_merge;
mod scan;
pub mod sort;
mod spill;
pub mod worker;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use iceberg::scan::FileScanTask;
use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::base::cost::{Amount, Cost, Costed, Phase, Progress};
use crate::base::error::{Error, Result};
use crate::base::properties;
use crate::catalog::{ident_string, Catalog};
use crate::commit::Ledger;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::write::WriteOptions;
pub use options::{CompactOptions, RowGroupMerge};
pub use plan::{FileGroup, JobOrder, Plan, PlanFile, PlanOptions};
pub use rewrite::partition_path;
use rewrite::{plan_file, plan_files, rewrite_group};

/// What a compaction did (or, in its plan's report, `dry_run: true`, would do).
#[derive(Debug, Clone, Serialize)]
pub struct CompactMetrics {
    pub table: String,
    pub dry_run: bool,
    pub options: PlanOptions,
    pub max_concurrent_file_group_rewrites: usize,
    pub partial_progress: bool,
    pub plan: Plan,
    pub live_files_before: usize,
    pub live_files_after: usize,
    pub rewritten_files: usize,
    pub added_files: usize,
    pub rewritten_bytes: u64,
    pub added_bytes: u64,
    pub rows: u64,
    pub commits: Vec<i64>,
    /// Delete files dropped because no live data file can match them any more.
    pub removed_dangling_deletes: usize,
    /// Position delete files removed in the compaction commits: every data file they target
    /// was rewritten (their rows applied).
    pub removed_delete_files: usize,
    /// Deleted positions those files held.
    pub removed_position_deletes: u64,
    pub failed_groups: Vec<FailedGroup>,
    /// Input data files of the failed groups (Iceberg's `failedDataFilesCount`).
    pub failed_data_files_count: usize,
    /// Inputs whose row groups were copied into the outputs without decoding
    /// (`row-group-merge`).
    pub row_group_merge: row_group_merge::MergeReport,
    /// Batches of partitions the run was planned and committed in (`plan-batch-files`).
    pub plan_batches: usize,
    pub duration_ms: u64,
    pub mb_per_s: f64,
    /// `--distributed`: the run in the queue, and what each worker did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<distributed::DistributedReport>,
}

impl Costed for CompactMetrics {
    /// Planned: the input files read, about as many bytes written in the expected outputs.
    /// Rewritten inputs leave the table but stay on storage until expiry deletes them.
    fn cost(&self) -> Cost {
        if self.dry_run {
            let bytes = self.plan.input_bytes();
            Cost {
                files_to_read: self.plan.input_files() as u64,
                bytes_to_read: bytes,
                files_to_write: self
                    .plan
                    .groups
                    .iter()
                    .map(|g| g.expected_output_files)
                    .sum(),
                bytes_to_write: bytes,
                ..Cost::default()
            }
        } else {
            Cost {
                files_to_read: self.rewritten_files as u64,
                bytes_to_read: self.rewritten_bytes,
                files_to_write: self.added_files as u64,
                bytes_to_write: self.added_bytes,
                ..Cost::default()
            }
        }
    }
}

impl CompactMetrics {
    /// Adds the outcome of a later batch of the same run.
    fn absorb(&mut self, o: CompactMetrics) {
        self.plan.groups.extend(o.plan.groups);
        self.plan.candidate_files += o.plan.candidate_files;
        self.rewritten_files += o.rewritten_files;
        self.added_files += o.added_files;
        self.rewritten_bytes += o.rewritten_bytes;
        self.added_bytes += o.added_bytes;
        self.rows += o.rows;
        self.commits.extend(o.commits);
        self.removed_dangling_deletes += o.removed_dangling_deletes;
        self.removed_delete_files += o.removed_delete_files;
        self.removed_position_deletes += o.removed_position_deletes;
        self.failed_groups.extend(o.failed_groups);
        self.failed_data_files_count += o.failed_data_files_count;
        self.row_group_merge.files += o.row_group_merge.files;
        self.row_group_merge.row_groups += o.row_group_merge.row_groups;
        self.row_group_merge.bytes += o.row_group_merge.bytes;
        self.live_files_after = self.live_files_before + self.added_files - self.rewritten_files;
        if let Some(d) = o.distributed {
            let mine = self.distributed.get_or_insert_with(Default::default);
            mine.tasks += d.tasks;
            mine.retried_claims += d.retried_claims;
            mine.abandoned_runs.extend(d.abandoned_runs);
            for w in d.workers {
                match mine.workers.iter_mut().find(|m| m.worker == w.worker) {
                    Some(m) => {
                        m.tasks += w.tasks;
                        m.bytes_read += w.bytes_read;
                        m.bytes_written += w.bytes_written;
                        m.seconds += w.seconds;
                    }
                    None => mine.workers.push(w),
                }
            }
        }
    }

    /// The run of several batches: the first batch's metrics with the others absorbed.
    fn of_batches(batches: Vec<CompactMetrics>) -> Result<CompactMetrics> {
        let n = batches.len();
        let mut it = batches.into_iter();
        let mut total = it
            .next()
            .ok_or_else(|| Error::Io(std::io::Error::other("compaction: no partition to plan")))?;
        for m in it {
            total.absorb(m);
        }
        total.plan_batches = n;
        Ok(total)
    }

    /// Whether every planned group failed: there was work and nothing was committed.
    pub fn all_groups_failed(&self) -> bool {
        !self.failed_groups.is_empty() && self.commits.is_empty()
    }
}

/// A group that could not be committed, and why.
#[derive(Debug, Clone, Serialize)]
pub struct FailedGroup {
    pub partition: String,
    pub input_files: usize,
    pub reason: String,
}

/// The table's `write.target-file-size-bytes` (Iceberg's default when unset).
fn table_target(table: &Table) -> Result<u64> {
    properties::table_u64_prop(
        table,
        properties::WRITE_TARGET_FILE_SIZE_BYTES.key,
        properties::WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
    )
}

/// Plans `files`; the files of a partition in `roll_up` with the candidate bound its size tier
/// sets and groups of two or more.
fn plan_with_roll_up(
    files: &[PlanFile],
    opts: &PlanOptions,
    roll_up: &BTreeMap<String, u64>,
) -> plan::Plan {
    if roll_up.is_empty() {
        return plan::plan(files, opts);
    }
    let (tiered, rest): (Vec<PlanFile>, Vec<PlanFile>) = files
        .iter()
        .cloned()
        .partition(|f| roll_up.contains_key(&f.partition));
    let mut out = plan::plan(&rest, opts);
    let mut by_bound: BTreeMap<u64, Vec<PlanFile>> = BTreeMap::new();
    for f in tiered {
        let bound = roll_up[&f.partition].min(opts.min_file_size_bytes);
        by_bound.entry(bound).or_default().push(f);
    }
    for (bound, fs) in by_bound {
        let o = PlanOptions {
            min_file_size_bytes: bound,
            min_input_files: 2,
            ..opts.clone()
        };
        let p = plan::plan(&fs, &o);
        out.groups.extend(p.groups);
        out.candidate_files += p.candidate_files;
    }
    out.live_files = files.len();
    out
}

/// Builder of a compaction.
#[derive(Clone)]
pub struct CompactBuilder {
    ctx: Ctx,
    options: CompactOptions,
    /// The first `with_option` (key, value) that did not parse, reported by `plan`/`execute`.
    bad_option: Option<(String, String)>,
    where_filter: Option<String>,
    /// The instant the filter's time functions mean: one for the whole run.
    now: chrono::DateTime<chrono::Utc>,
    /// Only these partitions ([`partition_path`] names), when set.
    partitions: Option<Arc<BTreeSet<String>>>,
    /// Partitions rolled up by size tier: only their files under the bound are merged.
    roll_up: BTreeMap<String, u64>,
    sort_by: Option<String>,
    /// `--distributed`: rewrites go to workers through this queue.
    distributed: Option<distributed::Distributed>,
}

struct GroupResult {
    group: usize,
    files: Vec<DataFile>,
    rows: u64,
}

impl CompactBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            options: CompactOptions::default(),
            bad_option: None,
            where_filter: None,
            now: filter::statement_now(),
            partitions: None,
            roll_up: BTreeMap::new(),
            sort_by: None,
            distributed: None,
        }
    }

    /// Runs the rewrites on `floe worker` processes through a task queue
    /// ([`distributed`]); planning and commits stay here.
    pub fn with_distributed(mut self, d: distributed::Distributed) -> Self {
        self.distributed = Some(d);
        self
    }

    /// Sets the options (typed; unset ones come from `floe.compact.*` table properties, then
    /// Iceberg's defaults).
    pub fn with_options(mut self, options: CompactOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets one option by its Iceberg name from text (`--option K=V`), parsed here
    /// ([`CompactOptions::set`]); a bad one fails `plan`/`execute`, naming it.
    pub fn with_option(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        let (key, value) = (key.into(), value.to_string());
        if self.options.set(&key, &value).is_err() && self.bad_option.is_none() {
            self.bad_option = Some((key, value));
        }
        self
    }

    /// Only compacts files that may hold rows matching this filter.
    pub fn with_where(mut self, filter: Option<String>) -> Self {
        self.where_filter = filter;
        self
    }

    /// Only compacts the file groups of these partitions, named as [`partition_path`] names
    /// them (`None`: every partition). `floe maintain` uses it to leave partitions still being
    /// written alone.
    pub fn with_partitions(mut self, partitions: Option<BTreeSet<String>>) -> Self {
        self.partitions = partitions.map(Arc::new);
        self
    }

    /// Rolls these partitions up (`floe.maintain.compact.roll-up-fan-in`): in each, only the
    /// data files under its bound (and under `min-file-size-bytes`) are candidates, and two
    /// make a group; other partitions are planned as usual.
    pub fn with_roll_up(mut self, roll_up: BTreeMap<String, u64>) -> Self {
        self.roll_up = roll_up;
        self
    }

    /// Writes each output sorted: `col [asc|desc] [nulls first|last], ...` (default: the
    /// table's sort order, if any).
    pub fn with_sort_by(mut self, sort_by: Option<String>) -> Self {
        self.sort_by = sort_by;
        self
    }

    /// Receives progress events: the rewrite phase, one step per file group.
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.ctx.progress = Some(Arc::new(f));
        self
    }

    /// The options in effect for `table`: the caller's, then `floe.compact.*` properties.
    pub fn effective_options(&self, table: &Table) -> Result<CompactOptions> {
        if let Some((key, value)) = &self.bad_option {
            // Parsing it again gives the error, naming the option.
            CompactOptions::default().set(key, value)?;
        }
        self.options
            .clone()
            .with_table_defaults(table.metadata().properties())
    }

    /// The planner options in effect for `table`: explicit options, then `floe.compact.*`
    /// table properties, then Iceberg's defaults.
    pub fn plan_options(&self, table: &Table) -> Result<PlanOptions> {
        self.effective_options(table)?
            .plan_options(table_target(table)?)
    }

    /// The row-group merge of this run: `row-group-merge` and its threshold, never for a sorted
    /// rewrite or a table that writes bloom filters (copied chunks carry none), the targets of
    /// the position deletes the scan attached (the iceberg crate attaches every position delete
    /// of a partition to each of its files), and the NaN counts of the planned files that may
    /// be copied. Those come from the manifests: `live` when planning already read them, else
    /// one read, and none at all when no planned file can be copied (small inputs under
    /// `auto`, the usual case).
    async fn merge_config(
        table: &Table,
        effective: &CompactOptions,
        sorted: bool,
        drops: &commit::DeleteDrops,
        tasks: &[FileScanTask],
        groups: &[FileGroup],
        live: &HashMap<String, crate::commit::LiveFile>,
    ) -> Result<row_group_merge::MergeConfig> {
        let (mode, min) = effective.row_group_merge();
        let blooms = table.metadata().properties().iter().any(|(k, v)| {
            k.starts_with("write.parquet.bloom-filter-enabled") && v.eq_ignore_ascii_case("true")
        });
        // Format v3: copied row groups would lose the rows' lineage columns (`_row_id`,
        // `_last_updated_sequence_number`), which every rewritten row must carry.
        let lineage = table.metadata().format_version() >= iceberg::spec::FormatVersion::V3;
        if mode == RowGroupMerge::Never || sorted || blooms || lineage {
            return Ok(row_group_merge::MergeConfig::never());
        }
        let mut config = row_group_merge::MergeConfig {
            mode,
            min_row_group_bytes: min,
            nans: HashMap::new(),
            position_targets: drops.position_targets(),
            stats: Default::default(),
        };
        let mut candidates: BTreeSet<String> = BTreeSet::new();
        for g in groups {
            for &i in &g.files {
                if config.may_merge(&tasks[i]) {
                    candidates.insert(tasks[i].data_file_path.clone());
                }
            }
        }
        if candidates.is_empty() {
            return Ok(config);
        }
        let loaded: Vec<crate::commit::LiveFile>;
        let files: Vec<&DataFile> = if live.is_empty() {
            loaded = crate::table::manifests::live_files(table).await?;
            loaded.iter().map(|f| &f.file).collect()
        } else {
            live.values().map(|f| &f.file).collect()
        };
        config.nans = files
            .into_iter()
            .filter(|f| candidates.contains(f.file_path()))
            .map(|f| (f.file_path().to_string(), f.nan_value_counts().clone()))
            .collect();
        Ok(config)
    }

    /// Applies a run whose candidate tasks were spilled (see [`CompactWork::Spilled`]): its
    /// groups go by batches of at most `batch_files` input files (a larger group alone), each
    /// reading its tasks back from the spill, rewritten and committed before the next, so
    /// memory follows the batch, not the table. Every batch validates against the starting
    /// snapshot, like the commits of partial progress. A failing batch stops the run; earlier
    /// batches stay committed.
    async fn apply_spilled(
        self,
        mut metrics: CompactMetrics,
        snapshot_id: Option<i64>,
        p: Prepared,
        spill: Box<spill::TaskSpill>,
        batch_files: usize,
    ) -> Result<CompactMetrics> {
        let started = Instant::now();
        let lineage = p.table.metadata().format_version() >= iceberg::spec::FormatVersion::V3;
        // Each batch's report is the run's with only its groups (taken out once, not cloned
        // with every batch) and the whole plan is put back at the end.
        let all = std::mem::take(&mut metrics.plan.groups);
        let batches = batch_groups(&all, batch_files);
        let mut total = Vec::with_capacity(batches.len());
        for batch in &batches {
            let mut groups: Vec<FileGroup> = Vec::with_capacity(batch.len());
            let mut indexes = Vec::new();
            for &g in batch {
                let mut group = all[g].clone();
                let first = indexes.len();
                indexes.extend(group.files.iter().copied());
                group.files = (first..indexes.len()).collect();
                groups.push(group);
            }
            let tasks = spill.read(&indexes)?;
            // Format v3: the rows' lineage comes from the manifest entries of these files.
            let live: HashMap<String, crate::commit::LiveFile> = if lineage {
                let paths: std::collections::HashSet<&str> =
                    tasks.iter().map(|t| t.data_file_path.as_str()).collect();
                crate::table::manifests::live_files_where(&p.table, |f| paths.contains(f))
                    .await?
                    .into_iter()
                    .map(|f| (f.file.file_path().to_string(), f))
                    .collect()
            } else {
                HashMap::new()
            };
            let mut report = metrics.clone();
            report.plan.groups = groups;
            let prepared = Prepared {
                table: p.table.clone(),
                effective: p.effective.clone(),
                opts: p.opts.clone(),
                sort_keys: p.sort_keys.clone(),
                concurrency: p.concurrency,
                partial: p.partial,
                max_commits: p.max_commits,
                tasks,
                live,
                dvs: p.dvs.clone(),
                planning: std::time::Duration::ZERO,
            };
            let planned =
                Planned::new(report, snapshot_id, CompactWork::Groups(Box::new(prepared)));
            total.push(self.clone().apply_boxed(planned).await?);
        }
        let mut m = CompactMetrics::of_batches(total)?;
        metrics.plan.groups = all;
        m.plan = metrics.plan;
        let elapsed = started.elapsed() + p.planning;
        m.duration_ms = elapsed.as_millis() as u64;
        m.mb_per_s = m.rewritten_bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64().max(1e-9);
        Ok(m)
    }
}

/// Groups (indexes, in plan order) in batches of at most `limit` input files; a group of more
/// is a batch of its own.
fn batch_groups(groups: &[FileGroup], limit: usize) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut current = Vec::new();
    let mut held = 0usize;
    for (i, g) in groups.iter().enumerate() {
        if held > 0 && held + g.input_files > limit {
            batches.push(std::mem::take(&mut current));
            held = 0;
        }
        current.push(i);
        held += g.input_files;
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// What [`CompactBuilder`]'s `apply` needs beyond the report: the scan it planned on.
pub enum CompactWork {
    /// No group to rewrite.
    Nothing,
    /// The file groups of the report, over these scan tasks of `table` (the starting
    /// snapshot: outputs take its sequence number, commits validate against it).
    Groups(Box<Prepared>),
    /// Past `plan-batch-files` candidates: the groups' tasks are in a local file, read back
    /// batch by batch (at most `batch_files` input files each) when applied.
    Spilled {
        prepared: Box<Prepared>,
        spill: Box<spill::TaskSpill>,
        batch_files: usize,
    },
}

/// A planned run's scan and settings.
pub struct Prepared {
    table: Table,
    effective: CompactOptions,
    opts: PlanOptions,
    sort_keys: Option<Arc<sort::SortSpec>>,
    concurrency: usize,
    partial: bool,
    max_commits: usize,
    tasks: Vec<FileScanTask>,
    live: HashMap<String, crate::commit::LiveFile>,
    /// The deletion vectors the tasks carry (format v3).
    dvs: crate::table::deletion_vector::DeletionVectors,
    planning: std::time::Duration,
}

impl std::fmt::Debug for CompactWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompactWork::Nothing => f.write_str("Nothing"),
            CompactWork::Groups(p) => write!(f, "Groups({} tasks)", p.tasks.len()),
            CompactWork::Spilled { spill, .. } => write!(f, "Spilled({} tasks)", spill.len()),
        }
    }
}

/// A compaction's plan: the dry-run report (options, file groups, their [`Cost`]) and the scan
/// it was planned on.
pub type CompactPlan = Planned<CompactMetrics, CompactWork>;

impl CompactPlan {
    /// Keeps only the file groups of `partitions` (a scheduler's cut of the plan it scored).
    pub fn retain_partitions(&mut self, partitions: &BTreeSet<String>) {
        let m = &mut self.report;
        m.plan.groups.retain(|g| partitions.contains(&g.partition));
    }
}

impl Operation for CompactBuilder {
    type Plan = CompactPlan;
    type Metrics = CompactMetrics;

    /// Scans the table and plans its file groups, changing nothing.
    fn plan(&self) -> impl std::future::Future<Output = Result<CompactPlan>> + Send {
        self.plan_boxed()
    }

    /// Rewrites the planned groups, max-concurrent-file-group-rewrites at a time, and commits
    /// them against the table as it then is (a group whose inputs changed fails alone).
    fn apply(
        self,
        planned: CompactPlan,
    ) -> impl std::future::Future<Output = Result<CompactMetrics>> + Send {
        self.apply_boxed(planned)
    }
}

/// A boxed future (the plan and apply of a batched run call themselves per batch).
type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'a>>;

impl CompactBuilder {
    fn plan_boxed(&self) -> Boxed<'_, CompactPlan> {
        Box::pin(self.plan_now())
    }

    fn apply_boxed(self, planned: CompactPlan) -> Boxed<'static, CompactMetrics> {
        Box::pin(self.apply_now(planned))
    }

    async fn plan_now(&self) -> Result<CompactPlan> {
        let started = Instant::now();
        let table = self.ctx.load().await?;
        let snapshot_id = snapshot_of(&table);
        // The options, parsed once for the whole run.
        let effective = self.effective_options(&table)?;
        let opts = effective.plan_options(table_target(&table)?)?;
        let arrow_schema: arrow_schema::SchemaRef = Arc::new(
            iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())?,
        );
        let sort_keys: Option<Arc<sort::SortSpec>> = match &self.sort_by {
            Some(spec) => Some(Arc::new(sort::parse_sort_by(spec, &arrow_schema)?)),
            None => sort::table_sort_order(&table, &arrow_schema)?.map(Arc::new),
        };
        // Iceberg's RewriteDataFiles refuses both when not positive (max-commits only with
        // partial progress, the only time it is read).
        let concurrency = effective.max_concurrent()?;
        let (partial, max_commits) = effective.partial_progress()?;

        // Only possible candidates are held: a file of the right size with no deletes to apply
        // is never rewritten (with a single spec; after partition evolution every file is
        // held, its spec is known only from the manifests). Roll-up bounds are lower than
        // min-file-size-bytes, so they select among these.
        let single_spec = table.metadata().partition_specs_iter().len() == 1;
        let default_spec = table.metadata().default_partition_spec_id();
        let partition_of =
            |t: &FileScanTask| partition_path(&table, default_spec, t.partition.as_ref());
        let may_plan = |t: &FileScanTask| {
            // Another spec is possible for any file while the table has several.
            opts.is_candidate(t.file_size_in_bytes, t.deletes.len(), !single_spec)
                // A batch (or `floe maintain`'s partitions) holds only its partitions' files.
                && match (&self.partitions, single_spec) {
                    (Some(keep), true) => keep.contains(&partition_of(t)),
                    _ => true,
                }
        };
        // Past `plan-batch-files` candidates the tasks are spilled to a local file and the
        // run goes by batches of file groups (with one spec: with several, a file's spec and
        // the partition its rows land in come from the manifest entries, held in memory).
        let limit = if single_spec {
            effective.plan_batch_files()
        } else {
            usize::MAX
        };
        let (scanned, live_before, dvs) = plan_files(
            &table,
            self.where_filter.as_deref(),
            self.now,
            may_plan,
            limit,
            |i, t| plan_file(i, t, default_spec, t.partition.as_ref(), None, &table),
        )
        .await?;
        let (tasks, plan_files, live, spill) = match scanned {
            rewrite::Scanned::Tasks(tasks) => {
                let (plan_files, live) = Self::describe_tasks(&table, &tasks).await?;
                (tasks, plan_files, live, None)
            }
            rewrite::Scanned::Spilled(spill, described) => {
                (Vec::new(), described, HashMap::new(), Some(spill))
            }
        };
        let mut plan = plan_with_roll_up(&plan_files, &opts, &self.roll_up);
        drop(plan_files);
        plan.live_files = live_before;
        if let Some(keep) = &self.partitions {
            plan.groups.retain(|g| keep.contains(&g.partition));
        }
        let report = CompactMetrics {
            table: ident_string(&self.ctx.ident),
            dry_run: true,
            options: opts.clone(),
            max_concurrent_file_group_rewrites: concurrency,
            partial_progress: partial,
            live_files_before: live_before,
            live_files_after: live_before,
            rewritten_files: 0,
            added_files: 0,
            rewritten_bytes: 0,
            added_bytes: 0,
            rows: 0,
            commits: vec![],
            removed_dangling_deletes: 0,
            removed_delete_files: 0,
            removed_position_deletes: 0,
            failed_groups: vec![],
            failed_data_files_count: 0,
            row_group_merge: Default::default(),
            plan_batches: match &spill {
                Some(_) => batch_groups(&plan.groups, limit).len(),
                None => 1,
            },
            distributed: None,
            duration_ms: started.elapsed().as_millis() as u64,
            mb_per_s: 0.0,
            plan,
        };
        let work = if report.plan.groups.is_empty() {
            CompactWork::Nothing
        } else {
            let prepared = Box::new(Prepared {
                table,
                effective,
                opts,
                sort_keys,
                concurrency,
                partial,
                max_commits,
                tasks,
                live,
                dvs,
                planning: started.elapsed(),
            });
            match spill {
                None => CompactWork::Groups(prepared),
                Some(spill) => CompactWork::Spilled {
                    prepared,
                    spill,
                    batch_files: limit,
                },
            }
        };
        Ok(Planned::new(report, snapshot_id, work))
    }

    /// What the planner needs of each in-memory task. Scan tasks carry the partition tuple
    /// but not the spec id: with a single spec (the common case) that is the default;
    /// otherwise both come from the manifests. A format v3 table needs the manifest entries
    /// too: each file's row lineage (first row id, sequence number) goes into the rewritten
    /// rows.
    async fn describe_tasks(
        table: &Table,
        tasks: &[FileScanTask],
    ) -> Result<(Vec<PlanFile>, HashMap<String, crate::commit::LiveFile>)> {
        let md = table.metadata();
        let lineage = md.format_version() >= iceberg::spec::FormatVersion::V3;
        let live: HashMap<String, crate::commit::LiveFile> =
            if tasks.is_empty() || (md.partition_specs_iter().len() == 1 && !lineage) {
                HashMap::new()
            } else {
                crate::table::manifests::live_files(table)
                    .await?
                    .into_iter()
                    .map(|f| (f.file.file_path().to_string(), f))
                    .collect()
            };
        let plan_files = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let entry = live.get(&t.data_file_path);
                let (spec_id, partition) = match entry {
                    Some(f) => (f.spec_id, Some(f.file.partition())),
                    None => (md.default_partition_spec_id(), t.partition.as_ref()),
                };
                plan_file(i, t, spec_id, partition, entry.map(|f| &f.file), table)
            })
            .collect();
        Ok((plan_files, live))
    }

    async fn apply_now(self, planned: CompactPlan) -> Result<CompactMetrics> {
        let started = Instant::now();
        let mut metrics = planned.report;
        metrics.dry_run = false;
        let p = match planned.work {
            CompactWork::Nothing => {
                self.ctx
                    .report(&Progress::start(Phase::Write, Amount::default()));
                return Ok(metrics);
            }
            CompactWork::Spilled {
                prepared,
                spill,
                batch_files,
            } => {
                let snapshot_id = planned.snapshot_id;
                return self
                    .apply_spilled(metrics, snapshot_id, *prepared, spill, batch_files)
                    .await;
            }
            CompactWork::Groups(p) => *p,
        };
        if let (Some(d), false) = (&self.distributed, metrics.plan.groups.is_empty()) {
            let d = d.clone();
            return self.apply_distributed(&d, metrics, p, started).await;
        }
        // The report may have been cut (`retain_partitions`): nothing left is nothing to do.
        let mut progress = Progress::start(
            Phase::Write,
            Amount {
                steps: metrics.plan.groups.len() as u64,
                files: metrics.plan.input_files() as u64,
                bytes: metrics.plan.input_bytes(),
                rows: 0,
            },
        );
        self.ctx.report(&progress);
        if metrics.plan.groups.is_empty() {
            return Ok(metrics);
        }
        let Prepared {
            table,
            effective,
            opts,
            sort_keys,
            concurrency,
            partial,
            max_commits,
            tasks,
            live,
            dvs,
            planning,
        } = p;

        let groups = metrics.plan.groups.clone();
        let mut drops = self.delete_drops(&table, &tasks, &groups).await?;
        let tasks = Arc::new(tasks);
        let write_options = WriteOptions {
            target_file_size_bytes: Some(opts.target_file_size_bytes),
            ..Default::default()
        };
        let mut rows_total = 0u64;
        let chunk = commit_chunk(groups.len(), partial, max_commits);
        // Each group is split into jobs of about one output file, run
        // max-concurrent-file-group-rewrites at a time; a group is done when all its jobs are.
        let jobs = jobs_of(&groups, &tasks, &opts, sort_keys.is_some());
        let mut pending: Vec<usize> = vec![0; groups.len()];
        for (gi, _) in &jobs {
            pending[*gi] += 1;
        }
        let mut partial: Vec<GroupResult> = (0..groups.len())
            .map(|group| GroupResult {
                group,
                files: vec![],
                rows: 0,
            })
            .collect();
        let lineage = (table.metadata().format_version() >= iceberg::spec::FormatVersion::V3)
            .then(|| Arc::new(crate::table::manifests::lineage_of(live.values())));
        let shared = Arc::new(parallel::JobShared {
            cores: Arc::new(tokio::sync::Semaphore::new(parallel::cores())),
            equality: Default::default(),
            dvs,
            lineage,
            merge: Arc::new(
                Self::merge_config(
                    &table,
                    &effective,
                    sort_keys.is_some(),
                    &drops,
                    &tasks,
                    &groups,
                    &live,
                )
                .await?,
            ),
        });
        let mut results = futures::stream::iter(jobs.into_iter().map(|(gi, files)| {
            let table = table.clone();
            let shared = shared.clone();
            let members: Vec<FileScanTask> = files.iter().map(|&i| tasks[i].clone()).collect();
            let write_options = write_options.clone();
            let sort_keys = sort_keys.clone();
            let spec_id = groups[gi].spec_id;
            // A task per job: encoding (the costly half) of concurrent jobs then runs on
            // every core, not on the one polling this stream.
            async move {
                tokio::spawn(async move {
                    rewrite_group(
                        &table,
                        gi,
                        spec_id,
                        members,
                        &write_options,
                        sort_keys.as_deref(),
                        &shared,
                    )
                    .await
                })
                .await
                .map_err(Error::task("compaction group"))?
            }
        }))
        .buffer_unordered(concurrency);

        let mut done: Vec<GroupResult> = Vec::new();
        let mut first_error = None;
        while let Some(r) = results.next().await {
            match r {
                Ok(job) => {
                    rows_total += job.rows;
                    let gi = job.group;
                    partial[gi].files.extend(job.files);
                    partial[gi].rows += job.rows;
                    pending[gi] -= 1;
                    if pending[gi] == 0 {
                        progress.done += Amount {
                            steps: 1,
                            files: groups[gi].input_files as u64,
                            bytes: groups[gi].input_bytes,
                            rows: partial[gi].rows,
                        };
                        self.ctx.report(&progress);
                        done.push(std::mem::replace(
                            &mut partial[gi],
                            GroupResult {
                                group: gi,
                                files: vec![],
                                rows: 0,
                            },
                        ));
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
            if first_error.is_none() && done.len() >= chunk {
                self.commit_groups(
                    &table,
                    &tasks,
                    std::mem::take(&mut done),
                    &mut drops,
                    &mut metrics,
                )
                .await?;
            }
        }
        drop(results);
        if let Some(e) = first_error {
            // A rewrite failed (I/O, corrupt file): remove what the unfinished groups wrote.
            let mut written = Ledger::of(&table);
            for g in done.iter().chain(&partial) {
                written.stage_files(&g.files);
            }
            written.discard().await;
            return Err(e);
        }
        if !done.is_empty() {
            self.commit_groups(&table, &tasks, done, &mut drops, &mut metrics)
                .await?;
        }
        metrics.rows = rows_total;
        metrics.row_group_merge = shared.merge.stats.report();
        self.finish(&mut metrics, &effective, started.elapsed() + planning)
            .await?;
        Ok(metrics)
    }

    /// The end of an applied run, local or distributed: dangling deletes removed when asked,
    /// then the live file count, the duration and the rate.
    async fn finish(
        &self,
        metrics: &mut CompactMetrics,
        effective: &CompactOptions,
        elapsed: std::time::Duration,
    ) -> Result<()> {
        if effective.remove_dangling_deletes.unwrap_or(false) && !metrics.commits.is_empty() {
            self.remove_dangling_deletes(metrics).await?;
        }
        metrics.live_files_after =
            metrics.live_files_before + metrics.added_files - metrics.rewritten_files;
        metrics.duration_ms = elapsed.as_millis() as u64;
        metrics.mb_per_s =
            metrics.rewritten_bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64().max(1e-9);
        Ok(())
    }
}

/// Finished groups per commit: all at once, or with partial progress enough for at most
/// `max_commits` commits.
fn commit_chunk(groups: usize, partial: bool, max_commits: usize) -> usize {
    if partial {
        groups.div_ceil(max_commits)
    } else {
        groups
    }
}

/// The planned groups split into jobs of about one output file each, or with `sorted` of up to
/// `sort-job-size-bytes` each (a job's rows are sorted together, so its outputs hold disjoint
/// ranges): (group, task indices).
fn jobs_of(
    groups: &[FileGroup],
    tasks: &[FileScanTask],
    opts: &PlanOptions,
    sorted: bool,
) -> Vec<(usize, Vec<usize>)> {
    let sort_jobs;
    let opts = if sorted {
        let size = opts.sort_job_size_bytes.max(opts.target_file_size_bytes);
        sort_jobs = PlanOptions {
            target_file_size_bytes: size,
            min_file_size_bytes: (size as f64 * 0.75) as u64,
            ..opts.clone()
        };
        &sort_jobs
    } else {
        opts
    };
    let mut jobs = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let sized: Vec<(usize, u64)> = g
            .files
            .iter()
            .map(|&i| (i, tasks[i].file_size_in_bytes))
            .collect();
        for job in plan::split_into_jobs(&sized, opts) {
            jobs.push((gi, job));
        }
    }
    jobs
}
