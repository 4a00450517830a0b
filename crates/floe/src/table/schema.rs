//! Table definitions as users type them: `--schema 'id bigint not null, ts timestamp, ...'`,
//! `--schema-file` (Iceberg schema JSON, as in `metadata.json`), and `--partition 'day(ts),
//! bucket(16, id), truncate(4, name), identity(col)'` (Iceberg spec, "Partition Transforms").
//! Partition field names follow Iceberg's conventions (`ts_day`, `id_bucket`, `name_trunc`).

use std::sync::Arc;

use iceberg::spec::{NestedField, PrimitiveType, Schema, Transform, Type, UnboundPartitionSpec};

use crate::base::error::{Error, Result};

fn def_err(what: &'static str, fragment: &str, reason: impl Into<String>) -> Error {
    Error::InvalidDefinition {
        what,
        fragment: fragment.trim().to_string(),
        reason: reason.into(),
    }
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' => depth += 1,
            ')' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Parses an Iceberg primitive type name (and common SQL aliases).
pub fn parse_primitive(t: &str) -> Result<PrimitiveType> {
    let lower = t.trim().to_ascii_lowercase();
    let compact: String = lower.chars().filter(|c| !c.is_whitespace()).collect();
    let args = |name: &str| -> Option<Vec<u64>> {
        let inner = compact
            .strip_prefix(name)?
            .strip_prefix('(')?
            .strip_suffix(')')?;
        inner.split(',').map(|x| x.parse().ok()).collect()
    };
    if let Some(a) = args("decimal").or_else(|| args("numeric")) {
        return match a.as_slice() {
            [p, s] if *p >= 1 && *p <= 38 && s <= p => Ok(PrimitiveType::Decimal {
                precision: *p as u32,
                scale: *s as u32,
            }),
            _ => Err(def_err(
                "schema",
                t,
                "decimal(P, S) needs 1 <= P <= 38 and 0 <= S <= P",
            )),
        };
    }
    if let Some(a) = args("fixed") {
        return match a.as_slice() {
            [n] if *n > 0 => Ok(PrimitiveType::Fixed(*n)),
            _ => Err(def_err("schema", t, "fixed(L) needs a positive length")),
        };
    }
    Ok(match compact.as_str() {
        "boolean" | "bool" => PrimitiveType::Boolean,
        "int" | "integer" | "int32" => PrimitiveType::Int,
        "bigint" | "long" | "int64" => PrimitiveType::Long,
        "float" | "real" | "float32" => PrimitiveType::Float,
        "double" | "float64" => PrimitiveType::Double,
        "date" => PrimitiveType::Date,
        "time" => PrimitiveType::Time,
        "timestamp" | "timestamp_ntz" => PrimitiveType::Timestamp,
        "timestamptz" | "timestamp_ltz" => PrimitiveType::Timestamptz,
        "timestamp_ns" => PrimitiveType::TimestampNs,
        "timestamptz_ns" => PrimitiveType::TimestamptzNs,
        "string" | "varchar" | "text" => PrimitiveType::String,
        "uuid" => PrimitiveType::Uuid,
        "binary" | "bytes" | "varbinary" => PrimitiveType::Binary,
        _ => {
            return Err(def_err(
                "schema",
                t,
                "unknown type (expected boolean, int, bigint, float, double, decimal(P,S), date, time, \
                 timestamp, timestamptz, timestamp_ns, timestamptz_ns, string, uuid, fixed(L), binary)",
            ))
        }
    })
}

/// Parses `name type [not null] [comment '...'], ...` into a schema with ids 1..N.
pub fn parse_schema(def: &str) -> Result<Schema> {
    let mut fields = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, col) in split_top(def).into_iter().enumerate() {
        let col = col.trim();
        let (col_def, comment) = match col.to_ascii_lowercase().find(" comment ") {
            Some(pos) => (
                &col[..pos],
                Some(col[pos + 9..].trim().trim_matches('\'').to_string()),
            ),
            None => (col, None),
        };
        let mut words: Vec<&str> = col_def.split_whitespace().collect();
        let required = words.len() >= 3
            && words[words.len() - 2].eq_ignore_ascii_case("not")
            && words[words.len() - 1].eq_ignore_ascii_case("null");
        if required {
            words.truncate(words.len() - 2);
        } else if words.last().is_some_and(|w| w.eq_ignore_ascii_case("null")) {
            words.pop();
        }
        if words.len() < 2 {
            return Err(def_err("schema", col, "expected 'name type [not null]'"));
        }
        let name = words[0].trim_matches('`').trim_matches('"');
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(def_err("schema", col, format!("duplicate column '{name}'")));
        }
        let ty = parse_primitive(&words[1..].join(" "))?;
        let mut field = NestedField::new(i as i32 + 1, name, Type::Primitive(ty), required);
        if let Some(c) = comment {
            field = field.with_doc(c);
        }
        fields.push(Arc::new(field));
    }
    if fields.is_empty() {
        return Err(def_err("schema", def, "no columns"));
    }
    Schema::builder()
        .with_fields(fields)
        .build()
        .map_err(|e| def_err("schema", def, e.to_string()))
}

/// Makes `columns` (`id` or `id, region`; nested as `payload.id`) the schema's primary key:
/// Iceberg's identifier fields (spec "Identifier Field IDs"), the key upserts and equality
/// deletes match rows by. As in SQL, a key column is made `not null`; Iceberg refuses float and
/// double keys, non-primitive ones, and keys inside an optional struct (or a list or map), so
/// those are errors naming the column.
pub fn with_primary_key(schema: Schema, columns: &str) -> Result<Schema> {
    let mut ids = Vec::new();
    for col in split_top(columns) {
        let name = col.trim().trim_matches('`').trim_matches('"');
        if name.is_empty() {
            continue;
        }
        let err = |reason: String| def_err("primary key", name, reason);
        let field = schema
            .field_by_name(name)
            .ok_or_else(|| err(format!("no column '{name}' in the schema")))?;
        match field.field_type.as_ref() {
            Type::Primitive(PrimitiveType::Float | PrimitiveType::Double) => {
                return Err(err(format!(
                    "'{name}' is {}: Iceberg keys cannot be float or double",
                    field.field_type
                )))
            }
            Type::Primitive(_) => {}
            other => return Err(err(format!("'{name}' is {other}, not a primitive column"))),
        }
        // Every enclosing field must be a required struct.
        let parts: Vec<&str> = name.split('.').collect();
        for i in 1..parts.len() {
            let parent = parts[..i].join(".");
            match schema.field_by_name(&parent) {
                Some(p) if matches!(p.field_type.as_ref(), Type::Struct(_)) && p.required => {}
                Some(p) if matches!(p.field_type.as_ref(), Type::Struct(_)) => {
                    return Err(err(format!(
                        "'{name}' is inside the optional struct '{parent}' (make it not null)"
                    )))
                }
                _ => return Err(err(format!("'{name}' is inside a list or map"))),
            }
        }
        if ids.contains(&field.id) {
            return Err(err(format!("'{name}' is listed twice")));
        }
        ids.push(field.id);
    }
    if ids.is_empty() {
        return Err(def_err("primary key", columns, "no column named"));
    }
    fn require(f: &Arc<NestedField>, ids: &[i32]) -> Arc<NestedField> {
        let mut field = f.as_ref().clone();
        if ids.contains(&field.id) {
            field.required = true;
        }
        if let Type::Struct(st) = field.field_type.as_ref() {
            let fields = st.fields().iter().map(|c| require(c, ids)).collect();
            field.field_type = Box::new(Type::Struct(iceberg::spec::StructType::new(fields)));
        }
        Arc::new(field)
    }
    let fields: Vec<Arc<NestedField>> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| require(f, &ids))
        .collect();
    Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_fields(fields)
        .with_identifier_field_ids(ids)
        .build()
        .map_err(|e| def_err("primary key", columns, e.to_string()))
}

/// The primary key (identifier fields) of `schema` by column name, in field-id order (the
/// schema stores them as a set).
pub fn primary_key(schema: &Schema) -> Vec<String> {
    let mut ids: Vec<i32> = schema.identifier_field_ids().collect();
    ids.sort_unstable();
    ids.into_iter()
        .filter_map(|id| schema.name_by_field_id(id).map(str::to_string))
        .collect()
}

/// Parses an Iceberg schema JSON document (the `schema` object of `metadata.json`).
pub fn parse_schema_json(json: &str) -> Result<Schema> {
    serde_json::from_str(json).map_err(|e| {
        def_err(
            "schema file",
            &json.chars().take(40).collect::<String>(),
            e.to_string(),
        )
    })
}

/// Parses `day(ts), bucket(16, id), truncate(4, name), identity(col), col` against `schema`.
pub fn parse_partition(def: &str, schema: &Schema) -> Result<UnboundPartitionSpec> {
    let mut builder = UnboundPartitionSpec::builder();
    for part in split_top(def) {
        let (p, alias) = split_alias(part.trim());
        if alias.is_some_and(|a| a.is_empty() || a.contains(char::is_whitespace)) {
            return Err(def_err(
                "partition",
                part,
                "expected a partition field name after AS",
            ));
        }
        let (func, args) = match p.find('(') {
            Some(open) if p.ends_with(')') => (
                p[..open].trim().to_ascii_lowercase(),
                &p[open + 1..p.len() - 1],
            ),
            Some(_) => return Err(def_err("partition", p, "unbalanced parentheses")),
            None => ("identity".to_string(), p),
        };
        let args: Vec<&str> = args.split(',').map(str::trim).collect();
        let (column, n) = match args.as_slice() {
            [c] => (*c, None),
            [n, c] => {
                let n: u32 = n.parse().map_err(|_| {
                    def_err("partition", p, format!("'{n}' is not a positive integer"))
                })?;
                (*c, Some(n))
            }
            _ => {
                return Err(def_err(
                    "partition",
                    p,
                    "expected transform(column) or transform(N, column)",
                ))
            }
        };
        let field = schema.field_by_name(column).ok_or_else(|| {
            def_err(
                "partition",
                p,
                format!("no column '{column}' in the schema"),
            )
        })?;
        let (transform, suffix) = match (func.as_str(), n) {
            ("identity", None) => (Transform::Identity, None),
            ("year" | "years", None) => (Transform::Year, Some("year")),
            ("month" | "months", None) => (Transform::Month, Some("month")),
            ("day" | "days", None) => (Transform::Day, Some("day")),
            ("hour" | "hours", None) => (Transform::Hour, Some("hour")),
            ("void", None) => (Transform::Void, Some("null")),
            ("bucket", Some(n)) if n > 0 => (Transform::Bucket(n), Some("bucket")),
            ("truncate", Some(n)) if n > 0 => (Transform::Truncate(n), Some("trunc")),
            _ => {
                return Err(def_err(
                    "partition",
                    p,
                    "expected identity(c), year/month/day/hour(c), bucket(N, c), truncate(N, c) or void(c)",
                ))
            }
        };
        let ty = field.field_type.as_ref();
        if transform.result_type(ty).is_err() {
            return Err(def_err(
                "partition",
                p,
                format!("transform cannot apply to column type {ty}"),
            ));
        }
        if let Some(why) = unwritable(&transform, ty) {
            return Err(def_err("partition", p, why));
        }
        let name = match (alias, suffix) {
            (Some(a), _) => a.trim_matches('`').trim_matches('"').to_string(),
            (None, None) => field.name.clone(),
            (None, Some(s)) => format!("{}_{s}", field.name),
        };
        builder = builder
            .add_partition_field(field.id, name, transform)
            .map_err(|e| def_err("partition", p, e.to_string()))?;
    }
    Ok(builder.build())
}

/// Why floe cannot write files of a partition field `transform(column of ty)` the spec allows:
/// the iceberg crate floe writes with has no truncate of binary values (its transform takes
/// no Arrow `LargeBinary`, the binary type of its own schema conversion), and its manifests
/// hold a `uuid` partition value in a form neither it nor Java reads back. Refused at create
/// (and at evolve) with the way out, rather than at every append.
pub fn unwritable(transform: &Transform, ty: &Type) -> Option<String> {
    match (transform, ty) {
        (Transform::Truncate(_), Type::Primitive(PrimitiveType::Binary)) => Some(
            "floe does not write truncate of a binary column yet; partition it by bucket(N, c) \
             instead"
                .to_string(),
        ),
        (Transform::Identity, Type::Primitive(PrimitiveType::Uuid)) => Some(
            "floe does not write identity of a uuid column yet; partition it by bucket(N, c) \
             instead"
                .to_string(),
        ),
        _ => None,
    }
}

/// `expr AS name` split into the expression and the name given to its partition field.
fn split_alias(p: &str) -> (&str, Option<&str>) {
    let lower = p.to_ascii_lowercase();
    match lower.rfind(" as ") {
        Some(i) if i > p.rfind(')').unwrap_or(0) => (p[..i].trim(), Some(p[i + 4..].trim())),
        _ => (p, None),
    }
}

/// The spec of an unpartitioned table.
pub fn unpartitioned() -> UnboundPartitionSpec {
    UnboundPartitionSpec::builder().build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_key_becomes_required_identifier_fields() {
        let s = parse_schema("id bigint, region string, amount double, v int").unwrap();
        let k = with_primary_key(s.clone(), "region, id").unwrap();
        assert_eq!(primary_key(&k), vec!["id", "region"]);
        let mut ids: Vec<i32> = k.identifier_field_ids().collect();
        ids.sort();
        assert_eq!(ids, vec![1, 2]);
        assert!(k.field_by_name("id").unwrap().required);
        assert!(k.field_by_name("region").unwrap().required);
        assert!(!k.field_by_name("v").unwrap().required);
        for (cols, says) in [
            ("amount", "float or double"),
            ("nope", "no column 'nope'"),
            ("id, id", "listed twice"),
            ("", "no column named"),
        ] {
            let e = with_primary_key(s.clone(), cols).unwrap_err().to_string();
            assert!(e.contains(says), "{cols}: {e}");
        }
    }

    #[test]
    fn every_primitive_type_parses() {
        let s = parse_schema(
            "a boolean, b int, c bigint not null, d float, e double, f decimal(10, 2), g date, h time, \
             i timestamp, j timestamptz, k timestamp_ns, l timestamptz_ns, m string, n uuid, o fixed(16), p binary",
        )
        .unwrap();
        assert_eq!(s.as_struct().fields().len(), 16);
        let c = s.field_by_name("c").unwrap();
        assert!(c.required);
        assert_eq!(*c.field_type, Type::Primitive(PrimitiveType::Long));
        assert_eq!(
            *s.field_by_name("f").unwrap().field_type,
            Type::Primitive(PrimitiveType::Decimal {
                precision: 10,
                scale: 2
            })
        );
    }

    #[test]
    fn bad_schema_names_the_fragment() {
        let e = parse_schema("id bigint, name strang")
            .unwrap_err()
            .to_string();
        assert!(e.contains("strang"), "{e}");
        assert!(parse_schema("id bigint, id int")
            .unwrap_err()
            .to_string()
            .contains("duplicate"));
        assert!(parse_schema("x decimal(40, 2)").is_err());
    }

    #[test]
    fn partition_transforms_parse_with_iceberg_names() {
        let s =
            parse_schema("id bigint not null, ts timestamp, name string, region string").unwrap();
        let spec = parse_partition(
            "day(ts), bucket(16, id), truncate(4, name), identity(region)",
            &s,
        )
        .unwrap();
        let names: Vec<_> = spec.fields().iter().map(|f| f.name.clone()).collect();
        assert_eq!(names, ["ts_day", "id_bucket", "name_trunc", "region"]);
        assert!(parse_partition("day(nope)", &s)
            .unwrap_err()
            .to_string()
            .contains("nope"));
        assert!(
            parse_partition("day(name)", &s).is_err(),
            "day() of a string must fail"
        );
        assert!(parse_partition("bucket(x, id)", &s).is_err());
    }
}
