//! Opaque columns: columns whose type the iceberg crate floe builds on cannot parse (format v3's
//! `variant`, `geometry(...)`, `geography(...)` and `unknown`, and any type a later spec adds).
//!
//! A table must load whatever its columns are (diagnose, expiry, orphan removal and the metadata
//! tables never look at column values), so such a type is carried, not parsed:
//!
//! - **Reading metadata** ([`parse_metadata`], [`metadata_from_value`]): only when the iceberg
//!   crate refuses a `metadata.json`, each field of a type it cannot parse is *masked*: its type
//!   becomes `binary` (a type every bound and default deserializes as), and its original type,
//!   doc and defaults are kept in its `doc` behind [`MARK`]. A list element or map key/value of
//!   such a type masks its enclosing field whole (they have no `doc` of their own).
//! - **Reading manifests** ([`load_manifest`]): Iceberg writers put the table schema in each
//!   manifest's Avro header, where the iceberg crate parses it before any entry; the header's
//!   schema is masked the same way before parsing.
//! - **Writing metadata** ([`metadata_bytes`], [`unmask_value`]): every masked field is restored
//!   exactly as it was read, so a commit (expiry, a property change) never rewrites a column's type.
//!   A REST commit's `updates` are restored the same way.
//! - **Refusing** ([`refuse`], [`opaque_columns`]): whatever reads or writes rows (SQL scans,
//!   compaction, deletes, appends) or writes manifests (whose header would carry the placeholder)
//!   refuses by column name: "column geo has type geometry, which floe does not rewrite".

use iceberg::io::FileIO;
use iceberg::spec::{
    Manifest, ManifestFile, ManifestStatus, NestedFieldRef, Schema, TableMetadata,
};
use serde_json::{json, Map, Value};

use crate::base::error::{Error, Result};

/// The prefix of a masked field's `doc`; the JSON after it holds the field's original `type`,
/// `doc`, `initial-default` and `write-default`.
pub const MARK: &str = "floe:opaque-type:";

/// Keys of a field that are kept aside while it is masked.
const KEPT: [&str; 4] = ["type", "doc", "initial-default", "write-default"];

/// Parses a `metadata.json`, masking the fields of types the iceberg crate cannot parse, and
/// preparing its reserved properties and v1 refs ([`super::reserved::prepare`]). A file that
/// needs neither takes the direct path (no copy through a JSON tree).
pub fn parse_metadata(bytes: &[u8]) -> std::result::Result<TableMetadata, serde_json::Error> {
    parse_prepared(bytes, true)
}

/// [`parse_metadata`]; `strip`: drop every `floe.internal.*` property (false only for a head
/// floe marked itself).
pub(crate) fn parse_prepared(
    bytes: &[u8],
    strip: bool,
) -> std::result::Result<TableMetadata, serde_json::Error> {
    match serde_json::from_slice::<TableMetadata>(bytes) {
        Ok(md) if !super::reserved::needs_prepare(&md, bytes, strip) => Ok(md),
        Ok(_) => {
            let mut value = serde_json::from_slice::<Value>(bytes)?;
            super::reserved::prepare(&mut value, strip);
            serde_json::from_value(value)
        }
        Err(first) => {
            let Ok(mut value) = serde_json::from_slice::<Value>(bytes) else {
                return Err(first);
            };
            super::reserved::prepare(&mut value, strip);
            masked_from_value(value).map_err(|_| first)
        }
    }
}

/// [`parse_metadata`] for metadata already parsed as JSON (a REST catalog's LoadTable response).
pub fn metadata_from_value(
    mut value: Value,
) -> std::result::Result<TableMetadata, serde_json::Error> {
    super::reserved::prepare(&mut value, true);
    masked_from_value(value)
}

fn masked_from_value(mut value: Value) -> std::result::Result<TableMetadata, serde_json::Error> {
    match serde_json::from_value::<TableMetadata>(value.clone()) {
        Ok(md) => Ok(md),
        Err(first) => {
            if !mask_metadata(&mut value) {
                return Err(first);
            }
            serde_json::from_value(value)
        }
    }
}

/// Masks every schema of a `metadata.json` tree; true when a field was masked.
fn mask_metadata(md: &mut Value) -> bool {
    let mut masked = false;
    if let Some(schemas) = md.get_mut("schemas").and_then(Value::as_array_mut) {
        for s in schemas {
            masked |= mask_schema(s);
        }
    }
    if let Some(s) = md.get_mut("schema") {
        masked |= mask_schema(s);
    }
    masked
}

/// Masks the fields of one schema (a struct type tree); true when a field was masked.
pub fn mask_schema(schema: &mut Value) -> bool {
    let mut masked = false;
    if let Some(fields) = schema.get_mut("fields").and_then(Value::as_array_mut) {
        for f in fields {
            masked |= mask_field(f);
        }
    }
    masked
}

fn mask_field(field: &mut Value) -> bool {
    match field.get_mut("type") {
        None => return false,
        Some(ty) if ty.get("type").and_then(Value::as_str) == Some("struct") => {
            return mask_schema(ty)
        }
        Some(ty) if parses(ty) => return false,
        Some(_) => {}
    }
    let Some(obj) = field.as_object_mut() else {
        return false;
    };
    let mut kept = Map::new();
    for k in KEPT {
        if let Some(v) = obj.remove(k) {
            kept.insert(k.to_string(), v);
        }
    }
    obj.insert("type".into(), json!("binary"));
    obj.insert(
        "doc".into(),
        Value::String(format!("{MARK}{}", Value::Object(kept))),
    );
    true
}

/// Whether the iceberg crate parses `ty` (a field's type), structs checked field by field by
/// the caller; a list or map parses only when all it holds does.
fn parses(ty: &Value) -> bool {
    match ty.get("type").and_then(Value::as_str) {
        Some("list") => ty.get("element").is_some_and(parses),
        Some("map") => ty.get("key").is_some_and(parses) && ty.get("value").is_some_and(parses),
        Some("struct") => ty
            .get("fields")
            .and_then(Value::as_array)
            .is_some_and(|fs| fs.iter().all(|f| f.get("type").is_some_and(parses))),
        _ => serde_json::from_value::<iceberg::spec::Type>(ty.clone()).is_ok(),
    }
}

/// Restores every masked field of a JSON tree (a `metadata.json`, a schema, a commit's updates)
/// to the form it was read in; true when one was restored.
pub fn unmask_value(v: &mut Value) -> bool {
    match v {
        Value::Object(obj) => {
            let mut restored = false;
            if let Some(kept) = obj
                .get("doc")
                .and_then(Value::as_str)
                .and_then(|d| d.strip_prefix(MARK))
                .and_then(|j| serde_json::from_str::<Map<String, Value>>(j).ok())
            {
                obj.remove("doc");
                obj.remove("initial-default");
                obj.remove("write-default");
                for (k, val) in kept {
                    obj.insert(k, val);
                }
                restored = true;
            }
            for (_, child) in obj.iter_mut() {
                restored |= unmask_value(child);
            }
            restored
        }
        Value::Array(items) => items.iter_mut().fold(false, |r, i| unmask_value(i) | r),
        _ => false,
    }
}

/// The original type of a masked field (`geometry(srid:4326)`, `variant`...), or `None`.
pub fn original_type(doc: Option<&str>) -> Option<String> {
    let kept: Map<String, Value> = serde_json::from_str(doc?.strip_prefix(MARK)?).ok()?;
    Some(type_text(kept.get("type")?))
}

/// A type as users read it: `variant`, `list<variant>`, `map<string, geometry>`.
fn type_text(ty: &Value) -> String {
    let field = |f: Option<&Value>| f.map(type_text).unwrap_or_else(|| "?".into());
    match ty {
        Value::String(s) => s.clone(),
        _ => match ty.get("type").and_then(Value::as_str) {
            Some("list") => format!("list<{}>", field(ty.get("element"))),
            Some("map") => format!("map<{}, {}>", field(ty.get("key")), field(ty.get("value"))),
            Some("struct") => {
                let fields: Vec<String> = ty
                    .get("fields")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|f| {
                        let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
                        format!("{name}: {}", field(f.get("type")))
                    })
                    .collect();
                format!("struct<{}>", fields.join(", "))
            }
            _ => ty.to_string(),
        },
    }
}

/// Every masked column of `schema` (nested ones by their dotted name), with its original type.
pub fn opaque_columns(schema: &Schema) -> Vec<(String, String)> {
    fn walk(prefix: &str, fields: &[NestedFieldRef], out: &mut Vec<(String, String)>) {
        for f in fields {
            let name = if prefix.is_empty() {
                f.name.clone()
            } else {
                format!("{prefix}.{}", f.name)
            };
            if let Some(ty) = original_type(f.doc.as_deref()) {
                out.push((name, ty));
            } else if let iceberg::spec::Type::Struct(s) = f.field_type.as_ref() {
                walk(&name, s.fields(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk("", schema.as_struct().fields(), &mut out);
    out
}

/// Whether any schema of the table holds a masked column.
pub fn is_masked(md: &TableMetadata) -> bool {
    md.schemas_iter().any(|s| !opaque_columns(s).is_empty())
}

/// Refuses `operation` on a table whose `schema` has an opaque column, naming the first one:
/// "refusing to compact ns.t: column geo has type geometry, which floe does not rewrite".
/// `verb` says what floe would have done with it (`read`, `rewrite`, `write`).
pub fn refuse(schema: &Schema, operation: &str, verb: &str) -> Result<()> {
    let cols = opaque_columns(schema);
    let Some((name, ty)) = cols.first() else {
        return Ok(());
    };
    let more = match cols.len() {
        1 => String::new(),
        n => format!(" ({} more column(s) of types floe does not {verb})", n - 1),
    };
    Err(Error::Refused {
        operation: operation.to_string(),
        reason: format!("column {name} has type {ty}, which floe does not {verb}{more}"),
    })
}

/// The bytes of `md` as a `metadata.json`, masked fields restored (see the module docs), a v1
/// table's refs written back ([`super::reserved::restore`]).
pub fn metadata_bytes(md: &TableMetadata) -> std::result::Result<Vec<u8>, serde_json::Error> {
    let refs = super::reserved::carries_refs(md);
    if !is_masked(md) && !refs {
        return serde_json::to_vec(md);
    }
    let mut v = serde_json::to_value(md)?;
    unmask_value(&mut v);
    if refs {
        super::reserved::restore(&mut v, md);
    }
    serde_json::to_vec(&v)
}

/// Reads a manifest as [`ManifestFile::load_manifest`] does, with floe's reader
/// ([`super::manifest_reader`]) when it follows the file and the iceberg crate's otherwise;
/// when the crate cannot parse the schema in the Avro header (a column of a type it does not
/// know), the header's schema is masked and the manifest parsed again. Snapshot ids and
/// sequence numbers are inherited from the manifest list as the spec requires ("Sequence
/// Number Inheritance").
pub async fn load_manifest(mf: &ManifestFile, io: &FileIO) -> iceberg::Result<Manifest> {
    if mf.key_metadata.is_some() {
        // encrypted manifests: the crate decrypts them
        return mf.load_manifest(io).await;
    }
    let bytes = io.new_input(&mf.manifest_path)?.read().await?;
    if let Some((metadata, entries)) = super::manifest_reader::read(&bytes) {
        let ours = inherited(metadata, entries, mf);
        if verify_manifest_reader() {
            let theirs = crate_manifest(&bytes, mf)?;
            if theirs != ours {
                return Err(iceberg::Error::new(
                    iceberg::ErrorKind::DataInvalid,
                    format!(
                        "floe's manifest reader and the iceberg crate's disagree on {}",
                        mf.manifest_path
                    ),
                ));
            }
        }
        return Ok(ours);
    }
    crate_manifest(&bytes, mf)
}

/// `FLOE_VERIFY_MANIFEST_READER=1`: every manifest floe's reader decodes is decoded by the
/// iceberg crate as well, and a difference is an error (CI runs with it).
fn verify_manifest_reader() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("FLOE_VERIFY_MANIFEST_READER").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// The manifest in `bytes` read by the iceberg crate; when it cannot parse the schema in the
/// Avro header (a column of a type it does not know), the header's schema is masked and the
/// manifest parsed again.
fn crate_manifest(bytes: &[u8], mf: &ManifestFile) -> iceberg::Result<Manifest> {
    let first = match Manifest::parse_avro(bytes) {
        Ok(m) => {
            let (entries, metadata) = m.into_parts();
            return Ok(inherited(
                metadata,
                entries.into_iter().map(std::sync::Arc::unwrap_or_clone),
                mf,
            ));
        }
        Err(e) => e,
    };
    if !schema_error(&first) {
        return Err(first);
    }
    let Some(patched) = mask_avro_header_schema(bytes) else {
        return Err(first);
    };
    let (entries, metadata) = Manifest::parse_avro(&patched)?.into_parts();
    Ok(inherited(
        metadata,
        entries.into_iter().map(std::sync::Arc::unwrap_or_clone),
        mf,
    ))
}

/// The manifest of `entries` with snapshot ids and sequence numbers inherited from `mf`.
fn inherited(
    metadata: iceberg::spec::ManifestMetadata,
    entries: impl IntoIterator<Item = iceberg::spec::ManifestEntry>,
    mf: &ManifestFile,
) -> Manifest {
    let entries = entries
        .into_iter()
        .map(|mut e| {
            inherit(&mut e, mf);
            e
        })
        .collect();
    Manifest::new(metadata, entries)
}

fn schema_error(e: &iceberg::Error) -> bool {
    e.to_string().contains("parse schema in manifest metadata")
}

/// Snapshot id and sequence numbers of an entry that has none, from its manifest list entry
/// (spec, "Sequence Number Inheritance" and "Snapshot ID Inheritance").
fn inherit(e: &mut iceberg::spec::ManifestEntry, mf: &ManifestFile) {
    if e.snapshot_id.is_none() {
        e.snapshot_id = Some(mf.added_snapshot_id);
    }
    // Sequence number 0 is the initial one: a v1 manifest's entries inherit it whatever
    // their status.
    let inherits = e.status == ManifestStatus::Added || mf.sequence_number == 0;
    if inherits && e.sequence_number.is_none() {
        e.sequence_number = Some(mf.sequence_number);
    }
    if inherits && e.file_sequence_number.is_none() {
        e.file_sequence_number = Some(mf.sequence_number);
    }
}

/// The Avro object container file `bytes` with the JSON schema under the `schema` key of its
/// header metadata masked ([`mask_schema`]); `None` when it is not such a file or nothing was
/// masked.
///
/// Written by hand (on [`super::avro`]'s header reader and writer): the header is the only
/// part that changes (the Avro schema of the entries, `avro.schema`, and every data block stay
/// byte for byte), and the Avro crates rewrite whole files.
pub fn mask_avro_header_schema(bytes: &[u8]) -> Option<Vec<u8>> {
    let (mut pairs, sync_at) = super::avro::header_metadata(bytes)?;
    let (_, schema) = pairs.iter_mut().find(|(k, _)| *k == "schema")?;
    let mut json: Value = serde_json::from_slice(schema).ok()?;
    if !mask_schema(&mut json) {
        return None;
    }
    let masked = serde_json::to_vec(&json).ok()?;
    *schema = &masked;
    let mut out = Vec::with_capacity(bytes.len() + 256);
    super::avro::put_header_metadata(&mut out, &pairs);
    out.extend_from_slice(&bytes[sync_at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::avro::put_long;

    fn schema_json() -> Value {
        json!({
        "type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": true, "type": "long"},
            {"id": 2, "name": "v", "required": false, "type": "variant", "doc": "events"},
            {"id": 3, "name": "geo", "required": false, "type": "geometry(srid:4326)"},
            {"id": 4, "name": "u", "required": false, "type": "unknown",
             "initial-default": null},
            {"id": 5, "name": "ts", "required": false, "type": "timestamp_ns"},
            {"id": 6, "name": "s", "required": false, "type": {"type": "struct", "fields": [
                {"id": 7, "name": "g", "required": false, "type": "geography(srid:4326, karney)"},
                {"id": 8, "name": "n", "required": false, "type": "int"}]}},
            {"id": 9, "name": "l", "required": false, "type": {"type": "list",
                "element-id": 10, "element": "variant", "element-required": false}},
        ]})
    }

    #[test]
    fn masking_names_each_opaque_column_and_restores_the_json_exactly() {
        let original = schema_json();
        let mut masked = original.clone();
        assert!(mask_schema(&mut masked));
        let schema: Schema = serde_json::from_value(masked.clone()).expect("masked parses");
        assert_eq!(
            opaque_columns(&schema),
            vec![
                ("v".to_string(), "variant".to_string()),
                ("geo".to_string(), "geometry(srid:4326)".to_string()),
                ("u".to_string(), "unknown".to_string()),
                (
                    "s.g".to_string(),
                    "geography(srid:4326, karney)".to_string()
                ),
                ("l".to_string(), "list<variant>".to_string()),
            ]
        );
        // Through the iceberg crate's structures and back: the same JSON as read.
        let mut back = serde_json::to_value(&schema).unwrap();
        assert!(unmask_value(&mut back));
        assert_eq!(back, original);
        let err = refuse(&schema, "compact ns.t", "rewrite")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "refusing to compact ns.t: column v has type variant, which floe does not rewrite \
             (4 more column(s) of types floe does not rewrite)"
        );
    }

    #[test]
    fn a_schema_the_crate_parses_is_left_alone() {
        let mut plain = json!({"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "ts", "required": false, "type": "timestamptz_ns"},
            {"id": 2, "name": "d", "required": false, "type": "decimal(10, 2)"}]});
        let before = plain.clone();
        assert!(!mask_schema(&mut plain));
        assert_eq!(plain, before);
    }

    fn ocf(meta: &[(&str, &[u8])], rest: &[u8]) -> Vec<u8> {
        let mut out = b"Obj\x01".to_vec();
        // One block with a negative count and its byte size, as Java writes it.
        let mut block = Vec::new();
        for (k, v) in meta {
            put_long(&mut block, k.len() as i64);
            block.extend_from_slice(k.as_bytes());
            put_long(&mut block, v.len() as i64);
            block.extend_from_slice(v);
        }
        put_long(&mut out, -(meta.len() as i64));
        put_long(&mut out, block.len() as i64);
        out.extend_from_slice(&block);
        put_long(&mut out, 0);
        out.extend_from_slice(rest);
        out
    }

    #[test]
    fn the_avro_header_schema_is_masked_and_everything_after_it_kept() {
        let schema = serde_json::to_vec(&schema_json()).unwrap();
        let rest: Vec<u8> = (0..=255u8).collect();
        let file = ocf(
            &[
                ("avro.schema", b"{}"),
                ("schema", &schema),
                ("format-version", b"3"),
            ],
            &rest,
        );
        let patched = mask_avro_header_schema(&file).expect("masked");
        assert!(patched.ends_with(&rest));
        let mut r = super::super::avro::Cursor {
            bytes: &patched,
            at: 4,
        };
        assert_eq!(r.long(), Some(3));
        let mut seen = Vec::new();
        for _ in 0..3 {
            let k = String::from_utf8(r.bytes().unwrap().to_vec()).unwrap();
            let v = r.bytes().unwrap().to_vec();
            seen.push((k, v));
        }
        assert_eq!(r.long(), Some(0));
        assert_eq!(&patched[r.at..], &rest[..]);
        assert_eq!(seen[0], ("avro.schema".to_string(), b"{}".to_vec()));
        assert_eq!(seen[2], ("format-version".to_string(), b"3".to_vec()));
        let masked: Schema = serde_json::from_slice(&seen[1].1).expect("parses");
        assert_eq!(opaque_columns(&masked).len(), 5);
        // Nothing to mask, or not an Avro file: None.
        let plain = ocf(&[("schema", br#"{"type":"struct","fields":[]}"#)], &rest);
        assert!(mask_avro_header_schema(&plain).is_none());
        assert!(mask_avro_header_schema(b"PAR1").is_none());
    }
}
