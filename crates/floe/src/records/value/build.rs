//! Building Arrow arrays from cells: one array per column from one cell per row
//! ([`build`]), recursively for lists, structs and maps, and a record batch of a table's
//! columns ([`build_batch`]).

use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, FixedSizeBinaryArray,
    GenericStringArray, GenericStringBuilder, LargeBinaryArray, LargeListArray, ListArray,
    MapArray, OffsetSizeTrait, PrimitiveArray, StringViewArray, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
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

fn prim<T: ArrowPrimitiveType>(
    cells: &[&Cell],
    dt: &DataType,
    f: impl Fn(&Cell) -> Option<T::Native>,
) -> ArrayRef {
    Arc::new(
        cells
            .iter()
            .map(|c| f(c))
            .collect::<PrimitiveArray<T>>()
            .with_data_type(dt.clone()),
    )
}

fn build_leaf(dt: &DataType, cells: &[&Cell]) -> Result<ArrayRef> {
    let i32_of = |c: &Cell| match c {
        Cell::I32(v) => Some(*v),
        _ => None,
    };
    let i64_of = |c: &Cell| match c {
        Cell::I64(v) => Some(*v),
        _ => None,
    };
    Ok(match dt {
        DataType::Boolean => Arc::new(
            cells
                .iter()
                .map(|c| match c {
                    Cell::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect::<BooleanArray>(),
        ),
        DataType::Int32 => prim::<Int32Type>(cells, dt, i32_of),
        DataType::Date32 => prim::<Date32Type>(cells, dt, i32_of),
        DataType::Int64 => prim::<Int64Type>(cells, dt, i64_of),
        DataType::Time64(TimeUnit::Microsecond) => prim::<Time64MicrosecondType>(cells, dt, i64_of),
        DataType::Time64(TimeUnit::Nanosecond) => prim::<Time64NanosecondType>(cells, dt, i64_of),
        DataType::Timestamp(TimeUnit::Second, _) => prim::<TimestampSecondType>(cells, dt, i64_of),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            prim::<TimestampMillisecondType>(cells, dt, i64_of)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            prim::<TimestampMicrosecondType>(cells, dt, i64_of)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            prim::<TimestampNanosecondType>(cells, dt, i64_of)
        }
        DataType::Float32 => prim::<Float32Type>(cells, dt, |c| match c {
            Cell::F32(v) => Some(*v),
            _ => None,
        }),
        DataType::Float64 => prim::<Float64Type>(cells, dt, |c| match c {
            Cell::F64(v) => Some(*v),
            _ => None,
        }),
        DataType::Decimal128(..) => prim::<Decimal128Type>(cells, dt, |c| match c {
            Cell::I128(v) => Some(*v),
            _ => None,
        }),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let it = cells.iter().map(|c| match c {
                Cell::Str(s) => Some(s.as_ref()),
                _ => None,
            });
            match dt {
                DataType::Utf8 => Arc::new(strings::<i32>(cells)),
                DataType::LargeUtf8 => Arc::new(strings::<i64>(cells)),
                _ => Arc::new(it.collect::<StringViewArray>()),
            }
        }
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

/// A string array of `cells`, its buffers sized once (collecting grows the value buffer by
/// doubling, copying it each time).
fn strings<O: OffsetSizeTrait>(cells: &[&Cell]) -> GenericStringArray<O> {
    let bytes = cells
        .iter()
        .map(|c| match c {
            Cell::Str(s) => s.len(),
            _ => 0,
        })
        .sum();
    let mut b = GenericStringBuilder::<O>::with_capacity(cells.len(), bytes);
    for c in cells {
        match c {
            Cell::Str(s) => b.append_value(s),
            _ => b.append_null(),
        }
    }
    b.finish()
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
