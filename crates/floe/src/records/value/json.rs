//! NDJSON records to cells: one record (see [`crate::records::ndjson`]) is matched to the
//! table's columns (duplicate keys are bad) and each JSON value is converted to its column's
//! type, recursively for lists, structs and maps.

use std::borrow::Cow;

use super::number::{number_to, Number};
use super::text::text_to;
use super::{BadValue, Cell, Columns, Kind, Leaf, Node, SHOW};
use crate::records::ndjson::{self, quote, Json};

/// Decodes one NDJSON record (see [`crate::records::ndjson`]) into one cell per column.
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
pub(super) fn json_value<'a>(node: &Node, v: Json<'a>) -> std::result::Result<Cell<'a>, BadValue> {
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
