//! Checked conversion of input values to a table's column types: one rule for every input
//! format (NDJSON, CSV, Parquet) and for both `floe append` and `floe ingest`.
//!
//! A value is stored only when it fits its column exactly; otherwise its record is bad, with
//! the column, the value and the reason. Arrow's cast kernels and JSON/CSV readers are not used
//! for values because they truncate (`1.9` -> 1 for integers), saturate (a JSON integer beyond
//! `i64` parses as an `f64` and lands on `i64::MIN`/`MAX`) or round (decimal rescale) without
//! an error. The rules:
//!
//! - Numbers are read exactly from their text (NDJSON numbers and strings, CSV fields) or from
//!   their binary value (Parquet). `int`/`bigint` take whole numbers in range; an integral
//!   value written with a fraction or exponent (`1.0`, `1e2`) is accepted because no digit is
//!   lost; `1.5` is not.
//! - `decimal(P,S)` never rounds (Iceberg requires values to have exactly the column's scale):
//!   a value with more than S fractional digits is bad unless the extra digits are zeros
//!   (`1.230` fits `decimal(10,2)`, `1.239` does not), and one with more than P-S integer
//!   digits is bad. A Parquet `double` is read as its shortest round-trip decimal text, so
//!   `0.1` behaves the same from NDJSON and Parquet.
//! - `float`/`double` round to the nearest representable value (IEEE 754), the only rounding
//!   these types have; a finite value beyond the type's range, or a non-zero value that would
//!   become 0, is bad. `NaN`, `Infinity`, `-Infinity` are accepted as text.
//! - Text for numeric, boolean, date/time and binary columns (CSV fields, JSON strings) is
//!   parsed with the same rules after trimming surrounding whitespace: a JSON string `"12.50"`
//!   and a CSV field `12.50` give the same value. Booleans are `true`/`false` (any case).
//! - Dates are `YYYY-MM-DD`, times `HH:MM[:SS[.fraction]]`, timestamps a date, optionally
//!   followed by `T` (or a space) and a time, and an offset `Z`/`+HH:MM` (values with an
//!   offset are converted to UTC; without one they are UTC). Fractional seconds beyond the
//!   column's precision (6 digits, 9 for `_ns`) must be zeros; values outside the type's range
//!   are bad. Numbers are not read as dates or times: whether `1700000000` means seconds,
//!   milliseconds or microseconds would be a guess.
//! - Strings take JSON strings (and CSV text) only: a JSON number, boolean, array or object in
//!   a string column is bad rather than re-serialized.
//! - `binary`/`fixed(L)` take hexadecimal text (the Iceberg spec's JSON single-value form);
//!   `uuid` also takes the usual `8-4-4-4-12` form.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray, BooleanArray,
    FixedSizeBinaryArray, LargeBinaryArray, LargeListArray, LargeStringArray, ListArray, MapArray,
    PrimitiveArray, StringArray, StringViewArray, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, FieldRef, Fields, SchemaRef, TimeUnit};

use crate::error::{Error, Result};
use crate::ingest::ndjson::{self, clip, quote, Json};

/// Longest value text quoted in an error.
const SHOW: usize = 80;

/// Why one record does not fit the table schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BadValue {
    /// The column (`a.b` inside a struct, `a[2]` inside a list), or "-" when the record itself
    /// is not a JSON object.
    pub column: String,
    /// The offending value (first 80 characters), as JSON text.
    pub value: String,
    pub reason: String,
}

impl BadValue {
    /// A record-level problem (not valid UTF-8, not one JSON object, ...).
    pub fn record(payload: &[u8], reason: impl Into<String>) -> Self {
        Self {
            column: "-".into(),
            value: clip(&String::from_utf8_lossy(payload), SHOW),
            reason: reason.into(),
        }
    }

    fn value(value: String, reason: impl Into<String>) -> Self {
        Self {
            column: String::new(),
            value: clip(&value, SHOW),
            reason: reason.into(),
        }
    }

    fn required() -> Self {
        Self::value("null".into(), "required column is missing or null")
    }

    /// Prefixes the column path with `parent` (a field name, or `[i]` for list elements).
    pub(crate) fn under(mut self, parent: &str) -> Self {
        self.column = if self.column.is_empty() || self.column.starts_with('[') {
            format!("{parent}{}", self.column)
        } else {
            format!("{parent}.{}", self.column)
        };
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Exact decimal numbers

/// An exact decimal number: `(-1)^neg * digits * 10^exp`, with no leading or trailing zeros in
/// `digits` (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dec {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

/// Exponents are clamped here: any value this far from 1 is out of range for every type.
const EXP_CLAMP: i64 = 1 << 40;

impl Dec {
    /// Parses `[+-]? (D+ [. D*] | . D+) ([eE] [+-]? D+)?` (JSON numbers are a subset).
    pub(crate) fn parse(text: &str) -> Option<Dec> {
        let b = text.as_bytes();
        // An optional sign at `*i`: true for `-`.
        let sign = |i: &mut usize| match b.get(*i) {
            Some(&c @ (b'-' | b'+')) => {
                *i += 1;
                c == b'-'
            }
            _ => false,
        };
        let mut i = 0;
        let neg = sign(&mut i);
        let mut digits = Vec::new();
        let mut frac = 0i64;
        while i < b.len() && b[i].is_ascii_digit() {
            digits.push(b[i]);
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                digits.push(b[i]);
                i += 1;
                frac += 1;
            }
        }
        if digits.is_empty() {
            return None;
        }
        let mut e: i64 = 0;
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            let eneg = sign(&mut i);
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                e = (e * 10 + (b[i] - b'0') as i64).min(EXP_CLAMP);
                i += 1;
            }
            if i == start {
                return None;
            }
            if eneg {
                e = -e;
            }
        }
        if i != b.len() {
            return None;
        }
        let lead = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..lead);
        let trail = digits.iter().rev().take_while(|&&d| d == b'0').count();
        digits.truncate(digits.len() - trail);
        let exp = if digits.is_empty() {
            0
        } else {
            e - frac + trail as i64
        };
        Some(Dec {
            neg: neg && !digits.is_empty(),
            digits,
            exp,
        })
    }

    fn from_scaled(v: i128, scale: i64) -> Dec {
        let neg = v < 0;
        let mut digits = v.unsigned_abs().to_string().into_bytes();
        if digits == b"0" {
            digits.clear();
        }
        let trail = digits.iter().rev().take_while(|&&d| d == b'0').count();
        digits.truncate(digits.len() - trail);
        Dec {
            neg,
            exp: if digits.is_empty() {
                0
            } else {
                trail as i64 - scale
            },
            digits,
        }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// `digits * 10^shift` when it has at most `max_digits` digits.
    fn scaled(&self, shift: i64, max_digits: i64) -> Option<i128> {
        if self.digits.len() as i64 + shift > max_digits {
            return None;
        }
        let mut v: i128 = 0;
        for d in &self.digits {
            v = v.checked_mul(10)?.checked_add((d - b'0') as i128)?;
        }
        for _ in 0..shift {
            v = v.checked_mul(10)?;
        }
        Some(if self.neg { -v } else { v })
    }
}

/// Why a number does not fit.
enum Misfit {
    Fraction,
    Range,
}

/// `dec` as an integer in `min..=max`.
fn dec_to_int(dec: &Dec, min: i128, max: i128) -> std::result::Result<i128, Misfit> {
    if dec.is_zero() {
        return Ok(0);
    }
    if dec.exp < 0 {
        return Err(Misfit::Fraction);
    }
    match dec.scaled(dec.exp, 39) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Misfit::Range),
    }
}

/// `dec` as the unscaled value of a `decimal(p, s)`.
fn dec_to_decimal(dec: &Dec, p: u8, s: i8) -> std::result::Result<i128, Misfit> {
    if dec.is_zero() {
        return Ok(0);
    }
    let shift = dec.exp + s as i64;
    if shift < 0 {
        return Err(Misfit::Fraction);
    }
    dec.scaled(shift, p as i64).ok_or(Misfit::Range)
}

/// A number from an input, before conversion to a column type.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Number<'t> {
    /// Decimal text (JSON number grammar, or the looser [`Dec::parse`] grammar for text).
    Text(&'t str),
    Int(i128),
    /// An unscaled decimal and its scale.
    Scaled(i128, i8),
    Float(f64),
}

impl Number<'_> {
    fn dec(&self) -> std::result::Result<Dec, String> {
        match *self {
            Number::Text(t) => Dec::parse(t).ok_or_else(|| "not a number".to_string()),
            Number::Int(v) => Ok(Dec::from_scaled(v, 0)),
            Number::Scaled(v, s) => Ok(Dec::from_scaled(v, s as i64)),
            Number::Float(f) if !f.is_finite() => Err(format!("{f} is not a finite number")),
            // An integral double is exactly that integer (every double from 2^53 up is).
            Number::Float(f) if f.fract() == 0.0 && f.abs() < 1e38 => {
                Ok(Dec::from_scaled(f as i128, 0))
            }
            // Otherwise the shortest text that reads back as the same double: what the writer
            // meant (0.1, not the binary fraction 0.1000000000000000055...).
            Number::Float(f) => Ok(Dec::parse(&format!("{f:e}")).expect("float text parses")),
        }
    }

    fn text(&self) -> Cow<'_, str> {
        match *self {
            Number::Text(t) => Cow::Borrowed(t),
            Number::Int(v) => Cow::Owned(v.to_string()),
            Number::Scaled(v, s) => Cow::Owned(format!("{v}e{}", -(s as i32))),
            Number::Float(f) => Cow::Owned(format!("{f:e}")),
        }
    }
}

/// Fast path for the common case: plain integer text that fits `i64`.
fn small_int(t: &str) -> Option<i64> {
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn to_int(n: Number, min: i128, max: i128, name: &str) -> std::result::Result<i128, String> {
    let v = match n {
        Number::Int(v) => v,
        Number::Text(t) if small_int(t).is_some() => small_int(t).expect("checked") as i128,
        _ => {
            let dec = n.dec()?;
            return dec_to_int(&dec, min, max).map_err(|m| match m {
                Misfit::Fraction => {
                    format!("has a fractional part; {name} takes whole numbers")
                }
                Misfit::Range => format!("out of range for {name}"),
            });
        }
    };
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(format!("out of range for {name}"))
    }
}

fn to_decimal(n: Number, p: u8, s: i8) -> std::result::Result<i128, String> {
    let dec = n.dec()?;
    dec_to_decimal(&dec, p, s).map_err(|m| match m {
        Misfit::Fraction => format!(
            "has more than {s} digit(s) after the decimal point; decimal({p},{s}) does not round"
        ),
        Misfit::Range => format!(
            "out of range for decimal({p},{s}) (at most {} digit(s) before the decimal point)",
            p as i64 - s as i64
        ),
    })
}

/// Rejects what IEEE rounding would silently turn into infinity or zero.
fn float_fits(
    v_is_inf: bool,
    v_is_zero: bool,
    n: &Number,
    name: &str,
) -> std::result::Result<(), String> {
    let source_finite = !matches!(n, Number::Float(f) if !f.is_finite());
    if v_is_inf && source_finite {
        return Err(format!("out of range for {name}"));
    }
    if v_is_zero {
        let source_zero = match n {
            Number::Float(f) => *f == 0.0,
            Number::Int(v) | Number::Scaled(v, _) => *v == 0,
            Number::Text(_) => n.dec().map(|d| d.is_zero()).unwrap_or(true),
        };
        if !source_zero {
            return Err(format!("too small for {name} (it would be stored as 0)"));
        }
    }
    Ok(())
}

fn to_f64(n: Number) -> std::result::Result<f64, String> {
    let v = match n {
        Number::Float(f) => f,
        Number::Int(v) => v as f64,
        _ => n
            .text()
            .parse::<f64>()
            .map_err(|_| "not a number".to_string())?,
    };
    float_fits(v.is_infinite(), v == 0.0, &n, "double")?;
    Ok(v)
}

fn to_f32(n: Number) -> std::result::Result<f32, String> {
    let v = match n {
        Number::Float(f) => f as f32,
        Number::Int(v) => v as f32,
        _ => n
            .text()
            .parse::<f32>()
            .map_err(|_| "not a number".to_string())?,
    };
    float_fits(v.is_infinite(), v == 0.0, &n, "float")?;
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// Column types

/// A column type that holds one value (not a list, struct or map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaf {
    Bool,
    Int,
    Long,
    Float,
    Double,
    Decimal(u8, i8),
    Date,
    /// Time of day with this many fractional digits.
    Time(u32),
    /// Timestamp with this many fractional digits, with or without a zone.
    Timestamp(u32, bool),
    Str,
    Binary,
    Fixed(i32),
    Unsupported,
}

fn unit_digits(u: &TimeUnit) -> u32 {
    match u {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

impl Leaf {
    fn of(dt: &DataType) -> Leaf {
        match dt {
            DataType::Boolean => Leaf::Bool,
            DataType::Int32 => Leaf::Int,
            DataType::Int64 => Leaf::Long,
            DataType::Float32 => Leaf::Float,
            DataType::Float64 => Leaf::Double,
            DataType::Decimal128(p, s) => Leaf::Decimal(*p, *s),
            DataType::Date32 => Leaf::Date,
            DataType::Time64(u) => Leaf::Time(unit_digits(u)),
            DataType::Timestamp(u, tz) => Leaf::Timestamp(unit_digits(u), tz.is_some()),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Leaf::Str,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Leaf::Binary,
            DataType::FixedSizeBinary(n) => Leaf::Fixed(*n),
            _ => Leaf::Unsupported,
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(
            self,
            Leaf::Int | Leaf::Long | Leaf::Float | Leaf::Double | Leaf::Decimal(..)
        )
    }
}

/// The Iceberg name of a column type, for messages.
pub fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::Boolean => "boolean".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Date32 => "date".into(),
        DataType::Time64(_) => "time".into(),
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "timestamp_ns".into(),
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => "timestamptz_ns".into(),
        DataType::Timestamp(_, None) => "timestamp".into(),
        DataType::Timestamp(_, Some(_)) => "timestamptz".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::FixedSizeBinary(16) => "uuid/fixed(16)".into(),
        DataType::FixedSizeBinary(n) => format!("fixed({n})"),
        DataType::List(_) | DataType::LargeList(_) => "list".into(),
        DataType::Struct(_) => "struct".into(),
        DataType::Map(..) => "map".into(),
        other => other.to_string(),
    }
}

/// Matches input names (JSON keys, CSV headers, Parquet columns) to columns: the exact name,
/// else the one column equal up to ASCII case.
#[derive(Debug)]
pub(crate) struct Matcher {
    exact: HashMap<String, usize>,
    folded: HashMap<String, Vec<usize>>,
}

impl Matcher {
    fn new(fields: &Fields) -> Self {
        let mut exact = HashMap::new();
        let mut folded: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, f) in fields.iter().enumerate() {
            exact.entry(f.name().clone()).or_insert(i);
            folded
                .entry(f.name().to_ascii_lowercase())
                .or_default()
                .push(i);
        }
        Self { exact, folded }
    }

    /// The column `name` selects, if any.
    pub(crate) fn resolve(&self, name: &str) -> Option<usize> {
        if let Some(&i) = self.exact.get(name) {
            return Some(i);
        }
        match self.folded.get(&name.to_ascii_lowercase()) {
            Some(v) if v.len() == 1 => Some(v[0]),
            _ => None,
        }
    }
}

/// How to decode one column (recursively for nested types).
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) field: FieldRef,
    kind: Kind,
    /// The Iceberg type name, for messages.
    name: String,
}

#[derive(Debug)]
enum Kind {
    Leaf(Leaf),
    List(Box<Node>),
    Struct(Columns),
    /// The entries field (a struct of key and value), key and value.
    Map(FieldRef, Box<Node>, Box<Node>),
}

/// The columns of a table or a struct.
#[derive(Debug)]
pub(crate) struct Columns {
    pub(crate) fields: Fields,
    pub(crate) nodes: Vec<Node>,
    pub(crate) matcher: Matcher,
}

impl Columns {
    fn new(fields: &Fields) -> Self {
        Self {
            fields: fields.clone(),
            nodes: fields.iter().map(Node::new).collect(),
            matcher: Matcher::new(fields),
        }
    }
}

impl Node {
    fn new(field: &FieldRef) -> Self {
        let kind = match field.data_type() {
            DataType::List(f) | DataType::LargeList(f) => Kind::List(Box::new(Node::new(f))),
            DataType::Struct(fs) => Kind::Struct(Columns::new(fs)),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => Kind::Map(
                    entries.clone(),
                    Box::new(Node::new(&kv[0])),
                    Box::new(Node::new(&kv[1])),
                ),
                _ => Kind::Leaf(Leaf::Unsupported),
            },
            dt => Kind::Leaf(Leaf::of(dt)),
        };
        Self {
            field: field.clone(),
            kind,
            name: type_name(field.data_type()),
        }
    }

    fn type_name(&self) -> &str {
        &self.name
    }
}

/// A converted value, ready for an Arrow builder.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    Null,
    Bool(bool),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    I128(i128),
    Str(Cow<'a, str>),
    Bytes(Cow<'a, [u8]>),
    List(Vec<Cell<'a>>),
    Struct(Vec<Cell<'a>>),
    Map(Vec<(Cell<'a>, Cell<'a>)>),
}

// ---------------------------------------------------------------------------------------------
// Text (CSV fields, JSON strings in non-string columns)

fn number_to(leaf: Leaf, n: Number, name: &str) -> std::result::Result<Cell<'static>, String> {
    Ok(match leaf {
        Leaf::Int => Cell::I32(to_int(n, i32::MIN as i128, i32::MAX as i128, name)? as i32),
        Leaf::Long => Cell::I64(to_int(n, i64::MIN as i128, i64::MAX as i128, name)? as i64),
        Leaf::Decimal(p, s) => Cell::I128(to_decimal(n, p, s)?),
        Leaf::Float => Cell::F32(to_f32(n)?),
        Leaf::Double => Cell::F64(to_f64(n)?),
        _ => return Err(format!("a number cannot be stored in a {name} column")),
    })
}

fn special_float(t: &str) -> Option<f64> {
    let l = t.to_ascii_lowercase();
    match l.as_str() {
        "nan" | "+nan" | "-nan" => Some(f64::NAN),
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// Converts text to a value of `leaf` (the one text rule for CSV fields and JSON strings).
pub(crate) fn text_to(
    leaf: Leaf,
    text: &str,
    name: &str,
) -> std::result::Result<Cell<'static>, String> {
    if leaf == Leaf::Str {
        return Ok(Cell::Str(Cow::Owned(text.to_string())));
    }
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    match leaf {
        Leaf::Bool => {
            if t.eq_ignore_ascii_case("true") {
                Ok(Cell::Bool(true))
            } else if t.eq_ignore_ascii_case("false") {
                Ok(Cell::Bool(false))
            } else {
                Err("not a boolean (expected true or false)".into())
            }
        }
        Leaf::Float | Leaf::Double if special_float(t).is_some() => {
            let v = special_float(t).expect("checked");
            Ok(if leaf == Leaf::Float {
                Cell::F32(v as f32)
            } else {
                Cell::F64(v)
            })
        }
        l if l.is_numeric() => {
            if Dec::parse(t).is_none() {
                return Err(format!("not a number (expected a {name})"));
            }
            number_to(leaf, Number::Text(t), name)
        }
        Leaf::Date => parse_date(t).map(Cell::I32),
        Leaf::Time(d) => parse_time(t, d, name).map(Cell::I64),
        Leaf::Timestamp(d, _) => parse_timestamp(t, d, name).map(Cell::I64),
        Leaf::Binary => hex(t)
            .map(|b| Cell::Bytes(Cow::Owned(b)))
            .ok_or_else(|| "not hexadecimal bytes (binary is written as hex text)".into()),
        Leaf::Fixed(n) => {
            let bytes = if n == 16 {
                uuid::Uuid::try_parse(t)
                    .ok()
                    .map(|u| u.as_bytes().to_vec())
                    .or_else(|| hex(t))
            } else {
                hex(t)
            };
            match bytes {
                Some(b) if b.len() == n as usize => Ok(Cell::Bytes(Cow::Owned(b))),
                Some(b) => Err(format!("has {} byte(s); {name} holds exactly {n}", b.len())),
                None => Err(format!(
                    "not hexadecimal bytes{} ({name} is written as hex text)",
                    if n == 16 { " or a UUID" } else { "" }
                )),
            }
        }
        _ => Err(format!("a {name} column cannot be read from text")),
    }
}

fn hex(t: &str) -> Option<Vec<u8>> {
    let b = t.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let val = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2)
        .map(|p| Some((val(p[0])? << 4) | val(p[1])?))
        .collect()
}

/// A fixed number of ASCII digits at `*i`.
fn fixed_digits(b: &[u8], i: &mut usize, n: usize) -> Option<u32> {
    let s = b.get(*i..*i + n)?;
    if !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    *i += n;
    Some(s.iter().fold(0, |a, d| a * 10 + (d - b'0') as u32))
}

/// `[+-]?YYYY-MM-DD` (4 to 6 year digits with a sign, 4 without) at the start of `b`: the
/// days since 1970-01-01 and the length read.
fn date_prefix(b: &[u8]) -> std::result::Result<(i64, usize), String> {
    const EXPECT: &str = "not a date (expected YYYY-MM-DD)";
    let mut i = 0;
    let sign = match b.first() {
        Some(b'-') => {
            i += 1;
            -1
        }
        Some(b'+') => {
            i += 1;
            1
        }
        _ => 0,
    };
    let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if n < 4 || (sign == 0 && n != 4) || n > 6 {
        return Err(EXPECT.into());
    }
    let year = fixed_digits(b, &mut i, n).ok_or(EXPECT)? as i32 * if sign < 0 { -1 } else { 1 };
    if b.get(i) != Some(&b'-') {
        return Err(EXPECT.into());
    }
    i += 1;
    let month = fixed_digits(b, &mut i, 2).ok_or(EXPECT)?;
    if b.get(i) != Some(&b'-') {
        return Err(EXPECT.into());
    }
    i += 1;
    let day = fixed_digits(b, &mut i, 2).ok_or(EXPECT)?;
    let date = chrono::NaiveDate::from_ymd_opt(year, month, day).ok_or_else(|| {
        if (1..=12).contains(&month) && (1..=31).contains(&day) && year.abs() < 200_000 {
            format!("no such date ({year:04}-{month:02}-{day:02})")
        } else {
            "not a valid date (month 01-12, day 01-31, year within +-262143)".to_string()
        }
    })?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid");
    Ok((date.signed_duration_since(epoch).num_days(), i))
}

fn parse_date(t: &str) -> std::result::Result<i32, String> {
    let (days, n) = date_prefix(t.as_bytes())?;
    if n != t.len() {
        return Err("not a date (expected YYYY-MM-DD, without a time)".into());
    }
    i32::try_from(days).map_err(|_| "out of range for date".into())
}

/// `HH:MM[:SS[.fraction]]` at `*i`: seconds of the day and the fraction digits.
fn time_part<'t>(b: &'t [u8], i: &mut usize) -> std::result::Result<(i64, &'t [u8]), String> {
    const EXPECT: &str = "not a time (expected HH:MM[:SS[.fraction]])";
    let h = fixed_digits(b, i, 2).ok_or(EXPECT)?;
    if b.get(*i) != Some(&b':') {
        return Err(EXPECT.into());
    }
    *i += 1;
    let m = fixed_digits(b, i, 2).ok_or(EXPECT)?;
    let mut s = 0;
    let mut frac: &[u8] = &[];
    if b.get(*i) == Some(&b':') {
        *i += 1;
        s = fixed_digits(b, i, 2).ok_or(EXPECT)?;
        if b.get(*i) == Some(&b'.') {
            *i += 1;
            let start = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            if *i == start {
                return Err(EXPECT.into());
            }
            frac = &b[start..*i];
        }
    }
    if h > 23 || m > 59 || s > 59 {
        return Err(format!(
            "not a valid time of day ({h:02}:{m:02}:{s:02}; hours 00-23, minutes and seconds 00-59)"
        ));
    }
    Ok(((h * 3600 + m * 60 + s) as i64, frac))
}

/// The fraction of a second in units of `10^-digits`; extra digits must be zeros.
fn fraction(frac: &[u8], digits: u32, name: &str) -> std::result::Result<i64, String> {
    let d = digits as usize;
    if frac.len() > d && frac[d..].iter().any(|&c| c != b'0') {
        return Err(format!(
            "has more than {d} fractional second digit(s); {name} does not round"
        ));
    }
    let mut v: i64 = 0;
    for k in 0..d {
        v = v * 10 + frac.get(k).map(|c| (c - b'0') as i64).unwrap_or(0);
    }
    Ok(v)
}

fn parse_time(t: &str, digits: u32, name: &str) -> std::result::Result<i64, String> {
    let b = t.as_bytes();
    let mut i = 0;
    let (secs, frac) = time_part(b, &mut i)?;
    if i != b.len() {
        return Err("not a time (expected HH:MM[:SS[.fraction]])".into());
    }
    Ok(secs * 10i64.pow(digits) + fraction(frac, digits, name)?)
}

fn parse_timestamp(t: &str, digits: u32, name: &str) -> std::result::Result<i64, String> {
    const EXPECT: &str = "not a timestamp (expected YYYY-MM-DD[THH:MM[:SS[.fraction]]][Z|+HH:MM])";
    let b = t.as_bytes();
    let (days, mut i) = date_prefix(b)?;
    let mut secs = days * 86_400;
    let mut frac: &[u8] = &[];
    if i < b.len() {
        if !matches!(b[i], b'T' | b't' | b' ') {
            return Err(EXPECT.into());
        }
        i += 1;
        let (s, f) = time_part(b, &mut i)?;
        secs += s;
        frac = f;
        match b.get(i) {
            None => {}
            Some(b'Z' | b'z') => i += 1,
            Some(&c @ (b'+' | b'-')) => {
                i += 1;
                let oh = fixed_digits(b, &mut i, 2).ok_or(EXPECT)?;
                let colon = b.get(i) == Some(&b':');
                if colon {
                    i += 1;
                }
                let om = if colon || i < b.len() {
                    fixed_digits(b, &mut i, 2).ok_or(EXPECT)?
                } else {
                    0
                };
                if oh > 23 || om > 59 {
                    return Err(format!("not a valid zone offset in {t}"));
                }
                let off = (oh * 3600 + om * 60) as i64;
                // Local time minus the offset is UTC.
                secs -= if c == b'+' { off } else { -off };
            }
            Some(_) => return Err(EXPECT.into()),
        }
        if i != b.len() {
            return Err(EXPECT.into());
        }
    }
    let f = fraction(frac, digits, name)?;
    secs.checked_mul(10i64.pow(digits))
        .and_then(|v| v.checked_add(f))
        .ok_or_else(|| format!("out of range for {name}"))
}

// ---------------------------------------------------------------------------------------------
// JSON values

/// Decodes one NDJSON record (see [`crate::ingest::ndjson`]) into one cell per column.
pub(crate) fn decode_record<'a>(
    cols: &Columns,
    payload: &'a [u8],
) -> std::result::Result<Vec<Cell<'a>>, BadValue> {
    let members = ndjson::parse_record(payload).map_err(|r| BadValue::record(payload, r))?;
    json_struct(cols, members)
}

fn json_struct<'a>(
    cols: &Columns,
    members: Vec<(Cow<'a, str>, Json<'a>)>,
) -> std::result::Result<Vec<Cell<'a>>, BadValue> {
    let mut slots: Vec<Option<(Cow<'a, str>, Json<'a>)>> = Vec::new();
    slots.resize_with(cols.nodes.len(), || None);
    for (k, v) in members {
        let Some(i) = cols.matcher.resolve(&k) else {
            continue;
        };
        if let Some((first, _)) = &slots[i] {
            let name = cols.fields[i].name();
            return Err(BadValue {
                column: name.clone(),
                value: v.display(SHOW),
                reason: if *first == k {
                    format!("duplicate key {}", quote(&k))
                } else {
                    format!(
                        "keys {} and {} both set column '{name}'",
                        quote(first),
                        quote(&k)
                    )
                },
            });
        }
        slots[i] = Some((k, v));
    }
    let mut out = Vec::with_capacity(cols.nodes.len());
    for (node, slot) in cols.nodes.iter().zip(slots) {
        let v = slot.map(|(_, v)| v).unwrap_or(Json::Null);
        let cell = json_value(node, v).map_err(|b| b.under(node.field.name()))?;
        out.push(cell);
    }
    Ok(out)
}

/// One JSON value into `node`'s type (a null into a required column is bad).
fn json_value<'a>(node: &Node, v: Json<'a>) -> std::result::Result<Cell<'a>, BadValue> {
    if matches!(v, Json::Null) {
        return if node.field.is_nullable() {
            Ok(Cell::Null)
        } else {
            Err(BadValue::required())
        };
    }
    let name = || node.type_name();
    match &node.kind {
        Kind::Leaf(leaf) => match v {
            Json::Str(s) if *leaf == Leaf::Str => Ok(Cell::Str(s)),
            Json::Str(s) => {
                text_to(*leaf, &s, name()).map_err(|r| BadValue::value(quote(&s), r))
            }
            Json::Num(t) if leaf.is_numeric() => {
                number_to(*leaf, Number::Text(t), name()).map_err(|r| BadValue::value(t.into(), r))
            }
            Json::Bool(b) if *leaf == Leaf::Bool => Ok(Cell::Bool(b)),
            Json::Num(t) if matches!(leaf, Leaf::Date | Leaf::Time(_) | Leaf::Timestamp(..)) => {
                Err(BadValue::value(
                    t.into(),
                    format!(
                        "expected an ISO-8601 {} string; numbers are not read as dates or times (their unit would be a guess)",
                        name()
                    ),
                ))
            }
            other => Err(BadValue::value(
                other.display(SHOW),
                format!("expected {} for a {} column, found {}", expected(*leaf), name(), other.kind()),
            )),
        },
        Kind::List(child) => match v {
            Json::Arr(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (j, item) in items.into_iter().enumerate() {
                    out.push(json_value(child, item).map_err(|b| b.under(&format!("[{j}]")))?);
                }
                Ok(Cell::List(out))
            }
            other => Err(BadValue::value(
                other.display(SHOW),
                format!("expected a JSON array, found {}", other.kind()),
            )),
        },
        Kind::Struct(cols) => match v {
            Json::Obj(members) => Ok(Cell::Struct(json_struct(cols, members)?)),
            other => Err(BadValue::value(
                other.display(SHOW),
                format!("expected a JSON object, found {}", other.kind()),
            )),
        },
        Kind::Map(_, key, value) => match v {
            Json::Obj(members) => {
                let Kind::Leaf(key_leaf) = &key.kind else {
                    return Err(BadValue::value(
                        "{...}".into(),
                        "maps with nested keys cannot be read from JSON",
                    ));
                };
                let key_leaf = *key_leaf;
                let key_name = key.type_name();
                let mut out = Vec::with_capacity(members.len());
                let mut seen = std::collections::HashSet::with_capacity(members.len());
                for (k, val) in members {
                    let kc = match k {
                        Cow::Borrowed(s) if key_leaf == Leaf::Str => Cell::Str(Cow::Borrowed(s)),
                        k => text_to(key_leaf, &k, key_name)
                            .map_err(|r| BadValue::value(quote(&k), format!("map key: {r}")))?,
                    };
                    // Map keys are unique (Iceberg spec): keeping both entries, or either,
                    // would not be what was written.
                    if !seen.insert(format!("{kc:?}")) {
                        return Err(BadValue::value(
                            val.display(SHOW),
                            format!("duplicate map key {}", kc_text(&kc)),
                        ));
                    }
                    let vc = json_value(value, val).map_err(|b| b.under("value"))?;
                    out.push((kc, vc));
                }
                Ok(Cell::Map(out))
            }
            other => Err(BadValue::value(
                other.display(SHOW),
                format!("expected a JSON object, found {}", other.kind()),
            )),
        },
    }
}

fn kc_text(c: &Cell) -> String {
    match c {
        Cell::Str(s) => quote(s),
        other => format!("{other:?}"),
    }
}

fn expected(leaf: Leaf) -> &'static str {
    match leaf {
        Leaf::Str => "a JSON string",
        Leaf::Bool => "true or false",
        l if l.is_numeric() => "a number",
        Leaf::Binary | Leaf::Fixed(_) => "a hex string",
        Leaf::Unsupported => "nothing (unsupported column type)",
        _ => "an ISO-8601 string",
    }
}

// ---------------------------------------------------------------------------------------------
// Arrow arrays (CSV batches of text, Parquet batches)

/// Shows value `i` of `a` as JSON-like text for an error message.
pub(crate) fn show(a: &dyn Array, i: usize) -> String {
    if a.is_null(i) {
        return "null".into();
    }
    if let Some(s) = string_at(a, i) {
        return clip(&quote(s), SHOW);
    }
    let opts = arrow::util::display::FormatOptions::default();
    match arrow::util::display::ArrayFormatter::try_new(a, &opts) {
        Ok(f) => clip(&f.value(i).to_string(), SHOW),
        Err(_) => "?".into(),
    }
}

fn string_at(a: &dyn Array, i: usize) -> Option<&str> {
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Some(a.as_string_view().value(i)),
        _ => None,
    }
}

fn bytes_at(a: &dyn Array, i: usize) -> Option<&[u8]> {
    match a.data_type() {
        DataType::Binary => Some(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => Some(a.as_binary::<i64>().value(i)),
        DataType::BinaryView => Some(a.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => Some(a.as_fixed_size_binary().value(i)),
        _ => None,
    }
}

/// Integer value `i` of an integer array.
fn int_at(a: &dyn Array, i: usize) -> Option<i128> {
    use arrow::datatypes::*;
    Some(match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(i) as i128,
        DataType::Int16 => a.as_primitive::<Int16Type>().value(i) as i128,
        DataType::Int32 => a.as_primitive::<Int32Type>().value(i) as i128,
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i) as i128,
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(i) as i128,
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(i) as i128,
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i) as i128,
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i) as i128,
        _ => return None,
    })
}

/// Value `i` of a date/time array: the value, its fractional digits, and whether it is a
/// timestamp (`t`), a date (`d`, in days) or a time of day.
fn temporal_at(a: &dyn Array, i: usize) -> Option<(i64, u32, char)> {
    use arrow::datatypes::*;
    Some(match a.data_type() {
        DataType::Date32 => (a.as_primitive::<Date32Type>().value(i) as i64, 0, 'd'),
        DataType::Date64 => (a.as_primitive::<Date64Type>().value(i), 3, 'D'),
        DataType::Timestamp(u, _) => {
            let v = match u {
                TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(i),
                TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(i),
                TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(i),
                TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(i),
            };
            (v, unit_digits(u), 't')
        }
        DataType::Time32(TimeUnit::Second) => {
            (a.as_primitive::<Time32SecondType>().value(i) as i64, 0, 'h')
        }
        DataType::Time32(TimeUnit::Millisecond) => (
            a.as_primitive::<Time32MillisecondType>().value(i) as i64,
            3,
            'h',
        ),
        DataType::Time64(TimeUnit::Microsecond) => {
            (a.as_primitive::<Time64MicrosecondType>().value(i), 6, 'h')
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            (a.as_primitive::<Time64NanosecondType>().value(i), 9, 'h')
        }
        _ => return None,
    })
}

/// `v` in units of `10^-from` seconds as units of `10^-to`, exactly.
fn rescale(v: i64, from: u32, to: u32, name: &str) -> std::result::Result<i64, String> {
    if to >= from {
        v.checked_mul(10i64.pow(to - from))
            .ok_or_else(|| format!("out of range for {name}"))
    } else {
        let f = 10i64.pow(from - to);
        if v % f != 0 {
            return Err(format!(
                "has more than {to} fractional second digit(s); {name} does not round"
            ));
        }
        Ok(v / f)
    }
}

/// How an input column's text is read: CSV fields treat a blank field as null (CSV has no
/// other null) for every column but strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextSource {
    Csv,
    Typed,
}

/// Value `i` of `a` into `leaf`.
fn arrow_leaf<'a>(
    node: &Node,
    leaf: Leaf,
    a: &'a dyn Array,
    i: usize,
    src: TextSource,
) -> std::result::Result<Cell<'a>, String> {
    let name = node.type_name();
    if let Some(s) = string_at(a, i) {
        if src == TextSource::Csv && s.contains('\0') {
            return Err("contains a NUL byte".into());
        }
        return match leaf {
            Leaf::Str => Ok(Cell::Str(Cow::Borrowed(s))),
            _ if src == TextSource::Csv && s.trim().is_empty() => Ok(Cell::Null),
            _ => text_to(leaf, s, name),
        };
    }
    let mismatch = || {
        format!(
            "a {} value cannot be stored in a {name} column",
            a.data_type()
        )
    };
    if let Some(v) = int_at(a, i) {
        return if leaf.is_numeric() {
            number_to(leaf, Number::Int(v), name)
        } else {
            Err(mismatch())
        };
    }
    match (a.data_type(), leaf) {
        (DataType::Boolean, Leaf::Bool) => return Ok(Cell::Bool(a.as_boolean().value(i))),
        (DataType::Float16, l) if l.is_numeric() => {
            let v = a.as_primitive::<arrow::datatypes::Float16Type>().value(i);
            return number_to(leaf, Number::Float(v.to_f64()), name);
        }
        (DataType::Float32, l) if l.is_numeric() => {
            let v = a.as_primitive::<Float32Type>().value(i);
            return match l {
                Leaf::Float => Ok(Cell::F32(v)),
                Leaf::Double => Ok(Cell::F64(v as f64)),
                // A fraction as the float's own shortest text, as the writer of a `float`
                // value meant it; integral values exactly.
                _ if v.is_finite() && v.fract() != 0.0 => {
                    let text = format!("{v:e}");
                    number_to(l, Number::Text(&text), name)
                }
                _ => number_to(l, Number::Float(v as f64), name),
            };
        }
        (DataType::Float64, l) if l.is_numeric() => {
            let v = a.as_primitive::<Float64Type>().value(i);
            return number_to(leaf, Number::Float(v), name);
        }
        (DataType::Decimal128(_, s), l) if l.is_numeric() => {
            let v = a.as_primitive::<Decimal128Type>().value(i);
            return number_to(leaf, Number::Scaled(v, *s), name);
        }
        (DataType::Decimal256(_, s), l) if l.is_numeric() => {
            let v = a
                .as_primitive::<arrow::datatypes::Decimal256Type>()
                .value(i);
            let v = v
                .to_i128()
                .ok_or_else(|| format!("out of range for {name}"))?;
            return number_to(leaf, Number::Scaled(v, *s), name);
        }
        (DataType::Null, _) => return Ok(Cell::Null),
        _ => {}
    }
    if let Some((v, from, kind)) = temporal_at(a, i) {
        return match (kind, leaf) {
            ('d', Leaf::Date) => Ok(Cell::I32(v as i32)),
            ('d', Leaf::Timestamp(to, _)) => v
                .checked_mul(86_400)
                .ok_or_else(|| format!("out of range for {name}"))
                .and_then(|s| rescale(s, 0, to, name))
                .map(Cell::I64),
            ('D' | 't', Leaf::Timestamp(to, _)) => rescale(v, from, to, name).map(Cell::I64),
            ('D' | 't', Leaf::Date) => {
                let per_day = 86_400 * 10i64.pow(from);
                if v.rem_euclid(per_day) != 0 {
                    Err("has a time of day; date columns hold whole days".into())
                } else {
                    i32::try_from(v.div_euclid(per_day))
                        .map(Cell::I32)
                        .map_err(|_| format!("out of range for {name}"))
                }
            }
            ('h', Leaf::Time(to)) => rescale(v, from, to, name).map(Cell::I64),
            _ => Err(mismatch()),
        };
    }
    if let Some(b) = bytes_at(a, i) {
        return match leaf {
            Leaf::Binary => Ok(Cell::Bytes(Cow::Borrowed(b))),
            Leaf::Fixed(n) if b.len() == n as usize => Ok(Cell::Bytes(Cow::Borrowed(b))),
            Leaf::Fixed(n) => Err(format!("has {} byte(s); {name} holds exactly {n}", b.len())),
            _ => Err(mismatch()),
        };
    }
    Err(mismatch())
}

/// Value `i` of `a` into `node`'s type (a null into a required column is bad).
pub(crate) fn arrow_value<'a>(
    node: &Node,
    a: &'a dyn Array,
    i: usize,
    src: TextSource,
) -> std::result::Result<Cell<'a>, BadValue> {
    let cell = if a.is_null(i) {
        Cell::Null
    } else {
        match &node.kind {
            Kind::Leaf(leaf) => {
                arrow_leaf(node, *leaf, a, i, src).map_err(|r| BadValue::value(show(a, i), r))?
            }
            Kind::List(child) => {
                let (values, start, end): (&'a dyn Array, usize, usize) = match a.data_type() {
                    DataType::List(_) => {
                        let l = a.as_list::<i32>();
                        let o = l.value_offsets();
                        (l.values().as_ref(), o[i] as usize, o[i + 1] as usize)
                    }
                    DataType::LargeList(_) => {
                        let l = a.as_list::<i64>();
                        let o = l.value_offsets();
                        (l.values().as_ref(), o[i] as usize, o[i + 1] as usize)
                    }
                    DataType::FixedSizeList(_, n) => {
                        let l = a.as_fixed_size_list();
                        let n = *n as usize;
                        (l.values().as_ref(), i * n, (i + 1) * n)
                    }
                    other => {
                        return Err(BadValue::value(
                            show(a, i),
                            format!("a {other} value cannot be stored in a list column"),
                        ))
                    }
                };
                list_cells(child, values, start, end, src)?
            }
            Kind::Struct(cols) => match a.data_type() {
                DataType::Struct(src_fields) => {
                    let s = a.as_struct();
                    let map = match_columns(cols, src_fields)
                        .map_err(|r| BadValue::value("{...}".into(), r))?;
                    let mut out = Vec::with_capacity(cols.nodes.len());
                    for (node, from) in cols.nodes.iter().zip(map) {
                        let c = match from {
                            Some(j) => arrow_value(node, s.column(j).as_ref(), i, src),
                            None if node.field.is_nullable() => Ok(Cell::Null),
                            None => Err(BadValue::required()),
                        };
                        out.push(c.map_err(|b| b.under(node.field.name()))?);
                    }
                    Cell::Struct(out)
                }
                other => {
                    return Err(BadValue::value(
                        show(a, i),
                        format!("a {other} value cannot be stored in a struct column"),
                    ))
                }
            },
            Kind::Map(_, key, value) => match a.data_type() {
                DataType::Map(..) => {
                    let m = a.as_map();
                    let (s, e) = (
                        m.value_offsets()[i] as usize,
                        m.value_offsets()[i + 1] as usize,
                    );
                    let mut out = Vec::with_capacity(e - s);
                    for j in s..e {
                        let k = arrow_value(key, m.keys().as_ref(), j, src)
                            .map_err(|b| b.under("key"))?;
                        if k == Cell::Null {
                            return Err(BadValue::value("null".into(), "map keys cannot be null"));
                        }
                        let v = arrow_value(value, m.values().as_ref(), j, src)
                            .map_err(|b| b.under("value"))?;
                        out.push((k, v));
                    }
                    Cell::Map(out)
                }
                other => {
                    return Err(BadValue::value(
                        show(a, i),
                        format!("a {other} value cannot be stored in a map column"),
                    ))
                }
            },
        }
    };
    if cell == Cell::Null && !node.field.is_nullable() {
        return Err(BadValue::required());
    }
    Ok(cell)
}

fn list_cells<'a>(
    child: &Node,
    values: &'a dyn Array,
    start: usize,
    end: usize,
    src: TextSource,
) -> std::result::Result<Cell<'a>, BadValue> {
    let mut out = Vec::with_capacity(end - start);
    for (k, j) in (start..end).enumerate() {
        out.push(arrow_value(child, values, j, src).map_err(|b| b.under(&format!("[{k}]")))?);
    }
    Ok(Cell::List(out))
}

/// For each column of `cols`, the input column (of `input`) that fills it. Two input columns
/// selecting the same column is an error: one of them would be dropped silently.
pub(crate) fn match_columns(
    cols: &Columns,
    input: &Fields,
) -> std::result::Result<Vec<Option<usize>>, String> {
    let mut out: Vec<Option<usize>> = vec![None; cols.nodes.len()];
    for (j, f) in input.iter().enumerate() {
        if let Some(i) = cols.matcher.resolve(f.name()) {
            if let Some(prev) = out[i] {
                return Err(format!(
                    "input columns '{}' and '{}' both match column '{}'",
                    input[prev].name(),
                    f.name(),
                    cols.fields[i].name()
                ));
            }
            out[i] = Some(j);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Building Arrow arrays from cells

fn nulls_of(cells: &[&Cell]) -> Option<NullBuffer> {
    if cells.iter().any(|c| matches!(c, Cell::Null)) {
        Some(NullBuffer::from(
            cells
                .iter()
                .map(|c| !matches!(c, Cell::Null))
                .collect::<Vec<_>>(),
        ))
    } else {
        None
    }
}

fn prim<T: ArrowPrimitiveType>(
    cells: &[&Cell],
    dt: &DataType,
    f: impl Fn(&Cell) -> Option<T::Native>,
) -> ArrayRef {
    Arc::new(
        cells
            .iter()
            .map(|c| f(c))
            .collect::<PrimitiveArray<T>>()
            .with_data_type(dt.clone()),
    )
}

fn build_leaf(dt: &DataType, cells: &[&Cell]) -> Result<ArrayRef> {
    let i32_of = |c: &Cell| match c {
        Cell::I32(v) => Some(*v),
        _ => None,
    };
    let i64_of = |c: &Cell| match c {
        Cell::I64(v) => Some(*v),
        _ => None,
    };
    Ok(match dt {
        DataType::Boolean => Arc::new(
            cells
                .iter()
                .map(|c| match c {
                    Cell::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect::<BooleanArray>(),
        ),
        DataType::Int32 => prim::<Int32Type>(cells, dt, i32_of),
        DataType::Date32 => prim::<Date32Type>(cells, dt, i32_of),
        DataType::Int64 => prim::<Int64Type>(cells, dt, i64_of),
        DataType::Time64(TimeUnit::Microsecond) => prim::<Time64MicrosecondType>(cells, dt, i64_of),
        DataType::Time64(TimeUnit::Nanosecond) => prim::<Time64NanosecondType>(cells, dt, i64_of),
        DataType::Timestamp(TimeUnit::Second, _) => prim::<TimestampSecondType>(cells, dt, i64_of),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            prim::<TimestampMillisecondType>(cells, dt, i64_of)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            prim::<TimestampMicrosecondType>(cells, dt, i64_of)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            prim::<TimestampNanosecondType>(cells, dt, i64_of)
        }
        DataType::Float32 => prim::<Float32Type>(cells, dt, |c| match c {
            Cell::F32(v) => Some(*v),
            _ => None,
        }),
        DataType::Float64 => prim::<Float64Type>(cells, dt, |c| match c {
            Cell::F64(v) => Some(*v),
            _ => None,
        }),
        DataType::Decimal128(..) => prim::<Decimal128Type>(cells, dt, |c| match c {
            Cell::I128(v) => Some(*v),
            _ => None,
        }),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let it = cells.iter().map(|c| match c {
                Cell::Str(s) => Some(s.as_ref()),
                _ => None,
            });
            match dt {
                DataType::Utf8 => Arc::new(it.collect::<StringArray>()),
                DataType::LargeUtf8 => Arc::new(it.collect::<LargeStringArray>()),
                _ => Arc::new(it.collect::<StringViewArray>()),
            }
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let it = cells.iter().map(|c| match c {
                Cell::Bytes(b) => Some(b.as_ref()),
                _ => None,
            });
            match dt {
                DataType::Binary => Arc::new(it.collect::<BinaryArray>()),
                DataType::LargeBinary => Arc::new(it.collect::<LargeBinaryArray>()),
                _ => Arc::new(it.collect::<BinaryViewArray>()),
            }
        }
        DataType::FixedSizeBinary(n) => {
            let it = cells.iter().map(|c| match c {
                Cell::Bytes(b) => Some(b.as_ref()),
                _ => None,
            });
            Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                it, *n,
            )?)
        }
        other => {
            if cells.iter().any(|c| **c != Cell::Null) {
                return Err(Error::Arrow(arrow_schema::ArrowError::NotYetImplemented(
                    format!("values of column type {other}"),
                )));
            }
            new_null_array(other, cells.len())
        }
    })
}

/// Builds the array of `node` from one cell per row.
pub(crate) fn build(node: &Node, cells: &[&Cell]) -> Result<ArrayRef> {
    let dt = node.field.data_type();
    Ok(match (&node.kind, dt) {
        (Kind::Leaf(_), _) => build_leaf(dt, cells)?,
        (Kind::List(child), DataType::List(f) | DataType::LargeList(f)) => {
            let empty: Vec<Cell> = Vec::new();
            let items = |c: &&Cell| -> usize {
                match c {
                    Cell::List(v) => v.len(),
                    _ => 0,
                }
            };
            let flat: Vec<&Cell> = cells
                .iter()
                .flat_map(|c| match c {
                    Cell::List(v) => v.iter(),
                    _ => empty.iter(),
                })
                .collect();
            let values = build(child, &flat)?;
            let nulls = nulls_of(cells);
            if matches!(dt, DataType::List(_)) {
                let offsets = OffsetBuffer::<i32>::from_lengths(cells.iter().map(items));
                Arc::new(ListArray::try_new(f.clone(), offsets, values, nulls)?)
            } else {
                let offsets = OffsetBuffer::<i64>::from_lengths(cells.iter().map(items));
                Arc::new(LargeListArray::try_new(f.clone(), offsets, values, nulls)?)
            }
        }
        (Kind::Struct(cols), DataType::Struct(fields)) => {
            let nulls = nulls_of(cells);
            if fields.is_empty() {
                Arc::new(StructArray::new_empty_fields(cells.len(), nulls))
            } else {
                let children = cols
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(k, n)| {
                        let col: Vec<&Cell> = cells
                            .iter()
                            .map(|c| match c {
                                Cell::Struct(v) => &v[k],
                                _ => &Cell::Null,
                            })
                            .collect();
                        build(n, &col)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(StructArray::try_new(fields.clone(), children, nulls)?)
            }
        }
        (Kind::Map(entries, key, value), DataType::Map(_, sorted)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                unreachable!("checked in Node::new")
            };
            let pairs: Vec<&(Cell, Cell)> = cells
                .iter()
                .flat_map(|c| match c {
                    Cell::Map(v) => v.as_slice(),
                    _ => &[],
                })
                .collect();
            let keys: Vec<&Cell> = pairs.iter().map(|(k, _)| k).collect();
            let vals: Vec<&Cell> = pairs.iter().map(|(_, v)| v).collect();
            let entries_array = StructArray::try_new(
                kv.clone(),
                vec![build(key, &keys)?, build(value, &vals)?],
                None,
            )?;
            let offsets = OffsetBuffer::<i32>::from_lengths(cells.iter().map(|c| match c {
                Cell::Map(v) => v.len(),
                _ => 0,
            }));
            Arc::new(MapArray::try_new(
                entries.clone(),
                offsets,
                entries_array,
                nulls_of(cells),
                *sorted,
            )?)
        }
        _ => build_leaf(dt, cells)?,
    })
}

/// Builds a batch of `cols` (a table schema) from rows of cells.
pub(crate) fn build_batch(
    schema: &SchemaRef,
    cols: &Columns,
    rows: &[Vec<Cell>],
) -> Result<RecordBatch> {
    let columns = cols
        .nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let col: Vec<&Cell> = rows.iter().map(|r| &r[k]).collect();
            build(n, &col)
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &opts,
    )?)
}

/// The table's columns, prepared for decoding.
#[derive(Debug)]
pub struct Plan {
    pub(crate) schema: SchemaRef,
    pub(crate) cols: Columns,
}

impl Plan {
    pub fn new(schema: &SchemaRef) -> Self {
        Self {
            schema: schema.clone(),
            cols: Columns::new(schema.fields()),
        }
    }

    /// Decodes one NDJSON record (the rule of [`crate::ingest::ndjson`]).
    pub fn decode_record<'a>(
        &self,
        payload: &'a [u8],
    ) -> std::result::Result<Vec<Cell<'a>>, BadValue> {
        decode_record(&self.cols, payload)
    }

    /// A batch of decoded records.
    pub fn build(&self, rows: &[Vec<Cell>]) -> Result<RecordBatch> {
        build_batch(&self.schema, &self.cols, rows)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Decimal128Array, Float64Array, Int64Array, TimestampNanosecondArray};
    use arrow_schema::{Field, Schema};

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
        assert!(
            err(text(ns.clone(), "2262-04-12T00:00:00")).contains("out of range for timestamp_ns")
        );
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
}
