//! Every partition transform the spec allows, on every type it allows it for ("Partition
//! Transforms"): a table partitioned so is created, appended to (with a null), compacted and
//! read back row for row, and its `$files` and `$partitions` list it. The two floe cannot write
//! yet (`identity` of uuid, `truncate` of binary) are refused at create, naming the way out.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float32Array,
    Float64Array, Int32Array, Int64Array, LargeBinaryArray, StringArray, Time64MicrosecondArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use floe::operations::append::AppendBuilder;
use floe::operations::{Operation, Query};

use crate::common::Fixture;

const ROWS: usize = 6;

/// `ROWS` values of `ty` (the last null), distinct enough to make several partitions.
fn column(ty: &DataType) -> ArrayRef {
    let i = |k: usize| k as i64;
    match ty {
        DataType::Boolean => Arc::new(BooleanArray::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(k % 2 == 0))
                .collect::<Vec<_>>(),
        )),
        DataType::Int32 => Arc::new(Int32Array::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(k as i32 * 7 - 9))
                .collect::<Vec<_>>(),
        )),
        DataType::Int64 => Arc::new(Int64Array::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(i(k) * 1_000_003 - 5))
                .collect::<Vec<_>>(),
        )),
        DataType::Float32 => Arc::new(Float32Array::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(k as f32 * 1.5 - 2.0))
                .collect::<Vec<_>>(),
        )),
        DataType::Float64 => Arc::new(Float64Array::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(k as f64 * 1e300 - 1.0))
                .collect::<Vec<_>>(),
        )),
        DataType::Decimal128(p, s) => Arc::new(
            Decimal128Array::from(
                (0..ROWS)
                    .map(|k| (k + 1 < ROWS).then_some(k as i128 * 12345 - 7))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(*p, *s)
            .unwrap(),
        ),
        DataType::Date32 => Arc::new(Date32Array::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(k as i32 * 400 - 30))
                .collect::<Vec<_>>(),
        )),
        DataType::Time64(_) => Arc::new(Time64MicrosecondArray::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then_some(i(k) * 3_600_000_001))
                .collect::<Vec<_>>(),
        )),
        DataType::Timestamp(_, tz) => Arc::new(
            TimestampMicrosecondArray::from(
                (0..ROWS)
                    .map(|k| (k + 1 < ROWS).then_some(i(k) * 40_000_000_000_000 - 1))
                    .collect::<Vec<_>>(),
            )
            .with_timezone_opt(tz.clone()),
        ),
        DataType::Utf8 => Arc::new(StringArray::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then(|| format!("v/{k}?é")))
                .collect::<Vec<_>>(),
        )),
        DataType::LargeBinary => Arc::new(LargeBinaryArray::from(
            (0..ROWS)
                .map(|k| (k + 1 < ROWS).then(|| vec![0xff, k as u8, b'/', 0]))
                .map(|v| v.map(|v| Box::leak(v.into_boxed_slice()) as &[u8]))
                .collect::<Vec<_>>(),
        )),
        DataType::FixedSizeBinary(n) => Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                (0..ROWS).map(|k| (k + 1 < ROWS).then(|| vec![k as u8 * 37; *n as usize])),
                *n,
            )
            .unwrap(),
        ),
        other => panic!("no generator for {other}"),
    }
}

/// The transforms the spec allows on `ty` (by its schema text).
fn transforms(ty: &str) -> Vec<String> {
    let mut t = vec!["identity".to_string(), "void".to_string()];
    let bucket = !matches!(ty, "boolean" | "float" | "double");
    let truncate =
        matches!(ty, "int" | "bigint" | "string" | "binary") || ty.starts_with("decimal");
    if bucket {
        t.push("bucket(4)".into());
    }
    if truncate {
        t.push("truncate(3)".into());
    }
    if matches!(ty, "date" | "timestamp" | "timestamptz") {
        t.extend(["year", "month", "day"].map(String::from));
    }
    if matches!(ty, "timestamp" | "timestamptz") {
        t.push("hour".into());
    }
    t
}

const TYPES: [&str; 15] = [
    "boolean",
    "int",
    "bigint",
    "float",
    "double",
    "decimal(9,2)",
    "decimal(38,10)",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "string",
    "uuid",
    "binary",
    "fixed(5)",
];

fn spec_text(transform: &str) -> String {
    match transform.split_once('(') {
        Some((name, rest)) => format!("{name}({}, c)", rest.trim_end_matches(')')),
        None => format!("{transform}(c)"),
    }
}

async fn count(fx: &Fixture, q: String) -> i64 {
    let b = floe::operations::sql::SqlBuilder::new(&fx.catalog, q)
        .query()
        .await
        .unwrap();
    b[0].column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0)
}

#[tokio::test]
async fn every_transform_the_spec_allows_works_on_every_type_it_allows() {
    let fx = Fixture::new().await;
    let mut failures: Vec<String> = Vec::new();
    let mut n = 0;
    for ty in TYPES {
        for tr in transforms(ty) {
            n += 1;
            let name = format!("p.t{n}");
            let schema =
                floe::table::schema::parse_schema(&format!("id bigint not null, c {ty}")).unwrap();
            // What floe cannot write yet is refused at create, naming the transform and the way
            // out, and nothing else is.
            let refused = floe::table::schema::parse_partition(&spec_text(&tr), &schema)
                .err()
                .map(|e| e.to_string());
            let expected = matches!(
                (tr.as_str(), ty),
                ("identity", "uuid") | ("truncate(3)", "binary")
            );
            match (refused, expected) {
                (Some(e), true) => {
                    assert!(e.contains("bucket(N, c)"), "{tr} of {ty}: {e}");
                    continue;
                }
                (None, false) => {}
                (got, _) => {
                    failures.push(format!("{tr} of {ty}: refused at create: {got:?}"));
                    continue;
                }
            }
            let ident = fx
                .create_table_with(&name, schema, Some(&spec_text(&tr)), HashMap::new())
                .await;
            let table = fx.load(&ident).await;
            let arrow_schema = Arc::new(
                floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
                    .unwrap(),
            );
            let c = if ty == "uuid" {
                let DataType::FixedSizeBinary(16) = arrow_schema.field(1).data_type() else {
                    panic!("uuid as {}", arrow_schema.field(1).data_type());
                };
                column(&DataType::FixedSizeBinary(16))
            } else {
                column(arrow_schema.field(1).data_type())
            };
            let batch = RecordBatch::try_new(
                arrow_schema,
                vec![
                    Arc::new(Int64Array::from((0..ROWS as i64).collect::<Vec<_>>())),
                    c,
                ],
            )
            .unwrap();
            let what = format!("{tr} of {ty}");
            for round in 0..2 {
                if let Err(e) =
                    AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![batch.clone()])
                        .execute()
                        .await
                {
                    failures.push(format!("{what}: append {round}: {e}"));
                    break;
                }
            }
            let rows = floe::operations::sql::SqlBuilder::new(
                &fx.catalog,
                format!("SELECT count(*) FROM {name}"),
            )
            .query()
            .await;
            match rows {
                Ok(b) => {
                    let v = b[0]
                        .column(0)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap()
                        .value(0);
                    if v != 2 * ROWS as i64 {
                        failures.push(format!("{what}: {v} rows read"));
                    }
                }
                Err(e) => failures.push(format!("{what}: read: {e}")),
            }
            for meta in ["files", "partitions"] {
                if let Err(e) = floe::operations::sql::SqlBuilder::new(
                    &fx.catalog,
                    format!("SELECT count(*) FROM {name}${meta}"),
                )
                .query()
                .await
                {
                    failures.push(format!("{what}: ${meta}: {e}"));
                }
            }
            match floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
                .with_option("rewrite-all", "true")
                .execute()
                .await
            {
                Ok(_) => {
                    let after = count(&fx, format!("SELECT count(*) FROM {name}")).await;
                    if after != 2 * ROWS as i64 {
                        failures.push(format!("{what}: {after} rows after compaction"));
                    }
                }
                Err(e) => failures.push(format!("{what}: compact: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
