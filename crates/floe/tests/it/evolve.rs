//! Partition and schema evolution: new writes take the new spec or schema, compaction rewrites
//! older files into them, and floe, PyIceberg and DuckDB read the same rows before and after.

use arrow::array::Int64Array;
use floe::alter::partition::PartitionEvolution;
use floe::alter::schema::SchemaChange;
use floe::compact::CompactBuilder;
use floe::iceberg::TableIdent;

use crate::common::{count_and_sum, read_with_python, rows, Fixture};

async fn append(fx: &Fixture, ident: &TableIdent, from: i64, to: i64) {
    let b = rows(fx, ident, from, to).await;
    floe::append::append_batches(&fx.catalog, ident, vec![b])
        .await
        .unwrap();
}

/// (spec id, partition path) of every live data file.
async fn live_specs(fx: &Fixture, ident: &TableIdent) -> Vec<i32> {
    let t = fx.load(ident).await;
    floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .iter()
        .map(|f| f.spec_id)
        .collect()
}

/// PyIceberg and DuckDB read the same rows as floe (count, sum of id, content checksum).
async fn readers_agree(fx: &Fixture, ident: &TableIdent, table: &str) {
    let (n, sum) = count_and_sum(&fx.catalog, ident).await;
    let r = read_with_python(fx, table);
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(r[reader]["rows"], n, "{reader}: {r}");
        assert_eq!(r[reader]["sum"].as_i64(), Some(sum), "{reader}: {r}");
    }
    assert_eq!(r["pyiceberg"]["checksum"], r["duckdb"]["checksum"], "{r}");
}

#[tokio::test]
async fn hour_partitions_evolve_to_day_and_compaction_moves_old_files_into_the_new_spec() {
    let fx = Fixture::new().await;
    let ident = fx.table("evo.hours", Some("hour(ts)")).await;
    // 8 commits, each 30 rows in hour k of 3 days: 24 small hour partitions.
    for k in 0..8 {
        append(&fx, &ident, k * 3600, k * 3600 + 30).await;
    }
    let old_spec = fx.load(&ident).await.metadata().default_partition_spec_id();
    let change = PartitionEvolution {
        spec: Some("day(ts)".into()),
        ..Default::default()
    };
    let dry = fx
        .catalog
        .evolve_partition(&ident, &change, true)
        .await
        .unwrap();
    assert!(dry.changed && dry.dry_run, "{dry:?}");
    assert_eq!(
        fx.load(&ident).await.metadata().default_partition_spec_id(),
        old_spec,
        "a dry run commits nothing"
    );
    let r = fx
        .catalog
        .evolve_partition(&ident, &change, false)
        .await
        .unwrap();
    assert_eq!(
        (r.before.as_str(), r.after.as_str()),
        ("hour(ts)", "day(ts)")
    );
    assert_eq!(r.files_in_other_specs, 24);
    assert_ne!(r.spec_id, old_spec);
    // The same spec again changes nothing.
    let again = fx
        .catalog
        .evolve_partition(&ident, &change, false)
        .await
        .unwrap();
    assert!(!again.changed);

    // New writes take the new spec; old files keep theirs; every reader agrees.
    append(&fx, &ident, 100_000, 100_030).await;
    let specs = live_specs(&fx, &ident).await;
    assert_eq!(specs.iter().filter(|s| **s == r.spec_id).count(), 3);
    assert_eq!(specs.iter().filter(|s| **s == old_spec).count(), 24);
    readers_agree(&fx, &ident, "evo.hours").await;

    // Compaction rewrites the old files, grouped by the day they fall in: one file per day.
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(m.plan.groups.len(), 3, "{:?}", m.plan.groups);
    assert!(
        m.plan
            .groups
            .iter()
            .all(|g| g.input_files == 8 && g.partition.starts_with("-> ts_day=")),
        "{:?}",
        m.plan.groups
    );
    let specs = live_specs(&fx, &ident).await;
    assert!(specs.iter().all(|s| *s == r.spec_id), "{specs:?}");
    assert_eq!(specs.len(), 6, "3 compacted days + 3 new small files");
    let (n, _) = count_and_sum(&fx.catalog, &ident).await;
    assert_eq!(n, 8 * 30 + 30);
    readers_agree(&fx, &ident, "evo.hours").await;
    // Rows are in the partition their ts says (a filter on a day prunes to it).
    let day1 = crate::common::count_where(
        &fx.catalog,
        "evo.hours",
        "ts >= TIMESTAMP '2026-01-02 00:00:00' AND ts < TIMESTAMP '2026-01-03 00:00:00'",
    )
    .await;
    assert_eq!(day1, (8 * 30 + 30) / 3);
}

#[tokio::test]
async fn removing_a_bucket_and_adding_fields_keeps_ids_and_reads_the_same() {
    let fx = Fixture::new().await;
    let ident = fx
        .table("evo.buckets", Some("day(ts), bucket(8, id)"))
        .await;
    append(&fx, &ident, 0, 200).await;
    let r = fx
        .catalog
        .evolve_partition(
            &ident,
            &PartitionEvolution {
                remove: vec!["id_bucket".into()],
                add: vec!["truncate(4, name) AS name_prefix".into()],
                ..Default::default()
            },
            false,
        )
        .await
        .unwrap();
    assert_eq!(r.after, "day(ts), truncate(4, name) AS name_prefix");
    let t = fx.load(&ident).await;
    let spec = t.metadata().default_partition_spec();
    let old = t.metadata().partition_spec_by_id(r.spec_id_before).unwrap();
    assert_eq!(spec.fields()[0].field_id, old.fields()[0].field_id);
    append(&fx, &ident, 200, 400).await;
    readers_agree(&fx, &ident, "evo.buckets").await;
    CompactBuilder::new(&fx.catalog, ident.clone())
        .execute()
        .await
        .unwrap();
    assert!(live_specs(&fx, &ident)
        .await
        .iter()
        .all(|s| *s == r.spec_id));
    readers_agree(&fx, &ident, "evo.buckets").await;
    // A refused change names the field and commits nothing.
    let e = fx
        .catalog
        .evolve_partition(
            &ident,
            &PartitionEvolution {
                add: vec!["hour(ts)".into()],
                ..Default::default()
            },
            false,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("hour(ts)") && e.contains("redundant"), "{e}");
    assert_eq!(
        fx.load(&ident).await.metadata().default_partition_spec_id(),
        r.spec_id
    );
}

#[tokio::test]
async fn a_growing_schema_reads_the_same_in_every_reader_before_and_after_compaction() {
    let fx = Fixture::new().await;
    let ident = fx.table("evo.schema", Some("day(ts)")).await;
    append(&fx, &ident, 0, 100).await;
    // A stream grows a column, then renames one.
    let r = fx
        .catalog
        .evolve_schema(
            &ident,
            &[
                SchemaChange::add("n int").unwrap(),
                SchemaChange::add("device string comment 'sender'").unwrap(),
            ],
            false,
        )
        .await
        .unwrap();
    assert!(r.changed);
    assert_eq!(r.applied.len(), 2, "{:?}", r.applied);
    append(&fx, &ident, 100, 200).await;
    let r2 = fx
        .catalog
        .evolve_schema(
            &ident,
            &[
                SchemaChange::set_type("n bigint").unwrap(),
                SchemaChange::rename("name=label").unwrap(),
            ],
            false,
        )
        .await
        .unwrap();
    assert_ne!(r2.schema_id, r.schema_id);
    append(&fx, &ident, 200, 300).await;

    let sum_n = |sql: &'static str| {
        let catalog = &fx.catalog;
        async move {
            let mut out = Vec::new();
            for b in floe::sql::query(catalog, sql).await.unwrap() {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                out.extend((0..a.len()).map(|i| a.value(i)));
            }
            out
        }
    };
    // Old rows read n as null; the renamed column keeps its values in old files.
    let counts = sum_n(
        "SELECT count(n) FROM evo.schema UNION ALL SELECT count(label) FROM evo.schema \
         UNION ALL SELECT count(device) FROM evo.schema",
    )
    .await;
    let mut counts = counts;
    counts.sort();
    assert_eq!(counts, vec![200, 200, 300]);
    readers_agree(&fx, &ident, "evo.schema").await;

    CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    let (n, _) = count_and_sum(&fx.catalog, &ident).await;
    assert_eq!(n, 300);
    readers_agree(&fx, &ident, "evo.schema").await;

    // Refused: a narrowing, a required new column, dropping the partition source.
    let e = fx
        .catalog
        .evolve_schema(&ident, &[SchemaChange::set_type("n int").unwrap()], false)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be promoted"), "{e}");
    let e = fx
        .catalog
        .evolve_schema(
            &ident,
            &[SchemaChange::DropColumn { path: "ts".into() }],
            false,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("partition field 'ts_day'"), "{e}");
}
