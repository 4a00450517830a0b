//! Committing a compaction: finished groups in one `replace` (one by one when validation
//! fails, so only the groups a concurrent writer touched fail), with the position delete files
//! whose every target the commit removes; dangling deletes removed; the metrics and failures
//! recorded.

use std::collections::{BTreeSet, HashMap};

use iceberg::scan::FileScanTask;
use iceberg::spec::DataFile;
use iceberg::table::Table;

use super::plan::FileGroup;
use super::{dangling, position_deletes, CompactBuilder, CompactMetrics, FailedGroup, GroupResult};
use crate::base::error::{Error, Result};
use crate::commit::{Committer, Ledger, SnapshotUpdate};

/// Position delete files a compaction may remove, and what its commits removed so far.
#[derive(Default)]
pub(super) struct DeleteDrops {
    /// Delete file -> (its target data files that were live at the start, its row count).
    targets: HashMap<String, (BTreeSet<String>, u64)>,
    /// Data files this run's commits removed.
    removed_data: std::collections::HashSet<String>,
    /// Delete files this run's commits removed.
    dropped: std::collections::HashSet<String>,
}

impl DeleteDrops {
    /// Position delete file -> the data files its rows point at (live at the start).
    pub(super) fn position_targets(&self) -> HashMap<String, BTreeSet<String>> {
        self.targets
            .iter()
            .map(|(path, (targets, _))| (path.clone(), targets.clone()))
            .collect()
    }

    /// Delete files not yet dropped whose every target is removed by this run's commits or
    /// by `removing`: the commit removing `removing` may remove them too.
    fn droppable(&self, removing: &[String]) -> Vec<String> {
        let now: std::collections::HashSet<&str> = removing.iter().map(String::as_str).collect();
        let mut out: Vec<String> = self
            .targets
            .iter()
            .filter(|(path, (targets, _))| {
                !self.dropped.contains(*path)
                    && targets
                        .iter()
                        .all(|t| now.contains(t.as_str()) || self.removed_data.contains(t))
            })
            .map(|(p, _)| p.clone())
            .collect();
        out.sort();
        out
    }

    fn committed(&mut self, removed_data: Vec<String>, dropped: &[String], m: &mut CompactMetrics) {
        self.removed_data.extend(removed_data);
        for d in dropped {
            m.removed_delete_files += 1;
            m.removed_position_deletes += self.targets.get(d).map_or(0, |t| t.1);
            self.dropped.insert(d.clone());
        }
    }
}

impl CompactBuilder {
    /// The position delete files applied to the planned groups' files, or in their partitions,
    /// with the live targets that can be known (Iceberg spec v2: `referenced_data_file`, equal `file_path` bounds, else
    /// the file's `file_path` column). Equality deletes are never candidates: they apply by
    /// sequence number to any older file in their partition.
    pub(super) async fn delete_drops(
        &self,
        table: &Table,
        tasks: &[FileScanTask],
        groups: &[FileGroup],
    ) -> Result<DeleteDrops> {
        let attached: BTreeSet<&str> = groups
            .iter()
            .flat_map(|g| g.files.iter())
            .flat_map(|&i| tasks[i].deletes.iter())
            .filter(|d| d.file_type == iceberg::spec::DataContentType::PositionDeletes)
            .map(|d| d.file_path.as_str())
            .collect();
        let deletes_in_table = table
            .metadata()
            .current_snapshot()
            .and_then(|s| {
                s.summary()
                    .additional_properties
                    .get("total-position-deletes")
            })
            .is_none_or(|n| n != "0");
        if attached.is_empty() && !deletes_in_table {
            return Ok(DeleteDrops::default());
        }
        let live = crate::table::manifests::live_files(table).await?;
        let data: std::collections::HashSet<&str> = live
            .iter()
            .filter(|f| f.file.content_type() == iceberg::spec::DataContentType::Data)
            .map(|f| f.file.file_path())
            .collect();
        // Also the position deletes of the planned partitions that no live file of theirs
        // attaches (every target gone, or older than every file left): their live targets,
        // if any, are what this run must rewrite before they can go.
        let planned: std::collections::HashSet<&str> = groups
            .iter()
            .flat_map(|g| g.files.iter())
            .map(|&i| tasks[i].data_file_path.as_str())
            .collect();
        let partitions: std::collections::HashSet<(i32, &iceberg::spec::Struct)> = live
            .iter()
            .filter(|f| planned.contains(f.file.file_path()))
            .map(|f| (f.spec_id, f.file.partition()))
            .collect();
        let files: Vec<&DataFile> = live
            .iter()
            .filter(|f| {
                f.file.content_type() == iceberg::spec::DataContentType::PositionDeletes
                    // A deletion vector is not a position delete file: it goes with its
                    // data file.
                    && crate::table::deletion_vector::location_of(&f.file).is_none()
                    && (attached.contains(f.file.file_path())
                        || partitions.contains(&(f.spec_id, f.file.partition())))
            })
            .map(|f| &f.file)
            .collect();
        if files.is_empty() {
            return Ok(DeleteDrops::default());
        }
        let rows: HashMap<&str, u64> = files
            .iter()
            .map(|f| (f.file_path(), f.record_count()))
            .collect();
        let targets = position_deletes::targets_of(table, &files).await?;
        Ok(DeleteDrops {
            targets: targets
                .into_iter()
                .map(|(path, t)| {
                    let n = rows.get(path.as_str()).copied().unwrap_or(0);
                    let live_targets = t
                        .into_iter()
                        .filter(|p| data.contains(p.as_str()))
                        .collect();
                    (path, (live_targets, n))
                })
                .collect(),
            ..DeleteDrops::default()
        })
    }

    /// Commits finished groups in one `replace`; if validation fails (a concurrent writer
    /// removed or deleted from an input file), the committer hands their output back and they
    /// are committed one by one, so only the affected groups fail. Every output file is in a
    /// [`Ledger`] the committer settles: no cleanup here.
    pub(super) async fn commit_groups(
        &self,
        start: &Table,
        tasks: &[FileScanTask],
        groups: Vec<GroupResult>,
        drops: &mut DeleteDrops,
        metrics: &mut CompactMetrics,
    ) -> Result<()> {
        let mut outputs = Ledger::of(start);
        for g in &groups {
            outputs.stage_files(&g.files);
        }
        // Crash tests kill the process here: outputs written, nothing committed.
        crate::base::fault::pause("BEFORE_COMMIT").await;
        if let Some(reason) = crate::base::fault::fail("COMPACT_COMMIT") {
            // Tests of partial failure: these groups fail as a conflict would fail them.
            outputs.discard().await;
            let all: Vec<&GroupResult> = groups.iter().collect();
            self.fail(&all, reason, metrics);
            return Ok(());
        }
        let inputs: Vec<Vec<usize>> = metrics
            .plan
            .groups
            .iter()
            .map(|g| g.files.clone())
            .collect();
        // The update of `gs`: their inputs out, their outputs in, and the position delete
        // files left with no live target out (the commit path re-checks on every attempt that
        // each is still live). Returns the removed data files and delete files too.
        let update_for = |gs: &[&GroupResult], drops: &DeleteDrops| {
            let removed_data: Vec<String> = gs
                .iter()
                .flat_map(|g| {
                    inputs[g.group]
                        .iter()
                        .map(|&i| tasks[i].data_file_path.clone())
                })
                .collect();
            let dropped = drops.droppable(&removed_data);
            let removed = removed_data.iter().chain(&dropped).cloned().collect();
            let added = gs.iter().flat_map(|g| g.files.iter().cloned()).collect();
            let mut props = HashMap::new();
            props.insert("floe.operation".to_string(), "compact".to_string());
            let update =
                SnapshotUpdate::rewrite(start, removed, added).with_summary_properties(props);
            (update, removed_data, dropped)
        };
        let all: Vec<&GroupResult> = groups.iter().collect();
        let (joint, joint_data, joint_dropped) = update_for(&all, &*drops);
        // A conflict hands the outputs back in `outputs`; any other failure settles them.
        let joint_result = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .lending(&mut outputs)
            .commit(joint)
            .await;
        match joint_result {
            Ok(outcome) => {
                self.record(&all, outcome.snapshot_id, tasks, metrics);
                drops.committed(joint_data, &joint_dropped, metrics);
                Ok(())
            }
            Err(Error::ValidationFailed { reason, .. }) if all.len() == 1 => {
                outputs.discard().await;
                self.fail(&all, reason.to_string(), metrics);
                Ok(())
            }
            Err(Error::ValidationFailed { .. }) => {
                // Find the groups that conflict: commit each alone, with its own part of the
                // ledger (the committer deletes the output of a group that fails).
                for g in &all {
                    let paths: Vec<String> =
                        g.files.iter().map(|f| f.file_path().to_string()).collect();
                    let mut mine = outputs.split_off(&paths);
                    let (update, data, dropped) = update_for(&[*g], &*drops);
                    let alone = Committer::new(&self.ctx.catalog, &self.ctx.ident)
                        .lending(&mut mine)
                        .commit(update)
                        .await;
                    match alone {
                        Ok(outcome) => {
                            self.record(&[*g], outcome.snapshot_id, tasks, metrics);
                            drops.committed(data, &dropped, metrics);
                        }
                        Err(Error::ValidationFailed { reason, .. }) => {
                            mine.discard().await;
                            self.fail(&[*g], reason.to_string(), metrics)
                        }
                        Err(e) => {
                            // The groups not tried yet are referenced by nothing.
                            outputs.discard().await;
                            return Err(e);
                        }
                    }
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Drops delete files that apply to no live data file, in its own `delete` commit.
    pub(super) async fn remove_dangling_deletes(&self, metrics: &mut CompactMetrics) -> Result<()> {
        let table = self.ctx.load().await?;
        let live = crate::table::manifests::live_files(&table).await?;
        let dangling = dangling::dangling_deletes(&live);
        if dangling.is_empty() {
            return Ok(());
        }
        let n = dangling.len();
        let mut props = HashMap::new();
        props.insert(
            "floe.operation".to_string(),
            "remove-dangling-deletes".to_string(),
        );
        let update =
            SnapshotUpdate::delete(&table, dangling, vec![]).with_summary_properties(props);
        let outcome = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(table)
            .commit(update)
            .await?;
        metrics.commits.push(outcome.snapshot_id);
        metrics.removed_dangling_deletes = n;
        Ok(())
    }

    fn record(
        &self,
        gs: &[&GroupResult],
        snapshot_id: i64,
        tasks: &[FileScanTask],
        metrics: &mut CompactMetrics,
    ) {
        metrics.commits.push(snapshot_id);
        for g in gs {
            let group = &metrics.plan.groups[g.group];
            metrics.rewritten_files += group.input_files;
            metrics.rewritten_bytes += group
                .files
                .iter()
                .map(|&i| tasks[i].file_size_in_bytes)
                .sum::<u64>();
            metrics.added_files += g.files.len();
            metrics.added_bytes += g.files.iter().map(|f| f.file_size_in_bytes()).sum::<u64>();
        }
    }

    pub(super) fn fail(&self, gs: &[&GroupResult], reason: String, metrics: &mut CompactMetrics) {
        for g in gs {
            let group = &metrics.plan.groups[g.group];
            metrics.failed_data_files_count += group.input_files;
            metrics.failed_groups.push(FailedGroup {
                partition: group.partition.clone(),
                input_files: group.input_files,
                reason: reason.clone(),
            });
        }
    }
}
