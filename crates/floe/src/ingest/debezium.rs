//! Debezium's encodings of decimals, dates, times and timestamps, read from the schema an event
//! carries (the JSON converter with `schemas.enable=true` wraps each event as
//! `{"schema": ..., "payload": ...}`). Each field of the row whose schema names a logical type
//! is rewritten, exactly, into the text floe's value decoder reads ([`crate::records::value`]),
//! which then checks it against the column (precision, scale, sub-microsecond digits):
//!
//! | logical type (`name`) | encoded as | rewritten as |
//! |---|---|---|
//! | `org.apache.kafka.connect.data.Decimal` (`parameters.scale`) | base64 of the big-endian two's-complement unscaled value | decimal text |
//! | `io.debezium.data.VariableScaleDecimal` | `{"scale": s, "value": <base64 as above>}` | decimal text |
//! | `io.debezium.time.Timestamp`, `org.apache.kafka.connect.data.Timestamp` | milliseconds since the epoch | ISO-8601 timestamp |
//! | `io.debezium.time.MicroTimestamp`, `io.debezium.time.NanoTimestamp` | micro-, nanoseconds since the epoch | ISO-8601 timestamp |
//! | `io.debezium.time.Date`, `org.apache.kafka.connect.data.Date` | days since the epoch | ISO-8601 date |
//! | `io.debezium.time.Time`, `org.apache.kafka.connect.data.Time`, `io.debezium.time.MicroTime`, `io.debezium.time.NanoTime` | milli-, micro-, nanoseconds since midnight | ISO-8601 time |
//! | `io.debezium.time.ZonedTimestamp` | ISO-8601 text with an offset | unchanged |
//!
//! An event without a schema is not guessed at: an integer in a timestamp column stays a bad
//! record, whose reason says the event has no schema ([`no_schema_note`]).

use std::borrow::Cow;

use arrow_schema::{DataType, Schema};
use base64::Engine;

use crate::records::ndjson::Json;

type Members<'a> = Vec<(Cow<'a, str>, Json<'a>)>;

/// The logical types of the fields of row `side` (`before` or `after`) in an event's schema:
/// (field, logical type name, scale).
pub fn side_types(schema: &Json, side: &str) -> Vec<(String, String, Option<String>)> {
    let Some(Json::Arr(fields)) = member(schema, "fields") else {
        return Vec::new();
    };
    let Some(row) = fields
        .iter()
        .find(|f| matches!(member(f, "field"), Some(Json::Str(s)) if s == side))
    else {
        return Vec::new();
    };
    let Some(Json::Arr(cols)) = member(row, "fields") else {
        return Vec::new();
    };
    cols.iter()
        .filter_map(|c| {
            let Some(Json::Str(field)) = member(c, "field") else {
                return None;
            };
            let Some(Json::Str(name)) = member(c, "name") else {
                return None;
            };
            let scale = member(c, "parameters").and_then(|p| match member(p, "scale") {
                Some(Json::Str(s)) => Some(s.to_string()),
                Some(Json::Num(n)) => Some(n.to_string()),
                _ => None,
            });
            Some((field.to_string(), name.to_string(), scale))
        })
        .collect()
}

fn member<'j, 'a>(obj: &'j Json<'a>, name: &str) -> Option<&'j Json<'a>> {
    match obj {
        Json::Obj(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v),
        _ => None,
    }
}

/// Rewrites each field of `row` that `types` gives a logical type; `Err` names the column and
/// why its value cannot be read.
pub fn convert_row(
    row: &mut Members<'_>,
    types: &[(String, String, Option<String>)],
) -> Result<(), String> {
    for (field, name, scale) in types {
        let Some((_, v)) = row.iter_mut().find(|(k, _)| k == field.as_str()) else {
            continue;
        };
        if matches!(v, Json::Null) {
            continue;
        }
        if let Some(text) = convert(v, name, scale.as_deref())
            .map_err(|e| format!("column '{field}' ({name}): {e}"))?
        {
            *v = Json::Str(Cow::Owned(text));
        }
    }
    Ok(())
}

/// The text of `v` of logical type `name`; `None` for a type read as it is.
fn convert(v: &Json, name: &str, scale: Option<&str>) -> Result<Option<String>, String> {
    let unit = match name {
        "org.apache.kafka.connect.data.Decimal" => return decimal(v, scale).map(Some),
        // `{"scale": 2, "value": "<base64>"}` (NUMERIC without a declared scale).
        "io.debezium.data.VariableScaleDecimal" => {
            let scale = match member(v, "scale") {
                Some(Json::Num(s)) => Some(*s),
                _ => return Err("expected {\"scale\", \"value\"}".into()),
            };
            let value = member(v, "value").ok_or("expected {\"scale\", \"value\"}")?;
            return decimal(value, scale).map(Some);
        }
        "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => 3,
        "io.debezium.time.MicroTimestamp" => 6,
        "io.debezium.time.NanoTimestamp" => 9,
        "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => {
            let days = integer(v)?;
            let date = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)
                .and_then(|e| e.checked_add_signed(chrono::TimeDelta::try_days(days)?))
                .ok_or_else(|| format!("{days} days since 1970-01-01 is out of range"))?;
            return Ok(Some(date.format("%Y-%m-%d").to_string()));
        }
        "io.debezium.time.Time" | "org.apache.kafka.connect.data.Time" => {
            return time(integer(v)?, 3).map(Some)
        }
        "io.debezium.time.MicroTime" => return time(integer(v)?, 6).map(Some),
        "io.debezium.time.NanoTime" => return time(integer(v)?, 9).map(Some),
        _ => return Ok(None),
    };
    let n = integer(v)?;
    let per_second = 10i64.pow(unit);
    let (secs, frac) = (n.div_euclid(per_second), n.rem_euclid(per_second));
    let t = chrono::DateTime::from_timestamp(secs, 0)
        .ok_or_else(|| format!("{n} is out of range for a timestamp"))?;
    Ok(Some(format!(
        "{}.{frac:0width$}",
        t.format("%Y-%m-%dT%H:%M:%S"),
        width = unit as usize
    )))
}

/// An integer as Debezium writes times (int32 or int64).
fn integer(v: &Json) -> Result<i64, String> {
    match v {
        Json::Num(t) => t
            .parse::<i64>()
            .map_err(|_| format!("{t} is not a 64-bit integer")),
        other => Err(format!("expected an integer, found {}", other.kind())),
    }
}

/// `n` units of `10^-digits` s since midnight as `HH:MM:SS.fraction`.
fn time(n: i64, digits: u32) -> Result<String, String> {
    let per_second = 10i64.pow(digits);
    if !(0..86_400 * per_second).contains(&n) {
        return Err(format!("{n} is not a time of day"));
    }
    let (secs, frac) = (n / per_second, n % per_second);
    Ok(format!(
        "{:02}:{:02}:{:02}.{frac:0width$}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        width = digits as usize
    ))
}

/// Base64 of a big-endian two's-complement unscaled value, as decimal text with `scale`
/// fraction digits.
fn decimal(v: &Json, scale: Option<&str>) -> Result<String, String> {
    let text = match v {
        Json::Str(s) => s,
        // `decimal.handling.mode=string|double`: already a number's text.
        Json::Num(t) => return Ok(t.to_string()),
        other => return Err(format!("expected base64 text, found {}", other.kind())),
    };
    let scale: i32 = scale
        .ok_or("the schema gives no scale (parameters.scale)")?
        .trim()
        .parse()
        .map_err(|_| "the schema's scale is not an integer".to_string())?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| format!("\"{text}\" is not base64: {e}"))?;
    if bytes.is_empty() {
        return Err("no bytes".into());
    }
    // Sign extension beyond 16 bytes carries no value.
    let negative = bytes[0] & 0x80 != 0;
    let extra = bytes.len().saturating_sub(16);
    if bytes[..extra]
        .iter()
        .any(|b| *b != if negative { 0xff } else { 0 })
    {
        return Err(format!(
            "the unscaled value has {} bytes, more than a decimal of 38 digits holds",
            bytes.len()
        ));
    }
    let mut unscaled: i128 = if negative { -1 } else { 0 };
    for b in &bytes[extra..] {
        unscaled = (unscaled << 8) | i128::from(*b);
    }
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    Ok(if scale <= 0 {
        format!(
            "{sign}{digits}{}",
            "0".repeat(scale.unsigned_abs() as usize)
        )
    } else {
        let scale = scale as usize;
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        format!("{sign}{int}.{frac}")
    })
}

/// The note added to the reason of a bad value in a column of `schema` that Debezium encodes
/// (decimal, date, time, timestamp), when the event carried no schema to read it by.
pub fn no_schema_note(schema: &Schema, column: &str) -> Option<&'static str> {
    let top = column.split(['.', '[']).next().unwrap_or(column);
    let field = schema.field_with_name(top).ok()?;
    matches!(
        field.data_type(),
        DataType::Decimal128(..)
            | DataType::Decimal256(..)
            | DataType::Date32
            | DataType::Time64(_)
            | DataType::Timestamp(..)
    )
    .then_some(
        "; the Debezium event has no schema, so its encoding of this column (unit, scale) is unknown: send schemas (value.converter.schemas.enable=true)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(t: &str) -> Json<'_> {
        Json::Num(t)
    }

    fn b64(bytes: &[u8]) -> Json<'static> {
        Json::Str(Cow::Owned(
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ))
    }

    #[test]
    fn decimals_decode_two_complement_with_the_scale() {
        let d = |v: &Json, s: &str| decimal(v, Some(s));
        assert_eq!(d(&b64(&[0x30, 0x39]), "2").unwrap(), "123.45");
        assert_eq!(d(&b64(&[0xcf, 0xc7]), "2").unwrap(), "-123.45");
        assert_eq!(d(&b64(&[0x05]), "3").unwrap(), "0.005");
        assert_eq!(d(&b64(&[0xff]), "0").unwrap(), "-1");
        assert_eq!(d(&b64(&[0x00]), "2").unwrap(), "0.00");
        assert_eq!(d(&b64(&[0x07]), "-2").unwrap(), "700");
        // 38 nines, sign-extended to 17 bytes.
        let max = 10i128.pow(38) - 1;
        let mut bytes = vec![0u8];
        bytes.extend(max.to_be_bytes());
        assert_eq!(d(&b64(&bytes), "0").unwrap(), max.to_string());
        let mut big = vec![1u8];
        big.extend([0u8; 16]);
        assert!(d(&b64(&big), "0").unwrap_err().contains("17 bytes"));
        assert!(d(&Json::Str("%%".into()), "2")
            .unwrap_err()
            .contains("base64"));
        assert!(decimal(&b64(&[1]), None).unwrap_err().contains("scale"));
        let variable = Json::Obj(vec![
            ("scale".into(), num("3")),
            ("value".into(), b64(&[0x30, 0x39])),
        ]);
        assert_eq!(
            convert(&variable, "io.debezium.data.VariableScaleDecimal", None).unwrap(),
            Some("12.345".to_string())
        );
    }

    #[test]
    fn times_keep_every_digit() {
        let c = |v: &Json, n: &str| convert(v, n, None).unwrap().unwrap();
        assert_eq!(
            c(&num("1767261600123456"), "io.debezium.time.MicroTimestamp"),
            "2026-01-01T10:00:00.123456"
        );
        assert_eq!(
            c(&num("-1"), "io.debezium.time.MicroTimestamp"),
            "1969-12-31T23:59:59.999999"
        );
        assert_eq!(
            c(
                &num("1767261600123456789"),
                "io.debezium.time.NanoTimestamp"
            ),
            "2026-01-01T10:00:00.123456789"
        );
        assert_eq!(
            c(&num("1767261600123"), "io.debezium.time.Timestamp"),
            "2026-01-01T10:00:00.123"
        );
        assert_eq!(c(&num("20454"), "io.debezium.time.Date"), "2026-01-01");
        assert_eq!(c(&num("-1"), "io.debezium.time.Date"), "1969-12-31");
        assert_eq!(c(&num("36000123"), "io.debezium.time.Time"), "10:00:00.123");
        assert_eq!(
            c(&num("36000123456"), "io.debezium.time.MicroTime"),
            "10:00:00.123456"
        );
        assert_eq!(
            c(&num("36000123456789"), "io.debezium.time.NanoTime"),
            "10:00:00.123456789"
        );
        assert_eq!(
            convert(&num("1"), "io.debezium.time.ZonedTimestamp", None).unwrap(),
            None
        );
        assert!(convert(&num("1.5"), "io.debezium.time.Timestamp", None).is_err());
        assert!(convert(&num("86400000"), "io.debezium.time.Time", None).is_err());
        assert!(convert(&Json::Str("x".into()), "io.debezium.time.Date", None).is_err());
    }
}
