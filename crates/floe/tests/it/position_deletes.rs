//! Position delete files: compaction removes those whose every data file it rewrote (in the
//! same commit), and `rewrite-position-delete-files` merges them, dropping rows that point at
//! files gone; rows stay the same for floe, PyIceberg and DuckDB.

use floe::operations::Operation;
use std::collections::{BTreeSet, HashMap};

use floe::iceberg::spec::{DataContentType, PrimitiveLiteral, Struct};
use floe::iceberg::TableIdent;
use floe::operations::compact::position_deletes::RewriteDeletesBuilder;
use floe::operations::compact::CompactBuilder;

use crate::common::{outcome, read_with_python as read, sum_ids, table_state, Fixture};

/// Data files of `ident` by their first id / 10 (each append writes ids i*10..i*10+10 in order,
/// so row position p of file i holds id i*10+p).
async fn data_files(fx: &Fixture, ident: &TableIdent) -> HashMap<i64, String> {
    let t = fx.load(ident).await;
    floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| {
            let lo = match f.file.lower_bounds()[&1].literal() {
                PrimitiveLiteral::Long(v) => *v,
                other => panic!("{other:?}"),
            };
            (lo / 10, f.file.file_path().to_string())
        })
        .collect()
}

/// The shape a Spark merge-on-read table takes after 21 small inserts, a DELETE and an UPDATE:
/// 21 data files and, in one last commit, 20 position delete files without
/// `referenced_data_file`. Delete file k deletes position 0 of data file k, and for odd k also
/// position 1 of data file k+1 (so half of them target two files: their `file_path` bounds do
/// not prove a single target). Returns the ids deleted.
async fn spark_shaped(fx: &Fixture, name: &str) -> (TableIdent, Vec<i64>) {
    let ident = fx.table(name, None).await;
    for i in 0..21 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    let files = data_files(fx, &ident).await;
    assert_eq!(files.len(), 21);
    let t = fx.load(&ident).await;
    let mut deletes = Vec::new();
    let mut ids = Vec::new();
    for k in 0..20i64 {
        let mut rows = vec![(files[&k].clone(), 0)];
        ids.push(k * 10);
        if k % 2 == 1 {
            rows.push((files[&(k + 1)].clone(), 1));
            ids.push((k + 1) * 10 + 1);
        }
        let f =
            floe::write::deletes::write_position_delete_file(&t, 0, Struct::empty(), rows, false)
                .await
                .unwrap()
                .unwrap();
        assert!(f.referenced_data_file().is_none());
        deletes.push(f);
    }
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], deletes))
        .await
        .unwrap();
    (ident, ids)
}

fn expected(deleted: &[i64], upto: i64) -> (i64, i64) {
    let gone: i64 = deleted.iter().sum();
    (upto - deleted.len() as i64, sum_ids(0, upto) - gone)
}

async fn live_of(fx: &Fixture, ident: &TableIdent, content: DataContentType) -> Vec<String> {
    let t = fx.load(ident).await;
    floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == content)
        .map(|f| f.file.file_path().to_string())
        .collect()
}

fn summary(t: &floe::iceberg::table::Table) -> HashMap<String, String> {
    t.metadata()
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties
        .clone()
}

#[tokio::test]
async fn compaction_removes_position_deletes_whose_every_data_file_it_rewrote() {
    let fx = Fixture::new().await;
    let (ident, deleted) = spark_shaped(&fx, "db.mor").await;
    let want = expected(&deleted, 210);
    assert_eq!(fx.count_and_sum(&ident).await, want);
    let before = read(&fx, "db.mor");
    assert_eq!(before["pyiceberg"]["rows"], want.0, "{before}");
    assert_eq!(before["duckdb"]["rows"], want.0, "{before}");

    // First only ids < 100 (data files 0..9): delete files 0..8 target only those and go in
    // the same commit; delete file 9 also targets data file 10, which stays, so it stays.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("delete-file-threshold", 1)
        .with_where(Some("id < 100".into()))
        .execute()
        .await
        .unwrap();
    assert_eq!(m.rewritten_files, 10, "{m:?}");
    assert_eq!(m.removed_delete_files, 9);
    assert_eq!(m.removed_position_deletes, 9 + 4);
    assert_eq!(m.commits.len(), 1);
    assert_eq!(fx.count_and_sum(&ident).await, want);
    let t = fx.load(&ident).await;
    let s = summary(&t);
    assert_eq!(s["removed-position-delete-files"], "9", "{s:?}");
    assert_eq!(s["removed-delete-files"], "9");
    assert_eq!(s["removed-position-deletes"], "13");
    assert_eq!(s["deleted-data-files"], "10");
    assert_eq!(s["total-delete-files"], "11");
    assert_eq!(
        live_of(&fx, &ident, DataContentType::PositionDeletes)
            .await
            .len(),
        11
    );

    // Then the whole table, as the user ran it: every delete file goes with the rewrite.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("delete-file-threshold", 1)
        .with_option("remove-dangling-deletes", true)
        .execute()
        .await
        .unwrap();
    assert_eq!(m.removed_delete_files, 11, "{m:?}");
    assert_eq!(m.removed_dangling_deletes, 0);
    assert_eq!(m.commits.len(), 1, "one replace; nothing left dangling");
    assert_eq!(m.live_files_after, 1);
    let t = fx.load(&ident).await;
    let s = summary(&t);
    assert_eq!(s["removed-position-delete-files"], "11", "{s:?}");
    assert_eq!(s["total-delete-files"], "0");
    assert_eq!(s["total-position-deletes"], "0");
    assert!(live_of(&fx, &ident, DataContentType::PositionDeletes)
        .await
        .is_empty());
    assert_eq!(fx.count_and_sum(&ident).await, want);
    let after = read(&fx, "db.mor");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(after[reader]["rows"], want.0, "{after}");
        assert_eq!(after[reader]["sum"], want.1, "{after}");
        assert_eq!(
            after[reader]["checksum"], before[reader]["checksum"],
            "{after}"
        );
    }
}

#[tokio::test]
async fn rewrite_position_delete_files_merges_them_and_drops_rows_of_files_gone() {
    let fx = Fixture::new().await;
    let (ident, _) = spark_shaped(&fx, "db.mor").await;
    let files = data_files(&fx, &ident).await;
    // Data files 0 and 2 leave the table: delete files 0 and 2 now point at nothing, and
    // delete file 1 half at nothing.
    let t = fx.load(&ident).await;
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(
            &t,
            vec![files[&0].clone(), files[&2].clone()],
            vec![],
        ))
        .await
        .unwrap();
    let rows = fx.count_and_sum(&ident).await;
    let data_before: BTreeSet<String> = live_of(&fx, &ident, DataContentType::Data)
        .await
        .into_iter()
        .collect();
    let before = read(&fx, "db.mor");
    let t = fx.load(&ident).await;
    let old_seq = floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .map(|f| f.sequence_number)
        .max()
        .unwrap();

    // A dry run plans one group of 20 files and changes nothing.
    let dry = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .plan()
        .await
        .unwrap()
        .report;
    assert_eq!(dry.groups.len(), 1, "{dry:?}");
    assert_eq!(dry.groups[0].input_files, 20);
    assert_eq!(
        dry.groups[0].dangling_files, 2,
        "files 0 and 2 by their bounds"
    );
    assert!(dry.snapshot_id.is_none());
    assert_eq!(
        fx.load(&ident).await.metadata().current_snapshot_id(),
        t.metadata().current_snapshot_id()
    );

    let m = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(m.rewritten_delete_files_count, 20, "{m:?}");
    assert_eq!(m.added_delete_files_count, 1);
    assert_eq!(m.rewritten_deletes, 30);
    assert_eq!(m.dangling_deletes_removed, 3, "rows of files 0 and 2");
    assert_eq!(m.added_deletes, 27);
    assert_eq!(m.emptied_delete_files, 2);
    assert!(m.snapshot_id.is_some());
    assert_eq!(fx.count_and_sum(&ident).await, rows, "content unchanged");

    let t = fx.load(&ident).await;
    let s = summary(&t);
    assert_eq!(s["removed-position-delete-files"], "20", "{s:?}");
    assert_eq!(s["added-position-delete-files"], "1");
    assert_eq!(s["removed-position-deletes"], "30");
    assert_eq!(s["added-position-deletes"], "27");
    assert!(!s.contains_key("deleted-data-files"), "data untouched");
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let pos: Vec<_> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .collect();
    assert_eq!(pos.len(), 1);
    assert_eq!(pos[0].file.record_count(), 27);
    assert!(pos[0].file.referenced_data_file().is_none(), "targets many");
    assert_eq!(
        pos[0].sequence_number, old_seq,
        "the new file keeps the data sequence number of the ones it replaces"
    );
    assert!(old_seq < t.metadata().current_snapshot().unwrap().sequence_number());
    let data_after: BTreeSet<String> = live_of(&fx, &ident, DataContentType::Data)
        .await
        .into_iter()
        .collect();
    assert_eq!(data_after, data_before, "data files untouched");
    let after = read(&fx, "db.mor");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(after[reader]["rows"], rows.0, "{after}");
        assert_eq!(after[reader]["sum"], rows.1, "{after}");
        assert_eq!(
            after[reader]["checksum"], before[reader]["checksum"],
            "{after}"
        );
    }

    // Nothing left to do: one small file is under min-input-files.
    let again = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap();
    assert!(again.groups.is_empty(), "{again:?}");
    assert!(again.snapshot_id.is_none());
    assert_eq!(
        fx.load(&ident).await.metadata().current_snapshot_id(),
        t.metadata().current_snapshot_id()
    );

    // With rewrite-all the one file is rewritten; a bad option is refused by name.
    let all = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_eq!(all.rewritten_delete_files_count, 1);
    assert_eq!(fx.count_and_sum(&ident).await, rows);

    // An equality delete (id 200, in data file 20) is never touched by a rewrite of position
    // deletes (added last: PyIceberg 0.12 reads no equality deletes).
    // An equality delete (id 200, in data file 20) is never touched.
    let t = fx.load(&ident).await;
    let eq = floe::write::deletes::write_equality_deletes(
        &t,
        &["id"],
        vec![crate::common::make_batch(&t, 200, 201)],
    )
    .await
    .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], eq))
        .await
        .unwrap();
    let eq_files = live_of(&fx, &ident, DataContentType::EqualityDeletes).await;
    assert_eq!(eq_files.len(), 1);
    let rows_eq = fx.count_and_sum(&ident).await;
    let again = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_eq!(again.rewritten_delete_files_count, 1, "{again:?}");
    assert_eq!(
        live_of(&fx, &ident, DataContentType::EqualityDeletes).await,
        eq_files,
        "equality deletes untouched"
    );
    assert_eq!(fx.count_and_sum(&ident).await, rows_eq);
    let err = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .with_option("min-input-files", "many")
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("min-input-files"), "{err}");
}

#[tokio::test]
async fn a_rewritten_delete_file_that_targets_one_data_file_references_it() {
    let fx = Fixture::new().await;
    let (ident, _) = spark_shaped(&fx, "db.mor").await;
    let files = data_files(&fx, &ident).await;
    // Every data file but 5 leaves: of all delete rows only position 0 of file 5 (in delete
    // file 5, whose other row names file 6) still applies.
    let t = fx.load(&ident).await;
    let gone: Vec<String> = files
        .iter()
        .filter(|(k, _)| **k != 5)
        .map(|(_, p)| p.clone())
        .collect();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, gone, vec![]))
        .await
        .unwrap();
    let rows = fx.count_and_sum(&ident).await;
    assert_eq!(rows.0, 9, "file 5 without its position 0");
    let m = RewriteDeletesBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(m.added_delete_files_count, 1, "{m:?}");
    let t = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let pos: Vec<_> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .collect();
    assert_eq!(pos.len(), 1);
    assert_eq!(
        pos[0].file.referenced_data_file().as_deref(),
        Some(files[&5].as_str())
    );
    assert_eq!(fx.count_and_sum(&ident).await, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_file_rewritten_meanwhile_fails_the_compaction_group_not_the_rows() {
    let fx = Fixture::new().await;
    let (ident, deleted) = spark_shaped(&fx, "db.mor").await;
    let want = expected(&deleted, 210);
    let other = fx.second_connection().await;
    let id2 = ident.clone();
    // Once compaction has planned (and chosen the delete files to drop), another process
    // rewrites those delete files: they are no longer live when compaction commits.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("delete-file-threshold", 1)
        .with_progress(move |p| {
            if p.done.steps == 0 {
                let (other, id2) = (other.clone(), id2.clone());
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(async move {
                        let r = RewriteDeletesBuilder::new(&other, id2)
                            .execute()
                            .await
                            .unwrap();
                        assert_eq!(r.rewritten_delete_files_count, 20);
                    })
                });
            }
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(m.failed_groups.len(), 1, "{m:?}");
    assert_eq!(m.failed_data_files_count, 21);
    assert!(m.commits.is_empty());
    assert_eq!(m.removed_delete_files, 0);
    assert_eq!(fx.count_and_sum(&ident).await, want);
    assert_eq!(
        live_of(&fx, &ident, DataContentType::Data).await.len(),
        21,
        "nothing committed"
    );
    // Run again, it finds the new delete file and removes it with the rewrite.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("delete-file-threshold", 1)
        .execute()
        .await
        .unwrap();
    assert_eq!(m.removed_delete_files, 1, "{m:?}");
    assert!(live_of(&fx, &ident, DataContentType::PositionDeletes)
        .await
        .is_empty());
    assert_eq!(fx.count_and_sum(&ident).await, want);
}

#[tokio::test]
async fn a_rewrite_plan_changes_nothing_and_applying_it_is_executing() {
    let fx = Fixture::new().await;
    let (a, deleted) = spark_shaped(&fx, "db.pda").await;
    let (b, _) = spark_shaped(&fx, "db.pdb").await;
    let builder = RewriteDeletesBuilder::new(&fx.catalog, a.clone());
    let before = table_state(&fx, &a).await;
    let plan = builder.plan().await.unwrap();
    assert!(plan.report.dry_run && plan.report.snapshot_id.is_none());
    assert_eq!(plan.report.groups.len(), 1, "{:?}", plan.report);
    assert_eq!(
        table_state(&fx, &a).await,
        before,
        "plan() wrote, deleted or committed"
    );
    let applied = builder.apply(plan).await.unwrap();
    assert!(
        !applied.dry_run && applied.snapshot_id.is_some(),
        "{applied:?}"
    );
    assert_eq!(applied.rewritten_delete_files_count, 20, "{applied:?}");
    let executed = RewriteDeletesBuilder::new(&fx.catalog, b.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome(&applied), outcome(&executed));
    let want = expected(&deleted, 210);
    assert_eq!(fx.count_and_sum(&a).await, want);
    assert_eq!(fx.count_and_sum(&b).await, want);
}
