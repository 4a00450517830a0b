//! Time travel in `floe sql`: a table (or one of its file metadata tables) read as of a snapshot.
//!
//! The spellings users know, each after a table name and before its alias:
//!
//! | clause                                   | from                  | value                         |
//! |------------------------------------------|-----------------------|-------------------------------|
//! | `FOR VERSION AS OF x`                    | Trino, Spark 3.3+     | snapshot id, `'tag'`, `'branch'` |
//! | `VERSION AS OF x`, `FOR SYSTEM_VERSION AS OF x` | Spark          | same                          |
//! | `FOR TIMESTAMP AS OF t`                  | Trino, Spark 3.3+     | `'2026-11-30 10:00:00'`, `TIMESTAMP '...'`, seconds since the epoch |
//! | `TIMESTAMP AS OF t`, `FOR SYSTEM_TIME AS OF t` | Spark           | same                          |
//!
//! DataFusion's SQL parser (sqlparser, generic dialect) knows none of these, so the statement is
//! rewritten before it is parsed: the clause is cut out and the table name is replaced by a
//! quoted name carrying an index into the list of [`AsOf`]s (`"t\u{1}0"`), which
//! [`super::NamespaceSchema`] resolves; an alias with the table's own name is added when the
//! statement gives none, so `t.col` still names the column. The rewrite works on the
//! tokenizer's spans and edits only the bytes of the clause and the table name: strings,
//! comments and everything else are kept byte for byte.
//!
//! What a clause reads (Iceberg's Java `SnapshotUtil`, which Spark and Trino follow):
//! - a snapshot id: that snapshot, through the schema it was written with;
//! - a tag: its snapshot, through the snapshot's schema; a branch: its head, through the table's
//!   current schema (a branch is a line of work on the current table);
//! - a timestamp: the snapshot that was current at that time (the last entry of the table's
//!   snapshot log at or before it), through its schema. A timestamp without a zone is UTC.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::{Keyword, RESERVED_FOR_TABLE_ALIAS};
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};
use iceberg::spec::SnapshotRetention;
use iceberg::table::Table;

use crate::base::error::{Error, Result};

/// What one clause asks for, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AsOf {
    /// `VERSION AS OF`: a snapshot id (a number) or a ref name (a string; a string of digits
    /// that names no ref is taken as a snapshot id, as Spark does).
    Version { text: String, quoted: bool },
    /// `TIMESTAMP AS OF`: milliseconds since the epoch, and the text given (for errors).
    Timestamp { ms: i64, text: String },
}

impl std::fmt::Display for AsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsOf::Version { text, quoted: true } => write!(f, "VERSION AS OF '{text}'"),
            AsOf::Version { text, .. } => write!(f, "VERSION AS OF {text}"),
            AsOf::Timestamp { text, .. } => write!(f, "TIMESTAMP AS OF {text}"),
        }
    }
}

/// Marks a rewritten table name: `name` + MARK + index into [`Rewritten::at`]. A control
/// character, so no table name (always printable) can contain it.
pub(super) const MARK: char = '\u{1}';

/// A statement with its time-travel clauses taken out.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Rewritten {
    pub sql: String,
    pub at: Vec<AsOf>,
}

/// Splits a (rewritten) table name into the name as written and its [`AsOf`] index.
pub(super) fn split_name(name: &str) -> (&str, Option<usize>) {
    match name.split_once(MARK) {
        Some((base, i)) => (base, i.parse().ok()),
        None => (name, None),
    }
}

const CLAUSES: [(&[&str], bool); 6] = [
    (&["FOR", "VERSION", "AS", "OF"], true),
    (&["FOR", "SYSTEM_VERSION", "AS", "OF"], true),
    (&["VERSION", "AS", "OF"], true),
    (&["FOR", "TIMESTAMP", "AS", "OF"], false),
    (&["FOR", "SYSTEM_TIME", "AS", "OF"], false),
    (&["TIMESTAMP", "AS", "OF"], false),
];

/// Rewrites every time-travel clause of `sql` (see the module docs). A statement without one
/// comes back unchanged, and so does one the tokenizer refuses (DataFusion then reports it).
pub(super) fn rewrite(sql: &str) -> Result<Rewritten> {
    let unchanged = || Rewritten {
        sql: sql.to_string(),
        at: Vec::new(),
    };
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() else {
        return Ok(unchanged());
    };
    let sig: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let offsets = ByteOffsets::new(sql);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut at = Vec::new();
    let mut p = 0;
    while p < sig.len() {
        let Some((len, version)) = CLAUSES
            .iter()
            .find(|(words, _)| keywords_at(&sig, p, words))
            .map(|(w, v)| (w.len(), *v))
        else {
            p += 1;
            continue;
        };
        let Some(name) = table_name_before(&sig, p) else {
            p += 1;
            continue;
        };
        let clause_text = sig[p..p + len]
            .iter()
            .map(|t| t.token.to_string().to_ascii_uppercase())
            .collect::<Vec<_>>()
            .join(" ");
        let (first, name) = name;
        let table_text = offsets.text(first.span.start, name.span.end);
        let mut v = p + len;
        // Trino's typed literal: `FOR TIMESTAMP AS OF TIMESTAMP '...'`.
        if !version && is_word(sig.get(v).map(|t| &t.token), "TIMESTAMP") {
            v += 1;
        }
        let value = sig.get(v).map(|t| &t.token);
        let as_of = match (value, version) {
            (Some(Token::Number(n, _)), true) => AsOf::Version {
                text: n.clone(),
                quoted: false,
            },
            (Some(Token::SingleQuotedString(s)), true) => AsOf::Version {
                text: s.clone(),
                quoted: true,
            },
            (Some(Token::Number(n, _)), false) => AsOf::Timestamp {
                ms: epoch_ms(n).ok_or_else(|| bad_value(table_text, &clause_text, n))?,
                text: n.clone(),
            },
            (Some(Token::SingleQuotedString(s)), false) => AsOf::Timestamp {
                ms: parse_timestamp(s).ok_or_else(|| bad_value(table_text, &clause_text, s))?,
                text: format!("'{s}'"),
            },
            (other, _) => {
                let got = other.map_or("nothing".to_string(), |t| t.to_string());
                return Err(bad_value(table_text, &clause_text, &got));
            }
        };
        let index = at.len();
        at.push(as_of);
        let Token::Word(word) = &name.token else {
            unreachable!("table_name_before returns words")
        };
        edits.push((
            offsets.at(name.span.start),
            offsets.at(name.span.end),
            format!(
                "\"{}{MARK}{index}\"",
                word.value.replace('"', "\"\"").replace(MARK, "")
            ),
        ));
        let has_alias = match sig.get(v + 1).map(|t| &t.token) {
            Some(Token::Word(w)) => {
                w.quote_style.is_some()
                    || w.keyword == Keyword::AS
                    || !RESERVED_FOR_TABLE_ALIAS.contains(&w.keyword)
            }
            _ => false,
        };
        edits.push((
            offsets.at(sig[p].span.start),
            offsets.at(sig[v].span.end),
            if has_alias {
                String::new()
            } else {
                format!("AS {}", offsets.text(name.span.start, name.span.end))
            },
        ));
        p = v + 1;
    }
    if at.is_empty() {
        return Ok(unchanged());
    }
    let mut out = sql.to_string();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (start, end, text) in edits {
        out.replace_range(start..end, &text);
    }
    Ok(Rewritten { sql: out, at })
}

fn is_word(token: Option<&Token>, keyword: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(keyword))
}

fn keywords_at(sig: &[&TokenWithSpan], p: usize, words: &[&str]) -> bool {
    words
        .iter()
        .enumerate()
        .all(|(i, w)| is_word(sig.get(p + i).map(|t| &t.token), w))
}

/// The first and last parts of the table name that ends right before `sig[p]`, when it is
/// one: words (`t`, `"t"`, `db.t`, `floe.db.t$files`) that follow FROM, JOIN or a comma of a
/// FROM list.
fn table_name_before<'a>(
    sig: &[&'a TokenWithSpan],
    p: usize,
) -> Option<(&'a TokenWithSpan, &'a TokenWithSpan)> {
    let last = *sig.get(p.checked_sub(1)?)?;
    if !matches!(last.token, Token::Word(_)) {
        return None;
    }
    // Walk back over `word.word.`.
    let mut start = p - 1;
    while start >= 2
        && matches!(sig[start - 1].token, Token::Period)
        && matches!(sig[start - 2].token, Token::Word(_))
    {
        start -= 2;
    }
    let before = &sig.get(start.checked_sub(1)?)?.token;
    let follows_from = matches!(before, Token::Comma)
        || matches!(before, Token::Word(w) if w.quote_style.is_none()
            && matches!(w.keyword, Keyword::FROM | Keyword::JOIN));
    follows_from.then_some((sig[start], last))
}

fn bad_value(table: &str, clause: &str, got: &str) -> Error {
    let expected = if clause.contains("VERSION") {
        "a snapshot id (FOR VERSION AS OF 8954597067493422955) or a tag or branch name \
         (FOR VERSION AS OF 'audit')"
    } else {
        "a timestamp ('2026-11-30 10:00:00', UTC unless it carries an offset, \
         or TIMESTAMP '2026-11-30 10:00:00+01:00') or seconds since the epoch"
    };
    Error::sql(format!("table {table} {clause} {got}: expected {expected}"))
}

/// A number of seconds since the epoch (Spark's `TIMESTAMP AS OF 1669766400`); one of 10^11
/// or more is read as milliseconds (as seconds it would lie past the year 5000).
fn epoch_ms(n: &str) -> Option<i64> {
    if let Ok(v) = n.parse::<i64>() {
        return if v.abs() >= 100_000_000_000 {
            Some(v)
        } else {
            v.checked_mul(1000)
        };
    }
    let f: f64 = n.parse().ok()?;
    (f.is_finite() && f.abs() < 1e11).then(|| (f * 1000.0).floor() as i64)
}

/// `2026-11-30`, `2026-11-30 10:00[:00[.123]]` (or with `T`), optionally followed by `Z`,
/// ` UTC` or an offset (`+01:00`, `+0100`, ` +01:00`). Without one, UTC.
fn parse_timestamp(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(d.timestamp_millis());
    }
    // `2026-11-30T10:00` -> `2026-11-30 10:00` (the date is ASCII when it parses at all).
    let t = match t.get(10..11) {
        Some("T") | Some("t") => format!("{} {}", &t[..10], &t[11..]),
        _ => t.to_string(),
    };
    let (t, utc) = match t
        .strip_suffix(" UTC")
        .or_else(|| t.strip_suffix("UTC"))
        .or_else(|| t.strip_suffix('Z'))
    {
        Some(rest) => (rest.trim_end().to_string(), true),
        None => (t.clone(), false),
    };
    for f in [
        "%Y-%m-%d %H:%M:%S%.f%:z",
        "%Y-%m-%d %H:%M:%S%.f %:z",
        "%Y-%m-%d %H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S%.f %z",
        "%Y-%m-%d %H:%M%:z",
    ] {
        if let (false, Ok(d)) = (utc, DateTime::parse_from_str(&t, f)) {
            return Some(d.timestamp_millis());
        }
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(&t, f) {
            return Some(Utc.from_utc_datetime(&d).timestamp_millis());
        }
    }
    let d = NaiveDate::parse_from_str(&t, "%Y-%m-%d").ok()?;
    Some(
        Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0)?)
            .timestamp_millis(),
    )
}

/// Byte offsets of the tokenizer's (1-based line, 1-based character column) locations.
struct ByteOffsets<'a> {
    sql: &'a str,
    /// The byte offset of each line's first character.
    lines: Vec<usize>,
}

impl<'a> ByteOffsets<'a> {
    fn new(sql: &'a str) -> Self {
        let mut lines = vec![0];
        lines.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
        Self { sql, lines }
    }

    fn at(&self, l: Location) -> usize {
        let line = (l.line as usize)
            .saturating_sub(1)
            .min(self.lines.len() - 1);
        let start = self.lines[line];
        self.sql[start..]
            .char_indices()
            .nth((l.column as usize).saturating_sub(1))
            .map_or(self.sql.len(), |(i, _)| start + i)
    }

    fn text(&self, from: Location, to: Location) -> &'a str {
        &self.sql[self.at(from)..self.at(to)]
    }
}

/// The snapshot a clause resolves to on `table`, and whether it is read through its own
/// schema (snapshot ids, tags, timestamps) or the table's current one (branches).
fn resolve(table: &Table, name: &str, at: &AsOf) -> Result<(i64, bool)> {
    let md = table.metadata();
    let no = |what: String| Error::sql(format!("table {name} {at}: {what}"));
    match at {
        AsOf::Version { text, quoted } => {
            if *quoted {
                let refs = crate::table::refs(md)?;
                if let Some(r) = refs.get(text) {
                    let branch = matches!(r.retention, SnapshotRetention::Branch { .. });
                    return Ok((r.snapshot_id, !branch));
                }
                if text.parse::<i64>().is_err() {
                    let mut names: Vec<_> = refs.keys().cloned().collect();
                    names.sort();
                    return Err(no(format!(
                        "no tag or branch '{text}' (its refs: {}; see {name}$refs)",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    )));
                }
            }
            let id: i64 = text
                .parse()
                .map_err(|_| no(format!("'{text}' is not a snapshot id")))?;
            if md.snapshot_by_id(id).is_none() {
                return Err(no(format!(
                    "no snapshot {id} ({} snapshots kept; see {name}$snapshots)",
                    md.snapshots().len()
                )));
            }
            Ok((id, true))
        }
        AsOf::Timestamp { ms, .. } => {
            let log = md.history();
            let Some(entry) = log.iter().rev().find(|e| e.timestamp_ms <= *ms) else {
                let first = log
                    .first()
                    .map(|e| format!("its oldest is from {}", fmt_ms(e.timestamp_ms)))
                    .unwrap_or_else(|| "it has no snapshot".into());
                return Err(no(format!(
                    "no snapshot was current at {} ({first}; see {name}$history)",
                    fmt_ms(*ms)
                )));
            };
            if md.snapshot_by_id(entry.snapshot_id).is_none() {
                return Err(no(format!(
                    "snapshot {} was current at {} and has been expired",
                    entry.snapshot_id,
                    fmt_ms(*ms)
                )));
            }
            Ok((entry.snapshot_id, true))
        }
    }
}

fn fmt_ms(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map_or(ms.to_string(), |d| {
            d.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
        })
}

/// `table` as it was at `at`: a read-only view whose current snapshot (and `main`) is the
/// resolved one, through the schema [`resolve`] chose. `name` names the table in errors.
pub(super) fn view_at(table: &Table, name: &str, at: &AsOf) -> Result<Table> {
    let (id, own_schema) = resolve(table, name, at)?;
    let md = table.metadata();
    let schema = md
        .snapshot_by_id(id)
        .and_then(|s| s.schema_id())
        .filter(|_| own_schema)
        .filter(|s| md.schema_by_id(*s).is_some());
    crate::table::view_of(table, &format!("reading {name} {at}"), |json| {
        json["current-snapshot-id"] = id.into();
        if let Some(s) = schema {
            json["current-schema-id"] = s.into();
        }
        if let Some(refs) = json.get_mut("refs").and_then(|r| r.as_object_mut()) {
            refs.insert(
                "main".into(),
                serde_json::json!({"snapshot-id": id, "type": "branch"}),
            );
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(sql: &str) -> Rewritten {
        rewrite(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn version(text: &str, quoted: bool) -> AsOf {
        AsOf::Version {
            text: text.into(),
            quoted,
        }
    }

    #[test]
    fn every_spelling_is_cut_out_and_the_name_carries_its_index() {
        for (sql, want, at) in [
            (
                "SELECT * FROM db.t FOR VERSION AS OF 123",
                "SELECT * FROM db.\"t\u{1}0\" AS t",
                version("123", false),
            ),
            (
                "select * from db.t version as of 'audit' where id > 1",
                "select * from db.\"t\u{1}0\" AS t where id > 1",
                version("audit", true),
            ),
            (
                "SELECT * FROM db.t FOR SYSTEM_VERSION AS OF 7 x",
                "SELECT * FROM db.\"t\u{1}0\"  x",
                version("7", false),
            ),
            (
                "SELECT count(*) FROM db.\"t$files\" FOR VERSION AS OF 5 AS f",
                "SELECT count(*) FROM db.\"t$files\u{1}0\"  AS f",
                version("5", false),
            ),
            (
                "SELECT * FROM db.t FOR TIMESTAMP AS OF '2026-11-30 10:00:00'",
                "SELECT * FROM db.\"t\u{1}0\" AS t",
                AsOf::Timestamp {
                    ms: 1_796_032_800_000,
                    text: "'2026-11-30 10:00:00'".into(),
                },
            ),
            (
                "SELECT * FROM db.t FOR TIMESTAMP AS OF TIMESTAMP '2026-11-30 11:00:00+01:00'",
                "SELECT * FROM db.\"t\u{1}0\" AS t",
                AsOf::Timestamp {
                    ms: 1_796_032_800_000,
                    text: "'2026-11-30 11:00:00+01:00'".into(),
                },
            ),
            (
                "SELECT * FROM db.t TIMESTAMP AS OF 1796032800",
                "SELECT * FROM db.\"t\u{1}0\" AS t",
                AsOf::Timestamp {
                    ms: 1_796_032_800_000,
                    text: "1796032800".into(),
                },
            ),
            (
                "SELECT * FROM db.t FOR SYSTEM_TIME AS OF '2026-11-30T10:00:00Z'",
                "SELECT * FROM db.\"t\u{1}0\" AS t",
                AsOf::Timestamp {
                    ms: 1_796_032_800_000,
                    text: "'2026-11-30T10:00:00Z'".into(),
                },
            ),
        ] {
            let got = rw(sql);
            assert_eq!(got.sql, want, "{sql}");
            assert_eq!(got.at, vec![at], "{sql}");
        }
    }

    #[test]
    fn joins_keep_strings_comments_and_other_tables_byte_for_byte() {
        let sql = "SELECT a.id, 'VERSION AS OF 1' -- FOR VERSION AS OF 2\n\
                   FROM db.t FOR VERSION AS OF 1 a JOIN db.t FOR VERSION AS OF 'é tag' b \
                   ON a.id = b.id, db.u WHERE a.x = 'it''s'";
        let got = rw(sql);
        assert_eq!(
            got.sql,
            "SELECT a.id, 'VERSION AS OF 1' -- FOR VERSION AS OF 2\n\
             FROM db.\"t\u{1}0\"  a JOIN db.\"t\u{1}1\"  b \
             ON a.id = b.id, db.u WHERE a.x = 'it''s'"
        );
        assert_eq!(got.at, vec![version("1", false), version("é tag", true)]);
    }

    #[test]
    fn columns_named_version_or_timestamp_are_not_clauses() {
        for sql in [
            "SELECT version AS of FROM db.t",
            "SELECT a, timestamp AS of FROM db.t",
            "SELECT * FROM db.t WHERE version = 1",
            "SELECT 1",
        ] {
            let got = rw(sql);
            assert_eq!(got.sql, sql);
            assert!(got.at.is_empty(), "{sql}");
        }
    }

    #[test]
    fn a_clause_without_a_usable_value_is_a_clear_error() {
        for (sql, names) in [
            ("SELECT * FROM db.t FOR VERSION AS OF", "nothing"),
            ("SELECT * FROM db.t FOR VERSION AS OF now()", "now"),
            (
                "SELECT * FROM db.t FOR TIMESTAMP AS OF 'yesterday'",
                "yesterday",
            ),
        ] {
            let e = rewrite(sql).unwrap_err().to_string();
            assert!(e.contains("db.t") && e.contains(names), "{sql}: {e}");
        }
    }

    #[test]
    fn timestamps_parse_in_the_forms_users_write() {
        let base = 1_796_032_800_000; // 2026-11-30 10:00:00 UTC
        for (text, ms) in [
            ("2026-11-30 10:00:00", base),
            ("2026-11-30 10:00", base),
            ("2026-11-30T10:00:00.250", base + 250),
            ("2026-11-30 10:00:00 UTC", base),
            ("2026-11-30 10:00:00Z", base),
            ("2026-11-30 12:00:00+02:00", base),
            ("2026-11-30 12:00:00 +0200", base),
            ("2026-11-30", base - 10 * 3_600_000),
        ] {
            assert_eq!(parse_timestamp(text), Some(ms), "{text}");
        }
        assert_eq!(parse_timestamp("2026-11-30 10:00 Europe/Vienna"), None);
        assert_eq!(epoch_ms("1796032800"), Some(base));
        assert_eq!(epoch_ms("1796032800000"), Some(base));
        assert_eq!(epoch_ms("1796032800.5"), Some(base + 500));
    }

    #[test]
    fn names_split_back() {
        assert_eq!(split_name("t\u{1}3"), ("t", Some(3)));
        assert_eq!(split_name("t$files\u{1}0"), ("t$files", Some(0)));
        assert_eq!(split_name("t"), ("t", None));
    }
}
