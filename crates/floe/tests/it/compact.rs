//! Compaction: rows and content unchanged (also for PyIceberg and DuckDB), concurrent writers
//! keep their rows, conflicting groups fail alone and leave nothing behind.

use floe::operations::compact::{CompactBuilder, CompactMetrics};
use floe::operations::Operation;

use crate::common::{count_where, plan_files, read_with_python as read, sum_ids, Fixture};

async fn compact(
    fx: &Fixture,
    table: &str,
    opts: &[(&str, &str)],
    filter: Option<&str>,
) -> CompactMetrics {
    let mut b = CompactBuilder::new(
        &fx.catalog,
        floe::catalog::parse_table_ident(table).unwrap(),
    )
    .with_where(filter.map(str::to_string));
    for (k, v) in opts {
        b = b.with_option(*k, *v);
    }
    b.execute().await.unwrap()
}

fn data_files_on_disk(fx: &Fixture, table: &str) -> usize {
    fn rec(p: &std::path::Path) -> usize {
        std::fs::read_dir(p)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        if e.path().is_dir() {
                            rec(&e.path())
                        } else {
                            usize::from(e.path().extension().is_some_and(|x| x == "parquet"))
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    let (ns, t) = table.split_once('.').unwrap();
    rec(&fx.warehouse().join(ns).join(t).join("data"))
}

#[tokio::test]
async fn compaction_keeps_every_row_and_the_content_checksum() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..12 {
        fx.append(&ident, i * 50, i * 50 + 50).await;
    }
    let before = read(&fx, "db.ev");
    assert_eq!(before["duckdb"]["files"], 36);
    let m = compact(&fx, "db.ev", &[], None).await;
    assert_eq!(m.plan.groups.len(), 3, "one group per day");
    assert_eq!(m.rewritten_files, 36);
    assert_eq!(m.added_files, 3);
    assert_eq!(m.live_files_before, 36);
    assert_eq!(m.live_files_after, 3);
    assert_eq!(m.rows, 600);
    assert_eq!(m.commits.len(), 1);
    let after = read(&fx, "db.ev");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(after[reader]["rows"], 600, "{after}");
        assert_eq!(after[reader]["sum"], sum_ids(0, 600), "{after}");
        assert_eq!(after[reader]["files"], 3, "{after}");
        assert_eq!(
            after[reader]["checksum"], before["duckdb"]["checksum"],
            "content changed: {after}"
        );
    }
    // Few manifests remain: compaction merged the ones it touched.
    let t = fx.load(&ident).await;
    let manifests =
        floe::table::manifests::manifests_of(&t, t.metadata().current_snapshot().unwrap())
            .await
            .unwrap();
    // One manifest records the removals (DELETED entries, needed by this snapshot only; the
    // next commit drops it) and one holds the 3 new files.
    assert_eq!(manifests.len(), 2, "{manifests:?}");
    let live: Vec<_> = manifests
        .iter()
        .filter(|m| m.has_added_files() || m.has_existing_files())
        .collect();
    assert_eq!(live.len(), 1, "{manifests:?}");
    // Nothing left to do: a second run plans no group.
    let again = compact(&fx, "db.ev", &[], None).await;
    assert!(again.plan.groups.is_empty());
    assert!(again.commits.is_empty());
}

#[tokio::test]
async fn dry_run_plans_and_commits_nothing() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..6 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    let snapshots = fx.load(&ident).await.metadata().snapshots().len();
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .run(true)
        .await
        .unwrap();
    assert_eq!(m.plan.groups.len(), 3);
    assert!(m
        .plan
        .groups
        .iter()
        .all(|g| g.input_files == 6 && g.expected_output_files == 1));
    assert!(
        m.plan.groups[0].partition.starts_with("ts_day="),
        "{}",
        m.plan.groups[0].partition
    );
    assert_eq!(
        fx.load(&ident).await.metadata().snapshots().len(),
        snapshots
    );
    assert_eq!(data_files_on_disk(&fx, "db.ev"), 18);
}

#[tokio::test]
async fn where_filter_compacts_only_matching_partitions() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..6 {
        fx.append(&ident, i * 30, i * 30 + 30).await;
    }
    // Rows with id % 3 == 0 land on 2026-01-01; only that day is compacted.
    let m = compact(&fx, "db.ev", &[], Some("ts < '2026-01-02'")).await;
    assert_eq!(m.plan.groups.len(), 1);
    assert_eq!(m.rewritten_files, 6);
    assert_eq!(m.live_files_after, 18 - 6 + 1);
    assert_eq!(fx.count_and_sum(&ident).await, (180, sum_ids(0, 180)));
}

#[tokio::test]
async fn appends_committed_during_compaction_are_all_present() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..10 {
        fx.append(&ident, i * 20, i * 20 + 20).await;
    }
    // Twenty racing appends may each win against the compaction's commit: give it room.
    fx.set_property(&ident, "commit.retry.num-retries", "20")
        .await;
    let writer = fx.second_connection().await;
    let table = fx.load(&ident).await;
    let id2 = ident.clone();
    let appender = tokio::spawn(async move {
        for i in 10..30i64 {
            let b = crate::common::make_batch(&table, i * 20, i * 20 + 20);
            floe::operations::append::AppendBuilder::from_batches(&writer, id2.clone(), vec![b])
                .execute()
                .await
                .unwrap();
        }
    });
    let m = compact(
        &fx,
        "db.ev",
        &[("max-concurrent-file-group-rewrites", "1")],
        None,
    )
    .await;
    appender.await.unwrap();
    assert_eq!(
        m.commits.len(),
        1,
        "the compaction still commits: {:?}",
        m.failed_groups
    );
    assert!(m.failed_groups.is_empty());
    assert_eq!(fx.count_and_sum(&ident).await, (600, sum_ids(0, 600)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_input_was_deleted_concurrently_fails_alone_and_leaves_nothing() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..6 {
        fx.append(&ident, i * 30, i * 30 + 30).await;
    }
    let t = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let victim = live[0].file.clone();
    let other = fx.second_connection().await;
    let id2 = ident.clone();
    // Right after planning, another writer deletes one input file of one group.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("max-concurrent-file-group-rewrites", 1)
        .with_progress(move |p| {
            if p.done.steps == 0 {
                let (other, id2, victim) = (other.clone(), id2.clone(), victim.clone());
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(async move {
                        let t = other.load_table(&id2).await.unwrap();
                        let del = floe::commit::SnapshotUpdate::delete(
                            &t,
                            vec![victim.file_path().to_string()],
                            vec![],
                        );
                        floe::commit::Committer::new(&other, &id2)
                            .commit(del)
                            .await
                            .unwrap();
                    })
                });
            }
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(m.failed_groups.len(), 1, "{:?}", m.failed_groups);
    assert_eq!(m.failed_data_files_count, m.failed_groups[0].input_files);
    assert!(m.failed_data_files_count > 0);
    assert!(
        m.failed_groups[0].reason.contains(live[0].file.file_path()),
        "{:?}",
        m.failed_groups
    );
    assert_eq!(m.commits.len(), 2, "the two other groups still commit");
    let rows = 180 - live[0].file.record_count() as i64;
    assert_eq!(fx.count_and_sum(&ident).await.0, rows);
    // Files on disk = live files + the deleted victim (not yet expired): the failed group's
    // output is gone.
    let t = fx.load(&ident).await;
    let live_now = floe::table::manifests::live_files(&t).await.unwrap().len();
    let rewritten = m.rewritten_files;
    assert_eq!(data_files_on_disk(&fx, "db.ev"), live_now + 1 + rewritten);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equality_deletes_committed_after_compaction_started_still_apply() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", None).await;
    for i in 0..6 {
        fx.append(&ident, i * 20, i * 20 + 20).await;
    }
    let other = fx.second_connection().await;
    let id2 = ident.clone();
    // Once compaction has planned (its starting snapshot is fixed), another writer deletes
    // ids 0..10 with an equality delete file.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_progress(move |p| {
            if p.done.steps == 0 {
                let (other, id2) = (other.clone(), id2.clone());
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(async move {
                        let t = other.load_table(&id2).await.unwrap();
                        let rows = crate::common::make_batch(&t, 0, 10);
                        let deletes =
                            floe::write::deletes::write_equality_deletes(&t, &["id"], vec![rows])
                                .await
                                .unwrap();
                        let del = floe::commit::SnapshotUpdate::delete(&t, vec![], deletes);
                        floe::commit::Committer::new(&other, &id2)
                            .commit(del)
                            .await
                            .unwrap();
                    })
                });
            }
        })
        .execute()
        .await
        .unwrap();
    assert!(m.failed_groups.is_empty(), "{:?}", m.failed_groups);
    assert_eq!(m.commits.len(), 1);
    // The compacted files carry the starting sequence number, so the newer delete still
    // hides ids 0..10 (with a fresh sequence number those rows would come back).
    assert_eq!(fx.count_and_sum(&ident).await, (110, sum_ids(10, 120)));
}

#[tokio::test]
async fn sort_by_writes_each_output_sorted() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", None).await;
    for i in 0..6 {
        fx.append(&ident, i * 100, i * 100 + 100).await;
    }
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_sort_by(Some("name desc, id".into()))
        .execute()
        .await
        .unwrap();
    assert_eq!(m.added_files, 1);
    assert_eq!(fx.count_and_sum(&ident).await, (600, sum_ids(0, 600)));
    let t = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let path = live[0]
        .file
        .file_path()
        .trim_start_matches("file://")
        .to_string();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut rows: Vec<(String, i64)> = vec![];
    for b in reader {
        let b = b.unwrap();
        let ids = b
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        let names = b
            .column(2)
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            rows.push((names.value(i).to_string(), ids.value(i)));
        }
    }
    let mut expected = rows.clone();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    assert_eq!(rows, expected, "output is ordered by name desc, id asc");
    let err = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_sort_by(Some("nope".into()))
        .run(true)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[tokio::test]
async fn remove_dangling_deletes_drops_deletes_compaction_made_obsolete() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", None).await;
    for i in 0..5 {
        fx.append(&ident, i * 20, i * 20 + 20).await;
    }
    let t = fx.load(&ident).await;
    let deletes = floe::write::deletes::write_equality_deletes(
        &t,
        &["id"],
        vec![crate::common::make_batch(&t, 0, 5)],
    )
    .await
    .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], deletes))
        .await
        .unwrap();
    assert_eq!(fx.count_and_sum(&ident).await, (95, sum_ids(5, 100)));
    let m = compact(&fx, "db.ev", &[("remove-dangling-deletes", "true")], None).await;
    assert_eq!(m.removed_dangling_deletes, 1);
    assert_eq!(
        m.commits.len(),
        2,
        "a replace, then a delete of the dangling file"
    );
    assert_eq!(
        fx.count_and_sum(&ident).await,
        (95, sum_ids(5, 100)),
        "content unchanged"
    );
    let t = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    assert!(live
        .iter()
        .all(|f| f.file.content_type() == floe::iceberg::spec::DataContentType::Data));
    assert_eq!(
        t.metadata()
            .current_snapshot()
            .unwrap()
            .summary()
            .additional_properties["removed-delete-files"],
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_group_is_written_as_parallel_row_groups_with_exact_metrics() {
    use arrow::array::AsArray;
    use arrow::datatypes::{Float64Type, Int64Type, TimestampMicrosecondType};
    use floe::iceberg::spec::Datum;

    let fx = Fixture::new().await;
    let ident = fx.table("db.rg", Some("day(ts)")).await;
    // 8,192-row row groups (the smallest bound floe derives from the byte target), so each
    // output is assembled from several slices encoded on different tasks.
    fx.set_property(&ident, "write.parquet.row-group-size-bytes", "524288")
        .await;
    for i in 0..12 {
        fx.append(&ident, i * 3000, i * 3000 + 3000).await;
    }
    let predicates = [
        "ts < TIMESTAMP '2026-01-02 00:00:00'",
        "id BETWEEN 9000 AND 20999",
        "name = 'name-3'",
        "amount > 17000.0",
    ];
    let mut counts = Vec::new();
    for p in predicates {
        counts.push(count_where(&fx.catalog, "db.rg", p).await);
    }
    assert!(counts.iter().all(|c| *c > 0), "{counts:?}");
    let before = read(&fx, "db.rg");

    let m = compact(&fx, "db.rg", &[], None).await;
    assert_eq!((m.rewritten_files, m.added_files, m.rows), (36, 3, 36_000));

    // Each output: 12,000 rows in row groups of at most 8,192, metrics equal to its content.
    let table = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&table).await.unwrap();
    assert_eq!(live.len(), 3);
    for f in &live {
        let f = &f.file;
        let path = f.file_path().trim_start_matches("file://");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(path).unwrap(),
        )
        .unwrap();
        let groups: Vec<i64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert!(groups.len() >= 2, "{groups:?}");
        assert!(groups.iter().all(|n| *n <= 8192), "{groups:?}");
        // Slices are whole input files (1,000 rows each), one row group per slice.
        assert!(groups.iter().all(|n| n % 1000 == 0), "{groups:?}");
        let batches: Vec<_> = reader.build().unwrap().map(Result::unwrap).collect();
        let b = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        assert_eq!(f.record_count(), b.num_rows() as u64);
        assert_eq!(f.value_counts()[&1], b.num_rows() as u64);
        assert_eq!(f.null_value_counts()[&1], 0);
        let ids = b.column(0).as_primitive::<Int64Type>();
        let ts = b.column(1).as_primitive::<TimestampMicrosecondType>();
        let names = b.column(2).as_string::<i32>();
        let amounts = b.column(3).as_primitive::<Float64Type>();
        let bounds = [
            (
                1,
                Datum::long(arrow::compute::min(ids).unwrap()),
                Datum::long(arrow::compute::max(ids).unwrap()),
            ),
            (
                2,
                Datum::timestamp_micros(arrow::compute::min(ts).unwrap()),
                Datum::timestamp_micros(arrow::compute::max(ts).unwrap()),
            ),
            (
                3,
                Datum::string(arrow::compute::min_string(names).unwrap()),
                Datum::string(arrow::compute::max_string(names).unwrap()),
            ),
            (
                4,
                Datum::double(arrow::compute::min(amounts).unwrap()),
                Datum::double(arrow::compute::max(amounts).unwrap()),
            ),
        ];
        for (id, lo, hi) in bounds {
            assert_eq!(f.lower_bounds()[&id], lo, "field {id} of {path}");
            assert_eq!(f.upper_bounds()[&id], hi, "field {id} of {path}");
        }
        assert_eq!(f.nan_value_counts()[&4], 0);
        assert_eq!(
            f.split_offsets().map(|s| s.len()),
            Some(groups.len()),
            "one split offset per row group"
        );
    }
    // Pruned scans (partition and bounds) still find every row, and both readers agree.
    for (p, c) in predicates.iter().zip(&counts) {
        assert_eq!(count_where(&fx.catalog, "db.rg", p).await, *c, "{p}");
    }
    let after = read(&fx, "db.rg");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(after[reader]["rows"], 36_000, "{after}");
        assert_eq!(after[reader]["files"], 3, "{after}");
        assert_eq!(after[reader]["checksum"], before["duckdb"]["checksum"]);
    }
}

/// A table whose partition spec evolved (PyIceberg wrote files under both specs): groups in
/// the old spec are re-partitioned into the current one, groups in the current spec keep their
/// partition, and no row changes.
#[tokio::test]
async fn files_of_an_older_partition_spec_are_rewritten_into_the_current_one() {
    let fx = Fixture::new().await;
    // 4 appends of 300 rows: 2 under day(ts), then 2 under day(ts) + identity(name).
    fx.pyiceberg_write(&[
        "--table",
        "py.evolved",
        "--rows",
        "1200",
        "--batches",
        "4",
        "--evolve-after",
        "2",
    ]);
    let catalog = &fx.catalog;
    let ident = floe::catalog::parse_table_ident("py.evolved").unwrap();
    let table = fx.load(&ident).await;
    let current = table.metadata().default_partition_spec_id();
    let before = floe::table::manifests::live_files(&table).await.unwrap();
    let specs: std::collections::BTreeSet<i32> = before.iter().map(|f| f.spec_id).collect();
    assert_eq!(specs.len(), 2, "files under two specs: {specs:?}");
    let expected = fx.count_and_sum(&ident).await;
    assert_eq!(expected, (1200, sum_ids(0, 1200)));

    let m = CompactBuilder::new(catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_eq!(m.rewritten_files, before.len());
    assert!(m.plan.groups.iter().any(|g| g.spec_id != current));
    assert!(m.plan.groups.iter().any(|g| g.spec_id == current));

    let table = fx.load(&ident).await;
    let after = floe::table::manifests::live_files(&table).await.unwrap();
    assert!(
        after.iter().all(|f| f.spec_id == current),
        "every output is in the current spec"
    );
    // Every output's partition tuple has both fields (day and name) filled.
    assert!(after
        .iter()
        .all(|f| f.file.partition().fields().iter().all(|v| v.is_some())));
    assert_eq!(fx.count_and_sum(&ident).await, expected);
    let readers = read(&fx, "py.evolved");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(readers[reader]["rows"], 1200, "{reader}: {readers}");
        assert_eq!(
            readers[reader]["sum"],
            sum_ids(0, 1200),
            "{reader}: {readers}"
        );
    }
    assert_eq!(
        readers["pyiceberg"]["checksum"],
        readers["duckdb"]["checksum"]
    );
}

#[tokio::test]
async fn zero_concurrency_or_commit_budget_is_refused_not_clamped() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", None).await;
    for i in 0..5 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    let snapshots = fx.load(&ident).await.metadata().snapshots().len();
    for (opts, needle) in [
        (
            vec![("max-concurrent-file-group-rewrites", "0")],
            "max-concurrent-file-group-rewrites",
        ),
        (
            vec![
                ("partial-progress.enabled", "true"),
                ("partial-progress.max-commits", "0"),
            ],
            "partial-progress.max-commits",
        ),
        (vec![("min-input-files", "0")], "min-input-files"),
        (
            vec![("target-file-size-bytes", "0")],
            "target-file-size-bytes",
        ),
    ] {
        let mut b = CompactBuilder::new(&fx.catalog, ident.clone());
        for (k, v) in &opts {
            b = b.with_option(*k, *v);
        }
        let e = b.execute().await.unwrap_err().to_string();
        assert!(e.contains(needle), "{opts:?}: {e}");
    }
    // A table property gets the same answer.
    fx.set_property(
        &ident,
        "floe.compact.max-concurrent-file-group-rewrites",
        "0",
    )
    .await;
    let e = CompactBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("max-concurrent-file-group-rewrites"), "{e}");
    let t = fx.load(&ident).await;
    assert_eq!(
        t.metadata().snapshots().len(),
        snapshots,
        "nothing committed"
    );
}

/// Every maintenance operation answers `plan()` with its cost and changes nothing; `execute()`
/// then does what the plan said.
#[tokio::test]
async fn every_operation_plans_its_cost_without_changing_the_table() {
    use floe::base::cost::Costed;
    use floe::operations::clean::metadata_files::CleanMetadataBuilder;
    use floe::operations::clean::orphans::OrphanBuilder;
    use floe::operations::clean::rewrite_manifests::RewriteManifestsBuilder;
    use floe::operations::expire::ExpireBuilder;

    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..6 {
        fx.append(&ident, i * 10, i * 10 + 10).await;
    }
    let before = fx.load(&ident).await;
    let current = |t: &floe::iceberg::table::Table| {
        (
            t.metadata().current_snapshot_id(),
            t.metadata().snapshots().len(),
            t.metadata_location().map(str::to_string),
        )
    };

    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    let compact = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_progress(move |p: &floe::base::cost::Progress| sink.lock().unwrap().push(*p));
    let planned = compact.plan().await.unwrap();
    assert!(events.lock().unwrap().is_empty(), "plan() reports nothing");
    let cost = planned.cost();
    assert!(planned.report.dry_run);
    assert_eq!(cost.files_to_read, 18, "{cost:?}");
    assert_eq!(cost.files_to_write, 3, "{cost:?}");
    assert_eq!(cost.bytes_to_read, planned.report.plan.input_bytes());
    assert_eq!(current(&fx.load(&ident).await), current(&before));

    let manifests = RewriteManifestsBuilder::new(&fx.catalog, ident.clone())
        .plan()
        .await
        .unwrap();
    assert!(manifests.report.worth_rewriting, "{manifests:?}");
    assert_eq!(
        manifests.cost().files_to_read,
        manifests.report.manifests_before
    );
    assert!(manifests.cost().files_to_write < manifests.cost().files_to_read);

    // Rewrite, then everything before the rewrite expires: the 18 small files go.
    let done = compact.execute().await.unwrap();
    assert_eq!(done.cost().files_to_read, 18);
    assert_eq!(done.cost().files_to_write, 3);
    // One start event and one per group; the last has done all it announced.
    let ev = events.lock().unwrap().clone();
    assert_eq!(ev.len(), 4, "{ev:?}");
    assert_eq!((ev[0].done.steps, ev[0].total.steps), (0, 3));
    let last = ev.last().unwrap();
    // Everything announced is done (rows are counted as they come: not known ahead).
    assert_eq!(
        (last.done.steps, last.done.files, last.done.bytes),
        (last.total.steps, last.total.files, last.total.bytes)
    );
    assert_eq!(last.total.bytes, planned.report.plan.input_bytes());
    assert_eq!(last.done.rows, done.rows);
    let expire = ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(std::time::Duration::ZERO)
        .with_retain_last(1);
    let after_compaction = current(&fx.load(&ident).await);
    let planned = expire.plan().await.unwrap();
    assert!(planned.report.dry_run);
    let data = planned
        .report
        .files
        .iter()
        .find(|k| k.kind == "data")
        .unwrap();
    assert_eq!(data.files, 18, "{:?}", planned.report.files);
    assert!(planned.cost().files_to_delete >= 18, "{:?}", planned.cost());
    assert_eq!(current(&fx.load(&ident).await), after_compaction);
    let expired = expire.execute().await.unwrap();
    assert_eq!(expired.cost(), planned.cost());

    // Nothing orphaned, nothing to clean: zero cost.
    let orphans = OrphanBuilder::new(&fx.catalog, ident.clone())
        .plan()
        .await
        .unwrap();
    assert_eq!(orphans.cost().files_to_delete, 0, "{orphans:?}");
    let meta = CleanMetadataBuilder::new(&fx.catalog, ident.clone())
        .plan()
        .await
        .unwrap();
    assert_eq!(meta.cost().files_to_delete, 0, "{meta:?}");
}

/// Equality deletes are applied by key while rewriting: only rows older than the delete with
/// a deleted key go; rows appended after it with the same keys stay (sequence numbers), and
/// the delete file, matching nothing any more, can be dropped in the same run.
#[tokio::test]
async fn equality_deletes_are_applied_by_key_and_newer_rows_of_a_deleted_key_stay() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", None).await;
    for i in 0..6 {
        fx.append(&ident, i * 100, i * 100 + 100).await;
    }
    let t = fx.load(&ident).await;
    // Every id divisible by 7 in 0..600, in one equality delete file.
    let gone: Vec<i64> = (0..600).filter(|i| i % 7 == 0).collect();
    let mut batches = Vec::new();
    for id in &gone {
        batches.push(crate::common::make_batch(&t, *id, id + 1));
    }
    let deletes = floe::write::deletes::write_equality_deletes(&t, &["id"], batches)
        .await
        .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], deletes))
        .await
        .unwrap();
    // Then ids 0..50 again: newer than the delete, they stay.
    fx.append(&ident, 0, 50).await;
    let expect_rows = 600 - gone.len() as i64 + 50;
    let expect_sum = sum_ids(0, 600) - gone.iter().sum::<i64>() + sum_ids(0, 50);
    assert_eq!(fx.count_and_sum(&ident).await, (expect_rows, expect_sum));
    let m = compact(
        &fx,
        "db.ev",
        &[("rewrite-all", "true"), ("remove-dangling-deletes", "true")],
        None,
    )
    .await;
    assert_eq!(m.rows, expect_rows as u64, "{m:?}");
    assert_eq!(m.removed_dangling_deletes, 1, "{m:?}");
    assert_eq!(fx.count_and_sum(&ident).await, (expect_rows, expect_sum));
    let r = read(&fx, "db.ev");
    assert_eq!(r["pyiceberg"]["rows"], expect_rows);
    assert_eq!(r["duckdb"]["rows"], expect_rows);
}

/// Past `plan-batch-files` candidates, partitions are planned and committed in batches: the
/// same files result, one commit per batch.
#[tokio::test]
async fn many_candidates_are_planned_in_batches_of_partitions() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ev", Some("day(ts)")).await;
    for i in 0..8 {
        fx.append(&ident, i * 50, i * 50 + 50).await;
    }
    let m = compact(&fx, "db.ev", &[("plan-batch-files", "10")], None).await;
    assert_eq!(
        m.plan_batches, 3,
        "8 files in each of 3 days, at most 10 per batch"
    );
    assert_eq!(m.commits.len(), 3);
    assert_eq!(m.live_files_before, 24);
    assert_eq!(m.rewritten_files, 24);
    assert_eq!(m.live_files_after, 3);
    assert_eq!(fx.count_and_sum(&ident).await, (400, sum_ids(0, 400)));
    let again = compact(
        &fx,
        "db.ev",
        &[("plan-batch-files", "1"), ("rewrite-all", "true")],
        None,
    )
    .await;
    assert_eq!(again.plan_batches, 3, "one partition per batch");
    assert_eq!(again.live_files_after, 3);
    assert_eq!(fx.count_and_sum(&ident).await, (400, sum_ids(0, 400)));
}

/// Z-order compaction (`--sort-by 'zorder(x, y)'`) on a 256 x 256 grid of (x bigint, y string
/// sharing a prefix), written in a scrambled order: a range filter on either column alone
/// lets PyIceberg's planning skip most output files, where a linear sort by x helps x only
/// and an unsorted rewrite helps neither. Rows are exact in PyIceberg and DuckDB.
#[tokio::test]
async fn zorder_compaction_lets_range_filters_on_each_column_skip_files() {
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;
    let fx = Fixture::new().await;
    let schema =
        floe::table::schema::parse_schema("id bigint not null, x bigint, y string").unwrap();
    let n: u64 = 256 * 256;
    for name in ["z.zo", "z.lin", "z.un"] {
        let ident = fx.create_table(name, schema.clone(), None).await;
        let table = fx.load(&ident).await;
        let arrow_schema = Arc::new(
            floe::iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
                .unwrap(),
        );
        for part in 0..8u64 {
            let js: Vec<u64> = (part * n / 8..(part + 1) * n / 8)
                .map(|i| (i * 2_654_435_761) % n)
                .collect();
            let b = RecordBatch::try_new(
                arrow_schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(js.iter().map(|&j| j as i64))),
                    Arc::new(Int64Array::from_iter_values(
                        js.iter().map(|&j| (j % 256) as i64 * 1_000_003),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        js.iter().map(|&j| format!("user_{:05}", j / 256)),
                    )),
                ],
            )
            .unwrap();
            floe::operations::append::AppendBuilder::from_batches(
                &fx.catalog,
                ident.clone(),
                vec![b],
            )
            .execute()
            .await
            .unwrap();
        }
    }
    for (name, sort) in [
        ("z.zo", Some("zorder(x, y)")),
        ("z.lin", Some("x")),
        ("z.un", None),
    ] {
        let m = CompactBuilder::new(&fx.catalog, floe::catalog::parse_table_ident(name).unwrap())
            .with_option("rewrite-all", "true")
            .with_option("target-file-size-bytes", 1024)
            .with_sort_by(sort.map(str::to_string))
            .execute()
            .await
            .unwrap();
        assert_eq!(m.rewritten_files, 8, "{name}");
    }
    let x_low = "x < 32000096"; // x < 32 * 1_000_003: 1/8 of the x values
    let y_low = "y < 'user_00032'"; // 1/8 of the y values
    let x_mid = "x >= 128000384 and x < 160000480";
    let filters = [x_low, y_low, x_mid];
    let zo = plan_files(&fx, "z.zo", &filters);
    let lin = plan_files(&fx, "z.lin", &filters);
    let un = plan_files(&fx, "z.un", &filters);
    let files = zo["files"].as_i64().unwrap();
    assert!(files >= 8, "{zo}");
    for f in filters {
        for v in [&zo, &lin, &un] {
            assert_eq!(v["rows"][f].as_i64(), Some(n as i64 / 8), "{f}: {v}");
        }
        // Z-order: a 1/8 range on either column reads at most half of the files (a Morton
        // layout in 8 runs reads 2 runs for an x range and 4 for a y range).
        let selected = zo["selected"][f].as_i64().unwrap();
        assert!(
            selected * 2 <= files,
            "zorder {f}: {selected} of {files}: {zo}"
        );
    }
    // A linear sort by x prunes x only; y ranges read every file. Unsorted prunes nothing.
    assert!(lin["selected"][x_low].as_i64().unwrap() * 4 <= lin["files"].as_i64().unwrap());
    assert_eq!(lin["selected"][y_low], lin["files"], "{lin}");
    assert_eq!(un["selected"][y_low], un["files"], "{un}");
    assert_eq!(un["selected"][x_low], un["files"], "{un}");
    let total: i64 = (0..n as i64).sum();
    for name in ["z.zo", "z.lin"] {
        let v = read(&fx, name);
        for reader in ["pyiceberg", "duckdb"] {
            assert_eq!(v[reader]["rows"].as_i64(), Some(n as i64), "{name}: {v}");
            assert_eq!(v[reader]["sum"].as_i64(), Some(total), "{name}: {v}");
        }
    }
    // Types Z-order cannot rank are refused by name, before anything is written.
    let e = CompactBuilder::new(
        &fx.catalog,
        floe::catalog::parse_table_ident("z.zo").unwrap(),
    )
    .with_option("rewrite-all", "true")
    .with_sort_by(Some("zorder(x, nope)".into()))
    .execute()
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("nope") && e.contains("no such column"), "{e}");
}
