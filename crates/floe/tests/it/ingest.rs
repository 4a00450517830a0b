//! Streaming ingest (DESIGN section 5, invariant 4): bad records go to the dead-letter sink and
//! the stream goes on; a restart resumes exactly after the last commit; a commit adds at most
//! one file per partition touched (per writer); buffers spill instead of flushing small files;
//! Kafka positions live in the table.

use floe::operations::Query;
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe::ingest::dead_letter::DeadLetterSink;
use floe::ingest::metrics::Metrics;
use floe::ingest::source;
use floe::ingest::stream::{CommitReport, Distribution, IngestBuilder, IngestOptions};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;

use crate::common::Fixture;

fn line(id: i64) -> String {
    format!(
        "{{\"id\": {id}, \"ts\": \"2026-01-0{}T10:00:00\", \"name\": \"n{}\", \"amount\": {}}}",
        1 + id % 3,
        id % 7,
        id as f64 * 0.5
    )
}

pub async fn count_distinct(fx: &Fixture, table: &str) -> (i64, i64, i64) {
    let b = floe::operations::sql::SqlBuilder::new(
        &fx.catalog,
        format!(
            "SELECT count(*) AS n, count(DISTINCT id) AS d, coalesce(sum(id), 0) AS s FROM {table}"
        ),
    )
    .query()
    .await
    .unwrap();
    let col = |i: usize| {
        b[0].column(i)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap()
            .value(0)
    };
    (col(0), col(1), col(2))
}

fn opts(writer: &str) -> IngestOptions {
    let mut o = IngestOptions::new(writer);
    o.commit_interval = Duration::from_secs(3600);
    o
}

async fn run_file(
    fx: &Fixture,
    table: &str,
    path: &std::path::Path,
    o: IngestOptions,
    dl: Option<&std::path::Path>,
) -> (floe::ingest::stream::IngestMetrics, Vec<CommitReport>) {
    let ident = floe::catalog::parse_table_ident(table).unwrap();
    let src = source::open(&path.display().to_string(), false).unwrap();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut b = IngestBuilder::new(&fx.catalog, ident, src, o)
        .on_commit(move |r| sink.lock().unwrap().push(r.clone()));
    if let Some(p) = dl {
        b = b.with_dead_letter(
            DeadLetterSink::open(&p.display().to_string())
                .await
                .unwrap(),
        );
    }
    let s = b.execute().await.unwrap();
    let r = reports.lock().unwrap().clone();
    (s, r)
}

#[tokio::test]
async fn bad_records_go_to_the_dead_letter_file_and_a_restart_resumes_exactly() {
    let fx = Fixture::new().await;
    fx.table("s.events", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    let dl = dir.path().join("dead.ndjson");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 0..3000 {
        writeln!(f, "{}", line(i)).unwrap();
    }
    writeln!(f, "{{\"id\": \"seven\", \"ts\": \"2026-01-01T00:00:00\"}}").unwrap();
    writeln!(f, "{{\"id\": 9, \"ts\": \"yesterday\"}}").unwrap();
    writeln!(f, "{{\"ts\": \"2026-01-01T00:00:00\"}}").unwrap();
    writeln!(f, "this is not json").unwrap();
    drop(f);
    let (s, reports) = run_file(&fx, "s.events", &input, opts("w1"), Some(&dl)).await;
    assert_eq!(s.bad_records, 4);
    assert_eq!(s.commits, 1);
    assert_eq!(reports[0].records, 3000);
    assert_eq!(reports[0].data_files, 3, "one file per day partition");
    assert_eq!(
        count_distinct(&fx, "s.events").await,
        (3000, 3000, (0..3000).sum())
    );
    let dead: Vec<serde_json::Value> = std::fs::read_to_string(&dl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(dead.len(), 4);
    assert_eq!(dead[0]["column"], "id");
    assert!(dead[0]["payload"].as_str().unwrap().contains("seven"));
    assert_eq!(dead[1]["column"], "ts");
    assert!(dead[2]["reason"].as_str().unwrap().contains("required"));
    assert!(dead[3]["reason"].as_str().unwrap().contains("invalid JSON"));
    assert!(
        dead[3]["position"].as_i64().unwrap() > 0,
        "the byte offset of the record"
    );

    // Same input again: nothing new. Then appended lines: exactly those.
    let (s, _) = run_file(&fx, "s.events", &input, opts("w1"), None).await;
    assert_eq!((s.records, s.commits), (0, 0));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    for i in 3000..3500 {
        writeln!(f, "{}", line(i)).unwrap();
    }
    drop(f);
    let (s, _) = run_file(&fx, "s.events", &input, opts("w1"), None).await;
    assert_eq!(s.records, 500);
    assert_eq!(
        count_distinct(&fx, "s.events").await,
        (3500, 3500, (0..3500).sum())
    );
    let t = fx
        .load(&floe::catalog::parse_table_ident("s.events").unwrap())
        .await;
    let props = &t
        .metadata()
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(props["floe.writer-id"], "w1");
    // The position is recorded with the file's identity (device, inode, first line).
    let size = std::fs::metadata(&input).unwrap().len();
    let prefix = format!("floe.position.file:{}#", input.display());
    let positions: Vec<&String> = props
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(positions, vec![&size.to_string()], "{props:?}");
    // A different writer id starts from the beginning: positions are per writer.
    let (s, _) = run_file(&fx, "s.events", &input, opts("w2"), None).await;
    assert_eq!(s.records, 3504);
}

#[tokio::test]
async fn a_commit_adds_at_most_one_file_per_partition_per_writer() {
    let fx = Fixture::new().await;
    fx.table("s.fan", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 0..6000 {
        writeln!(f, "{}", line(i)).unwrap();
    }
    drop(f);
    for (writer, dist, par, max_per_partition) in [
        ("none-1", Distribution::None, 1, 1),
        ("hash-2", Distribution::Hash, 2, 1),
        ("none-2", Distribution::None, 2, 2),
    ] {
        let mut o = opts(writer);
        o.commit_records = Some(1000);
        o.batch_records = 250;
        o.distribution = Some(dist);
        o.write_parallelism = par;
        let (s, reports) = run_file(&fx, "s.fan", &input, o, None).await;
        assert_eq!(s.records, 6000, "{writer}");
        assert_eq!(reports.len(), 6, "{writer}: a commit per 1000 records");
        for r in &reports {
            assert_eq!(r.records, 1000);
            assert!(
                r.data_files <= 3 * max_per_partition,
                "{writer}: {} files for 3 partitions",
                r.data_files
            );
        }
        if dist == Distribution::None && par == 2 {
            assert!(
                reports.iter().any(|r| r.data_files > 3),
                "round robin spreads partitions over writers"
            );
        }
    }
    assert_eq!(count_distinct(&fx, "s.fan").await.0, 18_000);
}

#[tokio::test]
async fn range_distribution_splits_a_hot_partition_and_keeps_cold_ones_whole() {
    let fx = Fixture::new().await;
    fx.table("s.skew", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    let mut f = std::fs::File::create(&input).unwrap();
    // 80% of the rows on 2026-01-01, 10% on each of the two other days.
    for i in 0..10_000i64 {
        let day = match i % 10 {
            8 => 2,
            9 => 3,
            _ => 1,
        };
        writeln!(
            f,
            "{{\"id\": {i}, \"ts\": \"2026-01-0{day}T10:00:00\", \"name\": \"n{}\", \"amount\": 1.5}}",
            i % 7
        )
        .unwrap();
    }
    drop(f);
    let run = |writer: &'static str, dist: Distribution| {
        let mut o = opts(writer);
        o.commit_records = Some(2000);
        o.batch_records = 250;
        o.distribution = Some(dist);
        o.write_parallelism = 4;
        o
    };
    let (s, hash) = run_file(&fx, "s.skew", &input, run("hash", Distribution::Hash), None).await;
    assert_eq!(s.records, 10_000);
    assert!(
        hash.iter().all(|r| r.data_files == 3),
        "hash: one task per partition"
    );
    let (s, range) = run_file(
        &fx,
        "s.skew",
        &input,
        run("range", Distribution::Range),
        None,
    )
    .await;
    assert_eq!(s.records, 10_000);
    assert_eq!(range.len(), 5);
    // The first window has no statistics (round robin); from the second on, the hot day is
    // split over several tasks and each cold day stays on one.
    for r in &range[1..] {
        assert!(
            (4..=6).contains(&r.data_files),
            "range: the hot partition over 2-4 tasks, the cold ones 1 each: {} files",
            r.data_files
        );
    }
    let (n, d, sum) = count_distinct(&fx, "s.skew").await;
    assert_eq!(
        (n, d, sum),
        (20_000, 10_000, 2 * (0..10_000i64).sum::<i64>())
    );
}

#[tokio::test]
async fn buffers_spill_to_disk_instead_of_writing_small_files() {
    let fx = Fixture::new().await;
    fx.table("s.spill", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for i in 0..60_000 {
        writeln!(f, "{}", line(i)).unwrap();
    }
    drop(f);
    let metrics = Metrics::new();
    let mut o = opts("spill");
    o.write_buffer_size = Some(256 * 1024);
    o.batch_records = 1000;
    let ident = floe::catalog::parse_table_ident("s.spill").unwrap();
    let src = source::open(&input.display().to_string(), false).unwrap();
    let s = IngestBuilder::new(&fx.catalog, ident, src, o)
        .with_metrics(metrics.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(s.commits, 1);
    assert_eq!(
        s.data_files, 3,
        "one file per partition despite a buffer far smaller than the data"
    );
    let text = metrics.render();
    let spilled: u64 = text
        .lines()
        .find(|l| l.starts_with("spilledBytes "))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap()
        .parse()
        .unwrap();
    assert!(spilled > 1_000_000, "spilled {spilled} bytes");
    assert!(text.contains("committedDataFilesRecordCount 60000"));
    assert_eq!(
        count_distinct(&fx, "s.spill").await,
        (60_000, 60_000, (0..60_000).sum())
    );
}

pub fn kafka() -> String {
    std::env::var("FLOE_TEST_KAFKA").expect("Kafka tests need FLOE_TEST_KAFKA (run .ci/setup)")
}

/// Creates `topic` with `partitions` and produces `payloads[i]` to partition `i % partitions`.
pub async fn produce(topic: &str, partitions: i32, payloads: Vec<Vec<u8>>, create: bool) {
    let records = payloads
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let r = Record {
                key: None,
                value: Some(p),
                headers: Default::default(),
                timestamp: chrono::Utc::now(),
            };
            (i as i32 % partitions, r)
        })
        .collect();
    produce_to(topic, partitions, records, create).await
}

/// Creates `topic` with `partitions` (when `create`) and produces each record to its partition,
/// in order.
pub async fn produce_to(topic: &str, partitions: i32, records: Vec<(i32, Record)>, create: bool) {
    let client = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
    if create {
        client
            .controller_client()
            .unwrap()
            .create_topic(topic, partitions, 1, 5_000)
            .await
            .unwrap();
    }
    let mut by_partition: HashMap<i32, Vec<Record>> = HashMap::new();
    for (p, r) in records {
        by_partition.entry(p).or_default().push(r);
    }
    for (p, records) in by_partition {
        let pc = client
            .partition_client(topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        for chunk in records.chunks(500) {
            pc.produce(chunk.to_vec(), Compression::NoCompression)
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn kafka_positions_live_in_the_table_and_bad_records_reach_a_dead_letter_topic() {
    let fx = Fixture::new().await;
    fx.table("s.kafka", Some("day(ts)")).await;
    let topic = format!("events-{}", uuid::Uuid::new_v4().simple());
    let mut payloads: Vec<Vec<u8>> = (0..900).map(|i| line(i).into_bytes()).collect();
    payloads.push(b"{\"id\": \"bad\"}".to_vec());
    payloads.push(b"garbage".to_vec());
    produce(&topic, 3, payloads, true).await;
    let dead_topic = format!("dead-{}", uuid::Uuid::new_v4().simple());
    let uri = format!("kafka://{}/{topic}", kafka());
    let run = |o: IngestOptions| {
        let fx = &fx;
        let uri = uri.clone();
        let dead = format!("kafka://{}/{dead_topic}", kafka());
        async move {
            let ident = floe::catalog::parse_table_ident("s.kafka").unwrap();
            IngestBuilder::new(&fx.catalog, ident, source::open(&uri, false).unwrap(), o)
                .with_dead_letter(DeadLetterSink::open(&dead).await.unwrap())
                .execute()
                .await
                .unwrap()
        }
    };
    let mut o = opts("k1");
    o.stop_when_idle = Some(Duration::from_secs(2));
    let s = run(o.clone()).await;
    assert_eq!(s.records, 902);
    assert_eq!(s.bad_records, 2);
    assert_eq!(s.positions.len(), 3, "{:?}", s.positions);
    assert_eq!(
        s.positions.values().sum::<i64>(),
        902,
        "next offsets of 3 partitions"
    );
    assert_eq!(
        count_distinct(&fx, "s.kafka").await,
        (900, 900, (0..900).sum())
    );
    // More records: a restart reads only those.
    produce(
        &topic,
        3,
        (900..1200).map(|i| line(i).into_bytes()).collect(),
        false,
    )
    .await;
    let s = run(o).await;
    assert_eq!(s.records, 300);
    assert_eq!(
        count_distinct(&fx, "s.kafka").await,
        (1200, 1200, (0..1200).sum())
    );
    // The dead letters are on their topic with the reason.
    let client = ClientBuilder::new(vec![kafka()]).build().await.unwrap();
    let pc = client
        .partition_client(dead_topic.clone(), 0, UnknownTopicHandling::Retry)
        .await
        .unwrap();
    let (records, _) = pc.fetch_records(0, 1..1_000_000, 1_000).await.unwrap();
    assert_eq!(records.len(), 2);
    let first: serde_json::Value =
        serde_json::from_slice(records[0].record.value.as_ref().unwrap()).unwrap();
    assert!(first["stream"]
        .as_str()
        .unwrap()
        .starts_with(&format!("kafka:{topic}:")));
    assert!(!first["reason"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn too_many_bad_records_stop_with_a_clear_error_and_commit_nothing() {
    let fx = Fixture::new().await;
    fx.table("s.strict", None).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    let mut text = String::new();
    for i in 0..100 {
        text.push_str(&line(i));
        text.push('\n');
        if i % 10 == 0 {
            text.push_str("{\"id\": null}\n");
        }
    }
    std::fs::write(&input, text).unwrap();
    let mut o = opts("strict");
    o.max_bad_records = Some(3);
    let ident = floe::catalog::parse_table_ident("s.strict").unwrap();
    let e = IngestBuilder::new(
        &fx.catalog,
        ident.clone(),
        source::open(&input.display().to_string(), false).unwrap(),
        o,
    )
    .execute()
    .await
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("exceed --max-bad-records 3") && msg.contains("column 'id'"),
        "{msg}"
    );
    assert!(fx
        .load(&ident)
        .await
        .metadata()
        .current_snapshot()
        .is_none());
}

#[tokio::test]
async fn a_second_process_under_the_same_writer_id_is_refused() {
    let fx = Fixture::new().await;
    fx.table("s.fence", None).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    std::fs::write(&input, (0..10).map(|i| line(i) + "\n").collect::<String>()).unwrap();
    // Process A starts (reads no positions), then B commits under the same id before A does.
    let ident = floe::catalog::parse_table_ident("s.fence").unwrap();
    let mut o = opts("same");
    o.stop_when_idle = Some(Duration::from_millis(300));
    o.pause_before_commit = Some(Duration::from_secs(3));
    let a = IngestBuilder::new(
        &fx.catalog,
        ident.clone(),
        source::open(&input.display().to_string(), true).unwrap(),
        o,
    );
    let a = tokio::spawn(a.execute());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (s, _) = run_file(&fx, "s.fence", &input, opts("same"), None).await;
    assert_eq!(s.records, 10);
    let e = a.await.unwrap().unwrap_err();
    assert!(
        e.to_string()
            .contains("another process committed under the same writer id"),
        "{e}"
    );
    assert_eq!(count_distinct(&fx, "s.fence").await.0, 10, "no duplicate");
}

/// A window lands (writes its files, commits) in the background while the next window is
/// read; windows still commit in their order, each snapshot the child of the window before.
#[tokio::test]
async fn the_next_window_is_read_while_one_lands_and_windows_commit_in_order() {
    let fx = Fixture::new().await;
    fx.table("s.pipe", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    std::fs::write(&input, (0..40).map(|i| line(i) + "\n").collect::<String>()).unwrap();
    let ident = floe::catalog::parse_table_ident("s.pipe").unwrap();
    let mut o = opts("pipe");
    o.commit_records = Some(10);
    o.pause_before_commit = Some(Duration::from_millis(400));
    let metrics = Metrics::new();
    let seen = metrics.clone();
    let seen_after = metrics.clone();
    // Each report with the records read when it was made.
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let s = IngestBuilder::new(
        &fx.catalog,
        ident.clone(),
        source::open(&input.display().to_string(), false).unwrap(),
        o,
    )
    .with_metrics(metrics)
    .on_commit(move |r| {
        let read = seen.records_in.load(std::sync::atomic::Ordering::Relaxed);
        sink.lock().unwrap().push((r.clone(), read));
    })
    .execute()
    .await
    .unwrap();
    let reports = reports.lock().unwrap().clone();
    assert_eq!(s.commits, 4);
    assert_eq!(
        reports.iter().map(|(r, _)| r.commit).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    // The files a background landing wrote are counted, and their sizes observed.
    let text = seen_after.render();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(line("flushedDataFiles ") as u64, s.data_files);
    assert_eq!(line("dataFilesSizeHistogram_count") as u64, s.data_files);
    assert!(line("dataFilesSizeHistogram_sum") > 0.0);
    assert_eq!(reports.iter().map(|(r, _)| r.records).sum::<u64>(), 40);
    // While the first window waited 400 ms before its commit, the next one was read.
    assert!(
        reports[0].1 > 10,
        "records read when the first window landed: {}",
        reports[0].1
    );
    let table = fx.catalog.load_table(&ident).await.unwrap();
    let md = table.metadata();
    let mut last: Option<(i64, i64)> = None;
    for (r, _) in &reports {
        let position = *r.positions.values().next().unwrap();
        let snap = md.snapshot_by_id(r.snapshot_id).unwrap();
        if let Some((parent, before)) = last {
            assert_eq!(
                snap.parent_snapshot_id(),
                Some(parent),
                "commit {}",
                r.commit
            );
            assert!(
                position > before,
                "commit {} moved positions back",
                r.commit
            );
        }
        last = Some((r.snapshot_id, position));
    }
    assert_eq!(
        count_distinct(&fx, "s.pipe").await,
        (40, 40, (0..40).sum::<i64>())
    );
}

/// The bytes in `metrics`' `spilledBytes` line.
fn spilled(metrics: &Metrics) -> u64 {
    metrics
        .render()
        .lines()
        .find(|l| l.starts_with("spilledBytes "))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

/// While a window lands, its buffered bytes still count against `--write-buffer-size`: a
/// window that fits the budget alone spills once it is read beside a landing one, so memory
/// stays within the budget rather than reaching twice it.
#[tokio::test]
async fn a_landing_window_counts_against_the_buffer_budget() {
    let fx = Fixture::new().await;
    let n = 20_000i64;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, records: i64| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            (0..records).map(|i| line(i) + "\n").collect::<String>(),
        )
        .unwrap();
        path
    };
    let (one, two) = (write("one.ndjson", n), write("two.ndjson", 2 * n));
    // The budget: one and a half windows, in the Arrow bytes of a window's rows.
    let ident = fx.table("s.budget_one", Some("day(ts)")).await;
    let table = fx.catalog.load_table(&ident).await.unwrap();
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let lines: Vec<String> = (0..n).map(line).collect();
    let payloads: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    let window = floe::records::decode::decode_records(&schema, &payloads)
        .batch
        .unwrap()
        .get_array_memory_size() as u64;
    let run = |table: &'static str, input: std::path::PathBuf, pause: Option<Duration>| {
        let fx = &fx;
        async move {
            let mut o = opts(table);
            o.commit_records = Some(n as u64);
            o.batch_records = n as usize;
            o.write_parallelism = 1;
            o.write_buffer_size = Some(window * 3 / 2);
            o.pause_before_commit = pause;
            let metrics = Metrics::new();
            let s = IngestBuilder::new(
                &fx.catalog,
                floe::catalog::parse_table_ident(table).unwrap(),
                source::open(&input.display().to_string(), false).unwrap(),
                o,
            )
            .with_metrics(metrics.clone())
            .execute()
            .await
            .unwrap();
            (s, spilled(&metrics))
        }
    };
    let (s, alone) = run("s.budget_one", one, None).await;
    assert_eq!(
        (s.commits, alone),
        (1, 0),
        "one window alone fits the budget"
    );
    fx.table("s.budget_two", Some("day(ts)")).await;
    let (s, beside) = run("s.budget_two", two, Some(Duration::from_millis(400))).await;
    assert_eq!(s.commits, 2);
    assert!(
        beside > 0,
        "the second window was read while the first landed: it had to spill"
    );
    assert_eq!(
        count_distinct(&fx, "s.budget_two").await,
        (2 * n, 2 * n, (0..2 * n).sum::<i64>())
    );
}

/// A window that fails to land in the background (another process committed under the same
/// writer id meanwhile) stops the ingest with that error; the windows read after it are not
/// committed, and nothing is duplicated.
#[tokio::test]
async fn a_window_refused_while_the_next_is_read_stops_the_ingest_without_duplicates() {
    let fx = Fixture::new().await;
    fx.table("s.pipefence", None).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    std::fs::write(&input, (0..30).map(|i| line(i) + "\n").collect::<String>()).unwrap();
    let ident = floe::catalog::parse_table_ident("s.pipefence").unwrap();
    let mut o = opts("same");
    o.commit_records = Some(10);
    o.pause_before_commit = Some(Duration::from_millis(1500));
    let metrics = Metrics::new();
    let a = IngestBuilder::new(
        &fx.catalog,
        ident.clone(),
        source::open(&input.display().to_string(), false).unwrap(),
        o,
    )
    .with_metrics(metrics.clone());
    let a = tokio::spawn(a.execute());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (s, _) = run_file(&fx, "s.pipefence", &input, opts("same"), None).await;
    assert_eq!(s.records, 30);
    let e = a.await.unwrap().unwrap_err();
    assert!(
        e.to_string()
            .contains("another process committed under the same writer id"),
        "{e}"
    );
    let failed = metrics
        .failed_commits
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(failed, 1);
    assert_eq!(
        count_distinct(&fx, "s.pipefence").await,
        (30, 30, (0..30).sum::<i64>()),
        "no duplicate"
    );
}

#[tokio::test]
async fn an_ingest_plan_shows_where_it_resumes_and_progress_counts_commits() {
    use floe::base::cost::{Phase, Progress};
    let fx = Fixture::new().await;
    fx.table("s.plan", Some("day(ts)")).await;
    let ident = floe::catalog::parse_table_ident("s.plan").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 0..100 {
        writeln!(f, "{}", line(i)).unwrap();
    }
    drop(f);
    let uri = input.display().to_string();
    let builder = |o| {
        IngestBuilder::new(
            &fx.catalog,
            ident.clone(),
            source::open(&uri, false).unwrap(),
            o,
        )
    };
    let fresh = builder(opts("w-plan")).plan().await.unwrap();
    assert_eq!(fresh.resumes_after_snapshot, None);
    assert!(fresh.resume_from.is_empty());
    assert_eq!(fresh.distribution, floe::ingest::stream::Distribution::None);

    let events = Arc::new(Mutex::new(Vec::<Progress>::new()));
    let sink = events.clone();
    let mut o = opts("w-plan");
    o.commit_records = Some(40);
    let s = builder(o)
        .with_progress(move |p| sink.lock().unwrap().push(*p))
        .execute()
        .await
        .unwrap();
    assert_eq!(s.commits, 3);
    let ev = events.lock().unwrap().clone();
    assert!(ev.iter().all(|p| p.phase == Phase::Commit));
    assert_eq!(ev.len(), 4, "a start and one per commit: {ev:?}");
    let last = ev.last().unwrap().done;
    assert_eq!((last.steps, last.rows, last.files), (3, 100, s.data_files));

    let table = fx.load(&ident).await;
    let again = builder(opts("w-plan")).plan().await.unwrap();
    assert_eq!(
        again.resumes_after_snapshot,
        table.metadata().current_snapshot_id()
    );
    assert_eq!(again.resume_from, s.positions);
    assert!(builder(opts(" ")).plan().await.is_err(), "empty writer id");
}

/// Appends the lines of `ids` to `path` (created when missing), as a logging process does.
fn log_lines(path: &std::path::Path, ids: std::ops::Range<i64>) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for i in ids {
        writeln!(f, "{}", line(i)).unwrap();
    }
}

/// Waits until `table` holds `n` rows (a running ingest committed them).
async fn wait_for_rows(fx: &Fixture, table: &str, n: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (rows, ..) = count_distinct(fx, table).await;
        if rows >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{table} holds {rows} rows, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A following ingest of `glob` into `table` (1 s commits), stopped by the returned sender.
fn follow(
    fx: &Fixture,
    table: &str,
    glob: &std::path::Path,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<floe::ingest::stream::IngestMetrics>,
) {
    let ident = floe::catalog::parse_table_ident(table).unwrap();
    let src = source::open(&glob.display().to_string(), true).unwrap();
    let mut o = opts("follow");
    o.commit_interval = Duration::from_secs(1);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let b = IngestBuilder::new(&fx.catalog, ident, src, o).with_shutdown(async move {
        let _ = stopped.await;
    });
    (
        stop,
        tokio::spawn(async move { b.execute().await.unwrap() }),
    )
}

#[tokio::test]
async fn follow_reads_every_line_exactly_once_across_copytruncate_and_rename_and_create() {
    let fx = Fixture::new().await;
    fx.table("f.t", None).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.ndjson");
    let (stop, run) = follow(&fx, "f.t", &dir.path().join("*.ndjson"));
    log_lines(&log, 0..20);
    wait_for_rows(&fx, "f.t", 20).await;
    // copytruncate: copied away (a name the glob does not match), truncated, written on.
    std::fs::copy(&log, dir.path().join("log.ndjson.1")).unwrap();
    std::fs::File::create(&log).unwrap();
    for k in 0..6 {
        log_lines(&log, 20 + k * 10..30 + k * 10);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for_rows(&fx, "f.t", 80).await;
    // Truncated again, and fewer lines written than it held.
    std::fs::File::create(&log).unwrap();
    log_lines(&log, 80..85);
    wait_for_rows(&fx, "f.t", 85).await;
    // Rename and create: lines written before the rename and by the writer still holding the
    // renamed file are read too; the new file from its first line.
    log_lines(&log, 85..90);
    let old = dir.path().join("old.bak");
    std::fs::rename(&log, &old).unwrap();
    log_lines(&old, 90..95);
    log_lines(&log, 95..105);
    wait_for_rows(&fx, "f.t", 105).await;
    // Renamed to a name the glob matches: read on, not again.
    std::fs::rename(&log, dir.path().join("log-1.ndjson")).unwrap();
    log_lines(&dir.path().join("log-1.ndjson"), 105..110);
    log_lines(&log, 110..120);
    wait_for_rows(&fx, "f.t", 120).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.send(()).unwrap();
    run.await.unwrap();
    assert_eq!(
        count_distinct(&fx, "f.t").await,
        (120, 120, (0..120).sum()),
        "every line exactly once"
    );
}

#[tokio::test]
async fn a_restart_after_rotation_resumes_each_file_where_its_committed_lines_end() {
    let fx = Fixture::new().await;
    fx.table("f.r", None).await;
    let dir = tempfile::tempdir().unwrap();
    let glob = dir.path().join("*.ndjson");
    let log = dir.path().join("log.ndjson");
    let run = |fx: &Fixture| {
        let ident = floe::catalog::parse_table_ident("f.r").unwrap();
        let src = source::open(&glob.display().to_string(), true).unwrap();
        let mut o = opts("follow");
        o.stop_when_idle = Some(Duration::from_secs(1));
        IngestBuilder::new(&fx.catalog, ident, src, o).execute()
    };
    log_lines(&log, 0..20);
    assert_eq!(run(&fx).await.unwrap().records, 20);
    // Stopped: rename and create.
    std::fs::rename(&log, dir.path().join("old.bak")).unwrap();
    log_lines(&log, 20..30);
    assert_eq!(run(&fx).await.unwrap().records, 10);
    // Stopped: copytruncate, written past the old size.
    std::fs::File::create(&log).unwrap();
    log_lines(&log, 30..50);
    assert_eq!(run(&fx).await.unwrap().records, 20);
    // Stopped: copytruncate, fewer lines than before.
    std::fs::File::create(&log).unwrap();
    log_lines(&log, 50..53);
    assert_eq!(run(&fx).await.unwrap().records, 3);
    // Stopped: appended lines only.
    log_lines(&log, 53..60);
    assert_eq!(run(&fx).await.unwrap().records, 7);
    assert_eq!(
        count_distinct(&fx, "f.r").await,
        (60, 60, (0..60).sum()),
        "every line exactly once"
    );
}
