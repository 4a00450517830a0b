//! `floe ingest --mode upsert|cdc`: what each change record says.
//!
//! - **upsert**: a record is the new row of its key. A Kafka tombstone (null value) deletes
//!   the key carried by the message key (a JSON object of the key columns, or the bare value
//!   of a one-column key); a record whose delete field (`--delete-field`, default `__deleted`,
//!   the field Debezium's `ExtractNewRecordState` adds) is `true` or `"true"` deletes its key.
//! - **cdc**: the Debezium envelope (`{"before", "after", "op", "source", "ts_ms"}`, also
//!   wrapped in `{"schema", "payload"}` by the JSON converter): `op` `c` (create), `r`
//!   (snapshot read) and `u` (update) upsert `after`; `d` deletes the key of `before`; the
//!   tombstone Debezium sends after a delete is skipped; `t` (truncate), `m` (message) and
//!   anything else are dead letters. With a schema, decimals, dates and times in Debezium's
//!   encodings are read by their logical type ([`crate::ingest::debezium`]).
//!
//! A change naming a column the table does not have is a dead letter (a column missing from
//! the table would silently lose data); so is one whose key is missing or null.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::base::error::{Error, Result};
use crate::ingest::debezium;
use crate::records::ndjson::{parse_record, Json};

/// How an ingest applies its records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IngestMode {
    /// Every record is a new row.
    #[default]
    Append,
    /// A record replaces the row of its key; tombstones and marked records delete it.
    Upsert,
    /// Debezium change events.
    Cdc,
}

impl std::str::FromStr for IngestMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "append" => Ok(Self::Append),
            "upsert" => Ok(Self::Upsert),
            "cdc" => Ok(Self::Cdc),
            _ => Err(Error::invalid_option(
                "--mode",
                s,
                "expected append, upsert or cdc",
            )),
        }
    }
}

/// Default delete marker field of upsert records.
pub const DELETE_FIELD_DEFAULT: &str = "__deleted";

/// What one record asks for. Rows are JSON objects re-emitted from floe's own parser, which
/// keeps numbers as written (no rounding through a float).
#[derive(Debug, Clone, PartialEq)]
pub enum Change<'a> {
    /// This JSON object is the key's new row.
    Upsert(Cow<'a, [u8]>),
    /// Delete the key of this JSON object (other fields are ignored).
    Delete(Cow<'a, [u8]>),
    /// Nothing to do (Debezium's tombstone after a delete).
    Skip,
    /// A dead letter, with the reason.
    Bad(String),
}

type Members<'a> = Vec<(Cow<'a, str>, Json<'a>)>;

/// Classifies records of one mode for one table.
#[derive(Debug, Clone)]
pub struct Classifier {
    mode: IngestMode,
    delete_field: String,
    /// The table's top-level column names.
    columns: HashSet<String>,
    /// The key columns.
    key: Vec<String>,
}

impl Classifier {
    /// A classifier for `mode` over a table with `columns`, keyed by `key`.
    pub fn new(
        mode: IngestMode,
        columns: impl IntoIterator<Item = String>,
        key: Vec<String>,
        delete_field: Option<String>,
    ) -> Self {
        Self {
            mode,
            delete_field: delete_field.unwrap_or_else(|| DELETE_FIELD_DEFAULT.to_string()),
            columns: columns.into_iter().collect(),
            key,
        }
    }

    /// What the record with `payload` (its value; empty for a null value) and message `key`
    /// asks for.
    pub fn classify<'a>(&self, payload: &'a [u8], key: Option<&'a [u8]>) -> Change<'a> {
        match self.mode {
            IngestMode::Append => Change::Upsert(Cow::Borrowed(payload)),
            IngestMode::Upsert => self.upsert(payload, key),
            IngestMode::Cdc => self.cdc(payload),
        }
    }

    /// Whether `payload` is a change event without the schema that says how Debezium encoded
    /// its decimals, dates and times (`--mode cdc` only).
    pub fn without_schema(&self, payload: &[u8]) -> bool {
        self.mode == IngestMode::Cdc
            && parse_record(payload).is_ok_and(|event| {
                !event
                    .iter()
                    .any(|(k, v)| k == "schema" && matches!(v, Json::Obj(_)))
            })
    }

    fn upsert<'a>(&self, payload: &'a [u8], key: Option<&'a [u8]>) -> Change<'a> {
        if payload.is_empty() {
            return match key {
                Some(k) if !k.is_empty() => self.key_object(k),
                _ => Change::Bad("a tombstone (null value) without a message key".into()),
            };
        }
        let mut obj = match parse_record(payload) {
            Ok(m) => m,
            // The decoder names the problem.
            Err(_) => return Change::Upsert(Cow::Borrowed(payload)),
        };
        let mut deleted = false;
        if let Some(i) = obj.iter().position(|(k, _)| k == &self.delete_field) {
            deleted = match &obj[i].1 {
                Json::Null => false,
                Json::Bool(b) => *b,
                Json::Str(s) if s.eq_ignore_ascii_case("true") => true,
                Json::Str(s) if s.eq_ignore_ascii_case("false") => false,
                other => {
                    return Change::Bad(format!(
                        "delete field '{}' is {}, not true or false",
                        self.delete_field,
                        other.display(40)
                    ))
                }
            };
            obj.remove(i);
        }
        self.row(obj, deleted)
    }

    fn cdc<'a>(&self, payload: &'a [u8]) -> Change<'a> {
        if payload.is_empty() {
            // Debezium follows each delete with a tombstone for log compaction.
            return Change::Skip;
        }
        let mut event = match parse_record(payload) {
            Ok(m) => m,
            Err(e) => return Change::Bad(e),
        };
        // The JSON converter with schemas enabled wraps the event; its schema gives the
        // encoding of decimals, dates and times.
        let mut schema = None;
        if event.iter().any(|(k, _)| k == "schema") {
            if let Some(Json::Obj(inner)) = take(&mut event, "payload") {
                schema = take(&mut event, "schema");
                event = inner;
            }
        }
        let op = match take(&mut event, "op") {
            Some(Json::Str(op)) => op.into_owned(),
            _ => {
                return Change::Bad("not a Debezium change event: no \"op\" (c, r, u or d)".into())
            }
        };
        let side =
            match op.as_str() {
                "c" | "r" | "u" => "after",
                "d" => "before",
                "t" => return Change::Bad(
                    "a truncate event: not applied (empty the table with floe delete --where true)"
                        .into(),
                ),
                other => return Change::Bad(format!("unknown Debezium op '{other}'")),
            };
        match take(&mut event, side) {
            Some(Json::Obj(mut row)) => {
                if let Some(schema) = &schema {
                    let types = debezium::side_types(schema, side);
                    if let Err(e) = debezium::convert_row(&mut row, &types) {
                        return Change::Bad(e);
                    }
                }
                self.row(row, side == "before")
            }
            _ => Change::Bad(format!("op '{op}' without a \"{side}\" row")),
        }
    }

    /// A row object: every field a column of the table, the key present.
    fn row<'a>(&self, obj: Members<'_>, deleted: bool) -> Change<'a> {
        if let Some((unknown, _)) = obj.iter().find(|(k, _)| !self.columns.contains(k.as_ref())) {
            return Change::Bad(format!("column '{unknown}' is not in the table"));
        }
        if let Some(k) = self.key.iter().find(|k| {
            !obj.iter()
                .any(|(name, v)| name == k.as_str() && *v != Json::Null)
        }) {
            return Change::Bad(format!("key column '{k}' is missing or null"));
        }
        let bytes = Json::Obj(obj).to_text().into_bytes();
        if deleted {
            Change::Delete(Cow::Owned(bytes))
        } else {
            Change::Upsert(Cow::Owned(bytes))
        }
    }

    /// A message key as a key object: a JSON object of the key columns (Debezium's, also with
    /// schemas enabled), or the bare value of a one-column key.
    fn key_object<'a>(&self, key: &'a [u8]) -> Change<'a> {
        if let Ok(mut o) = parse_record(key) {
            if o.iter().any(|(k, _)| k == "schema") {
                if let Some(Json::Obj(inner)) = take(&mut o, "payload") {
                    o = inner;
                }
            }
            return self.row(o, true);
        }
        if self.key.len() != 1 {
            return Change::Bad(format!(
                "message key is not a JSON object of the key columns ({})",
                self.key.join(", ")
            ));
        }
        let Ok(text) = std::str::from_utf8(key) else {
            return Change::Bad("message key is not UTF-8".into());
        };
        let text = text.trim();
        // A JSON scalar (number, quoted string) as written; anything else is a string key.
        let value = if serde_json::from_str::<serde_json::Value>(text)
            .is_ok_and(|v| v.is_number() || v.is_string())
        {
            text.to_string()
        } else {
            crate::records::ndjson::quote(text)
        };
        let row = format!(
            "{{{}:{value}}}",
            crate::records::ndjson::quote(&self.key[0])
        );
        Change::Delete(Cow::Owned(row.into_bytes()))
    }
}

/// Removes member `name` from an object, returning its value.
fn take<'a>(obj: &mut Members<'a>, name: &str) -> Option<Json<'a>> {
    let i = obj.iter().position(|(k, _)| k == name)?;
    Some(obj.remove(i).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(mode: IngestMode) -> Classifier {
        Classifier::new(
            mode,
            ["id", "name", "n"].map(String::from),
            vec!["id".into()],
            None,
        )
    }

    fn text(ch: &Change) -> String {
        match ch {
            Change::Upsert(b) => format!("U {}", String::from_utf8_lossy(b)),
            Change::Delete(b) => format!("D {}", String::from_utf8_lossy(b)),
            Change::Skip => "skip".into(),
            Change::Bad(r) => format!("bad {r}"),
        }
    }

    #[test]
    fn upsert_records_tombstones_and_marked_deletes() {
        let u = c(IngestMode::Upsert);
        assert_eq!(
            text(&u.classify(br#"{"id": 1, "name": "a"}"#, None)),
            r#"U {"id":1,"name":"a"}"#
        );
        assert_eq!(
            text(&u.classify(b"", Some(br#"{"id": 7}"#))),
            r#"D {"id":7}"#
        );
        assert_eq!(text(&u.classify(b"", Some(b"7"))), r#"D {"id":7}"#);
        assert_eq!(text(&u.classify(b"", Some(b"abc"))), r#"D {"id":"abc"}"#);
        assert_eq!(
            text(&u.classify(br#"{"id": 2, "__deleted": "true"}"#, None)),
            r#"D {"id":2}"#
        );
        assert_eq!(
            text(&u.classify(br#"{"id": 2, "__deleted": false, "n": 3}"#, None)),
            r#"U {"id":2,"n":3}"#
        );
        assert!(text(&u.classify(b"", None)).starts_with("bad a tombstone"));
        assert!(text(&u.classify(br#"{"id": 2, "zz": 1}"#, None)).contains("'zz'"));
        assert!(text(&u.classify(br#"{"name": "x"}"#, None)).contains("key column 'id'"));
        assert!(text(&u.classify(br#"{"id": 1, "__deleted": 3}"#, None)).contains("__deleted"));
    }

    #[test]
    fn debezium_envelopes_map_to_upserts_and_deletes() {
        let d = c(IngestMode::Cdc);
        let create = br#"{"before": null, "after": {"id": 1, "name": "a"}, "op": "c", "source": {"lsn": 5}}"#;
        assert_eq!(text(&d.classify(create, None)), r#"U {"id":1,"name":"a"}"#);
        let update = br#"{"schema": {}, "payload": {"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "b"}, "op": "u"}}"#;
        assert_eq!(text(&d.classify(update, None)), r#"U {"id":1,"name":"b"}"#);
        let delete = br#"{"before": {"id": 1, "name": "b"}, "after": null, "op": "d"}"#;
        assert_eq!(text(&d.classify(delete, None)), r#"D {"id":1,"name":"b"}"#);
        assert_eq!(text(&d.classify(b"", Some(br#"{"id": 1}"#))), "skip");
        assert!(text(&d.classify(br#"{"op": "t"}"#, None)).contains("truncate"));
        assert!(text(&d.classify(br#"{"after": {"id": 1}}"#, None)).contains("no \"op\""));
        assert!(text(&d.classify(br#"{"op": "c", "after": null}"#, None)).contains("\"after\""));
        assert!(
            text(&d.classify(br#"{"op": "c", "after": {"id": 1, "extra": 2}}"#, None))
                .contains("'extra'")
        );
        assert!(text(&d.classify(b"nope", None)).starts_with("bad "));
        // Numbers keep their text (a decimal is not rounded through a float).
        let exact = br#"{"op": "c", "after": {"id": 12345678901234567890123, "n": 0.10000000000000000001}}"#;
        assert_eq!(
            text(&d.classify(exact, None)),
            r#"U {"id":12345678901234567890123,"n":0.10000000000000000001}"#
        );
    }
}
