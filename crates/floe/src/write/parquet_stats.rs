//! Iceberg data-file metrics from a Parquet file floe wrote itself.
//!
//! The iceberg crate's writer derives a `DataFile` from the Parquet footer, but that conversion
//! is crate-private, so the compaction writer (which encodes row groups in parallel) needs its
//! own. Spec: "Manifests" (data_file fields 108-126: column sizes, value/null/NaN counts, lower
//! and upper bounds) and Appendix D (single-value serialization of bounds).
//!
//! - `column_sizes`, `value_counts`, `null_value_counts`: summed over row groups per leaf column,
//!   keyed by the field id stored in the Parquet schema.
//! - `lower_bounds`/`upper_bounds`: the row groups' exact min/max statistics merged per field.
//!   A field gets no bound if any row group with values lacks an exact one (missing or
//!   truncated means "unknown", so a bound from the other row groups could be wrong). Parquet statistics use the plain encoding, which
//!   is Iceberg's single-value serialization for every type but decimals stored as INT32/INT64.
//! - `nan_value_counts`: Parquet keeps no NaN count, so the writer counts NaNs in the batches it
//!   encodes ([`count_nans`]); every float and double field gets an entry, as in the iceberg
//!   crate's writer.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use arrow::record_batch::RecordBatch;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, PrimitiveType, Schema,
    Struct,
};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;

use crate::base::error::{Error, Result};
use crate::write::conform::field_id;

/// Where a data file goes and what it belongs to.
#[derive(Debug, Clone)]
pub struct FilePlacement {
    pub path: String,
    pub partition: Struct,
    pub spec_id: i32,
}

/// Adds the NaN counts of `batch`'s float and double columns (at any depth) to `counts`,
/// keyed by Iceberg field id (from the Arrow field metadata).
pub fn count_nans(batch: &RecordBatch, counts: &mut HashMap<i32, u64>) {
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        count_field(field, column, counts);
    }
}

fn count_field(field: &arrow_schema::Field, array: &ArrayRef, counts: &mut HashMap<i32, u64>) {
    match array.data_type() {
        DataType::Float32 | DataType::Float64 => {
            let Some(id) = field_id(field) else { return };
            let nans = match array.data_type() {
                DataType::Float32 => array
                    .as_primitive::<Float32Type>()
                    .iter()
                    .filter(|v| v.is_some_and(f32::is_nan))
                    .count(),
                _ => array
                    .as_primitive::<Float64Type>()
                    .iter()
                    .filter(|v| v.is_some_and(f64::is_nan))
                    .count(),
            };
            *counts.entry(id).or_insert(0) += nans as u64;
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            for (f, c) in fields.iter().zip(s.columns()) {
                count_field(f, c, counts);
            }
        }
        DataType::List(f) => count_field(f, array.as_list::<i32>().values(), counts),
        DataType::LargeList(f) => count_field(f, array.as_list::<i64>().values(), counts),
        DataType::FixedSizeList(f, _) => {
            count_field(f, array.as_fixed_size_list().values(), counts)
        }
        DataType::Map(entries, _) => {
            let m = array.as_map();
            if let DataType::Struct(kv) = entries.data_type() {
                count_field(&kv[0], m.keys(), counts);
                count_field(&kv[1], m.values(), counts);
            }
        }
        _ => {}
    }
}

/// The bound a Parquet statistic gives for an Iceberg primitive type, or `None` when the
/// statistic is absent or its physical type does not carry that Iceberg type.
fn bound(ty: &PrimitiveType, stats: &Statistics, min: bool) -> Result<Option<Datum>> {
    use PrimitiveType as P;
    // A truncated statistic (long strings and binaries) is not the value itself: like the
    // iceberg crate's writer, keep no bound. Unlike it, the whole file then has no bound for
    // the column (see `merge`), where taking the other row groups' exact values could give an
    // upper bound below a value of the truncated row group.
    let exact = if min {
        stats.min_is_exact()
    } else {
        stats.max_is_exact()
    };
    if !exact {
        return Ok(None);
    }
    let bytes: Option<Vec<u8>> = match (ty, stats) {
        // INT32/INT64 decimals: the unscaled value, re-serialized big-endian (Appendix D).
        (P::Decimal { .. }, Statistics::Int32(s)) => {
            let v = if min { s.min_opt() } else { s.max_opt() };
            v.map(|v| i128::from(*v).to_be_bytes().to_vec())
        }
        (P::Decimal { .. }, Statistics::Int64(s)) => {
            let v = if min { s.min_opt() } else { s.max_opt() };
            v.map(|v| i128::from(*v).to_be_bytes().to_vec())
        }
        (P::Boolean, Statistics::Boolean(_))
        | (P::Int | P::Date, Statistics::Int32(_))
        | (
            P::Long | P::Time | P::Timestamp | P::Timestamptz | P::TimestampNs | P::TimestamptzNs,
            Statistics::Int64(_),
        )
        | (P::Float, Statistics::Float(_))
        | (P::Double, Statistics::Double(_))
        | (P::String | P::Binary | P::Decimal { .. }, Statistics::ByteArray(_))
        | (P::Fixed(_) | P::Uuid | P::Decimal { .. }, Statistics::FixedLenByteArray(_)) => {
            let b = if min {
                stats.min_bytes_opt()
            } else {
                stats.max_bytes_opt()
            };
            b.map(<[u8]>::to_vec)
        }
        _ => None,
    };
    match bytes {
        None => Ok(None),
        Some(b) => Datum::try_from_bytes(&b, ty.clone())
            .map(Some)
            .map_err(|e| {
                Error::Io(std::io::Error::other(format!(
                    "cannot read a Parquet {} statistic as Iceberg {ty}: {e}",
                    if min { "min" } else { "max" }
                )))
            }),
    }
}

/// Builds the `DataFile` of a Parquet file from its footer metadata.
pub fn data_file_from_parquet(
    schema: &Schema,
    metadata: &ParquetMetaData,
    file_size_in_bytes: u64,
    placement: FilePlacement,
    nan_value_counts: HashMap<i32, u64>,
) -> Result<DataFile> {
    let mut column_sizes: HashMap<i32, u64> = HashMap::new();
    let mut value_counts: HashMap<i32, u64> = HashMap::new();
    let mut null_counts: HashMap<i32, Option<u64>> = HashMap::new();
    let mut lower: HashMap<i32, Option<Datum>> = HashMap::new();
    let mut upper: HashMap<i32, Option<Datum>> = HashMap::new();
    for rg in metadata.row_groups() {
        for col in rg.columns() {
            let info = col.column_descr().self_type().get_basic_info();
            if !info.has_id() {
                continue;
            }
            let id = info.id();
            let Some(field) = schema.field_by_id(id) else {
                continue;
            };
            let Some(ty) = field.field_type.as_primitive_type() else {
                continue;
            };
            *column_sizes.entry(id).or_insert(0) += col.compressed_size() as u64;
            *value_counts.entry(id).or_insert(0) += col.num_values() as u64;
            let stats = col.statistics();
            let nulls = stats.and_then(Statistics::null_count_opt);
            let entry = null_counts.entry(id).or_insert(Some(0));
            *entry = match (*entry, nulls) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            // A row group of only nulls has no min/max and does not constrain the bounds.
            let all_null = nulls == Some(col.num_values() as u64);
            if all_null {
                continue;
            }
            let (lo, hi) = match stats {
                Some(s) => (bound(ty, s, true)?, bound(ty, s, false)?),
                None => (None, None),
            };
            merge(&mut lower, id, lo, |new, old| new < old);
            merge(&mut upper, id, hi, |new, old| new > old);
        }
    }
    let known = |m: HashMap<i32, Option<Datum>>| -> HashMap<i32, Datum> {
        m.into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    };
    let mut builder = DataFileBuilder::default();
    builder
        .content(DataContentType::Data)
        .file_path(placement.path)
        .file_format(DataFileFormat::Parquet)
        .partition(placement.partition)
        .partition_spec_id(placement.spec_id)
        .record_count(metadata.file_metadata().num_rows() as u64)
        .file_size_in_bytes(file_size_in_bytes)
        .column_sizes(column_sizes)
        .value_counts(value_counts)
        .null_value_counts(
            null_counts
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect(),
        )
        .nan_value_counts(nan_value_counts)
        .lower_bounds(known(lower))
        .upper_bounds(known(upper))
        .split_offsets(Some(
            metadata
                .row_groups()
                .iter()
                .filter_map(|rg| rg.file_offset())
                .collect(),
        ));
    builder
        .build()
        .map_err(|e| Error::Io(std::io::Error::other(format!("data file metadata: {e}"))))
}

/// Merges one row group's bound into the file's: `None` (unknown) in any row group makes the
/// file's bound unknown.
fn merge(
    acc: &mut HashMap<i32, Option<Datum>>,
    id: i32,
    value: Option<Datum>,
    better: impl Fn(&Datum, &Datum) -> bool,
) {
    match acc.get_mut(&id) {
        None => {
            acc.insert(id, value);
        }
        Some(slot) => {
            *slot = match (slot.take(), value) {
                (Some(old), Some(new)) => Some(if better(&new, &old) { new } else { old }),
                _ => None,
            };
        }
    }
}

/// Re-derives the metrics of files with more than one row group from their footers.
///
/// The iceberg crate's writer (0.10) skips a row group's truncated (inexact) max but keeps the
/// other row groups' exact ones, so a file whose first row group holds a long string can get an
/// upper bound below that string, and a scan filtering on it would skip the file. Only files of
/// several row groups (over ~1M rows with the default row-group size) are affected; each costs
/// one footer read.
pub async fn exact_metrics(
    file_io: &iceberg::io::FileIO,
    schema: &Schema,
    spec_id: i32,
    files: Vec<DataFile>,
) -> Result<Vec<DataFile>> {
    use parquet::arrow::async_reader::AsyncFileReader;
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        if f.split_offsets().map_or(0, <[i64]>::len) <= 1 {
            out.push(f);
            continue;
        }
        let input = file_io.new_input(f.file_path())?;
        let meta = input.metadata().await?;
        let mut reader = iceberg::arrow::ArrowFileReader::new(meta, input.reader().await?);
        let footer = reader.get_metadata(None).await?;
        out.push(data_file_from_parquet(
            schema,
            &footer,
            f.file_size_in_bytes(),
            FilePlacement {
                path: f.file_path().to_string(),
                partition: f.partition().clone(),
                spec_id,
            },
            f.nan_value_counts().clone(),
        )?);
    }
    Ok(out)
}
