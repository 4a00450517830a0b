//! Record decoding for streams: a micro-batch of NDJSON payloads becomes one Arrow batch in the
//! table schema, and every record that does not fit is set aside with the reason (it goes to
//! the dead-letter sink; the stream goes on).
//!
//! Each payload goes through the same record rule and checked conversions as `floe append`'s
//! NDJSON lines ([`crate::records::ndjson`], [`crate::records::value`]): exactly one JSON object,
//! every value stored exactly or the whole record set aside.

use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;

use crate::records::value::{BadValue, Plan};

/// A decoded micro-batch: the good records as one batch, and the index and reason of every bad
/// record.
#[derive(Debug, Default)]
pub struct Decoded {
    pub batch: Option<RecordBatch>,
    pub bad: Vec<(usize, BadValue)>,
}

/// Records per decoding thread: a micro-batch of fewer than twice this is decoded on the
/// calling thread (starting a thread costs about as much as decoding a few hundred records).
const RECORDS_PER_THREAD: usize = 2048;

/// Decodes `payloads` (one JSON object each) into `target`. A large micro-batch is cut into one
/// contiguous run per core, decoded at once on scoped threads, and put back together in
/// order: the same batch and the same bad records (by index) as decoding it in one piece.
pub fn decode_records(target: &SchemaRef, payloads: &[&[u8]]) -> Decoded {
    let runs = decode_runs(target, payloads);
    let mut out = Decoded {
        batch: None,
        bad: runs.bad,
    };
    let mut batches = runs.batches;
    match batches.len() {
        0 => {}
        1 => out.batch = batches.pop(),
        _ => match arrow::compute::concat_batches(&batches[0].schema(), &batches) {
            Ok(b) => out.batch = Some(b),
            // The runs' batches share one schema; should it fail, decode in one piece.
            Err(_) => return decode_run(target, payloads),
        },
    }
    out
}

/// A decoded micro-batch whose good records stay in the runs they were decoded in.
#[derive(Debug, Default)]
pub struct DecodedRuns {
    /// The good records, in input order, a batch per run.
    pub batches: Vec<RecordBatch>,
    /// The index and reason of every bad record.
    pub bad: Vec<(usize, BadValue)>,
}

/// [`decode_records`] without joining the runs into one batch (a copy of every value), for
/// callers that take batches one after the other anyway.
pub fn decode_runs(target: &SchemaRef, payloads: &[&[u8]]) -> DecodedRuns {
    let (batches, bad) = decode_runs_then(target, payloads, |b| b);
    DecodedRuns { batches, bad }
}

/// [`decode_runs`] with `then` applied to each run's batch on the thread that decoded it, so
/// that what follows the decoding (the ingest's partition split) runs in parallel too: the
/// results in input order (one per run that kept a record), and the index and reason of
/// every bad record.
pub fn decode_runs_then<T: Send>(
    target: &SchemaRef,
    payloads: &[&[u8]],
    then: impl Fn(RecordBatch) -> T + Sync,
) -> (Vec<T>, Vec<(usize, BadValue)>) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(payloads.len() / RECORDS_PER_THREAD);
    let one = |c: &[&[u8]]| {
        let d = decode_run(target, c);
        (d.batch.map(&then), d.bad)
    };
    if threads <= 1 {
        let (out, bad) = one(payloads);
        return (out.into_iter().collect(), bad);
    }
    let run = payloads.len().div_ceil(threads);
    let parts = std::thread::scope(|s| {
        let others: Vec<_> = payloads
            .chunks(run)
            .skip(1)
            .map(|c| s.spawn(|| one(c)))
            .collect();
        let mut parts = vec![one(&payloads[..run])];
        for h in others {
            parts.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        parts
    });
    let (mut outs, mut bad) = (Vec::new(), Vec::new());
    for (k, (out, b)) in parts.into_iter().enumerate() {
        bad.extend(b.into_iter().map(|(i, b)| (i + k * run, b)));
        outs.extend(out);
    }
    (outs, bad)
}

/// [`decode_records`] on the calling thread (however large the micro-batch).
pub fn decode_run(target: &SchemaRef, payloads: &[&[u8]]) -> Decoded {
    let plan = Plan::new(target);
    let mut cells = plan.decode_many(payloads);
    let mut out = Decoded {
        batch: None,
        bad: std::mem::take(&mut cells.bad),
    };
    if cells.kept.is_empty() {
        return out;
    }
    let kept = cells.kept.clone();
    match plan.build_columns(cells) {
        Ok(b) => out.batch = Some(b),
        Err(_) => {
            // Values that convert but do not build together (should not happen): decode the
            // kept records again one by one, find those that cannot be stored, and keep the
            // rest.
            let mut batches = Vec::new();
            let mut stored = Vec::new();
            for i in kept {
                let one = plan
                    .decode_record(payloads[i])
                    .map_err(|b| b.reason)
                    .and_then(|row| plan.build(&[row]).map_err(|e| e.to_string()));
                match one {
                    Ok(b) => {
                        batches.push(b);
                        stored.push(i);
                    }
                    Err(e) => out.bad.push((
                        i,
                        BadValue::record(payloads[i], format!("cannot be stored: {e}")),
                    )),
                }
            }
            if !batches.is_empty() {
                match arrow::compute::concat_batches(target, &batches) {
                    Ok(b) => out.batch = Some(b),
                    Err(e) => out.bad.extend(stored.into_iter().map(|i| {
                        (
                            i,
                            BadValue::record(payloads[i], format!("cannot be stored: {e}")),
                        )
                    })),
                }
            }
            out.bad.sort_by_key(|(i, _)| *i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn good_records_decode_together_and_bad_ones_are_set_aside() {
        let payloads: Vec<&[u8]> = vec![
            br#"{"id": 1, "name": "a"}"#,
            br#"{"id": "x", "name": "b"}"#,
            b"not json",
            br#"{"name": "no id"}"#,
            b"",
            &[0xff, 0xfe],
            br#"{"id": 5}"#,
        ];
        let d = decode_records(&schema(), &payloads);
        assert_eq!(d.batch.as_ref().unwrap().num_rows(), 2);
        let bad: Vec<usize> = d.bad.iter().map(|(i, _)| *i).collect();
        assert_eq!(bad, vec![1, 2, 3, 4, 5]);
        assert_eq!(d.bad[0].1.column, "id");
        assert!(d.bad[1].1.reason.contains("invalid JSON"));
        assert!(d.bad[2].1.reason.contains("required"));
        assert!(d.bad[4].1.reason.contains("UTF-8"));
    }

    #[test]
    fn a_large_micro_batch_decodes_in_parallel_as_it_does_in_one_piece() {
        let texts: Vec<String> = (0..3 * RECORDS_PER_THREAD * 4 + 7)
            .map(|i| match i % 97 {
                0 => format!(r#"{{"id": "bad-{i}"}}"#),
                1 => "not json".to_string(),
                _ => format!(r#"{{"id": {i}, "name": "n{i}"}}"#),
            })
            .collect();
        let payloads: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
        let whole = decode_run(&schema(), &payloads);
        let split = decode_records(&schema(), &payloads);
        assert_eq!(split.batch, whole.batch);
        let idx = |d: &Decoded| {
            d.bad
                .iter()
                .map(|(i, b)| (*i, b.reason.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(idx(&split), idx(&whole));
        assert_eq!(split.bad.len(), 2 * texts.len().div_ceil(97));
        assert_eq!(
            split.batch.unwrap().num_rows() + split.bad.len(),
            texts.len()
        );
    }

    #[test]
    fn all_good_is_one_batch() {
        let payloads: Vec<&[u8]> = vec![br#"{"id": 1}"#, br#"{"id": 2, "name": "z"}"#];
        let d = decode_records(&schema(), &payloads);
        assert!(d.bad.is_empty());
        assert_eq!(d.batch.unwrap().num_rows(), 2);
    }
}
