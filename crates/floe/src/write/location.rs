//! Where a new file goes: `<data location>/<partition path>/<name>`, with every partition value
//! escaped, so that a record's value never steers a path.
//!
//! Partition values come from records, and records are untrusted: the value `../../x` of an
//! identity-partitioned string column, written into a path as it is, would put a data file
//! outside the table; `a/b` would nest directories; `?` or `#` make the path unreadable for
//! readers that parse locations as URIs; a NUL or a 309-digit double (identity of `1e308`) is
//! not a valid file name at all. The iceberg crate's `DefaultLocationGenerator` writes the
//! human string of each value unescaped, so floe names partitions itself.
//!
//! The rule is Iceberg Java's (`PartitionSpec.partitionToPath`): each field is
//! `escape(name)=escape(value)`, where `escape` is `application/x-www-form-urlencoded`
//! (`java.net.URLEncoder`): ASCII letters, digits and `.-*_` stay, a space becomes `+`, every
//! other byte of the UTF-8 text becomes `%XX`. No escaped segment holds a `/`, and none is `.`
//! or `..` (each has an `=`). Beyond Java, a segment is bounded: an escaped value longer than
//! [`MAX_VALUE_LEN`] bytes keeps its first [`KEPT_LEN`] bytes (never half an escape) and then
//! `-` and 16 hex digits of the SHA-256 of the whole value, so two long values sharing a prefix
//! still get distinct directories and no segment exceeds a file system's 255-byte limit.
//!
//! Readers never parse partition values out of paths (the manifest holds them), so the escaped
//! path only has to be a valid, unique, contained place for the file.

use iceberg::spec::{
    Literal, PartitionKey, PartitionSpec, PrimitiveLiteral, PrimitiveType, SchemaRef, Struct,
    TableMetadata, Transform, Type,
};
use iceberg::writer::file_writer::location_generator::{
    DefaultLocationGenerator, LocationGenerator,
};
use sha2::{Digest, Sha256};

use crate::base::error::Result;

/// The longest escaped partition value written as it is.
pub const MAX_VALUE_LEN: usize = 128;
/// What a longer value keeps of its escaped text before its digest.
pub const KEPT_LEN: usize = 64;

/// Escapes one name or value as `java.net.URLEncoder` does (UTF-8).
pub fn escape(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// `escape(value)`, bounded ([`MAX_VALUE_LEN`]).
pub fn escape_value(value: &str) -> String {
    let escaped = escape(value);
    if escaped.len() <= MAX_VALUE_LEN {
        return escaped;
    }
    // Cut at KEPT_LEN, moved back before any `%XX` the cut would split.
    let mut cut = KEPT_LEN;
    if let Some(p) = escaped[cut.saturating_sub(2)..cut].find('%') {
        cut = cut - 2 + p;
    }
    let digest = Sha256::digest(value.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", &escaped[..cut])
}

/// A partition value as text, as the iceberg crate's `Transform::to_human_string` writes it,
/// without its panics: the crate formats dates, times and timestamps by unwrapping chrono's
/// conversions, which fail for a timestamptz before 1970 with a fraction of a second (a
/// negative remainder) and for values beyond chrono's range. A record may hold any of those,
/// and a record's value must never crash floe: here each converts checked, and a value chrono
/// cannot represent is written as its number.
pub fn human(transform: &Transform, ty: &Type, value: Option<&Literal>) -> String {
    use chrono::{DateTime, NaiveTime};
    let (Some(Literal::Primitive(v)), Type::Primitive(p)) = (value, ty) else {
        return transform.to_human_string(ty, value);
    };
    if matches!(transform, Transform::Void) {
        return "null".to_string();
    }
    let checked = match (p, v) {
        (PrimitiveType::Date, PrimitiveLiteral::Int(d)) => Some(
            chrono::TimeDelta::try_days(i64::from(*d))
                .and_then(|t| DateTime::UNIX_EPOCH.checked_add_signed(t))
                .map(|d| d.date_naive().to_string())
                .unwrap_or_else(|| d.to_string()),
        ),
        (PrimitiveType::Time, PrimitiveLiteral::Long(us)) => Some(
            u32::try_from(us.div_euclid(1_000_000))
                .ok()
                .and_then(|s| {
                    NaiveTime::from_num_seconds_from_midnight_opt(
                        s,
                        us.rem_euclid(1_000_000) as u32 * 1000,
                    )
                })
                .map(|t| t.to_string())
                .unwrap_or_else(|| us.to_string()),
        ),
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(us)) => Some(
            DateTime::from_timestamp_micros(*us)
                .map(|d| d.naive_utc().to_string())
                .unwrap_or_else(|| us.to_string()),
        ),
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(us)) => Some(
            DateTime::from_timestamp_micros(*us)
                .map(|d| d.to_string())
                .unwrap_or_else(|| us.to_string()),
        ),
        (PrimitiveType::TimestampNs, PrimitiveLiteral::Long(ns)) => {
            Some(DateTime::from_timestamp_nanos(*ns).naive_utc().to_string())
        }
        (PrimitiveType::TimestamptzNs, PrimitiveLiteral::Long(ns)) => {
            Some(DateTime::from_timestamp_nanos(*ns).to_string())
        }
        _ => None,
    };
    checked.unwrap_or_else(|| transform.to_human_string(ty, value))
}

/// The partition of `key` in `spec` (bound to `schema`) as users read it: `a=1/b=x/y`, each
/// value as [`human`] writes it, unescaped (a label for messages and selection, never a path:
/// [`partition_path`] is the path).
pub fn partition_label(spec: &PartitionSpec, key: &Struct, schema: &SchemaRef) -> String {
    segments(spec, key, schema, |name, value| format!("{name}={value}"))
}

/// The partition path of `key` in `spec` (bound to `schema`): `a=1/b=x%2Fy`, one escaped
/// segment per field ([`escape`], [`escape_value`]).
pub fn partition_path(spec: &PartitionSpec, key: &Struct, schema: SchemaRef) -> String {
    segments(spec, key, &schema, |name, value| {
        format!("{}={}", escape(name), escape_value(value))
    })
}

/// One `segment(name, human value)` per field of `spec`, joined by `/`.
fn segments(
    spec: &PartitionSpec,
    key: &Struct,
    schema: &SchemaRef,
    segment: impl Fn(&str, &str) -> String,
) -> String {
    let types: Vec<Type> = match spec.partition_type(schema) {
        Ok(t) => t.fields().iter().map(|f| (*f.field_type).clone()).collect(),
        Err(_) => vec![],
    };
    spec.fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let value = key.fields().get(i).and_then(Option::as_ref);
            let text = match types.get(i) {
                Some(ty) => human(&field.transform, ty, value),
                // A spec that does not bind (it cannot have written a key).
                None => format!("{value:?}"),
            };
            segment(&field.name, &text)
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The locations of a table's new files: the table's data location (as the iceberg crate
/// reads it: `write.data.path`, else `<location>/data`) and escaped partition paths.
#[derive(Clone, Debug)]
pub struct Locations {
    data: DefaultLocationGenerator,
}

impl Locations {
    pub fn new(md: &TableMetadata) -> Result<Self> {
        Ok(Self {
            data: DefaultLocationGenerator::new(md)?,
        })
    }
}

impl LocationGenerator for Locations {
    fn generate_location(&self, partition_key: Option<&PartitionKey>, file_name: &str) -> String {
        match partition_key {
            Some(key) if !PartitionKey::is_effectively_none(Some(key)) => {
                let path = partition_path(key.spec(), key.data(), key.schema().clone());
                self.data
                    .generate_location(None, &format!("{path}/{file_name}"))
            }
            _ => self.data.generate_location(None, file_name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_as_java_escapes_them_and_never_leave_their_segment() {
        assert_eq!(escape("abc-XYZ_0.9*"), "abc-XYZ_0.9*");
        assert_eq!(escape("a b"), "a+b");
        assert_eq!(
            escape("../../../../../escaped"),
            "..%2F..%2F..%2F..%2F..%2Fescaped"
        );
        assert_eq!(escape("x?y#z%20"), "x%3Fy%23z%2520");
        assert_eq!(escape("a\0b"), "a%00b");
        assert_eq!(escape("é/"), "%C3%A9%2F");
        for hostile in ["..", ".", "/", "\\", "a/../b", "\n", "%2e%2e", "~"] {
            let e = escape_value(hostile);
            assert!(
                !e.contains('/') && !e.contains('\\') && !e.contains('\n'),
                "{hostile:?} -> {e}"
            );
        }
    }

    #[test]
    fn values_chrono_cannot_represent_are_written_as_numbers_not_panics() {
        let lit = |v: PrimitiveLiteral| Literal::Primitive(v);
        let id = Transform::Identity;
        let tz = Type::Primitive(PrimitiveType::Timestamptz);
        // Before 1970 with a fraction: the crate's own conversion panics on this one.
        assert_eq!(
            human(&id, &tz, Some(&lit(PrimitiveLiteral::Long(-1)))),
            "1969-12-31 23:59:59.999999 UTC"
        );
        assert_eq!(
            human(&id, &tz, Some(&lit(PrimitiveLiteral::Long(i64::MIN)))),
            i64::MIN.to_string()
        );
        let date = Type::Primitive(PrimitiveType::Date);
        assert_eq!(
            human(&id, &date, Some(&lit(PrimitiveLiteral::Int(0)))),
            "1970-01-01"
        );
        assert_eq!(
            human(&id, &date, Some(&lit(PrimitiveLiteral::Int(i32::MAX)))),
            i32::MAX.to_string()
        );
        let time = Type::Primitive(PrimitiveType::Time);
        assert_eq!(
            human(&id, &time, Some(&lit(PrimitiveLiteral::Long(-5)))),
            "-5"
        );
        let ts = Type::Primitive(PrimitiveType::Timestamp);
        assert_eq!(
            human(&id, &ts, Some(&lit(PrimitiveLiteral::Long(i64::MAX)))),
            i64::MAX.to_string()
        );
        let one = lit(PrimitiveLiteral::Long(1));
        assert_eq!(human(&Transform::Void, &ts, Some(&one)), "null");
        assert_eq!(human(&id, &ts, None), "null");
    }

    #[test]
    fn long_values_are_bounded_and_stay_distinct() {
        let a = "1".repeat(309);
        let b = format!("{}2", "1".repeat(308));
        let (ea, eb) = (escape_value(&a), escape_value(&b));
        assert!(ea.len() <= KEPT_LEN + 17, "{ea}");
        assert_ne!(ea, eb);
        assert!(ea.starts_with(&"1".repeat(KEPT_LEN)));
        // A cut never splits an escape: what is kept decodes.
        for n in 0..6 {
            let v = format!("{}{}", "a".repeat(n), "/".repeat(200));
            let e = escape_value(&v);
            let kept = e.rsplit_once('-').unwrap().0;
            assert!(
                !kept.ends_with('%') && !kept[kept.len() - 2..].starts_with('%'),
                "{e}"
            );
        }
        assert_eq!(
            escape_value(&"x".repeat(MAX_VALUE_LEN)),
            "x".repeat(MAX_VALUE_LEN)
        );
    }
}
