//! Conversion of decoded input columns (CSV text, Parquet) to a table's Arrow schema, naming
//! the first bad value.
//!
//! Input columns are matched to table columns by name (exact, then the one column equal up to
//! ASCII case); missing optional columns become nulls; two input columns matching one table
//! column, or an input with none of the table's columns, is an error (either would drop data
//! silently). Values go through the checked conversions of [`crate::records::value`], the same
//! rules NDJSON records follow; an input column already of the column's exact type is kept as
//! is. A value that does not fit, or a null in a required column, is an [`Error::BadRecord`]
//! with the file, the line/row, the column and the value.

use arrow::array::{new_null_array, Array, ArrayRef, AsArray};
use arrow::datatypes::Decimal128Type;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow_schema::DataType;

use crate::base::error::{Error, Result};
use crate::records::value::{arrow_value, build, match_columns, BadValue, Cell, Node, Plan};

pub use crate::records::value::TextSource;

/// Where a batch came from, to name bad records.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: String,
    /// "line" for text formats (1-based, counting a CSV header), "row" for Parquet (1-based, as a reader counts).
    pub unit: &'static str,
    /// Unit number of the batch's first record.
    pub first: u64,
    /// How text columns are read (CSV: a blank field is null, a NUL byte is bad).
    pub text: TextSource,
}

impl Origin {
    fn at(&self, i: usize) -> String {
        format!("{} {}", self.unit, self.first + i as u64)
    }
}

/// Converts `batch` (any column types, matched by name) to the table of `plan`.
pub fn conform(batch: &RecordBatch, plan: &Plan, origin: &Origin) -> Result<RecordBatch> {
    let src = batch.schema();
    let input_error = |reason: String| Error::InputFile {
        path: origin.file.clone().into(),
        reason,
    };
    let map = match_columns(&plan.cols, src.fields()).map_err(input_error)?;
    if !src.fields().is_empty() && !plan.cols.nodes.is_empty() && map.iter().all(Option::is_none) {
        let names = |it: &mut dyn Iterator<Item = &String>| {
            it.take(10).cloned().collect::<Vec<_>>().join(", ")
        };
        return Err(input_error(format!(
            "none of its columns ({}) is a column of the table ({})",
            names(&mut src.fields().iter().map(|f| f.name())),
            names(&mut plan.cols.fields.iter().map(|f| f.name())),
        )));
    }
    // The first bad value by row, over all columns.
    let mut first: Option<(usize, BadValue)> = None;
    let mut keep = |row: usize, bad: BadValue| {
        if first.as_ref().is_none_or(|(r, _)| row < *r) {
            first = Some((row, bad));
        }
    };
    if origin.text == TextSource::Csv {
        for (j, f) in src.fields().iter().enumerate() {
            if let Some(s) = batch.column(j).as_string_opt::<i32>() {
                if let Some(i) = (0..s.len()).find(|&i| s.is_valid(i) && s.value(i).contains('\0'))
                {
                    keep(
                        i,
                        BadValue {
                            column: f.name().clone(),
                            value: crate::records::value::show(s, i),
                            reason: "contains a NUL byte".into(),
                        },
                    );
                }
            }
        }
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(plan.cols.nodes.len());
    for (node, from) in plan.cols.nodes.iter().zip(&map) {
        let out = match from {
            None if !node.field.is_nullable() && batch.num_rows() > 0 => {
                keep(
                    0,
                    BadValue {
                        column: node.field.name().clone(),
                        value: "missing".into(),
                        reason: "required column is not in the input".into(),
                    },
                );
                continue;
            }
            None => new_null_array(node.field.data_type(), batch.num_rows()),
            Some(j) => match convert_column(node, batch.column(*j), origin.text)? {
                Ok(a) => a,
                Err((row, bad)) => {
                    keep(row, bad);
                    continue;
                }
            },
        };
        columns.push(out);
    }
    if let Some((row, bad)) = first {
        return Err(Error::BadRecord {
            file: origin.file.clone(),
            location: origin.at(row),
            column: bad.column,
            value: bad.value,
            reason: bad.reason,
        });
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        plan.schema.clone(),
        columns,
        &opts,
    )?)
}

type Converted = std::result::Result<ArrayRef, (usize, BadValue)>;

/// One input column in `node`'s type: `Ok(Err((row, bad)))` names the first bad value.
fn convert_column(node: &Node, input: &ArrayRef, text: TextSource) -> Result<Converted> {
    let input: ArrayRef = match input.data_type() {
        // Unpacking a dictionary is lossless.
        DataType::Dictionary(_, v) => arrow::compute::cast(input, v)?,
        _ => input.clone(),
    };
    let name = node.field.name();
    if input.data_type() == node.field.data_type() {
        if !node.field.is_nullable() && input.null_count() > 0 {
            let i = (0..input.len()).find(|&i| input.is_null(i)).unwrap_or(0);
            return Ok(Err((
                i,
                BadValue {
                    column: name.clone(),
                    value: "null".into(),
                    reason: "required column is missing or null".into(),
                },
            )));
        }
        // A Parquet decimal's values are not checked against its precision by the reader.
        if let DataType::Decimal128(p, s) = input.data_type() {
            let d = input.as_primitive::<Decimal128Type>();
            if let Some(i) = (0..d.len()).find(|&i| {
                d.is_valid(i)
                    && !<Decimal128Type as arrow::datatypes::DecimalType>::is_valid_decimal_precision(
                        d.value(i),
                        *p,
                    )
            }) {
                return Ok(Err((
                    i,
                    BadValue {
                        column: name.clone(),
                        value: crate::records::value::show(d, i),
                        reason: format!(
                            "out of range for decimal({p},{s}) (at most {} digit(s) before the decimal point)",
                            *p as i64 - *s as i64
                        ),
                    },
                )));
            }
        }
        return Ok(Ok(input));
    }
    let mut cells: Vec<Cell> = Vec::with_capacity(input.len());
    for i in 0..input.len() {
        match arrow_value(node, input.as_ref(), i, text) {
            Ok(c) => cells.push(c),
            Err(b) => return Ok(Err((i, b.under(name)))),
        }
    }
    let refs: Vec<&Cell> = cells.iter().collect();
    Ok(Ok(build(node, &refs)?))
}
