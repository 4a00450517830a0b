//! The keys of an upsert: which rows of the input win (the last one per key, in input order)
//! and which rows of the table they replace (every live row with one of those keys).
//!
//! Keys are the table's primary key (Iceberg identifier fields, `table create --primary-key`)
//! or columns named by the caller; top-level primitive columns only. A key is encoded once in
//! arrow's row format (byte-comparable, any number of columns of any primitive type) and kept
//! in a hash map to the ordinal of its last input row: memory is the distinct keys, not the
//! rows. Per key column, the smallest and largest input values prune the table files that
//! cannot hold a key (their column bounds are outside the range) before any is read.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::datatypes::{
    DataType, Date32Type, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType,
};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, Type};
use iceberg::table::Table;

use crate::base::error::{Error, Result};
use crate::operations::change::locate::Matcher;

/// Marks an ordinal whose change deletes its key.
const DELETED: u64 = 1 << 63;
/// Bits 48..63 of a key's value: the stream (source partition) its last change came from.
const ORIGIN_SHIFT: u32 = 48;
const ORIGIN: u64 = 0x7fff << ORIGIN_SHIFT;

/// The distinct keys of an input and the ordinal of each key's last row.
pub struct KeyIndex {
    /// Key column names, in key order.
    pub names: Vec<String>,
    /// Their field ids, in key order (the projection to read from table files).
    pub field_ids: Vec<i32>,
    /// Their indices in the table's Arrow schema.
    indices: Vec<usize>,
    converter: RowConverter,
    /// Key -> ordinal of its last change; [`DELETED`] set when that change deletes the key.
    last: HashMap<Box<[u8]>, u64>,
    /// Bytes of the encoded keys held.
    key_bytes: usize,
    /// Changes whose key's previous change came from another stream.
    crossed: u64,
    /// Input rows observed.
    rows: u64,
    /// Smallest and largest value per key column (where the type has bounds floe prunes by).
    bounds: Vec<Option<(Datum, Datum)>>,
}

impl KeyIndex {
    /// The key of `table`: `explicit` columns, else its primary key.
    pub fn for_table(table: &Table, explicit: Option<&[String]>) -> Result<Self> {
        Self::for_schema(
            table.metadata().current_schema(),
            explicit,
            &crate::catalog::ident_string(table.identifier()),
        )
    }

    /// The key of a table of `schema` (named `table` in errors).
    pub fn for_schema(
        schema: &iceberg::spec::Schema,
        explicit: Option<&[String]>,
        table: &str,
    ) -> Result<Self> {
        let names: Vec<String> = match explicit {
            Some(cols) if !cols.is_empty() => cols.to_vec(),
            _ => crate::table::schema::primary_key(schema),
        };
        if names.is_empty() {
            return Err(Error::invalid_option(
                "--mode upsert",
                table,
                "the table has no primary key: create it with --primary-key, or name the key \
                 columns with --key",
            ));
        }
        let top = schema.as_struct().fields();
        let mut field_ids = Vec::new();
        let mut indices = Vec::new();
        let mut sort_fields = Vec::new();
        let arrow = iceberg::arrow::schema_to_arrow_schema(schema)?;
        for name in &names {
            let Some(i) = top.iter().position(|f| &f.name == name) else {
                return Err(Error::invalid_option(
                    "key column",
                    name,
                    "not a top-level column of the table",
                ));
            };
            if !matches!(*top[i].field_type, Type::Primitive(_)) {
                return Err(Error::invalid_option(
                    "key column",
                    name,
                    "a key column must be of a primitive type",
                ));
            }
            field_ids.push(top[i].id);
            indices.push(i);
            sort_fields.push(SortField::new(arrow.field(i).data_type().clone()));
        }
        let bounds = vec![None; names.len()];
        Ok(Self {
            names,
            field_ids,
            indices,
            converter: RowConverter::new(sort_fields)?,
            last: HashMap::new(),
            key_bytes: 0,
            crossed: 0,
            rows: 0,
            bounds,
        })
    }

    /// Distinct keys observed.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// No key observed.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Input rows observed.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Memory held by the keys (an estimate: encoded bytes plus the map's per-entry cost).
    pub fn memory_bytes(&self) -> usize {
        self.key_bytes + self.last.capacity() * 40
    }

    /// Forgets every key (the next window of a stream), keeping the key definition.
    pub fn clear(&mut self) {
        self.last = HashMap::new();
        self.key_bytes = 0;
        self.crossed = 0;
        self.rows = 0;
        self.bounds = vec![None; self.names.len()];
    }

    /// The Arrow schema of the key columns alone, in key order (a delete's key record).
    pub fn key_schema(
        &self,
        table_schema: &arrow_schema::Schema,
    ) -> Result<arrow_schema::SchemaRef> {
        Ok(Arc::new(table_schema.project(&self.indices)?))
    }

    /// The key columns of `batch` (a batch in the table's Arrow schema), no key null.
    fn key_columns(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let cols: Vec<ArrayRef> = self
            .indices
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        self.check_keys(cols)
    }

    /// `cols` (key columns in key order), refused when a key is null.
    fn check_keys(&self, cols: Vec<ArrayRef>) -> Result<Vec<ArrayRef>> {
        for (c, name) in cols.iter().zip(&self.names) {
            if c.null_count() > 0 {
                let row = (0..c.len()).find(|&r| c.is_null(r)).unwrap_or(0);
                return Err(Error::invalid_option(
                    "key column",
                    name,
                    format!(
                        "is null in input row {} (a key must have a value)",
                        self.rows + row as u64 + 1
                    ),
                ));
            }
        }
        Ok(cols)
    }

    /// Pass one: records the keys of `batch` (input rows in order, in the table's schema).
    pub fn observe(&mut self, batch: &RecordBatch) -> Result<()> {
        let ordinals: Vec<u64> = (0..batch.num_rows() as u64)
            .map(|i| self.rows + i)
            .collect();
        let cols = self.key_columns(batch)?;
        self.record(&cols, &ordinals, &[], false)
    }

    /// Records rows of `batch` (in the table's schema) as the changes with these ordinals
    /// (increasing in arrival order, below 2^48; a later one of a key wins), that came from
    /// these streams (`origins`, one per row; empty: one stream).
    pub fn observe_at(
        &mut self,
        batch: &RecordBatch,
        ordinals: &[u64],
        origins: &[u16],
    ) -> Result<()> {
        let cols = self.key_columns(batch)?;
        self.record(&cols, ordinals, origins, false)
    }

    /// Records deletes of the keys of `keys` (a batch of the key columns in key order) with
    /// these ordinals and origins.
    pub fn observe_deletes(
        &mut self,
        keys: &RecordBatch,
        ordinals: &[u64],
        origins: &[u16],
    ) -> Result<()> {
        let cols = self.check_keys(keys.columns().to_vec())?;
        self.record(&cols, ordinals, origins, true)
    }

    /// Changes recorded whose key's previous change (in this index) came from another stream:
    /// their relative order is the arrival order, which the source does not define.
    pub fn crossed_streams(&self) -> u64 {
        self.crossed
    }

    fn record(
        &mut self,
        cols: &[ArrayRef],
        ordinals: &[u64],
        origins: &[u16],
        deleted: bool,
    ) -> Result<()> {
        let rows = self.converter.convert_columns(cols)?;
        let flag = if deleted { DELETED } else { 0 };
        for (i, (row, &o)) in rows.iter().zip(ordinals).enumerate() {
            let origin = u64::from(origins.get(i).copied().unwrap_or(0) & 0x7fff) << ORIGIN_SHIFT;
            let value = o | origin | flag;
            let bytes = row.as_ref();
            match self.last.get_mut(bytes) {
                Some(v) => {
                    if *v & ORIGIN != origin {
                        self.crossed += 1;
                    }
                    if o >= *v & !(DELETED | ORIGIN) {
                        *v = value;
                    }
                }
                None => {
                    self.key_bytes += bytes.len();
                    self.last.insert(bytes.into(), value);
                }
            }
        }
        for (k, c) in cols.iter().enumerate() {
            if let Some((lo, hi)) = column_bounds(c) {
                self.bounds[k] = Some(match self.bounds[k].take() {
                    None => (lo, hi),
                    Some((a, b)) => (if lo < a { lo } else { a }, if hi > b { hi } else { b }),
                });
            }
        }
        self.rows += ordinals.len() as u64;
        Ok(())
    }

    /// Pass two: the rows of `batch` that are the last input row of their key; `ordinal` is
    /// the input ordinal of the batch's first row and moves past it.
    pub fn last_rows(&self, batch: &RecordBatch, ordinal: &mut u64) -> Result<BooleanArray> {
        let ordinals: Vec<u64> = (0..batch.num_rows() as u64).map(|i| *ordinal + i).collect();
        *ordinal += batch.num_rows() as u64;
        self.last_rows_at(batch, &ordinals)
    }

    /// The rows of `batch` (table schema) whose ordinal is their key's last change, and that
    /// change is not a delete.
    pub fn last_rows_at(&self, batch: &RecordBatch, ordinals: &[u64]) -> Result<BooleanArray> {
        let rows = self.converter.convert_columns(&self.key_columns(batch)?)?;
        Ok(rows
            .iter()
            .zip(ordinals)
            .map(|(r, o)| Some(self.last.get(r.as_ref()).map(|v| v & !ORIGIN) == Some(*o)))
            .collect())
    }

    /// Rows of `keys` (a batch of the key columns, in key order) whose key is in the index.
    pub fn contains(&self, keys: &RecordBatch) -> Result<BooleanArray> {
        let rows = self.converter.convert_columns(keys.columns())?;
        Ok(rows
            .iter()
            .map(|r| Some(self.last.contains_key(r.as_ref())))
            .collect())
    }

    /// A filter that prunes table files whose key bounds exclude every input key.
    pub fn prune(&self) -> Option<Predicate> {
        let mut out: Option<Predicate> = None;
        for (name, b) in self.names.iter().zip(&self.bounds) {
            let Some((lo, hi)) = b else { continue };
            let r = Reference::new(name.clone());
            let p = if lo == hi {
                r.equal_to(lo.clone())
            } else {
                r.clone()
                    .greater_than_or_equal_to(lo.clone())
                    .and(r.less_than_or_equal_to(hi.clone()))
            };
            out = Some(match out {
                None => p,
                Some(acc) => acc.and(p),
            });
        }
        out
    }

    /// The index as a [`Matcher`] over batches of the key columns.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        let me = self.clone();
        Arc::new(move |b| me.contains(b))
    }
}

/// The live rows of `table` whose key is one of `keys` (files pruned by the keys' bounds).
pub async fn locate_keys(
    table: &Table,
    keys: &Arc<KeyIndex>,
) -> Result<(
    Vec<crate::operations::change::locate::Matched>,
    crate::operations::change::locate::Searched,
)> {
    if keys.is_empty() {
        return Ok((vec![], Default::default()));
    }
    let tasks = crate::operations::change::locate::candidates(table, keys.prune()).await?;
    crate::operations::change::locate::locate(table, tasks, &keys.field_ids, keys.matcher(), None)
        .await
}

/// Smallest and largest value of a key column, for the types floe prunes by.
fn column_bounds(c: &ArrayRef) -> Option<(Datum, Datum)> {
    use arrow::compute::{max, max_string, min, min_string};
    match c.data_type() {
        DataType::Int32 => {
            let a = c.as_primitive::<Int32Type>();
            Some((Datum::int(min(a)?), Datum::int(max(a)?)))
        }
        DataType::Int64 => {
            let a = c.as_primitive::<Int64Type>();
            Some((Datum::long(min(a)?), Datum::long(max(a)?)))
        }
        DataType::Date32 => {
            let a = c.as_primitive::<Date32Type>();
            Some((Datum::date(min(a)?), Datum::date(max(a)?)))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let a = c.as_primitive::<TimestampMicrosecondType>();
            let (lo, hi) = (min(a)?, max(a)?);
            Some(match tz {
                None => (Datum::timestamp_micros(lo), Datum::timestamp_micros(hi)),
                Some(_) => (Datum::timestamptz_micros(lo), Datum::timestamptz_micros(hi)),
            })
        }
        DataType::Utf8 => {
            let a = c.as_string::<i32>();
            Some((Datum::string(min_string(a)?), Datum::string(max_string(a)?)))
        }
        _ => None,
    }
}
