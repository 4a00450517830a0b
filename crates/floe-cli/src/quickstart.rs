//! `floe quickstart`: the embedded demo. Creates `demo.events` (partitioned by day), feeds a
//! generated event stream through the ingest engine with a commit every 500 events (as a
//! streaming writer commits every checkpoint), and shows what `$files`
//! and `$snapshots` reveal: many small files, one snapshot per commit. Then it diagnoses the
//! table and lets `floe maintain --once` keep it healthy (compaction, expiry, removal of a
//! crashed job's leftover file), diagnoses again, streams on, maintains again, and prints a
//! before/after table.

use floe::operations::{Operation, Query};
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use floe::catalog::{parse_namespace, parse_table_ident, Catalog, CatalogConfig, NewTable};
use floe::Error;
use serde_json::json;

use crate::output::Out;

const TABLE: &str = "demo.events";
const BATCHES: usize = 8;
const ROWS_PER_BATCH: usize = 500;

pub async fn run(warehouse: Option<PathBuf>, out: &Out) -> Result<()> {
    let config = CatalogConfig::embedded(warehouse.as_deref())?;
    let catalog = Catalog::connect(&config).await?;
    out.say(format!(
        "warehouse {} (catalog {})",
        config.warehouse, config.uri
    ));
    match catalog.create_namespace(&parse_namespace("demo")?).await {
        Ok(()) | Err(Error::NamespaceExists { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let ident = parse_table_ident(TABLE)?;
    match floe::operations::clean::purge::DropBuilder::new(&catalog, ident.clone())
        .with_purge(true)
        .execute()
        .await
    {
        Ok(_) => out.say(format!("dropped the previous {TABLE}")),
        Err(Error::TableNotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let schema = floe::table::schema::parse_schema(
        "id bigint not null, ts timestamp, kind string, amount double",
    )?;
    let spec = floe::table::schema::parse_partition("day(ts)", &schema)?;
    catalog
        .create_table(NewTable {
            ident: ident.clone(),
            schema,
            partition_spec: spec,
            sort_order: None,
            properties: Default::default(),
        })
        .await?;
    out.say(format!("created {TABLE} (id bigint not null, ts timestamp, kind string, amount double) partitioned by day(ts)"));

    // A generated event stream, fed through the ingest engine with a commit every 500 events
    // (a short checkpoint interval): the small-files problem, for real.
    let dir = tempfile::tempdir()?;
    let kinds = ["click", "view", "buy", "scroll"];
    let path = dir.path().join("events.ndjson");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for id in 0..BATCHES * ROWS_PER_BATCH {
        // Three days of events; every commit touches every day, as late data does.
        let day = 1 + id % 3;
        let secs = (id * 37) % 86_400;
        writeln!(
            f,
            "{}",
            json!({
                "id": id,
                "ts": format!("2026-11-{day:02}T{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60),
                "kind": kinds[id % kinds.len()],
                "amount": (id % 100) as f64 * 0.25,
            })
        )?;
    }
    f.flush()?;
    drop(f);
    let reports = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = reports.clone();
    let json_mode = out.is_json();
    stream_ingest(&catalog, &ident, &path)?
        .on_commit(move |r| {
            if !json_mode {
                crate::output::line(format_args!(
                    "commit {}: {} events -> {} data files, snapshot {}",
                    r.commit, r.records, r.data_files, r.snapshot_id
                ));
            }
            sink.lock().expect("not poisoned").push(r.clone());
        })
        .execute()
        .await?;
    out.say(format!(
        "floe ingest {TABLE} --source events.ndjson --commit-records {ROWS_PER_BATCH}: one commit per {ROWS_PER_BATCH} events, like a streaming writer's checkpoints"
    ));
    let commits: Vec<serde_json::Value> = reports
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .collect();

    let queries = [
        ("rows", format!("SELECT count(*) AS rows, sum(amount) AS amount FROM {TABLE}")),
        (
            "files",
            format!(
                "SELECT partition.ts_day AS day, count(*) AS files, sum(record_count) AS rows, \
                 CAST(avg(file_size_in_bytes) AS BIGINT) AS avg_file_bytes FROM {TABLE}$files GROUP BY 1 ORDER BY 1"
            ),
        ),
        (
            "snapshots",
            format!(
                "SELECT snapshot_id, operation, summary['added-data-files'] AS added_files, \
                 summary['total-data-files'] AS total_files, summary['total-records'] AS total_records \
                 FROM {TABLE}$snapshots ORDER BY committed_at"
            ),
        ),
    ];
    let mut results = serde_json::Map::new();
    for (name, q) in &queries {
        let batches = floe::operations::sql::SqlBuilder::new(&catalog, q)
            .query()
            .await?;
        if out.is_json() {
            let mut buf = Vec::new();
            {
                let mut w = arrow::json::ArrayWriter::new(&mut buf);
                for b in &batches {
                    w.write(b)?;
                }
                w.finish()?;
            }
            let v: serde_json::Value = if buf.is_empty() {
                json!([])
            } else {
                serde_json::from_slice(&buf)?
            };
            results.insert((*name).to_string(), v);
        } else {
            crate::output::line(format_args!("\nfloe sql \"{q}\""));
            crate::output::line(format_args!(
                "{}",
                arrow::util::pretty::pretty_format_batches(&batches)?
            ));
        }
    }
    out.say(
        "\nEvery micro-batch committed one snapshot and one small file per day it touched: \
         the small-file problem floe is built to fix.",
    );

    // A writer that crashed between writing a file and committing it leaves an orphan; make
    // it look 4 days old so the default 3-day threshold of remove-orphan-files applies.
    let crashed = leave_crashed_write(&catalog, &ident).await?;

    // Diagnose, then let the maintenance service do what a user would otherwise run by hand.
    let probe = format!("SELECT kind, count(*) AS n, sum(amount) AS amount FROM {TABLE} GROUP BY kind ORDER BY kind");
    let before = shape(&catalog, &ident, &probe).await?;
    let report_before = floe::operations::diagnose::DiagnoseBuilder::new(&catalog, ident.clone())
        .query()
        .await?;
    out.say(format!(
        "\nfloe diagnose {TABLE}\n{}",
        floe::operations::diagnose::render::text(&report_before)
    ));
    // The service reads its policy from table properties. The demo's partitions were written
    // a moment ago (by default a partition is left to its writers for 15 minutes) and its
    // history is minutes old (kept 5 days by default): a demo policy compacts at once and keeps
    // only what a reader or the writer needs.
    let policy = [
        ("floe.maintain.compact.partition-idle-time", "0s"),
        ("floe.maintain.compact.trigger.commit-count", "5"),
        ("history.expire.max-snapshot-age-ms", "0"),
    ];
    floe::operations::alter::AlterPropertiesBuilder::new(&catalog, ident.clone())
        .with_properties(policy)
        .execute()
        .await?;
    out.say(format!(
        "\nfloe table set-property {TABLE} {}",
        policy
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let first = maintain_once(&catalog, &config, out).await?;
    let compacted = shape(&catalog, &ident, &probe).await?;
    if before.answer != compacted.answer {
        anyhow::bail!(
            "maintenance changed the query answer: {:?} vs {:?}",
            before.answer,
            compacted.answer
        );
    }
    out.say("same query answer before and after maintenance");
    let report_after = floe::operations::diagnose::DiagnoseBuilder::new(&catalog, ident.clone())
        .query()
        .await?;
    out.say(format!(
        "\nfloe diagnose {TABLE}  (after maintenance; observations only)\n{}",
        observations_text(&report_after)
    ));
    // The stream goes on: 500 more events, read from where the last commit stopped. The
    // writer's newest snapshot (its recovery point) is now after the compaction.
    let mut f = std::fs::OpenOptions::new().append(true).open(&path)?;
    for id in BATCHES * ROWS_PER_BATCH..(BATCHES + 1) * ROWS_PER_BATCH {
        writeln!(
            f,
            "{}",
            json!({"id": id, "ts": format!("2026-11-{:02}T12:00:00", 1 + id % 3), "kind": kinds[id % kinds.len()], "amount": 1.0})
        )?;
    }
    drop(f);
    let more = stream_ingest(&catalog, &ident, &path)?.execute().await?;
    out.say(format!(
        "\nthe stream goes on: {} more events committed, resumed at byte {} of the input",
        more.records,
        more.resumed_from.values().next().copied().unwrap_or(0)
    ));
    let second = maintain_once(&catalog, &config, out).await?;
    let crashed_removed = !std::path::Path::new(&crashed).exists();
    let after = shape(&catalog, &ident, &probe).await?;
    out.say(format!(
        "\n{:<28} {:>10} {:>10}\n{:<28} {:>10} {:>10}\n{:<28} {:>10} {:>10}\n{:<28} {:>10} {:>10}\n{:<28} {:>10} {:>10}\n{:<28} {:>8.1}ms {:>8.1}ms",
        "",
        "before",
        "after",
        "live data files",
        before.files,
        after.files,
        "manifests",
        before.manifests,
        after.manifests,
        "snapshots",
        before.snapshots,
        after.snapshots,
        "bytes on storage",
        crate::output::human_bytes(before.storage_bytes),
        crate::output::human_bytes(after.storage_bytes),
        "query time (group by kind)",
        before.query_ms,
        after.query_ms
    ));
    out.say("next: floe diagnose demo.events --html report.html; floe sql \"SELECT * FROM demo.events$snapshots\"");
    out.result(
        &json!({
            "table": TABLE, "warehouse": config.warehouse, "commits": commits, "queries": results,
            "maintain": [first, second],
            "crashed_write": crashed, "crashed_write_removed": crashed_removed,
            "diagnose_before": report_before, "diagnose_after": report_after,
            "before": before.json(), "after": after.json(),
        }),
        String::new,
    );
    Ok(())
}

/// `floe maintain --once` on the demo's catalog: prints the first pass's decision table and
/// the jobs it ran.
async fn maintain_once(
    catalog: &Catalog,
    config: &CatalogConfig,
    out: &Out,
) -> Result<floe::maintain::service::MaintainSummary> {
    use floe::maintain::service::{MaintainOptions, Maintainer, Source};
    let store = std::sync::Arc::new(floe::coordination::Store::connect(&config.uri).await?);
    let opts = MaintainOptions {
        holder: "quickstart".into(),
        ..MaintainOptions::default()
    };
    let state = floe::maintain::state::ServiceState::new(&opts.holder, 0);
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let summary = Maintainer::new(
        vec![Source {
            catalog: catalog.clone(),
            prefix: None,
            only: None,
        }],
        store.clone(),
        state,
        opts,
    )
    .with_log(std::sync::Arc::new(move |l: &str| {
        sink.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(l.to_string())
    }))
    .run_once()
    .await?;
    store.close().await;
    out.say(format!(
        "\nfloe maintain --once\n{}",
        summary
            .passes
            .first()
            .map(|p| crate::maintain::table(&p.decisions))
            .unwrap_or_default()
    ));
    for l in lines.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        out.say(format!("  {l}"));
    }
    Ok(summary)
}

/// The demo's streaming writer: the events file, one commit per micro-batch of events.
fn stream_ingest(
    catalog: &Catalog,
    ident: &floe::iceberg::TableIdent,
    events: &std::path::Path,
) -> Result<floe::ingest::stream::IngestBuilder> {
    let mut options = floe::ingest::stream::IngestOptions::new("quickstart-stream");
    options.commit_records = Some(ROWS_PER_BATCH as u64);
    let source = floe::ingest::source::open(&events.display().to_string(), false)?;
    Ok(
        floe::ingest::stream::IngestBuilder::new(catalog, ident.clone(), source, options)
            .with_maintenance(floe::maintain::in_stream::InStream::new()),
    )
}

struct Shape {
    files: usize,
    manifests: usize,
    snapshots: usize,
    storage_bytes: u64,
    query_ms: f64,
    answer: String,
}

impl Shape {
    fn json(&self) -> serde_json::Value {
        json!({"files": self.files, "manifests": self.manifests, "snapshots": self.snapshots,
               "storage_bytes": self.storage_bytes, "query_ms": self.query_ms})
    }
}

/// The observations that hold, with their first action.
fn observations_text(r: &floe::operations::diagnose::Report) -> String {
    let holding: Vec<String> = r
        .observations
        .iter()
        .filter(|o| o.holds)
        .map(|o| {
            format!(
                "  [x] {}\n      {}\n      first action: {}",
                o.observation,
                o.evidence,
                o.action.as_deref().unwrap_or("-")
            )
        })
        .collect();
    if holding.is_empty() {
        "  nothing to fix: no observation holds".to_string()
    } else {
        holding.join("\n")
    }
}

/// Writes a data file without committing it (a writer killed before its commit) and backdates
/// it 4 days. Returns its path.
async fn leave_crashed_write(
    catalog: &Catalog,
    ident: &floe::iceberg::TableIdent,
) -> Result<String> {
    use arrow::array::{Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
    let table = catalog.load_table(ident).await?;
    let schema = std::sync::Arc::new(floe::iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    let batch = arrow::record_batch::RecordBatch::try_new(
        schema,
        vec![
            std::sync::Arc::new(Int64Array::from(vec![-1i64])),
            std::sync::Arc::new(TimestampMicrosecondArray::from(vec![
                1_793_491_200_000_000i64,
            ])),
            std::sync::Arc::new(StringArray::from(vec!["lost"])),
            std::sync::Arc::new(Float64Array::from(vec![0.0])),
        ],
    )?;
    let files =
        floe::operations::append::write_files(&table, vec![batch], &Default::default()).await?;
    let path = files[0].file_path().to_string();
    let local = floe::storage::listing::local_dir(&path).expect("the embedded warehouse is local");
    let f = std::fs::File::options().write(true).open(&local)?;
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(4 * 86_400))?;
    Ok(path)
}

/// Files, manifests and the time of one query (best of 3) on the table's current snapshot.
async fn shape(catalog: &Catalog, ident: &floe::iceberg::TableIdent, probe: &str) -> Result<Shape> {
    let table = catalog.load_table(ident).await?;
    let files = floe::table::manifests::live_files(&table).await?.len();
    let manifests = match table.metadata().current_snapshot() {
        Some(s) => floe::table::manifests::manifests_of(&table, s).await?.len(),
        None => 0,
    };
    let mut best = f64::MAX;
    let mut answer = String::new();
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let batches = floe::operations::sql::SqlBuilder::new(catalog, probe)
            .query()
            .await?;
        best = best.min(t.elapsed().as_secs_f64() * 1000.0);
        answer = arrow::util::pretty::pretty_format_batches(&batches)?.to_string();
    }
    let storage_bytes =
        floe::storage::listing::list_files(table.file_io(), table.metadata().location())
            .await?
            .iter()
            .map(|f| f.size)
            .sum();
    Ok(Shape {
        files,
        manifests,
        snapshots: table.metadata().snapshots().count(),
        storage_bytes,
        query_ms: best,
        answer,
    })
}
