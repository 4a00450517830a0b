//! Stream and maintenance as one (crates/floe/src/maintain/in_stream.rs): an ingest that runs the
//! table's maintenance itself commits data and maintenance through one committer (no
//! conflict between them), rolls up an active partition's small files, keeps every row once;
//! backpressure stretches the commit interval while compaction debt is over its limit; a
//! restarted writer finds its positions past snapshots expiry removed.

use floe::operations::Operation;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe::base::properties::{INGEST_MAX_COMMIT_INTERVAL, INGEST_MAX_SMALL_FILES};
use floe::ingest::source;
use floe::ingest::stream::{CommitReport, IngestBuilder, IngestMetrics, IngestOptions};
use floe::maintain::in_stream::InStream;
use floe::operations::compact::CompactBuilder;
use floe::operations::expire::ExpireBuilder;
use floe::table::manifests::live_files;

use crate::common::Fixture;

/// One day, so every record lands in the same (active) partition.
fn line(id: i64) -> String {
    format!(
        "{{\"id\": {id}, \"ts\": \"2026-01-01T10:{:02}:00\", \"name\": \"n{}\", \"amount\": {}}}",
        id % 60,
        id % 7,
        id as f64 * 0.5
    )
}

fn write_lines(path: &std::path::Path, ids: std::ops::Range<i64>) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for i in ids {
        writeln!(f, "{}", line(i)).unwrap();
    }
}

async fn ingest(
    fx: &Fixture,
    table: &str,
    uri: &str,
    follow: bool,
    o: IngestOptions,
) -> (IngestMetrics, Vec<CommitReport>, Vec<String>) {
    let ident = floe::catalog::parse_table_ident(table).unwrap();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (sink, log) = (reports.clone(), lines.clone());
    let s = IngestBuilder::new(&fx.catalog, ident, source::open(uri, follow).unwrap(), o)
        .on_commit(move |r| sink.lock().unwrap().push(r.clone()))
        .with_maintenance(InStream::new().with_log(Arc::new(move |l: &str| {
            log.lock().unwrap().push(l.to_string())
        })))
        .execute()
        .await
        .unwrap();
    let r = reports.lock().unwrap().clone();
    let l = lines.lock().unwrap().clone();
    (s, r, l)
}

/// Rows and distinct ids.
async fn count_distinct(fx: &Fixture, table: &str) -> (i64, i64) {
    let (n, d, _) = crate::ingest::count_distinct(fx, table).await;
    (n, d)
}

#[tokio::test]
async fn ingest_with_maintain_rolls_up_the_active_partition_through_one_committer() {
    let fx = Fixture::new().await;
    let ident = fx.table("s.rolled", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    write_lines(&input, 0..6000);
    let mut o = IngestOptions::new("w");
    o.commit_interval = Duration::from_secs(3600);
    o.commit_records = Some(200);
    o.batch_records = 200;
    o.maintain = Some(true);
    o.maintain_store = Some(fx.config.uri.clone());
    // Commits slow enough for the maintainer to run between them.
    o.pause_before_commit = Some(Duration::from_millis(150));
    let (s, reports, log) = ingest(&fx, "s.rolled", &input.display().to_string(), false, o).await;
    assert_eq!(s.commits, 30);
    assert_eq!(count_distinct(&fx, "s.rolled").await, (6000, 6000));
    // One committer: no data commit ever lost a race to the process's own maintenance.
    assert!(
        reports.iter().all(|r| r.attempts == 1),
        "{:?}",
        reports.iter().map(|r| r.attempts).collect::<Vec<_>>()
    );
    let m = s.maintenance.expect("maintenance ran");
    assert!(
        m["succeeded_by_job"]["compact"].as_u64().unwrap_or(0) >= 1,
        "{m:?}\n{log:#?}"
    );
    assert!(
        log.iter().any(|l| l.contains("roll-up")),
        "the compaction was a roll-up of the active partition: {log:#?}"
    );
    let table = fx.load(&ident).await;
    let live = live_files(&table).await.unwrap().len();
    assert!(
        live < 30,
        "{live} live files after 30 commits into one partition"
    );
    let replaced = table
        .metadata()
        .snapshots()
        .filter(|s| s.summary().operation.as_str() == "replace")
        .count();
    assert!(replaced >= 1);
    // Every commit of the writer carries its positions: a restart reads nothing again.
    let mut o = IngestOptions::new("w");
    o.maintain = Some(false);
    let (s, _, _) = ingest(&fx, "s.rolled", &input.display().to_string(), false, o).await;
    assert_eq!((s.records, s.commits), (0, 0));
}

#[tokio::test]
async fn backpressure_stretches_the_commit_interval_while_debt_is_over_and_recovers() {
    let fx = Fixture::new().await;
    let ident = fx.table("s.pressed", Some("day(ts)")).await;
    fx.set_property(&ident, INGEST_MAX_SMALL_FILES.key, "3")
        .await;
    fx.set_property(&ident, INGEST_MAX_COMMIT_INTERVAL.key, "2s")
        .await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    write_lines(&input, 0..10);
    // A writer appending a record every 20 ms for 14 s; the table compacted at 7 s.
    let feeder = {
        let input = input.clone();
        std::thread::spawn(move || {
            for i in 10..710 {
                write_lines(&input, i..i + 1);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let compactor = {
        let catalog = fx.catalog.clone();
        let ident = ident.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(7)).await;
            CompactBuilder::new(&catalog, ident)
                .with_option("min-input-files", 2)
                .execute()
                .await
                .unwrap()
        })
    };
    let mut o = IngestOptions::new("bp");
    o.commit_interval = Duration::from_millis(250);
    o.stop_when_idle = Some(Duration::from_secs(3));
    let (s, reports, _) = ingest(&fx, "s.pressed", &input.display().to_string(), true, o).await;
    feeder.join().unwrap();
    let compacted = compactor.await.unwrap();
    assert!(compacted.rewritten_files >= 2, "{compacted:?}");
    assert_eq!(count_distinct(&fx, "s.pressed").await, (710, 710));
    let intervals: Vec<u64> = reports.iter().map(|r| r.commit_interval_ms).collect();
    let peak = intervals.iter().position(|i| *i == 2000);
    assert!(
        peak.is_some(),
        "the interval reached its maximum: {intervals:?}"
    );
    let over = reports
        .iter()
        .find(|r| r.debt.as_ref().is_some_and(|d| !d.over.is_empty()))
        .expect("a commit saw the debt over its limit");
    assert!(
        over.debt.as_ref().unwrap().over[0].contains(INGEST_MAX_SMALL_FILES.key),
        "{:?}",
        over.debt
    );
    // After the compaction paid the debt, the interval came back down.
    let after = &intervals[peak.unwrap()..];
    assert!(
        after.iter().any(|i| *i < 2000),
        "recovered after the compaction: {intervals:?}"
    );
    // Far fewer commits than 14 s at 250 ms would make.
    assert!(s.commits < 40, "{} commits: {intervals:?}", s.commits);
    assert!(s.throttled_ms > 0);
}

#[tokio::test]
async fn a_restarted_writer_finds_its_positions_past_snapshots_expiry_removed() {
    let fx = Fixture::new().await;
    let ident = fx.table("s.gap", Some("day(ts)")).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    write_lines(&input, 0..1000);
    let uri = input.display().to_string();
    let (s, _, _) = ingest(&fx, "s.gap", &uri, false, IngestOptions::new("g")).await;
    assert_eq!(s.records, 1000);
    // Two commits of another writer on top, then expiry keeps the current snapshot and the
    // writer's (its watermark) but, with the recovery chain off, removes the one between them.
    fx.set_property(&ident, "floe.expire.writer-max-age", "0s")
        .await;
    fx.append(&ident, 5000, 5010).await;
    fx.append(&ident, 5010, 5020).await;
    let e = ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await
        .unwrap();
    assert_eq!(e.plan.expired_snapshots.len(), 1, "{:?}", e.plan);
    let table = fx.load(&ident).await;
    let current = table.metadata().current_snapshot().unwrap();
    let parent = current.parent_snapshot_id().unwrap();
    assert!(
        table.metadata().snapshot_by_id(parent).is_none(),
        "the chain is broken"
    );
    let (s, _, _) = ingest(&fx, "s.gap", &uri, false, IngestOptions::new("g")).await;
    assert_eq!((s.records, s.commits), (0, 0), "resumed from the watermark");
    assert_eq!(count_distinct(&fx, "s.gap").await, (1020, 1020));
}

#[tokio::test]
async fn three_workers_of_a_group_commit_once_per_interval_exactly_once() {
    use floe::ingest::group::GroupOptions;
    let fx = Fixture::new().await;
    let ident = fx.table("s.grouped", Some("day(ts)")).await;
    let topic = format!("group-{}", uuid::Uuid::new_v4().simple());
    crate::ingest::produce(&topic, 3, vec![], true).await;
    // Six waves of 300 records, 600 ms apart, while the workers run.
    let producer = {
        let topic = topic.clone();
        tokio::spawn(async move {
            for wave in 0..6i64 {
                let payloads = (wave * 300..(wave + 1) * 300)
                    .map(|i| line(i).into_bytes())
                    .collect();
                crate::ingest::produce(&topic, 3, payloads, false).await;
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
        })
    };
    let worker = |p: i32, handoffs: Arc<Mutex<u64>>| {
        let uri = format!("kafka://{}/{topic}?partitions={p}", crate::ingest::kafka());
        let (catalog, ident, store) = (fx.catalog.clone(), ident.clone(), fx.config.uri.clone());
        async move {
            let mut o = IngestOptions::new("grp");
            o.commit_interval = Duration::from_millis(400);
            o.stop_when_idle = Some(Duration::from_secs(3));
            o.group = Some(GroupOptions {
                worker: format!("w{p}"),
                store_uri: store,
                lease_ttl: Duration::from_secs(5),
            });
            IngestBuilder::new(&catalog, ident, source::open(&uri, false).unwrap(), o)
                .on_commit(move |r| {
                    assert!(r.handoff.is_some(), "a worker hands off, never commits");
                    *handoffs.lock().unwrap() += 1;
                })
                .execute()
                .await
                .unwrap()
        }
    };
    let handoffs = Arc::new(Mutex::new(0u64));
    let (a, b, c) = tokio::join!(
        worker(0, handoffs.clone()),
        worker(1, handoffs.clone()),
        worker(2, handoffs.clone())
    );
    producer.await.unwrap();
    assert_eq!(a.records + b.records + c.records, 1800);
    assert_eq!(count_distinct(&fx, "s.grouped").await, (1800, 1800));
    let table = fx.load(&ident).await;
    let group_snapshots = table
        .metadata()
        .snapshots()
        .filter(|s| {
            s.summary().additional_properties.get("floe.writer-id") == Some(&"grp".to_string())
        })
        .count() as u64;
    let handed = *handoffs.lock().unwrap();
    assert!(
        group_snapshots < handed,
        "{group_snapshots} snapshots for {handed} hand-offs: one commit per interval for all workers"
    );
    let (_, positions) = floe::table::exactly_once::writer_positions(&table, "grp").unwrap();
    assert_eq!(positions.len(), 3, "{positions:?}");
    assert_eq!(positions.values().sum::<i64>(), 1800);
    // Nothing waits, and a restarted worker reads nothing again.
    let store = floe::coordination::Store::connect(&fx.config.uri)
        .await
        .unwrap();
    assert!(store
        .handoffs(&format!("{}.s.grouped", fx.catalog.name()))
        .await
        .unwrap()
        .is_empty());
    let again = worker(1, Arc::new(Mutex::new(0))).await;
    assert_eq!(again.records, 0);
}

#[tokio::test]
async fn ingest_with_maintain_bounds_history_and_metadata_files_keeping_tags_and_the_writer() {
    let fx = Fixture::new().await;
    let ident = fx.table("s.bounded", Some("day(ts)")).await;
    fx.append(&ident, 100_000, 100_010).await;
    let tagged = fx.tag_current(&ident, "v0").await;
    // A bound of 20 snapshots (the streaming default is 100): expiry fires above 20 + 10.
    fx.set_property(&ident, "floe.maintain.expire.max-snapshots", "20")
        .await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    write_lines(&input, 0..6000);
    let mut o = IngestOptions::new("b");
    o.commit_interval = Duration::from_secs(3600);
    o.commit_records = Some(50);
    o.batch_records = 50;
    o.maintain = Some(true);
    o.maintain_store = Some(fx.config.uri.clone());
    o.pause_before_commit = Some(Duration::from_millis(40));
    let (s, _, log) = ingest(&fx, "s.bounded", &input.display().to_string(), false, o).await;
    assert_eq!(s.commits, 120);
    assert_eq!(count_distinct(&fx, "s.bounded").await, (6010, 6010));
    assert!(
        log.iter()
            .any(|l| l.contains("streaming metadata defaults")),
        "{log:#?}"
    );
    let m = s.maintenance.expect("maintenance ran");
    assert!(
        m["succeeded_by_job"]["expire-snapshots"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{m:?}\n{log:#?}"
    );

    let table = fx.load(&ident).await;
    let md = table.metadata();
    let p = md.properties();
    assert_eq!(
        p.get("write.metadata.delete-after-commit.enabled")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        p.get("write.metadata.previous-versions-max")
            .map(String::as_str),
        Some("5")
    );
    // History stays near its bound (20 + a slack of 10 + the tag), not 121 snapshots...
    let snapshots = md.snapshots().count();
    assert!(snapshots <= 35, "{snapshots} snapshots after 121 commits");
    // ... and keeps the tag and the writer's recovery point (its newest commit).
    assert!(md.snapshot_by_id(tagged).is_some(), "the tag's snapshot");
    let writers = floe::table::watermarks::watermarks(md);
    let w = writers
        .iter()
        .find(|w| w.id == "b")
        .expect("the writer's watermark");
    assert!(md.snapshot_by_id(w.snapshot_id).is_some());
    // The log keeps 5 metadata files, each commit deletes the one it lets go.
    let metadata_files = crate::common::files_under(
        &std::path::PathBuf::from(md.location().trim_start_matches("file://")).join("metadata"),
    )
    .into_iter()
    .filter(|f| f.to_string_lossy().ends_with(".metadata.json"))
    .count();
    assert!(metadata_files <= 6, "{metadata_files} metadata.json files");
    assert!(md.metadata_log().len() <= 5);
    // A table that sets its own metadata settings keeps them.
    let own = fx.table("s.own", None).await;
    fx.set_property(&own, "write.metadata.previous-versions-max", "50")
        .await;
    let set = floe::maintain::in_stream::bound_metadata(
        &fx.catalog,
        &own,
        &(Arc::new(|_: &str| {}) as floe::maintain::service::LogFn),
    )
    .await
    .unwrap();
    assert!(set.is_empty());
    assert_eq!(
        fx.load(&own)
            .await
            .metadata()
            .properties()
            .get("write.metadata.delete-after-commit.enabled"),
        None
    );
}
