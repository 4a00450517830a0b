//! Arrow arrays from Iceberg partition tuples.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array,
    Float32Array, Float64Array, Int32Array, Int64Array, StringArray, StructArray,
    Time64MicrosecondArray, TimestampMicrosecondArray, TimestampNanosecondArray,
};
use arrow_schema::{DataType, Field, Fields, TimeUnit};
use iceberg::spec::{Literal, PrimitiveLiteral, Struct, StructType};
use iceberg::table::Table;

use crate::base::error::Result;

fn prim(v: &Option<Literal>) -> Option<&PrimitiveLiteral> {
    match v {
        Some(Literal::Primitive(p)) => Some(p),
        _ => None,
    }
}

fn int(p: Option<&PrimitiveLiteral>) -> Option<i32> {
    match p? {
        PrimitiveLiteral::Int(v) => Some(*v),
        _ => None,
    }
}

fn long(p: Option<&PrimitiveLiteral>) -> Option<i64> {
    match p? {
        PrimitiveLiteral::Long(v) => Some(*v),
        PrimitiveLiteral::Int(v) => Some(*v as i64),
        _ => None,
    }
}

/// Builds one Arrow array of `ty` from literals.
pub fn literal_array(ty: &DataType, values: &[Option<&PrimitiveLiteral>]) -> ArrayRef {
    let v = values;
    match ty {
        DataType::Boolean => Arc::new(BooleanArray::from(
            v.iter()
                .map(|p| match p {
                    Some(PrimitiveLiteral::Boolean(b)) => Some(*b),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )),
        DataType::Int32 => Arc::new(Int32Array::from(
            v.iter().map(|p| int(*p)).collect::<Vec<_>>(),
        )),
        DataType::Date32 => Arc::new(Date32Array::from(
            v.iter().map(|p| int(*p)).collect::<Vec<_>>(),
        )),
        DataType::Int64 => Arc::new(Int64Array::from(
            v.iter().map(|p| long(*p)).collect::<Vec<_>>(),
        )),
        DataType::Float32 => Arc::new(Float32Array::from(
            v.iter()
                .map(|p| match p {
                    Some(PrimitiveLiteral::Float(f)) => Some(f.0),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )),
        DataType::Float64 => Arc::new(Float64Array::from(
            v.iter()
                .map(|p| match p {
                    Some(PrimitiveLiteral::Double(f)) => Some(f.0),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )),
        DataType::Utf8 => Arc::new(StringArray::from(
            v.iter()
                .map(|p| match p {
                    Some(PrimitiveLiteral::String(s)) => Some(s.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )),
        DataType::Binary => Arc::new(BinaryArray::from(
            v.iter()
                .map(|p| match p {
                    Some(PrimitiveLiteral::Binary(b)) => Some(b.as_slice()),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )),
        // `fixed(L)` and `uuid` (16 bytes, big-endian as Iceberg's single-value form writes
        // it); a value of another length is null rather than a failed table.
        DataType::FixedSizeBinary(n) => {
            let bytes: Vec<Option<Vec<u8>>> = v
                .iter()
                .map(|p| match p {
                    Some(PrimitiveLiteral::Binary(b)) => Some(b.clone()),
                    Some(PrimitiveLiteral::UInt128(u)) => Some(u.to_be_bytes().to_vec()),
                    _ => None,
                })
                .map(|b| b.filter(|b| b.len() == *n as usize))
                .collect();
            match arrow::array::FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                bytes.into_iter(),
                *n,
            ) {
                Ok(a) => Arc::new(a),
                Err(_) => new_null_array(ty, v.len()),
            }
        }
        DataType::Decimal128(precision, scale) => {
            let a = Decimal128Array::from(
                v.iter()
                    .map(|p| match p {
                        Some(PrimitiveLiteral::Int128(d)) => Some(*d),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            );
            match a.clone().with_precision_and_scale(*precision, *scale) {
                Ok(a) => Arc::new(a),
                Err(_) => Arc::new(a),
            }
        }
        DataType::Time64(TimeUnit::Microsecond) => Arc::new(Time64MicrosecondArray::from(
            v.iter().map(|p| long(*p)).collect::<Vec<_>>(),
        )),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => Arc::new(
            TimestampMicrosecondArray::from(v.iter().map(|p| long(*p)).collect::<Vec<_>>())
                .with_timezone_opt(tz.clone()),
        ),
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => Arc::new(
            TimestampNanosecondArray::from(v.iter().map(|p| long(*p)).collect::<Vec<_>>())
                .with_timezone_opt(tz.clone()),
        ),
        other => new_null_array(other, v.len()),
    }
}

/// The `partition` column (a struct of the table's partition fields), or a null-free empty
/// marker when the table is unpartitioned. Tuples of other specs are matched by field id.
pub fn partition_column(
    ptype: &StructType,
    partitions: &[&Struct],
    table: &Table,
    spec_ids: impl Iterator<Item = i32>,
) -> Result<(Field, ArrayRef)> {
    let md = table.metadata();
    let spec_ids: Vec<i32> = spec_ids.collect();
    // field id -> position, per spec.
    let mut positions: HashMap<i32, HashMap<i32, usize>> = HashMap::new();
    for id in spec_ids.iter().copied() {
        positions.entry(id).or_insert_with(|| {
            md.partition_spec_by_id(id)
                .map(|s| {
                    s.fields()
                        .iter()
                        .enumerate()
                        .map(|(i, f)| (f.field_id, i))
                        .collect()
                })
                .unwrap_or_default()
        });
    }
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for pf in ptype.fields() {
        let ty = iceberg::arrow::type_to_arrow_type(&pf.field_type)?;
        let values: Vec<Option<&PrimitiveLiteral>> = partitions
            .iter()
            .zip(&spec_ids)
            .map(|(p, sid)| {
                positions
                    .get(sid)
                    .and_then(|m| m.get(&pf.id))
                    .and_then(|&i| p.fields().get(i))
                    .and_then(prim)
            })
            .collect();
        arrays.push(literal_array(&ty, &values));
        fields.push(Field::new(pf.name.clone(), ty, true));
    }
    let len = partitions.len();
    let array: ArrayRef = if fields.is_empty() {
        Arc::new(StructArray::new_empty_fields(len, None))
    } else {
        Arc::new(StructArray::try_new(
            Fields::from(fields.clone()),
            arrays,
            None,
        )?)
    };
    Ok((
        Field::new("partition", array.data_type().clone(), false),
        array,
    ))
}
