//! Building Arrow arrays from cells: one array per column from one cell per row
//! ([`build`]), recursively for lists, structs and maps, and a record batch of a table's
//! columns ([`build_batch`]). Columns of one value per row (numbers, booleans, dates, times,
//! timestamps, strings) are built in typed buffers ([`Sink`]), which the NDJSON decoder
//! also writes straight into as it reads.

use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayBuilder, ArrayRef, ArrowPrimitiveType, BinaryArray, BinaryViewArray,
    BooleanBuilder, FixedSizeBinaryArray, GenericStringBuilder, LargeBinaryArray, LargeListArray,
    LargeStringBuilder, ListArray, MapArray, NullBufferBuilder, OffsetSizeTrait, PrimitiveArray,
    StringBuilder, StringViewArray, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, SchemaRef, TimeUnit};

use super::{Cell, Columns, Kind, Node};
use crate::base::error::{Error, Result};

fn nulls_of(cells: &[&Cell]) -> Option<NullBuffer> {
    if cells.iter().any(|c| matches!(c, Cell::Null)) {
        Some(NullBuffer::from(
            cells
                .iter()
                .map(|c| !matches!(c, Cell::Null))
                .collect::<Vec<_>>(),
        ))
    } else {
        None
    }
}

fn build_leaf(dt: &DataType, cells: &[&Cell]) -> Result<ArrayRef> {
    // Numbers, booleans, dates, times, timestamps and strings: the decoder's typed buffers.
    if let Some(mut sink) = Sink::of_type(dt, cells.len()) {
        for c in cells {
            // A cell of another kind (the conversions never make one) is stored as null.
            sink.push_ref(if sink.fits(c) { c } else { &Cell::Null });
        }
        return sink.finish_typed(dt);
    }
    Ok(match dt {
        DataType::Utf8View => Arc::new(
            cells
                .iter()
                .map(|c| match c {
                    Cell::Str(s) => Some(s.as_ref()),
                    _ => None,
                })
                .collect::<StringViewArray>(),
        ),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let it = cells.iter().map(|c| match c {
                Cell::Bytes(b) => Some(b.as_ref()),
                _ => None,
            });
            match dt {
                DataType::Binary => Arc::new(it.collect::<BinaryArray>()),
                DataType::LargeBinary => Arc::new(it.collect::<LargeBinaryArray>()),
                _ => Arc::new(it.collect::<BinaryViewArray>()),
            }
        }
        DataType::FixedSizeBinary(n) => {
            let it = cells.iter().map(|c| match c {
                Cell::Bytes(b) => Some(b.as_ref()),
                _ => None,
            });
            Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                it, *n,
            )?)
        }
        other => {
            if cells.iter().any(|c| **c != Cell::Null) {
                return Err(Error::Arrow(arrow_schema::ArrowError::NotYetImplemented(
                    format!("values of column type {other}"),
                )));
            }
            new_null_array(other, cells.len())
        }
    })
}

/// Builds the array of `node` from one cell per row.
pub(crate) fn build(node: &Node, cells: &[&Cell]) -> Result<ArrayRef> {
    let dt = node.field.data_type();
    Ok(match (&node.kind, dt) {
        (Kind::Leaf(_), _) => build_leaf(dt, cells)?,
        (Kind::List(child), DataType::List(f) | DataType::LargeList(f)) => {
            let empty: Vec<Cell> = Vec::new();
            let items = |c: &&Cell| -> usize {
                match c {
                    Cell::List(v) => v.len(),
                    _ => 0,
                }
            };
            let flat: Vec<&Cell> = cells
                .iter()
                .flat_map(|c| match c {
                    Cell::List(v) => v.iter(),
                    _ => empty.iter(),
                })
                .collect();
            let values = build(child, &flat)?;
            let nulls = nulls_of(cells);
            if matches!(dt, DataType::List(_)) {
                let offsets = OffsetBuffer::<i32>::from_lengths(cells.iter().map(items));
                Arc::new(ListArray::try_new(f.clone(), offsets, values, nulls)?)
            } else {
                let offsets = OffsetBuffer::<i64>::from_lengths(cells.iter().map(items));
                Arc::new(LargeListArray::try_new(f.clone(), offsets, values, nulls)?)
            }
        }
        (Kind::Struct(cols), DataType::Struct(fields)) => {
            let nulls = nulls_of(cells);
            if fields.is_empty() {
                Arc::new(StructArray::new_empty_fields(cells.len(), nulls))
            } else {
                let children = cols
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(k, n)| {
                        let col: Vec<&Cell> = cells
                            .iter()
                            .map(|c| match c {
                                Cell::Struct(v) => &v[k],
                                _ => &Cell::Null,
                            })
                            .collect();
                        build(n, &col)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(StructArray::try_new(fields.clone(), children, nulls)?)
            }
        }
        (Kind::Map(entries, key, value), DataType::Map(_, sorted)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                unreachable!("checked in Node::new")
            };
            let pairs: Vec<&(Cell, Cell)> = cells
                .iter()
                .flat_map(|c| match c {
                    Cell::Map(v) => v.as_slice(),
                    _ => &[],
                })
                .collect();
            let keys: Vec<&Cell> = pairs.iter().map(|(k, _)| k).collect();
            let vals: Vec<&Cell> = pairs.iter().map(|(_, v)| v).collect();
            let entries_array = StructArray::try_new(
                kv.clone(),
                vec![build(key, &keys)?, build(value, &vals)?],
                None,
            )?;
            let offsets = OffsetBuffer::<i32>::from_lengths(cells.iter().map(|c| match c {
                Cell::Map(v) => v.len(),
                _ => 0,
            }));
            Arc::new(MapArray::try_new(
                entries.clone(),
                offsets,
                entries_array,
                nulls_of(cells),
                *sorted,
            )?)
        }
        _ => build_leaf(dt, cells)?,
    })
}

/// Builds a batch of `cols` (a table schema) from rows of cells.
pub(crate) fn build_batch(
    schema: &SchemaRef,
    cols: &Columns,
    rows: &[Vec<Cell>],
) -> Result<RecordBatch> {
    let columns = cols
        .nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let col: Vec<&Cell> = rows.iter().map(|r| &r[k]).collect();
            build(n, &col)
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &opts,
    )?)
}

/// One column's values as they are decoded.
pub(crate) enum Sink<'a> {
    Bool(BooleanBuilder),
    I32(Vec<i32>, NullBufferBuilder),
    I64(Vec<i64>, NullBufferBuilder),
    F32(Vec<f32>, NullBufferBuilder),
    F64(Vec<f64>, NullBufferBuilder),
    I128(Vec<i128>, NullBufferBuilder),
    Utf8(StringBuilder),
    LargeUtf8(LargeStringBuilder),
    /// Nested and binary columns: their cells, built at the end.
    Cells(Vec<Cell<'a>>),
}

impl<'a> Sink<'a> {
    /// The sink of `node`'s column, for about `rows` values.
    pub(super) fn new(node: &Node, rows: usize) -> Self {
        match node.kind {
            Kind::Leaf(_) => Self::of_type(node.field.data_type(), rows),
            _ => None,
        }
        .unwrap_or_else(|| Sink::Cells(Vec::with_capacity(rows)))
    }

    /// A typed sink for about `rows` values of `dt`, if `dt` has one (not binary, fixed or
    /// nested types, which keep their cells).
    fn of_type(dt: &DataType, rows: usize) -> Option<Self> {
        let nulls = || NullBufferBuilder::new(rows);
        Some(match dt {
            DataType::Boolean => Sink::Bool(BooleanBuilder::with_capacity(rows)),
            DataType::Int32 | DataType::Date32 => Sink::I32(Vec::with_capacity(rows), nulls()),
            DataType::Int64
            | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
            | DataType::Timestamp(..) => Sink::I64(Vec::with_capacity(rows), nulls()),
            DataType::Float32 => Sink::F32(Vec::with_capacity(rows), nulls()),
            DataType::Float64 => Sink::F64(Vec::with_capacity(rows), nulls()),
            DataType::Decimal128(..) => Sink::I128(Vec::with_capacity(rows), nulls()),
            // The value buffer grows as strings come (a large buffer grows in place).
            DataType::Utf8 => Sink::Utf8(StringBuilder::with_capacity(rows, 0)),
            DataType::LargeUtf8 => Sink::LargeUtf8(LargeStringBuilder::with_capacity(rows, 0)),
            _ => return None,
        })
    }

    /// Given the first values of about `rows`, sizes a string sink's value buffer for all of
    /// them at the bytes per value seen so far, plus a sixteenth: the buffer is then not grown
    /// by doubling, each growth a copy of everything before (a run's strings are megabytes).
    /// Other sinks were sized for `rows` values when made.
    pub(super) fn presize(&mut self, rows: usize) {
        fn again<O: OffsetSizeTrait>(b: &mut GenericStringBuilder<O>, rows: usize) {
            let (seen, bytes) = (b.len(), b.values_slice().len());
            if seen == 0 || bytes == 0 || rows <= seen {
                return;
            }
            let want = bytes.saturating_mul(rows) / seen;
            let mut fresh =
                GenericStringBuilder::<O>::with_capacity(rows, want.saturating_add(want / 16));
            let done = b.finish();
            fresh.extend(done.iter());
            *b = fresh;
        }
        match self {
            Sink::Utf8(b) => again(b, rows),
            Sink::LargeUtf8(b) => again(b, rows),
            _ => {}
        }
    }

    /// Whether `cell` is a value this sink stores (the conversions give each column type one
    /// kind of cell, so this holds by construction; it is checked so that a broken rule makes
    /// a bad record rather than a misplaced or lost value).
    pub(super) fn fits(&self, cell: &Cell) -> bool {
        matches!(
            (self, cell),
            (Sink::Cells(_), _)
                | (_, Cell::Null)
                | (Sink::Bool(_), Cell::Bool(_))
                | (Sink::I32(..), Cell::I32(_))
                | (Sink::I64(..), Cell::I64(_))
                | (Sink::F32(..), Cell::F32(_))
                | (Sink::F64(..), Cell::F64(_))
                | (Sink::I128(..), Cell::I128(_))
                | (Sink::Utf8(_) | Sink::LargeUtf8(_), Cell::Str(_))
        )
    }

    /// Appends `cell`, which [`Sink::fits`].
    pub(super) fn push(&mut self, cell: Cell<'a>) {
        match self {
            Sink::Cells(v) => v.push(cell),
            typed => typed.push_ref(&cell),
        }
    }

    /// Appends a copy of `cell`, which [`Sink::fits`], to a typed sink.
    fn push_ref(&mut self, cell: &Cell) {
        fn prim<T: Default + Copy>(v: &mut Vec<T>, n: &mut NullBufferBuilder, x: Option<&T>) {
            match x {
                Some(x) => {
                    v.push(*x);
                    n.append_non_null();
                }
                None => {
                    v.push(T::default());
                    n.append_null();
                }
            }
        }
        match (self, cell) {
            (Sink::Bool(b), Cell::Bool(x)) => b.append_value(*x),
            (Sink::Bool(b), Cell::Null) => b.append_null(),
            (Sink::I32(v, n), Cell::I32(x)) => prim(v, n, Some(x)),
            (Sink::I32(v, n), Cell::Null) => prim(v, n, None),
            (Sink::I64(v, n), Cell::I64(x)) => prim(v, n, Some(x)),
            (Sink::I64(v, n), Cell::Null) => prim(v, n, None),
            (Sink::F32(v, n), Cell::F32(x)) => prim(v, n, Some(x)),
            (Sink::F32(v, n), Cell::Null) => prim(v, n, None),
            (Sink::F64(v, n), Cell::F64(x)) => prim(v, n, Some(x)),
            (Sink::F64(v, n), Cell::Null) => prim(v, n, None),
            (Sink::I128(v, n), Cell::I128(x)) => prim(v, n, Some(x)),
            (Sink::I128(v, n), Cell::Null) => prim(v, n, None),
            (Sink::Utf8(b), Cell::Str(s)) => b.append_value(s),
            (Sink::Utf8(b), Cell::Null) => b.append_null(),
            (Sink::LargeUtf8(b), Cell::Str(s)) => b.append_value(s),
            (Sink::LargeUtf8(b), Cell::Null) => b.append_null(),
            // Not reached (see `fits`; cells go by `push`); appending nothing makes the
            // column short, which building the batch refuses, rather than storing a wrong
            // value.
            _ => {}
        }
    }

    /// The column's array.
    pub(super) fn finish(self, node: &Node) -> Result<ArrayRef> {
        match self {
            Sink::Cells(cells) => build(node, &cells.iter().collect::<Vec<_>>()),
            typed => typed.finish_typed(node.field.data_type()),
        }
    }

    /// The array of a typed sink, of type `dt` (the one it was made for).
    fn finish_typed(self, dt: &DataType) -> Result<ArrayRef> {
        fn prim<T: ArrowPrimitiveType>(
            v: Vec<T::Native>,
            mut n: NullBufferBuilder,
            dt: &DataType,
        ) -> ArrayRef {
            Arc::new(
                PrimitiveArray::<T>::new(ScalarBuffer::from(v), n.finish())
                    .with_data_type(dt.clone()),
            )
        }
        Ok(match (self, dt) {
            (Sink::Bool(mut b), _) => Arc::new(b.finish()),
            (Sink::I32(v, n), DataType::Int32) => prim::<Int32Type>(v, n, dt),
            (Sink::I32(v, n), DataType::Date32) => prim::<Date32Type>(v, n, dt),
            (Sink::I64(v, n), DataType::Int64) => prim::<Int64Type>(v, n, dt),
            (Sink::I64(v, n), DataType::Time64(TimeUnit::Microsecond)) => {
                prim::<Time64MicrosecondType>(v, n, dt)
            }
            (Sink::I64(v, n), DataType::Time64(TimeUnit::Nanosecond)) => {
                prim::<Time64NanosecondType>(v, n, dt)
            }
            (Sink::I64(v, n), DataType::Timestamp(TimeUnit::Second, _)) => {
                prim::<TimestampSecondType>(v, n, dt)
            }
            (Sink::I64(v, n), DataType::Timestamp(TimeUnit::Millisecond, _)) => {
                prim::<TimestampMillisecondType>(v, n, dt)
            }
            (Sink::I64(v, n), DataType::Timestamp(TimeUnit::Microsecond, _)) => {
                prim::<TimestampMicrosecondType>(v, n, dt)
            }
            (Sink::I64(v, n), DataType::Timestamp(TimeUnit::Nanosecond, _)) => {
                prim::<TimestampNanosecondType>(v, n, dt)
            }
            (Sink::F32(v, n), _) => prim::<Float32Type>(v, n, dt),
            (Sink::F64(v, n), _) => prim::<Float64Type>(v, n, dt),
            (Sink::I128(v, n), _) => prim::<Decimal128Type>(v, n, dt),
            (Sink::Utf8(mut b), _) => Arc::new(b.finish()),
            (Sink::LargeUtf8(mut b), _) => Arc::new(b.finish()),
            (_, dt) => {
                return Err(Error::Arrow(
                    arrow_schema::ArrowError::InvalidArgumentError(format!(
                        "a decoded column does not match its type {dt}"
                    )),
                ))
            }
        })
    }
}
