//! floe benchmarks against peers, side by side on the same tables.
//!
//! `append-latency`: append commit latency with N prior snapshots, floe vs PyIceberg's
//! `table.append` on the same table (PyIceberg runs after floe, on the table floe built).
//! History is built outside the timed section; each measured append writes 10 rows and commits.
//!
//! `small-files`: tables of many small files for `peers/compact_bench.py`.
//! `history`: a table of many files and snapshots for `peers/maintenance_bench.py`.
//! `backends`: the same operations on local disk and on S3 + REST (SeaweedFS), with the S3
//! requests each one issued.
//! `row-group-merge`: compaction of large-row-group inputs copied without decoding vs decoded.
//! `equality-deletes`: an equality delete file for the compaction matrix's delete cell.
//! `ingest-floor`, `kafka-consume`: the physical limits of an ingest on this machine.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use arrow::array::{Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::record_batch::RecordBatch;
use clap::{Parser, Subcommand};
use floe::catalog::{Catalog, CatalogConfig};
use floe::operations::{Operation, Query};
use serde_json::json;

mod backends;
mod eqdeletes;
mod floor;
mod history;
mod kafka_floor;
mod merge;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Builds tables of many small files for the compaction benchmark (same rows and file
    /// sizes in every table listed), then prints their metadata locations as JSON.
    SmallFiles {
        /// Warehouse directory (SQLite catalog inside).
        #[arg(long)]
        warehouse: PathBuf,
        /// Number of data files.
        #[arg(long)]
        files: usize,
        /// Tables to build (same content in each).
        #[arg(long, value_delimiter = ',', default_value = "bench.floe,bench.py")]
        tables: Vec<String>,
        /// Random seed of the file sizes.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Append commit latency with N prior snapshots (floe vs PyIceberg).
    AppendLatency {
        /// Prior snapshot counts.
        #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
        snapshots: Vec<usize>,
        /// Measured appends per tool and history size.
        #[arg(long, default_value_t = 5)]
        appends: usize,
        /// Python with pyiceberg for the peer (skip the peer when absent).
        #[arg(long, env = "FLOE_PYTHON")]
        python: Option<PathBuf>,
        /// Where to keep the tables (default: a temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Builds a table with many files and snapshots (hard-linked copies of one file per
    /// partition) plus uncommitted orphans, for the diagnose / orphan-listing benchmark.
    History {
        /// Warehouse directory (SQLite catalog inside).
        #[arg(long)]
        warehouse: PathBuf,
        /// Live data files in total.
        #[arg(long, default_value_t = 100_000)]
        files: usize,
        /// Snapshots (each appends files / snapshots files, one per partition).
        #[arg(long, default_value_t = 1_000)]
        snapshots: usize,
        /// Uncommitted files left under data/.
        #[arg(long, default_value_t = 1_000)]
        orphans: usize,
    },
    /// The same table and maintenance operations on local disk and on S3 behind a REST catalog
    /// (SeaweedFS from .ci/setup), with the S3 requests each operation issued.
    Backends {
        /// Small data files to build the table from.
        #[arg(long, default_value_t = 500)]
        files: usize,
        /// Commits they arrive in.
        #[arg(long, default_value_t = 50)]
        commits: usize,
    },
    /// Compaction of inputs with large row groups: row-group merge (copy) vs decode.
    RowGroupMerge {
        /// Input files (one row group each).
        #[arg(long, default_value_t = 8)]
        files: usize,
        /// Rows per input file.
        #[arg(long, default_value_t = 1_000_000)]
        rows: i64,
        /// Runs per mode (each on its own identical table).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Where to keep the tables (default: a temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Commits one equality delete file of every row whose `column` is a multiple of
    /// `modulo` (the compaction matrix's equality-delete input).
    EqualityDeletes {
        /// Warehouse directory (SQLite catalog inside).
        #[arg(long)]
        warehouse: PathBuf,
        /// Table, NS.NAME (unpartitioned).
        #[arg(long)]
        table: String,
        /// A bigint column.
        #[arg(long, default_value = "id")]
        column: String,
        #[arg(long, default_value_t = 20)]
        modulo: i64,
    },
    /// What ingesting an NDJSON file costs on one core at best, stage by stage: splitting
    /// lines, JSON to Arrow (floe's strict decoder, and arrow-json's as a reference), Parquet
    /// encoding with floe's default zstd. The physical limit the ingest benchmark is put
    /// against.
    IngestFloor {
        /// NDJSON input (the ingest benchmark's events.ndjson).
        #[arg(long)]
        input: PathBuf,
        /// The table schema, as `floe table create --schema` takes it.
        #[arg(
            long,
            default_value = "id bigint not null, ts timestamp, name string, payload string"
        )]
        schema: String,
        /// Records per decoded batch.
        #[arg(long, default_value_t = 8192)]
        batch: usize,
        /// Runs; each stage's fastest is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Produces every line of an NDJSON file to a Kafka topic (created with N partitions),
    /// round robin, for the ingest benchmark.
    KafkaProduce {
        #[command(flatten)]
        topic: KafkaTopic,
        /// NDJSON input.
        #[arg(long)]
        file: PathBuf,
    },
    /// Reads every record of a topic with librdkafka under floe's consumer settings and
    /// nothing else (the floor of a Kafka ingest: broker and client on the same cores).
    KafkaConsume {
        #[command(flatten)]
        topic: KafkaTopic,
        /// Records to read (the topic's count).
        #[arg(long)]
        records: u64,
    },
}

/// The topic a Kafka subcommand produces to or reads.
#[derive(clap::Args)]
struct KafkaTopic {
    /// Broker HOST:PORT.
    #[arg(long)]
    brokers: String,
    #[arg(long)]
    topic: String,
    #[arg(long, default_value_t = 3)]
    partitions: i32,
}

fn batch(schema: &arrow::datatypes::SchemaRef, from: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (from..from + n).collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(TimestampMicrosecondArray::from(
                ids.iter()
                    .map(|i| 1_767_225_600_000_000 + i * 1_000_000)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter().map(|i| format!("n{i}")).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                ids.iter().map(|i| *i as f64).collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("valid batch")
}

/// Builds `n` one-row append snapshots quickly (see [`history::append_snapshots`]).
async fn build_history(
    catalog: &Catalog,
    ident: &floe::iceberg::TableIdent,
    schema: &arrow::datatypes::SchemaRef,
    n: usize,
) -> Result<()> {
    history::append_snapshots(catalog, ident, n, |table, i| {
        let schema = schema.clone();
        async move {
            Ok(floe::operations::append::write_files(
                &table,
                vec![batch(&schema, i as i64, 1)],
                &Default::default(),
            )
            .await?)
        }
    })
    .await
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn append_latency(
    snapshots: Vec<usize>,
    appends: usize,
    python: Option<PathBuf>,
    dir: Option<PathBuf>,
) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = dir.unwrap_or_else(|| tmp.path().to_path_buf());
    let mut results = vec![];
    println!(
        "{:>10} {:>14} {:>16} {:>8}",
        "snapshots", "floe median s", "pyiceberg med s", "ratio"
    );
    for n in snapshots {
        let wh = root.join(format!("append-latency-{n}"));
        if wh.exists() {
            std::fs::remove_dir_all(&wh)?;
        }
        let config = CatalogConfig::embedded(Some(&wh))?;
        let catalog = Catalog::connect(&config).await?;
        let (table, arrow_schema) = history::create_table(
            &catalog,
            "bench.events",
            "id bigint not null, ts timestamp, name string, amount double",
            None,
        )
        .await?;
        let ident = table.identifier().clone();
        let build = Instant::now();
        build_history(&catalog, &ident, &arrow_schema, n).await?;
        let build_s = build.elapsed().as_secs_f64();
        let mut floe_s = vec![];
        for k in 0..appends {
            let t = Instant::now();
            floe::operations::append::AppendBuilder::from_batches(
                &catalog,
                ident.clone(),
                vec![batch(&arrow_schema, 1_000_000 + (k * 10) as i64, 10)],
            )
            .execute()
            .await?;
            floe_s.push(t.elapsed().as_secs_f64());
        }
        let floe_median = median(&mut floe_s);
        let peer = match &python {
            None => None,
            Some(py) => {
                let script =
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/pyiceberg_append.py");
                let out = Command::new(py)
                    .arg(script)
                    .args(["--catalog-uri", &config.uri, "--warehouse"])
                    .arg(&config.warehouse)
                    .args([
                        "--table",
                        "bench.events",
                        "--appends",
                        &appends.to_string(),
                        "--rows-per-append",
                        "10",
                    ])
                    .output()
                    .context("running the PyIceberg peer")?;
                if !out.status.success() {
                    bail!(
                        "pyiceberg peer failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
                v["median_s"].as_f64()
            }
        };
        // The result must be right: every appended row is there.
        let rows =
            floe::operations::sql::SqlBuilder::new(&catalog, "SELECT count(*) FROM bench.events")
                .query()
                .await?;
        let count = rows[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .map(|a| a.value(0))
            .unwrap_or(-1);
        let expected = n as i64 + 10 * appends as i64 * if peer.is_some() { 2 } else { 1 };
        if count != expected {
            bail!("row count {count} != expected {expected}");
        }
        let ratio = peer.map(|p| p / floe_median);
        println!(
            "{:>10} {:>14.4} {:>16} {:>8}",
            n,
            floe_median,
            peer.map(|p| format!("{p:.4}"))
                .unwrap_or_else(|| "-".into()),
            ratio
                .map(|r| format!("{r:.1}x"))
                .unwrap_or_else(|| "-".into())
        );
        results.push(json!({
            "prior_snapshots": n, "history_build_s": build_s, "floe_median_s": floe_median,
            "floe_s": floe_s, "pyiceberg_median_s": peer, "pyiceberg_over_floe": ratio,
        }));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"benchmark": "append-latency", "results": results}))?
    );
    Ok(())
}

/// Rows per file: mostly small (a few KB), some up to a few MB, fixed by the seed.
fn file_rows(files: usize, seed: u64) -> Vec<usize> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..files)
        .map(|_| {
            if rng.random_bool(0.02) {
                rng.random_range(20_000..100_000)
            } else {
                rng.random_range(50..1_500)
            }
        })
        .collect()
}

fn small_batch(schema: &arrow::datatypes::SchemaRef, from: i64, n: usize) -> RecordBatch {
    let ids: Vec<i64> = (from..from + n as i64).collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|i| format!("name-{}", i % 1000))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                ids.iter()
                    .map(|i| (*i % 10_000) as f64 * 0.01)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|i| format!("payload-{:x}-{}", i.wrapping_mul(2654435761), i % 97))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("valid batch")
}

async fn small_files(
    warehouse: PathBuf,
    files: usize,
    tables: Vec<String>,
    seed: u64,
) -> Result<()> {
    let config = CatalogConfig::embedded(Some(&warehouse))?;
    let catalog = Catalog::connect(&config).await?;
    let rows = file_rows(files, seed);
    let mut out = serde_json::Map::new();
    for name in &tables {
        let (mut table, arrow_schema) = history::create_table(
            &catalog,
            name,
            "id bigint not null, name string, amount double, payload string",
            None,
        )
        .await?;
        let ident = table.identifier().clone();
        // One file per batch: a 1-byte target makes the rolling writer start a new file for
        // every batch. Commits of 1,000 files keep the history realistic but short.
        let options = floe::write::WriteOptions {
            target_file_size_bytes: Some(1),
            ..Default::default()
        };
        let mut next_id = 0i64;
        for chunk in rows.chunks(1000) {
            let batches: Vec<RecordBatch> = chunk
                .iter()
                .map(|&n| {
                    let b = small_batch(&arrow_schema, next_id, n);
                    next_id += n as i64;
                    b
                })
                .collect();
            let written = floe::operations::append::write_files(&table, batches, &options).await?;
            table = floe::commit::Committer::new(&catalog, &ident)
                .commit(floe::commit::SnapshotUpdate::append(written))
                .await?
                .table;
        }
        let live = floe::table::manifests::live_files(&table).await?;
        let bytes: u64 = live.iter().map(|f| f.file.file_size_in_bytes()).sum();
        out.insert(
            name.clone(),
            json!({
                "metadata_location": table.metadata_location(),
                "files": live.len(),
                "bytes": bytes,
                "rows": next_id,
                "paths": live.iter().map(|f| f.file.file_path().to_string()).collect::<Vec<_>>(),
            }),
        );
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}

async fn kafka_produce(
    brokers: String,
    topic: String,
    partitions: i32,
    file: PathBuf,
) -> Result<()> {
    use rskafka::client::partition::{Compression, UnknownTopicHandling};
    use rskafka::record::Record;
    use std::io::BufRead;
    let client = rskafka::client::ClientBuilder::new(vec![brokers])
        .build()
        .await?;
    client
        .controller_client()?
        .create_topic(topic.clone(), partitions, 1, 5_000)
        .await?;
    let mut clients = Vec::new();
    for p in 0..partitions {
        clients.push(
            client
                .partition_client(topic.clone(), p, UnknownTopicHandling::Retry)
                .await?,
        );
    }
    let started = Instant::now();
    let reader = std::io::BufReader::new(std::fs::File::open(&file)?);
    let mut batches: Vec<Vec<Record>> = vec![Vec::new(); partitions as usize];
    let (mut n, mut bytes) = (0u64, 0u64);
    for line in reader.lines() {
        let line = line?;
        bytes += line.len() as u64;
        let p = (n % partitions as u64) as usize;
        batches[p].push(Record {
            key: None,
            value: Some(line.into_bytes()),
            headers: Default::default(),
            timestamp: chrono::Utc::now(),
        });
        n += 1;
        if batches[p].len() >= 2_000 {
            clients[p]
                .produce(std::mem::take(&mut batches[p]), Compression::NoCompression)
                .await?;
        }
    }
    for (p, b) in batches.into_iter().enumerate() {
        if !b.is_empty() {
            clients[p].produce(b, Compression::NoCompression).await?;
        }
    }
    println!(
        "{}",
        json!({"records": n, "bytes": bytes, "seconds": started.elapsed().as_secs_f64()})
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::SmallFiles {
            warehouse,
            files,
            tables,
            seed,
        } => small_files(warehouse, files, tables, seed).await,
        Cmd::AppendLatency {
            snapshots,
            appends,
            python,
            dir,
        } => append_latency(snapshots, appends, python, dir).await,
        Cmd::History {
            warehouse,
            files,
            snapshots,
            orphans,
        } => history::build(warehouse, files, snapshots, orphans).await,
        Cmd::Backends { files, commits } => backends::run(files, commits).await,
        Cmd::RowGroupMerge {
            files,
            rows,
            runs,
            dir,
        } => merge::run(files, rows, runs, dir).await,
        Cmd::EqualityDeletes {
            warehouse,
            table,
            column,
            modulo,
        } => eqdeletes::run(warehouse, table, column, modulo).await,
        Cmd::IngestFloor {
            input,
            schema,
            batch,
            runs,
        } => floor::run(input, schema, batch, runs),
        Cmd::KafkaProduce { topic: t, file } => {
            kafka_produce(t.brokers, t.topic, t.partitions, file).await
        }
        Cmd::KafkaConsume { topic: t, records } => {
            tokio::task::spawn_blocking(move || {
                kafka_floor::run(t.brokers, t.topic, t.partitions, records)
            })
            .await?
        }
    }
}
