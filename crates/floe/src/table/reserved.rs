//! Reserved properties: the `floe.internal.*` keys floe keeps in a table's metadata *in memory*
//! and never writes, and format v1's refs, which travel among them.
//!
//! - **Another engine's keys are ignored.** A `floe.internal.*` property in a `metadata.json`
//!   was not written by floe (floe strips its own before writing): [`prepare`] drops every one
//!   when a file is read, so a key another engine set can neither mark a table as a head of
//!   history ([`super::metadata_json::HEAD`]) nor forge refs. `table set-property` refuses
//!   them by name (`crate::base::properties::Rule::Reserved`).
//! - **Format v1 keeps its refs.** The table spec lets v1 metadata carry `refs` ("Table
//!   Metadata Fields": `refs` is optional in v1, required in v2), and Iceberg's Java
//!   implementation reads and writes them on v1 as on v2. The iceberg crate drops them when it
//!   parses a v1 file and never writes them, so a tag made by Spark would vanish at floe's next
//!   commit and its snapshot would expire. [`prepare`] moves a v1 file's `refs` into the
//!   property [`V1_REFS`] before the crate parses it; [`refs_of`] reads them back (`main` is
//!   always the current snapshot, which the crate tracks); [`committed`] keeps the property in
//!   step with a commit's ref updates; and [`restore`] turns it back into the file's `refs` when
//!   the metadata is written.

use std::collections::HashMap;

use iceberg::spec::{
    FormatVersion, SnapshotReference, SnapshotRetention, TableMetadata, MAIN_BRANCH,
};
use iceberg::TableUpdate;
use serde_json::Value;

/// The prefix of the keys floe reserves for itself.
pub use crate::base::properties::RESERVED_PREFIX;

/// The property that holds a v1 table's refs (the `refs` object of its file, as JSON text)
/// while the metadata is in memory.
pub const V1_REFS: &str = "floe.internal.v1-refs";

/// True when the metadata read from `bytes` needs [`prepare`]: it holds a reserved key to
/// `strip` (another engine's), or it is v1 and its file names refs. A head floe marked itself
/// (`strip` false) takes the direct path unless it is v1 with refs.
pub fn needs_prepare(md: &TableMetadata, bytes: &[u8], strip: bool) -> bool {
    (strip
        && md
            .properties()
            .keys()
            .any(|k| k.starts_with(RESERVED_PREFIX)))
        || (md.format_version() == FormatVersion::V1
            && memchr::memmem::find(bytes, b"\"refs\"").is_some())
}

/// Prepares a `metadata.json` tree for the iceberg crate's parser: drops every reserved
/// property it holds (when `strip`: floe's own marks are set after this), and moves a v1
/// file's `refs` into [`V1_REFS`].
pub fn prepare(md: &mut Value, strip: bool) {
    let v1 = md.get("format-version").and_then(Value::as_i64) == Some(1);
    let Some(obj) = md.as_object_mut() else {
        return;
    };
    if strip {
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.retain(|k, _| !k.starts_with(RESERVED_PREFIX));
        }
    }
    if !v1 {
        return;
    }
    let refs = match obj.remove("refs") {
        Some(Value::Object(refs)) if !refs.is_empty() => Value::Object(refs),
        _ => return,
    };
    let props = obj
        .entry("properties")
        .or_insert_with(|| Value::Object(Default::default()));
    if props.is_null() {
        *props = Value::Object(Default::default());
    }
    if let Some(props) = props.as_object_mut() {
        props.insert(V1_REFS.to_string(), Value::String(refs.to_string()));
    }
}

/// True when writing `md` needs [`restore`] (a v1 table that carries refs).
pub fn carries_refs(md: &TableMetadata) -> bool {
    md.properties().contains_key(V1_REFS)
}

/// The refs a v1 table carries in [`V1_REFS`], `main` set to the current snapshot (the crate
/// moves the current snapshot, not the property); `None` when it carries none.
pub fn v1_refs(md: &TableMetadata) -> Option<Result<HashMap<String, SnapshotReference>, String>> {
    let text = md.properties().get(V1_REFS)?;
    Some(
        serde_json::from_str::<HashMap<String, SnapshotReference>>(text)
            .map(|mut refs| {
                with_main(&mut refs, md.current_snapshot_id());
                refs
            })
            .map_err(|e| format!("bad refs: {e}")),
    )
}

fn with_main(refs: &mut HashMap<String, SnapshotReference>, current: Option<i64>) {
    let old = refs.remove(MAIN_BRANCH);
    if let Some(id) = current {
        let retention = old
            .map(|r| r.retention)
            .filter(|r| matches!(r, SnapshotRetention::Branch { .. }))
            .unwrap_or_else(|| SnapshotRetention::branch(None, None, None));
        refs.insert(
            MAIN_BRANCH.to_string(),
            SnapshotReference::new(id, retention),
        );
    }
}

/// Writes a tree serialized from `md` back into the file's form: the reserved properties
/// removed and, on v1, [`V1_REFS`] turned back into `refs` (main at the current snapshot).
pub fn restore(tree: &mut Value, md: &TableMetadata) {
    let refs = match v1_refs(md) {
        Some(Ok(refs)) => Some(refs),
        _ => None,
    };
    let Some(obj) = tree.as_object_mut() else {
        return;
    };
    if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
        props.retain(|k, _| !k.starts_with(RESERVED_PREFIX));
    }
    if let Some(refs) = refs.filter(|r| !r.is_empty()) {
        if let Ok(v) = serde_json::to_value(&refs) {
            obj.insert("refs".into(), v);
        }
    }
}

/// A ref requirement checked against a v1 table's refs (the crate's own check sees only
/// `main` there); `None` for any other requirement or format, which the crate checks.
pub fn check_v1_ref(
    md: &TableMetadata,
    req: &iceberg::TableRequirement,
) -> Option<Result<(), String>> {
    let iceberg::TableRequirement::RefSnapshotIdMatch { r#ref, snapshot_id } = req else {
        return None;
    };
    if md.format_version() != FormatVersion::V1 || r#ref == MAIN_BRANCH {
        return None;
    }
    let found = match v1_refs(md) {
        Some(Ok(refs)) => refs.get(r#ref).map(|r| r.snapshot_id),
        Some(Err(e)) => return Some(Err(e)),
        None => None,
    };
    Some(match (snapshot_id, found) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(format!(
            "Requirement failed: Branch or tag `{ref}` already exists"
        )),
        (Some(_), None) => Err(format!(
            "Requirement failed: Branch or tag `{ref}` not found"
        )),
        (Some(want), Some(got)) if *want == got => Ok(()),
        (Some(_), Some(_)) => Err(format!(
            "Requirement failed: Branch or tag `{ref}`'s snapshot has changed"
        )),
    })
}

/// The properties a commit of `updates` on the v1 table `md` must also set so that its refs
/// stay in step ([`V1_REFS`]); `None` when the table is not v1 or no ref changes.
pub fn committed(md: &TableMetadata, updates: &[TableUpdate]) -> Option<HashMap<String, String>> {
    if md.format_version() != FormatVersion::V1 {
        return None;
    }
    let touches = updates.iter().any(|u| match u {
        TableUpdate::SetSnapshotRef { ref_name, .. }
        | TableUpdate::RemoveSnapshotRef { ref_name } => ref_name != MAIN_BRANCH,
        TableUpdate::RemoveSnapshots { .. } => true,
        _ => false,
    });
    if !touches {
        return None;
    }
    let carried = v1_refs(md);
    if carried.is_none()
        && !updates.iter().any(|u| matches!(u, TableUpdate::SetSnapshotRef { ref_name, .. } if ref_name != MAIN_BRANCH))
    {
        return None;
    }
    let mut refs = match carried {
        Some(Ok(refs)) => refs,
        _ => HashMap::new(),
    };
    for u in updates {
        match u {
            TableUpdate::SetSnapshotRef {
                ref_name,
                reference,
            } => {
                refs.insert(ref_name.clone(), reference.clone());
            }
            TableUpdate::RemoveSnapshotRef { ref_name } => {
                refs.remove(ref_name);
            }
            // A ref never outlives its snapshot (the crate's builder drops such refs too).
            TableUpdate::RemoveSnapshots { snapshot_ids } => {
                refs.retain(|_, r| !snapshot_ids.contains(&r.snapshot_id));
            }
            _ => {}
        }
    }
    // main follows the current snapshot when written; kept here for its retention only.
    let text = serde_json::to_string(&refs).ok()?;
    Some(HashMap::from([(V1_REFS.to_string(), text)]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn another_engines_reserved_keys_are_dropped_and_v1_refs_move_into_the_property() {
        let mut v = json!({
            "format-version": 1,
            "properties": {"floe.internal.head-of-history": "true", "a": "b"},
            "refs": {"keep": {"snapshot-id": 7, "type": "tag"}}
        });
        prepare(&mut v, true);
        let props = v["properties"].as_object().unwrap();
        assert_eq!(props.get("a"), Some(&json!("b")));
        assert!(!props.contains_key("floe.internal.head-of-history"));
        let refs: Value = serde_json::from_str(props[V1_REFS].as_str().unwrap()).unwrap();
        assert_eq!(refs["keep"]["snapshot-id"], 7);
        assert!(v.get("refs").is_none());

        // v2 keeps its refs where they are; a forged v1-refs key is dropped.
        let mut v = json!({
            "format-version": 2,
            "properties": {"floe.internal.v1-refs": "{}"},
            "refs": {"main": {"snapshot-id": 7, "type": "branch"}}
        });
        prepare(&mut v, true);
        assert!(v["properties"].as_object().unwrap().is_empty());
        assert_eq!(v["refs"]["main"]["snapshot-id"], 7);
    }
}
