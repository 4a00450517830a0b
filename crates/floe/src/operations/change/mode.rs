//! How a row-level change writes: merge-on-read (position deletes or deletion vectors; data
//! files untouched) or copy-on-write (each affected data file rewritten without the rows, in
//! the same commit). Iceberg's table properties choose: `write.delete.mode` for `floe delete`,
//! and for upserts and CDC (`append --mode upsert`, `ingest --mode upsert|cdc`, which are
//! Spark's `MERGE INTO`) `write.merge.mode`, else `write.update.mode`. floe's default is
//! merge-on-read for all three (Iceberg Java's is copy-on-write): a streaming table changes
//! often, and compaction folds the deletes in later.

use iceberg::table::Table;
use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::catalog::ident_string;

/// How rows leave the table (`write.delete.mode`, `write.update.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteMode {
    /// Position delete files; data files untouched.
    MergeOnRead,
    /// Affected data files rewritten without the rows.
    CopyOnWrite,
}

impl DeleteMode {
    /// Parses `merge-on-read` / `copy-on-write`, naming `option` otherwise.
    pub fn parse(option: &str, value: &str) -> Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "merge-on-read" => Ok(Self::MergeOnRead),
            "copy-on-write" => Ok(Self::CopyOnWrite),
            _ => Err(Error::invalid_option(
                option,
                value,
                "expected merge-on-read or copy-on-write",
            )),
        }
    }

    /// The mode table property `key` sets (merge-on-read when unset).
    pub fn of_table(table: &Table, key: &str) -> Result<Self> {
        match table.metadata().properties().get(key) {
            None => Ok(Self::MergeOnRead),
            Some(v) => Self::parse(key, v).map_err(|_| Error::InvalidTableProperty {
                table: Some(ident_string(table.identifier())),
                key: key.to_string(),
                value: v.clone(),
                expected: "merge-on-read or copy-on-write".into(),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::MergeOnRead => "merge-on-read",
            Self::CopyOnWrite => "copy-on-write",
        }
    }
}

/// The mode of upserts and CDC on `table`: `write.merge.mode`, else `write.update.mode`, else
/// merge-on-read. A value other than the two modes is an error naming the property.
pub fn upsert_mode(table: &Table) -> Result<DeleteMode> {
    let props = table.metadata().properties();
    for key in ["write.merge.mode", "write.update.mode"] {
        if props.contains_key(key) {
            return DeleteMode::of_table(table, key);
        }
    }
    Ok(DeleteMode::MergeOnRead)
}
