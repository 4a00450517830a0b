//! Equality deletes applied by key: each delete file's keys read once per run, row-encoded
//! and hashed, so a row costs one lookup.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use futures::StreamExt;
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::DataContentType;
use iceberg::table::Table;

use crate::base::error::Result;

/// The keys of the equality delete files a compaction run applies, each read once.
#[derive(Default)]
pub(crate) struct EqualityDeletes {
    /// Delete file path -> its keys, `None` when they cannot be held (a null key, a nested
    /// column): the files it applies to go through the iceberg reader.
    loaded: tokio::sync::Mutex<HashMap<String, Option<Arc<EqualityKeys>>>>,
}

impl EqualityDeletes {
    async fn keys(&self, table: &Table, d: &FileScanTaskDeleteFile) -> Option<Arc<EqualityKeys>> {
        let mut loaded = self.loaded.lock().await;
        if let Some(k) = loaded.get(&d.file_path) {
            return k.clone();
        }
        let keys = EqualityKeys::read(table, d)
            .await
            .ok()
            .flatten()
            .map(Arc::new);
        loaded.insert(d.file_path.clone(), keys.clone());
        keys
    }

    /// The keys of every delete file of `task` but its deletion vector (all equality
    /// deletes), or `None`.
    pub(super) async fn of(
        &self,
        table: &Table,
        task: &FileScanTask,
        dvs: &crate::table::deletion_vector::DeletionVectors,
    ) -> Option<Vec<Arc<EqualityKeys>>> {
        let vector = dvs.of_task(task).map(|d| d.puffin.as_str());
        let mut out = Vec::new();
        for d in &task.deletes {
            if Some(d.file_path.as_str()) == vector {
                continue;
            }
            if d.file_type != DataContentType::EqualityDeletes {
                return None;
            }
            out.push(self.keys(table, d).await?);
        }
        Some(out)
    }
}

/// The keys of one equality delete file: its equality columns (top-level primitives of the
/// current schema), row-encoded and hashed.
pub(crate) struct EqualityKeys {
    /// The key columns' indices in the table's Arrow schema.
    indices: Vec<usize>,
    converter: RowConverter,
    keys: HashSet<Box<[u8]>>,
}

impl EqualityKeys {
    /// Reads equality delete file `d`; `None` when its keys cannot be applied by hashing: a
    /// column not a top-level primitive, or a null key (which matches null values: left to the
    /// iceberg reader).
    pub(super) async fn read(table: &Table, d: &FileScanTaskDeleteFile) -> Result<Option<Self>> {
        let ids = d.equality_ids.clone().unwrap_or_default();
        let schema = table.metadata().current_schema();
        let arrow = iceberg::arrow::schema_to_arrow_schema(schema)?;
        let top = schema.as_struct().fields();
        let mut indices = Vec::new();
        let mut fields = Vec::new();
        for id in &ids {
            let Some(i) = top.iter().position(|f| f.id == *id) else {
                return Ok(None);
            };
            if !matches!(*top[i].field_type, iceberg::spec::Type::Primitive(_)) {
                return Ok(None);
            }
            indices.push(i);
            fields.push(SortField::new(arrow.field(i).data_type().clone()));
        }
        if indices.is_empty() {
            return Ok(None);
        }
        let mut stream =
            crate::table::read_file_columns(table, &d.file_path, d.file_size_in_bytes, ids)?;
        let converter = RowConverter::new(fields)?;
        let mut keys = HashSet::new();
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            if batch.columns().iter().any(|c| c.null_count() > 0) {
                return Ok(None);
            }
            for row in converter.convert_columns(batch.columns())?.iter() {
                keys.insert(Box::<[u8]>::from(row.as_ref()));
            }
        }
        Ok(Some(Self {
            indices,
            converter,
            keys,
        }))
    }

    /// Rows of `batch` (the table's Arrow schema) whose key is deleted; a null key column never
    /// matches (no key held is null).
    pub(super) fn matches(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let cols: Vec<_> = self
            .indices
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let rows = self.converter.convert_columns(&cols)?;
        Ok(rows
            .iter()
            .map(|r| Some(self.keys.contains(r.as_ref())))
            .collect())
    }
}
