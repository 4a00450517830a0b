//! Committing a compaction: finished groups in one `replace` (one by one when validation
//! fails, so only the groups a concurrent writer touched fail), dangling deletes removed, and
//! the metrics and failures recorded.

use super::*;

impl CompactBuilder {
    /// Commits finished groups in one `replace`; if validation fails (a concurrent writer
    /// removed or deleted from an input file), commits them one by one so only the affected
    /// groups fail (their output is deleted by the commit path).
    pub(super) async fn commit_groups(
        &self,
        start: &Table,
        tasks: &[FileScanTask],
        groups: Vec<GroupResult>,
        metrics: &mut CompactMetrics,
    ) -> Result<()> {
        // Crash tests kill the process here: outputs written, nothing committed.
        crate::fault::pause("BEFORE_COMMIT").await;
        let inputs: Vec<Vec<usize>> = metrics
            .plan
            .groups
            .iter()
            .map(|g| g.files.clone())
            .collect();
        let update_for = |gs: &[&GroupResult]| {
            let removed = gs
                .iter()
                .flat_map(|g| {
                    inputs[g.group]
                        .iter()
                        .map(|&i| tasks[i].data_file_path.clone())
                })
                .collect();
            let added = gs.iter().flat_map(|g| g.files.iter().cloned()).collect();
            let mut props = HashMap::new();
            props.insert("floe.operation".to_string(), "compact".to_string());
            SnapshotUpdate::rewrite(start, removed, added).with_summary_properties(props)
        };
        let all: Vec<&GroupResult> = groups.iter().collect();
        let joint = update_for(&all);
        let joint_paths = joint.added_paths();
        // Several groups: keep their files on failure, to retry them one by one.
        let several = all.len() > 1;
        let mut committer = Committer::new(&self.catalog, &self.ident);
        if several {
            committer = committer.keep_files_on_failure();
        }
        match committer.commit(joint).await {
            Ok(outcome) => {
                self.record(&all, outcome.snapshot_id, tasks, metrics);
                Ok(())
            }
            Err(Error::ValidationFailed { .. }) if several => {
                // Find the groups that conflict: commit each alone (the commit path deletes the
                // output of a group that fails).
                for (i, g) in all.iter().enumerate() {
                    let alone = Committer::new(&self.catalog, &self.ident);
                    match alone.commit(update_for(&[*g])).await {
                        Ok(outcome) => self.record(&[*g], outcome.snapshot_id, tasks, metrics),
                        Err(Error::ValidationFailed { reason, .. }) => {
                            self.fail(&[*g], reason, metrics)
                        }
                        Err(e) => {
                            let rest: Vec<String> = all[i + 1..]
                                .iter()
                                .flat_map(|g| g.files.iter().map(|f| f.file_path().to_string()))
                                .collect();
                            crate::storage::delete::delete_quietly_in(
                                start.file_io(),
                                start.metadata().location(),
                                rest,
                            )
                            .await;
                            return Err(e);
                        }
                    }
                }
                Ok(())
            }
            // One group: the committer deleted its output.
            Err(Error::ValidationFailed { reason, .. }) => {
                self.fail(&all, reason, metrics);
                Ok(())
            }
            // Unknown outcome: the output may be live in a commit that landed; keep it.
            Err(e @ Error::CommitStateUnknown { .. }) => Err(e),
            Err(e) => {
                if several {
                    crate::storage::delete::delete_quietly_in(
                        start.file_io(),
                        start.metadata().location(),
                        joint_paths,
                    )
                    .await;
                }
                Err(e)
            }
        }
    }

    /// Drops delete files that apply to no live data file, in its own `delete` commit.
    pub(super) async fn remove_dangling_deletes(&self, metrics: &mut CompactMetrics) -> Result<()> {
        let table = self.catalog.load_table(&self.ident).await?;
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
        let outcome = Committer::new(&self.catalog, &self.ident)
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

    fn fail(&self, gs: &[&GroupResult], reason: String, metrics: &mut CompactMetrics) {
        for g in gs {
            let group = &metrics.plan.groups[g.group];
            metrics.failed_groups.push(FailedGroup {
                partition: group.partition.clone(),
                input_files: group.input_files,
                reason: reason.clone(),
            });
        }
    }
}
