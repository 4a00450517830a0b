//! Row-level changes (`floe::operations::change`): upserts by primary key and `delete --where` keep a
//! table equal to a reference model (a map by key fed the same changes) after every commit,
//! read by floe, PyIceberg and DuckDB, and after compaction and expiry; concurrent writers
//! never leave a key live twice; bad requests name the problem.

use floe::operations::{Operation, Query};
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use floe::iceberg::spec::DataContentType;
use floe::iceberg::TableIdent;
use floe::operations::change::delete::{DeleteBuilder, DeleteMode};

use crate::common::{outcome, run_python, table_state, Fixture};

/// A model row: (id, region) -> v.
pub(crate) type Model = BTreeMap<(i64, String), i64>;

pub(crate) const REGIONS: [&str; 3] = ["eu", "us", "ap"];

/// Creates `name` (id bigint, region string, v bigint; primary key id, region), partitioned
/// by region when `partitioned`.
pub(crate) async fn pk_table(fx: &Fixture, name: &str, partitioned: bool) -> TableIdent {
    let schema =
        floe::table::schema::parse_schema("id bigint not null, region string not null, v bigint")
            .unwrap();
    let schema = floe::table::schema::with_primary_key(schema, "id, region").unwrap();
    fx.create_table(name, schema, partitioned.then_some("region"))
        .await
}

/// A batch of `rows` (id, region, v) in the table's Arrow schema.
pub(crate) async fn batch(
    fx: &Fixture,
    ident: &TableIdent,
    rows: &[(i64, String, i64)],
) -> RecordBatch {
    let t = fx.load(ident).await;
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(t.metadata().current_schema()).unwrap(),
    );
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.1.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

/// `n` changes of round `round` over `ids` ids x 3 regions, duplicates inside the batch
/// included (the last one of a key wins); `v` is `round * 1000 + i`.
fn random_changes(rng: &mut Lcg, round: i64, n: i64, ids: u64) -> Vec<(i64, String, i64)> {
    (0..n)
        .map(|i| {
            let id = rng.next(ids) as i64;
            let region = REGIONS[rng.next(3) as usize].to_string();
            (id, region, round * 1000 + i)
        })
        .collect()
}

/// Upserts `rows` into `ident` by its primary key.
async fn upsert(
    fx: &Fixture,
    ident: &TableIdent,
    rows: &[(i64, String, i64)],
) -> floe::operations::append::AppendMetrics {
    let b = batch(fx, ident, rows).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .with_mode(floe::operations::append::AppendMode::Upsert)
        .with_key(None)
        .execute()
        .await
        .unwrap()
}

/// A deterministic pseudo-random sequence (no test depends on a seed it cannot print).
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

pub(crate) fn model_rows(model: &Model) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = model
        .iter()
        .map(|((id, region), v)| vec![id.to_string(), region.clone(), v.to_string()])
        .collect();
    rows.sort();
    rows
}

/// The table's rows as floe's SQL reads them (same text form as the Python readers).
pub(crate) async fn floe_rows(fx: &Fixture, table: &str) -> Vec<Vec<String>> {
    let batches = floe::operations::sql::SqlBuilder::new(
        &fx.catalog,
        format!("SELECT id, region, v FROM {table}"),
    )
    .query()
    .await
    .unwrap();
    let mut rows = Vec::new();
    for b in batches {
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let regions = arrow::compute::cast(b.column(1), &arrow::datatypes::DataType::Utf8).unwrap();
        let regions = regions.as_any().downcast_ref::<StringArray>().unwrap();
        let vs = b.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..b.num_rows() {
            rows.push(vec![
                ids.value(i).to_string(),
                regions.value(i).to_string(),
                vs.value(i).to_string(),
            ]);
        }
    }
    rows.sort();
    rows
}

/// PyIceberg's and DuckDB's rows of `table`.
fn python_rows(fx: &Fixture, table: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let wh = fx.warehouse().display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let out = run_python(
        "tests/interop/read_rows.py",
        &[
            "--catalog-uri",
            &uri,
            "--warehouse",
            &wh,
            "--table",
            table,
            "--columns",
            "id,region,v",
        ],
    );
    let parse = |k: &str| -> Vec<Vec<String>> { serde_json::from_value(out[k].clone()).unwrap() };
    (parse("pyiceberg"), parse("duckdb"))
}

pub(crate) async fn assert_matches_model(fx: &Fixture, table: &str, model: &Model, step: &str) {
    let expected = model_rows(model);
    assert_eq!(floe_rows(fx, table).await, expected, "floe after {step}");
}

pub(crate) fn assert_readers_match_model(fx: &Fixture, table: &str, model: &Model, step: &str) {
    let expected = model_rows(model);
    let (py, duck) = python_rows(fx, table);
    assert_eq!(py, expected, "PyIceberg after {step}");
    assert_eq!(duck, expected, "DuckDB after {step}");
}

/// Position delete files live in the table.
pub(crate) async fn delete_files(fx: &Fixture, ident: &TableIdent) -> usize {
    let t = fx.load(ident).await;
    floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .count()
}

#[tokio::test]
async fn upserts_and_deletes_match_a_reference_model_in_every_reader() {
    for partitioned in [false, true] {
        let fx = Fixture::new().await;
        let name = if partitioned { "db.pk_part" } else { "db.pk" };
        let ident = pk_table(&fx, name, partitioned).await;
        let mut model = Model::new();
        let mut rng = Lcg(if partitioned { 7 } else { 11 });
        for round in 0..8i64 {
            // 150 changes over 200 ids x 3 regions, duplicates inside the batch included:
            // the last one of a key wins.
            let rows = random_changes(&mut rng, round, 150, 200);
            let m = upsert(&fx, &ident, &rows).await;
            let before = model.len();
            let mut replaced = 0u64;
            let mut batch_keys = std::collections::BTreeSet::new();
            for (id, region, v) in &rows {
                batch_keys.insert((*id, region.clone()));
                model.insert((*id, region.clone()), *v);
            }
            // Each key of the batch that was live before replaces one row.
            replaced += (before + batch_keys.len()) as u64 - model.len() as u64;
            assert_eq!(m.rows as usize, batch_keys.len(), "one row per key written");
            assert_eq!(m.duplicate_rows as usize, rows.len() - batch_keys.len());
            assert_eq!(m.replaced_rows, replaced, "round {round}: rows replaced");
            assert_matches_model(&fx, name, &model, &format!("upsert {round}")).await;

            if round % 3 == 2 {
                // A delete that spans partitions and reads the non-key column.
                let cut = round * 1000 + 40;
                let filter = format!("v % 5 = 0 OR (region = 'eu' AND v < {cut})");
                let d = DeleteBuilder::new(&fx.catalog, ident.clone(), &filter)
                    .execute()
                    .await
                    .unwrap();
                let gone: Vec<_> = model
                    .iter()
                    .filter(|((_, r), v)| *v % 5 == 0 || (r == "eu" && **v < cut))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &gone {
                    model.remove(k);
                }
                assert_eq!(d.rows_deleted as usize, gone.len(), "{filter}");
                assert_eq!(d.mode, DeleteMode::MergeOnRead);
                assert_matches_model(&fx, name, &model, &format!("delete {round}")).await;
            }
        }
        assert!(
            delete_files(&fx, &ident).await > 0,
            "merge-on-read wrote deletes"
        );
        assert_readers_match_model(&fx, name, &model, "the last change");

        // Compaction applies the deletes and drops the delete files no live file needs.
        let c = floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
            .with_option("rewrite-all", "true")
            .execute()
            .await
            .unwrap();
        assert!(c.rewritten_files > 0, "{c:?}");
        assert_eq!(
            delete_files(&fx, &ident).await,
            0,
            "deletes folded in: {c:?}"
        );
        assert_matches_model(&fx, name, &model, "compaction").await;
        assert_readers_match_model(&fx, name, &model, "compaction");

        // Expiry of everything but the current snapshot changes no row.
        floe::operations::expire::ExpireBuilder::new(&fx.catalog, ident.clone())
            .with_older_than_age(std::time::Duration::ZERO)
            .with_retain_last(1)
            .execute()
            .await
            .unwrap();
        assert_matches_model(&fx, name, &model, "expiry").await;
        assert_readers_match_model(&fx, name, &model, "expiry");
    }
}

#[tokio::test]
async fn an_upsert_planned_before_a_compaction_finds_the_rows_again() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "db.race", false).await;
    let mut model = Model::new();
    for round in 0..6i64 {
        let rows: Vec<_> = (0..50)
            .map(|i| (round * 50 + i, "eu".to_string(), i))
            .collect();
        let b = batch(&fx, &ident, &rows).await;
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .execute()
            .await
            .unwrap();
        for (id, r, v) in rows {
            model.insert((id, r), v);
        }
    }
    // The upsert locates its rows on this table...
    let stale = fx.load(&ident).await;
    let mut keys = floe::operations::change::keys::KeyIndex::for_table(&stale, None).unwrap();
    let changes: Vec<_> = (0..300)
        .step_by(7)
        .map(|id| (id, "eu".to_string(), 7777))
        .collect();
    let b = batch(&fx, &ident, &changes).await;
    keys.observe(&b).unwrap();
    let keys = Arc::new(keys);
    let find = |t: floe::iceberg::table::Table| {
        let keys = keys.clone();
        async move {
            let tasks = floe::operations::change::locate::candidates(&t, keys.prune()).await?;
            floe::operations::change::locate::locate(
                &t,
                tasks,
                &keys.field_ids,
                keys.matcher(),
                None,
            )
            .await
        }
    };
    let first = find(stale.clone()).await.unwrap();
    assert_eq!(
        first.0.iter().map(|m| m.positions.len()).sum::<usize>(),
        changes.len()
    );
    // ...then a compaction rewrites every file it located rows in...
    let c = floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    assert_eq!(c.rewritten_files, 6);
    // ...and the commit, started on the stale table, locates again on the new one.
    let files = floe::operations::append::write_files(&stale, vec![b], &Default::default())
        .await
        .unwrap();
    let delta = floe::operations::change::commit_row_delta(
        &fx.catalog,
        &ident,
        stale,
        files,
        Some(first),
        find,
    )
    .await
    .unwrap();
    // Located on the compacted table: one file read, every delete names a live file.
    assert_eq!(delta.searched.files, 1, "{delta:?}");
    assert_eq!(delta.deletes.rows as usize, changes.len());
    let live = floe::table::manifests::live_files(&fx.load(&ident).await)
        .await
        .unwrap();
    let data: std::collections::BTreeSet<String> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| f.file.file_path().to_string())
        .collect();
    for f in &delta.deletes.delete_files {
        let target = f.referenced_data_file().expect("one target");
        assert!(data.contains(&target), "{target} is not live");
    }
    for (id, r, v) in changes {
        model.insert((id, r), v);
    }
    assert_matches_model(&fx, "db.race", &model, "upsert after compaction").await;
    assert_readers_match_model(&fx, "db.race", &model, "upsert after compaction");
}

#[tokio::test]
async fn concurrent_upserts_of_the_same_keys_leave_one_row_per_key() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "db.conc", true).await;
    let other = fx.second_connection().await;
    let rows = |v: i64| -> Vec<(i64, String, i64)> {
        (0..120)
            .map(|id| (id, REGIONS[(id % 3) as usize].to_string(), v))
            .collect()
    };
    for round in 0..4 {
        let a = batch(&fx, &ident, &rows(round * 10 + 1)).await;
        let b = batch(&fx, &ident, &rows(round * 10 + 2)).await;
        let (ra, rb) = tokio::join!(
            floe::operations::append::AppendBuilder::from_batches(
                &fx.catalog,
                ident.clone(),
                vec![a]
            )
            .with_mode(floe::operations::append::AppendMode::Upsert)
            .with_key(None)
            .execute(),
            floe::operations::append::AppendBuilder::from_batches(&other, ident.clone(), vec![b])
                .with_mode(floe::operations::append::AppendMode::Upsert)
                .with_key(None)
                .execute(),
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let got = floe_rows(&fx, "db.conc").await;
        assert_eq!(got.len(), 120, "round {round}: one live row per key");
        // The later commit replaced every row of the earlier one: one writer's values only.
        let values: std::collections::BTreeSet<&String> = got.iter().map(|r| &r[2]).collect();
        assert_eq!(
            values.len(),
            1,
            "round {round}: {values:?} ({ra:?} / {rb:?})"
        );
    }
    let mut model = Model::new();
    let last = floe_rows(&fx, "db.conc").await;
    for r in &last {
        model.insert((r[0].parse().unwrap(), r[1].clone()), r[2].parse().unwrap());
    }
    assert_readers_match_model(&fx, "db.conc", &model, "concurrent upserts");
}

#[tokio::test]
async fn copy_on_write_deletes_rewrite_files_and_whole_file_deletes_write_nothing() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "db.cow", true).await;
    fx.set_property(&ident, "write.delete.mode", "copy-on-write")
        .await;
    let mut model = Model::new();
    for round in 0..3i64 {
        let rows: Vec<_> = (0..90)
            .map(|id| (round * 90 + id, REGIONS[(id % 3) as usize].to_string(), id))
            .collect();
        let b = batch(&fx, &ident, &rows).await;
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .execute()
            .await
            .unwrap();
        for (id, r, v) in rows {
            model.insert((id, r), v);
        }
    }
    let d = DeleteBuilder::new(&fx.catalog, ident.clone(), "v < 30 AND region <> 'ap'")
        .execute()
        .await
        .unwrap();
    model.retain(|(_, r), v| !(*v < 30 && r != "ap"));
    assert_eq!(d.mode, DeleteMode::CopyOnWrite);
    assert_eq!(d.rows_deleted, 60);
    assert_eq!(d.rewritten_data_files, 6, "{d:?}");
    assert_eq!(d.position_delete_files, 0);
    assert_eq!(delete_files(&fx, &ident).await, 0);
    assert!(d.pruned, "the filter is in the pruning grammar");
    assert_matches_model(&fx, "db.cow", &model, "copy-on-write delete").await;

    // Every row of the 'ap' partition: whole files leave, nothing is written.
    let d = DeleteBuilder::new(&fx.catalog, ident.clone(), "region = 'ap'")
        .with_mode(Some(DeleteMode::MergeOnRead))
        .execute()
        .await
        .unwrap();
    model.retain(|(_, r), _| r != "ap");
    assert_eq!(d.removed_data_files, 3, "{d:?}");
    assert_eq!(d.position_delete_files, 0);
    assert_eq!(d.bytes_written, 0);
    assert_eq!(d.rows_deleted, 90);
    // Files of other partitions were pruned, not read.
    assert_eq!(d.files_scanned, 3, "{d:?}");
    assert_matches_model(&fx, "db.cow", &model, "whole-file delete").await;
    assert_readers_match_model(&fx, "db.cow", &model, "deletes");

    // Nothing matches: no snapshot.
    let before = fx.load(&ident).await.metadata().current_snapshot_id();
    let d = DeleteBuilder::new(&fx.catalog, ident.clone(), "id < 0")
        .execute()
        .await
        .unwrap();
    assert_eq!(d.snapshot_id, None);
    assert_eq!(
        fx.load(&ident).await.metadata().current_snapshot_id(),
        before
    );
}

#[tokio::test]
async fn bad_requests_name_the_problem_and_change_nothing() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "db.bad", false).await;
    let b = batch(&fx, &ident, &[(1, "eu".into(), 1)]).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    let before = fx
        .load(&ident)
        .await
        .metadata_location()
        .map(str::to_string);
    for (filter, needle) in [
        ("nope = 1", "nope"),
        ("v + 1", "not a condition"),
        ("", "empty filter"),
        ("v = (SELECT 1)", "--where"),
    ] {
        let e = DeleteBuilder::new(&fx.catalog, ident.clone(), filter)
            .execute()
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{filter}: {e}");
    }
    // No primary key, no --key: refused naming the remedy.
    let plain = fx.table("db.plain", None).await;
    let pb = fx.batch(&plain, 0, 3).await;
    let e = floe::operations::append::AppendBuilder::from_batches(
        &fx.catalog,
        plain.clone(),
        vec![pb.clone()],
    )
    .with_mode(floe::operations::append::AppendMode::Upsert)
    .with_key(None)
    .execute()
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("primary key") && e.contains("--key"), "{e}");
    // An explicit key that is not a column.
    let e =
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, plain.clone(), vec![pb])
            .with_mode(floe::operations::append::AppendMode::Upsert)
            .with_key(Some(vec!["zz".into()]))
            .execute()
            .await
            .unwrap_err()
            .to_string();
    assert!(e.contains("zz"), "{e}");
    assert_eq!(
        fx.load(&ident)
            .await
            .metadata_location()
            .map(str::to_string),
        before
    );
}

/// An unpartitioned table of keys 0..60 upserted over three rounds, then an equality delete
/// of keys 10..50 (as a Flink upsert sink writes them), then a newer append of key 45 that it
/// must not delete. Returns the table and its rows.
async fn equality_deleted(fx: &Fixture, name: &str) -> (TableIdent, Model) {
    let ident = pk_table(fx, name, false).await;
    let mut model = Model::new();
    for round in 0..3i64 {
        let rows: Vec<_> = (0..60)
            .map(|id| (id, REGIONS[(id % 3) as usize].to_string(), round * 100 + id))
            .collect();
        let b = batch(fx, &ident, &rows[(round as usize * 20)..]).await;
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .with_mode(floe::operations::append::AppendMode::Upsert)
            .with_key(None)
            .execute()
            .await
            .unwrap();
        for (id, r, v) in &rows[(round as usize * 20)..] {
            model.insert((*id, r.clone()), *v);
        }
    }
    // An equality delete of keys 10..50 (as a Flink upsert sink writes them), then a newer
    // append of key 45 that it must not delete.
    let t = fx.load(&ident).await;
    let gone: Vec<_> = (10..50)
        .map(|id| (id, REGIONS[(id % 3) as usize].to_string(), 0))
        .collect();
    let eq_rows = batch(fx, &ident, &gone).await;
    let eq = floe::write::deletes::write_equality_deletes(&t, &["id", "region"], vec![eq_rows])
        .await
        .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], eq))
        .await
        .unwrap();
    for (id, r, _) in &gone {
        model.remove(&(*id, r.clone()));
    }
    let again = vec![(45, REGIONS[0].to_string(), 4545)];
    let b = batch(fx, &ident, &again).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    model.insert((45, REGIONS[0].to_string()), 4545);
    (ident, model)
}

#[tokio::test]
async fn equality_deletes_convert_to_position_deletes_that_every_reader_applies() {
    let fx = Fixture::new().await;
    let (ident, model) = equality_deleted(&fx, "db.eq").await;
    assert_matches_model(&fx, "db.eq", &model, "equality deletes").await;

    let dry = floe::operations::change::convert::ConvertBuilder::new(&fx.catalog, ident.clone())
        .plan()
        .await
        .unwrap()
        .report;
    assert_eq!(dry.equality_delete_files, 1, "{dry:?}");
    assert_eq!(dry.snapshot_id, None);
    let m = floe::operations::change::convert::ConvertBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap();
    // Keys 10..50, each live once (rows the upserts replaced are skipped, and the newer
    // row of key 45 is not touched).
    assert_eq!(m.equality_delete_files, 1, "{m:?}");
    assert_eq!(m.positions, 40, "{m:?}");
    assert!(m.position_delete_files >= 1 && m.snapshot_id.is_some());
    let live = floe::table::manifests::live_files(&fx.load(&ident).await)
        .await
        .unwrap();
    assert!(!live
        .iter()
        .any(|f| f.file.content_type() == DataContentType::EqualityDeletes));
    assert_matches_model(&fx, "db.eq", &model, "conversion").await;
    // PyIceberg 0.12 cannot read equality deletes: it reads the converted table.
    assert_readers_match_model(&fx, "db.eq", &model, "conversion");
}

#[tokio::test]
async fn long_string_keys_and_rows_moving_partition_stay_one_row_per_key() {
    let fx = Fixture::new().await;
    // Keys longer than the 16-character bounds of the metrics, sharing a long prefix; the
    // partition (day of ts) is not part of the key, so an upsert moves rows between partitions.
    let schema =
        floe::table::schema::parse_schema("k string not null, ts timestamp, v bigint").unwrap();
    let schema = floe::table::schema::with_primary_key(schema, "k").unwrap();
    let ident = fx.create_table("db.long", schema, Some("day(ts)")).await;
    let t = fx.load(&ident).await;
    let arrow_schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(t.metadata().current_schema()).unwrap(),
    );
    let make = |round: i64| {
        let keys: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    "customer-account-identifier-{:06}-{}",
                    i * 7 % 40,
                    "z".repeat(i as usize % 5)
                )
            })
            .collect();
        let day = 1_790_000_000_000_000i64 + round * 86_400_000_000;
        RecordBatch::try_new(
            arrow_schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(keys.iter())),
                Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![
                    day;
                    keys.len(
                    )
                ])),
                Arc::new(Int64Array::from(vec![round; keys.len()])),
            ],
        )
        .unwrap()
    };
    for round in 0..3 {
        let m = floe::operations::append::AppendBuilder::from_batches(
            &fx.catalog,
            ident.clone(),
            vec![make(round)],
        )
        .with_mode(floe::operations::append::AppendMode::Upsert)
        .with_key(None)
        .execute()
        .await
        .unwrap();
        assert_eq!(m.replaced_rows, if round == 0 { 0 } else { 40 }, "{m:?}");
    }
    let b = floe::operations::sql::SqlBuilder::new(
        &fx.catalog,
        "SELECT count(*) AS n, count(DISTINCT k) AS d, min(v) AS lo FROM db.long",
    )
    .query()
    .await
    .unwrap();
    let col = |i: usize| {
        b[0].column(i)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0)
    };
    assert_eq!(
        (col(0), col(1), col(2)),
        (40, 40, 2),
        "every key once, from the last round"
    );
}

#[tokio::test]
async fn deletes_of_rows_in_an_older_partition_spec_go_in_that_spec() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "db.evolved", true).await;
    let mut model = Model::new();
    let mut upsert = |rows: Vec<(i64, String, i64)>| {
        for (id, r, v) in &rows {
            model.insert((*id, r.clone()), *v);
        }
        rows
    };
    let first = upsert(
        (0..90)
            .map(|id| (id, REGIONS[(id % 3) as usize].to_string(), id))
            .collect(),
    );
    let b = batch(&fx, &ident, &first).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .with_mode(floe::operations::append::AppendMode::Upsert)
        .with_key(None)
        .execute()
        .await
        .unwrap();
    // The spec changes from identity(region) to bucket(4, id): old files keep spec 0.
    let change = floe::operations::alter::partition::PartitionEvolution {
        spec: Some("bucket(4, id)".into()),
        ..Default::default()
    };
    floe::operations::alter::partition::AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(change)
        .execute()
        .await
        .unwrap();
    let second = upsert(
        (0..90)
            .step_by(2)
            .map(|id| (id, REGIONS[(id % 3) as usize].to_string(), 1000 + id))
            .collect(),
    );
    let b = batch(&fx, &ident, &second).await;
    let m =
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .with_mode(floe::operations::append::AppendMode::Upsert)
            .with_key(None)
            .execute()
            .await
            .unwrap();
    assert_eq!(m.replaced_rows, 45, "{m:?}");
    let d = DeleteBuilder::new(&fx.catalog, ident.clone(), "v < 30")
        .execute()
        .await
        .unwrap();
    model.retain(|_, v| *v >= 30);
    assert!(d.rows_deleted > 0);
    // Every position delete file sits in the spec of the data files it names.
    let t = fx.load(&ident).await;
    let live = floe::table::manifests::live_files(&t).await.unwrap();
    let spec_of: std::collections::HashMap<&str, i32> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| (f.file.file_path(), f.spec_id))
        .collect();
    let mut checked = 0;
    for f in live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
    {
        if let Some(target) = f.file.referenced_data_file() {
            assert_eq!(Some(&f.spec_id), spec_of.get(target.as_str()), "{target}");
            checked += 1;
        }
    }
    assert!(checked > 0);
    assert_matches_model(&fx, "db.evolved", &model, "upserts across specs").await;
    assert_readers_match_model(&fx, "db.evolved", &model, "upserts across specs");
}

/// Writes `rows` (id, f double, g float) as one data file of `ident`; `nan_counts` false
/// commits it without `nan_value_counts` (as a writer that keeps none does).
async fn float_file(fx: &Fixture, ident: &TableIdent, rows: &[(i64, f64)], nan_counts: bool) {
    use arrow::array::{Float32Array, Float64Array};
    use floe::iceberg::spec::DataFileBuilder;
    let t = fx.load(ident).await;
    let schema = Arc::new(
        floe::iceberg::arrow::schema_to_arrow_schema(t.metadata().current_schema()).unwrap(),
    );
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Float32Array::from_iter_values(
                rows.iter().map(|r| r.1 as f32),
            )),
        ],
    )
    .unwrap();
    let mut w = floe::write::TableWriter::new(&t, &floe::write::WriteOptions::default())
        .await
        .unwrap();
    w.write(b).await.unwrap();
    let mut files = w.close().await.unwrap();
    if !nan_counts {
        files = files
            .into_iter()
            .map(|f| {
                assert!(!f.nan_value_counts().is_empty(), "floe keeps NaN counts");
                DataFileBuilder::default()
                    .content(f.content_type())
                    .file_path(f.file_path().to_string())
                    .file_format(f.file_format())
                    .partition(f.partition().clone())
                    .record_count(f.record_count())
                    .file_size_in_bytes(f.file_size_in_bytes())
                    .value_counts(f.value_counts().clone())
                    .null_value_counts(f.null_value_counts().clone())
                    .lower_bounds(f.lower_bounds().clone())
                    .upper_bounds(f.upper_bounds().clone())
                    .build()
                    .unwrap()
            })
            .collect();
    }
    floe::commit::Committer::new(&fx.catalog, ident)
        .commit(floe::commit::SnapshotUpdate::append(files))
        .await
        .unwrap();
}

#[tokio::test]
async fn deletes_and_compactions_on_floats_select_the_rows_sql_selects_nan_included() {
    let fx = Fixture::new().await;
    let schema =
        floe::table::schema::parse_schema("id bigint not null, f double, g float").unwrap();
    let ident = fx.create_table("db.nan", schema, None).await;
    let nan = f64::NAN;
    // Files: numbers only; NaN only (no bounds); a number and NaNs (bounds 0.5); the same
    // without NaN counts; zeros of both signs.
    float_file(&fx, &ident, &[(1, 1.0), (2, 2.0)], true).await;
    float_file(&fx, &ident, &[(3, nan), (4, nan)], true).await;
    float_file(&fx, &ident, &[(5, 0.5), (6, nan)], true).await;
    float_file(&fx, &ident, &[(7, 0.5), (8, nan)], false).await;
    float_file(&fx, &ident, &[(9, -0.0), (10, 0.0)], true).await;
    for col in ["f", "g"] {
        for cond in [
            "> 1.5",
            ">= 2",
            "> 0.5",
            "!= 2",
            "<> 1",
            "< 1.5",
            "<= 0.5",
            "= 'NaN'",
            ">= 'NaN'",
            "<= 'NaN'",
            "< 'NaN'",
            "> 'Infinity'",
            ">= 'Infinity'",
            "< 0",
            "> -0.0",
            "= 0.1",
            "> 0.1",
            "IN (2, 'NaN')",
            "IN ('NaN')",
        ] {
            let filter = format!("{col} {cond}");
            let want = crate::common::count_where(&fx.catalog, "db.nan", &filter).await as u64;
            let m = DeleteBuilder::new(&fx.catalog, ident.clone(), &filter)
                .plan()
                .await
                .unwrap()
                .report;
            assert_eq!(m.rows_deleted, want, "delete --where \"{filter}\": {m:?}");
        }
    }
    let isnan = crate::common::count_where(&fx.catalog, "db.nan", "isnan(f)").await as u64;
    assert_eq!(isnan, 4);
    let m = DeleteBuilder::new(&fx.catalog, ident.clone(), "isnan(f)")
        .plan()
        .await
        .unwrap()
        .report;
    assert_eq!(m.rows_deleted, 4, "{m:?}");

    // compact --where keeps the files holding a matching row: the NaN files, and the file
    // without NaN counts (it may hold one).
    let m = floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_where(Some("f > 1.5".into()))
        .with_option("rewrite-all", "true")
        .plan()
        .await
        .unwrap();
    assert_eq!(m.report.plan.input_files(), 4, "{:?}", m.report.plan);

    // The delete itself removes exactly those rows.
    let before = crate::common::count_where(&fx.catalog, "db.nan", "true").await;
    let m = DeleteBuilder::new(&fx.catalog, ident.clone(), "f > 1.5")
        .execute()
        .await
        .unwrap();
    assert_eq!(m.rows_deleted, 5, "{m:?}");
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.nan", "true").await,
        before - 5
    );
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.nan", "f > 1.5").await,
        0
    );
}

#[tokio::test]
async fn time_functions_in_a_delete_mean_one_instant_recorded_in_the_snapshot() {
    let fx = Fixture::new().await;
    let ident = fx.table("db.ret", Some("day(ts)")).await;
    fx.append(&ident, 0, 30).await;
    // Rows of 2026-01-01..03.
    for filter in [
        "ts < now() - interval '30 days'",
        "ts < current_timestamp - interval '1 day'",
        "ts < current_timestamp()",
        "ts < current_date",
        "ts < current_date() - interval '7 days'",
        "ts < date_trunc('day', now())",
        "ts < date_trunc('day', now() - interval '30 days') AND id >= 10",
        "ts >= now()",
        "ts > '2026-01-02' AND ts < now()",
    ] {
        let want = crate::common::count_where(&fx.catalog, "db.ret", filter).await;
        let m = DeleteBuilder::new(&fx.catalog, ident.clone(), filter)
            .plan()
            .await
            .unwrap_or_else(|e| panic!("delete --where \"{filter}\": {e}"))
            .report;
        assert_eq!(m.rows_deleted, want as u64, "{filter}: {m:?}");
        assert!(m.pruned, "{filter}: the time condition prunes files");
        assert!(m.now.is_some(), "{filter}: {m:?}");
    }
    // compact --where takes them too.
    floe::operations::compact::CompactBuilder::new(&fx.catalog, ident.clone())
        .with_where(Some("ts < now() - interval '30 days'".into()))
        .plan()
        .await
        .unwrap();

    let started = chrono::Utc::now();
    let m = DeleteBuilder::new(
        &fx.catalog,
        ident.clone(),
        "ts < now() - interval '30 days' AND id < 12",
    )
    .execute()
    .await
    .unwrap();
    assert_eq!(m.rows_deleted, 12, "{m:?}");
    let t = fx.load(&ident).await;
    let summary = &t
        .metadata()
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    let recorded = summary
        .get("floe.delete.now")
        .expect("the instant is recorded");
    assert_eq!(Some(recorded), m.now.as_ref());
    let at = chrono::DateTime::parse_from_rfc3339(recorded).unwrap();
    assert!(at >= started - chrono::Duration::seconds(1) && at <= chrono::Utc::now());
    assert!(recorded.ends_with('Z') && recorded.len() == "2026-12-02T03:20:00.123456Z".len());
    // A delete without a time function records none.
    DeleteBuilder::new(&fx.catalog, ident.clone(), "id = 20")
        .execute()
        .await
        .unwrap();
    let t = fx.load(&ident).await;
    let summary = &t
        .metadata()
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert!(!summary.contains_key("floe.delete.now"), "{summary:?}");
}

#[tokio::test]
async fn counts_and_position_deletes_skip_rows_an_equality_delete_removed() {
    let fx = Fixture::new().await;
    let ident = pk_table(&fx, "db.eqlive", false).await;
    let rows: Vec<_> = (0..10)
        .map(|id| (id, REGIONS[(id % 3) as usize].to_string(), id))
        .collect();
    let b = batch(&fx, &ident, &rows).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    // Another writer's equality delete of keys 0..5.
    let t = fx.load(&ident).await;
    let eq_rows = batch(&fx, &ident, &rows[..5]).await;
    let eq = floe::write::deletes::write_equality_deletes(&t, &["id", "region"], vec![eq_rows])
        .await
        .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], eq))
        .await
        .unwrap();

    // One deleted row (4) and one live row (6).
    let filter = "id IN (4, 6)";
    let live = crate::common::count_where(&fx.catalog, "db.eqlive", filter).await;
    assert_eq!(live, 1);
    let dry = DeleteBuilder::new(&fx.catalog, ident.clone(), filter)
        .plan()
        .await
        .unwrap()
        .report;
    assert_eq!(dry.rows_deleted, 1, "{dry:?}");
    let m = DeleteBuilder::new(&fx.catalog, ident.clone(), filter)
        .execute()
        .await
        .unwrap();
    assert_eq!(m.rows_deleted, 1, "{m:?}");
    assert_eq!(m.position_delete_files, 1, "{m:?}");
    let t = fx.load(&ident).await;
    let positions: u64 = floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .map(|f| f.file.record_count())
        .sum();
    assert_eq!(positions, 1, "a position delete names a row already gone");
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.eqlive", "true").await,
        4
    );

    // Every live row of the file selected (5, 7, 8, 9; 6 deleted by position, 0..5 by
    // equality): the file leaves the table.
    let m = DeleteBuilder::new(&fx.catalog, ident.clone(), "id >= 3")
        .execute()
        .await
        .unwrap();
    assert_eq!(m.rows_deleted, 4, "{m:?}");
    assert_eq!(m.removed_data_files, 1, "{m:?}");
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.eqlive", "true").await,
        0
    );

    // An upsert replaces live rows only.
    let ident = pk_table(&fx, "db.equp", false).await;
    let b = batch(&fx, &ident, &rows).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .execute()
        .await
        .unwrap();
    let t = fx.load(&ident).await;
    let eq_rows = batch(&fx, &ident, &rows[..5]).await;
    let eq = floe::write::deletes::write_equality_deletes(&t, &["id", "region"], vec![eq_rows])
        .await
        .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], eq))
        .await
        .unwrap();
    let again: Vec<_> = [3i64, 4, 8]
        .iter()
        .map(|&id| (id, REGIONS[(id % 3) as usize].to_string(), 100 + id))
        .collect();
    let b = batch(&fx, &ident, &again).await;
    let m =
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .with_mode(floe::operations::append::AppendMode::Upsert)
            .with_key(None)
            .execute()
            .await
            .unwrap();
    assert_eq!(m.replaced_rows, 1, "{m:?}");
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.equp", "true").await,
        7
    );
}

/// Two tables of the same rows (ids 0..120, three regions, v = id % 60), partitioned or not.
async fn twin_tables(fx: &Fixture, names: [&str; 2], partitioned: bool) -> [TableIdent; 2] {
    let mut out = vec![];
    for name in names {
        let ident = pk_table(fx, name, partitioned).await;
        for round in 0..2i64 {
            let rows: Vec<_> = (0..60)
                .map(|id| (round * 60 + id, REGIONS[(id % 3) as usize].to_string(), id))
                .collect();
            let b = batch(fx, &ident, &rows).await;
            floe::operations::append::AppendBuilder::from_batches(
                &fx.catalog,
                ident.clone(),
                vec![b],
            )
            .execute()
            .await
            .unwrap();
        }
        out.push(ident);
    }
    out.try_into().unwrap()
}

#[tokio::test]
async fn a_delete_plan_changes_nothing_and_applying_it_is_executing() {
    let fx = Fixture::new().await;
    for (mode, suffix) in [
        (DeleteMode::MergeOnRead, "mor"),
        (DeleteMode::CopyOnWrite, "cow"),
    ] {
        let names = [format!("db.pa_{suffix}"), format!("db.pb_{suffix}")];
        let [a, b] = twin_tables(&fx, [&names[0], &names[1]], true).await;
        let filter = "v < 20 AND region <> 'ap'";
        let builder = DeleteBuilder::new(&fx.catalog, a.clone(), filter).with_mode(Some(mode));
        let before = table_state(&fx, &a).await;
        let plan = builder.plan().await.unwrap();
        assert!(plan.report.dry_run && plan.report.snapshot_id.is_none());
        assert_eq!(plan.report.rows_deleted, 28, "{mode:?}: {:?}", plan.report);
        assert_eq!(
            table_state(&fx, &a).await,
            before,
            "{mode:?}: plan() wrote, deleted or committed"
        );
        let planned = plan.report.clone();
        let applied = builder.apply(plan).await.unwrap();
        assert!(
            !applied.dry_run && applied.snapshot_id.is_some(),
            "{applied:?}"
        );
        assert_eq!(applied.rows_deleted, planned.rows_deleted);
        let executed = DeleteBuilder::new(&fx.catalog, b.clone(), filter)
            .with_mode(Some(mode))
            .execute()
            .await
            .unwrap();
        assert_eq!(outcome(&applied), outcome(&executed), "{mode:?}");
        assert_eq!(
            floe_rows(&fx, &names[0]).await,
            floe_rows(&fx, &names[1]).await,
            "{mode:?}"
        );
        assert_eq!(
            crate::common::count_where(&fx.catalog, &names[0], filter).await,
            0
        );
    }
}

#[tokio::test]
async fn a_conversion_plan_changes_nothing_and_applying_it_is_executing() {
    let fx = Fixture::new().await;
    let (a, model) = equality_deleted(&fx, "db.eqa").await;
    let (b, _) = equality_deleted(&fx, "db.eqb").await;
    let builder = floe::operations::change::convert::ConvertBuilder::new(&fx.catalog, a.clone());
    let before = table_state(&fx, &a).await;
    let plan = builder.plan().await.unwrap();
    assert!(plan.report.dry_run && plan.report.snapshot_id.is_none());
    assert_eq!(plan.report.positions, 40, "{:?}", plan.report);
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
    let executed = floe::operations::change::convert::ConvertBuilder::new(&fx.catalog, b.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome(&applied), outcome(&executed));
    assert_matches_model(&fx, "db.eqa", &model, "applied conversion").await;
    assert_matches_model(&fx, "db.eqb", &model, "executed conversion").await;
}

/// `write.merge.mode` (v2) or `write.update.mode` (v3) = copy-on-write: each upsert rewrites
/// the data files holding replaced keys in the same `overwrite` commit as the new rows, so the
/// table never has a delete file, and its rows equal the reference model in floe, PyIceberg
/// and DuckDB.
#[tokio::test]
async fn copy_on_write_upserts_match_the_reference_model_and_write_no_delete_file() {
    for (format, key, partitioned) in [
        ("2", "write.merge.mode", true),
        ("3", "write.update.mode", false),
    ] {
        let fx = Fixture::new().await;
        let name = format!("db.cow_v{format}");
        let schema = floe::table::schema::parse_schema(
            "id bigint not null, region string not null, v bigint",
        )
        .unwrap();
        let schema = floe::table::schema::with_primary_key(schema, "id, region").unwrap();
        let props = std::collections::HashMap::from([
            ("format-version".to_string(), format.to_string()),
            (key.to_string(), "copy-on-write".to_string()),
        ]);
        let ident = fx
            .create_table_with(&name, schema, partitioned.then_some("region"), props)
            .await;
        let mut model = Model::new();
        let mut rng = Lcg(if partitioned { 5 } else { 9 });
        for round in 0..6i64 {
            let rows = random_changes(&mut rng, round, 120, 150);
            let m = upsert(&fx, &ident, &rows).await;
            let before = model.len();
            let keys: std::collections::BTreeSet<_> =
                rows.iter().map(|(id, r, _)| (*id, r.clone())).collect();
            for (id, region, v) in &rows {
                model.insert((*id, region.clone()), *v);
            }
            let replaced = (before + keys.len() - model.len()) as u64;
            assert_eq!(m.replaced_rows, replaced, "v{format} round {round}");
            let step = format!("v{format} copy-on-write upsert {round}");
            assert_matches_model(&fx, &name, &model, &step).await;
            assert_eq!(delete_files(&fx, &ident).await, 0, "{step}: no delete file");
            let t = fx.load(&ident).await;
            let op = t
                .metadata()
                .current_snapshot()
                .unwrap()
                .summary()
                .operation
                .clone();
            let want = if replaced > 0 {
                floe::iceberg::spec::Operation::Overwrite
            } else {
                floe::iceberg::spec::Operation::Append
            };
            assert_eq!(op, want, "{step}");
        }
        assert_readers_match_model(&fx, &name, &model, &format!("v{format} copy-on-write"));
    }
}
