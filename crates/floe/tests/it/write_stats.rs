//! The compaction writer's data-file metrics equal the iceberg crate writer's, for every
//! primitive type (and fields inside a struct and a list), with nulls, NaNs and strings long
//! enough for Parquet to truncate their statistics.

use floe::operations::Operation;
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, FixedSizeBinaryArray, Float64Array, ListArray, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field};
use arrow::record_batch::RecordBatch;
use floe::catalog::{parse_table_ident, NewTable};
use floe::iceberg::spec::{
    DataFile, ListType, NestedField, PrimitiveType as P, Schema, Struct, StructType, Type,
};
use floe::write::parquet_stats::{count_nans, data_file_from_parquet, FilePlacement};
use floe::write::{TableWriter, WriteOptions};
use parquet::arrow::ArrowWriter;

use crate::common::Fixture;

const ROWS: usize = 300;

fn schema() -> Schema {
    let p = |id, name: &str, t| Arc::new(NestedField::optional(id, name, Type::Primitive(t)));
    let dec = |precision, scale| P::Decimal { precision, scale };
    Schema::builder()
        .with_fields(vec![
            p(1, "b", P::Boolean),
            p(2, "i", P::Int),
            p(3, "l", P::Long),
            p(4, "f", P::Float),
            p(5, "d", P::Double),
            p(6, "dec9", dec(9, 2)),
            p(7, "dec18", dec(18, 4)),
            p(8, "dec38", dec(38, 10)),
            p(9, "dt", P::Date),
            p(10, "tm", P::Time),
            p(11, "ts", P::Timestamp),
            p(12, "tstz", P::Timestamptz),
            p(13, "tsns", P::TimestampNs),
            p(14, "s", P::String),
            p(15, "u", P::Uuid),
            p(16, "fx", P::Fixed(3)),
            p(17, "bin", P::Binary),
            Arc::new(NestedField::optional(
                18,
                "st",
                Type::Struct(StructType::new(vec![
                    p(19, "x", P::Double),
                    p(20, "y", P::String),
                ])),
            )),
            Arc::new(NestedField::optional(
                21,
                "lst",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    22,
                    Type::Primitive(P::Double),
                    false,
                )))),
            )),
        ])
        .build()
        .unwrap()
}

/// A value of row `i` as text, cast to the column's Arrow type (`None` every 17th row).
fn text(i: usize, ty: &DataType) -> Option<String> {
    if i.is_multiple_of(17) {
        return None;
    }
    let k = (i * 7919) % 1000;
    Some(match ty {
        DataType::Boolean => k.is_multiple_of(3).to_string(),
        DataType::Int32 | DataType::Int64 => (k as i64 - 500).to_string(),
        DataType::Float32 | DataType::Float64 if i.is_multiple_of(23) => "NaN".to_string(),
        DataType::Float32 | DataType::Float64 => format!("{}.25", k as i64 - 400),
        DataType::Decimal128(_, s) => format!("{}.{}", k as i64 - 300, "7".repeat(*s as usize)),
        DataType::Date32 => format!("2026-{:02}-{:02}", 1 + k % 12, 1 + k % 28),
        DataType::Time64(_) => format!("{:02}:{:02}:{:02}.123456", k % 24, k % 60, k % 59),
        DataType::Timestamp(_, _) => {
            format!("2026-01-{:02}T{:02}:00:00.123456", 1 + k % 28, k % 24)
        }
        // Long enough for Parquet's 64-byte statistics truncation.
        _ if k.is_multiple_of(10) => format!("{}{k:04}", "z".repeat(80)),
        _ => format!("v{k:04}-\u{e9}"),
    })
}

fn column(field: &Field) -> ArrayRef {
    let ty = field.data_type();
    match ty {
        DataType::FixedSizeBinary(n) => Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                (0..ROWS).map(|i| {
                    text(i, ty).map(|_| {
                        (0..*n)
                            .map(|j| ((i * 31 + j as usize * 7) % 251) as u8)
                            .collect::<Vec<u8>>()
                    })
                }),
                *n,
            )
            .unwrap(),
        ),
        DataType::Struct(fields) => Arc::new(StructArray::new(
            fields.clone(),
            fields.iter().map(|f| column(f)).collect(),
            None,
        )),
        DataType::List(element) => {
            // Row i holds i % 4 doubles (a NaN among them now and then).
            let lens: Vec<usize> = (0..ROWS).map(|i| i % 4).collect();
            let values: Float64Array = (0..lens.iter().sum::<usize>())
                .map(|j| (j % 19 != 0).then_some(if j % 29 == 0 { f64::NAN } else { j as f64 }))
                .collect();
            Arc::new(ListArray::new(
                element.clone(),
                OffsetBuffer::from_lengths(lens),
                Arc::new(values),
                None,
            ))
        }
        _ => {
            let strings: StringArray = (0..ROWS).map(|i| text(i, ty)).collect();
            cast(&strings, ty).unwrap()
        }
    }
}

fn metrics(f: &DataFile) -> String {
    let sorted = |m: &HashMap<i32, u64>| {
        let mut v: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort();
        v
    };
    let bounds = |m: &HashMap<i32, floe::iceberg::spec::Datum>| {
        let mut v: Vec<_> = m.iter().map(|(k, v)| (*k, v.to_string())).collect();
        v.sort();
        v
    };
    format!(
        "records {}\nsizes {:?}\nvalues {:?}\nnulls {:?}\nnans {:?}\nlower {:?}\nupper {:?}\nsplits {:?}",
        f.record_count(),
        sorted(f.column_sizes()),
        sorted(f.value_counts()),
        sorted(f.null_value_counts()),
        sorted(f.nan_value_counts()),
        bounds(f.lower_bounds()),
        bounds(f.upper_bounds()),
        f.split_offsets(),
    )
}

/// The one data file `TableWriter` writes for `batch` (the iceberg crate's writer).
async fn table_writer_file(table: &floe::iceberg::table::Table, batch: &RecordBatch) -> DataFile {
    let mut writer = TableWriter::new(table, &WriteOptions::default())
        .await
        .unwrap();
    writer.write(batch.clone()).await.unwrap();
    writer.close().await.unwrap().remove(0)
}

/// `batch` through a plain ArrowWriter with the table's Parquet properties (every dictionary
/// on), its data file's metrics from the footer.
fn footer_metrics(table: &floe::iceberg::table::Table, batch: &RecordBatch) -> DataFile {
    let props = floe::write::parquet_properties(table).unwrap();
    let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    let md = w.finish().unwrap();
    let size = w.inner().len() as u64;
    let mut nans = HashMap::new();
    count_nans(batch, &mut nans);
    data_file_from_parquet(
        table.metadata().current_schema(),
        &md,
        size,
        FilePlacement {
            path: "ours.parquet".to_string(),
            partition: Struct::empty(),
            spec_id: 0,
        },
        nans,
    )
    .unwrap()
}

#[tokio::test]
async fn compaction_writer_metrics_equal_the_iceberg_writers() {
    let fx = Fixture::new().await;
    let ident = parse_table_ident("db.types").unwrap();
    fx.catalog
        .create_namespace(ident.namespace())
        .await
        .unwrap();
    fx.catalog
        .create_table(NewTable {
            ident: ident.clone(),
            schema: schema(),
            partition_spec: floe::table::schema::unpartitioned(),
            sort_order: None,
            properties: Default::default(),
        })
        .await
        .unwrap();
    let table = fx.load(&ident).await;
    let arrow_schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let batch = RecordBatch::try_new(
        arrow_schema.clone(),
        arrow_schema.fields().iter().map(|f| column(f)).collect(),
    )
    .unwrap();

    // The iceberg crate's writer.
    let theirs = table_writer_file(&table, &batch).await;

    // floe's: the same batch through a plain ArrowWriter with the same properties, metrics
    // from the footer.
    let ours = footer_metrics(&table, &batch);

    assert_eq!(metrics(&ours), metrics(&theirs));
    assert_eq!(ours.file_size_in_bytes(), theirs.file_size_in_bytes());
    // The test is only worth something if the columns really have bounds, nulls and NaNs.
    assert_eq!(ours.lower_bounds().len(), 20, "{}", metrics(&ours));
    assert!(ours.null_value_counts().values().any(|n| *n > 0));
    assert_eq!(ours.nan_value_counts().len(), 4, "{}", metrics(&ours));
    assert!(ours.nan_value_counts().values().all(|n| *n > 0));
}

/// The iceberg crate's writer ignores a truncated row-group max but keeps the later row
/// groups' exact ones: without floe's footer pass, this file's upper bound for `name` would be
/// "name-6" and a scan for the long name would skip the file.
#[tokio::test]
async fn a_long_string_in_an_early_row_group_keeps_its_file_findable() {
    use floe::iceberg::spec::Datum;

    let fx = Fixture::new().await;
    let ident = fx.table("db.long", None).await;
    fx.set_property(&ident, "write.parquet.row-group-size-bytes", "524288")
        .await;
    let table = fx.load(&ident).await;
    let batch = crate::common::make_batch(&table, 0, 10_000);
    let long = "z".repeat(80);
    let names: StringArray = (0..10_000)
        .map(|i| {
            Some(if i == 0 {
                long.clone()
            } else {
                format!("name-{}", i % 7)
            })
        })
        .collect();
    let mut columns = batch.columns().to_vec();
    columns[2] = Arc::new(names);
    let batch = RecordBatch::try_new(batch.schema(), columns).unwrap();
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![batch])
        .execute()
        .await
        .unwrap();

    let table = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&table).await.unwrap();
    assert_eq!(live.len(), 1);
    let f = &live[0].file;
    assert_eq!(
        f.split_offsets().map(<[i64]>::len),
        Some(2),
        "two row groups"
    );
    if let Some(upper) = f.upper_bounds().get(&3) {
        assert!(
            *upper >= Datum::string(&long),
            "upper bound {upper} is below a value"
        );
    }
    let n = crate::common::count_where(&fx.catalog, "db.long", &format!("name = '{long}'")).await;
    assert_eq!(n, 1);
}

/// A column near-distinct in the first batch is written without a dictionary (`id`, `ts` and
/// `amount` here), a repetitive one keeps it (`name`, 7 values), and the file's metrics and
/// rows are those of the same batch written with every dictionary on.
#[tokio::test]
async fn near_distinct_columns_go_without_a_dictionary_with_the_same_metrics_and_rows() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let fx = Fixture::new().await;
    let ident = fx.table("db.plain", None).await;
    let table = fx.load(&ident).await;
    let batch = crate::common::make_batch(&table, 0, 20_000);

    let theirs = table_writer_file(&table, &batch).await;

    let ours = footer_metrics(&table, &batch);
    // Column sizes differ with the encoding; every other metric is the same.
    let without_sizes = |f: &DataFile| {
        metrics(f)
            .lines()
            .filter(|l| !l.starts_with("sizes"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_sizes(&theirs), without_sizes(&ours));
    assert_eq!(theirs.lower_bounds().len(), 4, "{}", metrics(&theirs));

    let bytes = table
        .file_io()
        .new_input(theirs.file_path())
        .unwrap()
        .read()
        .await
        .unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
    let dictionaries: Vec<(String, bool)> = reader.metadata().row_groups()[0]
        .columns()
        .iter()
        .map(|c| {
            (
                c.column_path().string(),
                c.dictionary_page_offset().is_some(),
            )
        })
        .collect();
    assert_eq!(
        dictionaries,
        [
            ("id".to_string(), false),
            ("ts".to_string(), false),
            ("name".to_string(), true),
            ("amount".to_string(), false),
        ]
    );
    let read: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
    let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
    assert_eq!(read.columns(), batch.columns());
}
