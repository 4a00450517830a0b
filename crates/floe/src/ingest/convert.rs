//! Conversion of decoded columns to a table's Arrow schema, naming the first bad value.
//!
//! Source columns are matched to table columns by name (exact, then case-insensitive); missing
//! optional columns become nulls. Values are cast with Arrow's cast kernels; a value that was
//! present but did not cast, or a null in a required column, is an [`Error::BadRecord`] with the
//! file, the line/row, the column and the value.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, SchemaRef};

use crate::error::{Error, Result};

/// Where a batch came from, to name bad records.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: String,
    /// "line" for text formats (1-based, counting a CSV header), "row" for Parquet (0-based).
    pub unit: &'static str,
    /// Unit number of the batch's first record.
    pub first: u64,
}

impl Origin {
    fn at(&self, i: usize) -> String {
        format!("{} {}", self.unit, self.first + i as u64)
    }
}

fn value_at(a: &dyn Array, i: usize) -> String {
    let opts = FormatOptions::default().with_null("null");
    match ArrayFormatter::try_new(a, &opts) {
        Ok(f) => {
            let s = f.value(i).to_string();
            let s: String = s.chars().take(80).collect();
            if matches!(
                a.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                format!("'{s}'")
            } else {
                s
            }
        }
        Err(_) => "?".into(),
    }
}

/// Converts `batch` (any column types, matched by name) to `target`.
pub fn conform(batch: &RecordBatch, target: &SchemaRef, origin: &Origin) -> Result<RecordBatch> {
    let src = batch.schema();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let idx = src.index_of(field.name()).ok().or_else(|| {
            src.fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(field.name()))
        });
        let Some(idx) = idx else {
            if !field.is_nullable() && batch.num_rows() > 0 {
                return Err(Error::BadRecord {
                    file: origin.file.clone(),
                    location: origin.at(0),
                    column: field.name().clone(),
                    value: "missing".into(),
                    reason: "required column is not in the input".into(),
                });
            }
            columns.push(new_null_array(field.data_type(), batch.num_rows()));
            continue;
        };
        let input = batch.column(idx);
        let input = blank_strings_to_null(input, field.data_type())?;
        let out = if input.data_type() == field.data_type() {
            input.clone()
        } else {
            let opts = CastOptions {
                safe: true,
                ..Default::default()
            };
            let out = cast_with_options(&input, field.data_type(), &opts).map_err(|e| {
                Error::BadRecord {
                    file: origin.file.clone(),
                    location: origin.at(0),
                    column: field.name().clone(),
                    value: format!("of type {}", input.data_type()),
                    reason: format!("cannot convert to {}: {e}", field.data_type()),
                }
            })?;
            if out.null_count() != input.null_count() {
                if let Some(i) = (0..input.len()).find(|&i| input.is_valid(i) && out.is_null(i)) {
                    return Err(Error::BadRecord {
                        file: origin.file.clone(),
                        location: origin.at(i),
                        column: field.name().clone(),
                        value: value_at(input.as_ref(), i),
                        reason: format!("not a valid {}", field.data_type()),
                    });
                }
            }
            out
        };
        if !field.is_nullable() && out.null_count() > 0 {
            let i = (0..out.len()).find(|&i| out.is_null(i)).unwrap_or(0);
            return Err(Error::BadRecord {
                file: origin.file.clone(),
                location: origin.at(i),
                column: field.name().clone(),
                value: "null".into(),
                reason: "required column is null".into(),
            });
        }
        columns.push(out);
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        columns,
        &opts,
    )?)
}

/// Empty strings in a text column that becomes a non-string type mean "no value" (CSV habit).
fn blank_strings_to_null(a: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if matches!(
        to,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        return Ok(a.clone());
    }
    let Some(s) = a.as_any().downcast_ref::<arrow::array::StringArray>() else {
        return Ok(a.clone());
    };
    if !s.iter().any(|v| v.is_some_and(|v| v.trim().is_empty())) {
        return Ok(a.clone());
    }
    let cleaned: arrow::array::StringArray = s
        .iter()
        .map(|v| {
            v.and_then(|v| {
                if v.trim().is_empty() {
                    None
                } else {
                    Some(v.trim())
                }
            })
        })
        .collect();
    Ok(Arc::new(cleaned))
}
