//! Cleanup operations: files and metadata no snapshot needs any more.
//!
//! ```text
//!  table::reach (what snapshots need) ──┬─> orphans: listed on storage - reachable, older than T
//!  storage::listing (what storage holds) ┘   metadata_files: metadata.json out of the metadata log
//!                                            rewrite_manifests: compaction of metadata
//!                                            purge: `table drop --purge`
//! ```
//!
//! Every delete here is a set difference against [`crate::table::reach::reachable`], computed
//! from metadata that is re-read right before deleting; anything unreadable aborts before the
//! first delete. Every delete goes through [`crate::storage::delete::delete_files`] with a
//! [`crate::storage::fence::Fence`]: nothing outside the table's own location, inside another
//! table's location or among the catalog's files is ever deleted, however the path is spelled.

pub mod metadata_files;
pub mod orphans;
pub mod purge;
pub mod rewrite_manifests;

use crate::base::error::{Error, Result};
use crate::base::properties;

/// Refuses file deletion on a table whose `gc.enabled` is false (Iceberg's rule: such tables
/// may share files with other tables).
pub(crate) fn check_gc_enabled(table: &iceberg::table::Table, operation: &str) -> Result<()> {
    if properties::table_bool_prop(table, properties::GC_ENABLED.key, true)? {
        Ok(())
    } else {
        Err(Error::Refused {
            operation: operation.to_string(),
            reason: format!(
                "table property {} is false (files may be shared with other tables)",
                properties::GC_ENABLED.key
            ),
        })
    }
}
