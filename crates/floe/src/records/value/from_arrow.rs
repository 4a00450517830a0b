//! Reading Arrow input values (CSV batches of text, Parquet batches): each value of an input
//! array is converted to its column's type by the same rules as NDJSON ([`arrow_value`]), input
//! columns are matched to table columns ([`match_columns`]), and [`show`] quotes a value for
//! an error message.

use std::borrow::Cow;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Decimal128Type, Float32Type, Float64Type};
use arrow_schema::{DataType, Fields};

use super::number::{number_to, Number};
use super::text::text_to;
use super::{unit_digits, BadValue, Cell, Columns, Kind, Leaf, Node, SHOW};
use crate::records::ndjson::{clip, quote};

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
