//! Writer watermarks: the snapshot-summary keys streaming writers store their recovery point
//! in. A writer restarts from the newest snapshot (on its branch's history) carrying its id, so
//! that snapshot must outlive expiry.
//!
//! Recognised writers:
//! - floe: `floe.writer-id` (positions in other `floe.*` keys);
//! - Flink's Iceberg sink: `flink.job-id` + `flink.max-committed-checkpoint-id`;
//! - Kafka Connect Iceberg sinks: `kafka.connect.offsets.<topic>.<group>` (one writer per key),
//!   or `kafka.connect.commit-id` (+ `kafka.connect.vtts`).

use std::collections::BTreeMap;

use iceberg::spec::TableMetadata;

/// Summary key naming a floe writer.
pub const FLOE_WRITER_ID: &str = "floe.writer-id";
/// Summary key naming a Flink job.
pub const FLINK_JOB_ID: &str = "flink.job-id";
/// Summary key of Flink's committed checkpoint.
pub const FLINK_CHECKPOINT: &str = "flink.max-committed-checkpoint-id";
const KAFKA_CONNECT_OFFSETS: &str = "kafka.connect.offsets.";
const KAFKA_CONNECT_COMMIT_ID: &str = "kafka.connect.commit-id";

/// The newest snapshot of one writer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Watermark {
    /// `floe`, `flink` or `kafka-connect`.
    pub kind: &'static str,
    /// The writer's id within its kind (floe writer id, Flink job id, offsets key).
    pub id: String,
    /// The newest snapshot carrying the writer's keys.
    pub snapshot_id: i64,
    pub timestamp_ms: i64,
    /// The recovery point as stored (checkpoint id, offsets...).
    pub position: BTreeMap<String, String>,
}

impl Watermark {
    /// `kind:id`, unique per writer.
    pub fn writer(&self) -> String {
        format!("{}:{}", self.kind, self.id)
    }
}

/// The summary entries under `prefix`, except `except`.
fn keys_with_prefix(
    props: &std::collections::HashMap<String, String>,
    prefix: &str,
    except: &str,
) -> BTreeMap<String, String> {
    props
        .iter()
        .filter(|(k, _)| k.starts_with(prefix) && k.as_str() != except)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The writers a snapshot summary names, as (kind, id, position keys).
fn writers_of(
    props: &std::collections::HashMap<String, String>,
) -> Vec<(&'static str, String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    if let Some(id) = props.get(FLOE_WRITER_ID) {
        out.push((
            "floe",
            id.clone(),
            keys_with_prefix(props, "floe.", FLOE_WRITER_ID),
        ));
    }
    if let Some(id) = props.get(FLINK_JOB_ID) {
        out.push((
            "flink",
            id.clone(),
            keys_with_prefix(props, "flink.", FLINK_JOB_ID),
        ));
    }
    let mut offsets = false;
    for (k, v) in props {
        if let Some(rest) = k.strip_prefix(KAFKA_CONNECT_OFFSETS) {
            offsets = true;
            out.push((
                "kafka-connect",
                rest.to_string(),
                BTreeMap::from([(k.clone(), v.clone())]),
            ));
        }
    }
    if !offsets && props.contains_key(KAFKA_CONNECT_COMMIT_ID) {
        out.push((
            "kafka-connect",
            "sink".to_string(),
            keys_with_prefix(props, "kafka.connect.", ""),
        ));
    }
    out
}

/// The newest snapshot of every writer found in the table's snapshots (by sequence number,
/// then timestamp), sorted by writer.
pub fn watermarks(md: &TableMetadata) -> Vec<Watermark> {
    let mut newest: BTreeMap<(&'static str, String), (i64, Watermark)> = BTreeMap::new();
    for s in md.snapshots() {
        for (kind, id, position) in writers_of(&s.summary().additional_properties) {
            let order = s.sequence_number();
            let w = Watermark {
                kind,
                id: id.clone(),
                snapshot_id: s.snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
                position,
            };
            match newest.get(&(kind, id.clone())) {
                Some((o, old)) if (*o, old.timestamp_ms) >= (order, w.timestamp_ms) => {}
                _ => {
                    newest.insert((kind, id), (order, w));
                }
            }
        }
    }
    newest.into_values().map(|(_, w)| w).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn recognises_each_writer_kind() {
        let props = HashMap::from([
            (FLINK_JOB_ID.to_string(), "job-1".to_string()),
            (FLINK_CHECKPOINT.to_string(), "42".to_string()),
            (
                "kafka.connect.offsets.events.cg".to_string(),
                "{}".to_string(),
            ),
            (FLOE_WRITER_ID.to_string(), "w1".to_string()),
            ("floe.kafka.events.0".to_string(), "100".to_string()),
            ("other".to_string(), "x".to_string()),
        ]);
        let mut w = writers_of(&props);
        w.sort_by(|a, b| a.0.cmp(b.0));
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].0, "flink");
        assert_eq!(w[0].2.get(FLINK_CHECKPOINT).map(String::as_str), Some("42"));
        assert_eq!(w[1].0, "floe");
        assert_eq!(w[1].2.len(), 1);
        assert_eq!(
            w[2],
            (
                "kafka-connect",
                "events.cg".to_string(),
                BTreeMap::from([(
                    "kafka.connect.offsets.events.cg".to_string(),
                    "{}".to_string()
                )])
            )
        );
        assert!(writers_of(&HashMap::new()).is_empty());
    }
}
