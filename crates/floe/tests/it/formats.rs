//! Format versions floe creates, commits and upgrades: a v1 table lives as v1 (appends,
//! compaction and expiry in v1 manifests, readable by PyIceberg and DuckDB); an upgrade is
//! metadata only, planned without a change and refused downwards; a v3 table floe writes keeps
//! row lineage through appends, deletes (deletion vectors) and compaction.

use floe::catalog::NewTable;
use floe::iceberg::spec::FormatVersion;
use floe::operations::alter::format::UpgradeFormatBuilder;
use floe::operations::compact::CompactBuilder;
use floe::operations::expire::ExpireBuilder;
use floe::operations::{Operation, Query};
use floe::table::parse_table_ident;

use crate::common::{count_and_sum, outcome, read_with_python, sum_ids, table_state, Fixture};

/// `ns.name` (partitioned by day) in format `version`: the `format-version` property, as Java
/// and PyIceberg take it.
async fn table_in_format(fx: &Fixture, name: &str, version: &str) -> floe::iceberg::TableIdent {
    let schema = floe::table::schema::parse_schema(
        "id bigint not null, ts timestamp, name string, amount double",
    )
    .unwrap();
    let properties = [("format-version".to_string(), version.to_string())].into();
    fx.create_table_with(name, schema, Some("day(ts)"), properties)
        .await
}

#[tokio::test]
async fn a_v1_table_is_appended_compacted_and_expired_as_v1() {
    let fx = Fixture::new().await;
    let ident = table_in_format(&fx, "db.old", "1").await;
    let t = fx.load(&ident).await;
    assert_eq!(t.metadata().format_version(), FormatVersion::V1);
    assert!(
        !t.metadata().properties().contains_key("format-version"),
        "the format is not stored as a property"
    );
    for i in 0..5 {
        fx.append(&ident, i * 20, i * 20 + 20).await;
    }
    let r = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("min-input-files", "2")
        .execute()
        .await
        .unwrap();
    assert!(r.rewritten_files > r.added_files, "{r:?}");
    let e = ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(std::time::Duration::ZERO)
        .with_retain_last(1)
        .execute()
        .await
        .unwrap();
    assert!(!e.plan.expired_snapshots.is_empty(), "{e:?}");
    let t = fx.load(&ident).await;
    assert_eq!(t.metadata().format_version(), FormatVersion::V1);
    assert_eq!(t.metadata().snapshots().count(), 1);
    assert_eq!(
        count_and_sum(&fx.catalog, &ident).await,
        (100, sum_ids(0, 100))
    );
    // v1 manifests: no sequence numbers anywhere (spec: v1 reads them as 0).
    let list = t
        .manifest_list_reader(t.metadata().current_snapshot().unwrap())
        .load()
        .await
        .unwrap();
    assert!(list.entries().iter().all(|m| m.sequence_number == 0));
    let v = read_with_python(&fx, "db.old");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(v[reader]["rows"], 100, "{reader}: {v}");
        assert_eq!(v[reader]["sum"], sum_ids(0, 100), "{reader}: {v}");
    }
}

#[tokio::test]
async fn an_upgrade_is_planned_without_a_change_applied_as_executed_and_never_downwards() {
    let fx = Fixture::new().await;
    let a = table_in_format(&fx, "db.a", "1").await;
    let b = table_in_format(&fx, "db.b", "1").await;
    for ident in [&a, &b] {
        fx.append(ident, 0, 30).await;
    }
    let before = table_state(&fx, &a).await;
    let upgrade = UpgradeFormatBuilder::new(&fx.catalog, a.clone()).with_format_version(3);
    let plan = upgrade.plan().await.unwrap();
    assert_eq!(table_state(&fx, &a).await, before, "plan() changes nothing");
    assert_eq!((plan.report.from, plan.report.to), (1, 3));
    assert!(plan.report.changed && plan.report.dry_run);
    // Both steps are said: v2's sequence numbers and deletes, v3's vectors and lineage.
    let said = plan.report.changes.join("\n");
    assert!(
        said.contains("sequence numbers") && said.contains("deletion vectors"),
        "{said}"
    );
    let applied = upgrade.apply(plan).await.unwrap();
    let executed = UpgradeFormatBuilder::new(&fx.catalog, b.clone())
        .with_format_version(3)
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome(&applied), outcome(&executed));
    for ident in [&a, &b] {
        let t = fx.load(ident).await;
        assert_eq!(t.metadata().format_version(), FormatVersion::V3);
        assert_eq!(t.metadata().next_row_id(), 0);
        assert_eq!(
            count_and_sum(&fx.catalog, ident).await,
            (30, sum_ids(0, 30))
        );
    }
    // Again: nothing to commit. Downwards: refused, naming both versions.
    let state = table_state(&fx, &a).await;
    let again = UpgradeFormatBuilder::new(&fx.catalog, a.clone())
        .with_format_version(3)
        .execute()
        .await
        .unwrap();
    assert!(!again.changed);
    assert_eq!(table_state(&fx, &a).await, state);
    let e = UpgradeFormatBuilder::new(&fx.catalog, a.clone())
        .with_format_version(2)
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("format v3") && e.contains("no downgrade"), "{e}");
    let e = UpgradeFormatBuilder::new(&fx.catalog, a.clone())
        .with_format_version(4)
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("--format-version"), "{e}");
}

#[tokio::test]
async fn a_v1_table_upgraded_to_v2_takes_row_level_deletes() {
    let fx = Fixture::new().await;
    let ident = table_in_format(&fx, "db.t", "1").await;
    fx.append(&ident, 0, 50).await;
    // v1 has no delete files: the delete is refused by name, nothing written.
    let state = table_state(&fx, &ident).await;
    let e =
        floe::operations::change::delete::DeleteBuilder::new(&fx.catalog, ident.clone(), "id < 7")
            .execute()
            .await;
    match e {
        Err(e) => {
            assert!(e.to_string().contains("format v1"), "{e}");
            assert_eq!(table_state(&fx, &ident).await, state, "nothing left behind");
        }
        Ok(r) => panic!("a row-level delete on v1 must be refused: {r:?}"),
    }
    UpgradeFormatBuilder::new(&fx.catalog, ident.clone())
        .with_format_version(2)
        .execute()
        .await
        .unwrap();
    floe::operations::change::delete::DeleteBuilder::new(&fx.catalog, ident.clone(), "id < 7")
        .execute()
        .await
        .unwrap();
    let kept = (0..50).filter(|i| *i >= 7);
    let expected = (kept.clone().count() as i64, kept.sum::<i64>());
    assert_eq!(count_and_sum(&fx.catalog, &ident).await, expected);
    let v = read_with_python(&fx, "db.t");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(v[reader]["rows"], expected.0, "{reader}: {v}");
        assert_eq!(v[reader]["sum"], expected.1, "{reader}: {v}");
    }
}

/// The row ids of the live rows of `t` (format v3): each data file's inherited first row id
/// plus the positions its deletion vector does not delete.
async fn live_row_ids(t: &floe::iceberg::table::Table) -> Vec<i64> {
    let live = floe::table::manifests::live_files(t).await.unwrap();
    let dvs = floe::table::deletion_vector::DeletionVectors::from_live(&live);
    let mut ids = Vec::new();
    for f in live
        .iter()
        .filter(|f| f.file.content_type() == floe::iceberg::spec::DataContentType::Data)
    {
        let first = f
            .first_row_id
            .expect("every data file of a v3 table has a first row id");
        let deleted = match dvs.of_file(f.file.file_path()) {
            Some(dv) => Some(dv.read(t.file_io()).await.unwrap()),
            None => None,
        };
        for pos in 0..f.file.record_count() {
            if !deleted.as_ref().is_some_and(|d| d.contains(pos)) {
                ids.push(first + pos as i64);
            }
        }
    }
    ids.sort();
    ids
}

/// `_row_id` of every row stored in the live data files of `t` (all must store it).
async fn stored_row_ids(t: &floe::iceberg::table::Table) -> Vec<i64> {
    use arrow::array::{Array, AsArray};
    let live = floe::table::manifests::live_files(t).await.unwrap();
    let mut ids = Vec::new();
    for f in &live {
        let bytes = t
            .file_io()
            .new_input(f.file.file_path())
            .unwrap()
            .read()
            .await
            .unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            let col = b
                .column_by_name("_row_id")
                .expect("a compacted file stores _row_id");
            let col = col.as_primitive::<arrow::datatypes::Int64Type>();
            assert_eq!(col.null_count(), 0);
            ids.extend(col.values().iter().copied());
            let seq = b.column_by_name("_last_updated_sequence_number").unwrap();
            assert_eq!(seq.null_count(), 0, "sequence numbers written too");
        }
    }
    ids.sort();
    ids
}

#[tokio::test]
async fn a_v3_table_floe_writes_keeps_row_lineage_through_appends_deletes_and_compaction() {
    let fx = Fixture::new().await;
    let ident = table_in_format(&fx, "db.v3", "3").await;
    for i in 0..4 {
        fx.append(&ident, i * 25, i * 25 + 25).await;
    }
    let t = fx.load(&ident).await;
    assert_eq!(t.metadata().format_version(), FormatVersion::V3);
    // Spec v3, "Row Lineage": each append advanced next-row-id by its rows, each snapshot
    // starts where the table stood, and the rows' ids are 0..100 with no overlap.
    assert_eq!(t.metadata().next_row_id(), 100);
    let mut firsts: Vec<u64> = t
        .metadata()
        .snapshots()
        .map(|s| s.first_row_id().expect("a v3 snapshot has a first row id"))
        .collect();
    firsts.sort();
    assert_eq!(firsts, vec![0, 25, 50, 75]);
    assert_eq!(live_row_ids(&t).await, (0..100).collect::<Vec<_>>());

    // Deletes: deletion vectors in Puffin, one per data file, merged with the one before.
    for filter in ["id % 7 = 0", "id % 5 = 0"] {
        floe::operations::change::delete::DeleteBuilder::new(&fx.catalog, ident.clone(), filter)
            .execute()
            .await
            .unwrap();
    }
    let t = fx.load(&ident).await;
    assert_eq!(t.metadata().next_row_id(), 100, "a delete adds no row");
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let deletes: Vec<_> = live
        .iter()
        .filter(|f| f.file.content_type() != floe::iceberg::spec::DataContentType::Data)
        .collect();
    assert!(!deletes.is_empty());
    assert!(deletes
        .iter()
        .all(|f| f.file.file_format() == floe::iceberg::spec::DataFileFormat::Puffin));
    let mut referenced: Vec<String> = deletes
        .iter()
        .map(|f| f.file.referenced_data_file().unwrap())
        .collect();
    referenced.sort();
    let n = referenced.len();
    referenced.dedup();
    assert_eq!(
        referenced.len(),
        n,
        "at most one deletion vector per data file"
    );
    let kept: Vec<i64> = (0..100).filter(|i| i % 7 != 0 && i % 5 != 0).collect();
    let expected = (kept.len() as i64, kept.iter().sum::<i64>());
    assert_eq!(count_and_sum(&fx.catalog, &ident).await, expected);
    let ids_before = live_row_ids(&t).await;
    assert_eq!(ids_before.len(), kept.len());

    // Compaction writes every row's lineage into its outputs: the same ids, stored.
    let r = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert!(r.rewritten_files > 0, "{r:?}");
    let t = fx.load(&ident).await;
    assert_eq!(stored_row_ids(&t).await, ids_before);
    assert_eq!(count_and_sum(&fx.catalog, &ident).await, expected);
    let v = read_with_python(&fx, "db.v3");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(v[reader]["rows"], expected.0, "{reader}: {v}");
        assert_eq!(v[reader]["sum"], expected.1, "{reader}: {v}");
    }
}

#[tokio::test]
async fn a_format_version_floe_does_not_know_is_refused_at_create() {
    let fx = Fixture::new().await;
    let ident = table_in_format(&fx, "db.v3", "3").await;
    let t = fx.load(&ident).await;
    let e = fx
        .catalog
        .create_table(NewTable {
            ident: parse_table_ident("db.v9").unwrap(),
            schema: t.metadata().current_schema().as_ref().clone(),
            partition_spec: floe::table::schema::unpartitioned(),
            sort_order: None,
            properties: [("format-version".to_string(), "9".to_string())].into(),
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("format-version"), "{e}");
}

/// `(id, ts, tl)` of every row, the timestamps as nanoseconds since the epoch, read by floe.
async fn nanos(fx: &Fixture, table: &str) -> Vec<(i64, i64, i64)> {
    use arrow::array::{Array, Int64Array};
    let sql = format!(
        "SELECT id, CAST(ts AS BIGINT) AS ts, CAST(tl AS BIGINT) AS tl FROM {table} ORDER BY id"
    );
    let batches = floe::operations::sql::SqlBuilder::new(&fx.catalog, &sql)
        .query()
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in batches {
        let col = |i: usize| {
            b.column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone()
        };
        let (a, t, l) = (col(0), col(1), col(2));
        for r in 0..b.num_rows() {
            out.push((a.value(r), t.value(r), l.value(r)));
        }
    }
    out
}

#[tokio::test]
async fn nanosecond_timestamps_of_format_v3_are_appended_compacted_and_read_to_the_nanosecond() {
    use arrow::array::{Int64Array, TimestampNanosecondArray};
    let fx = Fixture::new().await;
    let schema =
        floe::table::schema::parse_schema("id bigint not null, ts timestamptz_ns, tl timestamp_ns")
            .unwrap();
    let properties = [("format-version".to_string(), "3".to_string())].into();
    let ident = fx
        .create_table_with("db.ns", schema, None, properties)
        .await;
    let base = 1_767_225_600_000_000_000i64; // 2026-01-01T00:00:00Z in ns
    let mut expected = Vec::new();
    for batch in 0..3i64 {
        let t = fx.load(&ident).await;
        let arrow = std::sync::Arc::new(
            floe::iceberg::arrow::schema_to_arrow_schema(t.metadata().current_schema()).unwrap(),
        );
        let ids: Vec<i64> = (batch * 10..batch * 10 + 10).collect();
        // Values no microsecond column could hold: every nanosecond digit differs.
        let ts: Vec<i64> = ids.iter().map(|i| base + i * 1_000_000_007 + 123).collect();
        let tl: Vec<i64> = ids.iter().map(|i| base - i * 999_999_999 - 1).collect();
        let tz = match arrow.field(1).data_type() {
            arrow::datatypes::DataType::Timestamp(_, tz) => tz.clone(),
            other => panic!("ts is {other}"),
        };
        let b = arrow::record_batch::RecordBatch::try_new(
            arrow,
            vec![
                std::sync::Arc::new(Int64Array::from(ids.clone())),
                std::sync::Arc::new(
                    TimestampNanosecondArray::from(ts.clone()).with_timezone_opt(tz),
                ),
                std::sync::Arc::new(TimestampNanosecondArray::from(tl.clone())),
            ],
        )
        .unwrap();
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .execute()
            .await
            .unwrap();
        expected.extend(ids.into_iter().zip(ts).zip(tl).map(|((a, b), c)| (a, b, c)));
    }
    assert_eq!(nanos(&fx, "db.ns").await, expected);
    let r = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("min-input-files", "2")
        .execute()
        .await
        .unwrap();
    assert_eq!((r.rewritten_files, r.added_files), (3, 1), "{r:?}");
    assert_eq!(
        nanos(&fx, "db.ns").await,
        expected,
        "compaction keeps every nanosecond"
    );
    // PyIceberg reads the same rows (DuckDB 1.5.5 reads no nanosecond timestamps at all).
    let v = crate::common::read_catalog_with_readers(fx.warehouse(), "db.ns", "pyiceberg");
    assert_eq!(v["pyiceberg"]["rows"], 30, "{v}");
    assert_eq!(v["pyiceberg"]["sum"], sum_ids(0, 30), "{v}");
    assert!(v.get("duckdb").is_none(), "{v}");
}

/// Past `plan-batch-files` candidates the plan's scan tasks go to a local file, and the run is
/// rewritten and committed batch by batch from it, without scanning the manifests again. On v2
/// (position deletes) and v3 (deletion vectors, row lineage) it
/// leaves what a plan held in memory leaves: the same rows, row ids and files, in every reader.
#[tokio::test]
async fn a_spilled_plan_rewrites_what_a_plan_held_in_memory_rewrites() {
    let fx = Fixture::new().await;
    let kept: Vec<i64> = (0..400).filter(|i| i % 7 != 0 && i % 5 != 0).collect();
    let expected = (kept.len() as i64, kept.iter().sum::<i64>());
    for version in ["2", "3"] {
        let mut runs = Vec::new();
        for (name, batch_files) in [("mem", "100000"), ("spill", "5")] {
            let table = format!("f{version}.{name}");
            let ident = table_in_format(&fx, &table, version).await;
            for i in 0..8 {
                fx.append(&ident, i * 50, i * 50 + 50).await;
            }
            // Position deletes (v2) or deletion vectors (v3), in two rounds (v3 merges the
            // second into the first's vectors).
            for filter in ["id % 7 = 0", "id % 5 = 0"] {
                floe::operations::change::delete::DeleteBuilder::new(
                    &fx.catalog,
                    ident.clone(),
                    filter,
                )
                .execute()
                .await
                .unwrap();
            }
            assert_eq!(count_and_sum(&fx.catalog, &ident).await, expected);
            let ids_before = match version {
                "3" => live_row_ids(&fx.load(&ident).await).await,
                _ => vec![],
            };
            assert_eq!(ids_before.len(), kept.len() * usize::from(version == "3"));

            let m = CompactBuilder::new(&fx.catalog, ident.clone())
                .with_option("plan-batch-files", batch_files)
                .with_option("rewrite-all", "true")
                .execute()
                .await
                .unwrap();
            assert_eq!(
                count_and_sum(&fx.catalog, &ident).await,
                expected,
                "{table}"
            );
            let t = fx.load(&ident).await;
            if version == "3" {
                assert_eq!(
                    stored_row_ids(&t).await,
                    ids_before,
                    "{table}: row lineage kept"
                );
            }
            let v = read_with_python(&fx, &table);
            for reader in ["pyiceberg", "duckdb"] {
                assert_eq!(v[reader]["rows"], expected.0, "{table} {reader}: {v}");
                assert_eq!(v[reader]["sum"], expected.1, "{table} {reader}: {v}");
            }
            runs.push(m);
        }
        let (mem, spill) = (&runs[0], &runs[1]);
        assert_eq!(mem.plan_batches, 1, "{mem:?}");
        assert_eq!(
            spill.plan_batches, 3,
            "8 files in each of 3 days: {spill:?}"
        );
        assert_eq!(spill.commits.len(), 3, "one commit per batch");
        let shape = |m: &floe::operations::compact::CompactMetrics| {
            let mut groups: Vec<(String, usize)> = m
                .plan
                .groups
                .iter()
                .map(|g| (g.partition.clone(), g.input_files))
                .collect();
            groups.sort();
            (
                groups,
                m.rewritten_files,
                m.added_files,
                m.live_files_after,
                m.rows,
                m.removed_delete_files,
            )
        };
        assert_eq!(shape(mem), shape(spill), "v{version}");
    }
}
