//! Rows to partitions: a batch split by a partition spec into one piece per partition.
//!
//! The partition values come from the iceberg crate's transforms, a column at a time
//! ([`PartitionValueCalculator`]). Rows are grouped by those values in Arrow's row format: a
//! byte comparison with the row before (stream records mostly come in partition runs), then
//! with each partition's first row while there are few, and a hash past that. Each group leaves
//! the batch in one `take`, and only its first row becomes an Iceberg struct (the partition
//! key). The crate's own splitter turns every row into an Iceberg struct, hashes and clones it,
//! and filters the batch once per partition.

use std::collections::HashMap;

use arrow::array::{AsArray, UInt32Array};
use arrow::record_batch::RecordBatch;
use arrow::row::{Row, RowConverter, SortField};
use iceberg::arrow::{arrow_struct_to_literal, PartitionValueCalculator};
use iceberg::spec::{Literal, PartitionKey, PartitionSpecRef, SchemaRef, Struct, StructType};

use crate::base::error::{Error, Result};

/// Up to this many partitions in a batch, a row's partition is looked up by comparing it with
/// each partition's first row rather than by hashing it.
const SCAN: usize = 8;

/// Splits batches of one schema by one (partitioned) spec.
pub struct PartitionSplitter {
    /// `None` for a spec of void fields only (the crate's calculator refuses it): every row
    /// is in the one partition of nulls.
    calculator: Option<PartitionValueCalculator>,
    rows: RowConverter,
    partition_type: StructType,
    spec: PartitionSpecRef,
    schema: SchemaRef,
}

impl PartitionSplitter {
    /// A splitter for batches of `schema` by `spec` (which has at least one field).
    pub fn new(spec: PartitionSpecRef, schema: SchemaRef) -> Result<Self> {
        let partition_type = spec.partition_type(&schema)?;
        let arrow_type = iceberg::arrow::type_to_arrow_type(&iceberg::spec::Type::Struct(
            partition_type.clone(),
        ))?;
        let arrow_schema::DataType::Struct(fields) = arrow_type else {
            unreachable!("a struct type converts to an Arrow struct")
        };
        let rows = RowConverter::new(
            fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(Self {
            calculator: match spec.is_unpartitioned() {
                true => None,
                false => Some(PartitionValueCalculator::try_new(&spec, &schema)?),
            },
            rows,
            partition_type,
            spec,
            schema,
        })
    }

    /// The batch's rows grouped by partition, in the order each partition first appears, each
    /// group with its partition values.
    pub fn split(&self, batch: &RecordBatch) -> Result<Vec<(Struct, RecordBatch)>> {
        if batch.num_rows() == 0 {
            return Ok(vec![]);
        }
        let Some(calculator) = &self.calculator else {
            let nulls: Struct = self.spec.fields().iter().map(|_| None).collect();
            return Ok(vec![(nulls, batch.clone())]);
        };
        let values = calculator.calculate(batch)?;
        let rows = self.rows.convert_columns(values.as_struct().columns())?;
        // Each group: its first row and its rows.
        let mut groups: Vec<(usize, Vec<u32>)> = Vec::new();
        let mut index: HashMap<Row<'_>, usize> = HashMap::new();
        let mut current = 0;
        for i in 0..rows.num_rows() {
            let row = rows.row(i);
            if i > 0 && row == rows.row(i - 1) {
                groups[current].1.push(i as u32);
                continue;
            }
            // A few partitions (days, hours of a stream) are found by comparing bytes; the
            // map holds every partition for when there are more.
            let seen = match groups.len() <= SCAN {
                true => groups.iter().position(|(first, _)| rows.row(*first) == row),
                false => index.get(&row).copied(),
            };
            current = match seen {
                Some(g) => g,
                None => {
                    groups.push((i, Vec::new()));
                    index.insert(row, groups.len() - 1);
                    groups.len() - 1
                }
            };
            groups[current].1.push(i as u32);
        }
        let whole = groups.len() == 1;
        groups
            .into_iter()
            .map(|(first, members)| {
                let one = arrow_struct_to_literal(&values.slice(first, 1), &self.partition_type)?;
                let Some(Some(Literal::Struct(key))) = one.into_iter().next() else {
                    return Err(Error::Io(std::io::Error::other(
                        "partition values did not convert to an Iceberg struct",
                    )));
                };
                let piece = match whole {
                    true => batch.clone(),
                    false => arrow::compute::take_record_batch(batch, &UInt32Array::from(members))?,
                };
                Ok((key, piece))
            })
            .collect()
    }

    /// The partition path of `key` (`ts_day=2026-01-01`).
    pub fn label(&self, key: &Struct) -> String {
        super::location::partition_label(&self.spec, key, &self.schema)
    }

    /// The partition key the iceberg crate's writers take.
    pub fn key(&self, key: Struct) -> PartitionKey {
        PartitionKey::new(self.spec.as_ref().clone(), self.schema.clone(), key)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use iceberg::arrow::RecordBatchPartitionSplitter;
    use iceberg::spec::{NestedField, PartitionSpec, PrimitiveType, Schema, Transform, Type};

    use super::*;

    fn table() -> (SchemaRef, PartitionSpecRef) {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
                NestedField::optional(3, "name", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let spec = PartitionSpec::builder(schema.clone())
            .add_partition_field("ts", "ts_day", Transform::Day)
            .unwrap()
            .add_partition_field("id", "id_bucket", Transform::Bucket(4))
            .unwrap()
            .add_partition_field("name", "name", Transform::Identity)
            .unwrap()
            .build()
            .unwrap();
        (Arc::new(schema), Arc::new(spec))
    }

    /// Splits `batch` by `spec` with floe's splitter and the iceberg crate's: the same
    /// partitions, keys and rows (in input order), partitions in order of first appearance;
    /// returns how many partitions.
    fn same_as_the_crate(schema: SchemaRef, spec: PartitionSpecRef, batch: &RecordBatch) -> usize {
        let ours = PartitionSplitter::new(spec.clone(), schema.clone())
            .unwrap()
            .split(batch)
            .unwrap();
        let theirs = RecordBatchPartitionSplitter::try_new_with_computed_values(schema, spec)
            .unwrap()
            .split(batch)
            .unwrap();
        let mut theirs: Vec<(Struct, RecordBatch)> = theirs
            .into_iter()
            .map(|(k, b)| (k.data().clone(), b))
            .collect();
        assert_eq!(ours.len(), theirs.len());
        let ids = |b: &RecordBatch| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        };
        for (key, piece) in &ours {
            let at = theirs.iter().position(|(k, _)| k == key).expect("same key");
            let (_, b) = theirs.swap_remove(at);
            assert_eq!(ids(piece), ids(&b), "rows of {key:?}, in input order");
            assert_eq!(piece, &b);
        }
        let firsts: Vec<i64> = ours.iter().map(|(_, b)| ids(b)[0]).collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]));
        ours.len()
    }

    /// Every transform on the source types streams partition by: truncate of strings, longs
    /// and decimals, hour, month and year, identity of decimals, binary, booleans and dates,
    /// and a bucket of binary, with nulls.
    #[test]
    fn every_transform_and_source_type_groups_as_the_crate_does() {
        use arrow::array::{
            BooleanArray, Date32Array, Decimal128Array, LargeBinaryArray, TimestampMicrosecondArray,
        };
        let p = |t| Type::Primitive(t);
        let schema = Arc::new(
            Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "id", p(PrimitiveType::Long)).into(),
                    NestedField::optional(2, "ts", p(PrimitiveType::Timestamp)).into(),
                    NestedField::optional(3, "name", p(PrimitiveType::String)).into(),
                    NestedField::optional(
                        4,
                        "amount",
                        p(PrimitiveType::Decimal {
                            precision: 10,
                            scale: 2,
                        }),
                    )
                    .into(),
                    NestedField::optional(5, "d", p(PrimitiveType::Date)).into(),
                    NestedField::optional(6, "blob", p(PrimitiveType::Binary)).into(),
                    NestedField::optional(7, "flag", p(PrimitiveType::Boolean)).into(),
                    NestedField::optional(8, "tstz", p(PrimitiveType::Timestamptz)).into(),
                ])
                .build()
                .unwrap(),
        );
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let n = 600i64;
        let hour = 3_600_000_000i64;
        let tz = match arrow.field(7).data_type() {
            arrow_schema::DataType::Timestamp(_, tz) => tz.clone(),
            other => panic!("timestamptz is {other}"),
        };
        let batch = RecordBatch::try_new(
            arrow,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(TimestampMicrosecondArray::from_iter(
                    (0..n).map(|i| (i % 41 != 0).then_some((i / 60) * hour + i * 1_000)),
                )),
                Arc::new(StringArray::from_iter((0..n).map(|i| {
                    (i % 13 != 0)
                        .then(|| ["apple", "apricot", "banana", "b", ""][(i / 40) as usize % 5])
                }))),
                Arc::new(
                    Decimal128Array::from_iter(
                        (0..n).map(|i| (i % 17 != 0).then_some(((i / 30) as i128 - 7) * 1_234)),
                    )
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
                ),
                Arc::new(Date32Array::from_iter((0..n).map(|i| {
                    (i % 19 != 0).then_some(((i / 100) * 400 - 1_000) as i32)
                }))),
                Arc::new(LargeBinaryArray::from_iter((0..n).map(|i| {
                    (i % 23 != 0).then(|| vec![(i / 75) as u8, 0xff, (i % 2) as u8])
                }))),
                Arc::new(BooleanArray::from_iter(
                    (0..n).map(|i| (i % 29 != 0).then_some((i / 200) % 2 == 0)),
                )),
                Arc::new(
                    TimestampMicrosecondArray::from_iter((0..n).map(|i| {
                        (i % 31 != 0).then_some((i / 50) * 40 * 24 * hour - 90 * 24 * hour)
                    }))
                    .with_timezone_opt(tz),
                ),
            ],
        )
        .unwrap();
        let spec = |fields: &[(&str, Transform)]| {
            let mut b = PartitionSpec::builder(schema.as_ref().clone());
            for (source, t) in fields {
                b = b
                    .add_partition_field(*source, format!("{source}_{t}"), *t)
                    .unwrap();
            }
            Arc::new(b.build().unwrap())
        };
        let temporal_and_truncate = spec(&[
            ("name", Transform::Truncate(2)),
            ("id", Transform::Truncate(100)),
            ("ts", Transform::Hour),
            ("d", Transform::Year),
            ("tstz", Transform::Month),
        ]);
        let parts = same_as_the_crate(schema.clone(), temporal_and_truncate, &batch);
        assert!(parts > 30, "{parts} partitions");
        let identities = spec(&[
            ("amount", Transform::Identity),
            ("blob", Transform::Identity),
            ("flag", Transform::Identity),
            ("d", Transform::Identity),
        ]);
        let parts = same_as_the_crate(schema.clone(), identities, &batch);
        assert!(parts > 30, "{parts} partitions");
        let others = spec(&[
            ("amount", Transform::Truncate(5_000)),
            ("blob", Transform::Bucket(3)),
            ("tstz", Transform::Day),
        ]);
        let parts = same_as_the_crate(schema, others, &batch);
        assert!(parts > 10, "{parts} partitions");
    }

    #[test]
    fn groups_the_rows_the_iceberg_crates_splitter_groups_with_the_same_keys() {
        let (schema, spec) = table();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        // Runs, interleavings, a partition coming back after others, nulls in two fields.
        let n = 500i64;
        let day = 86_400_000_000i64;
        let batch = RecordBatch::try_new(
            arrow,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(TimestampMicrosecondArray::from_iter((0..n).map(|i| {
                    (i % 37 != 0).then_some((i / 100) * day + (i % 7) * day / 3)
                }))),
                Arc::new(StringArray::from_iter(
                    (0..n).map(|i| (i % 11 != 0).then(|| format!("n{}", (i / 50) % 3))),
                )),
            ],
        )
        .unwrap();
        // In the order partitions first appear, with the crate's keys and rows.
        let parts = same_as_the_crate(schema, spec, &batch);
        assert!(parts > 20, "{parts} partitions");
        // One partition: the batch itself.
        let one = batch.slice(1, 1);
        let split = PartitionSplitter::new(table().1, table().0)
            .unwrap()
            .split(&one)
            .unwrap();
        assert_eq!(split.len(), 1);
        assert_eq!(split[0].1, one);
    }
}
