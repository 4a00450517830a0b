//! Unit tests of the checked conversions: numbers, text, dates and times, NDJSON records,
//! Arrow (Parquet) values and building nested arrays.

use std::sync::Arc;

use arrow::array::{Array, Decimal128Array, Float64Array, Int64Array, TimestampNanosecondArray};
use arrow_schema::{Field, Schema};

use super::number::{number_to, Number};
use super::text::text_to;
use super::*;

fn leaf(dt: DataType) -> Node {
    Node::new(&Arc::new(Field::new("c", dt, true)))
}

/// A JSON number into `dt`.
fn num(dt: DataType, text: &str) -> std::result::Result<Cell<'static>, String> {
    let n = leaf(dt);
    let Kind::Leaf(l) = n.kind else { panic!() };
    number_to(l, Number::Text(text), n.type_name())
}

fn text(dt: DataType, t: &str) -> std::result::Result<Cell<'static>, String> {
    let n = leaf(dt);
    let Kind::Leaf(l) = n.kind else { panic!() };
    text_to(l, t, n.type_name())
}

fn err(r: std::result::Result<Cell<'static>, String>) -> String {
    match r {
        Ok(c) => panic!("accepted as {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn integers_out_of_range_or_fractional_are_bad_not_saturated_or_truncated() {
    let e = err(num(DataType::Int64, "-9223372036854775900"));
    assert_eq!(e, "out of range for bigint");
    assert_eq!(
        num(DataType::Int64, "-9223372036854775808"),
        Ok(Cell::I64(i64::MIN))
    );
    assert_eq!(
        num(DataType::Int64, "9223372036854775807"),
        Ok(Cell::I64(i64::MAX))
    );
    assert!(err(num(DataType::Int64, "9223372036854775808")).contains("out of range"));
    assert!(err(num(DataType::Int64, "1.9")).contains("fractional part"));
    assert!(err(num(DataType::Int64, "-0.5")).contains("fractional part"));
    assert!(err(num(DataType::Int64, "1e-1")).contains("fractional part"));
    assert!(err(num(DataType::Int64, "1e400")).contains("out of range"));
    assert!(err(num(DataType::Int64, "1e99999999999999999999999")).contains("out of range"));
    // Integral values written with a fraction or exponent lose nothing.
    assert_eq!(num(DataType::Int64, "1.0"), Ok(Cell::I64(1)));
    assert_eq!(num(DataType::Int64, "1e2"), Ok(Cell::I64(100)));
    assert_eq!(num(DataType::Int64, "1.5e1"), Ok(Cell::I64(15)));
    assert_eq!(num(DataType::Int64, "100e-2"), Ok(Cell::I64(1)));
    assert_eq!(num(DataType::Int64, "-0"), Ok(Cell::I64(0)));
    assert_eq!(num(DataType::Int64, "0e-99999999999"), Ok(Cell::I64(0)));
    assert_eq!(
        num(DataType::Int64, "9223372036854775807.000"),
        Ok(Cell::I64(i64::MAX))
    );
    assert_eq!(num(DataType::Int32, "2147483647"), Ok(Cell::I32(i32::MAX)));
    assert_eq!(
        err(num(DataType::Int32, "2147483648")),
        "out of range for int"
    );
    assert!(err(num(DataType::Int32, "-2147483649")).contains("out of range for int"));
}

#[test]
fn decimals_never_round_and_never_overflow() {
    let d = DataType::Decimal128(10, 2);
    let e = err(num(d.clone(), "1.239"));
    assert!(
        e.contains("more than 2 digit(s) after the decimal point"),
        "{e}"
    );
    assert_eq!(num(d.clone(), "1.230"), Ok(Cell::I128(123)));
    assert_eq!(num(d.clone(), "1.23"), Ok(Cell::I128(123)));
    assert_eq!(num(d.clone(), "3"), Ok(Cell::I128(300)));
    assert_eq!(num(d.clone(), "-0.00"), Ok(Cell::I128(0)));
    assert_eq!(num(d.clone(), "1.5e1"), Ok(Cell::I128(1500)));
    assert_eq!(num(d.clone(), "1e-2"), Ok(Cell::I128(1)));
    assert_eq!(num(d.clone(), "99999999.99"), Ok(Cell::I128(9_999_999_999)));
    let e = err(num(d.clone(), "100000000"));
    assert!(e.contains("out of range for decimal(10,2)"), "{e}");
    assert!(err(num(d.clone(), "1e-3")).contains("after the decimal point"));
    assert!(err(num(d, "1e40")).contains("out of range"));
    let big = DataType::Decimal128(38, 0);
    assert_eq!(
        num(big.clone(), "99999999999999999999999999999999999999"),
        Ok(Cell::I128(10i128.pow(38) - 1))
    );
    assert!(err(num(big, "100000000000000000000000000000000000000")).contains("out of range"));
}

#[test]
fn floats_reject_overflow_and_underflow() {
    assert_eq!(
        err(num(DataType::Float32, "1e39")),
        "out of range for float"
    );
    assert_eq!(num(DataType::Float32, "3.4e38"), Ok(Cell::F32(3.4e38)));
    assert!(err(num(DataType::Float32, "1e-50")).contains("too small for float"));
    assert_eq!(num(DataType::Float32, "0.0"), Ok(Cell::F32(0.0)));
    assert_eq!(num(DataType::Float32, "-0"), Ok(Cell::F32(-0.0)));
    assert_eq!(
        err(num(DataType::Float64, "1e309")),
        "out of range for double"
    );
    assert_eq!(num(DataType::Float64, "1e39"), Ok(Cell::F64(1e39)));
    assert_eq!(num(DataType::Float64, "0.1"), Ok(Cell::F64(0.1)));
    assert!(matches!(text(DataType::Float64, "NaN"), Ok(Cell::F64(v)) if v.is_nan()));
    assert_eq!(
        text(DataType::Float32, "-Infinity"),
        Ok(Cell::F32(f32::NEG_INFINITY))
    );
}

#[test]
fn text_follows_the_same_rules() {
    assert_eq!(text(DataType::Int64, " 12 "), Ok(Cell::I64(12)));
    assert_eq!(text(DataType::Int64, "+12"), Ok(Cell::I64(12)));
    assert!(err(text(DataType::Int64, "1.9")).contains("fractional"));
    assert!(err(text(DataType::Int64, "12abc")).contains("not a number"));
    assert!(err(text(DataType::Int64, "0x10")).contains("not a number"));
    assert!(err(text(DataType::Int64, "1_000")).contains("not a number"));
    assert!(err(text(DataType::Decimal128(10, 2), "1.239")).contains("after the decimal"));
    assert_eq!(text(DataType::Boolean, "TRUE"), Ok(Cell::Bool(true)));
    assert!(err(text(DataType::Boolean, "yes")).contains("not a boolean"));
    assert_eq!(
        text(DataType::LargeBinary, "00ff"),
        Ok(Cell::Bytes(vec![0, 255].into()))
    );
    assert!(err(text(DataType::LargeBinary, "0g")).contains("hex"));
    let u = text(
        DataType::FixedSizeBinary(16),
        "f79c3e09-677c-4e65-8c5b-7e1cfb0f1f4f",
    )
    .unwrap();
    assert!(matches!(u, Cell::Bytes(b) if b[0] == 0xf7 && b.len() == 16));
    assert!(err(text(DataType::FixedSizeBinary(4), "00ff")).contains("exactly 4"));
}

#[test]
fn dates_and_timestamps_are_checked() {
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    let tz = DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()));
    let ns = DataType::Timestamp(TimeUnit::Nanosecond, None);
    let base = 1_767_261_600_000_000i64; // 2026-01-01T10:00:00Z
    assert_eq!(text(ts.clone(), "2026-01-01T10:00:00"), Ok(Cell::I64(base)));
    assert_eq!(text(ts.clone(), "2026-01-01 10:00"), Ok(Cell::I64(base)));
    assert_eq!(
        text(tz.clone(), "2026-01-01T10:00:00Z"),
        Ok(Cell::I64(base))
    );
    assert_eq!(
        text(tz.clone(), "2026-01-01T12:00:00+02:00"),
        Ok(Cell::I64(base))
    );
    assert_eq!(
        text(tz.clone(), "2026-01-01T05:30:00-0430"),
        Ok(Cell::I64(base))
    );
    assert_eq!(
        text(ts.clone(), "2026-01-01T10:00:00.123456000"),
        Ok(Cell::I64(base + 123_456))
    );
    let e = err(text(ts.clone(), "2026-01-01T10:00:00.1234567"));
    assert!(e.contains("more than 6 fractional"), "{e}");
    assert_eq!(
        text(ns.clone(), "2026-01-01T10:00:00.1234567"),
        Ok(Cell::I64(base * 1000 + 123_456_700))
    );
    assert!(err(text(ns.clone(), "2262-04-12T00:00:00")).contains("out of range for timestamp_ns"));
    assert!(text(ns, "1677-09-22T00:00:00").is_ok());
    assert!(err(text(ts.clone(), "2026-02-30T00:00:00")).contains("no such date"));
    assert!(err(text(ts.clone(), "2026-01-01T24:00:00")).contains("not a valid time"));
    assert!(err(text(ts.clone(), "2026-01-01T10:00:60")).contains("not a valid time"));
    assert!(err(text(ts.clone(), "yesterday")).contains("not a date"));
    assert!(err(text(ts.clone(), "2026-01-01T10:00:00 UTC")).contains("not a timestamp"));
    assert!(err(text(ts.clone(), "10000-01-01")).contains("not a date"));
    assert!(text(ts.clone(), "+10000-01-01T00:00:00").is_ok());
    assert!(err(text(ts, "+300000-01-01")).contains("not a valid date"));
    assert_eq!(text(DataType::Date32, "1970-01-02"), Ok(Cell::I32(1)));
    assert_eq!(text(DataType::Date32, "1969-12-31"), Ok(Cell::I32(-1)));
    assert!(err(text(DataType::Date32, "2026-01-01T00:00:00")).contains("without a time"));
    assert!(err(text(DataType::Date32, "2026-13-01")).contains("not a valid date"));
    let t = DataType::Time64(TimeUnit::Microsecond);
    assert_eq!(text(t.clone(), "00:00:01.5"), Ok(Cell::I64(1_500_000)));
    assert!(err(text(t, "00:00:01.0000001")).contains("more than 6"));
}

fn one(dt: DataType, v: &str) -> std::result::Result<Vec<Cell<'_>>, BadValue> {
    let schema = Arc::new(Schema::new(vec![Field::new("c", dt, true)]));
    let plan = Plan::new(&schema);
    let line = format!("{{\"c\": {v}}}");
    let line: &'static str = Box::leak(line.into_boxed_str());
    plan.decode_record(line.as_bytes())
}

#[test]
fn json_values_name_column_value_and_reason() {
    let e = one(DataType::Int64, "-9223372036854775900").unwrap_err();
    assert_eq!(
        (e.column.as_str(), e.value.as_str(), e.reason.as_str()),
        ("c", "-9223372036854775900", "out of range for bigint")
    );
    assert_eq!(one(DataType::Int64, "\"42\"").unwrap(), vec![Cell::I64(42)]);
    let e = one(DataType::Utf8, "42").unwrap_err();
    assert!(e.reason.contains("expected a JSON string"), "{e:?}");
    let e = one(DataType::Int64, "true").unwrap_err();
    assert!(e.reason.contains("expected a number"), "{e:?}");
    let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
    let e = one(ts, "1700000000").unwrap_err();
    assert!(e.reason.contains("numbers are not read as dates"), "{e:?}");
    let list = DataType::List(Arc::new(Field::new("element", DataType::Int32, false)));
    let e = one(list.clone(), "[1, null]").unwrap_err();
    assert_eq!(e.column, "c[1]");
    assert!(e.reason.contains("required"));
    let e = one(list, "[1, 3000000000]").unwrap_err();
    assert_eq!(
        (e.column.as_str(), e.reason.as_str()),
        ("c[1]", "out of range for int")
    );
    let st = DataType::Struct(vec![Field::new("a", DataType::Decimal128(5, 2), true)].into());
    let e = one(st.clone(), "{\"a\": 1.001}").unwrap_err();
    assert_eq!(e.column, "c.a");
    let e = one(st, "{\"a\": 1, \"A\": 2}").unwrap_err();
    assert!(e.reason.contains("both set column 'a'"), "{e:?}");
}

#[test]
fn duplicate_keys_are_bad_records() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("ID", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let plan = Plan::new(&schema);
    let e = plan.decode_record(br#"{"id": 1, "id": 2}"#).unwrap_err();
    assert!(e.reason.contains("duplicate key"), "{e:?}");
    // Distinct columns that differ in case each take their exact key.
    let r = plan
        .decode_record(br#"{"id": 1, "ID": 2, "NAME": "x"}"#)
        .unwrap();
    assert_eq!(r[..2], [Cell::I64(1), Cell::I64(2)]);
    assert_eq!(r[2], Cell::Str("x".into()));
    let e = plan
        .decode_record(br#"{"name": "a", "Name": "b"}"#)
        .unwrap_err();
    assert!(e.reason.contains("both set column 'name'"), "{e:?}");
    // Unknown keys are ignored, even repeated.
    assert!(plan.decode_record(br#"{"x": 1, "x": 2}"#).is_ok());
}

fn typed(node: &Node, a: &dyn Array) -> std::result::Result<Cell<'static>, String> {
    arrow_value(node, a, 0, TextSource::Typed)
        .map(|c| match c {
            Cell::I32(v) => Cell::I32(v),
            Cell::I64(v) => Cell::I64(v),
            Cell::I128(v) => Cell::I128(v),
            Cell::F32(v) => Cell::F32(v),
            Cell::F64(v) => Cell::F64(v),
            other => panic!("{other:?}"),
        })
        .map_err(|b| b.reason)
}

#[test]
fn parquet_values_follow_the_same_rules() {
    let int = leaf(DataType::Int32);
    let long = leaf(DataType::Int64);
    let dec = leaf(DataType::Decimal128(10, 2));
    let float = leaf(DataType::Float32);
    let ts = leaf(DataType::Timestamp(TimeUnit::Microsecond, None));
    let e = typed(&int, &Int64Array::from(vec![2_147_483_648i64])).unwrap_err();
    assert_eq!(e, "out of range for int");
    assert_eq!(
        typed(&int, &Int64Array::from(vec![-5i64])),
        Ok(Cell::I32(-5))
    );
    let e = typed(&long, &Float64Array::from(vec![1.9])).unwrap_err();
    assert!(e.contains("fractional part"), "{e}");
    assert_eq!(
        typed(&long, &Float64Array::from(vec![1e2])),
        Ok(Cell::I64(100))
    );
    assert!(typed(&long, &Float64Array::from(vec![f64::NAN])).is_err());
    assert!(typed(&long, &Float64Array::from(vec![9.3e18])).is_err());
    let d3 = |v: i128| {
        Decimal128Array::from(vec![v])
            .with_precision_and_scale(10, 3)
            .unwrap()
    };
    let e = typed(&dec, &d3(1239)).unwrap_err();
    assert!(e.contains("after the decimal point"), "{e}");
    assert_eq!(typed(&dec, &d3(1230)), Ok(Cell::I128(123)));
    assert_eq!(
        typed(&dec, &Float64Array::from(vec![0.1])),
        Ok(Cell::I128(10))
    );
    assert!(typed(&dec, &Float64Array::from(vec![1.239])).is_err());
    let e = typed(&float, &Float64Array::from(vec![1e39])).unwrap_err();
    assert_eq!(e, "out of range for float");
    let e = typed(&ts, &TimestampNanosecondArray::from(vec![1_001])).unwrap_err();
    assert!(e.contains("more than 6 fractional"), "{e}");
    assert_eq!(
        typed(&ts, &TimestampNanosecondArray::from(vec![2_000])),
        Ok(Cell::I64(2))
    );
    let e = typed(&leaf(DataType::Utf8), &Int64Array::from(vec![1])).unwrap_err();
    assert!(e.contains("cannot be stored in a string column"), "{e}");
}

#[test]
fn nested_values_build_the_table_types() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("element", DataType::Utf8, false))),
            true,
        ),
        Field::new(
            "s",
            DataType::Struct(
                vec![
                    Field::new("a", DataType::Int32, false),
                    Field::new("b", DataType::Float64, true),
                ]
                .into(),
            ),
            true,
        ),
        Field::new(
            "m",
            DataType::Map(
                Arc::new(Field::new(
                    "key_value",
                    DataType::Struct(
                        vec![
                            Field::new("key", DataType::Int32, false),
                            Field::new("value", DataType::Utf8, true),
                        ]
                        .into(),
                    ),
                    false,
                )),
                false,
            ),
            true,
        ),
    ]));
    let plan = Plan::new(&schema);
    let lines: [&[u8]; 3] = [
        br#"{"id": 1, "tags": ["x", "y"], "s": {"a": 1, "b": 2.5}, "m": {"1": "one", "2": null}}"#,
        br#"{"id": 2, "tags": null, "s": null, "m": null}"#,
        br#"{"id": 3, "tags": [], "s": {"a": 7}, "m": {}}"#,
    ];
    let rows: Vec<_> = lines
        .iter()
        .map(|l| plan.decode_record(l).unwrap())
        .collect();
    let b = plan.build(&rows).unwrap();
    assert_eq!(b.num_rows(), 3);
    assert_eq!(b.schema(), schema);
    let e = plan
        .decode_record(br#"{"id": 4, "s": {"b": 1}}"#)
        .unwrap_err();
    assert_eq!(e.column, "s.a");
    let e = plan
        .decode_record(br#"{"id": 4, "m": {"x": "y"}}"#)
        .unwrap_err();
    assert!(e.reason.contains("map key"), "{e:?}");
    // The same batch, as typed columns (Parquet), converts back to itself.
    let origin_plan = Plan::new(&schema);
    for (k, node) in origin_plan.cols.nodes.iter().enumerate() {
        let col = b.column(k);
        for i in 0..3 {
            assert!(arrow_value(node, col.as_ref(), i, TextSource::Typed).is_ok());
        }
    }
}
