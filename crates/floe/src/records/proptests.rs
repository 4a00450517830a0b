//! Property tests of the input decoders: NDJSON records (the rule `append` and `ingest`
//! share), CSV files and typed (Parquet) columns. Arbitrary input never panics; a line with
//! two concatenated objects is always rejected; integers are stored exactly when in range and
//! rejected outside; decimals are accepted iff they fit the column exactly; every format gives
//! the same answer for the same value.

use std::io::Write;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Int64Array};
use arrow::datatypes::{Decimal128Type, Int32Type, Int64Type};
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use proptest::prelude::*;

use crate::records::convert::{conform, Origin, TextSource};
use crate::records::decode::decode_records;
use crate::records::files::{InputFormat, InputReader};
use crate::records::value::Plan;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("l", DataType::Int64, true),
        Field::new("n", DataType::Int32, true),
        Field::new("d", DataType::Decimal128(10, 2), true),
        Field::new("w", DataType::Decimal128(38, 10), true),
        Field::new("z", DataType::Decimal128(5, 0), true),
        Field::new("f", DataType::Float32, true),
        Field::new("s", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None),
            true,
        ),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
            true,
        ),
    ]))
}

/// The stored value of `col` (an integer or a decimal's unscaled value), `None` if null.
fn stored(b: &RecordBatch, col: &str) -> Option<i128> {
    let a = b.column_by_name(col).expect("column");
    if a.is_null(0) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Int32 => a.as_primitive::<Int32Type>().value(0) as i128,
        DataType::Int64 => a.as_primitive::<Int64Type>().value(0) as i128,
        DataType::Decimal128(..) => a.as_primitive::<Decimal128Type>().value(0),
        other => panic!("{other}"),
    })
}

/// `literal` (JSON text) as the value of `col` in an NDJSON record: `Some` when accepted.
fn via_json(col: &str, literal: &str) -> Option<i128> {
    let line = format!("{{\"id\": 0, \"{col}\": {literal}}}");
    let d = decode_records(&schema(), &[line.as_bytes()]);
    match d.batch {
        Some(b) => {
            assert!(d.bad.is_empty());
            Some(stored(&b, col).expect("not null"))
        }
        None => {
            assert_eq!(d.bad.len(), 1);
            assert_eq!(d.bad[0].1.column, col, "{:?}", d.bad[0].1);
            None
        }
    }
}

/// `text` as the field of `col` in a CSV file read by `append`.
fn via_csv(col: &str, text: &str) -> Option<i128> {
    let mut f = tempfile::Builder::new().suffix(".csv").tempfile().unwrap();
    writeln!(f, "id,{col}\n0,{text}").unwrap();
    let mut r = InputReader::open(f.path(), Some(InputFormat::Csv), schema()).unwrap();
    match r.next_batch() {
        Ok(Some(b)) => Some(stored(&b, col).expect("not null")),
        Ok(None) => panic!("no batch"),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains(&format!("column '{col}'")), "{e}");
            None
        }
    }
}

/// A typed (Parquet) column holding `a` converted to the table's `col`.
fn via_typed(col: &str, a: ArrayRef) -> Option<i128> {
    let s = Arc::new(Schema::new(vec![Field::new(
        col,
        a.data_type().clone(),
        true,
    )]));
    let b = RecordBatch::try_new(s, vec![a]).unwrap();
    let target = Arc::new(Schema::new(
        schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let origin = Origin {
        file: "x.parquet".into(),
        unit: "row",
        first: 0,
        text: TextSource::Typed,
    };
    conform(&b, &Plan::new(&target), &origin)
        .ok()
        .map(|b| stored(&b, col).expect("not null"))
}

/// Integers, dense around the bounds of `int` and `bigint`.
fn ints() -> impl Strategy<Value = i128> {
    let near = |c: i128| (c - 1000)..(c + 1000);
    prop_oneof![
        any::<i64>().prop_map(|v| v as i128),
        any::<i32>().prop_map(|v| v as i128),
        near(i64::MIN as i128),
        near(i64::MAX as i128),
        near(i32::MIN as i128),
        near(i32::MAX as i128),
        any::<i128>(),
        (-1000i128..1000),
    ]
}

/// `m * 10^e` as exact decimal text, with `zeros` extra trailing fractional zeros.
fn decimal_text(m: i64, e: i32, zeros: usize) -> String {
    let sign = if m < 0 { "-" } else { "" };
    let digits = m.unsigned_abs().to_string();
    let (int, frac) = if e >= 0 {
        (format!("{digits}{}", "0".repeat(e as usize)), String::new())
    } else {
        let k = (-e) as usize;
        let padded = format!(
            "{}{digits}",
            "0".repeat((k + 1).saturating_sub(digits.len()))
        );
        let (i, f) = padded.split_at(padded.len() - k);
        (i.to_string(), f.to_string())
    };
    let frac = format!("{frac}{}", "0".repeat(zeros));
    if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

/// The unscaled value of `m * 10^e` in `decimal(p, s)`, or `None` when it does not fit exactly.
fn expected_decimal(m: i64, e: i32, p: u32, s: u32) -> Option<i128> {
    let shift = e + s as i32;
    let unscaled = if shift >= 0 {
        (m as i128).checked_mul(10i128.checked_pow(shift as u32)?)?
    } else {
        let d = 10i128.checked_pow((-shift) as u32)?;
        if (m as i128) % d != 0 {
            return None;
        }
        m as i128 / d
    };
    (unscaled.unsigned_abs() < 10u128.pow(p)).then_some(unscaled)
}

/// A small JSON object of known columns.
fn object() -> impl Strategy<Value = String> {
    (any::<i64>(), "[a-z ]{0,8}", any::<bool>()).prop_map(|(id, s, with_s)| {
        if with_s {
            format!("{{\"id\": {id}, \"s\": \"{s}\"}}")
        } else {
            format!("{{\"id\":{id}}}")
        }
    })
}

/// A value of any JSON kind, fitting or not.
fn any_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        "-?[0-9]{1,3}\\.[0-9]{0,4}(e-?[0-9])?",
        "[a-z ]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just("\"a\\\"b\\u00e9\"".to_string()),
        Just("\"2026-13-01\"".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("[1, {\"a\": [2]}]".to_string()),
        Just("{\"a\": 1}".to_string()),
    ]
}

/// A value that fits column `key` of [`schema`] (mostly; some are out of range).
fn fitting(key: &str) -> BoxedStrategy<String> {
    match key {
        "id" | "l" => any::<i64>().prop_map(|v| v.to_string()).boxed(),
        "n" => any::<i32>().prop_map(|v| v.to_string()).boxed(),
        "d" | "w" => "-?[0-9]{1,4}(\\.[0-9]{0,3})?".boxed(),
        "z" => "[0-9]{1,6}".boxed(),
        "f" => "-?[0-9]{1,3}\\.[0-9]{1,3}".boxed(),
        "s" => prop_oneof![
            "[a-z ]{0,6}".prop_map(|s| format!("\"{s}\"")),
            Just("\"a\\\"b\\u00e9\\n\"".to_string()),
        ]
        .boxed(),
        "ts" => "2026-0[1-9]-[0-2][1-9]T[01][0-9]:[0-5][0-9]:[0-5][0-9](Z|\\+02:00)?"
            .prop_map(|t| format!("\"{t}\""))
            .boxed(),
        _ => prop_oneof![
            Just("[\"x\", null, \"y\"]".to_string()),
            Just("[]".to_string()),
            Just("null".to_string()),
        ]
        .boxed(),
    }
}

/// One member of a generated record: a key that selects a column (exactly, up to ASCII case,
/// or with an escape) with a value that mostly fits it, or an unknown key, and any spacing.
fn member() -> impl Strategy<Value = String> {
    let columns = vec!["id", "l", "n", "d", "w", "z", "f", "s", "ts", "tags"];
    let known = prop::sample::select(columns).prop_flat_map(|k| {
        let v = prop_oneof![4 => fitting(k), 1 => any_value().boxed()];
        (Just(format!("\"{k}\"")), v)
    });
    let folded = prop::sample::select(vec!["ID", "Ts", "S", "TAGS"])
        .prop_flat_map(|k| (Just(format!("\"{k}\"")), fitting(&k.to_ascii_lowercase())));
    let escaped = (Just("\"\\u0069d\"".to_string()), fitting("id"));
    let unknown = ("[a-z]{1,3}".prop_map(|k| format!("\"{k}\"")), any_value());
    let pair = prop_oneof![8 => known, 1 => folded, 1 => escaped, 1 => unknown];
    (pair, "[ \t]{0,2}").prop_map(|((k, v), ws)| format!("{k}{ws}:{ws}{v}"))
}

/// A generated record: members in any order, then maybe damaged (cut short, a byte changed,
/// something appended, no `id`), so that good and bad records of every kind mix.
fn record() -> impl Strategy<Value = Vec<u8>> {
    (
        fitting("id"),
        prop::collection::vec(member(), 0..7),
        0usize..12,
        any::<usize>(),
        any::<u8>(),
    )
        .prop_map(|(id, mut members, damage, at, byte)| {
            // Mostly with the required column, at any place.
            if damage != 4 {
                members.insert(at % (members.len() + 1), format!("\"id\": {id}"));
            }
            let mut r = format!("{{{}}}", members.join(",")).into_bytes();
            let at = at % r.len();
            match damage {
                0 => r.truncate(at),
                1 => r[at] = byte,
                2 => r.extend_from_slice(b" {}"),
                3 => r.insert(0, b' '),
                _ => {}
            }
            r
        })
}

#[test]
fn generated_records_are_good_and_bad_in_fair_shares() {
    // The differential test below compares kept values only where records are good: the
    // generator must make plenty of both.
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let plan = Plan::new(&schema());
    let (mut good, mut all) = (0, 0);
    for _ in 0..2000 {
        let r = record().new_tree(&mut runner).unwrap().current();
        good += plan.decode_record(&r).is_ok() as usize;
        all += 1;
    }
    assert!(good * 5 > all && good * 5 < all * 4, "{good} good of {all}");
}

fn read_all(path: &std::path::Path, format: InputFormat) -> crate::base::error::Result<usize> {
    let mut r = InputReader::open(path, Some(format), schema())?;
    let mut rows = 0;
    while let Some(b) = r.next_batch()? {
        rows += b.num_rows();
    }
    Ok(rows)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_and_every_record_is_accounted_for(
        records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 1..6),
    ) {
        let payloads: Vec<&[u8]> = records.iter().map(|r| r.as_slice()).collect();
        let d = decode_records(&schema(), &payloads);
        let good = d.batch.as_ref().map_or(0, |b| b.num_rows());
        prop_assert_eq!(good + d.bad.len(), payloads.len());
        // The same bytes as an NDJSON and a CSV file for `append`: an answer, never a panic.
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for r in &records {
            f.write_all(r).unwrap();
            f.write_all(b"\n").unwrap();
        }
        let _ = read_all(f.path(), InputFormat::Ndjson);
        let mut c = tempfile::NamedTempFile::new().unwrap();
        c.write_all(b"id,l,s\n").unwrap();
        c.write_all(&records.concat()).unwrap();
        let _ = read_all(c.path(), InputFormat::Csv);
    }

    #[test]
    fn many_records_at_once_decode_as_each_does_alone(
        records in prop::collection::vec(record(), 1..40),
    ) {
        // The batch decoder (member by member into columns, key hints carried from record to
        // record) against the one-record decoder, record by record.
        let payloads: Vec<&[u8]> = records.iter().map(|r| r.as_slice()).collect();
        let d = decode_records(&schema(), &payloads);
        let plan = Plan::new(&schema());
        let mut rows = Vec::new();
        let mut bad = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            match plan.decode_record(p) {
                Ok(r) => rows.push(r),
                Err(b) => bad.push((i, b)),
            }
        }
        prop_assert_eq!(&d.bad, &bad);
        let alone = (!rows.is_empty()).then(|| plan.build(&rows).unwrap());
        prop_assert_eq!(d.batch, alone);
    }

    #[test]
    fn json_like_text_never_panics(
        s in r#"\{"(id|l|n|d|f|s|ts|tags)": ?[\[\]{}",:0-9a-zA-Z.eE+\- \\]{0,40}"#,
    ) {
        let d = decode_records(&schema(), &[s.as_bytes()]);
        let good = d.batch.as_ref().map_or(0, |b| b.num_rows());
        prop_assert_eq!(good + d.bad.len(), 1);
    }

    #[test]
    fn a_line_with_two_concatenated_objects_is_always_rejected(
        a in object(),
        b in object(),
        sep in "[ \t\r]{0,3}",
    ) {
        let line = format!("{a}{sep}{b}");
        let d = decode_records(&schema(), &[line.as_bytes()]);
        prop_assert!(d.batch.is_none());
        prop_assert_eq!(d.bad.len(), 1);
        prop_assert!(d.bad[0].1.reason.contains("more than one JSON value"), "{:?}", d.bad[0]);
        // Each alone is fine.
        let d = decode_records(&schema(), &[a.as_bytes(), b.as_bytes()]);
        prop_assert_eq!(d.batch.map(|b| b.num_rows()), Some(2));
        // `append` fails on the line, naming it.
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "{a}\n{line}").unwrap();
        let e = read_all(f.path(), InputFormat::Ndjson).unwrap_err().to_string();
        prop_assert!(e.contains("line 2") && e.contains("more than one JSON value"), "{}", e);
    }

    #[test]
    fn integers_are_stored_exactly_in_range_and_rejected_outside(v in ints(), form in 0usize..4) {
        let text = match form {
            0 => v.to_string(),
            1 => format!("{v}.0"),
            2 => format!("{v}e0"),
            // `000e-2` would be invalid JSON (a leading zero), not a test of the range.
            _ if v == 0 => "0e-2".to_string(),
            _ => format!("{v}00e-2"),
        };
        for (col, min, max) in [
            ("l", i64::MIN as i128, i64::MAX as i128),
            ("n", i32::MIN as i128, i32::MAX as i128),
        ] {
            let want = (min..=max).contains(&v).then_some(v);
            prop_assert_eq!(via_json(col, &text), want, "json {} {}", col, text);
            prop_assert_eq!(via_json(col, &format!("\"{text}\"")), want, "string {} {}", col, text);
            prop_assert_eq!(via_csv(col, &text), want, "csv {} {}", col, text);
            if v.unsigned_abs() < 10u128.pow(38) {
                let a: ArrayRef = Arc::new(
                    Decimal128Array::from(vec![v]).with_precision_and_scale(38, 0).unwrap(),
                );
                prop_assert_eq!(via_typed(col, a), want, "decimal source {} {}", col, v);
            }
            if let Ok(x) = i64::try_from(v) {
                let a: ArrayRef = Arc::new(Int64Array::from(vec![x]));
                prop_assert_eq!(via_typed(col, a), want, "int64 source {} {}", col, v);
            }
        }
        // A fraction is never dropped.
        let frac = format!("{v}.5");
        prop_assert_eq!(via_json("l", &frac), None);
        prop_assert_eq!(via_csv("n", &frac), None);
    }

    #[test]
    fn decimals_are_accepted_iff_they_fit_exactly(
        m in prop_oneof![any::<i64>(), -100_000i64..100_000],
        e in -14i32..14,
        zeros in 0usize..3,
        exp_form in any::<bool>(),
    ) {
        let text = if exp_form {
            format!("{m}e{e}")
        } else {
            decimal_text(m, e, zeros)
        };
        let typed: ArrayRef = {
            let (v, scale) = if e <= 0 {
                (m as i128, (-e) as i8)
            } else {
                ((m as i128) * 10i128.pow(e as u32), 0)
            };
            Arc::new(Decimal128Array::from(vec![v]).with_precision_and_scale(38, scale).unwrap())
        };
        for (col, p, s) in [("d", 10, 2), ("w", 38, 10), ("z", 5, 0)] {
            let want = expected_decimal(m, e, p, s);
            prop_assert_eq!(via_json(col, &text), want, "json {} {}", col, text);
            prop_assert_eq!(via_json(col, &format!("\"{text}\"")), want, "string {} {}", col, text);
            prop_assert_eq!(via_csv(col, &text), want, "csv {} {}", col, text);
            prop_assert_eq!(via_typed(col, typed.clone()), want, "parquet {} {}", col, text);
        }
    }
}
