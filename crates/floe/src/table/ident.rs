//! Table identifiers as users write them (`ns.table`, nested namespaces `a.b.table`), the
//! rule for names that become directories of a table location, and [`printable`], the one
//! escaping of text for humans (CLI output, `floe maintain` log lines): names made by other
//! tools may hold newlines or bidirectional overrides that would forge or reorder a line.

use iceberg::{NamespaceIdent, TableIdent};

use crate::base::error::{Error, Result};

/// Parses `ns.table` (the last dot separates the table name; namespaces may be nested).
pub fn parse_table_ident(s: &str) -> Result<TableIdent> {
    let (ns, name) = s
        .rsplit_once('.')
        .ok_or_else(|| Error::invalid_option("table", s, "expected NAMESPACE.TABLE"))?;
    if ns.is_empty() || name.is_empty() {
        return Err(Error::invalid_option(
            "table",
            s,
            "expected NAMESPACE.TABLE",
        ));
    }
    Ok(TableIdent::new(parse_namespace(ns)?, name.to_string()))
}

/// Parses `a` or `a.b` into a namespace.
pub fn parse_namespace(s: &str) -> Result<NamespaceIdent> {
    if s.is_empty() || s.split('.').any(str::is_empty) {
        return Err(Error::invalid_option(
            "namespace",
            s,
            "empty namespace level",
        ));
    }
    NamespaceIdent::from_strs(s.split('.'))
        .map_err(|e| Error::invalid_option("namespace", s, e.to_string()))
}

/// Checks one namespace level or table name before anything is created under it. Tables live
/// at `{warehouse}/{ns}/{table}`, so a name must be one path segment that cannot climb, nest,
/// or be read differently by a FileIO that decodes URIs: not empty, not `.` or `..`, no `/`,
/// `\\`, `%` or control characters, no leading or trailing whitespace, at most 255 bytes.
/// Table names also may not contain `$`, which `floe sql` reads as a metadata table suffix.
/// Bidirectional controls (U+202E and the other overrides, embeddings, isolates and marks) and
/// zero-width characters (U+200B..U+200D, U+2060, U+FEFF) are refused too: they make a name
/// print as another one.
pub fn validate_name(kind: &str, name: &str, table: bool) -> Result<()> {
    let shown = name.escape_debug().to_string();
    let bad = |reason: &str| Err(Error::invalid_option(kind, printable(&shown), reason));
    if name.is_empty() {
        return bad("must not be empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not names");
    }
    if let Some(c) = name.chars().find(|c| is_invisible(*c)) {
        return bad(&format!(
            "must not contain {}: bidirectional controls and zero-width characters make a \
             name print as another",
            printable(&c.to_string())
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '/' | '\\' | '%') || c.is_control() || (table && *c == '$'))
    {
        return bad(&format!(
            "must not contain {c:?}: names become directories of the table location"
        ));
    }
    if name.trim() != name {
        return bad("must not start or end with whitespace");
    }
    if name.len() > 255 {
        return bad("longer than 255 bytes");
    }
    Ok(())
}

/// Bidirectional controls (marks, embeddings, overrides, isolates) and zero-width or invisible
/// format characters: they reorder or hide what a terminal shows.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// `s` for one line of human-readable output: control characters (newline, carriage return,
/// escape, ...), bidirectional controls and zero-width characters written as escapes (`\n`,
/// `\u{202e}`), everything else unchanged. The CLI's text output and `floe maintain`'s log
/// lines go through it, so a name made by another tool cannot forge or reorder a line.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    escape(s, false)
}

/// [`printable`] for text of several lines: line breaks (and tabs) kept, every other
/// control, bidirectional and zero-width character escaped.
pub fn printable_lines(s: &str) -> std::borrow::Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_lines: bool) -> std::borrow::Cow<'_, str> {
    let bad =
        |c: char| (c.is_control() && !(keep_lines && matches!(c, '\n' | '\t'))) || is_invisible(c);
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

pub fn validate_namespace(ns: &NamespaceIdent) -> Result<()> {
    for level in ns.as_ref() {
        validate_name("namespace", level, false)?;
    }
    Ok(())
}

/// `ns.table` as users write it.
pub fn ident_string(ident: &TableIdent) -> String {
    format!(
        "{}.{}",
        ident.namespace().clone().inner().join("."),
        ident.name()
    )
}
