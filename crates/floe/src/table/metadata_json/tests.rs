//! The splice writes what the metadata builder writes for the whole table: checked value for
//! value on v1, v2 and v3 metadata, compact and pretty-printed (as Java writes it), with tags,
//! branches, opaque columns and no snapshot at all.

use std::collections::HashMap;

use bytes::Bytes;
use iceberg::spec::{
    Snapshot, SnapshotReference, SnapshotRetention, TableMetadata, TableMetadataBuilder,
    MAIN_BRANCH,
};
use iceberg::TableUpdate;
use serde_json::{json, Value};

use super::{concat, splice, spliceable, split, History};
use crate::table::opaque;

const BASE_MS: i64 = 1_700_000_000_000;
const LOCATION: &str =
    "/warehouse/ns/t/metadata/00007-0b7d6b9e-7d2e-4d0f-9a5b-000000000007.metadata.json";

fn snapshot_id(i: i64) -> i64 {
    // Ids that share digits with each other, as random ids may.
    4_000_000_000_000 + i * 1_000_003
}

/// A `metadata.json` of format `version` with `n` snapshots on main (the first tagged, the
/// second heading a branch), `variant` adding a v3 column of a type the iceberg crate cannot
/// parse.
fn doc(version: u8, n: i64, variant: bool) -> Value {
    let mut fields = vec![
        json!({"id": 1, "name": "id", "required": true, "type": "long"}),
        json!({"id": 2, "name": "name", "required": false, "type": "string"}),
    ];
    if variant {
        fields.push(json!({"id": 3, "name": "v", "required": false, "type": "variant"}));
    }
    let schema = json!({"type": "struct", "schema-id": 0, "fields": fields});
    let snapshots: Vec<Value> = (1..=n)
        .map(|i| {
            let mut s = json!({
                "snapshot-id": snapshot_id(i),
                "timestamp-ms": BASE_MS + i * 1000,
                "manifest-list": format!("/warehouse/ns/t/metadata/snap-{i}.avro"),
                "summary": {"operation": "append", "added-data-files": "1",
                            "total-records": (i * 10).to_string(), "floe.writer-id": "w"},
                "schema-id": 0,
            });
            if i > 1 {
                s["parent-snapshot-id"] = json!(snapshot_id(i - 1));
            }
            if version >= 2 {
                s["sequence-number"] = json!(i);
            }
            if version >= 3 {
                s["first-row-id"] = json!((i - 1) * 10);
                s["added-rows"] = json!(10);
            }
            s
        })
        .collect();
    let log: Vec<Value> = (1..=n)
        .map(|i| json!({"timestamp-ms": BASE_MS + i * 1000, "snapshot-id": snapshot_id(i)}))
        .collect();
    let mut md = json!({
        "format-version": version,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": "/warehouse/ns/t",
        "last-updated-ms": BASE_MS + n * 1000,
        "last-column-id": fields.len(),
        "properties": {"write.metadata.previous-versions-max": "3", "owner": "floe"},
        "current-snapshot-id": if n > 0 { json!(snapshot_id(n)) } else { json!(-1) },
        "snapshots": snapshots,
        "snapshot-log": log,
        "metadata-log": (1..=3).map(|i| json!({
            "timestamp-ms": BASE_MS + i,
            "metadata-file": format!("/warehouse/ns/t/metadata/0000{i}-x.metadata.json"),
        })).collect::<Vec<_>>(),
    });
    if version == 1 {
        md["schema"] = schema;
        md["partition-spec"] = json!([]);
    } else {
        md["last-sequence-number"] = json!(n);
        md["current-schema-id"] = json!(0);
        md["schemas"] = json!([schema]);
        md["default-spec-id"] = json!(0);
        md["partition-specs"] = json!([{"spec-id": 0, "fields": []}]);
        md["last-partition-id"] = json!(999);
        md["default-sort-order-id"] = json!(0);
        md["sort-orders"] = json!([{"order-id": 0, "fields": []}]);
        let mut refs = serde_json::Map::new();
        if n > 0 {
            refs.insert(
                "main".into(),
                json!({"snapshot-id": snapshot_id(n), "type": "branch", "min-snapshots-to-keep": 4}),
            );
        }
        if n > 2 {
            refs.insert(
                "v1".into(),
                json!({"snapshot-id": snapshot_id(1), "type": "tag"}),
            );
            refs.insert(
                "audit".into(),
                json!({"snapshot-id": snapshot_id(2), "type": "branch"}),
            );
        }
        md["refs"] = Value::Object(refs);
    }
    if version >= 3 {
        md["next-row-id"] = json!(n * 10);
    }
    md
}

fn bytes_of(v: &Value, pretty: bool) -> Bytes {
    Bytes::from(if pretty {
        serde_json::to_vec_pretty(v).unwrap()
    } else {
        serde_json::to_vec(v).unwrap()
    })
}

/// The updates of an append of a snapshot on `md` (and a property change).
fn append_updates(md: &TableMetadata, k: i64) -> Vec<TableUpdate> {
    let parent = md.current_snapshot().map(|s| s.snapshot_id());
    let seq = match md.format_version() {
        iceberg::spec::FormatVersion::V1 => 0,
        _ => md.last_sequence_number() + 1,
    };
    let snapshot = Snapshot::builder()
        .with_snapshot_id(9_000_000 + k)
        .with_parent_snapshot_id(parent)
        .with_sequence_number(seq)
        .with_timestamp_ms(md.last_updated_ms() + 500)
        .with_manifest_list(format!("/warehouse/ns/t/metadata/snap-new-{k}.avro"))
        .with_summary(iceberg::spec::Summary {
            operation: iceberg::spec::Operation::Append,
            additional_properties: HashMap::from([("added-records".into(), "10".into())]),
        })
        .with_schema_id(md.current_schema_id());
    let snapshot = if md.format_version() == iceberg::spec::FormatVersion::V3 {
        snapshot.with_row_range(md.next_row_id(), 10).build()
    } else {
        snapshot.build()
    };
    let mut updates = TableMetadataBuilder::new_from_metadata(md.clone(), None)
        .set_branch_snapshot(snapshot, MAIN_BRANCH)
        .unwrap()
        .build()
        .unwrap()
        .changes;
    updates.push(TableUpdate::SetProperties {
        updates: HashMap::from([("floe.commit".into(), k.to_string())]),
    });
    updates
}

fn apply(md: &TableMetadata, location: &str, updates: &[TableUpdate]) -> TableMetadata {
    let mut b = TableMetadataBuilder::new_from_metadata(md.clone(), Some(location.into()));
    for u in updates {
        b = u.clone().apply(b).unwrap();
    }
    b.build().unwrap().metadata
}

/// The JSON value of a metadata file, snapshots ordered by id (the whole table's serializer
/// lists them in hash order).
fn canonical(bytes: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(bytes).unwrap();
    if let Some(s) = v.get_mut("snapshots").and_then(Value::as_array_mut) {
        s.sort_by_key(|x| x["snapshot-id"].as_i64());
    }
    v
}

/// Three commits in a row: each written by the builder over the whole table and by the splice
/// over the head, the next split from the spliced file and, from the second on, also spliced
/// straight from the history the previous splice returned.
fn check(version: u8, n: i64, variant: bool, pretty: bool) {
    let what = format!("v{version}, {n} snapshots, variant {variant}, pretty {pretty}");
    let mut bytes = bytes_of(&doc(version, n, variant), pretty);
    let mut location = LOCATION.to_string();
    let mut carried: Option<(TableMetadata, History)> = None;
    for k in 0..3 {
        let full = opaque::parse_metadata(&bytes).unwrap();
        let parts = split(bytes.clone()).unwrap_or_else(|| panic!("{what}: no split"));
        let heads: Vec<i64> = parts.head.snapshots().map(|s| s.snapshot_id()).collect();
        // The current snapshot, and from v2 on the tag and branch of a table of 3 or more.
        let current = i64::from(n + k > 0);
        let want_heads = current + if version > 1 && n > 2 { 2 } else { 0 };
        assert_eq!(heads.len() as i64, want_heads, "{what}: head {heads:?}");
        assert!(parts.head.history().is_empty(), "{what}");
        assert_eq!(parts.head.current_snapshot_id(), full.current_snapshot_id());
        let mut props = parts.head.properties().clone();
        assert!(props.remove(super::HEAD).is_some() && super::is_head(&parts.head));
        assert_eq!(&props, full.properties());
        assert!(!super::is_head(&full));
        assert_eq!(parts.head.metadata_log(), full.metadata_log());

        let updates = append_updates(&full, k);
        assert!(spliceable(&updates), "{what}");
        let whole = opaque::metadata_bytes(&apply(&full, &location, &updates)).unwrap();
        let built = apply(&parts.head, &location, &updates);
        let (pieces, next) = splice(&parts.history, &parts.head, &built).unwrap();
        let spliced = Bytes::from(concat(&pieces));
        assert_eq!(canonical(&spliced), canonical(&whole), "{what}, commit {k}");
        assert_eq!(
            opaque::parse_metadata(&spliced).unwrap(),
            opaque::parse_metadata(&whole).unwrap(),
            "{what}, commit {k}"
        );
        if variant {
            let v = canonical(&spliced);
            assert_eq!(v["schemas"][0]["fields"][2]["type"], "variant", "{what}");
        }
        // New snapshots go after the history, in commit order.
        let listed: Value = serde_json::from_slice(&spliced).unwrap();
        let ids: Vec<i64> = listed["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["snapshot-id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids.last(), Some(&(9_000_000 + k)), "{what}");
        if let Some((prev_head, prev_history)) = &carried {
            // Committing on the head a previous splice returned writes the same file.
            let built = apply(prev_head, &location, &updates);
            let (again, _) = splice(prev_history, prev_head, &built).unwrap();
            let again = concat(&again);
            assert_eq!(canonical(&again), canonical(&spliced), "{what}, commit {k}");
        }
        // The head a splice returns is the head of the file it wrote.
        let resplit = split(spliced.clone()).unwrap();
        assert_eq!(next.head, resplit.head, "{what}, commit {k}");
        carried = Some((next.head, next.history));
        bytes = spliced;
        location = format!("/warehouse/ns/t/metadata/0000{}-next.metadata.json", 8 + k);
    }
}

#[test]
fn splicing_writes_what_the_builder_writes_for_the_whole_table() {
    for version in [1, 2, 3] {
        for n in [0, 1, 2, 7] {
            for pretty in [false, true] {
                check(version, n, false, pretty);
            }
        }
    }
}

#[test]
fn opaque_columns_are_restored_in_a_spliced_file() {
    check(3, 5, true, false);
    check(3, 5, true, true);
}

#[test]
fn a_head_keeps_only_the_snapshots_refs_point_to() {
    let split = split(bytes_of(&doc(2, 50, false), true)).unwrap();
    let mut ids: Vec<i64> = split.head.snapshots().map(|s| s.snapshot_id()).collect();
    ids.sort();
    assert_eq!(ids, vec![snapshot_id(1), snapshot_id(2), snapshot_id(50)]);
    assert_eq!(split.head.last_sequence_number(), 50);
    // Every snapshot's text is in the history, none parsed.
    for i in 1..=50 {
        assert!(split.history.may_hold_id(snapshot_id(i)), "{i}");
    }
}

#[test]
fn history_ids_are_matched_as_whole_numbers() {
    let split = split(bytes_of(&doc(2, 5, false), false)).unwrap();
    let id = snapshot_id(3);
    assert!(split.history.may_hold_id(id));
    // A prefix or an extension of an id in the history is another number.
    assert!(!split.history.may_hold_id(id / 10));
    assert!(!split.history.may_hold_id(id * 10 + 1));
    assert!(!split.history.may_hold_id(12_345));
}

#[test]
fn a_file_whose_refs_name_a_missing_snapshot_is_not_split() {
    let mut v = doc(2, 4, false);
    v["refs"]["gone"] = json!({"snapshot-id": 77, "type": "tag"});
    assert!(split(bytes_of(&v, false)).is_none());
    assert!(split(Bytes::from_static(b"[1, 2]")).is_none());
    assert!(split(Bytes::from_static(b"{\"format-version\": 2")).is_none());
}

#[test]
fn updates_that_remove_history_are_not_spliced() {
    let bytes = bytes_of(&doc(2, 6, false), false);
    let split = split(bytes.clone()).unwrap();
    let remove = vec![TableUpdate::RemoveSnapshots {
        snapshot_ids: vec![snapshot_id(1)],
    }];
    assert!(!spliceable(&remove));
    assert!(!spliceable(&[TableUpdate::RemoveSnapshotRef {
        ref_name: "v1".into()
    }]));
    // Removing history from a head fails in the builder (its snapshot log is empty), and a
    // built head that lost a snapshot of its base is refused by the splice.
    let mut b = TableMetadataBuilder::new_from_metadata(split.head.clone(), None);
    for u in remove.clone() {
        b = u.apply(b).unwrap();
    }
    assert!(b.build().is_err());
    let mut lost = split.head.clone();
    let b = TableMetadataBuilder::new_from_metadata(lost.clone(), None)
        .remove_snapshots(&[snapshot_id(2)]);
    if let Ok(r) = b.build() {
        lost = r.metadata;
        assert!(splice(&split.history, &split.head, &lost).is_err());
    }
    // Moving a tag to a snapshot the head holds is a ref update: spliced.
    let tag = vec![TableUpdate::SetSnapshotRef {
        ref_name: "v2".into(),
        reference: SnapshotReference::new(
            snapshot_id(6),
            SnapshotRetention::Tag {
                max_ref_age_ms: None,
            },
        ),
    }];
    assert!(spliceable(&tag) && super::splices_onto(&split.head, &tag));
    // A tag on a snapshot the head left out needs the whole table.
    let old_tag = vec![TableUpdate::SetSnapshotRef {
        ref_name: "v0".into(),
        reference: SnapshotReference::new(
            snapshot_id(4),
            SnapshotRetention::Tag {
                max_ref_age_ms: None,
            },
        ),
    }];
    assert!(spliceable(&old_tag) && !super::splices_onto(&split.head, &old_tag));
    let full = opaque::parse_metadata(&bytes).unwrap();
    let whole = opaque::metadata_bytes(&apply(&full, LOCATION, &tag)).unwrap();
    let built = apply(&split.head, LOCATION, &tag);
    let (spliced, _) = splice(&split.history, &split.head, &built).unwrap();
    let spliced = concat(&spliced);
    let (mut a, mut b) = (canonical(&spliced), canonical(&whole));
    // No snapshot was added: each build stamps its own time.
    a["last-updated-ms"] = Value::Null;
    b["last-updated-ms"] = Value::Null;
    assert_eq!(a, b);
}

#[test]
fn a_long_run_of_commits_on_carried_heads_writes_what_the_builder_writes() {
    // More commits than history runs are kept apart: the runs get merged on the way.
    let bytes = bytes_of(&doc(2, 6, false), true);
    let mut full = opaque::parse_metadata(&bytes).unwrap();
    let parts = split(bytes).unwrap();
    let (mut head, mut history) = (parts.head, parts.history);
    for k in 0..(super::MAX_RUNS as i64 + 8) {
        let location = format!("/warehouse/ns/t/metadata/{k:05}-x.metadata.json");
        let updates = append_updates(&full, k);
        full = apply(&full, &location, &updates);
        let whole = opaque::metadata_bytes(&full).unwrap();
        let built = apply(&head, &location, &updates);
        let (pieces, next) = splice(&history, &head, &built).unwrap();
        assert_eq!(canonical(&concat(&pieces)), canonical(&whole), "commit {k}");
        assert!(
            next.history.snapshots.len() <= super::MAX_RUNS,
            "commit {k}"
        );
        assert_eq!(next.head.snapshots().count(), 3, "commit {k}");
        (head, history) = (next.head, next.history);
    }
    assert!(history.may_hold_id(snapshot_id(1)) && history.may_hold_id(9_000_000));
}
