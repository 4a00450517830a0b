//! `--where`: a filter on table columns, as Iceberg's `where` option of `rewrite_data_files`.
//! Only files whose partition values and column metrics may match are compacted (the iceberg
//! crate's scan planning evaluates the predicate against manifests and file metrics), so closed
//! partitions can be compacted while a writer fills the newest one.
//!
//! Grammar: `cond [AND cond]...` with `cond` = `col OP literal` (OP: = != <> < <= > >=),
//! `col IS [NOT] NULL`, or `col IN (lit, ...)`. Literals are numbers, `true`/`false`, or quoted
//! strings (also for dates and timestamps: `ts < '2026-10-01'`), or a constant SQL expression
//! (`ts < now() - interval '30 days'`, `d >= current_date`, `date_trunc('day', now())`),
//! folded once with the statement's one `now` (see [`statement_now`]).
//!
//! Pruning follows the semantics of `floe sql` (DataFusion), which orders floating point
//! values totally: NaN is greater than every number and equal to itself, -0.0 is below 0.0.
//! Iceberg's bounds leave NaN out, so a condition NaN can satisfy (`>`, `>=`, `!=`, `= 'NaN'`,
//! `IN (.., 'NaN')`) also keeps every file that may hold a NaN (its `nan_value_counts` say so,
//! or it has none), and strict bounds on floats are tested as inclusive ones.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::Expr;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveLiteral, PrimitiveType, Schema, Type};

use crate::base::error::{Error, Result};

/// The one instant `now()`, `current_timestamp`, `current_date`... mean for a whole statement
/// (its pruning, its row filter and every commit attempt): the clock read once, to the
/// microsecond (Iceberg's timestamp precision, so it folds exactly).
pub fn statement_now() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}

/// `now` as a snapshot summary records it (`2026-12-02T03:20:00.123456Z`).
pub fn format_now(now: &DateTime<Utc>) -> String {
    now.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn bad(expr: &str, reason: impl Into<String>) -> Error {
    Error::invalid_option("--where", expr, reason)
}

/// Parses a `--where` filter against the table schema; `now` is what time functions mean.
pub fn parse_where(expr: &str, schema: &Schema, now: DateTime<Utc>) -> Result<Predicate> {
    let mut out: Option<Predicate> = None;
    for cond in split_and(expr) {
        let p = parse_cond(cond.trim(), schema, now).map_err(|e| match e {
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
pub fn prune_conjuncts(expr: &str, schema: &Schema, now: DateTime<Utc>) -> Option<Predicate> {
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
        .filter_map(|c| parse_cond(c.trim(), schema, now).ok())
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

fn parse_cond(cond: &str, schema: &Schema, now: DateTime<Utc>) -> Result<Predicate> {
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
            .map(|v| literal(v.trim(), &ty, now).map(|(d, _)| d))
            .collect::<Result<Vec<_>>>()?;
        return Ok(is_in(Reference::new(name), values));
    }
    for op in ["<=", ">=", "!=", "<>", "=", "<", ">"] {
        if let Some(pos) = cond.find(op) {
            let (name, ty) = column(cond[..pos].trim(), schema)?;
            let (value, folded) = literal(cond[pos + op.len()..].trim(), &ty, now)?;
            return Ok(compare(Reference::new(name), op, value, folded));
        }
    }
    Err(bad(
        cond,
        "expected 'column OP value', 'column IS [NOT] NULL' or 'column IN (...)'",
    ))
}

/// The value of a float or double datum.
fn float_value(d: &Datum) -> Option<f64> {
    match d.literal() {
        PrimitiveLiteral::Float(f) => Some(f64::from(f.0)),
        PrimitiveLiteral::Double(f) => Some(f.0),
        _ => None,
    }
}

/// `r OP value` for pruning: a superset of the files holding a row `floe sql` finds. A value
/// `folded` from an expression may have been rounded to the column's type, so strict bounds
/// are tested as inclusive ones (as they always are on floats, whose literal may round to a
/// float and whose zeros Iceberg's bounds do not tell apart). On floats, NaN (greater than
/// every number, equal to itself) keeps the files that may hold one.
fn compare(r: Reference, op: &str, value: Datum, folded: bool) -> Predicate {
    let float = float_value(&value);
    let op = match op {
        "<" if folded || float.is_some() => "<=",
        ">" if folded || float.is_some() => ">=",
        o => o,
    };
    let Some(v) = float else {
        return bound(r, op, value);
    };
    if v.is_nan() {
        return match op {
            "=" | ">=" => r.is_nan(),
            "<=" => r.is_not_null(),
            // `<`, `!=`: every number.
            _ => r.is_not_nan(),
        };
    }
    match op {
        ">=" | "!=" | "<>" => bound(r.clone(), op, value).or(r.is_nan()),
        _ => bound(r, op, value),
    }
}

fn bound(r: Reference, op: &str, value: Datum) -> Predicate {
    match op {
        "<=" => r.less_than_or_equal_to(value),
        ">=" => r.greater_than_or_equal_to(value),
        "!=" | "<>" => r.not_equal_to(value),
        "=" => r.equal_to(value),
        "<" => r.less_than(value),
        _ => r.greater_than(value),
    }
}

/// `r IN (values)`; a NaN among float values keeps the files that may hold a NaN.
fn is_in(r: Reference, values: Vec<Datum>) -> Predicate {
    let (nan, numbers): (Vec<Datum>, Vec<Datum>) = values
        .into_iter()
        .partition(|d| float_value(d).is_some_and(f64::is_nan));
    match (nan.is_empty(), numbers.is_empty()) {
        (true, _) => r.is_in(numbers),
        (false, true) => r.is_nan(),
        (false, false) => r.clone().is_in(numbers).or(r.is_nan()),
    }
}

/// A literal of the column's type: a literal as [`datum`] reads it, else a constant SQL
/// expression folded with `now` (`now() - interval '1 day'`) and cast to the column's type.
/// The flag is true for a folded value (it may have been rounded by the cast).
fn literal(text: &str, ty: &PrimitiveType, now: DateTime<Utc>) -> Result<(Datum, bool)> {
    match datum(text, ty) {
        Ok(d) => Ok((d, false)),
        Err(e) => fold(text, ty, now).map(|d| (d, true)).ok_or(e),
    }
}

/// A constant SQL expression (no column) folded to a literal of type `ty`, with `now` for the
/// time functions.
fn fold(text: &str, ty: &PrimitiveType, now: DateTime<Utc>) -> Option<Datum> {
    let empty = Arc::new(DFSchema::empty());
    let expr = datafusion::prelude::SessionContext::new()
        .parse_sql_expr(text, &empty)
        .ok()?;
    if !expr.column_refs().is_empty() {
        return None;
    }
    let value = match fold_expr(expr, now).ok()? {
        Expr::Literal(v, _) => v,
        _ => return None,
    };
    let arrow_type = iceberg::arrow::type_to_arrow_type(&Type::Primitive(ty.clone())).ok()?;
    let value = value.cast_to(&arrow_type).ok()?;
    scalar_datum(&value, ty)
}

/// `expr` simplified with `now` as the statement time: `now()`, `current_date`,
/// `current_timestamp`, `date_trunc(.., now())` and constant arithmetic become literals.
pub fn fold_expr(expr: Expr, now: DateTime<Utc>) -> Result<Expr> {
    fold_expr_in(expr, Arc::new(DFSchema::empty()), now)
}

/// [`fold_expr`] for an expression over the columns of `schema`.
pub fn fold_expr_in(expr: Expr, schema: Arc<DFSchema>, now: DateTime<Utc>) -> Result<Expr> {
    let context = SimplifyContext::default()
        .with_schema(schema.clone())
        .with_query_execution_start_time(Some(now));
    let simplifier = ExprSimplifier::new(context);
    let expr = simplifier.coerce(expr, &schema)?;
    Ok(simplifier.simplify(expr)?)
}

/// A non-null scalar of the Arrow type of `ty` as a datum of `ty`.
fn scalar_datum(v: &ScalarValue, ty: &PrimitiveType) -> Option<Datum> {
    Some(match (v, ty) {
        (ScalarValue::Boolean(Some(b)), PrimitiveType::Boolean) => Datum::bool(*b),
        (ScalarValue::Int32(Some(i)), PrimitiveType::Int) => Datum::int(*i),
        (ScalarValue::Int64(Some(i)), PrimitiveType::Long) => Datum::long(*i),
        (ScalarValue::Float32(Some(f)), PrimitiveType::Float) => Datum::float(*f),
        (ScalarValue::Float64(Some(f)), PrimitiveType::Double) => Datum::double(*f),
        (ScalarValue::Date32(Some(d)), PrimitiveType::Date) => Datum::date(*d),
        (ScalarValue::TimestampMicrosecond(Some(t), _), PrimitiveType::Timestamp) => {
            Datum::timestamp_micros(*t)
        }
        (ScalarValue::TimestampMicrosecond(Some(t), _), PrimitiveType::Timestamptz) => {
            Datum::timestamptz_micros(*t)
        }
        (ScalarValue::Utf8(Some(s)), PrimitiveType::String) => Datum::string(s),
        _ => return None,
    })
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
            statement_now(),
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
        let now = statement_now();
        let p = prune_conjuncts("id >= 5 AND id % 2 = 1 AND\nname = 'or'", &s, now).unwrap();
        let text = format!("{p}");
        assert!(text.contains("id") && text.contains("name"), "{text}");
        assert!(!text.contains('%'), "{text}");
        for or in [
            "id = 1 OR name = 'a'",
            "id = 1\nor name = 'a' AND d IS NULL",
            "id = 1 OR(name = 'a') AND d IS NULL",
            "name = 'a' AND (id = 1 OR id = 2)",
        ] {
            assert!(prune_conjuncts(or, &s, now).is_none(), "{or}");
        }
        assert!(prune_conjuncts("id % 2 = 1", &s, now).is_none());
        // `or` inside a string or a name is not the operator.
        assert!(prune_conjuncts("name = 'x or y' AND id > 3", &s, now).is_some());
    }

    #[test]
    fn time_functions_fold_to_the_statement_instant() {
        let s = schema();
        let now = DateTime::parse_from_rfc3339("2026-12-02T03:20:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        for e in [
            "ts < now() - interval '30 days'",
            "ts < current_timestamp",
            "ts < current_date",
            "d >= current_date - interval '1 day'",
            "ts < date_trunc('day', now())",
        ] {
            parse_where(e, &s, now).unwrap_or_else(|err| panic!("{e}: {err}"));
        }
        let p = format!(
            "{}",
            parse_where("ts < now() - interval '1 day'", &s, now).unwrap()
        );
        assert!(
            p.contains("2026-12-01") && p.contains("03:20:00.123456"),
            "{p}"
        );
        assert_eq!(format_now(&now), "2026-12-02T03:20:00.123456Z");
    }

    #[test]
    fn float_conditions_nan_can_satisfy_keep_files_that_may_hold_nan() {
        let s = crate::table::schema::parse_schema("f double, g float").unwrap();
        let now = statement_now();
        for (e, nan) in [
            ("f > 1.5", true),
            ("f >= 1.5", true),
            ("f != 1.5", true),
            ("f = 'NaN'", true),
            ("g IN (1, 'NaN')", true),
            ("f < 1.5", false),
            ("f = 1.5", false),
            ("g IN (1, 2)", false),
        ] {
            let p = format!("{}", parse_where(e, &s, now).unwrap()).to_ascii_lowercase();
            assert_eq!(p.contains("nan"), nan, "{e}: {p}");
        }
    }

    #[test]
    fn bad_filters_name_the_problem() {
        let s = schema();
        let parse_where = |e: &str, s: &Schema| parse_where(e, s, statement_now());
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
