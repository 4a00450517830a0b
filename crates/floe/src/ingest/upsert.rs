//! `floe ingest --mode upsert|cdc`: the changes of one commit window, by key.
//!
//! ```text
//!  records ──> classify (change.rs) ──┬─> upsert rows: decoded in the table schema, each with
//!                                     │   its ordinal (arrival order), buffered like appends
//!                                     ├─> deletes: only the key decoded
//!                                     └─> bad: dead-letter sink
//!  key index: key -> ordinal of its last change (a delete flagged)
//!  commit: write the buffered rows that are their key's last change and not deleted; delete
//!          every live row of the table with a key of the window (position deletes); one
//!          commit with the source positions (exactly-once as for appends)
//! ```
//!
//! Order: changes to one key apply in arrival order, which is the source's order within one
//! stream (a Kafka partition by offset; a file by line). Across Kafka partitions the order of
//! two changes to one key is not defined, so a key must always be written to the same
//! partition (Kafka's default partitioner does this for keyed messages, Debezium keys by the
//! primary key). A restart resumes from the committed positions and replays the window, which
//! yields the same rows (an upsert is idempotent).
//!
//! Memory: the rows live in the write buffers (budget, spill to disk); the key index counts
//! against a quarter of the buffer budget, and a window whose keys reach it commits early.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, UInt64Array};
use arrow::datatypes::UInt64Type;
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use iceberg::table::Table;

use crate::base::error::Result;
use crate::ingest::change::{Change, Classifier, IngestMode};
use crate::ingest::debezium;
use crate::ingest::source::SourceRecord;
use crate::operations::change::keys::KeyIndex;
use crate::records::decode::{decode_records, Decoded};
use crate::records::value::BadValue;

/// The column carrying each buffered row's ordinal (stripped before writing).
pub const ORDINAL_COLUMN: &str = "_floe_change_ordinal";

/// Options of a change ingest.
#[derive(Debug, Clone, Default)]
pub struct ChangeOptions {
    pub mode: IngestMode,
    /// Key columns (default: the table's primary key).
    pub key: Option<Vec<String>>,
    /// Upsert mode: the field marking a record deleted (default `__deleted`).
    pub delete_field: Option<String>,
}

/// A change ingest's state: the classifier and the current window's keys.
pub struct ChangeState {
    classifier: Classifier,
    keys: KeyIndex,
    schema: iceberg::spec::SchemaRef,
    table: String,
    names: Vec<String>,
    table_arrow: SchemaRef,
    key_arrow: SchemaRef,
    buffered: SchemaRef,
    next: u64,
    /// Index of each stream seen (the origin of a change).
    streams: std::collections::HashMap<Arc<str>, u16>,
    /// Keys deleted in this window (a window of deletes only still commits).
    deletes: u64,
    /// Key memory that closes a window.
    key_budget: usize,
}

impl ChangeState {
    /// The state for `table`, with a key memory budget of `buffer_budget / 4`.
    pub fn new(table: &Table, options: &ChangeOptions, buffer_budget: u64) -> Result<Self> {
        let schema = table.metadata().current_schema().clone();
        let name = crate::catalog::ident_string(table.identifier());
        let keys = KeyIndex::for_schema(&schema, options.key.as_deref(), &name)?;
        let table_arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?);
        let key_arrow = keys.key_schema(&table_arrow)?;
        let mut fields: Vec<Arc<Field>> = table_arrow.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(
            ORDINAL_COLUMN,
            DataType::UInt64,
            false,
        )));
        let buffered = Arc::new(Schema::new_with_metadata(
            fields,
            table_arrow.metadata().clone(),
        ));
        let columns = schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect::<Vec<_>>();
        let classifier = Classifier::new(
            options.mode,
            columns,
            keys.names.clone(),
            options.delete_field.clone(),
        );
        Ok(Self {
            classifier,
            names: keys.names.clone(),
            keys,
            schema,
            table: name,
            table_arrow,
            key_arrow,
            buffered,
            next: 0,
            streams: Default::default(),
            deletes: 0,
            key_budget: (buffer_budget / 4).max(1) as usize,
        })
    }

    /// The key columns.
    pub fn key(&self) -> &[String] {
        &self.names
    }

    /// The window holds a change to commit (rows may all be buffered elsewhere).
    pub fn has_changes(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Deletes recorded in this window.
    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    /// The key index reached its budget: commit now.
    pub fn full(&self) -> bool {
        self.keys.memory_bytes() >= self.key_budget
    }

    /// Decodes one micro-batch: upsert rows in the buffered schema (table columns + ordinal),
    /// deletes recorded by key, bad records with their reason (by record index).
    pub fn decode(&mut self, records: &[SourceRecord]) -> Result<Decoded> {
        let base = self.next;
        self.next += records.len() as u64;
        let origins: Vec<u16> = records
            .iter()
            .map(|r| {
                let n = self.streams.len().min(u16::MAX as usize) as u16;
                *self.streams.entry(r.stream.clone()).or_insert(n)
            })
            .collect();
        let mut upserts: Vec<(usize, Cow<[u8]>)> = Vec::new();
        let mut deletes: Vec<(usize, Cow<[u8]>)> = Vec::new();
        let mut bad: Vec<(usize, BadValue)> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            match self.classifier.classify(&r.payload, r.key.as_deref()) {
                Change::Upsert(p) => upserts.push((i, p)),
                Change::Delete(p) => deletes.push((i, p)),
                Change::Skip => {}
                Change::Bad(reason) => bad.push((i, BadValue::record(&r.payload, reason))),
            }
        }
        let (keys, ordinals) = self.decode_part(&self.key_arrow.clone(), &deletes, base, &mut bad);
        if let Some(k) = keys {
            self.deletes += k.num_rows() as u64;
            let from = origins_of(&ordinals, base, &origins);
            self.keys.observe_deletes(&k, &ordinals, &from)?;
        }
        let (rows, ordinals) =
            self.decode_part(&self.table_arrow.clone(), &upserts, base, &mut bad);
        let batch = match rows {
            None => None,
            Some(b) => {
                let from = origins_of(&ordinals, base, &origins);
                self.keys.observe_at(&b, &ordinals, &from)?;
                let mut cols: Vec<ArrayRef> = b.columns().to_vec();
                cols.push(Arc::new(UInt64Array::from(ordinals)));
                Some(RecordBatch::try_new(self.buffered.clone(), cols)?)
            }
        };
        for (i, b) in &mut bad {
            if let Some(note) = debezium::no_schema_note(&self.table_arrow, &b.column) {
                if self.classifier.without_schema(&records[*i].payload) {
                    b.reason.push_str(note);
                }
            }
        }
        bad.sort_by_key(|(i, _)| *i);
        Ok(Decoded { batch, bad })
    }

    /// Decodes `part` (record index, JSON) into `schema`: the batch and each row's ordinal;
    /// bad records are added to `bad` by record index.
    fn decode_part(
        &self,
        schema: &SchemaRef,
        part: &[(usize, Cow<[u8]>)],
        base: u64,
        bad: &mut Vec<(usize, BadValue)>,
    ) -> (Option<RecordBatch>, Vec<u64>) {
        if part.is_empty() {
            return (None, vec![]);
        }
        let payloads: Vec<&[u8]> = part.iter().map(|(_, p)| p.as_ref()).collect();
        let d = decode_records(schema, &payloads);
        let mut rejected = vec![false; part.len()];
        for (j, b) in d.bad {
            rejected[j] = true;
            bad.push((part[j].0, b));
        }
        let ordinals = part
            .iter()
            .zip(&rejected)
            .filter(|(_, r)| !**r)
            .map(|((i, _), _)| base + *i as u64)
            .collect();
        (d.batch, ordinals)
    }

    /// Ends the window: its keys (for the commit), and a fresh index for the next one.
    pub fn take_window(&mut self) -> Result<Arc<KeyIndex>> {
        let fresh = KeyIndex::for_schema(&self.schema, Some(&self.names), &self.table)?;
        self.deletes = 0;
        Ok(Arc::new(std::mem::replace(&mut self.keys, fresh)))
    }
}

/// The origin of each change (`ordinals` of records of this micro-batch starting at `base`).
fn origins_of(ordinals: &[u64], base: u64, origins: &[u16]) -> Vec<u16> {
    ordinals
        .iter()
        .map(|o| origins[(o - base) as usize])
        .collect()
}

/// The rows of a buffered batch (table columns + ordinal) that are their key's last change
/// and not deleted, in the table schema.
pub fn last_changes(keys: &KeyIndex, batch: &RecordBatch) -> Result<RecordBatch> {
    let n = batch.num_columns() - 1;
    let ordinals = batch.column(n).as_primitive::<UInt64Type>();
    debug_assert_eq!(ordinals.null_count(), 0);
    let rows = batch.project(&(0..n).collect::<Vec<_>>())?;
    let keep = keys.last_rows_at(&rows, ordinals.values())?;
    Ok(arrow::compute::filter_record_batch(&rows, &keep)?)
}
