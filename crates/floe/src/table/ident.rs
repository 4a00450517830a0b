//! Table identifiers as users write them (`ns.table`, nested namespaces `a.b.table`) and the
//! rule for names that become directories of a table location.

use iceberg::{NamespaceIdent, TableIdent};

use crate::error::{Error, Result};

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
pub fn validate_name(kind: &str, name: &str, table: bool) -> Result<()> {
    let bad = |reason: &str| Err(Error::invalid_option(kind, name.escape_debug(), reason));
    if name.is_empty() {
        return bad("must not be empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not names");
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
