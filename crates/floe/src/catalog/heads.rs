//! The heads of tables a catalog loaded for an append or committed since, kept for the next
//! commit ([`crate::table::metadata_json`]): a process that appends again and again (a bench,
//! a service built on the library) reads and parses a table's `metadata.json` once, then
//! commits by splicing onto the history it holds.
//!
//! An entry is the head and history of one metadata file, by table; it is used only while the
//! catalog's pointer still names that file (every load reads the pointer first), so it is
//! never stale. Entries are bounded by the bytes of the files they hold (the least recently
//! used table goes first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iceberg::spec::TableMetadata;

use crate::table::metadata_json::History;

/// Bytes of metadata files kept at most (the history text of each).
const CAPACITY_BYTES: usize = 256 << 20;

/// One table's head: the parsed head of the metadata file at `location`, and its history.
#[derive(Debug)]
pub(crate) struct Head {
    pub location: String,
    pub metadata: Arc<TableMetadata>,
    pub history: History,
}

#[derive(Default)]
pub(crate) struct Heads {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_table: HashMap<String, (u64, Arc<Head>)>,
    clock: u64,
    bytes: usize,
}

impl Heads {
    /// The head of `table` if it is the one of the metadata file at `location`.
    pub fn get(&self, table: &str, location: &str) -> Option<Arc<Head>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        let (used, head) = inner.by_table.get_mut(table)?;
        if head.location != location {
            return None;
        }
        *used = now;
        Some(head.clone())
    }

    /// Keeps `head` as `table`'s (replacing the one of an older file).
    pub fn put(&self, table: &str, head: Head) -> Arc<Head> {
        let head = Arc::new(head);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        let size = head.history.len();
        if let Some((_, old)) = inner
            .by_table
            .insert(table.to_string(), (now, head.clone()))
        {
            inner.bytes -= old.history.len();
        }
        inner.bytes += size;
        while inner.bytes > CAPACITY_BYTES && inner.by_table.len() > 1 {
            let Some(oldest) = inner
                .by_table
                .iter()
                .filter(|(k, _)| k.as_str() != table)
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, gone)) = inner.by_table.remove(&oldest) {
                inner.bytes -= gone.history.len();
            }
        }
        head
    }
}
