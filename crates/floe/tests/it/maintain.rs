//! `floe maintain` end to end on real tables: triggers from real metadata, idle partitions
//! first, a bad property skips one table only, and several maintainers on one PostgreSQL
//! lease store split the tables without running a job twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe::catalog::{Catalog, CatalogConfig};
use floe::coordination::Store;
use floe::iceberg::TableIdent;
use floe::maintain::service::{MaintainOptions, Maintainer, PassReport, Source};
use floe::maintain::state::{Decision, ServiceState};

use crate::common::{files_under, sum_ids, Fixture};

/// A maintainer on the fixture's catalog, its log lines kept.
async fn maintainer(
    catalog: &Catalog,
    store_uri: &str,
    opts: MaintainOptions,
) -> (Maintainer, Arc<Mutex<Vec<String>>>) {
    let store = Arc::new(Store::connect(store_uri).await.unwrap());
    let state = ServiceState::new(&opts.holder, 0);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let m = Maintainer::new(
        vec![Source {
            catalog: catalog.clone(),
            prefix: None,
            only: None,
        }],
        store,
        state,
        opts,
    )
    .with_log(Arc::new(move |l: &str| {
        sink.lock().unwrap().push(l.to_string())
    }));
    (m, lines)
}

fn opts(holder: &str) -> MaintainOptions {
    MaintainOptions {
        holder: holder.into(),
        ..MaintainOptions::default()
    }
}

fn decision<'a>(report: &'a PassReport, table: &str, job: &str) -> &'a Decision {
    report
        .decisions
        .iter()
        .find(|d| d.table == table && d.job == job)
        .unwrap_or_else(|| panic!("no decision for {table} {job}: {:#?}", report.decisions))
}

/// Live data files per partition value (`truncate(1000, id)`: 0, 1000, ...).
async fn files_per_partition(fx: &Fixture, ident: &TableIdent) -> HashMap<String, usize> {
    let table = fx.load(ident).await;
    let mut out = HashMap::new();
    for f in floe::table::manifests::live_files(&table).await.unwrap() {
        let p =
            floe::operations::compact::partition_path(&table, f.spec_id, Some(f.file.partition()));
        *out.entry(p).or_default() += 1;
    }
    out
}

async fn compactions(fx_catalog: &Catalog, ident: &TableIdent) -> usize {
    let table = fx_catalog.load_table(ident).await.unwrap();
    table
        .metadata()
        .snapshots()
        .filter(|s| s.summary().operation.as_str() == "replace")
        .count()
}

#[tokio::test]
async fn idle_partitions_are_compacted_and_partitions_still_written_are_left_alone() {
    let fx = Fixture::new().await;
    let t = fx.table("m.events", Some("truncate(1000, id)")).await;
    fx.set_property(&t, "floe.maintain.compact.partition-idle-time", "3s")
        .await;
    fx.set_property(&t, "floe.maintain.compact.trigger.data-file-count", "8")
        .await;
    // Six small files in partition id_trunc=0, then (3 s later) six in id_trunc=1000.
    for i in 0..6 {
        fx.append(&t, i * 10, i * 10 + 10).await;
    }
    tokio::time::sleep(Duration::from_millis(3200)).await;
    for i in 0..6 {
        fx.append(&t, 1000 + i * 10, 1000 + i * 10 + 10).await;
    }
    let before = files_per_partition(&fx, &t).await;
    assert_eq!(before.values().sum::<usize>(), 12, "{before:?}");

    let uri = fx.config.uri.clone();
    let (mut dry, _) = maintainer(
        &fx.catalog,
        &uri,
        MaintainOptions {
            dry_run: true,
            ..opts("dry")
        },
    )
    .await;
    let report = dry.pass().await.unwrap();
    let d = decision(&report, "m.events", "compact");
    assert!(d.chosen, "{d:#?}");
    assert_eq!(d.scope, "1 partition(s), 1 active left alone");
    assert!(
        d.fired
            .as_deref()
            .unwrap()
            .contains("data-file-count 12 >= 8"),
        "{d:#?}"
    );
    assert!(d.benefit > 0.0 && d.cost.bytes_to_read > 0 && d.score > 0.0);
    assert_eq!(
        files_per_partition(&fx, &t).await,
        before,
        "a dry run changes nothing"
    );

    let (m, lines) = maintainer(&fx.catalog, &uri, opts("m1")).await;
    let summary = m.run_once().await.unwrap();
    assert_eq!(summary.jobs_failed, 0, "{:?}", lines.lock().unwrap());
    let after = files_per_partition(&fx, &t).await;
    let cold = after.iter().find(|(p, _)| p.ends_with("=0")).unwrap();
    let hot = after.iter().find(|(p, _)| p.ends_with("=1000")).unwrap();
    assert_eq!(*cold.1, 1, "the idle partition is compacted: {after:?}");
    assert_eq!(
        *hot.1, 6,
        "the partition still written is left alone: {after:?}"
    );
    assert_eq!(
        fx.count_and_sum(&t).await,
        (120, sum_ids(0, 60) + sum_ids(1000, 1060))
    );
    // The run is on record, with what it read.
    let store = Store::connect(&uri).await.unwrap();
    let runs = store.recent_runs(Some("compact"), 10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].succeeded && runs[0].files_read == 6 && runs[0].holder == "m1");
}

#[tokio::test]
async fn triggers_fire_at_their_threshold_and_the_rate_limit_holds_the_next_one() {
    let fx = Fixture::new().await;
    let t = fx.table("m.quiet", None).await;
    fx.set_property(&t, "floe.maintain.compact.partition-idle-time", "0s")
        .await;
    for i in 0..5 {
        fx.append(&t, i * 10, i * 10 + 10).await;
    }
    let uri = fx.config.uri.clone();
    let dry = || MaintainOptions {
        dry_run: true,
        ..opts("dry")
    };
    let (mut m, _) = maintainer(&fx.catalog, &uri, dry()).await;
    let r = m.pass().await.unwrap();
    let d = decision(&r, "m.quiet", "compact");
    assert!(!d.chosen);
    let skipped = d.skipped.clone().unwrap();
    assert!(
        skipped.starts_with("no trigger reached: commit-count 5 < 10, data-file-count 5 < 50"),
        "{skipped}"
    );

    // At the threshold it fires, and the compaction runs.
    fx.set_property(&t, "floe.maintain.compact.trigger.commit-count", "5")
        .await;
    let (m, _) = maintainer(&fx.catalog, &uri, opts("m1")).await;
    let s = m.run_once().await.unwrap();
    assert_eq!(s.passes[0].decisions.iter().filter(|d| d.chosen).count(), 1);
    assert_eq!(
        decision(&s.passes[0], "m.quiet", "compact")
            .fired
            .as_deref(),
        Some("commit-count 5 >= 5")
    );
    assert_eq!(compactions(&fx.catalog, &t).await, 1);

    // Five more commits fire it again, but the rate limit (5 min) holds it back.
    for i in 5..10 {
        fx.append(&t, i * 10, i * 10 + 10).await;
    }
    let (mut m, _) = maintainer(&fx.catalog, &uri, dry()).await;
    let r = m.pass().await.unwrap();
    let d = decision(&r, "m.quiet", "compact");
    assert_eq!(d.fired.as_deref(), Some("commit-count 5 >= 5"));
    assert!(
        d.skipped
            .as_deref()
            .unwrap()
            .starts_with("rate-limit: last compaction"),
        "{d:#?}"
    );
    assert!(!d.chosen);
    assert_eq!(fx.count_and_sum(&t).await, (100, sum_ids(0, 100)));

    // Opted out: every job skipped, saying why.
    fx.set_property(&t, "floe.maintain.enabled", "false").await;
    let (mut m, _) = maintainer(&fx.catalog, &uri, dry()).await;
    let r = m.pass().await.unwrap();
    let mine: Vec<&Decision> = r
        .decisions
        .iter()
        .filter(|d| d.table == "m.quiet")
        .collect();
    assert_eq!(mine.len(), 5);
    assert!(mine
        .iter()
        .all(|d| !d.chosen && d.skipped.as_deref() == Some("floe.maintain.enabled=false")));
}

#[tokio::test]
async fn a_bad_property_skips_its_table_naming_it_and_the_others_go_on() {
    let fx = Fixture::new().await;
    let bad = fx.table("m.bad", None).await;
    let good = fx.table("m.good", None).await;
    for t in [&bad, &good] {
        fx.set_property(t, "floe.maintain.compact.partition-idle-time", "0s")
            .await;
        fx.set_property(t, "floe.maintain.compact.trigger.commit-count", "2")
            .await;
        for i in 0..5 {
            fx.append(t, i * 10, i * 10 + 10).await;
        }
    }
    // Stored by another engine: floe itself refuses the value when it is set.
    crate::common::commit_raw(
        &fx.catalog,
        &fx.load(&bad).await,
        vec![floe::iceberg::TableUpdate::SetProperties {
            updates: HashMap::from([(
                "floe.maintain.compact.trigger.commit-count".to_string(),
                "lots".to_string(),
            )]),
        }],
    )
    .await;
    // A third table whose current metadata file is unreadable: skipped, reported, never
    // cleaned (its files all stay).
    let broken = fx.table("m.broken", None).await;
    fx.append(&broken, 0, 10).await;
    let location = fx
        .load(&broken)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    let broken_dir = fx.warehouse().join("m/broken");
    std::fs::write(location.trim_start_matches("file://"), b"{ not json").unwrap();
    let files_before = files_under(&broken_dir);
    let (m, lines) = maintainer(&fx.catalog, &fx.config.uri, opts("m1")).await;
    let s = m.run_once().await.unwrap();
    let problems = &s.passes[0].problems;
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(problems[0].0, "m.bad");
    assert_eq!(problems[1].0, "m.broken");
    assert!(problems[1].1.contains("metadata"), "{}", problems[1].1);
    assert_eq!(
        files_under(&broken_dir),
        files_before,
        "nothing of the broken table touched"
    );
    for needle in [
        "m.bad",
        "floe.maintain.compact.trigger.commit-count",
        "lots",
    ] {
        assert!(
            problems[0].1.contains(needle),
            "{needle}: {}",
            problems[0].1
        );
    }
    assert!(lines.lock().unwrap().iter().any(|l| l.contains("lots")));
    assert_eq!(compactions(&fx.catalog, &bad).await, 0, "never touched");
    assert_eq!(compactions(&fx.catalog, &good).await, 1);
}

/// Three maintainers, each with its own catalog connection and lease-store pool (as three
/// processes would have), on one PostgreSQL database: every table is compacted exactly once
/// and no two runs on one table overlap in time.
#[tokio::test]
async fn three_maintainers_on_one_postgres_lease_store_split_the_tables() {
    let Ok(url) = std::env::var("FLOE_TEST_POSTGRES_URL") else {
        panic!("FLOE_TEST_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL");
    };
    let dir = tempfile::tempdir().unwrap();
    let mut config = CatalogConfig::embedded(Some(dir.path())).unwrap();
    config.name = format!("maint_{}", uuid::Uuid::new_v4().simple());
    config.uri = url.clone();
    let catalog = Catalog::connect(&config).await.unwrap();
    let fx = Fixture {
        _dir: dir,
        config: config.clone(),
        catalog,
    };
    let mut tables = Vec::new();
    for i in 0..8 {
        let t = fx.table(&format!("pgm.t{i}"), None).await;
        fx.set_property(&t, "floe.maintain.compact.partition-idle-time", "0s")
            .await;
        fx.set_property(&t, "floe.maintain.compact.trigger.commit-count", "4")
            .await;
        for b in 0..5 {
            fx.append(&t, b * 10, b * 10 + 10).await;
        }
        tables.push(t);
    }
    let mut runs = Vec::new();
    for h in ["m1", "m2", "m3"] {
        let catalog = Catalog::connect(&config).await.unwrap();
        let (m, _) = maintainer(&catalog, &url, opts(h)).await;
        runs.push(tokio::spawn(m.run_once()));
    }
    let mut succeeded = 0;
    for r in runs {
        let s = r.await.unwrap().unwrap();
        assert_eq!(s.jobs_failed, 0);
        succeeded += s.jobs_succeeded;
    }
    for t in &tables {
        assert_eq!(compactions(&fx.catalog, t).await, 1, "{t}");
        assert_eq!(fx.count_and_sum(t).await, (50, sum_ids(0, 50)));
    }
    // Every compaction on record, one per table, none overlapping another on its table.
    let store = Store::connect(&url).await.unwrap();
    let prefix = format!("{}.", config.name);
    let all: Vec<_> = store
        .recent_runs(Some("compact"), 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.scope.starts_with(&prefix))
        .collect();
    let committed: Vec<_> = all.iter().filter(|r| r.files_written > 0).collect();
    assert_eq!(committed.len(), 8, "{all:#?}");
    assert!(succeeded >= 8);
    for a in &all {
        for b in &all {
            if std::ptr::eq(a, b) || a.scope != b.scope {
                continue;
            }
            let overlap = a.started_ms < b.finished_ms && b.started_ms < a.finished_ms;
            assert!(!overlap, "two runs on {} overlap: {a:?} {b:?}", a.scope);
        }
    }
}

#[tokio::test]
async fn maintain_never_deletes_files_of_a_table_whose_location_contains_one_it_cleans() {
    let fx = Fixture::new().await;
    let (parent, child) = crate::safety::nested_tables(&fx).await;
    crate::safety::backdate(fx.warehouse());
    let (m, _) = maintainer(&fx.catalog, &fx.config.uri, opts("m1")).await;
    let s = m.run_once().await.unwrap();
    assert!(
        s.passes.iter().any(|p| p
            .decisions
            .iter()
            .any(|d| d.table == "ns.child" && d.job == "remove-orphan-files" && d.chosen)),
        "{:#?}",
        s.passes
    );
    assert_eq!(s.jobs_failed, 0, "{s:#?}");
    assert_eq!(
        fx.count_and_sum(&parent).await.0,
        10,
        "ns.parent lost a file"
    );
    assert_eq!(fx.count_and_sum(&child).await.0, 10);
}

/// A table whose compaction is due at once (five commits, trigger at two, idle time 0).
async fn table_due_for_compaction(fx: &Fixture, name: &str) -> TableIdent {
    let t = fx.table(name, None).await;
    fx.set_property(&t, "floe.maintain.compact.partition-idle-time", "0s")
        .await;
    fx.set_property(&t, "floe.maintain.compact.trigger.commit-count", "2")
        .await;
    for i in 0..5 {
        fx.append(&t, i * 10, i * 10 + 10).await;
    }
    t
}

#[tokio::test]
async fn leases_and_run_times_follow_the_store_clock_whatever_a_maintainers_clock_says() {
    use floe::coordination::LeaseOutcome;
    let fx = Fixture::new().await;
    table_due_for_compaction(&fx, "m.t").await;
    let ttl = Duration::from_secs(10);
    let store = Store::connect(&fx.config.uri).await.unwrap();
    let scope = format!("{}.m.t", fx.catalog.name());
    // A, whose clock is right, holds the table.
    let now = store.now_ms().await.unwrap();
    assert_eq!(
        store.try_acquire(&scope, "A", ttl, now).await.unwrap(),
        LeaseOutcome::Acquired
    );
    // B's clock runs 30 s ahead: A's lease looks expired to it, and still B must not take it.
    let mut o = opts("B");
    o.lease_ttl = ttl;
    o.interval = Duration::from_secs(3600);
    let (b, lines) = maintainer(&fx.catalog, &fx.config.uri, o.clone()).await;
    let mut b = b.with_clock_skew_ms(30_000);
    for _ in 0..2 {
        let report = b.pass().await.unwrap();
        let mine: Vec<&Decision> = report
            .decisions
            .iter()
            .filter(|d| d.table == "m.t")
            .collect();
        assert!(mine.iter().all(|d| !d.chosen), "{mine:#?}");
        assert!(
            mine.iter().any(|d| d
                .skipped
                .as_deref()
                .unwrap_or_default()
                .contains("leased by A")),
            "{mine:#?}"
        );
    }
    let leases = store.leases(store.now_ms().await.unwrap()).await.unwrap();
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].holder, "A");
    // Warned, naming both times and the skew, once per interval (two passes, one line).
    let warned: Vec<String> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("clock skew"))
        .cloned()
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("30s ahead of") && warned[0].contains("lease store's"),
        "{}",
        warned[0]
    );

    // C's clock runs 30 s behind: it runs the job once A is gone, and records it on the
    // store's clock.
    store.release(&scope, "A").await.unwrap();
    o.holder = "C".into();
    let (c, lines) = maintainer(&fx.catalog, &fx.config.uri, o).await;
    let before = store.now_ms().await.unwrap();
    let s = c.with_clock_skew_ms(-30_000).run_once().await.unwrap();
    let after = store.now_ms().await.unwrap();
    assert_eq!(s.succeeded_by_job.get("compact"), Some(&1), "{s:#?}");
    let runs = store.recent_runs(Some("compact"), 10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    for t in [runs[0].started_ms, runs[0].finished_ms] {
        assert!(
            (before..=after).contains(&t),
            "run time {t} not on the store's clock [{before}, {after}]"
        );
    }
    assert!(lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("clock skew") && l.contains("30s behind")));
}

/// `maintain --once` applies the plan it scored: each job's table scan (compaction) and
/// storage listing (orphan removal) happens once per plan, not again when the job runs.
#[tokio::test]
async fn maintain_plans_each_job_once_and_applies_that_plan() {
    let fx = Fixture::new().await;
    let t = table_due_for_compaction(&fx, "ns.once").await;
    let location = fx
        .load(&t)
        .await
        .metadata()
        .location()
        .trim_end_matches('/')
        .to_string();
    crate::safety::backdate(fx.warehouse());
    let (m, _) = maintainer(&fx.catalog, &fx.config.uri, opts("m1")).await;
    let s = m.run_once().await.unwrap();
    assert_eq!(s.jobs_failed, 0, "{s:#?}");
    let planned = |job: &str| {
        s.passes
            .iter()
            .flat_map(|p| &p.decisions)
            .filter(|d| d.table == "ns.once" && d.job == job && !d.cost.is_zero())
            .count() as u64
    };
    let chosen = |job: &str| {
        s.passes
            .iter()
            .flat_map(|p| &p.decisions)
            .filter(|d| d.table == "ns.once" && d.job == job && d.chosen)
            .count()
    };
    assert!(chosen("compact") >= 1, "{:#?}", s.passes);
    assert!(chosen("remove-orphan-files") >= 1, "{:#?}", s.passes);
    assert_eq!(compactions(&fx.catalog, &t).await, chosen("compact"));
    // Planning scanned (listed) once per plan; running the chosen jobs added nothing.
    assert_eq!(
        floe::base::fault::probed("scan", &location),
        planned("compact"),
        "{:#?}",
        s.passes
    );
    assert_eq!(
        floe::base::fault::probed("list", &location),
        planned("remove-orphan-files"),
        "{:#?}",
        s.passes
    );
}

/// The table's properties, as stored.
async fn props_of(fx: &Fixture, ident: &TableIdent) -> HashMap<String, String> {
    fx.load(ident).await.metadata().properties().clone()
}

#[tokio::test]
async fn a_streaming_table_gets_bounded_history_and_metadata_and_a_bulk_load_keeps_icebergs_defaults(
) {
    // (crates/floe/src/maintain/streaming.rs) `stream` says it is one; `bulk` got as many
    // commits in a few seconds, which is no stream's cadence; `own` is a stream with its own
    // metadata setting.
    let fx = Fixture::new().await;
    let stream = fx.table("s.stream", None).await;
    let bulk = fx.table("s.bulk", None).await;
    let own = fx.table("s.own", None).await;
    fx.set_property(&stream, "floe.maintain.streaming", "true")
        .await;
    fx.set_property(&own, "floe.maintain.streaming", "TRUE")
        .await;
    fx.set_property(&own, "write.metadata.previous-versions-max", "20")
        .await;
    let (mut stream_ids, mut bulk_ids) = (Vec::new(), Vec::new());
    for i in 0..115 {
        stream_ids.push(fx.append(&stream, i * 10, i * 10 + 10).await);
        bulk_ids.push(fx.append(&bulk, i * 10, i * 10 + 10).await);
    }
    let kept = |t: floe::iceberg::table::Table, ids: &[i64]| {
        ids.iter()
            .filter(|id| t.metadata().snapshot_by_id(**id).is_some())
            .count()
    };
    fx.append(&own, 0, 10).await;
    let uri = fx.config.uri.clone();

    // A dry run judges and plans, and changes nothing.
    let dry = MaintainOptions {
        dry_run: true,
        ..opts("dry")
    };
    let (mut m, _) = maintainer(&fx.catalog, &uri, dry).await;
    let r = m.pass().await.unwrap();
    assert_eq!(
        decision(&r, "s.stream", "expire-snapshots")
            .fired
            .as_deref(),
        Some("115 snapshots > floe.maintain.expire.max-snapshots 100 + 10")
    );
    let bulk_expire = decision(&r, "s.bulk", "expire-snapshots");
    assert!(bulk_expire.fired.is_none(), "{bulk_expire:#?}");
    assert!(
        bulk_expire
            .skipped
            .as_deref()
            .unwrap()
            .contains("history.expire.max-snapshot-age-ms"),
        "{bulk_expire:#?}"
    );
    for t in [&stream, &bulk] {
        let p = props_of(&fx, t).await;
        assert!(!p.contains_key("write.metadata.delete-after-commit.enabled"));
    }

    // The service records the metadata defaults on the stream's table, says so, and
    // expires its history to the bound; the bulk load and the stream with its own setting
    // keep what they have.
    let (m, lines) = maintainer(&fx.catalog, &uri, opts("m1")).await;
    m.run_once().await.unwrap();
    let p = props_of(&fx, &stream).await;
    assert_eq!(p["write.metadata.delete-after-commit.enabled"], "true");
    assert_eq!(p["write.metadata.previous-versions-max"], "5");
    let said = lines.lock().unwrap().clone();
    assert!(
        said.iter().any(
            |l| l.starts_with("s.stream: a stream (floe.maintain.streaming=true)")
                && l.contains("write.metadata.previous-versions-max=5")
        ),
        "{said:#?}"
    );
    // The newest 100 snapshots stay: appends, and the snapshots of a compaction or a manifest
    // rewrite that ran before the expiry (those that ran after it add theirs on top).
    let t = fx.load(&stream).await;
    let total = t.metadata().snapshots().count();
    let appends = kept(t.clone(), &stream_ids);
    assert!((100..=102).contains(&total), "{total} snapshots");
    assert!((98..=100).contains(&appends), "{appends} appends kept");
    assert_eq!(kept(t, &stream_ids[15..]), appends, "the oldest went first");
    assert_eq!(fx.count_and_sum(&stream).await, (1150, sum_ids(0, 1150)));

    let p = props_of(&fx, &bulk).await;
    assert!(!p.contains_key("write.metadata.delete-after-commit.enabled"));
    assert!(!p.contains_key("floe.maintain.streaming"));
    assert_eq!(kept(fx.load(&bulk).await, &bulk_ids), 115);
    assert_eq!(fx.count_and_sum(&bulk).await, (1150, sum_ids(0, 1150)));

    let p = props_of(&fx, &own).await;
    assert_eq!(p["write.metadata.previous-versions-max"], "20");
    assert!(!p.contains_key("write.metadata.delete-after-commit.enabled"));
}
