//! Batches into a table's schema by Iceberg field id, never by position.
//!
//! A batch carries the schema it was decoded or read in (each Arrow field names its Iceberg
//! field id in the `PARQUET:field_id` metadata). When the table's schema changed since (a
//! running ingest buffered rows before `table evolve-schema`, a file read in an older schema),
//! the batch is converted to the schema the write commits against (Iceberg spec, "Schema
//! Evolution": columns are matched by field id):
//!
//! - a column whose field id the target lacks (dropped) is left out;
//! - a target column the batch lacks (added) is null, and an added *required* column is an
//!   error naming it;
//! - a renamed column keeps its values (same id, new name);
//! - a widened type is cast (`int -> long`, `float -> double`, a decimal's precision raised,
//!   `date -> timestamp` is not a promotion and is refused), any other type change is an
//!   error naming the column;
//! - structs, lists and maps are converted field by field, at every depth.
//!
//! A batch already in the target schema is returned as it is (the common case costs a schema
//! comparison).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, LargeListArray, ListArray, MapArray, StructArray,
};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, FieldRef, Fields, SchemaRef};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::base::error::{Error, Result};

/// `batch` in `target` (an Arrow schema with Iceberg field ids), its columns matched by field id.
pub fn to_schema(batch: RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
    if batch.schema_ref() == target {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let schema = batch.schema();
    let columns = conform_fields(schema.fields(), batch.columns(), target.fields(), rows, "")?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        columns,
        &options,
    )?)
}

/// The Iceberg field id of an Arrow field, when it carries one.
pub(crate) fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// The columns of `target`, each taken from `source` by field id (by name for a source field
/// without an id), converted to the target's type. `path` names the parent for errors.
fn conform_fields(
    source: &Fields,
    columns: &[ArrayRef],
    target: &Fields,
    rows: usize,
    path: &str,
) -> Result<Vec<ArrayRef>> {
    let by_id: HashMap<i32, usize> = source
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((field_id(f)?, i)))
        .collect();
    let mut out = Vec::with_capacity(target.len());
    for t in target.iter() {
        let name = if path.is_empty() {
            t.name().clone()
        } else {
            format!("{path}.{}", t.name())
        };
        let found = match field_id(t) {
            Some(id) => by_id.get(&id).copied().or_else(|| {
                // Only a source field without any id may be matched by name.
                source
                    .iter()
                    .position(|s| field_id(s).is_none() && s.name() == t.name())
            }),
            None => source.iter().position(|s| s.name() == t.name()),
        };
        out.push(match found {
            Some(i) => conform_array(&columns[i], source[i].as_ref(), t, &name)?,
            None if t.is_nullable() => new_null_array(t.data_type(), rows),
            None => {
                return Err(Error::SchemaMismatch {
                    column: name,
                    reason: "the table requires this column and the rows do not have it"
                        .to_string(),
                })
            }
        });
    }
    Ok(out)
}

/// One column converted from `from`'s type to `to`'s.
fn conform_array(array: &ArrayRef, from: &Field, to: &FieldRef, name: &str) -> Result<ArrayRef> {
    if !to.is_nullable() && array.null_count() > 0 {
        return Err(Error::SchemaMismatch {
            column: name.to_string(),
            reason: format!(
                "the table requires a value and {} row(s) have none",
                array.null_count()
            ),
        });
    }
    let (a, b) = (from.data_type(), to.data_type());
    if a == b {
        return Ok(array.clone());
    }
    let mismatch = || Error::SchemaMismatch {
        column: name.to_string(),
        reason: format!("values of type {a} cannot be written as the table's type {b}"),
    };
    Ok(match (a, b) {
        (DataType::Struct(fs), DataType::Struct(ft)) => {
            let s = array.as_struct();
            let children = conform_fields(fs, s.columns(), ft, s.len(), name)?;
            Arc::new(StructArray::try_new(
                ft.clone(),
                children,
                s.nulls().cloned(),
            )?)
        }
        (DataType::List(ef), DataType::List(et)) => {
            let l = array.as_list::<i32>();
            let values = conform_array(l.values(), ef, et, &format!("{name}.element"))?;
            Arc::new(ListArray::try_new(
                et.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?)
        }
        (DataType::LargeList(ef), DataType::LargeList(et)) => {
            let l = array.as_list::<i64>();
            let values = conform_array(l.values(), ef, et, &format!("{name}.element"))?;
            Arc::new(LargeListArray::try_new(
                et.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?)
        }
        (DataType::Map(ef, _), DataType::Map(et, ordered)) => {
            let m = array.as_map();
            let entries: ArrayRef = Arc::new(m.entries().clone());
            let entries = conform_array(&entries, ef, et, name)?;
            Arc::new(MapArray::try_new(
                et.clone(),
                m.offsets().clone(),
                entries.as_struct().clone(),
                m.nulls().cloned(),
                *ordered,
            )?)
        }
        _ if promotion(a, b) => arrow::compute::cast(array, b)?,
        // The same type spelled with other field metadata (a nested field's id) is no change.
        _ if same_shape(a, b) => arrow::compute::cast(array, b).map_err(|_| mismatch())?,
        _ => return Err(mismatch()),
    })
}

/// Iceberg's type promotions (spec, "Schema Evolution"): int to long, float to double, and a
/// decimal's precision raised at the same scale.
fn promotion(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (DataType::Int32, DataType::Int64) | (DataType::Float32, DataType::Float64) => true,
        (DataType::Decimal128(p, s), DataType::Decimal128(p2, s2)) => s == s2 && p2 >= p,
        _ => false,
    }
}

/// Equal types apart from field names and metadata of nested fields.
fn same_shape(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::List(x), DataType::List(y))
        | (DataType::LargeList(x), DataType::LargeList(y)) => {
            same_shape(x.data_type(), y.data_type())
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow_schema::Schema;

    fn field(name: &str, t: DataType, nullable: bool, id: i32) -> Field {
        Field::new(name, t, nullable).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    }

    fn old_batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            field("id", DataType::Int32, false, 1),
            field("a", DataType::Utf8, true, 2),
            field("b", DataType::Utf8, true, 3),
            field("c", DataType::Utf8, true, 4),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec!["A1", "A2"])),
                Arc::new(StringArray::from(vec!["B1", "B2"])),
                Arc::new(StringArray::from(vec!["C1", "C2"])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_dropped_column_takes_its_values_with_it_and_the_others_keep_theirs() {
        let target = Arc::new(Schema::new(vec![
            field("id", DataType::Int32, false, 1),
            field("b", DataType::Utf8, true, 3),
            field("c", DataType::Utf8, true, 4),
        ]));
        let out = to_schema(old_batch(), &target).unwrap();
        let col = |i: usize| out.column(i).as_string::<i32>().value(0).to_string();
        assert_eq!((col(1), col(2)), ("B1".to_string(), "C1".to_string()));
    }

    #[test]
    fn an_added_column_is_null_a_renamed_one_keeps_its_values_and_a_widened_one_is_cast() {
        let target = Arc::new(Schema::new(vec![
            field("c", DataType::Utf8, true, 4),
            field("key", DataType::Int64, false, 1),
            field("renamed_b", DataType::Utf8, true, 3),
            field("new", DataType::Utf8, true, 5),
        ]));
        let out = to_schema(old_batch(), &target).unwrap();
        assert_eq!(out.column(0).as_string::<i32>().value(1), "C2");
        let ids = out.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ids.values().to_vec(), vec![1, 2]);
        assert_eq!(out.column(2).as_string::<i32>().value(0), "B1");
        assert_eq!(out.column(3).null_count(), 2);
    }

    #[test]
    fn a_required_column_the_rows_lack_or_a_narrowed_type_is_an_error_naming_it() {
        let added = Arc::new(Schema::new(vec![field("z", DataType::Utf8, false, 9)]));
        let e = to_schema(old_batch(), &added).unwrap_err().to_string();
        assert!(e.contains("'z'"), "{e}");
        let narrowed = Arc::new(Schema::new(vec![field("a", DataType::Int32, true, 2)]));
        let e = to_schema(old_batch(), &narrowed).unwrap_err().to_string();
        assert!(e.contains("'a'") && e.contains("Utf8"), "{e}");
    }

    #[test]
    fn struct_children_are_matched_by_id_at_every_depth() {
        let inner_old = Fields::from(vec![
            field("x", DataType::Int32, true, 11),
            field("y", DataType::Utf8, true, 12),
        ]);
        let inner_new = Fields::from(vec![
            field("y2", DataType::Utf8, true, 12),
            field("x", DataType::Int64, true, 11),
            field("w", DataType::Utf8, true, 13),
        ]);
        let s = StructArray::try_new(
            inner_old.clone(),
            vec![
                Arc::new(Int32Array::from(vec![7])),
                Arc::new(StringArray::from(vec!["why"])),
            ],
            None,
        )
        .unwrap();
        let old = Arc::new(Schema::new(vec![field(
            "s",
            DataType::Struct(inner_old),
            true,
            10,
        )]));
        let batch = RecordBatch::try_new(old, vec![Arc::new(s)]).unwrap();
        let new = Arc::new(Schema::new(vec![field(
            "s",
            DataType::Struct(inner_new),
            true,
            10,
        )]));
        let out = to_schema(batch, &new).unwrap();
        let s = out.column(0).as_struct();
        assert_eq!(s.column(0).as_string::<i32>().value(0), "why");
        let x = s.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(x.value(0), 7);
        assert!(s.column(2).is_null(0));
    }
}
