//! `--sort-by col [asc|desc] [nulls first|last], ...`: compaction writes each output sorted
//! (Iceberg's `sort` strategy, per output file). Without `--sort-by`, the table's default sort
//! order is used when it has one (identity fields only).
//!
//! Memory: a job (about one output file of input) is sorted in memory, so peak memory is about
//! `max-concurrent-file-group-rewrites` x target size when sorting.

use arrow::compute::{
    concat_batches, lexsort_to_indices, take_record_batch, SortColumn, SortOptions,
};
use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;
use iceberg::spec::{NullOrder, SortDirection, Transform};
use iceberg::table::Table;

use crate::base::error::{Error, Result};

/// One sort key: a column index in the table's Arrow schema and its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    pub column: usize,
    pub descending: bool,
    pub nulls_first: bool,
}

/// Parses `--sort-by` against the table schema.
pub fn parse_sort_by(spec: &str, schema: &SchemaRef) -> Result<Vec<SortKey>> {
    let mut keys = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let words: Vec<String> = part
            .split_whitespace()
            .map(|w| w.to_ascii_lowercase())
            .collect();
        let name = part.split_whitespace().next().unwrap_or_default();
        let column = schema
            .index_of(name)
            .map_err(|_| Error::invalid_option("--sort-by", part, "no such column in the table"))?;
        let descending = words.iter().any(|w| w == "desc");
        // Iceberg's default: nulls first when ascending, last when descending.
        let nulls_first = match words.iter().position(|w| w == "nulls") {
            Some(i) => match words.get(i + 1).map(String::as_str) {
                Some("first") => true,
                Some("last") => false,
                _ => {
                    return Err(Error::invalid_option(
                        "--sort-by",
                        part,
                        "expected NULLS FIRST or NULLS LAST",
                    ))
                }
            },
            None => !descending,
        };
        if words
            .iter()
            .skip(1)
            .any(|w| !matches!(w.as_str(), "asc" | "desc" | "nulls" | "first" | "last"))
        {
            return Err(Error::invalid_option(
                "--sort-by",
                part,
                "expected 'column [asc|desc] [nulls first|last]'",
            ));
        }
        keys.push(SortKey {
            column,
            descending,
            nulls_first,
        });
    }
    if keys.is_empty() {
        return Err(Error::invalid_option("--sort-by", spec, "no columns"));
    }
    Ok(keys)
}

/// The table's default sort order as keys, or `None` when unsorted.
pub fn table_sort_order(table: &Table, schema: &SchemaRef) -> Result<Option<Vec<SortKey>>> {
    let md = table.metadata();
    let order = md.default_sort_order();
    if order.fields.is_empty() {
        return Ok(None);
    }
    let iceberg_schema = md.current_schema();
    let mut keys = Vec::new();
    for f in &order.fields {
        let name = iceberg_schema.name_by_field_id(f.source_id).unwrap_or("?");
        if f.transform != Transform::Identity {
            return Err(Error::invalid_option(
                "table sort order",
                format!("{}({name})", f.transform),
                "only identity sort fields are supported; pass --sort-by",
            ));
        }
        let column = schema
            .index_of(name)
            .map_err(|_| Error::invalid_option("table sort order", name, "column not found"))?;
        keys.push(SortKey {
            column,
            descending: f.direction == SortDirection::Descending,
            nulls_first: f.null_order == NullOrder::First,
        });
    }
    Ok(Some(keys))
}

/// Sorts batches (all in one schema) into one sorted batch.
pub fn sort_batches(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[SortKey],
) -> Result<RecordBatch> {
    let all = concat_batches(schema, batches)?;
    let columns: Vec<SortColumn> = keys
        .iter()
        .map(|k| SortColumn {
            values: all.column(k.column).clone(),
            options: Some(SortOptions {
                descending: k.descending,
                nulls_first: k.nulls_first,
            }),
        })
        .collect();
    let indices = lexsort_to_indices(&columns, None)?;
    Ok(take_record_batch(&all, &indices)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn sort_spec_parses_with_iceberg_null_defaults() {
        let keys = parse_sort_by("name desc, id", &schema()).unwrap();
        assert_eq!(
            keys[0],
            SortKey {
                column: 1,
                descending: true,
                nulls_first: false
            }
        );
        assert_eq!(
            keys[1],
            SortKey {
                column: 0,
                descending: false,
                nulls_first: true
            }
        );
        assert!(parse_sort_by("nope", &schema())
            .unwrap_err()
            .to_string()
            .contains("nope"));
        assert!(parse_sort_by("id sideways", &schema()).is_err());
    }

    #[test]
    fn batches_sort_across_batch_boundaries() {
        let s = schema();
        let b1 = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int64Array::from(vec![3, 1])),
                Arc::new(StringArray::from(vec![Some("c"), None])),
            ],
        )
        .unwrap();
        let b2 = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int64Array::from(vec![2])),
                Arc::new(StringArray::from(vec![Some("b")])),
            ],
        )
        .unwrap();
        let out = sort_batches(&s, &[b1, b2], &parse_sort_by("id", &s).unwrap()).unwrap();
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ids.values(), &[1, 2, 3]);
        let out = sort_batches(
            &s,
            &[out],
            &parse_sort_by("name desc nulls last", &s).unwrap(),
        )
        .unwrap();
        let names = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(names.value(0), "c");
        assert!(names.is_null(2));
    }
}
