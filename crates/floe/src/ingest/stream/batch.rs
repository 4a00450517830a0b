//! One micro-batch in: decoded in the table's schema, bad records to the dead-letter sink,
//! good rows routed to the writer tasks' partition buffers.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;
use iceberg::table::Table;

use super::IngestBuilder;
use crate::base::error::{Error, Result};
use crate::ingest::buffer::{PartData, PartitionBuffers, PartitionRouter};
use crate::ingest::dead_letter::DeadLetter;
use crate::ingest::options::Distribution;
use crate::ingest::range::RangeDistributor;
use crate::ingest::report::IngestMetrics;
use crate::ingest::source::{Positions, SourceRecord};
use crate::ingest::trigger::Window;
use crate::records::decode::decode_runs_then;

/// The writer tasks' buffers and how rows reach them.
pub(super) struct Writers {
    buffers: Vec<PartitionBuffers>,
    router: PartitionRouter,
    /// Records are decoded in the table's schema; after a commit that finds another schema
    /// (`evolve-schema` meanwhile), the next records are read in that one.
    arrow_schema: SchemaRef,
    decoding_schema: i32,
    distribution: Distribution,
    rr: usize,
    range: RangeDistributor,
    /// The buffer budget shared by the writers, and the bytes of the window taken out that is
    /// still landing: they count against the budget until it landed.
    budget: u64,
    landing: u64,
}

impl Writers {
    /// `n` writer tasks sharing `budget` bytes, spilling under `spill_root`.
    pub(super) fn new(
        table: &Table,
        budget: u64,
        distribution: Distribution,
        n: usize,
        spill_root: &Path,
    ) -> Result<Self> {
        let buffers = (0..n)
            .map(|i| {
                PartitionBuffers::new(
                    (budget as usize / n).max(1),
                    spill_root.join(format!("w{i}")),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            buffers,
            router: PartitionRouter::new(table)?,
            arrow_schema: Arc::new(iceberg::arrow::schema_to_arrow_schema(
                table.metadata().current_schema(),
            )?),
            decoding_schema: table.metadata().current_schema_id(),
            distribution,
            rr: 0,
            range: RangeDistributor::new(n),
            budget,
            landing: 0,
        })
    }

    /// Gives each writer its share of what the budget leaves beside a landing window.
    fn share_budget(&mut self) {
        let per = self.budget.saturating_sub(self.landing) / self.buffers.len() as u64;
        for w in &mut self.buffers {
            w.set_budget(per as usize);
        }
    }

    /// The window taken out last has landed (or failed): its bytes no longer count.
    pub(super) fn landed(&mut self) {
        if self.landing > 0 {
            self.landing = 0;
            self.share_budget();
        }
    }

    /// Nothing buffered.
    pub(super) fn is_empty(&self) -> bool {
        self.buffers.iter().all(|w| w.is_empty())
    }

    /// The window ends: every writer's partitions taken out (the writers start the next
    /// window empty), and the range distribution starts anew.
    ///
    /// While the window lands, its bytes in memory count against the budget: the next
    /// window's buffers spill sooner, and memory stays within the budget.
    pub(super) fn take(&mut self) -> Result<Vec<Vec<PartData>>> {
        self.range.end_window();
        self.landing = self.buffers.iter().map(|w| w.mem_bytes() as u64).sum();
        self.share_budget();
        self.buffers.iter_mut().map(|w| w.take()).collect()
    }

    /// After a commit on `table`: records from here on are read in the table's schema when
    /// it changed (not in an upsert, whose decoder keeps the schema it started with).
    pub(super) fn committed(&mut self, table: &Table, name: &str, upsert: bool) -> Result<()> {
        let now_schema = table.metadata().current_schema_id();
        if now_schema != self.decoding_schema && !upsert {
            tracing::info!(
                table = %name,
                from = self.decoding_schema,
                to = now_schema,
                "the table's schema changed: records from here on are read in the new schema"
            );
            self.router = PartitionRouter::new(table)?;
            self.arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
                table.metadata().current_schema(),
            )?);
            self.decoding_schema = now_schema;
        }
        Ok(())
    }

    /// Routes one batch's `pieces` (its rows grouped by partition, see
    /// [`PartitionRouter::split`]) to the writers; returns the bytes spilled so far.
    fn route(&mut self, pieces: Vec<(String, RecordBatch)>) -> Result<u64> {
        let n = self.buffers.len();
        let target_rr = self.rr;
        self.rr = (self.rr + 1) % n;
        for (label, piece) in pieces {
            let w = match self.distribution {
                Distribution::Hash => hash_of(&label) % n,
                Distribution::None => target_rr,
                Distribution::Range => {
                    self.range
                        .route(&label, piece.get_array_memory_size() as u64, target_rr)
                }
            };
            self.buffers[w].push(label, piece)?;
        }
        Ok(self.buffers.iter().map(|w| w.spilled_bytes).sum())
    }
}

impl IngestBuilder {
    /// Takes in `records` read from `uri`: counts them, sends bad ones to the dead-letter sink
    /// (stopping past `--max-bad-records`), advances `pending` and buffers the good rows.
    pub(super) async fn accept(
        &mut self,
        records: &[SourceRecord],
        writers: &mut Writers,
        pending: &mut Positions,
        since: &mut Window,
        summary: &mut IngestMetrics,
        uri: &str,
    ) -> Result<()> {
        // Markers only move positions (a Kafka transaction's control and aborted records),
        // after the records read before them.
        if records.iter().any(|r| r.marker) {
            let data: Vec<SourceRecord> = records.iter().filter(|r| !r.marker).cloned().collect();
            if !data.is_empty() {
                Box::pin(self.accept(&data, writers, pending, since, summary, uri)).await?;
            }
            advance(pending, records);
            return Ok(());
        }
        let payloads: Vec<&[u8]> = records.iter().map(|r| &r.payload[..]).collect();
        // Each run's rows are grouped by partition on the thread that decoded them.
        let router = &writers.router;
        let (batches, bad) = match &mut self.changes {
            Some(c) => {
                let d = c.decode(records)?;
                (
                    d.batch.map(|b| router.split(b)).into_iter().collect(),
                    d.bad,
                )
            }
            None => decode_runs_then(&writers.arrow_schema, &payloads, |b| router.split(b)),
        };
        let bytes: u64 = payloads.iter().map(|p| p.len() as u64).sum();
        self.metrics
            .records_in
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        summary.records += records.len() as u64;
        if !bad.is_empty() {
            let entries: Vec<DeadLetter> = bad
                .iter()
                .map(|(i, b)| {
                    let r = &records[*i];
                    DeadLetter::new(uri, &r.stream, r.position, &r.payload, b.clone())
                })
                .collect();
            let count = entries.len() as u64;
            summary.bad_records += count;
            since.bad += count;
            self.metrics.bad_records.fetch_add(count, Ordering::Relaxed);
            match &mut self.dead_letter {
                Some(sink) => sink.write(&entries).await?,
                None => {
                    for e in &entries {
                        tracing::warn!(stream = %e.stream, position = e.position, column = %e.column, reason = %e.reason, "bad record");
                    }
                }
            }
            if let Some(max) = self.options.max_bad_records {
                if summary.bad_records > max {
                    let last = entries.last().expect("not empty");
                    return Err(Error::TooManyBadRecords {
                        count: summary.bad_records,
                        max,
                        last: format!(
                            "{} at {}: column '{}' value {}: {}",
                            last.stream, last.position, last.column, last.value, last.reason
                        ),
                    });
                }
            }
        }
        advance(pending, records);
        if !batches.is_empty() {
            since.bytes += bytes;
        }
        for pieces in batches {
            let pieces = pieces?;
            since.records += pieces.iter().map(|(_, p)| p.num_rows() as u64).sum::<u64>();
            let spilled = writers.route(pieces)?;
            self.metrics.spilled_bytes.store(spilled, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Moves each stream's pending position past its last record in `records` (read in order):
/// one update per run of one stream's records, not one per record.
fn advance(pending: &mut Positions, records: &[SourceRecord]) {
    for (i, r) in records.iter().enumerate() {
        if records
            .get(i + 1)
            .is_none_or(|next| next.stream != r.stream)
        {
            pending.insert(r.stream.to_string(), r.next_position);
        }
    }
}

fn hash_of(s: &str) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stream_ends_past_its_last_record_however_streams_interleave() {
        let rec = |stream: &str, next: i64| SourceRecord {
            stream: Arc::from(stream),
            next_position: next,
            position: next - 1,
            payload: bytes::Bytes::new(),
            key: None,
            marker: false,
        };
        let records = [
            rec("a", 1),
            rec("a", 2),
            rec("b", 7),
            rec("a", 3),
            rec("b", 8),
            rec("b", 9),
            rec("c", 4),
        ];
        let mut pending = Positions::new();
        pending.insert("d".to_string(), 11);
        advance(&mut pending, &records);
        let mut expected = Positions::new();
        for (s, p) in [("a", 3), ("b", 9), ("c", 4), ("d", 11)] {
            expected.insert(s.to_string(), p);
        }
        assert_eq!(pending, expected);
    }
}
