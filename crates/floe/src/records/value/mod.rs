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

use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, FieldRef, Fields, SchemaRef, TimeUnit};

use crate::base::error::Result;
use crate::records::ndjson::clip;

mod build;
mod columnar;
mod from_arrow;
mod json;
mod number;
#[cfg(test)]
mod tests;
mod text;

pub(crate) use build::build;
use build::build_batch;
pub(crate) use columnar::ColumnCells;
pub use from_arrow::TextSource;
pub(crate) use from_arrow::{arrow_value, match_columns, show};
use json::decode_record;

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

    /// Decodes one NDJSON record (the rule of [`crate::records::ndjson`]).
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

    /// Decodes many NDJSON records at once into columns of cells: the same records kept, the
    /// same values and the same reasons as [`Plan::decode_record`] on each, faster (see
    /// [`columnar`]).
    pub(crate) fn decode_many<'a>(&self, payloads: &[&'a [u8]]) -> ColumnCells<'a> {
        columnar::decode_columns(&self.cols, payloads)
    }

    /// The batch of the records [`Plan::decode_many`] kept.
    pub(crate) fn build_columns(&self, cells: ColumnCells) -> Result<RecordBatch> {
        let rows = cells.kept.len();
        let columns = cells.finish(&self.cols)?;
        let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &opts,
        )?)
    }
}
