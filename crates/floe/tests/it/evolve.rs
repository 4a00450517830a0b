//! Partition and schema evolution: new writes take the new spec or schema, compaction rewrites
//! older files into them, and floe, PyIceberg and DuckDB read the same rows before and after.

use arrow::array::Int64Array;
use floe::base::cost::Costed;
use floe::iceberg::TableIdent;
use floe::operations::alter::partition::{AlterPartitionBuilder, PartitionEvolution};
use floe::operations::alter::schema::{AlterSchemaBuilder, SchemaChange};
use floe::operations::compact::CompactBuilder;
use floe::operations::{Operation, Query};

use crate::common::{count_and_sum, read_with_python, rows, Fixture};

async fn append(fx: &Fixture, ident: &TableIdent, from: i64, to: i64) {
    let b = rows(fx, ident, from, to).await;
    floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
        .execute()
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
    let dry = AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(change.clone())
        .run(true)
        .await
        .unwrap();
    assert!(dry.changed && dry.dry_run, "{dry:?}");
    assert_eq!(
        fx.load(&ident).await.metadata().default_partition_spec_id(),
        old_spec,
        "a dry run commits nothing"
    );
    let r = AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(change.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(
        (r.before.as_str(), r.after.as_str()),
        ("hour(ts)", "day(ts)")
    );
    assert_eq!(r.files_in_other_specs, 24);
    assert_ne!(r.spec_id, old_spec);
    // The same spec again changes nothing.
    let again = AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(change.clone())
        .execute()
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
    let r = AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(PartitionEvolution {
            remove: vec!["id_bucket".into()],
            add: vec!["truncate(4, name) AS name_prefix".into()],
            ..Default::default()
        })
        .execute()
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
    let e = AlterPartitionBuilder::new(&fx.catalog, ident.clone())
        .with_evolution(PartitionEvolution {
            add: vec!["hour(ts)".into()],
            ..Default::default()
        })
        .execute()
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
    let r = AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes([
            SchemaChange::add("n int").unwrap(),
            SchemaChange::add("device string comment 'sender'").unwrap(),
        ])
        .execute()
        .await
        .unwrap();
    assert!(r.changed);
    assert_eq!(r.applied.len(), 2, "{:?}", r.applied);
    append(&fx, &ident, 100, 200).await;
    let r2 = AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes([
            SchemaChange::set_type("n bigint").unwrap(),
            SchemaChange::rename("name=label").unwrap(),
        ])
        .execute()
        .await
        .unwrap();
    assert_ne!(r2.schema_id, r.schema_id);
    append(&fx, &ident, 200, 300).await;

    let sum_n = |sql: &'static str| {
        let catalog = &fx.catalog;
        async move {
            let mut out = Vec::new();
            for b in floe::operations::sql::SqlBuilder::new(catalog, sql)
                .query()
                .await
                .unwrap()
            {
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
    let e = AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes([SchemaChange::set_type("n int").unwrap()])
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be promoted"), "{e}");
    let e = AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes([SchemaChange::DropColumn { path: "ts".into() }])
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("partition field 'ts_day'"), "{e}");
}

/// `(id, b, n, extra)` of every row, by id, through `floe sql`, with the column names of
/// `SELECT *`.
async fn rows_after_change(
    fx: &Fixture,
    table: &str,
) -> (Vec<String>, Vec<(i64, String, i64, Option<String>)>) {
    use arrow::array::{Array, AsArray};
    let star = floe::operations::sql::SqlBuilder::new(
        &fx.catalog,
        format!("SELECT * FROM {table} LIMIT 1"),
    )
    .query()
    .await
    .unwrap();
    let names = star[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut out = Vec::new();
    let q = format!("SELECT id, bee, n, extra FROM {table} ORDER BY id");
    for b in floe::operations::sql::SqlBuilder::new(&fx.catalog, &q)
        .query()
        .await
        .unwrap()
    {
        let id = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let bee = b.column(1).as_string::<i32>();
        let n = b.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        let extra = b.column(3).as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((
                id.value(i),
                bee.value(i).to_string(),
                n.value(i),
                (!extra.is_null(i)).then(|| extra.value(i).to_string()),
            ));
        }
    }
    (names, out)
}

/// The one change of every kind the tests below make: drop `a`, rename `b`, widen `n`, add
/// `extra`.
fn every_kind_of_change() -> Vec<SchemaChange> {
    vec![
        SchemaChange::DropColumn { path: "a".into() },
        SchemaChange::rename("b=bee").unwrap(),
        SchemaChange::set_type("n bigint").unwrap(),
        SchemaChange::add("extra string").unwrap(),
    ]
}

async fn abn_table(fx: &Fixture, name: &str) -> TableIdent {
    let schema =
        floe::table::schema::parse_schema("id bigint not null, a string, b string, n int").unwrap();
    fx.create_table(name, schema, None).await
}

#[tokio::test]
async fn a_table_with_no_commit_after_a_schema_change_is_read_deleted_and_compacted_through_the_new_schema(
) {
    let fx = Fixture::new().await;
    let ident = abn_table(&fx, "cold.t").await;
    for k in 0..3 {
        append(&fx, &ident, k * 10, k * 10 + 10).await;
    }
    AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes(every_kind_of_change())
        .execute()
        .await
        .unwrap();
    // No data commit since the change: reads go through the new schema by field id.
    let (names, rows) = rows_after_change(&fx, "cold.t").await;
    assert_eq!(names, ["id", "bee", "n", "extra"]);
    assert_eq!(rows.len(), 30);
    for (id, bee, n, extra) in &rows {
        assert_eq!(bee, &format!("b-{}", id % 7), "row {id}");
        assert_eq!(*n, id % 1000, "row {id}");
        assert_eq!(extra, &None, "row {id}");
    }
    // A delete on the renamed column.
    let d = floe::operations::change::delete::DeleteBuilder::new(
        &fx.catalog,
        ident.clone(),
        "bee = 'b-3'",
    )
    .execute()
    .await
    .unwrap();
    let gone = (0..30).filter(|i| i % 7 == 3).count() as u64;
    assert_eq!(d.rows_deleted, gone);
    // Compaction of the old files into the new schema.
    CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("rewrite-all", "true")
        .execute()
        .await
        .unwrap();
    let (_, after) = rows_after_change(&fx, "cold.t").await;
    let kept: Vec<_> = rows.into_iter().filter(|r| r.0 % 7 != 3).collect();
    assert_eq!(after, kept);
    readers_agree(&fx, &ident, "cold.t").await;
}

#[tokio::test]
async fn an_ingest_commit_racing_a_schema_change_lands_its_rows_by_field_id_in_the_new_schema() {
    use std::io::Write;
    let fx = Fixture::new().await;
    let ident = abn_table(&fx, "race.t").await;
    append(&fx, &ident, 0, 5).await;
    let input = fx.warehouse().join("race.ndjson");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 5..45 {
        writeln!(
            f,
            r#"{{"id": {i}, "a": "a-{}", "b": "b-{}", "n": {i}}}"#,
            i % 7,
            i % 7
        )
        .unwrap();
    }
    drop(f);
    let mut o = floe::ingest::stream::IngestOptions::new("racer");
    o.commit_interval = std::time::Duration::from_secs(3600);
    // Files are written in the schema of the table the commit loaded, then the commit waits:
    // the schema changes before it lands.
    o.pause_before_commit = Some(std::time::Duration::from_millis(1500));
    let src = floe::ingest::source::open(&input.display().to_string(), false).unwrap();
    let ingest = floe::ingest::stream::IngestBuilder::new(&fx.catalog, ident.clone(), src, o);
    let run = tokio::spawn(ingest.execute());
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    AlterSchemaBuilder::new(&fx.second_connection().await, ident.clone())
        .with_changes(every_kind_of_change())
        .execute()
        .await
        .unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.records, 40);
    let (_, rows) = rows_after_change(&fx, "race.t").await;
    assert_eq!(rows.len(), 45);
    for (id, bee, n, extra) in &rows {
        assert_eq!(bee, &format!("b-{}", id % 7), "row {id}");
        assert_eq!(*n, id % 1000, "row {id}");
        assert_eq!(extra, &None, "row {id}");
    }
    // The commit names the new schema, and its files were written in it: no file holds the
    // dropped column, and the files first written for the commit are gone (no orphan).
    let table = fx.load(&ident).await;
    let md = table.metadata();
    let snapshot = md.current_snapshot().unwrap();
    assert_eq!(snapshot.schema_id(), Some(md.current_schema_id()));
    let live = floe::table::manifests::live_files(&table).await.unwrap();
    for f in &live {
        use parquet::file::reader::FileReader;
        let path = f.file.file_path().trim_start_matches("file://");
        let reader =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(path).unwrap())
                .unwrap();
        let columns: Vec<String> = reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| format!("{}:{}", c.name(), c.physical_type()))
            .collect();
        if f.sequence_number > 1 {
            // The ingest's commit: written in the new schema.
            assert_eq!(
                columns,
                ["id:INT64", "bee:BYTE_ARRAY", "n:INT64", "extra:BYTE_ARRAY"],
                "{path}"
            );
        }
    }
    let on_disk = crate::common::files_under(&fx.warehouse().join("race/t/data"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count();
    assert_eq!(on_disk, live.len(), "files on disk vs live files");
    readers_agree(&fx, &ident, "race.t").await;
}

/// The metadata location of `ident`: a plan must leave it as it is.
async fn location(fx: &Fixture, ident: &TableIdent) -> String {
    fx.load(ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string()
}

/// A report as JSON without the fields that name the table and the run (for comparing the
/// same change on two tables, planned or applied).
fn outcome(report: &impl serde::Serialize) -> serde_json::Value {
    let mut v = serde_json::to_value(report).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("table");
    o.remove("dry_run");
    v
}

#[tokio::test]
async fn a_schema_plan_commits_nothing_and_apply_revalidates_on_the_schema_as_it_then_is() {
    let fx = Fixture::new().await;
    let ident = fx.table("plan.s", Some("day(ts)")).await;
    let twin = fx.table("plan.twin", Some("day(ts)")).await;
    let current = fx.append(&ident, 0, 10).await;
    fx.append(&twin, 0, 10).await;
    let changes = || {
        vec![
            SchemaChange::add("device string").unwrap(),
            SchemaChange::rename("name=label").unwrap(),
            SchemaChange::DropColumn {
                path: "amount".into(),
            },
        ]
    };
    let before = location(&fx, &ident).await;
    let evolve = AlterSchemaBuilder::new(&fx.catalog, ident.clone()).with_changes(changes());
    let plan = evolve.plan().await.unwrap();
    assert_eq!(
        location(&fx, &ident).await,
        before,
        "a plan commits nothing"
    );
    assert_eq!(plan.snapshot_id, Some(current));
    assert!(
        plan.report.dry_run && plan.report.changed,
        "{:?}",
        plan.report
    );
    assert!(plan.cost().is_zero(), "metadata only");
    let planned = outcome(&plan);
    let applied = evolve.apply(plan).await.unwrap();
    assert!(!applied.dry_run);
    assert_eq!(
        outcome(&applied),
        planned,
        "apply commits what the plan said"
    );
    assert_eq!(
        *fx.load(&ident).await.metadata().current_schema().as_ref(),
        applied.schema
    );
    // The same change in one go (plan, then apply at once) gives the same result.
    let executed = AlterSchemaBuilder::new(&fx.catalog, twin.clone())
        .with_changes(changes())
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome(&executed), planned);

    // Changed meanwhile so that the plan no longer fits: refused at apply, naming the column.
    let other = fx.second_connection().await;
    let add = |c: &floe::Catalog, def: &str| {
        AlterSchemaBuilder::new(c, ident.clone()).with_change(SchemaChange::add(def).unwrap())
    };
    let region = add(&fx.catalog, "region string");
    let plan = region.plan().await.unwrap();
    add(&other, "region int").execute().await.unwrap();
    let at = location(&fx, &ident).await;
    let e = region.apply(plan).await.unwrap_err().to_string();
    assert!(e.contains("region") && e.contains("already exists"), "{e}");
    assert_eq!(location(&fx, &ident).await, at, "nothing committed");

    // Changed meanwhile so that the plan still fits: applied to the new schema, the new
    // column taking the next free id (the one the plan had chosen went to the other column).
    let zone = add(&fx.catalog, "zone string");
    let plan = zone.plan().await.unwrap();
    let planned_id = plan.report.schema.field_by_name("zone").unwrap().id;
    add(&other, "site string").execute().await.unwrap();
    let r = zone.apply(plan).await.unwrap();
    let t = fx.load(&ident).await;
    let schema = t.metadata().current_schema();
    let site = schema.field_by_name("site").unwrap().id;
    let zone = schema.field_by_name("zone").unwrap().id;
    assert_eq!((site, zone), (planned_id, planned_id + 1));
    assert_eq!(r.applied, [format!("added column zone string (id {zone})")]);
    assert_eq!(r.schema_id, schema.schema_id());
}

#[tokio::test]
async fn a_spec_plan_commits_nothing_and_apply_revalidates_on_the_spec_as_it_then_is() {
    let fx = Fixture::new().await;
    let ident = fx.table("plan.p", Some("hour(ts)")).await;
    let twin = fx.table("plan.ptwin", Some("hour(ts)")).await;
    let current = fx.append(&ident, 0, 10).await;
    fx.append(&twin, 0, 10).await;
    let before = location(&fx, &ident).await;
    let evolve = AlterPartitionBuilder::new(&fx.catalog, ident.clone()).with_spec("day(ts)");
    let plan = evolve.plan().await.unwrap();
    assert_eq!(
        location(&fx, &ident).await,
        before,
        "a plan commits nothing"
    );
    assert_eq!(plan.snapshot_id, Some(current));
    let r = &plan.report;
    assert!(r.dry_run && r.changed, "{r:?}");
    assert_eq!(
        (r.before.as_str(), r.after.as_str()),
        ("hour(ts)", "day(ts)")
    );
    assert!(r.files_in_other_specs > 0, "{r:?}");
    let planned = outcome(&plan);
    let applied = evolve.apply(plan).await.unwrap();
    assert!(!applied.dry_run);
    assert_eq!(
        outcome(&applied),
        planned,
        "apply commits what the plan said"
    );
    assert_eq!(
        fx.load(&ident).await.metadata().default_partition_spec_id(),
        applied.spec_id
    );
    // The same change in one go, given as fields to remove and add: the same result.
    let executed = AlterPartitionBuilder::new(&fx.catalog, twin.clone())
        .with_remove_field("ts_hour")
        .with_add_field("day(ts)")
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome(&executed), planned);

    // Changed meanwhile so that the plan no longer fits: refused at apply, naming the field.
    let other = fx.second_connection().await;
    let bucket = |c: &floe::Catalog| {
        AlterPartitionBuilder::new(c, ident.clone()).with_add_field("bucket(4, id)")
    };
    let mine = bucket(&fx.catalog);
    let plan = mine.plan().await.unwrap();
    bucket(&other).execute().await.unwrap();
    let at = location(&fx, &ident).await;
    let e = mine.apply(plan).await.unwrap_err().to_string();
    assert!(
        e.contains("bucket(4, id)") && e.contains("already has this field"),
        "{e}"
    );
    assert_eq!(location(&fx, &ident).await, at, "nothing committed");

    // Made meanwhile by another writer: apply finds it in place and commits nothing.
    let back =
        |c: &floe::Catalog| AlterPartitionBuilder::new(c, ident.clone()).with_spec("day(ts)");
    let mine = back(&fx.catalog);
    let plan = mine.plan().await.unwrap();
    assert!(plan.report.changed);
    let theirs = back(&other).execute().await.unwrap();
    let at = location(&fx, &ident).await;
    let r = mine.apply(plan).await.unwrap();
    assert!(!r.changed, "{r:?}");
    assert_eq!(r.spec_id, theirs.spec_id);
    assert_eq!(location(&fx, &ident).await, at, "nothing committed");
}
