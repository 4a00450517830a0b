//! Metadata a catalog keeps between commits, so that a process that commits again and again
//! (an ingest, the maintainer, a service built on the library) reads and parses a table's
//! `metadata.json` once:
//!
//! - **heads** ([`Head`]): the head and history of a table's metadata file
//!   ([`crate::table::metadata_json`]), loaded for an append or written by a spliced commit;
//!   the next append commits by splicing onto the history held;
//! - **whole tables**: the parsed metadata [`Catalog::load_table`](super::Catalog::load_table)
//!   read or a commit built, returned again while the pointer names the same file.
//!
//! An entry is one metadata file's, by table; it is used only while the catalog's pointer still
//! names that file (every load reads the pointer first), so it is never stale: a metadata file
//! never changes once written. Entries are bounded by weight, the bytes of the metadata file
//! (the least recently used table goes first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iceberg::spec::TableMetadata;

use crate::table::metadata_json::History;

/// Weight kept at most per kind: bytes of the metadata files the entries were read from.
const CAPACITY_BYTES: usize = 128 << 20;

/// One table's head: the parsed head of its metadata file, and the history.
#[derive(Debug)]
pub(crate) struct Head {
    pub metadata: Arc<TableMetadata>,
    pub history: History,
}

/// The last metadata of each table, by the file it is: `V` is a [`Head`] or a whole
/// [`TableMetadata`].
pub(crate) struct Kept<V> {
    inner: Mutex<Inner<V>>,
}

impl<V> Default for Kept<V> {
    fn default() -> Self {
        Kept {
            inner: Mutex::new(Inner {
                by_table: HashMap::new(),
                clock: 0,
                weight: 0,
            }),
        }
    }
}

struct Entry<V> {
    location: String,
    value: Arc<V>,
    weight: usize,
    used: u64,
}

struct Inner<V> {
    by_table: HashMap<String, Entry<V>>,
    clock: u64,
    weight: usize,
}

impl<V> Kept<V> {
    /// `table`'s entry if it is the one of the metadata file at `location`.
    pub fn get(&self, table: &str, location: &str) -> Option<Arc<V>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        let entry = inner.by_table.get_mut(table)?;
        if entry.location != location {
            return None;
        }
        entry.used = now;
        Some(entry.value.clone())
    }

    /// Keeps `value` as `table`'s, for the metadata file at `location` of `weight` bytes
    /// (replacing the entry of an older file).
    pub fn put(&self, table: &str, location: &str, value: Arc<V>, weight: usize) -> Arc<V> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let entry = Entry {
            location: location.to_string(),
            value: value.clone(),
            weight,
            used: inner.clock,
        };
        if let Some(old) = inner.by_table.insert(table.to_string(), entry) {
            inner.weight -= old.weight;
        }
        inner.weight += weight;
        while inner.weight > CAPACITY_BYTES && inner.by_table.len() > 1 {
            let Some(oldest) = inner
                .by_table
                .iter()
                .filter(|(k, _)| k.as_str() != table)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = inner.by_table.remove(&oldest) {
                inner.weight -= gone.weight;
            }
        }
        value
    }
}

/// The weight of a whole table's metadata not read from a file: about what its file holds.
pub(crate) fn weight_of(md: &TableMetadata) -> usize {
    4096 + md.snapshots().len() * 600 + md.history().len() * 50
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_only_for_its_file_and_the_least_recently_used_goes_first() {
        let kept: Kept<u32> = Kept::default();
        kept.put("a", "a/1.json", Arc::new(1), CAPACITY_BYTES / 2);
        assert_eq!(kept.get("a", "a/1.json").as_deref(), Some(&1));
        assert!(
            kept.get("a", "a/0.json").is_none(),
            "another file of the table"
        );
        kept.put("b", "b/1.json", Arc::new(2), CAPACITY_BYTES / 4);
        // `a` was used after `b` was put: `b` goes when room is needed.
        assert!(kept.get("a", "a/1.json").is_some());
        kept.put("c", "c/1.json", Arc::new(3), CAPACITY_BYTES / 2);
        assert!(kept.get("b", "b/1.json").is_none());
        assert!(kept.get("c", "c/1.json").is_some());
        // A new file of a table replaces its entry, and its weight.
        kept.put("c", "c/2.json", Arc::new(4), 10);
        assert!(kept.get("c", "c/1.json").is_none());
        assert_eq!(kept.get("c", "c/2.json").as_deref(), Some(&4));
        assert!(kept.get("a", "a/1.json").is_some());
    }
}
