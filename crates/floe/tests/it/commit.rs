//! The commit path: append, rewrite and delete snapshots, sequence numbers, summaries,
//! compare-and-swap races and validation (`crates/floe/src/commit/mod.rs`; Iceberg spec, "Commit Conflict Resolution and Retry").

use std::collections::HashMap;

use floe::commit::{self, SnapshotUpdate};
use floe::iceberg::spec::Operation;
use floe::operations::Operation as _;
use floe::table::manifests::live_files;
use floe::Error;

use crate::common::{count_and_sum, rewrite_all, sum_ids, Fixture};

/// Racing tests commit many times in a row: allow more retries than the default 4 so a slow
/// CI machine cannot turn a long losing streak into a failure.
async fn more_retries(fx: &Fixture, ident: &floe::iceberg::TableIdent) {
    let mut props = HashMap::new();
    props.insert("commit.retry.num-retries".to_string(), "20".to_string());
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_properties(props)
        .execute()
        .await
        .unwrap();
}

#[tokio::test]
async fn append_snapshots_carry_sequence_numbers_and_summaries() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", Some("day(ts)")).await;
    let s1 = fx.append(&ident, 0, 30).await;
    let s2 = fx.append(&ident, 30, 60).await;
    let t = fx.load(&ident).await;
    let md = t.metadata();
    let snap1 = md.snapshot_by_id(s1).unwrap();
    let snap2 = md.snapshot_by_id(s2).unwrap();
    assert_eq!(snap1.sequence_number(), 1);
    assert_eq!(snap2.sequence_number(), 2);
    assert_eq!(snap2.parent_snapshot_id(), Some(s1));
    let sum = &snap2.summary().additional_properties;
    assert_eq!(snap2.summary().operation, Operation::Append);
    assert_eq!(sum["added-records"], "30");
    assert_eq!(sum["added-data-files"], "3", "one file per day partition");
    assert_eq!(sum["total-records"], "60");
    assert_eq!(sum["total-data-files"], "6");
    // Data sequence numbers of live files are those of the commits that added them.
    let live = live_files(&t).await.unwrap();
    assert_eq!(live.len(), 6);
    assert_eq!(live.iter().filter(|f| f.sequence_number == 1).count(), 3);
    assert_eq!(live.iter().filter(|f| f.sequence_number == 2).count(), 3);
    assert_eq!(fx.count_and_sum(&ident).await, (60, sum_ids(0, 60)));
}

#[tokio::test]
async fn append_reads_only_the_parent_manifest_list_not_old_manifests() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    for i in 0..5 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    // Make every existing manifest unreadable: a commit that re-read them would fail.
    let t = fx.load(&ident).await;
    let manifests =
        floe::table::manifests::manifests_of(&t, t.metadata().current_snapshot().unwrap())
            .await
            .unwrap();
    assert_eq!(manifests.len(), 5);
    for m in &manifests {
        std::fs::write(m.manifest_path.trim_start_matches("file://"), b"garbage").unwrap();
    }
    let b = fx.batch(&ident, 50, 60).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    let t = fx.load(&ident).await;
    let after = floe::table::manifests::manifests_of(&t, t.metadata().current_snapshot().unwrap())
        .await
        .unwrap();
    assert_eq!(
        after.len(),
        6,
        "the new manifest plus the five carried untouched"
    );
}

#[tokio::test]
async fn appends_merge_small_manifests_past_min_count_to_merge() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    let mut props = HashMap::new();
    props.insert(
        "commit.manifest.min-count-to-merge".to_string(),
        "4".to_string(),
    );
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_properties(props)
        .execute()
        .await
        .unwrap();
    for i in 0..10 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    let t = fx.load(&ident).await;
    let manifests =
        floe::table::manifests::manifests_of(&t, t.metadata().current_snapshot().unwrap())
            .await
            .unwrap();
    assert!(
        manifests.len() <= 4,
        "manifests stay bounded: {}",
        manifests.len()
    );
    assert_eq!(fx.count_and_sum(&ident).await, (100, sum_ids(0, 100)));
    assert_eq!(
        live_files(&t).await.unwrap().len(),
        10,
        "merging keeps every file exactly once"
    );
}

#[tokio::test]
async fn rewrite_replaces_files_without_changing_rows() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", Some("day(ts)")).await;
    for i in 0..4 {
        fx.append(&ident, i * 25, i * 25 + 25).await;
    }
    let before = fx.count_and_sum(&ident).await;
    let start_seq = fx
        .load(&ident)
        .await
        .metadata()
        .current_snapshot()
        .unwrap()
        .sequence_number();
    let (files_before, files_after) = rewrite_all(&fx.catalog, &ident).await;
    assert_eq!(files_before, 12);
    assert_eq!(files_after, 3, "one file per day");
    assert_eq!(fx.count_and_sum(&ident).await, before);
    let t = fx.load(&ident).await;
    let snap = t.metadata().current_snapshot().unwrap();
    assert_eq!(snap.summary().operation, Operation::Replace);
    let s = &snap.summary().additional_properties;
    assert_eq!(s["deleted-data-files"], "12");
    assert_eq!(s["added-data-files"], "3");
    assert_eq!(s["added-records"], s["deleted-records"]);
    assert_eq!(s["total-data-files"], "3");
    assert_eq!(s["total-records"], "100");
    // New files keep the starting sequence number so newer equality deletes still apply.
    for f in live_files(&t).await.unwrap() {
        assert_eq!(f.sequence_number, start_seq);
    }
}

#[tokio::test]
async fn rewrite_of_a_file_removed_concurrently_fails_cleanly() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    fx.append(&ident, 0, 10).await;
    fx.append(&ident, 10, 20).await;
    let start = fx.load(&ident).await;
    let live = live_files(&start).await.unwrap();
    let victim = live[0].file.file_path().to_string();
    // Another writer deletes the file the rewrite wants to replace.
    let del = SnapshotUpdate::delete(&start, vec![victim.clone()], vec![]);
    commit::Committer::new(&fx.second_connection().await, &ident)
        .commit(del)
        .await
        .unwrap();
    // The rewrite planned on `start` must fail, and its output must be gone.
    let new_files = floe::operations::append::write_files(
        &start,
        vec![crate::common::make_batch(&start, 0, 20)],
        &Default::default(),
    )
    .await
    .unwrap();
    let new_paths: Vec<String> = new_files
        .iter()
        .map(|f| f.file_path().to_string())
        .collect();
    let update = SnapshotUpdate::rewrite(
        &start,
        live.iter()
            .map(|f| f.file.file_path().to_string())
            .collect(),
        new_files,
    );
    let err = commit::Committer::new(&fx.catalog, &ident)
        .commit(update)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ValidationFailed { .. }), "{err}");
    assert!(err.to_string().contains(&victim), "{err}");
    for p in new_paths {
        assert!(
            !std::path::Path::new(p.trim_start_matches("file://")).exists(),
            "output {p} left behind"
        );
    }
    assert_eq!(
        fx.count_and_sum(&ident).await.0,
        10,
        "only the delete took effect"
    );
}

#[tokio::test]
async fn two_writers_racing_appends_both_land_exactly_once() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", Some("bucket(4, id)")).await;
    more_retries(&fx, &ident).await;
    let a = fx.second_connection().await;
    let b = fx.second_connection().await;
    let mut tasks = Vec::new();
    for (w, catalog) in [a, b].into_iter().enumerate() {
        let ident = ident.clone();
        let table = fx.load(&ident).await;
        tasks.push(tokio::spawn(async move {
            for i in 0..8i64 {
                let from = (w as i64) * 1000 + i * 10;
                let batch = crate::common::make_batch(&table, from, from + 10);
                floe::operations::append::AppendBuilder::from_batches(
                    &catalog,
                    ident.clone(),
                    vec![batch],
                )
                .execute()
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let expected: i64 = (0..8)
        .map(|i| sum_ids(i * 10, i * 10 + 10) + sum_ids(1000 + i * 10, 1000 + i * 10 + 10))
        .sum();
    assert_eq!(fx.count_and_sum(&ident).await, (160, expected));
    let t = fx.load(&ident).await;
    assert_eq!(
        t.metadata().snapshots().len(),
        16,
        "every append is its own snapshot"
    );
}

#[tokio::test]
async fn rewrite_racing_appends_keeps_every_row() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", Some("day(ts)")).await;
    for i in 0..6 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    more_retries(&fx, &ident).await;
    let writer = fx.second_connection().await;
    let ident2 = ident.clone();
    let table = fx.load(&ident).await;
    let appender = tokio::spawn(async move {
        for i in 6..16i64 {
            let batch = crate::common::make_batch(&table, i * 10, i * 10 + 10);
            floe::operations::append::AppendBuilder::from_batches(
                &writer,
                ident2.clone(),
                vec![batch],
            )
            .execute()
            .await
            .unwrap();
        }
    });
    let (before, _) = rewrite_all(&fx.catalog, &ident).await;
    assert!(before >= 18);
    appender.await.unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (160, sum_ids(0, 160)));
    let t = fx.load(&ident).await;
    let ops: Vec<_> = t
        .metadata()
        .snapshots()
        .map(|s| s.summary().operation.clone())
        .collect();
    assert!(ops.contains(&Operation::Replace));
}

#[tokio::test]
async fn lost_race_is_retried_and_attempt_files_are_removed() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    fx.append(&ident, 0, 10).await;
    // Prepare a commit on the current table, let another writer win, then try to commit the stale one.
    let stale = fx.load(&ident).await;
    let files = floe::operations::append::write_files(
        &stale,
        vec![crate::common::make_batch(&stale, 10, 20)],
        &Default::default(),
    )
    .await
    .unwrap();
    let prepared = commit::producer::prepare(&stale, &SnapshotUpdate::append(files.clone()))
        .await
        .unwrap();
    fx.append(&ident, 20, 30).await;
    // Every attempt offers the stale commit again: each loses the compare-and-swap.
    let err = commit::Committer::new(&fx.catalog, &ident)
        .on(stale)
        .keep_files_on_failure()
        .commit_with(|_| {
            let prepared = prepared.clone();
            async move { Ok(commit::Produced::commit(prepared)) }
        })
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    // The full path (with retry) lands the same files on top of the winner.
    let outcome = commit::Committer::new(&fx.catalog, &ident)
        .commit(SnapshotUpdate::append(files))
        .await
        .unwrap();
    assert_eq!(outcome.attempts, 1);
    assert_eq!(fx.count_and_sum(&ident).await, (30, sum_ids(0, 30)));
    // No metadata.json of the lost attempt stays behind: one per successful commit + creation.
    let t = fx.load(&ident).await;
    let meta_dir = format!(
        "{}/metadata",
        t.metadata().location().trim_start_matches("file://")
    );
    let metadata_files = std::fs::read_dir(meta_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".metadata.json"))
        .count();
    assert_eq!(metadata_files, 4);
    let _ = count_and_sum;
}

#[tokio::test]
async fn old_metadata_files_are_deleted_past_previous_versions_max() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    let mut props = HashMap::new();
    props.insert(
        "write.metadata.delete-after-commit.enabled".to_string(),
        "true".to_string(),
    );
    props.insert(
        "write.metadata.previous-versions-max".to_string(),
        "2".to_string(),
    );
    floe::operations::alter::AlterPropertiesBuilder::new(&fx.catalog, ident.clone())
        .with_properties(props)
        .execute()
        .await
        .unwrap();
    for i in 0..6 {
        fx.append(&ident, i, i + 1).await;
    }
    let t = fx.load(&ident).await;
    assert_eq!(t.metadata().metadata_log().len(), 2);
    let meta_dir = format!(
        "{}/metadata",
        t.metadata().location().trim_start_matches("file://")
    );
    let on_disk = std::fs::read_dir(meta_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".metadata.json"))
        .count();
    assert_eq!(on_disk, 3, "current + 2 previous");
    assert_eq!(fx.count_and_sum(&ident).await.0, 6);
}

#[tokio::test]
async fn delete_removes_files_and_summary_counts_them() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", Some("day(ts)")).await;
    fx.append(&ident, 0, 30).await;
    let t = fx.load(&ident).await;
    let live = live_files(&t).await.unwrap();
    let gone = &live[0];
    let update = SnapshotUpdate::delete(&t, vec![gone.file.file_path().to_string()], vec![]);
    commit::Committer::new(&fx.catalog, &ident)
        .commit(update)
        .await
        .unwrap();
    let t = fx.load(&ident).await;
    let snap = t.metadata().current_snapshot().unwrap();
    assert_eq!(snap.summary().operation, Operation::Delete);
    assert_eq!(
        snap.summary().additional_properties["deleted-records"],
        gone.file.record_count().to_string()
    );
    assert_eq!(
        fx.count_and_sum(&ident).await.0,
        30 - gone.file.record_count() as i64
    );
}

/// A rewrite removing more files than one manifest holds rolls its manifests: every removed
/// file is a DELETED entry, every kept one EXISTING, across several manifests, and the summary
/// counts them (metadata only: the data files are never read).
#[tokio::test]
async fn a_rewrite_of_many_files_rolls_its_manifests() {
    use floe::commit::{Committer, SnapshotUpdate};
    use floe::iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, ManifestStatus};

    let fx = Fixture::new().await;
    let ident = fx.table("db.many", None).await;
    let table = fx.load(&ident).await;
    let location = table.metadata().location().to_string();
    let file = |i: usize| {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("{location}/data/f-{i:05}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .record_count(10)
            .file_size_in_bytes(1000)
            .build()
            .unwrap()
    };
    let n = 25_000;
    let table = Committer::new(&fx.catalog, &ident)
        .commit(SnapshotUpdate::append((0..n).map(file).collect()))
        .await
        .unwrap()
        .table;
    // Remove all but 100, add one.
    let removed: Vec<String> = (100..n).map(|i| file(i).file_path().to_string()).collect();
    let outcome = Committer::new(&fx.catalog, &ident)
        .commit(SnapshotUpdate::rewrite(&table, removed, vec![file(n)]))
        .await
        .unwrap();
    let t = outcome.table;
    let snapshot = t.metadata().current_snapshot().unwrap().clone();
    let manifests = floe::table::manifests::manifests_of(&t, &snapshot)
        .await
        .unwrap();
    let (mut deleted, mut existing, mut added) = (0, 0, 0);
    let mut rewritten = 0;
    for m in &manifests {
        let loaded = m.load_manifest(t.file_io()).await.unwrap();
        let entries = loaded.entries();
        assert!(
            entries.len() <= 10_000,
            "{} entries in one manifest",
            entries.len()
        );
        if entries.iter().any(|e| e.status() != ManifestStatus::Added) {
            rewritten += 1;
        }
        for e in entries {
            match e.status() {
                ManifestStatus::Deleted => deleted += 1,
                ManifestStatus::Existing => existing += 1,
                ManifestStatus::Added => added += 1,
            }
        }
    }
    assert_eq!((deleted, existing, added), (n - 100, 100, 1));
    assert!(rewritten >= 3, "{rewritten} rewritten manifests");
    let summary = &snapshot.summary().additional_properties;
    assert_eq!(summary["deleted-data-files"], (n - 100).to_string());
    assert_eq!(summary["total-data-files"], "101");
    assert_eq!(summary["total-records"], "1010");
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    assert_eq!(live.len(), 101);
}

/// Data files written for `ident` (not committed) and their paths.
async fn staged_files(fx: &Fixture, ident: &floe::iceberg::TableIdent) -> Vec<String> {
    let t = fx.load(ident).await;
    let files = floe::operations::append::write_files(
        &t,
        vec![crate::common::make_batch(&t, 0, 10)],
        &Default::default(),
    )
    .await
    .unwrap();
    assert!(!files.is_empty());
    files.iter().map(|f| f.file_path().to_string()).collect()
}

fn on_disk(paths: &[String]) -> Vec<bool> {
    paths
        .iter()
        .map(|p| std::path::Path::new(p.trim_start_matches("file://")).exists())
        .collect()
}

/// A commit whose every attempt fails with `error`, over a ledger of `paths`.
async fn failing(
    fx: &Fixture,
    ident: &floe::iceberg::TableIdent,
    ledger: Option<&mut commit::Ledger>,
    paths: &[String],
    error: fn() -> Error,
) -> Error {
    let mut c = commit::Committer::new(&fx.catalog, ident).owning(paths.to_vec());
    if let Some(l) = ledger {
        c = c.lending(l);
    }
    c.commit_with(|_| async move { Err::<commit::Produced<()>, _>(error()) })
        .await
        .unwrap_err()
}

#[tokio::test]
async fn the_ledger_is_discarded_on_a_definite_failure() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    let paths = staged_files(&fx, &ident).await;
    let err = failing(&fx, &ident, None, &paths, || Error::Refused {
        operation: "test".into(),
        reason: "no".into(),
    })
    .await;
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(on_disk(&paths).iter().all(|e| !e), "staged files deleted");
}

#[tokio::test]
async fn the_ledger_is_kept_on_an_unknown_outcome() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    let paths = staged_files(&fx, &ident).await;
    let mut lent = commit::Ledger::default();
    let err = failing(&fx, &ident, Some(&mut lent), &paths, || {
        Error::CommitStateUnknown {
            table: "db.t".into(),
            reason: "timeout".into(),
        }
    })
    .await;
    assert!(matches!(err, Error::CommitStateUnknown { .. }), "{err}");
    assert!(on_disk(&paths).iter().all(|e| *e), "files kept");
    assert!(
        lent.is_empty(),
        "nothing handed back: the files may be live"
    );
}

#[tokio::test]
async fn the_ledger_is_handed_back_on_a_conflict_to_a_lender_only() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    let conflict = || Error::ValidationFailed {
        table: "db.t".into(),
        reason: commit::Conflict::RemovedTwice,
    };
    let paths = staged_files(&fx, &ident).await;
    let mut lent = commit::Ledger::default();
    let err = failing(&fx, &ident, Some(&mut lent), &paths, conflict).await;
    assert!(matches!(err, Error::ValidationFailed { .. }), "{err}");
    assert!(on_disk(&paths).iter().all(|e| *e), "files kept");
    let mut back = lent.paths().to_vec();
    back.sort();
    let mut want = paths.clone();
    want.sort();
    assert_eq!(back, want, "handed back to the caller");
    // Without a lender, a conflict is a definite failure.
    failing(&fx, &ident, None, &paths, conflict).await;
    assert!(on_disk(&paths).iter().all(|e| !e), "staged files deleted");
}

#[tokio::test]
async fn nothing_to_commit_ends_unchanged_and_discards_the_ledger() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.t", None).await;
    fx.append(&ident, 0, 10).await;
    let before = fx.load(&ident).await.metadata().current_snapshot_id();
    let paths = staged_files(&fx, &ident).await;
    let done = commit::Committer::new(&fx.catalog, &ident)
        .owning(paths.clone())
        .commit_with(|_| async { Ok(commit::Produced::nothing(7)) })
        .await
        .unwrap();
    assert!(!done.changed);
    assert_eq!(done.plan, 7);
    assert_eq!(done.table.metadata().current_snapshot_id(), before);
    assert!(on_disk(&paths).iter().all(|e| !e), "staged files deleted");
}
