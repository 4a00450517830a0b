//! `diagnose` finds over-partitioning and verifies an improvement (`--save` / `--compare`).

use floe::operations::{Operation, Query};
use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::record_batch::RecordBatch;
use floe::iceberg::table::Table;
use floe::operations::diagnose::{compare, DiagnoseBuilder, SavedReport};

use crate::common::{rewrite_all, Fixture};

/// `rows` rows whose `ts` all fall into hour `hour` after 2026-01-01T00:00.
fn hour_batch(table: &Table, hour: i64, rows: i64) -> RecordBatch {
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let base = 1_767_225_600_000_000i64 + hour * 3_600_000_000;
    let ids: Vec<i64> = (0..rows).map(|r| hour * 1000 + r).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(TimestampMicrosecondArray::from(
                ids.iter()
                    .map(|i| base + (i % 1000) * 1_000_000)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter().map(|i| format!("n-{i}")).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                ids.iter().map(|i| *i as f64).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

#[tokio::test]
async fn diagnose_names_over_partitioning_and_suggests_a_coarser_spec() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.hourly", Some("hour(ts)")).await;
    // A small target (128 KiB) stands in for a slow stream against 512 MiB: a few KiB per
    // hour partition is far under target / 8, and a day of them (~24x) reaches target / 4.
    fx.set_property(&ident, "write.target-file-size-bytes", "131072")
        .await;
    for hour in 0..30 {
        let t = fx.load(&ident).await;
        floe::operations::append::AppendBuilder::from_batches(
            &fx.catalog,
            ident.clone(),
            vec![hour_batch(&t, hour, 50)],
        )
        .execute()
        .await
        .unwrap();
    }
    let r = DiagnoseBuilder::new(&fx.catalog, ident.clone())
        .query()
        .await
        .unwrap();
    assert_eq!(r.totals.partitions, 30);
    let o = r.over_partitioned.as_ref().expect("a partitioned table");
    assert!(o.holds, "{}", o.evidence);
    assert_eq!(o.spec, "hour(ts)");
    assert_eq!(o.window, "hour");
    assert_eq!(
        o.partitions, 20,
        "the last 10 commits' hours are still open"
    );
    assert_eq!(o.target, 131072);
    assert!(o.bytes_per_partition_median < 131072 / 8, "{}", o.evidence);
    assert_eq!(
        o.suggested_spec.as_deref(),
        Some("day(ts)"),
        "{}",
        o.evidence
    );
    assert_eq!(
        o.commands,
        [
            "floe table evolve-partition h.hourly --spec 'day(ts)'",
            "floe compact h.hourly"
        ]
    );
    assert!(o
        .evidence
        .starts_with("partition spec is finer than the data rate: hour(ts) partitions receive"));
    // The suggestion is a spec `table create --partition` (and evolve-partition) accepts.
    let t = fx.load(&ident).await;
    floe::table::schema::parse_partition("day(ts)", t.metadata().current_schema()).unwrap();
    let obs = r
        .observations
        .iter()
        .find(|o| o.id == "over-partitioned")
        .unwrap();
    assert!(obs.holds);
    assert_eq!(
        obs.action.as_deref(),
        Some("floe table evolve-partition h.hourly --spec 'day(ts)' && floe compact h.hourly")
    );
    let text = floe::operations::diagnose::render::text(&r);
    assert!(
        text.contains("[x] Partition spec is finer than the data rate"),
        "{text}"
    );
    let html = floe::operations::diagnose::render::html(&r);
    assert!(
        html.contains("<p><code>floe table evolve-partition h.hourly --spec 'day(ts)'</code></p>"),
        "{html}"
    );

    // A day-partitioned table with the same data is not over-partitioned by hour's measure:
    // the day partitions hold a day of events each.
    let daily = fx.table("h.daily", Some("day(ts)")).await;
    fx.set_property(&daily, "write.target-file-size-bytes", "131072")
        .await;
    for hour in 0..30 {
        let t = fx.load(&daily).await;
        floe::operations::append::AppendBuilder::from_batches(
            &fx.catalog,
            daily.clone(),
            vec![hour_batch(&t, hour, 50)],
        )
        .execute()
        .await
        .unwrap();
    }
    let r = DiagnoseBuilder::new(&fx.catalog, daily)
        .query()
        .await
        .unwrap();
    let o = r.over_partitioned.as_ref().unwrap();
    assert!(!o.holds, "two days, both still written to: {}", o.evidence);
}

#[tokio::test]
async fn a_saved_report_compares_before_and_after_compaction() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.cmp", Some("day(ts)")).await;
    for k in 0..8 {
        fx.append(&ident, k * 50, k * 50 + 50).await;
    }
    let before = DiagnoseBuilder::new(&fx.catalog, ident.clone())
        .with_probe(true)
        .query()
        .await
        .unwrap();
    let probe = before.probe.clone().expect("asked for");
    assert_eq!(probe.rows, 400);
    assert!(probe.batches >= 1);
    // Saved as text and read back, as the CLI does.
    let saved = serde_json::to_string(&SavedReport::new(&before).unwrap()).unwrap();
    let saved = SavedReport::parse(&saved, "before.json").unwrap();
    assert_eq!(saved.table, "h.cmp");
    assert_eq!(
        saved.format_version,
        floe::operations::diagnose::compare::SAVED_FORMAT_VERSION
    );
    assert_eq!(saved.measures.data_files, 24);
    assert_eq!(saved.report["totals"]["data_files"], 24);

    rewrite_all(&fx.catalog, &ident).await;
    let after = DiagnoseBuilder::new(&fx.catalog, ident.clone())
        .with_probe(true)
        .query()
        .await
        .unwrap();
    let c = compare(&saved, &after, false).unwrap();
    let d = |m: &str| c.deltas.iter().find(|d| d.metric == m).expect(m).clone();
    assert_eq!(d("live data files").before, Some(24));
    assert_eq!(d("live data files").after, Some(3));
    assert_eq!(d("live data files").change, Some(-21));
    assert_eq!(d("files per partition (max)").after, Some(1));
    assert!(
        d("compaction backlog (small files)").before > d("compaction backlog (small files)").after
    );
    assert_eq!(
        d("snapshots").change,
        Some(1),
        "the rewrite is one more snapshot"
    );
    assert_eq!(d("probe rows").before, Some(400));
    assert_eq!(
        d("probe rows").change,
        Some(0),
        "the probe read the same rows"
    );
    assert!(d("probe time").after.is_some());
    assert!(
        d("bytes on storage").after > d("bytes on storage").before,
        "nothing expired yet"
    );
    assert!(d("files < 16 KiB").before > d("files < 16 KiB").after);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let text = floe::operations::diagnose::render::compare_text(&c);
    assert!(
        text.contains("live data files") && text.contains("-21 ("),
        "{text}"
    );
    let html = floe::operations::diagnose::render::html_with(&after, Some(&c));
    assert!(html.contains("<h2>Before / after</h2>"));
    assert!(
        html.contains("<tr><td>live data files</td><td>24</td><td>3</td>"),
        "{html}"
    );
    assert!(html.contains("File-size histogram, before (grey) and after"));

    // Another table's report is refused, unless forced (then it warns).
    let other = fx.table("h.other", Some("day(ts)")).await;
    fx.append(&other, 0, 10).await;
    let now_other = DiagnoseBuilder::new(&fx.catalog, other)
        .query()
        .await
        .unwrap();
    let err = compare(&saved, &now_other, false).unwrap_err().to_string();
    assert!(
        err.contains("--compare") && err.contains("h.cmp") && err.contains("--force"),
        "{err}"
    );
    let forced = compare(&saved, &now_other, true).unwrap();
    assert!(forced.warnings.iter().any(|w| w.contains("h.other")));
    // Not a saved report, or another version of the format: clear errors.
    let err = SavedReport::parse("{\"totals\": {}}", "x.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("x.json") && err.contains("not a saved diagnose report"),
        "{err}"
    );
    let mut v: serde_json::Value = serde_json::to_value(&saved).unwrap();
    v["format_version"] = 99.into();
    let err = SavedReport::parse(&v.to_string(), "x.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("format_version 99"), "{err}");
}

#[tokio::test]
async fn compare_refuses_a_huge_or_endless_saved_report_and_out_of_range_counts() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.tamper", None).await;
    fx.append(&ident, 0, 10).await;
    let now = DiagnoseBuilder::new(&fx.catalog, ident.clone())
        .query()
        .await
        .unwrap();
    // An endless file is read up to the bound, then refused naming it.
    let err = SavedReport::read(std::path::Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/dev/zero") && err.contains("64 MiB"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(floe::operations::diagnose::compare::MAX_SAVED_BYTES + 1)
        .unwrap();
    let err = SavedReport::read(&big).unwrap_err().to_string();
    assert!(err.contains("big.json") && err.contains("64 MiB"), "{err}");

    // A count no table has (written by hand): refused naming the field, never wrapped.
    let good = serde_json::to_value(SavedReport::new(&now).unwrap()).unwrap();
    for (field, value) in [
        ("data_files", u64::MAX),
        ("records", i64::MAX as u64 + 1),
        ("data_bytes", u64::MAX),
    ] {
        let mut v = good.clone();
        v["measures"][field] = value.into();
        let path = dir.path().join(format!("{field}.json"));
        std::fs::write(&path, v.to_string()).unwrap();
        let err = SavedReport::read(&path).unwrap_err().to_string();
        assert!(
            err.contains(&format!("measures.{field}")) && err.contains("out of range"),
            "{err}"
        );
    }
    // The largest counts that fit compare without wrapping.
    let mut v = good.clone();
    v["measures"]["data_files"] = (i64::MAX as u64).into();
    let path = dir.path().join("max.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let saved = SavedReport::read(&path).unwrap();
    let c = compare(&saved, &now, false).unwrap();
    let d = c
        .deltas
        .iter()
        .find(|d| d.metric == "live data files")
        .unwrap();
    assert_eq!(d.change, Some(1 - i64::MAX));
    assert!(d.change_pct.unwrap() < 0.0, "{d:?}");
}
