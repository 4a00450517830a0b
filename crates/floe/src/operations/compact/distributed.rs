//! Distributed compaction: one coordinator plans and commits, workers rewrite.
//!
//! ```text
//!  floe compact NS.T --distributed --queue Q       floe worker --queue Q   (any number)
//!    plan (as a local run)                            claim a task (SKIP LOCKED, leased)
//!    -> one task per rewrite job  ──── queue ────>    read inputs, write outputs (table's
//!       (TaskSpec: files, storage, settings)            storage), renew the lease meanwhile
//!    <- finished groups' outputs   <─── queue ─────   report outputs (or delete them when
//!    -> commit batches (validated rewrite commit)       the task is no longer its own)
//! ```
//!
//! The pattern is the one of Amoro's optimizers and RisingWave's compactor nodes: a planner,
//! workers that pull units of work under a lease, one committer per table. The queue is
//! [`crate::coordination::tasks`]; the rewrite a worker runs is the local one
//! ([`super::rewrite::rewrite_group`]), on a table it rebuilds from the task, and the commits
//! are the local run's ([`CompactBuilder::commit_groups`]): the same validation against the
//! planned snapshot, the same one-by-one retry that fails only the groups a concurrent writer
//! touched.
//!
//! **What a worker needs, without a catalog**: the task names the planned snapshot's
//! `metadata.json` (immutable: the worker reads exactly the table the coordinator planned on),
//! the input files as scan tasks (with their delete files, deletion vectors and row lineage)
//! and the storage properties of the table's FileIO. Secret properties (keys, tokens,
//! passwords: floe's secret-name rules, the ones its masking uses) are never written to the
//! queue: a worker takes its credentials from its own configuration, its catalog's storage
//! settings in `floe.toml` or `FLOE_CATALOG__*` when it has one, else the storage's default
//! chain (`AWS_*` variables, a Kubernetes service account's role): what a pod usually has. A
//! worker that lacks them fails the task naming the storage error; the task is retried
//! elsewhere up to [`MAX_ATTEMPTS`](crate::coordination::tasks::MAX_ATTEMPTS) times.
//!
//! **Safety** (nothing lost, nothing duplicated, no live file deleted):
//! - A group is committed only when every one of its jobs reported, in one validated rewrite
//!   commit; its inputs leave the table in that same commit.
//! - A worker killed mid-task: its lease expires, another worker claims the task (attempt + 1)
//!   and rewrites it; what the dead one wrote was never reported, so nothing references it
//!   (orphans, for `remove-orphan-files`).
//! - A worker that lost its task (lease expired, run ended) deletes what it wrote: the report
//!   names the attempt, so a lost attempt's outputs can never be committed.
//! - A coordinator killed: its run stops being renewed; workers claim none of its tasks and
//!   drop the ones they hold; nothing of the run was committed except whole groups before the
//!   kill. A later run on the table marks the dead run abandoned and plans again from the
//!   table (already compacted groups are no candidates any more). Outputs reported to the dead
//!   run and not committed are left for orphan removal: the dead coordinator may have been
//!   committing them when it stopped, and only orphan removal can prove a file unreferenced.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::scan::FileScanTask;
use iceberg::spec::DataFile;
use iceberg::table::Table;
use serde::{Deserialize, Serialize};

use super::{queue_checks, row_group_merge, CompactBuilder, CompactMetrics, GroupResult};
use crate::base::cost::{Amount, Phase, Progress};
use crate::base::error::{Error, Result};
use crate::commit::Ledger;
use crate::coordination::tasks::WorkerShare;
use crate::coordination::Store;
use crate::table::deletion_vector::DvLocation;
use crate::table::lineage::FileLineage;

/// How a coordinator runs its compaction through the queue.
#[derive(Clone)]
pub struct Distributed {
    pub store: Arc<Store>,
    /// This coordinator's name in the queue (host:pid by default).
    pub coordinator: String,
    /// A run not renewed for this long is abandoned; a task not renewed is claimed again.
    pub lease_ttl: Duration,
    /// How often the coordinator looks at the queue (besides being woken by its workers on
    /// PostgreSQL): [`Distributed::POLL`] unless a test wants otherwise.
    pub poll: Duration,
    /// Give up when no worker holds a live task for this long while tasks wait (`None`: wait
    /// as long as it takes, saying so every 10 s). The run is then failed: its tasks are
    /// dropped, and the outputs already reported to it, which this live coordinator has not
    /// committed, are deleted.
    pub worker_timeout: Option<Duration>,
}

impl Distributed {
    /// The coordinator's default look at the queue.
    pub const POLL: Duration = Duration::from_millis(500);
}

/// What the queue did for a distributed run (the `distributed` part of the report).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DistributedReport {
    pub run_id: String,
    pub coordinator: String,
    pub tasks: usize,
    /// Claims beyond the first, over all tasks (a worker died or lost its lease).
    pub retried_claims: u64,
    pub workers: Vec<WorkerShare>,
    /// Runs of this table whose coordinator had stopped, found and marked abandoned.
    pub abandoned_runs: Vec<String>,
}

/// One rewrite job, as a worker receives it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskSpec {
    /// `ns.table`, for messages.
    pub table: String,
    /// The planned snapshot's metadata file: the worker reads the table exactly as planned.
    pub metadata_location: String,
    /// The table FileIO's properties, secrets left out (see the module docs).
    pub storage: BTreeMap<String, String>,
    pub group: usize,
    pub spec_id: i32,
    pub target_file_size_bytes: Option<u64>,
    /// `--sort-by`, if given (else the table's sort order, as the coordinator took it).
    pub sort_by: Option<String>,
    pub members: Vec<Member>,
    pub merge: row_group_merge::MergeSettings,
    /// Deletion vectors of the members (format v3), and every Puffin file of the snapshot.
    pub dvs: Vec<(String, DvLocation)>,
    pub puffin: Vec<String>,
    /// Format v3: the members' row lineage.
    pub lineage: Option<Vec<(String, FileLineage)>>,
}

impl TaskSpec {
    /// Every file the task reads: its inputs, their delete files, deletion vectors and the
    /// snapshot's Puffin files.
    pub fn reads(&self) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .flat_map(|m| {
                std::iter::once(m.task.data_file_path.as_str())
                    .chain(m.task.deletes.iter().map(|d| d.file_path.as_str()))
            })
            .chain(
                self.dvs
                    .iter()
                    .flat_map(|(data, dv)| [data.as_str(), dv.puffin.as_str()]),
            )
            .chain(self.puffin.iter().map(String::as_str))
    }
}

/// One input file of a task: the iceberg crate's scan task, whose partition, spec and name
/// mapping it does not serialize, with those three carried beside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    pub task: FileScanTask,
    /// The partition tuple, as Iceberg's single-value JSON of the partition type of spec
    /// `spec_id` (the file's spec: the scan task's, else its group's).
    pub partition: Option<serde_json::Value>,
    pub spec_id: i32,
    pub partition_spec: Option<iceberg::spec::PartitionSpec>,
    pub name_mapping: Option<iceberg::spec::NameMapping>,
}

impl Member {
    /// `t`, whose partition is of spec `spec` unless the task names its own.
    fn of(t: &FileScanTask, spec: &iceberg::spec::PartitionSpec) -> Result<Self> {
        let mut task = t.clone();
        let partition_spec = task.partition_spec.take().map(|s| (*s).clone());
        let name_mapping = task.name_mapping.take().map(|m| (*m).clone());
        let spec = partition_spec.as_ref().unwrap_or(spec);
        let partition = match task.partition.take() {
            Some(p) => {
                let pt = spec.partition_type(&t.schema)?;
                Some(
                    iceberg::spec::Literal::Struct(p)
                        .try_into_json(&iceberg::spec::Type::Struct(pt))?,
                )
            }
            None => None,
        };
        Ok(Self {
            task,
            partition,
            spec_id: spec.spec_id(),
            partition_spec,
            name_mapping,
        })
    }

    pub(super) fn into_task(self, table: &Table) -> Result<FileScanTask> {
        let mut task = self.task;
        task.partition = match self.partition {
            None => None,
            Some(v) => {
                let spec = match &self.partition_spec {
                    Some(s) => s.clone(),
                    None => (**table
                        .metadata()
                        .partition_spec_by_id(self.spec_id)
                        .ok_or_else(|| Error::Refused {
                            operation: "rewrite a compaction task".into(),
                            reason: format!(
                                "{}: partition spec {} is not the table's",
                                task.data_file_path, self.spec_id
                            ),
                        })?)
                    .clone(),
                };
                let pt = spec.partition_type(&task.schema)?;
                match iceberg::spec::Literal::try_from_json(v, &iceberg::spec::Type::Struct(pt))? {
                    Some(iceberg::spec::Literal::Struct(s)) => Some(s),
                    _ => Some(iceberg::spec::Struct::empty()),
                }
            }
        };
        task.partition_spec = self.partition_spec.map(Arc::new);
        task.name_mapping = self.name_mapping.map(Arc::new);
        Ok(task)
    }
}

/// A reported output file: its spec and iceberg's data file JSON.
#[derive(Serialize, Deserialize)]
struct OutputFile {
    spec_id: i32,
    data_file: String,
}

/// The properties of `table`'s FileIO that may be written to the queue.
fn shareable_storage(table: &Table) -> BTreeMap<String, String> {
    table
        .file_io()
        .config()
        .props()
        .iter()
        .filter(|(k, _)| !crate::base::secrets::is_secret_name(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub(super) fn encode_outputs(table: &Table, files: &[DataFile]) -> Result<String> {
    // Outputs are written in the table's default spec (the parallel rewrite keeps a group's
    // partition only when its spec is the default; the writer path partitions by it).
    let md = table.metadata();
    let spec = md.default_partition_spec();
    let spec_id = spec.spec_id();
    let pt = spec.partition_type(md.current_schema())?;
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let data_file = iceberg::spec::serialize_data_file_to_json(
            f.clone(),
            &pt,
            iceberg::spec::FormatVersion::V2,
        )?;
        out.push(OutputFile { spec_id, data_file });
    }
    Ok(serde_json::to_string(&out).expect("serializable"))
}

fn decode_outputs(table: &Table, run_id: &str, task: i64, stored: &str) -> Result<Vec<DataFile>> {
    let bad = |reason: String| Error::Refused {
        operation: "commit a distributed compaction".into(),
        reason: format!("run {run_id}, task {task}: {reason}"),
    };
    let files: Vec<OutputFile> =
        serde_json::from_str(stored).map_err(|e| bad(format!("unreadable outputs: {e}")))?;
    let md = table.metadata();
    let schema = md.current_schema();
    let default_spec = md.default_partition_spec_id();
    files
        .into_iter()
        .map(|f| {
            // Outputs are written in the default spec (see `encode_outputs`).
            if f.spec_id != default_spec {
                return Err(bad(format!(
                    "an output in partition spec {}, not the table's default {default_spec}",
                    f.spec_id
                )));
            }
            let spec = md
                .partition_spec_by_id(f.spec_id)
                .ok_or_else(|| bad(format!("unknown partition spec {}", f.spec_id)))?;
            let pt = spec.partition_type(schema)?;
            iceberg::spec::deserialize_data_file_from_json(&f.data_file, f.spec_id, &pt, schema)
                .map_err(|e| bad(format!("unreadable output: {e}")))
        })
        .collect()
}

/// A task's outputs decoded and checked against its plan ([`queue_checks::check_outputs`]);
/// the error names the run, the task and what was wrong.
fn accepted_outputs(
    table: &Table,
    run_id: &str,
    task: i64,
    stored: &str,
    plan: &Plan,
    accepted: &std::collections::HashSet<String>,
) -> Result<Vec<DataFile>> {
    let files = decode_outputs(table, run_id, task, stored)?;
    let planned = usize::try_from(task)
        .ok()
        .and_then(|t| plan.tasks.get(t))
        .ok_or_else(|| Error::Refused {
            operation: "commit a distributed compaction".into(),
            reason: format!("run {run_id}, task {task}: not a task this coordinator queued"),
        })?;
    queue_checks::check_outputs(
        table,
        run_id,
        task,
        planned,
        &files,
        &plan.inputs,
        &plan.live,
        accepted,
    )
    .map_err(|why| Error::Refused {
        operation: "commit a distributed compaction".into(),
        reason: format!("run {run_id}, task {task}: {why}"),
    })?;
    Ok(files)
}

/// The reported outputs of `tasks` this coordinator may delete ([`queue_checks::owned`]):
/// files of its own run; whatever else a report names is left to orphan removal.
async fn owned_outputs(
    store: &Store,
    table: &Table,
    run_id: &str,
    tasks: &[i64],
    plan: &Plan,
) -> Vec<DataFile> {
    let mut out = Vec::new();
    match store.task_outputs(run_id, tasks).await {
        Ok(outs) => {
            for (task, stored) in outs {
                match decode_outputs(table, run_id, task, &stored) {
                    Ok(files) => out.extend(files.into_iter().filter(|f| {
                        let ok = queue_checks::owned(
                            table,
                            run_id,
                            task,
                            f.file_path(),
                            &plan.inputs,
                            &plan.live,
                        );
                        if !ok {
                            tracing::warn!(
                                "run {run_id}, task {task}: output {} is not a file of this run; \
                                 left to remove-orphan-files",
                                f.file_path()
                            );
                        }
                        ok
                    })),
                    Err(e) => tracing::warn!("{e}; its outputs are left to remove-orphan-files"),
                }
            }
        }
        Err(e) => tracing::warn!("reading run {run_id}'s outputs: {e}"),
    }
    out
}

/// What the coordinator queued: each task's plan (by task id), every input, and the live files
/// it knew at planning.
struct Plan {
    tasks: Vec<queue_checks::PlannedTask>,
    inputs: std::collections::HashSet<String>,
    live: std::collections::HashSet<String>,
}

/// The group indices' tasks, by group.
fn tasks_by_group(rows: &[crate::coordination::tasks::TaskRow]) -> BTreeMap<usize, Vec<usize>> {
    let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        by.entry(r.group_index as usize).or_default().push(i);
    }
    by
}

impl CompactBuilder {
    /// Runs a planned compaction through the queue (see the module docs): the tasks are
    /// queued, finished groups are committed as they come (in batches with partial
    /// progress, else all at the end), and the coordinator says what it waits for.
    pub(super) async fn apply_distributed(
        &self,
        d: &Distributed,
        mut metrics: CompactMetrics,
        p: super::Prepared,
        started: Instant,
    ) -> Result<CompactMetrics> {
        let super::Prepared {
            table,
            effective,
            opts,
            sort_keys,
            partial,
            max_commits,
            tasks,
            live,
            dvs,
            planning,
            ..
        } = p;
        let metadata_location = table
            .metadata_location()
            .ok_or_else(|| Error::Refused {
                operation: "distribute a compaction".into(),
                reason: "the table has no metadata file to give the workers".into(),
            })?
            .to_string();
        let groups = metrics.plan.groups.clone();
        let mut drops = self.delete_drops(&table, &tasks, &groups).await?;
        let merge = Self::merge_config(
            &table,
            &effective,
            sort_keys.is_some(),
            &drops,
            &tasks,
            &groups,
            &live,
        )
        .await?;
        let lineage = (table.metadata().format_version() >= iceberg::spec::FormatVersion::V3)
            .then(|| crate::table::manifests::lineage_of(live.values()));
        let storage = shareable_storage(&table);
        let table_name = crate::catalog::ident_string(&self.ctx.ident);
        let scope = format!("{}.{table_name}", self.ctx.catalog.name());
        let puffin: Vec<String> = dvs.puffin_files();
        let mut specs: Vec<(usize, String)> = Vec::new();
        // What each task is, kept here: the queue's rows are checked against it.
        let mut plan = Plan {
            tasks: Vec::new(),
            inputs: tasks.iter().map(|t| t.data_file_path.clone()).collect(),
            live: live.keys().cloned().collect(),
        };
        for (gi, job) in super::jobs_of(&groups, &tasks, &opts, sort_keys.is_some()) {
            let g = &groups[gi];
            let members: Vec<FileScanTask> = job.iter().map(|&i| tasks[i].clone()).collect();
            let paths: Vec<&str> = members.iter().map(|t| t.data_file_path.as_str()).collect();
            let rows: Option<u64> = members
                .iter()
                .map(|t| {
                    let deleted = dvs.of_file(&t.data_file_path).map_or(0, |d| d.cardinality);
                    t.record_count.map(|n| n.saturating_sub(deleted))
                })
                .sum();
            plan.tasks.push(queue_checks::PlannedTask {
                group: gi,
                rows: rows.unwrap_or(u64::MAX),
                exact: rows.is_some() && members.iter().all(|t| t.deletes.is_empty()),
            });
            let group_spec = table
                .metadata()
                .partition_spec_by_id(g.spec_id)
                .unwrap_or_else(|| table.metadata().default_partition_spec());
            let carried = members
                .iter()
                .map(|t| Member::of(t, group_spec))
                .collect::<Result<Vec<_>>>()?;
            let spec = TaskSpec {
                table: table_name.clone(),
                metadata_location: metadata_location.clone(),
                storage: storage.clone(),
                group: gi,
                spec_id: g.spec_id,
                target_file_size_bytes: Some(opts.target_file_size_bytes),
                sort_by: self.sort_by.clone(),
                merge: row_group_merge::MergeSettings::of(&merge, &members),
                dvs: paths
                    .iter()
                    .filter_map(|p| dvs.of_file(p).map(|d| (p.to_string(), d.clone())))
                    .collect(),
                puffin: puffin.clone(),
                lineage: lineage.as_ref().map(|l| {
                    paths
                        .iter()
                        .filter_map(|p| l.get(*p).map(|f| (p.to_string(), *f)))
                        .collect()
                }),
                members: carried,
            };
            specs.push((gi, serde_json::to_string(&spec).expect("serializable")));
        }

        let store = &d.store;
        let now = store.now_ms().await?;
        let abandoned = store.abandon_stale_runs(&scope, now).await?;
        let run_id = uuid::Uuid::now_v7().to_string();
        store
            .create_run(&run_id, &scope, &d.coordinator, &specs, d.lease_ttl, now)
            .await?;
        tracing::info!(
            "distributed compaction of {table_name}: run {run_id}, {} task(s) in {} group(s) queued in {}",
            specs.len(),
            groups.len(),
            store.display_uri()
        );
        let result = self
            .coordinate(
                d,
                &run_id,
                &table,
                &tasks,
                &plan,
                &mut drops,
                &mut metrics,
                super::commit_chunk(groups.len(), partial, max_commits),
            )
            .await;
        let end = store.now_ms().await.unwrap_or(now);
        let _ = store
            .finish_run(&run_id, if result.is_ok() { "done" } else { "failed" }, end)
            .await;
        result?;
        let rows = store.run_tasks(&run_id).await?;
        metrics.distributed = Some(DistributedReport {
            run_id: run_id.clone(),
            coordinator: d.coordinator.clone(),
            tasks: rows.len(),
            retried_claims: rows.iter().map(|r| (r.attempt - 1).max(0) as u64).sum(),
            workers: store.worker_shares(&run_id).await?,
            abandoned_runs: abandoned,
        });
        self.finish(&mut metrics, &effective, started.elapsed() + planning)
            .await?;
        Ok(metrics)
    }

    /// Waits for the run's groups and commits them, `chunk` finished groups per commit;
    /// returns when every group is committed or failed.
    #[allow(clippy::too_many_arguments)]
    async fn coordinate(
        &self,
        d: &Distributed,
        run_id: &str,
        table: &Table,
        tasks: &[FileScanTask],
        plan: &Plan,
        drops: &mut super::commit::DeleteDrops,
        metrics: &mut CompactMetrics,
        chunk: usize,
    ) -> Result<()> {
        let store = &d.store;
        let groups = metrics.plan.groups.clone();
        let mut progress = Progress::start(
            Phase::Write,
            Amount {
                steps: groups.len() as u64,
                files: metrics.plan.input_files() as u64,
                bytes: metrics.plan.input_bytes(),
                rows: 0,
            },
        );
        self.ctx.report(&progress);
        let mut settled = vec![false; groups.len()];
        let mut ready: Vec<(GroupResult, Vec<i64>)> = Vec::new();
        let mut last_claim = Instant::now();
        let mut last_said = Instant::now();
        let mut seen_running = 0usize;
        // Woken by the run's workers reporting (PostgreSQL); polls every `d.poll` anyway.
        let mut wakeups = store
            .wakeups(&crate::coordination::wakeups::run_channel(run_id))
            .await;
        // Since when no task had a live worker lease and nothing changed (the worker timeout).
        let mut idle_since = Instant::now();
        let mut seen_progress = (0i64, 0usize);
        loop {
            let now = store.now_ms().await?;
            if !store
                .renew_run(run_id, &d.coordinator, d.lease_ttl, now)
                .await?
            {
                return Err(Error::Refused {
                    operation: "coordinate a distributed compaction".into(),
                    reason: format!(
                        "run {run_id} is no longer this coordinator's (it was not renewed within \
                         the lease TTL of {:?}, and another coordinator marked it abandoned)",
                        d.lease_ttl
                    ),
                });
            }
            let rows = store.run_task_states(run_id).await?;
            // Only the tasks this coordinator queued, in their groups.
            let planned_group = |task: i64| {
                usize::try_from(task)
                    .ok()
                    .and_then(|t| plan.tasks.get(t))
                    .map(|p| p.group as i64)
            };
            let forged = rows
                .iter()
                .find(|r| planned_group(r.task_id) != Some(r.group_index))
                .or_else(|| {
                    (rows.len() != plan.tasks.len())
                        .then(|| rows.last())
                        .flatten()
                });
            if let Some(r) = forged {
                let why = format!(
                    "run {run_id}, task {}: the queue holds {} task(s), this one in group {}, and \
                     this coordinator queued {} ({}): the queue was changed by someone else",
                    r.task_id,
                    rows.len(),
                    r.group_index,
                    plan.tasks.len(),
                    planned_group(r.task_id).map_or("not this task".to_string(), |g| format!(
                        "this task in group {g}"
                    )),
                );
                self.give_up(
                    d,
                    run_id,
                    table,
                    plan,
                    &rows,
                    &settled,
                    std::mem::take(&mut ready),
                )
                .await;
                return Err(Error::Refused {
                    operation: "coordinate a distributed compaction".into(),
                    reason: why,
                });
            }
            for (gi, idx) in tasks_by_group(&rows) {
                if settled[gi] {
                    continue;
                }
                let of_group: Vec<&crate::coordination::tasks::TaskRow> =
                    idx.iter().map(|&i| &rows[i]).collect();
                let ids: Vec<i64> = of_group.iter().map(|r| r.task_id).collect();
                let done: Vec<i64> = of_group
                    .iter()
                    .filter(|r| r.state == "done")
                    .map(|r| r.task_id)
                    .collect();
                // A group fails when a job failed every attempt, or a report is not what this
                // coordinator planned (queue_checks); the group's outputs go, but only the
                // files this run wrote: whatever else a report names stays for orphan removal.
                let mut failure = of_group.iter().find(|r| r.state == "failed").map(|f| {
                    format!(
                        "task {} failed {} time(s) on workers: {}",
                        f.task_id,
                        f.attempt,
                        f.error.as_deref().unwrap_or("no error recorded")
                    )
                });
                let mut files = Vec::new();
                if failure.is_none() && done.len() == of_group.len() {
                    let outputs = store.task_outputs(run_id, &ids).await?;
                    let mut accepted: std::collections::HashSet<String> =
                        std::collections::HashSet::new();
                    for r in &of_group {
                        let checked = match outputs.get(&r.task_id) {
                            None => Err(Error::Refused {
                                operation: "commit a distributed compaction".into(),
                                reason: format!(
                                    "run {run_id}, task {}: done but reported no output",
                                    r.task_id
                                ),
                            }),
                            Some(out) => {
                                accepted_outputs(table, run_id, r.task_id, out, plan, &accepted)
                            }
                        };
                        match checked {
                            Ok(f) => {
                                accepted.extend(f.iter().map(|f| f.file_path().to_string()));
                                files.extend(f);
                            }
                            Err(e) => {
                                failure = Some(e.to_string());
                                break;
                            }
                        }
                    }
                }
                if let Some(why) = failure {
                    let mut written = Ledger::of(table);
                    written.stage_files(&owned_outputs(store, table, run_id, &done, plan).await);
                    written.discard().await;
                    store.settle_tasks(run_id, &ids, "dropped").await?;
                    let g = GroupResult {
                        group: gi,
                        files: vec![],
                        rows: 0,
                    };
                    tracing::warn!("distributed compaction of group {gi}: {why}");
                    self.fail(&[&g], why, metrics);
                    settled[gi] = true;
                    continue;
                }
                if done.len() == of_group.len() {
                    let rows_written: u64 = files.iter().map(|f| f.record_count()).sum();
                    progress.done += Amount {
                        steps: 1,
                        files: groups[gi].input_files as u64,
                        bytes: groups[gi].input_bytes,
                        rows: rows_written,
                    };
                    self.ctx.report(&progress);
                    metrics.rows += rows_written;
                    ready.push((
                        GroupResult {
                            group: gi,
                            files,
                            rows: rows_written,
                        },
                        ids,
                    ));
                    settled[gi] = true;
                }
            }
            let all_settled = settled.iter().all(|s| *s);
            if !ready.is_empty() && (ready.len() >= chunk || all_settled) {
                let batch = std::mem::take(&mut ready);
                let ids: Vec<i64> = batch.iter().flat_map(|(_, ids)| ids.clone()).collect();
                let results: Vec<GroupResult> = batch.into_iter().map(|(g, _)| g).collect();
                self.commit_groups(table, tasks, results, drops, metrics)
                    .await?;
                store.settle_tasks(run_id, &ids, "committed").await?;
            }
            if all_settled && ready.is_empty() {
                return Ok(());
            }
            // Say what the run waits for: tasks nobody claims mean no worker is running.
            let queued = rows.iter().filter(|r| r.state == "queued").count();
            let running = rows.iter().filter(|r| r.state == "running").count();
            let live = rows
                .iter()
                .any(|r| r.state == "running" && r.expires_ms > now);
            let progress_now = (
                rows.iter().map(|r| r.attempt).sum::<i64>(),
                rows.iter()
                    .filter(|r| r.state != "running" && r.state != "queued")
                    .count(),
            );
            if live || progress_now != seen_progress {
                idle_since = Instant::now();
                seen_progress = progress_now;
            }
            if let Some(limit) = d.worker_timeout.filter(|l| idle_since.elapsed() >= *l) {
                self.give_up(d, run_id, table, plan, &rows, &settled, ready)
                    .await;
                return Err(Error::Refused {
                    operation: "coordinate a distributed compaction".into(),
                    reason: format!(
                        "no worker worked on run {run_id} for {} (--worker-timeout) while \
                         {} task(s) waited in {}: start `floe worker --queue ...` on that \
                         database; the run's tasks were dropped and its uncommitted outputs \
                         deleted",
                        crate::base::properties::human_ms(limit.as_millis() as u64),
                        queued + running,
                        store.display_uri()
                    ),
                });
            }
            if running > 0 || running != seen_running {
                last_claim = Instant::now();
            }
            seen_running = running;
            if last_said.elapsed() >= Duration::from_secs(10) {
                last_said = Instant::now();
                if running == 0 && queued > 0 {
                    tracing::warn!(
                        "waiting for workers: {queued} task(s) queued in {}, none claimed for \
                         {}s (start `floe worker --queue ...` on that database)",
                        store.display_uri(),
                        last_claim.elapsed().as_secs()
                    );
                } else {
                    tracing::info!(
                        "waiting for workers: {running} task(s) running, {queued} queued"
                    );
                }
            }
            wakeups.wait(d.poll).await;
        }
    }

    /// Ends run `run_id` as failed by its own, live coordinator: the run is closed first (its
    /// queued and running tasks dropped, so no worker reports to it any more: a late report is
    /// refused and its worker deletes what it wrote), then the outputs reported to it and not
    /// committed are deleted. Safe here, unlike after a crash: this coordinator commits nothing
    /// else, so nothing can reference them.
    #[allow(clippy::too_many_arguments)]
    async fn give_up(
        &self,
        d: &Distributed,
        run_id: &str,
        table: &Table,
        plan: &Plan,
        rows: &[crate::coordination::tasks::TaskRow],
        settled: &[bool],
        ready: Vec<(GroupResult, Vec<i64>)>,
    ) {
        let store = &d.store;
        let now = store.now_ms().await.unwrap_or(0);
        if let Err(e) = store.finish_run(run_id, "failed", now).await {
            tracing::warn!("closing run {run_id}: {e}; its outputs are left to orphan removal");
            return;
        }
        let mut written = Ledger::of(table);
        for (g, _) in &ready {
            written.stage_files(&g.files);
        }
        let done: Vec<i64> = rows
            .iter()
            .filter(|r| {
                r.state == "done"
                    && !settled
                        .get(r.group_index.max(0) as usize)
                        .copied()
                        .unwrap_or(false)
            })
            .map(|r| r.task_id)
            .collect();
        written.stage_files(&owned_outputs(store, table, run_id, &done, plan).await);
        let ids: Vec<i64> = rows
            .iter()
            .filter(|r| r.state == "done")
            .map(|r| r.task_id)
            .collect();
        written.discard().await;
        let _ = store.settle_tasks(run_id, &ids, "dropped").await;
    }
}
