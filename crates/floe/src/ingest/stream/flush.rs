//! The end of a window: every writer's buffers flushed into data files and committed with
//! the positions (or handed off to the group's coordinator), then what follows a commit
//! (schema change, maintenance, backpressure, reports).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::TableIdent;

use super::batch::Writers;
use super::IngestBuilder;
use crate::base::cost::{Amount, Progress};
use crate::base::error::{Error, Result};
use crate::catalog::{ident_string, Catalog};
use crate::commit::Ledger;
use crate::commit::{Committer, SnapshotUpdate};
use crate::ingest::buffer::{write_parts, PartData, RowsToWrite};
use crate::ingest::debt::DebtLimits;
use crate::ingest::group::Group;
use crate::ingest::hook::AfterCommit;
use crate::ingest::metrics::{Landed, Metrics};
use crate::ingest::report::{CommitReport, IngestMetrics};
use crate::ingest::source::{committed_lag, Positions};
use crate::ingest::trigger::{Trigger, Window};
use crate::ingest::upsert::last_changes;
use crate::operations::change::keys::KeyIndex;
use crate::table::exactly_once;
use crate::write::staged::{commit_append, Staged};
use crate::write::WriteOptions;

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

    /// Ends the window: the dead letters read so far made durable (a commit stores the
    /// positions past them), and every writer's buffers, the upsert keys and the positions
    /// taken out for [`land`]. The writers start the next window empty.
    pub(super) async fn take_window(
        &mut self,
        writers: &mut Writers,
        positions: (&Positions, &Positions),
        since: &Window,
        seq: u64,
    ) -> Result<Taken> {
        let (pending, committed) = positions;
        if let Some(sink) = &mut self.dead_letter {
            sink.sync().await?;
        }
        // An upsert window: its keys, and only each key's last change is written.
        let keys = match &mut self.changes {
            Some(c) => Some(c.take_window()?),
            None => None,
        };
        let crossed = keys.as_ref().map_or(0, |k| k.crossed_streams());
        if crossed > 0 {
            tracing::warn!(
                table = %ident_string(&self.ident),
                changes = crossed,
                "keys changed from several source partitions in one window: applied in arrival order, which the source does not define across partitions (write each key to one partition)"
            );
        }
        let parts = writers.take()?;
        self.metrics.commit_started();
        Ok(Taken {
            partitions: parts.iter().map(|p| p.len() as u64).sum(),
            parts,
            keys,
            crossed,
            pending: pending.clone(),
            expected: committed.clone(),
            bad: since.bad,
            records_in: self.metrics.records_in.load(Ordering::Relaxed),
            seq,
        })
    }

    /// What [`land`] needs, owned: a window can land in a task of its own.
    pub(super) fn lander(&self, uri: &str) -> Lander {
        Lander {
            catalog: self.catalog.clone(),
            ident: self.ident.clone(),
            write: self.options.write.clone(),
            writer_id: self.options.writer_id.clone(),
            pause: self.options.pause_before_commit,
            uri: uri.to_string(),
            metrics: self.metrics.clone(),
        }
    }

    /// After `done` landed: [`Self::landed`], then what follows the commit
    /// ([`Self::after_commit`]).
    pub(super) async fn settle(
        &mut self,
        done: Result<Done>,
        committed: &mut Positions,
        writers: &mut Writers,
        a: After<'_>,
    ) -> Result<()> {
        writers.landed();
        let (report, table) = self.landed(done, committed)?;
        self.after_commit(report, table, writers, a).await
    }

    /// After `done` landed (or failed): `committed` moves to its positions, the source and
    /// the metrics learn it, and its report is made.
    fn landed(
        &mut self,
        done: Result<Done>,
        committed: &mut Positions,
    ) -> Result<(CommitReport, Table)> {
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                self.metrics.commit_failed(&e.to_string());
                return Err(e);
            }
        };
        let Done { taken, table, .. } = &done;
        *committed = taken.pending.clone();
        let lag = self.source.lag();
        let m = &self.metrics;
        // A hand-off is not a commit: its rows are not readable until the coordinator's.
        if done.handoff.is_none() {
            self.source.committed(committed);
            m.commit_landed(&Landed {
                attempts: done.attempts,
                duration_ms: done.commit_ms,
                snapshot_id: table.metadata().current_snapshot_id(),
                positions: committed,
                data_files: done.data_files,
                records: done.records,
                records_in: taken.records_in,
            });
        } else {
            m.handed_off(taken.records_in);
        }
        let report = CommitReport {
            commit: taken.seq,
            // 0 for a hand-off (the coordinator commits it later).
            snapshot_id: match done.handoff {
                Some(_) => 0,
                None => table.metadata().current_snapshot_id().unwrap_or_default(),
            },
            records: done.records,
            bad_records: taken.bad,
            data_files: done.data_files,
            bytes: done.bytes,
            partitions: taken.partitions,
            flush_ms: done.flush_ms,
            commit_ms: done.commit_ms,
            spilled_bytes: m.spilled_bytes.load(Ordering::Relaxed),
            lag_committed: committed_lag(&lag, committed),
            lag,
            positions: taken.pending.clone(),
            committed_at_ms: done.committed_at_ms,
            attempts: done.attempts,
            commit_interval_ms: 0,
            debt: None,
            handoff: done.handoff.clone(),
            handed_off: done.handed_off.clone(),
            replaced_rows: done.replaced,
            keys_across_streams: taken.crossed,
        };
        Ok((report, done.table))
    }
}

/// One window taken out of the writers at its end ([`IngestBuilder::take_window`]).
pub(super) struct Taken {
    /// Each writer's partitions.
    parts: Vec<Vec<PartData>>,
    partitions: u64,
    /// An upsert window's keys.
    keys: Option<Arc<KeyIndex>>,
    crossed: u64,
    /// The positions past the window's last record: stored with its files.
    pending: Positions,
    /// The positions of this writer's last commit: the writer fence of this one.
    expected: Positions,
    bad: u64,
    /// `records_in` at the window's end.
    records_in: u64,
    seq: u64,
}

/// A window written and committed (or handed off to the group's coordinator).
pub(super) struct Done {
    taken: Taken,
    table: Table,
    attempts: u32,
    handoff: Option<String>,
    handed_off: Vec<String>,
    replaced: u64,
    records: u64,
    bytes: u64,
    data_files: u64,
    flush_ms: u64,
    commit_ms: u64,
    committed_at_ms: i64,
}

/// What landing a window needs from the ingest, owned ([`IngestBuilder::lander`]).
#[derive(Clone)]
pub(super) struct Lander {
    catalog: Catalog,
    ident: TableIdent,
    write: WriteOptions,
    writer_id: String,
    pause: Option<Duration>,
    uri: String,
    metrics: Arc<Metrics>,
}

/// A window landing in a task of its own while the next window is read: at most one at a
/// time, so windows commit in their order, each fenced on the positions of the one before.
pub(super) struct InFlight(tokio::task::JoinHandle<Result<Done>>);

impl InFlight {
    /// Lands `taken` in a new task.
    pub(super) fn spawn(lander: Lander, taken: Taken) -> Self {
        Self(tokio::spawn(
            async move { land(&lander, taken, None).await },
        ))
    }

    /// The task ended (its outcome is ready without waiting).
    pub(super) fn is_finished(&self) -> bool {
        self.0.is_finished()
    }

    /// The window's outcome.
    pub(super) async fn outcome(self) -> Result<Done> {
        self.0.await.map_err(|e| Error::Task {
            what: "commit",
            source: e,
        })?
    }
}

/// Writes a window's buffered partitions into data files and commits them with its
/// positions, fenced on the positions of the writer's last commit; a worker of `group` hands
/// them off to the coordinator instead. Files written by a failed flush are deleted; the
/// committer deletes them when the commit definitely fails (never on an unknown outcome).
pub(super) async fn land(lander: &Lander, taken: Taken, group: Option<&Group>) -> Result<Done> {
    let Lander { catalog, ident, .. } = lander;
    let flush_started = Instant::now();
    // Buffered rows are written in this table's schema, converted by field id when it
    // changed since they were read (`TableWriter::write`).
    let table = catalog.load_table_kept(ident).await?;
    let schema_id = table.metadata().current_schema_id();
    let rows: Option<RowsToWrite> = taken.keys.clone().map(|keys| {
        let f: RowsToWrite = Arc::new(move |b| last_changes(&keys, b));
        f
    });
    let mut taken = taken;
    let mut tasks = Vec::new();
    for parts in std::mem::take(&mut taken.parts) {
        let table = table.clone();
        let options = lander.write.clone();
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
    let m = &lander.metrics;
    m.last_flush_duration_ms.store(flush_ms, Ordering::Relaxed);
    m.observe_files(files.iter().map(|f| f.file_size_in_bytes()));
    let records: u64 = files.iter().map(|f| f.record_count()).sum();
    let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
    let data_files = files.len() as u64;

    let props = exactly_once::summary(&lander.writer_id, &lander.uri, &taken.pending);
    let update = SnapshotUpdate::append(files).with_summary_properties(props);
    let commit_started = Instant::now();
    crate::base::fault::pause("INGEST_BEFORE_COMMIT").await;
    if let Some(d) = lander.pause {
        tokio::time::sleep(d).await;
    }
    let mut done = Done {
        table,
        attempts: 0,
        handoff: None,
        handed_off: vec![],
        replaced: 0,
        records,
        bytes,
        data_files,
        flush_ms,
        commit_ms: 0,
        committed_at_ms: 0,
        taken: Taken {
            parts: vec![],
            ..taken
        },
    };
    match group {
        // A worker of a group hands its files off to the coordinator. A failed hand-off
        // keeps the files: the row may have been written (they are orphans otherwise).
        Some(g) => {
            let (pending, committed) = (&done.taken.pending, &done.taken.expected);
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
                .hand_off(catalog, ident, &update.added_data_files, &from, &changed)
                .await?;
            done.handoff = Some(id);
            done.handed_off = changed.into_keys().collect();
        }
        None => {
            // Written in the schema of the table loaded above; an attempt on a table whose
            // schema changed since commits the rows re-encoded by field id.
            let staged = Staged::new(update.added_data_files, schema_id);
            let summary = update.summary_properties;
            let (writer_id, expected) = (lander.writer_id.clone(), done.taken.expected.clone());
            let committer = Committer::new(catalog, ident)
                .on(done.table.clone())
                .retrying_conflicts()
                .with_precondition(move |t| exactly_once::fence(t, &writer_id, &expected));
            match done.taken.keys.clone() {
                None => {
                    let c = commit_append(committer, staged, summary, &lander.write).await?;
                    done.table = c.table;
                    done.attempts = c.attempts;
                }
                // Every attempt deletes the window's keys from the table it commits on.
                Some(keys) => {
                    let delta =
                        crate::operations::change::commit_row_delta_with(
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
                    done.table = match delta.table {
                        Some(t) => t,
                        None => catalog.load_table_kept(ident).await?,
                    };
                    done.attempts = delta.attempts;
                    done.replaced = delta.deletes.rows;
                }
            }
        }
    }
    done.committed_at_ms = chrono::Utc::now().timestamp_millis();
    done.commit_ms = commit_started.elapsed().as_millis() as u64;
    Ok(done)
}
