//! Table health operations never touch a live file (DESIGN section 5, invariants 2 and 3):
//! randomized histories of appends, rewrites, deletes, branches and tags, expiries (some
//! "crashing" between the metadata commit and file cleanup), failed writes and orphan runs.
//! After every step: every file any retained snapshot, ref or the metadata log references still
//! exists, no file younger than the orphan threshold was deleted, the current snapshot reads the
//! same rows, and the newest snapshot of a streaming writer survives expiry.

use floe::operations::{Operation, Query};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use floe::commit::{Committer, SnapshotUpdate};
use floe::iceberg::spec::{SnapshotReference, SnapshotRetention};
use floe::iceberg::{TableIdent, TableUpdate};
use floe::operations::clean::orphans::OrphanBuilder;
use floe::operations::expire::ExpireBuilder;
use floe::storage::listing::{list_files, local_dir};
use floe::table::reach::reachable_from_table;
use floe::Error;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::{count_and_sum, make_batch, read_with_python, Fixture};

fn local(p: &str) -> PathBuf {
    local_dir(p).expect("local path")
}

/// Every file the table's metadata references (all snapshots, refs, statistics, metadata log)
/// exists on disk.
async fn assert_referenced_files_exist(fx: &Fixture, ident: &TableIdent, step: &str) {
    let t = fx.load(ident).await;
    let reach = reachable_from_table(&t).await.unwrap();
    assert!(!reach.files.is_empty());
    for p in reach.files.keys() {
        assert!(
            local(p).exists(),
            "{step}: referenced file was deleted: {p}"
        );
    }
}

fn set_age(path: &Path, age: Duration) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
}

/// Makes every file under `dir` `age` old, except `keep_young`.
fn age_files(dir: &Path, age: Duration, keep_young: &[PathBuf]) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            age_files(&p, age, keep_young);
        } else if !keep_young.contains(&p) {
            set_age(&p, age);
        }
    }
}

async fn set_ref(fx: &Fixture, ident: &TableIdent, name: &str, tag: bool) {
    let t = fx.load(ident).await;
    let id = t.metadata().current_snapshot_id().unwrap();
    let retention = if tag {
        SnapshotRetention::Tag {
            max_ref_age_ms: None,
        }
    } else {
        SnapshotRetention::Branch {
            min_snapshots_to_keep: None,
            max_snapshot_age_ms: None,
            max_ref_age_ms: None,
        }
    };
    crate::common::commit_raw(
        &fx.catalog,
        &t,
        vec![TableUpdate::SetSnapshotRef {
            ref_name: name.to_string(),
            reference: SnapshotReference {
                snapshot_id: id,
                retention,
            },
        }],
    )
    .await;
}

/// Appends rows `from..to`, as the streaming writer `w1` when `writer` is set.
async fn append(fx: &Fixture, ident: &TableIdent, from: i64, to: i64, writer: bool) -> i64 {
    let t = fx.load(ident).await;
    let files = floe::operations::append::write_files(
        &t,
        vec![make_batch(&t, from, to)],
        &Default::default(),
    )
    .await
    .unwrap();
    let mut update = SnapshotUpdate::append(files);
    if writer {
        update = update.with_summary_properties(HashMap::from([
            ("floe.writer-id".to_string(), "w1".to_string()),
            ("floe.offset".to_string(), to.to_string()),
        ]));
    }
    Committer::new(&fx.catalog, ident)
        .commit(update)
        .await
        .unwrap()
        .snapshot_id
}

async fn run_history(seed: u64, steps: usize) -> (Fixture, TableIdent, (i64, i64)) {
    let fx = Fixture::new().await;
    let ident = fx.table(&format!("h.t{seed}"), Some("day(ts)")).await;
    let location = local(fx.load(&ident).await.metadata().location());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut next = 0i64;
    let mut young: Vec<PathBuf> = Vec::new();
    let mut refs: Vec<String> = Vec::new();
    let mut watermark: Option<i64> = None;
    let (mut expired_files, mut expired_snapshots) = (0u64, 0usize);
    // Start with some data so every operation has something to work on.
    append(&fx, &ident, 0, 100, false).await;
    next += 100;
    let mut expected = count_and_sum(&fx.catalog, &ident).await;
    for step in 0..steps {
        let op = rng.random_range(0..9);
        let label = format!("seed {seed} step {step} op {op}");
        match op {
            0 | 1 => {
                let n = rng.random_range(1..200);
                let writer = rng.random_bool(0.5);
                let id = append(&fx, &ident, next, next + n, writer).await;
                if writer {
                    watermark = Some(id);
                }
                let sum: i64 = (next..next + n).sum();
                next += n;
                expected = (expected.0 + n, expected.1 + sum);
            }
            2 => {
                crate::common::rewrite_all(&fx.catalog, &ident).await;
            }
            3 => {
                // Row-level delete of one whole data file: content changes, legitimately.
                let t = fx.load(&ident).await;
                let live = floe::table::manifests::live_files(&t).await.unwrap();
                if live.len() > 1 {
                    let victim = live[rng.random_range(0..live.len())]
                        .file
                        .file_path()
                        .to_string();
                    let update = SnapshotUpdate::delete(&t, vec![victim], vec![]);
                    Committer::new(&fx.catalog, &ident)
                        .commit(update)
                        .await
                        .unwrap();
                    expected = count_and_sum(&fx.catalog, &ident).await;
                }
            }
            4 => {
                let tag = rng.random_bool(0.5);
                let name = format!("{}-{step}", if tag { "tag" } else { "branch" });
                set_ref(&fx, &ident, &name, tag).await;
                refs.push(name);
            }
            5 => {
                let older = if rng.random_bool(0.7) {
                    Duration::ZERO
                } else {
                    Duration::from_secs(3600)
                };
                let r = ExpireBuilder::new(&fx.catalog, ident.clone())
                    .with_older_than_age(older)
                    .with_retain_last(rng.random_range(1..=3))
                    // false: a crash between the metadata commit and the file cleanup.
                    .with_clean_files(rng.random_bool(0.7))
                    .execute()
                    .await
                    .unwrap();
                assert_eq!(r.deleted.failed, 0, "{label}");
                expired_files += r.deleted.deleted;
                expired_snapshots += r.plan.expired_snapshots.len();
            }
            6 => {
                // A failed job's leftovers (old) and a writer's in-flight file (young).
                let failed = location.join(format!("data/failed-{step}.parquet"));
                std::fs::write(&failed, b"partial").unwrap();
                let in_flight = location.join(format!("data/in-flight-{step}.parquet"));
                std::fs::write(&in_flight, b"being written").unwrap();
                young.push(in_flight);
                age_files(&location, Duration::from_secs(2 * 3600), &young);
                let r = OrphanBuilder::new(&fx.catalog, ident.clone())
                    .with_older_than(Duration::from_secs(3600))
                    .execute()
                    .await
                    .unwrap();
                assert!(
                    !failed.exists(),
                    "{label}: the failed job's file was not removed"
                );
                assert!(r.orphan_files >= 1, "{label}");
                assert_eq!(r.deleted.failed, 0);
            }
            7 => {
                // A writer crashed after writing data files, before committing them.
                let t = fx.load(&ident).await;
                floe::operations::append::write_files(
                    &t,
                    vec![make_batch(&t, 10_000_000, 10_000_050)],
                    &Default::default(),
                )
                .await
                .unwrap();
            }
            _ => {
                floe::operations::clean::rewrite_manifests::RewriteManifestsBuilder::new(
                    &fx.catalog,
                    ident.clone(),
                )
                .run(false)
                .await
                .unwrap();
            }
        }
        assert_referenced_files_exist(&fx, &ident, &label).await;
        assert_eq!(
            count_and_sum(&fx.catalog, &ident).await,
            expected,
            "{label}: rows changed"
        );
        for y in &young {
            assert!(
                y.exists(),
                "{label}: a file younger than the threshold was deleted: {}",
                y.display()
            );
        }
        let t = fx.load(&ident).await;
        if let Some(w) = watermark {
            assert!(
                t.metadata().snapshot_by_id(w).is_some(),
                "{label}: the writer's watermark snapshot {w} was expired"
            );
        }
        let live_refs = floe::catalog::refs(t.metadata()).unwrap();
        for r in &refs {
            assert!(live_refs.contains_key(r), "{label}: ref {r} disappeared");
        }
    }
    // The history must have exercised expiry for real, or the checks above prove nothing.
    assert!(
        expired_snapshots > 0 && expired_files > 0,
        "seed {seed}: expiry never removed anything"
    );
    (fx, ident, expected)
}

#[tokio::test]
async fn randomized_histories_never_delete_a_referenced_or_young_file() {
    for seed in 1..=3u64 {
        let (fx, ident, expected) = run_history(seed, 40).await;
        // Finally everything unreferenced goes, and exactly that: storage == reachable.
        let t = fx.load(&ident).await;
        let location = t.metadata().location().to_string();
        age_files(&local(&location), Duration::from_secs(2 * 3600), &[]);
        OrphanBuilder::new(&fx.catalog, ident.clone())
            .with_older_than(Duration::from_secs(3600))
            .execute()
            .await
            .unwrap();
        let reach = reachable_from_table(&fx.load(&ident).await).await.unwrap();
        let listed = list_files(t.file_io(), &location).await.unwrap();
        for f in &listed {
            assert!(
                reach.contains(&f.path),
                "seed {seed}: orphan left behind: {}",
                f.path
            );
        }
        assert_eq!(listed.len(), reach.files.len(), "seed {seed}");
        if seed == 1 {
            let py = read_with_python(&fx, "h.t1");
            assert_eq!(py["pyiceberg"]["rows"].as_i64(), Some(expected.0));
            assert_eq!(py["pyiceberg"]["sum"].as_i64(), Some(expected.1));
            assert_eq!(py["duckdb"]["rows"].as_i64(), Some(expected.0));
        }
    }
}

#[tokio::test]
async fn flink_checkpoint_snapshot_survives_aggressive_expiry() {
    let fx = Fixture::new().await;
    let created = fx.pyiceberg_write(&[
        "--table",
        "py.flink",
        "--rows",
        "300",
        "--batches",
        "3",
        "--snapshot-property",
        "flink.job-id=job-7",
        "--snapshot-property",
        "flink.max-committed-checkpoint-id=42",
    ]);
    let flink_snapshot = created["snapshot_id"].as_i64().unwrap();
    let ident = floe::catalog::parse_table_ident("py.flink").unwrap();
    for k in 0..3 {
        fx.append(&ident, 1000 + k * 10, 1010 + k * 10).await;
    }
    let r = ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await
        .unwrap();
    assert_eq!(r.plan.protected.len(), 1);
    assert_eq!(r.plan.protected[0].snapshot_id, flink_snapshot);
    assert_eq!(r.plan.protected[0].writer, "flink:job-7");
    let t = fx.load(&ident).await;
    // Kept: Flink's last checkpoint and the chain from the current snapshot down to it (Flink's
    // committer walks parents from the head); the two earlier Flink commits are gone.
    assert_eq!(t.metadata().snapshots().count(), 4);
    assert!(
        r.plan
            .chains
            .iter()
            .any(|c| c.kept && c.writer == "flink:job-7" && c.snapshots == 4),
        "{:?}",
        r.plan.chains
    );
    let mut walk = t.metadata().current_snapshot().cloned();
    while let Some(s) = walk.clone().filter(|s| s.snapshot_id() != flink_snapshot) {
        walk = s
            .parent_snapshot_id()
            .and_then(|p| t.metadata().snapshot_by_id(p).cloned());
    }
    assert!(
        walk.is_some(),
        "the walk from the head reaches the checkpoint"
    );
    let kept = t
        .metadata()
        .snapshot_by_id(flink_snapshot)
        .expect("flink snapshot kept");
    assert_eq!(
        kept.summary()
            .additional_properties
            .get("flink.max-committed-checkpoint-id")
            .map(String::as_str),
        Some("42")
    );
    assert_referenced_files_exist(&fx, &ident, "after expiry").await;
    let py = read_with_python(&fx, "py.flink");
    assert_eq!(py["pyiceberg"]["rows"].as_i64(), Some(330));
    assert_eq!(py["duckdb"]["rows"].as_i64(), Some(330));
}

#[tokio::test]
async fn orphan_removal_aborts_when_a_manifest_cannot_be_read() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.broken", None).await;
    fx.append(&ident, 0, 10).await;
    fx.append(&ident, 10, 20).await;
    let t = fx.load(&ident).await;
    let location = local(t.metadata().location());
    let junk = location.join("data/junk.parquet");
    std::fs::write(&junk, b"junk").unwrap();
    // Corrupt a manifest that only the first (old) snapshot lists.
    let first = t
        .metadata()
        .snapshots()
        .min_by_key(|s| s.sequence_number())
        .unwrap()
        .clone();
    let manifests = floe::table::manifests::manifests_of(&t, &first)
        .await
        .unwrap();
    std::fs::write(local(&manifests[0].manifest_path), b"not avro").unwrap();
    age_files(&location, Duration::from_secs(10 * 86_400), &[]);
    let e = OrphanBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e}");
    assert!(e.to_string().contains("nothing was deleted"), "{e}");
    assert!(
        junk.exists(),
        "nothing may be deleted when reachability is unknown"
    );
    let listed = list_files(t.file_io(), t.metadata().location())
        .await
        .unwrap();
    assert!(listed.len() > 5);
}

#[tokio::test]
async fn orphan_removal_refuses_unsafe_requests() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.safe", None).await;
    fx.append(&ident, 0, 10).await;
    let e = OrphanBuilder::new(&fx.catalog, ident.clone())
        .with_older_than(Duration::from_secs(60))
        .execute()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("under one hour"), "{e}");
    let outside = fx.warehouse().join("h").display().to_string();
    let e = OrphanBuilder::new(&fx.catalog, ident.clone())
        .with_location(Some(outside))
        .execute()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("outside the table location"), "{e}");
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("gc.enabled", "false")
        .execute()
        .await
        .unwrap();
    let e = OrphanBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("gc.enabled"), "{e}");
    // A dry run still reports.
    OrphanBuilder::new(&fx.catalog, ident.clone())
        .run(true)
        .await
        .unwrap();
}

#[tokio::test]
async fn orphan_removal_keeps_files_differing_only_by_scheme_unless_told() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.scheme", None).await;
    fx.append(&ident, 0, 10).await;
    let t = fx.load(&ident).await;
    let location = local(t.metadata().location());
    age_files(&location, Duration::from_secs(10 * 86_400), &[]);
    // Listing a plain path while metadata says file://: the same files, no orphan.
    let r = OrphanBuilder::new(&fx.catalog, ident.clone())
        .with_location(Some(location.display().to_string()))
        .run(true)
        .await
        .unwrap();
    assert_eq!(r.orphan_files, 0, "{:?}", r.sample);
    assert!(r.referenced > 0);
}

#[tokio::test]
async fn clean_metadata_removes_only_files_out_of_the_log() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.meta", None).await;
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("write.metadata.previous-versions-max", "2")
        .execute()
        .await
        .unwrap();
    for k in 0..6 {
        fx.append(&ident, k * 10, k * 10 + 10).await;
    }
    let t = fx.load(&ident).await;
    let dir = format!("{}/metadata", t.metadata().location());
    let count = || async {
        list_files(t.file_io(), &dir)
            .await
            .unwrap()
            .iter()
            .filter(|f| f.path.ends_with(".metadata.json"))
            .count()
    };
    assert_eq!(count().await, 8, "create + property + 6 appends");
    let r = floe::operations::clean::metadata_files::CleanMetadataBuilder::new(
        &fx.catalog,
        ident.clone(),
    )
    .run(false)
    .await
    .unwrap();
    assert_eq!(r.deleted.deleted, 5);
    assert_eq!(count().await, 3, "current + 2 in the log");
    assert_referenced_files_exist(&fx, &ident, "after clean-metadata").await;
    assert_eq!(fx.count_and_sum(&ident).await.0, 60);
}

#[tokio::test]
async fn rewrite_manifests_merges_and_clusters_without_changing_content() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.manifests", Some("day(ts)")).await;
    for k in 0..12 {
        fx.append(&ident, k * 30, k * 30 + 30).await;
    }
    let before = fx.count_and_sum(&ident).await;
    let t = fx.load(&ident).await;
    let n_before = floe::table::manifests::current_manifests(&t)
        .await
        .unwrap()
        .len();
    assert_eq!(n_before, 12);
    let r = floe::operations::clean::rewrite_manifests::RewriteManifestsBuilder::new(
        &fx.catalog,
        ident.clone(),
    )
    .run(false)
    .await
    .unwrap();
    assert_eq!(r.manifests_before, 12);
    assert_eq!(r.manifests_after, 1);
    let t = fx.load(&ident).await;
    let snap = t.metadata().current_snapshot().unwrap();
    assert_eq!(snap.summary().operation.as_str(), "replace");
    assert_eq!(
        snap.summary().additional_properties["manifests-replaced"],
        "12"
    );
    assert_eq!(fx.count_and_sum(&ident).await, before);
    // Entries are clustered: each partition's files are contiguous in the merged manifest.
    let m = floe::table::manifests::current_manifests(&t).await.unwrap();
    let loaded = floe::table::manifests::read_manifests(&t, &m)
        .await
        .unwrap();
    let parts: Vec<String> = loaded[0]
        .entries()
        .iter()
        .map(|e| format!("{:?}", e.data_file().partition()))
        .collect();
    let mut runs = parts.clone();
    runs.dedup();
    let mut distinct = parts.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        runs.len(),
        distinct.len(),
        "partitions interleave: {runs:?}"
    );
    let py = read_with_python(&fx, "h.manifests");
    assert_eq!(py["pyiceberg"]["rows"].as_i64(), Some(before.0));
    assert_eq!(py["duckdb"]["sum"].as_i64(), Some(before.1));
}

#[tokio::test]
async fn diagnose_reports_small_files_history_orphans_and_writers() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.diag", Some("day(ts)")).await;
    for k in 0..8 {
        append(&fx, &ident, k * 50, k * 50 + 50, k == 7).await;
    }
    let before = floe::operations::diagnose::DiagnoseBuilder::new(&fx.catalog, ident.clone())
        .query()
        .await
        .unwrap();
    assert_eq!(before.totals.data_files, 24);
    assert_eq!(before.totals.active_partitions, 3);
    let small = before
        .observations
        .iter()
        .find(|o| o.id == "small-files-in-active-partitions")
        .unwrap();
    assert!(small.holds, "{}", small.evidence);
    assert_eq!(
        small
            .action
            .as_deref()
            .map(|a| a.starts_with("floe compact h.diag")),
        Some(true)
    );
    crate::common::rewrite_all(&fx.catalog, &ident).await;
    let t = fx.load(&ident).await;
    let location = local(t.metadata().location());
    std::fs::write(location.join("data/orphan.parquet"), b"x").unwrap();
    let r = floe::operations::diagnose::DiagnoseBuilder::new(&fx.catalog, ident.clone())
        .query()
        .await
        .unwrap();
    assert_eq!(r.totals.data_files, 3, "one file per day after the rewrite");
    assert_eq!(r.totals.partitions, 3);
    assert_eq!(r.totals.records, 400);
    assert_eq!(r.history.snapshots, 9);
    assert_eq!(r.history.avg_files_per_commit, 3.0);
    assert!(
        r.history.only_old_files > 24,
        "8 appends x 3 files + their metadata: {}",
        r.history.only_old_files
    );
    assert_eq!(r.storage.unreferenced_files, 1);
    assert_eq!(r.writers.len(), 1);
    assert_eq!(r.writers[0].writer(), "floe:w1");
    let holds: Vec<&str> = r
        .observations
        .iter()
        .filter(|o| o.holds)
        .map(|o| o.id)
        .collect();
    assert!(holds.contains(&"history-retains-old-files"), "{holds:?}");
    assert!(holds.contains(&"unreferenced-files"), "{holds:?}");
    assert!(
        !holds.contains(&"small-files-in-active-partitions"),
        "compacted: {holds:?}"
    );
    let filter = r.partitions[0].filter.clone().unwrap();
    assert!(filter.starts_with("ts >= '2026-01-0"), "{filter}");
    // The suggested filter is one `floe compact` accepts.
    floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_where(Some(filter))
        .run(true)
        .await
        .unwrap();
    let html = floe::operations::diagnose::render::html(&r);
    assert!(
        html.starts_with("<!doctype html>") && html.contains("<svg") && !html.contains("<script")
    );
    assert!(floe::operations::diagnose::render::text(&r)
        .contains("[x] Few live files, many old files retained by history"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_racing_appends_loses_nothing() {
    let fx = Fixture::new().await;
    let ident = fx.table("h.race", Some("day(ts)")).await;
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_property("commit.retry.num-retries", "50")
        .execute()
        .await
        .unwrap();
    fx.append(&ident, 0, 10).await;
    let writer = fx.second_connection().await;
    let w_ident = ident.clone();
    let appends = tokio::spawn(async move {
        for k in 1..=20i64 {
            let t = writer.load_table(&w_ident).await.unwrap();
            let files = floe::operations::append::write_files(
                &t,
                vec![make_batch(&t, k * 10, k * 10 + 10)],
                &Default::default(),
            )
            .await
            .unwrap();
            Committer::new(&writer, &w_ident)
                .commit(SnapshotUpdate::append(files))
                .await
                .unwrap();
        }
    });
    let mut expired = 0;
    for _ in 0..10 {
        let r = ExpireBuilder::new(&fx.catalog, ident.clone())
            .with_older_than_age(Duration::ZERO)
            .with_retain_last(1)
            .execute()
            .await
            .unwrap();
        expired += r.plan.expired_snapshots.len();
        assert_referenced_files_exist(&fx, &ident, "during the race").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    appends.await.unwrap();
    assert!(expired > 0, "the race never expired anything");
    assert_referenced_files_exist(&fx, &ident, "after the race").await;
    assert_eq!(fx.count_and_sum(&ident).await, (210, (0..210).sum::<i64>()));
}

/// Expiry of a long history while another writer commits every 50 ms: a retried expiry
/// reads only the manifests of the commits it lost to, so it lands between the writer's
/// commits instead of losing every race (it used to re-read the whole history per attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_of_a_long_history_lands_beside_a_fast_writer() {
    let fx = Fixture::new().await;
    let t = fx.table("exp.fast", None).await;
    for i in 0..400 {
        fx.append(&t, i * 2, i * 2 + 2).await;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (catalog, t, stop) = (fx.second_connection().await, t.clone(), stop.clone());
        let table = fx.load(&t).await;
        tokio::spawn(async move {
            let mut next = 10_000i64;
            let mut commits = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let b = make_batch(&table, next, next + 2);
                floe::operations::append::AppendBuilder::from_batches(&catalog, t.clone(), vec![b])
                    .execute()
                    .await
                    .unwrap();
                next += 2;
                commits += 1;
                // A fast streaming writer: 20 commits a second at most.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (next, commits)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = ExpireBuilder::new(&fx.catalog, t.clone())
        .with_older_than_age(Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await
        .expect("expiry lands despite the writer");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (next, commits) = writer.await.unwrap();
    assert!(commits > 5, "the writer kept committing: {commits}");
    assert!(
        m.plan.expired_snapshots.len() >= 390,
        "{}",
        m.plan.expired_snapshots.len()
    );
    let expected_rows = 800 + (next - 10_000);
    assert_eq!(fx.count_and_sum(&t).await.0, expected_rows);
    assert_referenced_files_exist(&fx, &t, "after expiry beside a writer").await;
}
