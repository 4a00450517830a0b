//! Input is never silently changed or lost: `append` (NDJSON, CSV, Parquet files) and `ingest`
//! (NDJSON files with a dead-letter file) apply one record rule and one set of checked value
//! conversions. A line that is not exactly one JSON object, or a value that does not fit its
//! column exactly, is a bad record: `append` fails naming file, line, column and value and
//! commits nothing; `ingest` sends it to the dead-letter file and stores nothing of it.

use floe::operations::{Operation, Query};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Decimal128Array, Float64Array, Int64Array, TimestampNanosecondArray};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{Field, Schema};
use floe::catalog::{parse_table_ident, NewTable};
use floe::iceberg::TableIdent;
use floe::ingest::dead_letter::DeadLetterSink;
use floe::ingest::source;
use floe::ingest::stream::{IngestBuilder, IngestMetrics, IngestOptions};
use serde_json::Value;

use crate::common::{files_under, outcome, table_state, Fixture};

const SCHEMA: &str = "id bigint not null, n int, d decimal(10, 2), f float, ts timestamp";

async fn table(fx: &Fixture, name: &str) -> TableIdent {
    let ident = parse_table_ident(name).unwrap();
    let ns = ident.namespace().clone();
    if !fx.catalog.namespace_exists(&ns).await.unwrap() {
        fx.catalog.create_namespace(&ns).await.unwrap();
    }
    fx.catalog
        .create_table(NewTable {
            ident: ident.clone(),
            schema: floe::table::schema::parse_schema(SCHEMA).unwrap(),
            partition_spec: floe::table::schema::unpartitioned(),
            sort_order: None,
            properties: Default::default(),
        })
        .await
        .unwrap();
    ident
}

async fn append(
    fx: &Fixture,
    ident: &TableIdent,
    inputs: &[&Path],
) -> floe::base::error::Result<u64> {
    floe::operations::append::AppendBuilder::new(&fx.catalog, ident.clone())
        .with_inputs(inputs.iter().map(|p| p.to_path_buf()).collect())
        .execute()
        .await
        .map(|m| m.rows)
}

/// Appends `inputs`, which must fail; checks that nothing was committed or left behind.
async fn append_fails(fx: &Fixture, ident: &TableIdent, inputs: &[&Path]) -> String {
    let snapshot = |t: &floe::iceberg::table::Table| t.metadata().current_snapshot_id();
    let before_snapshot = snapshot(&fx.catalog.load_table(ident).await.unwrap());
    let before_files = parquet_files(fx.warehouse());
    let e = append(fx, ident, inputs)
        .await
        .expect_err("a bad record must fail the append")
        .to_string();
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    let after = snapshot(&fx.catalog.load_table(ident).await.unwrap());
    assert_eq!(after, before_snapshot, "committed: {e}");
    assert_eq!(
        parquet_files(fx.warehouse()),
        before_files,
        "files left behind: {e}"
    );
    e
}

fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    v.sort();
    v
}

async fn ingest(fx: &Fixture, table: &str, input: &Path, dead: &Path) -> IngestMetrics {
    let ident = parse_table_ident(table).unwrap();
    let src = source::open(&input.display().to_string(), false).unwrap();
    let mut o = IngestOptions::new(format!("w-{table}"));
    o.commit_interval = Duration::from_secs(3600);
    IngestBuilder::new(&fx.catalog, ident, src, o)
        .with_dead_letter(
            DeadLetterSink::open(&dead.display().to_string())
                .await
                .unwrap(),
        )
        .execute()
        .await
        .unwrap()
}

fn dead_letters(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every row of `sql`, each value as text.
async fn rows(fx: &Fixture, sql: &str) -> Vec<Vec<String>> {
    let batches = floe::operations::sql::SqlBuilder::new(&fx.catalog, sql)
        .query()
        .await
        .unwrap();
    let opts = FormatOptions::default().with_null("null");
    let mut out = vec![];
    for b in batches {
        let f: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            out.push(f.iter().map(|f| f.value(i).to_string()).collect());
        }
    }
    out
}

async fn ids(fx: &Fixture, table: &str) -> Vec<String> {
    rows(fx, &format!("SELECT id FROM {table} ORDER BY id"))
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn write_parquet(dir: &Path, name: &str, columns: Vec<(&str, ArrayRef)>) -> PathBuf {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let p = dir.join(name);
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&p).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    p
}

#[tokio::test]
async fn an_ndjson_line_with_two_values_is_one_bad_record_in_append_and_ingest() {
    let fx = Fixture::new().await;
    let a = table(&fx, "s.two_a").await;
    table(&fx, "s.two_i").await;
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "two.ndjson",
        b"{\"id\": 1}\n{\"id\": 11}{\"id\": 12}\n{\"id\": 13}\n",
    );
    let e = append_fails(&fx, &a, &[&input]).await;
    assert!(
        e.contains("two.ndjson") && e.contains("line 2") && e.contains("more than one JSON value"),
        "{e}"
    );
    let dead = dir.path().join("dead.ndjson");
    let s = ingest(&fx, "s.two_i", &input, &dead).await;
    assert_eq!((s.records, s.bad_records), (3, 1));
    assert_eq!(ids(&fx, "s.two_i").await, ["1", "13"], "neither 11 nor 12");
    let d = dead_letters(&dead);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["payload"], "{\"id\": 11}{\"id\": 12}");
    assert!(
        d[0]["reason"]
            .as_str()
            .unwrap()
            .contains("more than one JSON value"),
        "{d:?}"
    );
}

#[tokio::test]
async fn trailing_garbage_nul_bytes_and_invalid_utf8_are_bad_records_in_append_and_ingest() {
    let fx = Fixture::new().await;
    let a = table(&fx, "s.junk_a").await;
    table(&fx, "s.junk_i").await;
    let dir = tempfile::tempdir().unwrap();
    let bad: [(&[u8], &str); 7] = [
        (b"{\"id\":10} garbage", "unexpected characters"),
        (b"{\"id\":14}\0", "NUL"),
        (b"{\"id\":15,\"x\":\"a\0b\"}", "NUL"),
        (b"{\"id\":17,\"x\":\"\xff\"}", "UTF-8"),
        (b"\x0c", "invalid JSON"),
        ("\u{a0}".as_bytes(), "invalid JSON"),
        (b"{\"id\":18,\"id\":19}", "duplicate key"),
    ];
    for (i, (line, why)) in bad.iter().enumerate() {
        let mut body = b"{\"id\":1}\n".to_vec();
        body.extend_from_slice(line);
        body.extend_from_slice(b"\n{\"id\":2}\n");
        let input = write(dir.path(), &format!("bad{i}.ndjson"), &body);
        let e = append_fails(&fx, &a, &[&input]).await;
        assert!(e.contains("line 2") && e.contains(why), "{why}: {e}");
    }
    let mut body = b"{\"id\":1}\n".to_vec();
    for (line, _) in &bad {
        body.extend_from_slice(line);
        body.push(b'\n');
    }
    body.extend_from_slice(b"{\"id\":2}");
    let input = write(dir.path(), "all.ndjson", &body);
    let dead = dir.path().join("dead.ndjson");
    let s = ingest(&fx, "s.junk_i", &input, &dead).await;
    assert_eq!(s.bad_records, bad.len() as u64);
    assert_eq!(ids(&fx, "s.junk_i").await, ["1", "2"]);
    let d = dead_letters(&dead);
    assert_eq!(d.len(), bad.len());
    for (entry, (_, why)) in d.iter().zip(&bad) {
        assert!(
            entry["reason"].as_str().unwrap().contains(why),
            "{why}: {entry}"
        );
    }
    // The payload that is not UTF-8 is kept byte for byte.
    assert_eq!(d[3]["payload_hex"], hex(b"{\"id\":17,\"x\":\"\xff\"}"));
    assert!(d[0].get("payload_hex").is_none());
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// (column, NDJSON literal, CSV text, why): values that do not fit `SCHEMA`.
const MISFITS: [(&str, &str, &str, &str); 10] = [
    (
        "id",
        "-9223372036854775900",
        "-9223372036854775900",
        "out of range for bigint",
    ),
    (
        "id",
        "9223372036854775808",
        "9223372036854775808",
        "out of range for bigint",
    ),
    ("id", "1.9", "1.9", "fractional part"),
    ("n", "2147483648", "2147483648", "out of range for int"),
    ("n", "1e10", "1e10", "out of range for int"),
    ("d", "1.239", "1.239", "after the decimal point"),
    (
        "d",
        "123456789",
        "123456789",
        "out of range for decimal(10,2)",
    ),
    ("f", "1e39", "1e39", "out of range for float"),
    (
        "ts",
        "\"2026-02-30T00:00:00\"",
        "2026-02-30T00:00:00",
        "no such date",
    ),
    (
        "ts",
        "\"2026-01-01T00:00:00.0000001\"",
        "2026-01-01T00:00:00.0000001",
        "fractional second",
    ),
];

fn ndjson_line(col: &str, literal: &str) -> String {
    if col == "id" {
        format!("{{\"id\": {literal}}}")
    } else {
        format!("{{\"id\": 2, \"{col}\": {literal}}}")
    }
}

#[tokio::test]
async fn values_that_do_not_fit_are_bad_records_in_every_format() {
    let fx = Fixture::new().await;
    let a = table(&fx, "s.fit_a").await;
    table(&fx, "s.fit_i").await;
    let dir = tempfile::tempdir().unwrap();
    for (k, (col, literal, text, why)) in MISFITS.iter().enumerate() {
        let nd = write(
            dir.path(),
            &format!("m{k}.ndjson"),
            format!("{{\"id\": 1}}\n{}\n", ndjson_line(col, literal)).as_bytes(),
        );
        let e = append_fails(&fx, &a, &[&nd]).await;
        let shown = literal.trim_matches('"');
        assert!(
            e.contains(&format!("m{k}.ndjson: line 2: column '{col}' value "))
                && e.contains(shown)
                && e.contains(why),
            "ndjson {col} {literal}: {e}"
        );
        let csv_body = if *col == "id" {
            format!("id\n1\n{text}\n")
        } else {
            format!("id,{col}\n1,\n2,{text}\n")
        };
        let csv = write(dir.path(), &format!("m{k}.csv"), csv_body.as_bytes());
        let e = append_fails(&fx, &a, &[&csv]).await;
        assert!(
            e.contains(&format!("m{k}.csv: line 3: column '{col}' value "))
                && e.contains(text)
                && e.contains(why),
            "csv {col} {text}: {e}"
        );
    }
    // Parquet: narrowing, truncation, rescale and overflow of typed values are checked too.
    let parquet_misfits: Vec<(&str, ArrayRef, &str)> = vec![
        (
            "n",
            Arc::new(Int64Array::from(vec![1, 2_147_483_648])),
            "out of range for int",
        ),
        (
            "id",
            Arc::new(Float64Array::from(vec![1.0, 1.9])),
            "fractional part",
        ),
        (
            "d",
            Arc::new(
                Decimal128Array::from(vec![1230, 1239])
                    .with_precision_and_scale(10, 3)
                    .unwrap(),
            ),
            "after the decimal point",
        ),
        (
            "f",
            Arc::new(Float64Array::from(vec![1.0, 1e39])),
            "out of range for float",
        ),
        (
            "ts",
            Arc::new(TimestampNanosecondArray::from(vec![1_000, 1_001])),
            "fractional second",
        ),
    ];
    for (k, (col, values, why)) in parquet_misfits.into_iter().enumerate() {
        let mut columns: Vec<(&str, ArrayRef)> = vec![(col, values)];
        if col != "id" {
            columns.push(("id", Arc::new(Int64Array::from(vec![1, 2]))));
        }
        let p = write_parquet(dir.path(), &format!("m{k}.parquet"), columns);
        let e = append_fails(&fx, &a, &[&p]).await;
        assert!(
            e.contains(&format!("m{k}.parquet: row 2: column '{col}'")) && e.contains(why),
            "parquet {col}: {e}"
        );
    }
    // Ingest: every misfit goes to the dead-letter file, the good records are stored.
    let mut body = String::from("{\"id\": 1}\n");
    for (col, literal, _, _) in MISFITS {
        body.push_str(&ndjson_line(col, literal));
        body.push('\n');
    }
    body.push_str("{\"id\": 3}\n");
    let input = write(dir.path(), "misfits.ndjson", body.as_bytes());
    let dead = dir.path().join("dead.ndjson");
    let s = ingest(&fx, "s.fit_i", &input, &dead).await;
    assert_eq!(s.bad_records, MISFITS.len() as u64);
    assert_eq!(ids(&fx, "s.fit_i").await, ["1", "3"]);
    let d = dead_letters(&dead);
    for (entry, (col, literal, _, why)) in d.iter().zip(MISFITS) {
        assert_eq!(entry["column"], col, "{entry}");
        assert!(
            entry["value"]
                .as_str()
                .unwrap()
                .contains(literal.trim_matches('"')),
            "{entry}"
        );
        assert!(entry["reason"].as_str().unwrap().contains(why), "{entry}");
    }
}

#[tokio::test]
async fn values_that_fit_exactly_are_stored_unchanged_by_append_and_ingest() {
    let fx = Fixture::new().await;
    let a = table(&fx, "s.ok_a").await;
    table(&fx, "s.ok_i").await;
    let dir = tempfile::tempdir().unwrap();
    let nd = write(
        dir.path(),
        "ok.ndjson",
        concat!(
            "{\"id\": -9223372036854775808, \"n\": 2147483647, \"d\": 1.230, \"ts\": \"2026-01-01T10:00:00.123456000Z\"}\r\n",
            "\r\n",
            "   \t\n",
            "{\"id\": 9223372036854775807, \"n\": 1e2, \"d\": \"99999999.99\", \"ts\": \"2026-01-01T12:00:00+02:00\"}\n",
            "{\"id\": 1.0, \"n\": -2147483648, \"d\": 1.5e1, \"f\": 1.5}"
        )
        .as_bytes(),
    );
    assert_eq!(append(&fx, &a, &[&nd]).await.unwrap(), 3);
    let want = vec![
        vec![
            "-9223372036854775808",
            "2147483647",
            "1.23",
            "2026-01-01T10:00:00.123456",
        ],
        vec!["1", "-2147483648", "15.00", "null"],
        vec![
            "9223372036854775807",
            "100",
            "99999999.99",
            "2026-01-01T10:00:00",
        ],
    ];
    let q = |t: &str| format!("SELECT id, n, d, ts FROM {t} ORDER BY id");
    assert_eq!(rows(&fx, &q("s.ok_a")).await, want);
    let dead = dir.path().join("dead.ndjson");
    let s = ingest(&fx, "s.ok_i", &nd, &dead).await;
    assert_eq!((s.records, s.bad_records), (3, 0));
    assert_eq!(
        rows(&fx, &q("s.ok_i")).await,
        want,
        "ingest stores the same"
    );
    // CSV and Parquet inputs of the same values store the same.
    table(&fx, "s.ok_c").await;
    let csv = write(
        dir.path(),
        "ok.csv",
        b"id,n,d,ts\r\n-9223372036854775808,2147483647,1.230,2026-01-01T10:00:00.123456000Z\r\n9223372036854775807,1e2,99999999.99,2026-01-01T12:00:00+02:00\r\n1.0,-2147483648,1.5e1,\r\n",
    );
    let c = parse_table_ident("s.ok_c").unwrap();
    assert_eq!(append(&fx, &c, &[&csv]).await.unwrap(), 3);
    assert_eq!(rows(&fx, &q("s.ok_c")).await, want, "csv stores the same");
    table(&fx, "s.ok_p").await;
    let base = 1_767_261_600_000_000_000i64;
    let p = write_parquet(
        dir.path(),
        "ok.parquet",
        vec![
            (
                "id",
                Arc::new(Float64Array::from(vec![-9.223_372_036_854_776e18, 1.0])),
            ),
            (
                "n",
                Arc::new(Int64Array::from(vec![2_147_483_647, -2_147_483_648])),
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![1230, 15000])
                        .with_precision_and_scale(12, 3)
                        .unwrap(),
                ),
            ),
            (
                "ts",
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(base + 123_456_000),
                    None,
                ])),
            ),
        ],
    );
    let pq = parse_table_ident("s.ok_p").unwrap();
    assert_eq!(append(&fx, &pq, &[&p]).await.unwrap(), 2);
    assert_eq!(
        rows(&fx, &q("s.ok_p")).await,
        want[..2].to_vec(),
        "parquet stores the same"
    );
}

#[tokio::test]
async fn blank_lines_crlf_and_a_last_line_without_newline_read_the_same_in_append_and_ingest() {
    let fx = Fixture::new().await;
    let a = table(&fx, "s.lines_a").await;
    table(&fx, "s.lines_i").await;
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "lines.ndjson",
        b"\n{\"id\":1}\r\n\r\n  \t \n{\"id\":2}\n\n{\"id\":3}",
    );
    assert_eq!(append(&fx, &a, &[&input]).await.unwrap(), 3);
    let dead = dir.path().join("dead.ndjson");
    let s = ingest(&fx, "s.lines_i", &input, &dead).await;
    assert_eq!((s.records, s.bad_records), (3, 0));
    assert_eq!(ids(&fx, "s.lines_a").await, ["1", "2", "3"]);
    assert_eq!(ids(&fx, "s.lines_i").await, ["1", "2", "3"]);
    // Line numbers count blank lines.
    let bad = write(
        dir.path(),
        "bad.ndjson",
        b"\n{\"id\":1}\r\n\r\n{\"id\":\"x\"}\n",
    );
    let e = append_fails(&fx, &a, &[&bad]).await;
    assert!(e.contains("line 4"), "{e}");
}

#[tokio::test]
async fn an_append_dry_run_checks_every_record_writes_nothing_and_reports_progress() {
    use floe::base::cost::{Costed, Phase, Progress};
    let fx = Fixture::new().await;
    let a = table(&fx, "s.dry").await;
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.ndjson", b"{\"id\":1}\n{\"id\":2}\n");
    let more = write(dir.path(), "more.csv", b"id,n\n3,30\n");
    let bad = write(dir.path(), "bad.ndjson", b"{\"id\":4}\n{\"id\":1.5}\n");
    let events = Arc::new(std::sync::Mutex::new(Vec::<Progress>::new()));
    let sink = events.clone();
    let builder = floe::operations::append::AppendBuilder::new(&fx.catalog, a.clone())
        .with_inputs(vec![good.clone(), more.clone()])
        .with_progress(move |p| sink.lock().unwrap().push(*p));
    let planned = builder.plan().await.unwrap().report;
    assert!(planned.dry_run);
    assert_eq!((planned.rows, planned.input_files), (3, 2));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert_eq!(planned.cost().bytes_to_read, size(&good) + size(&more));
    assert_eq!(planned.cost().files_to_write, 0);
    assert!(events.lock().unwrap().is_empty(), "plan() reports nothing");
    let snapshot = fx
        .catalog
        .load_table(&a)
        .await
        .unwrap()
        .metadata()
        .current_snapshot_id();
    assert_eq!(snapshot, None, "the dry run committed nothing");
    assert!(
        parquet_files(fx.warehouse()).is_empty(),
        "and wrote nothing"
    );

    // A bad record fails the dry run the way it fails the append, naming file and line.
    let e = floe::operations::append::AppendBuilder::new(&fx.catalog, a.clone())
        .with_inputs(vec![good.clone(), bad])
        .run(true)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.ndjson") && e.contains("line 2"), "{e}");

    // The real append reports one write step per input, ending at the totals.
    let done = builder.execute().await.unwrap();
    assert_eq!((done.rows, done.dry_run), (3, false));
    assert_eq!(done.cost().bytes_to_read, planned.cost().bytes_to_read);
    assert!(done.cost().files_to_write >= 1);
    let ev = events.lock().unwrap().clone();
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert!(ev.iter().all(|p| p.phase == Phase::Write));
    assert_eq!(ev[0].done.steps, 0);
    let last = ev.last().unwrap();
    // Everything announced is done (rows are counted as they come: not known ahead).
    assert_eq!(
        (last.done.steps, last.done.files, last.done.bytes),
        (last.total.steps, last.total.files, last.total.bytes)
    );
    assert_eq!((last.total.steps, last.done.rows), (2, 3));
    assert_eq!(ids(&fx, "s.dry").await, ["1", "2", "3"]);
}

#[tokio::test]
async fn an_append_plan_changes_nothing_and_applying_it_is_executing() {
    let fx = Fixture::new().await;
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.ndjson", b"{\"id\":1}\n{\"id\":2}\n");
    let more = write(dir.path(), "more.csv", b"id,n\n3,30\n");
    let inputs = vec![good, more];
    let a = table(&fx, "s.pa").await;
    let b = table(&fx, "s.pb").await;
    let builder = floe::operations::append::AppendBuilder::new(&fx.catalog, a.clone())
        .with_inputs(inputs.clone());
    let before = table_state(&fx, &a).await;
    let plan = builder.plan().await.unwrap();
    assert!(plan.report.dry_run && plan.report.snapshot_id.is_none());
    assert_eq!(plan.report.rows, 3);
    assert_eq!(
        table_state(&fx, &a).await,
        before,
        "plan() wrote or committed"
    );
    let applied = builder.apply(plan).await.unwrap();
    assert!(
        !applied.dry_run && applied.snapshot_id.is_some(),
        "{applied:?}"
    );
    let executed = floe::operations::append::AppendBuilder::new(&fx.catalog, b.clone())
        .with_inputs(inputs)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome(&applied), outcome(&executed));
    assert_eq!(applied.rows, 3);

    // The same for batches in memory.
    let c = table(&fx, "s.pc").await;
    let d = table(&fx, "s.pd").await;
    let builder = floe::operations::append::AppendBuilder::from_batches(
        &fx.catalog,
        c.clone(),
        vec![ids_1_to_4(&fx, &c).await],
    );
    let before = table_state(&fx, &c).await;
    let plan = builder.plan().await.unwrap();
    assert_eq!(plan.report.rows, 4);
    assert_eq!(
        table_state(&fx, &c).await,
        before,
        "plan() wrote or committed"
    );
    let applied = builder.apply(plan).await.unwrap();
    let executed = floe::operations::append::AppendBuilder::from_batches(
        &fx.catalog,
        d.clone(),
        vec![ids_1_to_4(&fx, &d).await],
    )
    .execute()
    .await
    .unwrap();
    assert!(applied.snapshot_id.is_some());
    assert_eq!(outcome(&applied), outcome(&executed));
    assert_eq!(applied.rows, 4);
}

/// Rows with ids 1..=4 and nulls elsewhere, in `ident`'s Arrow schema.
async fn ids_1_to_4(fx: &Fixture, ident: &TableIdent) -> RecordBatch {
    let t = fx.catalog.load_table(ident).await.unwrap();
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(t.metadata().current_schema()).unwrap(),
    );
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == 0 {
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef
            } else {
                arrow::array::new_null_array(f.data_type(), 4)
            }
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}
