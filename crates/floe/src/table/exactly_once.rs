//! The exactly-once protocol of a streaming writer, as the table holds it.
//!
//! A writer stores the positions after the last record it consumed in the snapshot summary of
//! the same atomic commit as the data: `floe.writer-id` = the writer (or group) id,
//! `floe.position.<stream>` = the next position per stream, `floe.source` = the source URI
//! ([`summary`]). On start, the newest snapshot of the writer id on `main`'s history
//! ([`writer_positions`]) gives the positions to resume from. Every commit attempt is fenced
//! ([`fence`]): the newest snapshot of the writer id must still hold the positions the process
//! last committed, so a zombie writing under the same id is refused instead of duplicating
//! data.
//!
//! A group of workers (`floe ingest --group`) advances positions per stream in a chain of
//! hand-offs ([`chain_head`], [`continues`], [`already_committed`]): a hand-off is committed
//! only when its `from` positions are where the chain is.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::Snapshot;
use iceberg::table::Table;

use crate::base::error::{Error, Result};
pub use crate::table::watermarks::FLOE_WRITER_ID;

/// Next position per stream (Kafka: `kafka:<topic>:<partition>` -> next offset; files:
/// `file:<path>#<device>.<inode>.<fingerprint>` -> byte offset after the last consumed line;
/// stdin: `stdin` -> lines).
pub type Positions = BTreeMap<String, i64>;

/// Summary key prefix of source positions.
pub const POSITION_PREFIX: &str = "floe.position.";
/// Summary key of the source URI.
pub const SOURCE_KEY: &str = "floe.source";

/// The summary properties of a commit of `writer_id` reading `source` up to `positions`.
pub fn summary(writer_id: &str, source: &str, positions: &Positions) -> HashMap<String, String> {
    let mut props = HashMap::new();
    props.insert(FLOE_WRITER_ID.to_string(), writer_id.to_string());
    props.insert(SOURCE_KEY.to_string(), source.to_string());
    for (stream, pos) in positions {
        props.insert(format!("{POSITION_PREFIX}{stream}"), pos.to_string());
    }
    props
}

/// Whether `s` was committed by `writer_id`.
fn of_writer(s: &Snapshot, writer_id: &str) -> bool {
    s.summary()
        .additional_properties
        .get(FLOE_WRITER_ID)
        .map(String::as_str)
        == Some(writer_id)
}

/// The positions a snapshot summary holds.
fn positions_of(s: &Snapshot) -> Positions {
    s.summary()
        .additional_properties
        .iter()
        .filter_map(|(k, v)| {
            let stream = k.strip_prefix(POSITION_PREFIX)?;
            Some((stream.to_string(), v.parse::<i64>().ok()?))
        })
        .collect()
}

/// The positions in the newest snapshot of `writer_id` on `main`'s history, if any.
///
/// The walk follows parent ids from the current snapshot. Expiry may have removed snapshots
/// between the current one and the writer's (it keeps the writer's newest snapshot, its
/// watermark, but not what lies between): where the chain breaks, the newest snapshot of the
/// writer older than the break ([`older`]: by sequence number, on v1 by commit time) is the one
/// it would have reached.
pub fn writer_positions(table: &Table, writer_id: &str) -> Option<(i64, Positions)> {
    let md = table.metadata();
    let found = |s: &Snapshot| (s.snapshot_id(), positions_of(s));
    let mut cur = md.current_snapshot().cloned();
    while let Some(s) = cur {
        if of_writer(&s, writer_id) {
            return Some(found(&s));
        }
        match s.parent_snapshot_id() {
            None => return None,
            Some(p) => match md.snapshot_by_id(p) {
                Some(parent) => cur = Some(parent.clone()),
                None => {
                    // The chain breaks at an expired snapshot.
                    return md
                        .snapshots()
                        .filter(|o| older(o, &s) && of_writer(o, writer_id))
                        .max_by_key(|o| (o.sequence_number(), o.timestamp_ms()))
                        .map(|o| found(o));
                }
            },
        }
    }
    None
}

/// Whether `o` was committed before `s`: by sequence number from format v2 on; on v1, where
/// every sequence number is 0 (spec, "Sequence Numbers": v1 has none), by commit time, and
/// never `s` itself.
fn older(o: &Snapshot, s: &Snapshot) -> bool {
    if o.snapshot_id() == s.snapshot_id() {
        return false;
    }
    match (o.sequence_number(), s.sequence_number()) {
        (0, 0) => o.timestamp_ms() <= s.timestamp_ms(),
        (a, b) => a < b,
    }
}

/// The positions of `writer_id` in `table` (empty when it never committed).
pub fn current_positions(table: &Table, writer_id: &str) -> Positions {
    writer_positions(table, writer_id)
        .map(|(_, p)| p)
        .unwrap_or_default()
}

/// Refuses a commit when the newest snapshot of `writer_id` no longer holds `expected`: another
/// process committed under the same id since this one last did.
pub fn fence(table: &Table, writer_id: &str, expected: &Positions) -> Result<()> {
    let found = current_positions(table, writer_id);
    if &found == expected {
        Ok(())
    } else {
        Err(Error::Refused {
            operation: format!("commit as writer '{writer_id}'"),
            reason: format!(
                "another process committed under the same writer id (table positions {found:?}, this process expected {expected:?}); restart to resume from the table"
            ),
        })
    }
}

/// The fence of a group's coordinator: refuses its commit when the group's positions in
/// `table` are no longer the `expected` ones it started from (another coordinator committed).
pub fn fence_group(table: &Table, writer_id: &str, expected: &Positions) -> Result<()> {
    if &current_positions(table, writer_id) == expected {
        Ok(())
    } else {
        Err(Error::Refused {
            operation: format!("commit of group '{writer_id}'"),
            reason: "another coordinator committed meanwhile".into(),
        })
    }
}

/// The position of every stream once hand-offs advancing streams to `tos` (in order) apply on
/// `table_positions`.
pub fn chain_head<'a>(
    table_positions: &Positions,
    tos: impl IntoIterator<Item = &'a Positions>,
) -> Positions {
    let mut head = table_positions.clone();
    for to in tos {
        for (s, p) in to {
            let e = head.entry(s.clone()).or_insert(*p);
            *e = (*e).max(*p);
        }
    }
    head
}

/// Whether a hand-off from `from` to `to` continues the chain at `head`: each of its streams
/// starts where the chain is.
pub fn continues(head: &Positions, from: &Positions, to: &Positions) -> bool {
    to.keys().all(|s| head.get(s) == from.get(s))
}

/// Whether the chain at `head` already holds a hand-off to `to` (every stream at or past it).
pub fn already_committed(head: &Positions, to: &Positions) -> bool {
    to.iter().all(|(s, p)| head.get(s).is_some_and(|t| t >= p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &[(&str, i64)]) -> Positions {
        v.iter().map(|(s, p)| (s.to_string(), *p)).collect()
    }

    #[test]
    fn hand_offs_chain_per_stream_and_a_zombie_does_not_continue_it() {
        let table = p(&[("k:0", 10)]);
        let (a_from, a_to) = (p(&[("k:0", 10)]), p(&[("k:0", 20)]));
        let (b_from, b_to) = (p(&[]), p(&[("k:1", 5)])); // a stream read from the start
        let (c_from, c_to) = (p(&[("k:0", 20)]), p(&[("k:0", 30)]));
        assert!(continues(&table, &a_from, &a_to) && continues(&table, &b_from, &b_to));
        assert!(!continues(&table, &c_from, &c_to), "c starts where a ends");
        let head = chain_head(&table, [&a_to, &b_to]);
        assert_eq!(head, p(&[("k:0", 20), ("k:1", 5)]));
        assert!(continues(&head, &c_from, &c_to));
        // A zombie re-reading k:0 from 10 after a took it to 20.
        assert!(!continues(&head, &p(&[("k:0", 10)]), &p(&[("k:0", 25)])));
        // Already in the table: every stream at or past `to`.
        let in_table = p(&[("k:0", 20)]);
        assert!(already_committed(&in_table, &a_to));
        assert!(!already_committed(&in_table, &c_to));
    }

    #[test]
    fn a_commit_summary_names_the_writer_the_source_and_every_position() {
        let s = summary(
            "w1",
            "kafka://b/t",
            &p(&[("kafka:t:0", 7), ("kafka:t:1", 3)]),
        );
        assert_eq!(s[FLOE_WRITER_ID], "w1");
        assert_eq!(s[SOURCE_KEY], "kafka://b/t");
        assert_eq!(s["floe.position.kafka:t:0"], "7");
        assert_eq!(s["floe.position.kafka:t:1"], "3");
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn positions_are_read_back_from_a_summary() {
        let props = [
            ("floe.writer-id", "w1"),
            ("floe.source", "kafka://b/t"),
            ("floe.position.kafka:t:0", "42"),
            ("floe.position.bad", "x"),
        ];
        let s = Snapshot::builder()
            .with_snapshot_id(1)
            .with_sequence_number(1)
            .with_timestamp_ms(0)
            .with_manifest_list("m.avro")
            .with_summary(iceberg::spec::Summary {
                operation: iceberg::spec::Operation::Append,
                additional_properties: props
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            })
            .build();
        assert!(of_writer(&s, "w1") && !of_writer(&s, "w2"));
        assert_eq!(positions_of(&s), p(&[("kafka:t:0", 42)]));
    }
}
