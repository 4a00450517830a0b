//! `--where`: a filter on table columns, as Iceberg's `where` option of `rewrite_data_files`.
//! Only files whose partition values and column metrics may match are compacted (the iceberg
//! crate's scan planning evaluates the predicate against manifests and file metrics), so closed
//! partitions can be compacted while a writer fills the newest one.
//!
//! Grammar: `cond [AND cond]...` with `cond` = `col OP literal` (OP: = != <> < <= > >=),
//! `col IS [NOT] NULL`, or `col IN (lit, ...)`. Literals are numbers, `true`/`false`, or quoted
//! strings (also for dates and timestamps: `ts < '2026-10-01'`).

use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, Type};

use crate::error::{Error, Result};

fn bad(expr: &str, reason: impl Into<String>) -> Error {
    Error::invalid_option("--where", expr, reason)
}

/// Parses a `--where` filter against the table schema.
pub fn parse_where(expr: &str, schema: &Schema) -> Result<Predicate> {
    let mut out: Option<Predicate> = None;
    for cond in split_and(expr) {
        let p = parse_cond(cond.trim(), schema).map_err(|e| match e {
            Error::InvalidOption { reason, .. } => {
                bad(expr, format!("in '{}': {reason}", cond.trim()))
            }
            other => other,
        })?;
        out = Some(match out {
            None => p,
            Some(acc) => acc.and(p),
        });
    }
    out.ok_or_else(|| bad(expr, "empty filter"))
}

/// The iceberg predicate of the conjuncts of `expr` that are in this grammar, for pruning
/// only: files that may hold a row matching all of them, so a superset of the files that may
/// hold a row matching `expr` (when `expr` is a conjunction: `None` when an `OR` sits outside
/// parentheses, or when no conjunct is in the grammar).
pub fn prune_conjuncts(expr: &str, schema: &Schema) -> Option<Predicate> {
    // ASCII whitespace as spaces (same byte offsets), so a newline splits as a space does.
    let norm: String = expr
        .chars()
        .map(|c| if c.is_ascii_whitespace() { ' ' } else { c })
        .collect();
    if has_or_word(&norm.to_ascii_lowercase()) {
        return None;
    }
    split_and(&norm)
        .into_iter()
        .filter_map(|c| parse_cond(c.trim(), schema).ok())
        .reduce(|a, b| a.and(b))
}

/// `or` as a word outside quotes, anywhere (conservative: an `OR` inside parentheses also
/// counts).
fn has_or_word(lower: &str) -> bool {
    let b = lower.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut quote = false;
    for i in 0..b.len() {
        match b[i] {
            b'\'' => quote = !quote,
            b'o' if !quote
                && b.get(i + 1) == Some(&b'r')
                && (i == 0 || !word(b[i - 1]))
                && b.get(i + 2).is_none_or(|&c| !word(c)) =>
            {
                return true
            }
            _ => {}
        }
    }
    false
}

/// Splits on ` AND ` outside quotes and parentheses (case-insensitive).
fn split_and(s: &str) -> Vec<&str> {
    split_on(s, &s.to_ascii_lowercase(), " and ")
}

/// Splits `s` on `word` (lowercase, `lower` is `s` lowercased) outside quotes and parentheses.
fn split_on<'a>(s: &'a str, lower: &str, word: &str) -> Vec<&'a str> {
    let bytes = s.as_bytes();
    let (mut parts, mut start, mut depth, mut quote) = (vec![], 0usize, 0i32, false);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => quote = !quote,
            b'(' if !quote => depth += 1,
            b')' if !quote => depth -= 1,
            _ if !quote && depth == 0 && lower[i..].starts_with(word) => {
                parts.push(&s[start..i]);
                i += word.len();
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&s[start..]);
    parts
}

fn parse_cond(cond: &str, schema: &Schema) -> Result<Predicate> {
    let lower = cond.to_ascii_lowercase();
    if let Some(col) = lower.strip_suffix(" is not null") {
        let name = column(cond[..col.len()].trim(), schema)?.0;
        return Ok(Reference::new(name).is_not_null());
    }
    if let Some(col) = lower.strip_suffix(" is null") {
        let name = column(cond[..col.len()].trim(), schema)?.0;
        return Ok(Reference::new(name).is_null());
    }
    if let Some(pos) = lower.find(" in ") {
        let (name, ty) = column(cond[..pos].trim(), schema)?;
        let list = cond[pos + 4..].trim();
        let inner = list
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| bad(cond, "IN needs a parenthesised list"))?;
        let values = inner
            .split(',')
            .map(|v| datum(v.trim(), &ty))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Reference::new(name).is_in(values));
    }
    for op in ["<=", ">=", "!=", "<>", "=", "<", ">"] {
        if let Some(pos) = cond.find(op) {
            let (name, ty) = column(cond[..pos].trim(), schema)?;
            let value = datum(cond[pos + op.len()..].trim(), &ty)?;
            let r = Reference::new(name);
            return Ok(match op {
                "<=" => r.less_than_or_equal_to(value),
                ">=" => r.greater_than_or_equal_to(value),
                "!=" | "<>" => r.not_equal_to(value),
                "=" => r.equal_to(value),
                "<" => r.less_than(value),
                _ => r.greater_than(value),
            });
        }
    }
    Err(bad(
        cond,
        "expected 'column OP value', 'column IS [NOT] NULL' or 'column IN (...)'",
    ))
}

fn column(name: &str, schema: &Schema) -> Result<(String, PrimitiveType)> {
    let name = name.trim_matches('"').trim_matches('`');
    let field = schema
        .field_by_name(name)
        .ok_or_else(|| bad(name, "no such column in the table"))?;
    match field.field_type.as_ref() {
        Type::Primitive(p) => Ok((field.name.clone(), p.clone())),
        other => Err(bad(name, format!("cannot filter on a {other} column"))),
    }
}

fn datum(lit: &str, ty: &PrimitiveType) -> Result<Datum> {
    let unquoted = lit
        .strip_prefix('\'')
        .and_then(|l| l.strip_suffix('\''))
        .unwrap_or(lit);
    let err = |e: &dyn std::fmt::Display| bad(lit, format!("not a valid {ty}: {e}"));
    Ok(match ty {
        PrimitiveType::Boolean => Datum::bool_from_str(unquoted).map_err(|e| err(&e))?,
        PrimitiveType::Int => Datum::int(unquoted.parse::<i32>().map_err(|e| err(&e))?),
        PrimitiveType::Long => Datum::long(unquoted.parse::<i64>().map_err(|e| err(&e))?),
        PrimitiveType::Float => Datum::float(unquoted.parse::<f32>().map_err(|e| err(&e))?),
        PrimitiveType::Double => Datum::double(unquoted.parse::<f64>().map_err(|e| err(&e))?),
        PrimitiveType::Decimal { .. } => Datum::decimal_from_str(unquoted).map_err(|e| err(&e))?,
        PrimitiveType::Date => Datum::date_from_str(unquoted).map_err(|e| err(&e))?,
        PrimitiveType::Timestamp => {
            Datum::timestamp_from_str(with_time(unquoted)).map_err(|e| err(&e))?
        }
        PrimitiveType::Timestamptz => {
            Datum::timestamptz_from_str(with_tz(&with_time(unquoted))).map_err(|e| err(&e))?
        }
        PrimitiveType::String => Datum::string(unquoted),
        other => {
            return Err(bad(
                lit,
                format!("filtering on {other} columns is not supported"),
            ))
        }
    })
}

/// `2026-10-01` means midnight.
fn with_time(s: &str) -> String {
    if s.len() == 10 {
        format!("{s}T00:00:00")
    } else {
        s.replace(' ', "T")
    }
}

fn with_tz(s: &str) -> String {
    let time = s.get(10..).unwrap_or("");
    if s.ends_with('Z') || time.contains('+') || time.contains('-') {
        s.to_string()
    } else {
        format!("{s}+00:00")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        crate::table::schema::parse_schema("id bigint not null, ts timestamp, name string, d date")
            .unwrap()
    }

    #[test]
    fn conditions_parse_against_column_types() {
        let s = schema();
        let p = parse_where(
            "ts < '2026-10-01' AND id >= 5 and name IN ('a', 'b') AND d IS NOT NULL",
            &s,
        )
        .unwrap();
        let text = format!("{p}");
        assert!(
            text.contains("ts") && text.contains("id") && text.contains("name"),
            "{text}"
        );
    }

    #[test]
    fn pruning_keeps_the_simple_conjuncts_and_never_prunes_an_or() {
        let s = schema();
        let p = prune_conjuncts("id >= 5 AND id % 2 = 1 AND\nname = 'or'", &s).unwrap();
        let text = format!("{p}");
        assert!(text.contains("id") && text.contains("name"), "{text}");
        assert!(!text.contains('%'), "{text}");
        for or in [
            "id = 1 OR name = 'a'",
            "id = 1\nor name = 'a' AND d IS NULL",
            "id = 1 OR(name = 'a') AND d IS NULL",
            "name = 'a' AND (id = 1 OR id = 2)",
        ] {
            assert!(prune_conjuncts(or, &s).is_none(), "{or}");
        }
        assert!(prune_conjuncts("id % 2 = 1", &s).is_none());
        // `or` inside a string or a name is not the operator.
        assert!(prune_conjuncts("name = 'x or y' AND id > 3", &s).is_some());
    }

    #[test]
    fn bad_filters_name_the_problem() {
        let s = schema();
        assert!(parse_where("nope = 1", &s)
            .unwrap_err()
            .to_string()
            .contains("nope"));
        assert!(parse_where("id = 'abc'", &s)
            .unwrap_err()
            .to_string()
            .contains("abc"));
        assert!(parse_where("id ~ 1", &s).is_err());
        assert!(parse_where("", &s).is_err());
    }
}
