//! The end of a window: every writer's buffers flushed into data files and committed with
//! the positions (or handed off to the group's coordinator), then what follows a commit
//! (schema change, maintenance, backpressure, reports).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::spec::DataFile;
use iceberg::table::Table;

use super::batch::Writers;
use super::IngestBuilder;
use crate::base::cost::{Amount, Progress};
use crate::base::error::{Error, Result};
use crate::catalog::ident_string;
use crate::commit::Ledger;
use crate::commit::{Committer, SnapshotUpdate};
use crate::ingest::buffer::{write_parts, RowsToWrite};
use crate::ingest::debt::DebtLimits;
use crate::ingest::hook::AfterCommit;
use crate::ingest::metrics::Landed;
use crate::ingest::report::{CommitReport, IngestMetrics};
use crate::ingest::source::{committed_lag, Positions};
use crate::ingest::trigger::{Trigger, Window};
use crate::ingest::upsert::last_changes;
use crate::table::exactly_once;
use crate::write::staged::{commit_append, Staged};

/// What a commit updates after it lands, besides the table.
pub(super) struct After<'a> {
    pub(super) name: &'a str,
    pub(super) maintenance: Option<&'a mut Box<dyn AfterCommit>>,
    pub(super) limits: &'a DebtLimits,
    pub(super) trigger: &'a mut Trigger,
    pub(super) summary: &'a mut IngestMetrics,
    pub(super) progress: &'a mut Progress,
}

impl IngestBuilder {
    /// After the commit of `report` landed `table`: records are read in its schema, the
    /// maintenance wakes, the debt is read for backpressure, and the commit is reported.
    pub(super) async fn after_commit(
        &mut self,
        mut report: CommitReport,
        table: Table,
        writers: &mut Writers,
        a: After<'_>,
    ) -> Result<()> {
        writers.committed(&table, a.name, self.changes.is_some())?;
        if let Some(m) = a.maintenance {
            m.after_commit(&table);
        }
        let extra = a.trigger.throttled_ms();
        if extra > 0 {
            a.summary.throttled_ms += extra;
            self.metrics
                .throttled_ms
                .fetch_add(extra, Ordering::Relaxed);
        }
        // The debt is read after a commit, at most every 2 s (one read of the live files).
        let meter = self.maintenance.clone().filter(|_| a.limits.any());
        if let Some(meter) = meter.filter(|_| a.trigger.debt_due(Instant::now())) {
            let now = chrono::Utc::now().timestamp_millis();
            let measured = meter.measure(&self.catalog, &self.ident, &table, a.limits, now);
            match measured.await {
                Ok(d) => {
                    let max = Duration::from_millis(a.limits.max_commit_interval_ms);
                    if let Some(next) = a.trigger.backpressure(!d.over.is_empty(), max) {
                        tracing::warn!(
                            table = %a.name,
                            interval_ms = next.as_millis() as u64,
                            over = ?d.over,
                            "backpressure: commit interval changed"
                        );
                    }
                    self.metrics.set_debt(&d);
                    report.debt = Some(d);
                }
                Err(e) => {
                    tracing::warn!(table = %a.name, "measuring the compaction debt: {e}");
                    self.metrics
                        .error(&format!("measuring the compaction debt: {e}"));
                }
            }
            self.metrics
                .effective_commit_interval_ms
                .store(a.trigger.interval().as_millis() as u64, Ordering::Relaxed);
        }
        report.commit_interval_ms = a.trigger.interval().as_millis() as u64;
        a.summary.commits += 1;
        a.summary.data_files += report.data_files;
        a.progress.done += Amount {
            steps: 1,
            files: report.data_files,
            bytes: report.bytes,
            rows: report.records,
        };
        if let Some(f) = &self.progress {
            f(a.progress);
        }
        if let Some(f) = &self.on_commit {
            f(&report);
        }
        Ok(())
    }

    /// Flushes every writer's buffers into data files and commits them with the positions.
    pub(super) async fn commit(
        &mut self,
        writers: &mut Writers,
        pending: &Positions,
        committed: &mut Positions,
        uri: &str,
        since: &Window,
        seq: u64,
    ) -> Result<(CommitReport, Table)> {
        if let Some(sink) = &mut self.dead_letter {
            sink.sync().await?;
        }
        let flush_started = Instant::now();
        // Buffered rows are written in this table's schema, converted by field id when it
        // changed since they were read (`TableWriter::write`).
        let table = self.catalog.load_table_kept(&self.ident).await?;
        let schema_id = table.metadata().current_schema_id();
        // An upsert window: its keys, and only each key's last change is written.
        let window = match &mut self.changes {
            Some(c) => Some(c.take_window()?),
            None => None,
        };
        let crossed = window.as_ref().map_or(0, |k| k.crossed_streams());
        if crossed > 0 {
            tracing::warn!(
                table = %ident_string(&self.ident),
                changes = crossed,
                "keys changed from several source partitions in one window: applied in arrival order, which the source does not define across partitions (write each key to one partition)"
            );
        }
        let rows: Option<RowsToWrite> = window.clone().map(|keys| {
            let f: RowsToWrite = Arc::new(move |b| last_changes(&keys, b));
            f
        });
        let mut partitions = 0u64;
        let mut tasks = Vec::new();
        for w in writers.buffers.iter_mut() {
            let parts = w.take()?;
            partitions += parts.len() as u64;
            let table = table.clone();
            let options = self.options.write.clone();
            let rows = rows.clone();
            tasks.push(tokio::spawn(async move {
                write_parts(&table, parts, &options, rows).await
            }));
        }
        let mut files: Vec<DataFile> = Vec::new();
        let mut failure = None;
        for t in tasks {
            match t.await {
                Ok(Ok(f)) => files.extend(f),
                Ok(Err(e)) => failure = Some(e),
                Err(e) => {
                    failure = Some(Error::Task {
                        what: "file write",
                        source: e,
                    })
                }
            }
        }
        if let Some(e) = failure {
            let mut ledger = Ledger::of(&table);
            ledger.stage_files(&files);
            ledger.discard().await;
            return Err(e);
        }
        let flush_ms = flush_started.elapsed().as_millis() as u64;
        self.metrics
            .last_flush_duration_ms
            .store(flush_ms, Ordering::Relaxed);
        self.metrics
            .observe_files(files.iter().map(|f| f.file_size_in_bytes()));
        let records: u64 = files.iter().map(|f| f.record_count()).sum();
        let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
        let data_files = files.len() as u64;

        let props = exactly_once::summary(&self.options.writer_id, uri, pending);
        let update = SnapshotUpdate::append(files).with_summary_properties(props);
        let commit_started = Instant::now();
        let writer_id = self.options.writer_id.clone();
        let expected = committed.clone();
        crate::base::fault::pause("INGEST_BEFORE_COMMIT").await;
        if let Some(d) = self.options.pause_before_commit {
            tokio::time::sleep(d).await;
        }
        // The writer fence is checked on every attempt; the committer deletes the data files
        // when the commit definitely fails (never on an unknown outcome).
        let (table, attempts, handoff, replaced, handed_off) = match &self.group {
            // A worker of a group hands its files off to the coordinator. A failed hand-off
            // keeps the files: the row may have been written (they are orphans otherwise).
            Some(g) => {
                let changed: Positions = pending
                    .iter()
                    .filter(|(s, p)| committed.get(*s) != Some(*p))
                    .map(|(s, p)| (s.clone(), *p))
                    .collect();
                let from: Positions = changed
                    .keys()
                    .filter_map(|s| Some((s.clone(), *committed.get(s)?)))
                    .collect();
                let id = g
                    .hand_off(
                        &self.catalog,
                        &self.ident,
                        &update.added_data_files,
                        &from,
                        &changed,
                    )
                    .await?;
                let streams = changed.into_keys().collect();
                (table, 0, Some(id), 0, streams)
            }
            None => {
                // Written in the schema of the table loaded above; an attempt on a table whose
                // schema changed since commits the rows re-encoded by field id.
                let staged = Staged::new(update.added_data_files, schema_id);
                let summary = update.summary_properties;
                let committer = Committer::new(&self.catalog, &self.ident)
                    .on(table)
                    .retrying_conflicts()
                    .with_precondition(move |t| exactly_once::fence(t, &writer_id, &expected));
                match window {
                    None => {
                        let done =
                            commit_append(committer, staged, summary, &self.options.write).await?;
                        (done.table, done.attempts, None, 0, vec![])
                    }
                    // Every attempt deletes the window's keys from the table it commits on.
                    Some(keys) => {
                        let delta = crate::operations::change::commit_row_delta_with(
                            committer,
                            None,
                            staged,
                            None,
                            summary,
                            move |t| {
                                let keys = keys.clone();
                                async move {
                                    crate::operations::change::keys::locate_keys(&t, &keys).await
                                }
                            },
                        )
                        .await?;
                        // The committed table (a commit with positions always lands one).
                        let table = match delta.table {
                            Some(t) => t,
                            None => self.catalog.load_table_kept(&self.ident).await?,
                        };
                        (table, delta.attempts, None, delta.deletes.rows, vec![])
                    }
                }
            }
        };
        let committed_at_ms = chrono::Utc::now().timestamp_millis();
        let commit_ms = commit_started.elapsed().as_millis() as u64;
        *committed = pending.clone();
        let lag = self.source.lag();
        let m = &self.metrics;
        // A hand-off is not a commit: its rows are not readable until the coordinator's.
        if handoff.is_none() {
            self.source.committed(committed);
            m.commit_landed(&Landed {
                attempts,
                duration_ms: commit_ms,
                snapshot_id: table.metadata().current_snapshot_id(),
                positions: committed,
                data_files,
                records,
            });
        } else {
            m.handed_off();
        }
        let report = CommitReport {
            commit: seq,
            // 0 for a hand-off (the coordinator commits it later).
            snapshot_id: match handoff {
                Some(_) => 0,
                None => table.metadata().current_snapshot_id().unwrap_or_default(),
            },
            records,
            bad_records: since.bad,
            data_files,
            bytes,
            partitions,
            flush_ms,
            commit_ms,
            spilled_bytes: m.spilled_bytes.load(Ordering::Relaxed),
            lag_committed: committed_lag(&lag, committed),
            lag,
            positions: pending.clone(),
            committed_at_ms,
            attempts,
            commit_interval_ms: 0,
            debt: None,
            handoff,
            handed_off,
            replaced_rows: replaced,
            keys_across_streams: crossed,
        };
        Ok((report, table))
    }
}
