//! Which columns a writer stores without a dictionary, judged from the first batch it writes.
//!
//! A Parquet writer builds a dictionary for every column: each value is hashed and looked up
//! in a table that grows with the distinct values, and the chunk stores the dictionary plus an
//! index per row. On a column of distinct values (ids, event timestamps to the microsecond,
//! UUIDs, free text) that work buys nothing: the dictionary holds every value once, the
//! indexes are extra bytes on top, and once the dictionary passes its limit (1 MiB in arrow-rs)
//! the chunk falls back to plain pages anyway. Measured on the ingest benchmark (1M events, an
//! `id` column of distinct longs), writing `id` plain removed 13,000 of the process's 33,000
//! page faults (the hash table growing, row group after row group).
//!
//! The first batch a writer sees says which columns those are: a top-level column whose first
//! [`SAMPLE`] rows hold at least [`MIN_VALUES`] non-null values, of which at least nine in ten
//! are distinct, is written plain. Every other column (booleans, nested columns, short or
//! repetitive samples) keeps the table's settings. The trade: a column that looks distinct in
//! its first rows but repeats later (a key that cycles after a few thousand values) is stored
//! plain and compressed by zstd alone, a few percent larger than with a dictionary; it is never
//! less readable. Compaction judges the same way from its inputs' footers
//! (`operations/compact/dictionary.rs`).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

/// Rows of the first batch looked at per column.
pub(crate) const SAMPLE: usize = 4096;

/// Non-null values a sampled column needs before it says anything.
pub(crate) const MIN_VALUES: usize = 1024;

/// The top-level columns of `batch` whose first rows are near-distinct (see the module docs),
/// by their Parquet column path.
pub fn near_distinct(batch: &RecordBatch) -> Vec<ColumnPath> {
    let rows = batch.num_rows().min(SAMPLE);
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(_, column)| {
            let sample = column.slice(0, rows);
            let values = sample.len() - sample.null_count();
            values >= MIN_VALUES && distinct(sample.as_ref()).is_some_and(|d| d * 10 >= values * 9)
        })
        .map(|(field, _)| ColumnPath::from(field.name().as_str()))
        .collect()
}

/// `props` with the dictionary turned off for the columns at `paths`.
pub fn without_dictionary(props: WriterProperties, paths: Vec<ColumnPath>) -> WriterProperties {
    if paths.is_empty() {
        return props;
    }
    paths
        .into_iter()
        .fold(props.into_builder(), |b, path| {
            b.set_column_dictionary_enabled(path, false)
        })
        .build()
}

/// The distinct non-null values of `array` (by a 64-bit hash of each: a collision only makes a
/// column look less distinct), or None for a type this does not judge.
fn distinct(array: &dyn Array) -> Option<usize> {
    let mut seen: HashSet<u64, BuildHasherDefault<Premixed>> =
        HashSet::with_capacity_and_hasher(array.len(), Default::default());
    let mut add = |bytes: &[u8]| {
        seen.insert(hash(bytes));
    };
    macro_rules! fixed {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            for v in a.iter().flatten() {
                add(&v.to_le_bytes());
            }
        }};
    }
    use arrow::datatypes as t;
    match array.data_type() {
        DataType::Int32 | DataType::Date32 => fixed!(t::Int32Type),
        DataType::Int64 => fixed!(t::Int64Type),
        DataType::Float32 => fixed!(t::Float32Type),
        DataType::Float64 => fixed!(t::Float64Type),
        DataType::Decimal128(..) => fixed!(t::Decimal128Type),
        DataType::Time64(_) | DataType::Timestamp(..) => {
            let a = arrow::compute::cast(array, &DataType::Int64).ok()?;
            return distinct(a.as_ref());
        }
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .flatten()
            .for_each(|v| add(v.as_bytes())),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .flatten()
            .for_each(|v| add(v.as_bytes())),
        DataType::Binary => array.as_binary::<i32>().iter().flatten().for_each(add),
        DataType::LargeBinary => array.as_binary::<i64>().iter().flatten().for_each(add),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().iter().flatten().for_each(add),
        _ => return None,
    }
    Some(seen.len())
}

/// A 64-bit multiply-rotate hash of `bytes`, 8 at a time (the FxHash step): enough to tell
/// values apart in a sample, and a few nanoseconds per value.
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = 0;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = step(h, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let mut tail = [0u8; 8];
    let rest = words.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    // The length last (values that differ only by trailing zero bytes differ by it), then an
    // avalanche so that the set's buckets (the low bits) depend on every input bit.
    let h = step(step(h, u64::from_le_bytes(tail)), bytes.len() as u64);
    (h ^ (h >> 29)).wrapping_mul(K) ^ (h >> 32)
}

/// The set's hasher: its keys are hashes already.
#[derive(Default)]
struct Premixed(u64);

impl Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, BooleanArray, Int64Array, StringArray, TimestampMicrosecondArray,
    };

    use super::*;

    fn names(paths: Vec<ColumnPath>) -> Vec<String> {
        paths.iter().map(ColumnPath::string).collect()
    }

    fn batch(rows: i64) -> RecordBatch {
        let col = |a: ArrayRef| a;
        RecordBatch::try_from_iter([
            ("id", col(Arc::new(Int64Array::from_iter_values(0..rows)))),
            // 1,000 users: repeats within the sample.
            (
                "user",
                col(Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("user-{}", i % 1000)),
                ))),
            ),
            (
                "uuid",
                col(Arc::new(StringArray::from_iter_values((0..rows).map(
                    |i| {
                        format!(
                            "{:032x}",
                            (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
                        )
                    },
                )))),
            ),
            (
                "ts",
                col(Arc::new(TimestampMicrosecondArray::from_iter_values(
                    (0..rows).map(|i| 1_700_000_000_000_000 + i * 1_337),
                ))),
            ),
            // Every tenth value null, the rest distinct.
            (
                "sparse",
                col(Arc::new(Int64Array::from_iter(
                    (0..rows).map(|i| (i % 10 != 0).then_some(i * 31)),
                ))),
            ),
            // Distinct in pairs: half of the values distinct.
            (
                "pairs",
                col(Arc::new(Int64Array::from_iter_values(
                    (0..rows).map(|i| i / 2),
                ))),
            ),
            (
                "flag",
                col(Arc::new(BooleanArray::from_iter(
                    (0..rows).map(|i| Some(i % 2 == 0)),
                ))),
            ),
        ])
        .unwrap()
    }

    #[test]
    fn distinct_columns_are_found_repetitive_ones_and_booleans_are_not() {
        assert_eq!(
            names(near_distinct(&batch(10_000))),
            ["id", "uuid", "ts", "sparse"]
        );
    }

    #[test]
    fn a_short_first_batch_decides_nothing() {
        assert!(near_distinct(&batch(MIN_VALUES as i64 - 1)).is_empty());
    }

    #[test]
    fn mostly_null_columns_decide_nothing() {
        let ids = Int64Array::from_iter((0..SAMPLE as i64).map(|i| (i % 8 == 0).then_some(i)));
        let b = RecordBatch::try_from_iter([("id", Arc::new(ids) as ArrayRef)]).unwrap();
        assert!(near_distinct(&b).is_empty(), "512 values are too few");
    }

    #[test]
    fn the_hash_tells_short_and_long_values_apart() {
        let values: Vec<Vec<u8>> = (0..2000u32)
            .flat_map(|i| [i.to_le_bytes().to_vec(), format!("{i:0>20}").into_bytes()])
            .chain([vec![], vec![0], vec![0, 0]])
            .collect();
        let hashes: HashSet<u64> = values.iter().map(|v| hash(v)).collect();
        assert_eq!(hashes.len(), values.len());
    }
}
