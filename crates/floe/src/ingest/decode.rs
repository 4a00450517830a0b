//! Record decoding for streams: a micro-batch of NDJSON payloads becomes one Arrow batch in the
//! table schema, and every record that does not fit is set aside with the reason (it goes to
//! the dead-letter sink; the stream goes on).
//!
//! The fast path decodes the whole micro-batch at once; only when that fails is each record
//! checked on its own, so bad records cost time only when they occur.

use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;

use crate::ingest::files::{decode_json, explain_line, BadValue};

/// A decoded micro-batch: the good records as one batch, and the index and reason of every bad
/// record.
#[derive(Debug, Default)]
pub struct Decoded {
    pub batch: Option<RecordBatch>,
    pub bad: Vec<(usize, BadValue)>,
}

fn bad(reason: &str, value: &[u8]) -> BadValue {
    BadValue {
        column: "-".into(),
        value: String::from_utf8_lossy(&value[..value.len().min(80)]).into_owned(),
        reason: reason.into(),
    }
}

fn join(payloads: &[&str]) -> Vec<u8> {
    let mut body = Vec::with_capacity(payloads.iter().map(|p| p.len() + 1).sum());
    for p in payloads {
        body.extend_from_slice(p.as_bytes());
        body.push(b'\n');
    }
    body
}

/// Decodes `payloads` (one JSON object each) into `target`.
pub fn decode_records(target: &SchemaRef, payloads: &[&[u8]]) -> Decoded {
    let mut out = Decoded::default();
    let mut good: Vec<(usize, &str)> = Vec::with_capacity(payloads.len());
    for (i, p) in payloads.iter().enumerate() {
        match std::str::from_utf8(p) {
            Err(_) => out.bad.push((i, bad("payload is not UTF-8", p))),
            Ok(s) if s.trim().is_empty() => out.bad.push((i, bad("empty record", p))),
            Ok(s) if s.contains('\n') && serde_json::from_str::<serde_json::Value>(s).is_err() => {
                // Several lines that are not one JSON document: never split a record.
                out.bad
                    .push((i, bad("invalid JSON spanning several lines", p)))
            }
            Ok(s) => good.push((i, s)),
        }
    }
    if good.is_empty() {
        return out;
    }
    let texts: Vec<&str> = good.iter().map(|(_, s)| *s).collect();
    if let Ok(b) = decode_json(target, &join(&texts), texts.len()) {
        if b.num_rows() == texts.len() {
            out.batch = Some(b);
            return out;
        }
    }
    // Slow path: find the bad records, then decode the rest together.
    let mut keep: Vec<(usize, &str)> = Vec::with_capacity(good.len());
    for (i, s) in good {
        match explain_line(target, s) {
            Some(b) => out.bad.push((i, b)),
            None => keep.push((i, s)),
        }
    }
    if !keep.is_empty() {
        let texts: Vec<&str> = keep.iter().map(|(_, s)| *s).collect();
        match decode_json(target, &join(&texts), texts.len()) {
            Ok(b) if b.num_rows() == texts.len() => out.batch = Some(b),
            _ => {
                // Records that decode alone but not together: decode one by one.
                let mut batches = Vec::new();
                for (i, s) in keep {
                    match decode_json(target, &join(&[s]), 1) {
                        Ok(b) if b.num_rows() == 1 => batches.push(b),
                        Ok(_) => out
                            .bad
                            .push((i, bad("record did not decode to one row", s.as_bytes()))),
                        Err(e) => out.bad.push((i, bad(&e.to_string(), s.as_bytes()))),
                    }
                }
                out.batch = arrow::compute::concat_batches(target, &batches).ok();
            }
        }
    }
    out.bad.sort_by_key(|(i, _)| *i);
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
    fn all_good_is_one_batch() {
        let payloads: Vec<&[u8]> = vec![br#"{"id": 1}"#, br#"{"id": 2, "name": "z"}"#];
        let d = decode_records(&schema(), &payloads);
        assert!(d.bad.is_empty());
        assert_eq!(d.batch.unwrap().num_rows(), 2);
    }
}
