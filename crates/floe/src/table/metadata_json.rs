//! A `metadata.json` read and written without parsing its history: commit latency that does
//! not grow with the number of snapshots.
//!
//! The spec keeps every snapshot of a table, and the log of the current snapshot, in its
//! `metadata.json` (table spec, "Table Metadata Fields": `snapshots`, `snapshot-log`). Parsing
//! them into the iceberg crate's structures, and serializing them again, costs time in
//! proportion to the history: 130 ms per commit at 10,000 snapshots. An append needs none of
//! them but its parent. So the file is split in two:
//!
//! - **the head** ([`split`]): every field, with `snapshots` cut down to the snapshots a ref
//!   points to (the current one, branch and tag heads) and `snapshot-log` empty, parsed as a
//!   [`TableMetadata`]. A commit's updates apply to it as to the whole table: the metadata
//!   builder checks requirements, adds the snapshot, moves the ref, trims the metadata log;
//! - **the history** ([`History`]): the elements of `snapshots` and `snapshot-log` as the text
//!   read, never parsed.
//!
//! [`splice`] writes the next `metadata.json`: the built head's fields, and the two arrays as
//! the history's text followed by what the commit added. What the builder would have written
//! for the whole table and what the splice writes are the same JSON (one test compares them
//! value for value), except that snapshots keep the order they were read in.
//!
//! Only updates that add to the history and remove nothing from it can be spliced
//! ([`spliceable`]: add a snapshot, set a ref, set or remove properties); any other commit
//! takes the whole table.
//!
//! A head is not a table anything may walk the history of. It carries the property [`HEAD`]
//! (never written: the splice drops it), so [`is_head`] tells it from a whole table anywhere:
//! [`crate::table::write_metadata`] refuses to write one as a whole table, and validation fails
//! closed on one (an ancestor it lacks is a starting snapshot gone). Heads are loaded only for
//! appends ([`crate::catalog::Catalog::load_table_head`]).

use std::collections::HashSet;
use std::fmt;

use bytes::Bytes;
use iceberg::spec::TableMetadata;
use iceberg::TableUpdate;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::opaque;

/// The elements of a `metadata.json`'s `snapshots` and `snapshot-log` arrays, as the text read:
/// runs of comma-separated elements, each a slice of the file it came from or of what a commit
/// added (nothing is copied; runs are merged once there are many).
#[derive(Clone, Default)]
pub struct History {
    snapshots: Vec<Bytes>,
    log: Vec<Bytes>,
}

/// Runs of a history array kept apart at most; beyond, they are merged into one.
const MAX_RUNS: usize = 32;

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("History")
            .field("snapshot_runs", &self.snapshots.len())
            .field("bytes", &self.len())
            .finish()
    }
}

impl History {
    /// Bytes of text the history holds (what a cache of it weighs).
    pub fn len(&self) -> usize {
        self.snapshots.iter().chain(&self.log).map(Bytes::len).sum()
    }

    /// True when the table has no history (no snapshot was ever committed, or all expired).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the history's text holds `id` as a number: a snapshot id the head does not
    /// know may still be an old snapshot's. The digits alone are matched (any serializer's
    /// spacing), so a rare false positive only makes the caller pick another id.
    pub fn may_hold_id(&self, id: i64) -> bool {
        let digits = id.to_string();
        let finder = memchr::memmem::Finder::new(digits.as_bytes());
        self.snapshots.iter().any(|text| {
            finder.find_iter(text).any(|at| {
                let before = at.checked_sub(1).map(|i| text[i]);
                let after = text.get(at + digits.len()).copied();
                !before.is_some_and(|b| b.is_ascii_digit() || b == b'-')
                    && !after.is_some_and(|b| b.is_ascii_digit())
            })
        })
    }
}

/// A run list with `more` appended (when not empty), merged into one run past [`MAX_RUNS`].
fn extended(runs: &[Bytes], more: Bytes) -> Vec<Bytes> {
    let mut out: Vec<Bytes> = runs.to_vec();
    if !more.is_empty() {
        out.push(more);
    }
    if out.len() > MAX_RUNS {
        let mut one = Vec::with_capacity(out.iter().map(|r| r.len() + 1).sum());
        for (i, r) in out.iter().enumerate() {
            if i > 0 {
                one.push(b',');
            }
            one.extend_from_slice(r);
        }
        out = vec![Bytes::from(one)];
    }
    out
}

/// A `metadata.json` split into its parsed head and its unparsed history.
#[derive(Debug)]
pub struct Split {
    pub head: TableMetadata,
    pub history: History,
}

/// The top-level members of a JSON object, values unparsed, in file order; the history arrays
/// are split into their elements in the same pass.
struct Members<'a> {
    members: Vec<(String, &'a RawValue)>,
    snapshots: Vec<&'a RawValue>,
    log: Vec<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table metadata object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut out = Members {
                    members: Vec::new(),
                    snapshots: Vec::new(),
                    log: Vec::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        SNAPSHOTS => {
                            out.snapshots = map.next_value::<Option<_>>()?.unwrap_or_default()
                        }
                        LOG => out.log = map.next_value::<Option<_>>()?.unwrap_or_default(),
                        _ => {
                            let value: &'de RawValue = map.next_value()?;
                            out.members.push((key, value));
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'a> Members<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }

    /// Starts an object with every member but the history and the properties.
    fn write_head(&self) -> serde_json::Result<Object> {
        let mut o = Object::default();
        o.out.push(b'{');
        for (k, v) in &self.members {
            if k != PROPERTIES {
                o.member(k)?.extend_from_slice(v.get().as_bytes());
            }
        }
        Ok(o)
    }
}

/// A JSON object written member by member, as pieces: what it writes itself, and runs of
/// history text between them (not copied).
#[derive(Default)]
struct Object {
    pieces: Vec<Bytes>,
    out: Vec<u8>,
    members: usize,
}

impl Object {
    /// Writes `"key":` (after a comma when needed); the caller writes the value.
    fn member(&mut self, key: &str) -> serde_json::Result<&mut Vec<u8>> {
        if self.members > 0 {
            self.out.push(b',');
        }
        self.members += 1;
        serde_json::to_writer(&mut self.out, key)?;
        self.out.push(b':');
        Ok(&mut self.out)
    }

    /// Writes `"key":[runs...,new...]` and returns `new` as one run; writes nothing when there
    /// are no elements (as the iceberg crate leaves empty arrays out).
    fn array(&mut self, key: &str, runs: &[Bytes], new: &[&RawValue]) -> serde_json::Result<Bytes> {
        let mut added = Vec::new();
        for (i, raw) in new.iter().enumerate() {
            if i > 0 {
                added.push(b',');
            }
            added.extend_from_slice(raw.get().as_bytes());
        }
        let added = Bytes::from(added);
        if runs.is_empty() && added.is_empty() {
            return Ok(added);
        }
        self.member(key)?.push(b'[');
        let mut first = true;
        for run in runs.iter().chain(std::iter::once(&added)) {
            if run.is_empty() {
                continue;
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            self.pieces.push(Bytes::from(std::mem::take(&mut self.out)));
            self.pieces.push(run.clone());
        }
        self.out.push(b']');
        Ok(added)
    }

    fn finish(mut self) -> Vec<Bytes> {
        self.out.push(b'}');
        self.pieces.push(Bytes::from(self.out));
        self.pieces
    }
}

/// One buffer of `pieces`.
pub fn concat(pieces: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(pieces.iter().map(Bytes::len).sum());
    for p in pieces {
        out.extend_from_slice(p);
    }
    out
}

/// What a snapshot or a ref is known by.
#[derive(Deserialize)]
struct Id {
    #[serde(rename = "snapshot-id")]
    snapshot_id: i64,
}

/// A snapshot's (or a log entry's) id and place in the history (the order new snapshots are
/// written in).
#[derive(Deserialize)]
struct Placed {
    #[serde(rename = "snapshot-id")]
    snapshot_id: i64,
    #[serde(rename = "sequence-number", default)]
    sequence_number: i64,
    #[serde(rename = "timestamp-ms", default)]
    timestamp_ms: i64,
}

const SNAPSHOTS: &str = "snapshots";
const LOG: &str = "snapshot-log";
const PROPERTIES: &str = "properties";

/// The property that marks a head (set to `true`).
pub const HEAD: &str = "floe.internal.head-of-history";

/// True when `md` is a head ([`split`]), not a whole table.
pub fn is_head(md: &TableMetadata) -> bool {
    md.properties().contains_key(HEAD)
}

/// `properties` (a JSON object, or absent) with `HEAD` set (`mark`), or removed. Marking
/// drops every other reserved key first: only floe's own mark may make a head.
fn with_mark(properties: Option<&RawValue>, mark: bool) -> serde_json::Result<Vec<u8>> {
    let mut map: serde_json::Map<String, serde_json::Value> = match properties {
        Some(p) if p.get() != "null" => serde_json::from_str(p.get())?,
        _ => serde_json::Map::new(),
    };
    match mark {
        true => {
            map.retain(|k, _| !k.starts_with(super::reserved::RESERVED_PREFIX));
            map.insert(HEAD.to_string(), "true".into())
        }
        false => map.remove(HEAD),
    };
    serde_json::to_vec(&map)
}

/// The run of `doc` the elements span (their text with the commas between them).
fn run(doc: &Bytes, elements: &[&RawValue]) -> Vec<Bytes> {
    let at = |s: &str| s.as_ptr() as usize - doc.as_ptr() as usize;
    match (elements.first(), elements.last()) {
        (Some(first), Some(last)) => {
            vec![doc.slice(at(first.get())..at(last.get()) + last.get().len())]
        }
        _ => vec![],
    }
}

/// The ids of the snapshots a head keeps: those refs point to, and the current one.
fn heads(members: &Members) -> serde_json::Result<HashSet<i64>> {
    let mut wanted: HashSet<i64> = match members.get("refs") {
        Some(r) if r.get() != "null" => {
            serde_json::from_str::<std::collections::HashMap<String, Id>>(r.get())?
                .into_values()
                .map(|x| x.snapshot_id)
                .collect()
        }
        _ => HashSet::new(),
    };
    if let Some(current) = members.get("current-snapshot-id") {
        if let Some(id) = serde_json::from_str::<Option<i64>>(current.get())? {
            if id != -1 {
                wanted.insert(id);
            }
        }
    }
    Ok(wanted)
}

/// The head: every member but the history, the `kept` snapshots, marked [`HEAD`].
fn head_of(members: &Members, kept: &[&RawValue]) -> serde_json::Result<TableMetadata> {
    let mut head = members.write_head()?;
    let marked = with_mark(members.get(PROPERTIES), true)?;
    head.member(PROPERTIES)?.extend(marked);
    head.array(SNAPSHOTS, &[], kept)?;
    opaque::parse_prepared(&concat(&head.finish()), false)
}

/// Splits a `metadata.json` (already decompressed) into its head and its history; `None` when
/// it is not an object whose refs and current snapshot all name a listed snapshot (the caller
/// parses it whole, which says what is wrong).
pub fn split(doc: Bytes) -> Option<Split> {
    let members: Members = serde_json::from_slice(&doc).ok()?;
    let mut wanted = heads(&members).ok()?;
    // Refs point at recent snapshots, and snapshots are listed oldest first: look from the end.
    let mut kept = Vec::new();
    for raw in members.snapshots.iter().rev() {
        if wanted.is_empty() {
            break;
        }
        let id = serde_json::from_str::<Id>(raw.get()).ok()?.snapshot_id;
        if wanted.remove(&id) {
            kept.push(*raw);
        }
    }
    if !wanted.is_empty() {
        return None;
    }
    kept.reverse();
    let head = head_of(&members, &kept).ok()?;
    let history = History {
        snapshots: run(&doc, &members.snapshots),
        log: run(&doc, &members.log),
    };
    Some(Split { head, history })
}

/// True when every update only adds to the history or changes the head: a commit
/// [`splice`] may write ([`splices_onto`] tells for a given head).
pub fn spliceable(updates: &[TableUpdate]) -> bool {
    updates.iter().all(|u| {
        matches!(
            u,
            TableUpdate::AddSnapshot { .. }
                | TableUpdate::SetSnapshotRef { .. }
                | TableUpdate::SetProperties { .. }
                | TableUpdate::RemoveProperties { .. }
        )
    })
}

/// True when `updates` are [`spliceable`] onto `head`: every ref they set points to a snapshot
/// the head holds or they add (a tag on an old snapshot needs the whole table).
pub fn splices_onto(head: &TableMetadata, updates: &[TableUpdate]) -> bool {
    let added: HashSet<i64> = updates
        .iter()
        .filter_map(|u| match u {
            TableUpdate::AddSnapshot { snapshot } => Some(snapshot.snapshot_id()),
            _ => None,
        })
        .collect();
    spliceable(updates)
        && updates.iter().all(|u| match u {
            TableUpdate::SetSnapshotRef { reference, .. } => {
                added.contains(&reference.snapshot_id)
                    || head.snapshot_by_id(reference.snapshot_id).is_some()
            }
            _ => true,
        })
}

/// The next `metadata.json`, as pieces to write in order: `built` (the head `base` with a
/// commit's updates applied) with `history` spliced in; and that file split, for the next
/// commit. Snapshots and log entries of `built` that `base` did not have go after the
/// history's, in commit order. Fails when `built` lost a snapshot of `base` (an update that
/// removes history must not be spliced).
pub fn splice(
    history: &History,
    base: &TableMetadata,
    built: &TableMetadata,
) -> serde_json::Result<(Vec<Bytes>, Split)> {
    let had: HashSet<i64> = base.snapshots().map(|s| s.snapshot_id()).collect();
    if had.iter().any(|id| built.snapshot_by_id(*id).is_none()) {
        return Err(serde::de::Error::custom(
            "the commit removes a snapshot: its metadata cannot be spliced",
        ));
    }
    let json = opaque::metadata_bytes(built)?;
    let members: Members = serde_json::from_slice(&json)?;
    let wanted = heads(&members)?;
    let (mut added, mut kept) = (Vec::new(), Vec::new());
    for raw in &members.snapshots {
        let placed: Placed = serde_json::from_str(raw.get())?;
        let key = (
            placed.sequence_number,
            placed.timestamp_ms,
            placed.snapshot_id,
        );
        if wanted.contains(&placed.snapshot_id) {
            kept.push((key, *raw));
        }
        if !had.contains(&placed.snapshot_id) {
            added.push((key, *raw));
        }
    }
    added.sort_by_key(|p| p.0);
    kept.sort_by_key(|p| p.0);
    let added: Vec<&RawValue> = added.into_iter().map(|p| p.1).collect();
    let kept: Vec<&RawValue> = kept.into_iter().map(|p| p.1).collect();
    // The base's log entries are in the history already.
    let logged: HashSet<(i64, i64)> = base
        .history()
        .iter()
        .map(|e| (e.snapshot_id, e.timestamp_ms))
        .collect();
    let mut new_log = Vec::new();
    for raw in &members.log {
        let e: Placed = serde_json::from_str(raw.get())?;
        if !logged.contains(&(e.snapshot_id, e.timestamp_ms)) {
            new_log.push(*raw);
        }
    }

    let mut out = members.write_head()?;
    let properties = with_mark(members.get(PROPERTIES), false)?;
    if properties != b"{}" {
        out.member(PROPERTIES)?.extend(properties);
    }
    let added = out.array(SNAPSHOTS, &history.snapshots, &added)?;
    let logged = out.array(LOG, &history.log, &new_log)?;
    let head = head_of(&members, &kept)?;
    let history = History {
        snapshots: extended(&history.snapshots, added),
        log: extended(&history.log, logged),
    };
    Ok((out.finish(), Split { head, history }))
}

#[cfg(test)]
mod tests;
