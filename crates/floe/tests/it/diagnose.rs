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

/// Sum of the sizes of the files under `dir` that are not metadata.json files (those each
/// commit adds): data files, manifests, manifest lists.
fn content_bytes(dir: &std::path::Path) -> (u64, u64) {
    crate::common::files_under(dir)
        .iter()
        .filter(|p| !p.to_string_lossy().ends_with(".metadata.json"))
        .fold((0, 0), |(n, b), p| {
            (n + 1, b + std::fs::metadata(p).unwrap().len())
        })
}

#[tokio::test]
async fn diagnose_names_the_writer_side_who_keeps_history_and_what_a_scan_requests() {
    use floe::operations::diagnose::Report;
    use floe::operations::expire::ExpireBuilder;
    use floe::operations::refs::DropRefBuilder;

    let fx = Fixture::new().await;
    let ident = fx.table("h.stream", None).await;
    let name = "h.stream";
    let diagnose = || async {
        DiagnoseBuilder::new(&fx.catalog, ident.clone())
            .query()
            .await
            .unwrap()
    };
    // Expires everything the table's refs and `--retain-last 1` allow.
    let expire_all = || async {
        ExpireBuilder::new(&fx.catalog, ident.clone())
            .with_older_than_age(std::time::Duration::ZERO)
            .with_retain_last(1)
            .execute()
            .await
            .unwrap()
    };
    let find = |r: &Report, id: &str| {
        r.observations
            .iter()
            .find(|o| o.id == id)
            .unwrap_or_else(|| panic!("{id}"))
            .clone()
    };
    // A streaming writer: small commits about 150 ms apart.
    for k in 0..8 {
        fx.append(&ident, k * 2000, k * 2000 + 2000).await;
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
    let tagged = fx.tag_current(&ident, "v1").await;
    // Compaction into row groups of 16 KiB, then the writer goes on making small files.
    fx.set_property(&ident, "write.parquet.row-group-size-bytes", "16384")
        .await;
    rewrite_all(&fx.catalog, &ident).await;
    fx.set_property(&ident, "write.parquet.row-group-size-bytes", "134217728")
        .await;
    for k in 8..14 {
        fx.append(&ident, k * 2000, k * 2000 + 2000).await;
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }

    let r = diagnose().await;
    let w = r.history.writer.clone().expect("writing commits");
    assert_eq!(w.writing_commits, 14);
    let interval = w.commit_interval_ms.unwrap();
    assert!((150..5_000).contains(&interval), "{w:?}");
    // Every commit's metadata.json is on local storage, with sub-millisecond times.
    assert!(w.commit_durations_measured >= 13, "{w:?}");
    assert!(w.commit_duration_ms.unwrap() < 5_000, "{w:?}");
    assert!(w.freshness_ms.unwrap() < 60_000, "{w:?}");
    let o = find(&r, "writer-makes-small-files");
    assert!(o.holds, "{o:?}");
    assert!(o.action.unwrap().contains("--commit-interval"));
    let o = find(&r, "small-files-regrow-after-compaction");
    assert!(o.holds, "{o:?}");
    assert!(
        o.evidence.contains("6 writing commits added 6 files"),
        "{}",
        o.evidence
    );

    // The scan estimate counts the row groups pyarrow reads in the footers of the files
    // PyIceberg plans (the compacted file has many, each small file one).
    let planned = crate::common::plan_files(&fx, name, &[]);
    let q = &r.scan_requests;
    assert_eq!(planned["files"].as_u64(), Some(r.totals.data_files));
    assert_eq!(Some(q.row_groups), planned["row_groups"].as_u64(), "{q:?}");
    assert!(
        q.row_groups > r.totals.data_files,
        "16 KiB row groups: {q:?}"
    );
    assert_eq!(q.columns, 4);
    assert_eq!(q.metadata, 2 + r.history.manifests);
    assert_eq!(q.min, q.metadata + r.totals.data_files + q.row_groups);
    assert_eq!(
        q.max,
        q.metadata + 2 * r.totals.data_files + 4 * q.row_groups
    );
    assert_eq!(q.compacted_files, 1);
    assert!(q.compacted_min < q.min && q.compacted_max < q.max, "{q:?}");

    // Before expiry, the tag and the retention window keep the pre-compaction files.
    let by = |r: &Report, who: &str| {
        r.history
            .retained_by
            .iter()
            .find(|k| k.retainer == who)
            .cloned()
    };
    let tag = by(&r, "tag:v1").expect("the tag");
    assert_eq!(tag.snapshots, 1);
    assert!(tag.held_files >= 8, "its 8 small files: {tag:?}");
    assert!(by(&r, "retention-window").is_some());
    assert!(find(&r, "history-retains-old-files")
        .evidence
        .contains("kept by: "));

    // Expire everything the retention allows: the tag keeps its files, the window is gone.
    expire_all().await;
    let r = diagnose().await;
    assert!(
        by(&r, "retention-window").is_none(),
        "{:?}",
        r.history.retained_by
    );
    let tag = by(&r, "tag:v1").expect("the tag");
    assert_eq!(
        tag.exclusive_files, tag.held_files,
        "nothing else keeps them"
    );
    assert!(tag.exclusive_bytes > 0);

    // What the tag alone keeps is exactly what expiry deletes once the tag is dropped.
    let location = fx.load(&ident).await.metadata().location().to_string();
    let dir = std::path::PathBuf::from(location.trim_start_matches("file://"));
    let (files_before, bytes_before) = content_bytes(&dir);
    DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .execute()
        .await
        .unwrap();
    expire_all().await;
    let (files_after, bytes_after) = content_bytes(&dir);
    assert_eq!(
        (files_before - files_after, bytes_before - bytes_after),
        (tag.exclusive_files, tag.exclusive_bytes),
        "snapshot {tagged}"
    );
    assert!(diagnose().await.history.retained_by.is_empty());

    // The writer side is saved and compared.
    let saved = SavedReport::new(&r).unwrap();
    assert_eq!(saved.measures.writer.as_ref(), r.history.writer.as_ref());
    let c = compare(&saved, &diagnose().await, false).unwrap();
    let d = |m: &str| c.deltas.iter().find(|d| d.metric == m).expect(m).clone();
    assert!(d("writer: freshness (newest data's age)").after.is_some());
    assert_eq!(
        d("full scan requests (fewest)").before,
        Some(r.scan_requests.min)
    );
}
