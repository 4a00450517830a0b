//! The `floe` command line: arguments -> library calls -> human or `--json` output.

mod health;
mod ingest;
mod maintain;
mod output;
mod quickstart;
mod table;
mod worker;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use floe::base::properties::parse_size;
use floe::catalog::{config, parse_namespace, parse_table_ident, Catalog, CatalogConfig, NewTable};
use floe::operations::{Operation, Query};
use floe::records::files::InputFormat;
use floe::write::WriteOptions;
use serde_json::json;

use crate::output::{Failure, Out};
use crate::table::{CatalogCmd, NamespaceCmd, TableCmd};

/// floe keeps streaming-fed Apache Iceberg tables healthy.
#[derive(Parser, Debug)]
#[command(name = "floe", version, about)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct Global {
    /// Warehouse directory (holds tables and, by default, catalog.db).
    #[arg(long, global = true, env = "FLOE_WAREHOUSE")]
    warehouse: Option<PathBuf>,
    /// A catalog configured in floe.toml or FLOE_CATALOG__<NAME>__* (default: the file's
    /// default-catalog, else the embedded SQLite catalog).
    #[arg(long, global = true, env = "FLOE_CATALOG", value_name = "NAME")]
    catalog: Option<String>,
    /// Config file with [catalog.NAME] sections (default ./floe.toml, then
    /// ~/.config/floe/floe.toml).
    #[arg(long, global = true, env = "FLOE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Overrides one catalog property: uri, warehouse, credential, token, s3.endpoint, ...
    #[arg(long = "catalog-prop", global = true, value_name = "K=V")]
    catalog_props: Vec<String>,
    /// SQL URI of the embedded catalog: sqlite:///path.db or postgres://user@host:port/db.
    #[arg(long, global = true, env = "FLOE_CATALOG_URI", value_name = "URI")]
    catalog_uri: Option<String>,
    /// SQL catalog name (the catalog_name column shared with PyIceberg/Java; default floe).
    #[arg(long, global = true, env = "FLOE_CATALOG_NAME")]
    catalog_name: Option<String>,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Embedded demo: creates demo.events, appends micro-batches, shows $files and $snapshots.
    Quickstart,
    /// Configured catalogs (floe.toml, FLOE_CATALOG__*), secrets masked.
    #[command(subcommand)]
    Catalog(CatalogCmd),
    /// Namespaces.
    #[command(subcommand)]
    Namespace(NamespaceCmd),
    /// Tables.
    #[command(subcommand)]
    Table(TableCmd),
    /// Appends NDJSON, CSV or Parquet files to a table in one commit.
    Append {
        /// Table as NAMESPACE.TABLE.
        table: String,
        /// Input files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Input format (default: from each file's extension).
        #[arg(long)]
        format: Option<String>,
        /// Target data file size (default: write.target-file-size-bytes, 512MiB).
        #[arg(long)]
        target_file_size: Option<String>,
        /// `append` (default) or `upsert`: the last input row of each key replaces the table's
        /// rows with that key (position deletes + new rows in one commit).
        #[arg(long, default_value = "append")]
        mode: String,
        /// Upsert key columns, comma-separated (default: the table's primary key).
        #[arg(long)]
        key: Option<String>,
        /// Reads and checks every record, writes and commits nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Deletes the rows matching a SQL condition (DELETE FROM t WHERE ...) in one commit.
    Delete {
        /// Table as NAMESPACE.TABLE.
        table: String,
        /// The rows to delete: any SQL condition on the columns ("id IN (1, 2) OR ts < '2026-10-01'").
        #[arg(long = "where", required = true)]
        filter: String,
        /// merge-on-read (position deletes) or copy-on-write (rewrite affected files);
        /// default: the table's write.delete.mode, else merge-on-read.
        #[arg(long)]
        mode: Option<String>,
        /// Finds and counts the rows, changes nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Compacts small files (Iceberg's rewrite_data_files, bin-pack) in one replace commit.
    #[command(after_help = "Examples:
  floe compact db.events
  floe compact db.events --where \"ts >= '2026-11-01'\" --target-file-size 256MiB
  floe compact db.events --rewrite-all --sort-by 'zorder(customer_id, ts)'
  floe compact db.events --sort-by 'region, ts desc' --option rewrite-job-order=bytes-desc
  floe compact db.events --dry-run --json")]
    Compact {
        /// Table as NAMESPACE.TABLE.
        table: String,
        /// Only files that may hold matching rows: "ts < '2026-10-01' AND region = 'eu'".
        #[arg(long = "where")]
        filter: Option<String>,
        /// Target output file size (default: write.target-file-size-bytes, 512MiB).
        #[arg(long)]
        target_file_size: Option<String>,
        /// Minimum files in a group to rewrite it (default 5).
        #[arg(long)]
        min_input_files: Option<u64>,
        /// File groups rewritten at once (max-concurrent-file-group-rewrites, default 5).
        #[arg(long)]
        max_concurrent: Option<u64>,
        /// Commit batches of finished groups as they complete.
        #[arg(long)]
        partial_progress: bool,
        /// With --partial-progress: at most this many commits (default 10).
        #[arg(long, requires = "partial_progress")]
        max_commits: Option<u64>,
        /// Rewrite every file, whatever its size.
        #[arg(long)]
        rewrite_all: bool,
        /// Sort each file group before writing it: 'col [asc|desc] [nulls first|last], ...', or
        /// 'zorder(col1, col2, ...)' so that a range filter on any one of those columns skips
        /// most files (integer, date, timestamp, string and decimal columns). Default: the
        /// table's sort order, if any.
        #[arg(long)]
        sort_by: Option<String>,
        /// Any Iceberg rewrite_data_files option as K=V (min-file-size-bytes,
        /// max-file-group-size-bytes, rewrite-job-order, delete-file-threshold, ...).
        #[arg(long = "option", value_name = "K=V")]
        options: Vec<String>,
        /// Print the plan and commit nothing.
        #[arg(long)]
        dry_run: bool,
        /// Rewrite on `floe worker` processes through the task queue --queue: this process
        /// plans, waits for the workers' outputs and commits them.
        #[arg(long, requires = "queue")]
        distributed: bool,
        /// The task queue of --distributed: postgres://... (or sqlite:///path).
        #[arg(long, value_name = "URI", env = "FLOE_QUEUE")]
        queue: Option<String>,
        /// With --distributed: a task or run lease not renewed for this long is taken over
        /// (its worker or coordinator died).
        #[arg(long, default_value = "60s", value_name = "DURATION")]
        lease_ttl: String,
        /// With --distributed: fail the run when no worker works on it for this long while
        /// tasks wait (its uncommitted outputs are deleted). Default: wait for workers as long
        /// as it takes (a scaler may be starting them), saying so every 10 s.
        #[arg(long, value_name = "DURATION")]
        worker_timeout: Option<String>,
    },
    /// Pulls distributed-compaction tasks from a queue and rewrites them (see
    /// `floe compact --distributed`).
    Worker(worker::WorkerArgs),
    /// Writes a stream (Kafka, NDJSON files, stdin) into a table: few large files,
    /// exactly-once commits, bad records to a dead-letter sink.
    Ingest(Box<ingest::IngestArgs>),
    /// Keeps every table healthy by itself: compaction, expiry, orphan and metadata cleanup,
    /// triggered per table, scheduled under a budget, one maintainer per table (leases).
    Maintain(maintain::MaintainArgs),
    #[command(flatten)]
    Health(health::HealthCmd),
    /// Runs SQL over tables (ns.t) and metadata tables (ns.t$files, $snapshots, ...),
    /// at any kept snapshot with FOR VERSION AS OF / FOR TIMESTAMP AS OF.
    #[command(after_help = "Examples:
  floe sql 'SELECT count(*) FROM db.events'
  floe sql 'SELECT * FROM db.events FOR VERSION AS OF 8954597067493422955 LIMIT 10'
  floe sql \"SELECT count(*) FROM db.events FOR VERSION AS OF 'audit-2026-11'\"
  floe sql \"SELECT count(*) FROM db.events FOR TIMESTAMP AS OF '2026-11-30 10:00:00'\"
  floe sql \"SELECT file_path, record_count FROM db.events\\$files FOR VERSION AS OF 'audit-2026-11'\"
  floe sql 'SELECT snapshot_id, committed_at, operation FROM db.events$snapshots' --csv

VERSION AS OF takes a snapshot id, a tag or a branch; TIMESTAMP AS OF reads the snapshot
that was current then (UTC unless the time carries an offset; a number is seconds since
the epoch). Spark's VERSION AS OF / TIMESTAMP AS OF spellings work too.")]
    Sql {
        /// The statement.
        query: String,
        /// CSV output.
        #[arg(long)]
        csv: bool,
    },
}

/// `KEY=VALUE` pairs, both trimmed. An empty key is refused (the value is not echoed: it may be
/// a secret), and so is a value of whitespace only, which trimming would store as empty. The
/// messages say `NAME=VALUE`: every printed line goes through the secret masking, which would
/// show `KEY=...` as a secret key's value.
fn parse_kv(items: &[String]) -> Result<HashMap<String, String>> {
    items
        .iter()
        .map(|kv| {
            let Some((k, v)) = kv.split_once('=') else {
                anyhow::bail!(
                    "invalid property '{}': expected NAME=VALUE",
                    floe::catalog::config::mask(kv)
                );
            };
            let key = k.trim();
            if key.is_empty() {
                anyhow::bail!(
                    "invalid property: the name before '=' is empty; expected NAME=VALUE"
                );
            }
            if !v.is_empty() && v.trim().is_empty() {
                anyhow::bail!(
                    "invalid property {key}: the value is only whitespace (an empty value is \
                     `{key}=`; --unset {key} removes the property)"
                );
            }
            Ok((key.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Resolves the catalog from flags, the config file and FLOE_CATALOG__* variables.
fn catalog_config(g: &Global) -> Result<CatalogConfig> {
    let overrides = parse_kv(&g.catalog_props)?.into_iter().collect();
    let selection = config::CatalogSelection {
        name: g.catalog.clone(),
        uri: g.catalog_uri.clone(),
        warehouse: g.warehouse.clone(),
        catalog_name: g.catalog_name.clone(),
        overrides,
    };
    let file = config::ConfigFile::discover(g.config.as_deref())?;
    floe::ingest::source::kafka_client::set_file_settings(file.kafka.clone());
    let env = config::env_catalogs(std::env::vars());
    Ok(config::resolve(&selection, &file, &env)?)
}

/// Catalogs this process connected to: closed before it exits.
static CONNECTED: Mutex<Vec<Catalog>> = Mutex::new(Vec::new());

async fn open(config: &CatalogConfig) -> Result<Catalog> {
    let catalog = Catalog::connect(config).await?;
    CONNECTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(catalog.clone());
    Ok(catalog)
}

async fn connect(g: &Global) -> Result<Catalog> {
    open(&catalog_config(g)?).await
}

/// A count option that must be at least 1 (`--max-concurrent 0` would do nothing, or be
/// silently taken as 1).
pub(crate) fn positive(option: &str, n: u64) -> Result<u64> {
    if n == 0 {
        return Err(floe::Error::invalid_option(option, 0, "must be at least 1").into());
    }
    Ok(n)
}

/// A size option that must be greater than zero bytes.
pub(crate) fn positive_size(option: &str, s: &str) -> Result<u64> {
    let n = parse_size(option, s)?;
    if n == 0 {
        return Err(floe::Error::invalid_option(option, s, "must be greater than 0 bytes").into());
    }
    Ok(n)
}

/// `--key 'a, b'`: the key column names.
pub(crate) fn key_columns(s: &str) -> Vec<String> {
    s.split(',')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

async fn run(cli: Cli, out: &Out) -> Result<()> {
    let g = &cli.global;
    match cli.command {
        Command::Quickstart => quickstart::run(g.warehouse.clone(), out).await,
        Command::Catalog(cmd) => table::catalog_cmd(g, cmd, out).await,
        Command::Namespace(cmd) => table::namespace_cmd(g, cmd, out).await,
        Command::Table(cmd) => table::table_cmd(g, cmd, out).await,
        Command::Append {
            table,
            files,
            format,
            target_file_size,
            mode,
            key,
            dry_run,
        } => {
            let ident = parse_table_ident(&table)?;
            let format = format.as_deref().map(InputFormat::parse).transpose()?;
            let mode = floe::operations::append::AppendMode::parse(&mode)?;
            let key = key.as_deref().map(key_columns);
            if key.is_some() && mode != floe::operations::append::AppendMode::Upsert {
                return Err(floe::Error::invalid_option(
                    "--key",
                    key.unwrap_or_default().join(","),
                    "only with --mode upsert",
                )
                .into());
            }
            let options = WriteOptions {
                target_file_size_bytes: target_file_size
                    .as_deref()
                    .map(|s| positive_size("--target-file-size", s))
                    .transpose()?,
                ..Default::default()
            };
            // Every input must be there before anything is written: a missing file (or a
            // pattern the shell did not expand) is an error, not an empty append.
            for f in &files {
                let problem = if !f.exists() {
                    "no such file"
                } else if f.is_dir() {
                    "is a directory"
                } else {
                    continue;
                };
                return Err(floe::Error::InputFile {
                    path: f.clone(),
                    reason: problem.into(),
                }
                .into());
            }
            let catalog = connect(g).await?;
            let (bar, progress) = out.progress("input files");
            let metrics = floe::operations::append::AppendBuilder::new(&catalog, ident)
                .with_inputs(files)
                .with_format(format)
                .with_write_options(options)
                .with_mode(mode)
                .with_key(key)
                .with_progress(progress)
                .run(dry_run)
                .await;
            bar.finish_and_clear();
            let m = metrics?;
            out.result(&serde_json::to_value(&m)?, || match m.snapshot_id {
                _ if m.dry_run && m.mode == floe::operations::append::AppendMode::Upsert => format!(
                    "dry run: {} rows from {} file(s) read and checked; would upsert {} key(s) \
                     ({} duplicate input rows dropped), replacing {} live row(s) of {}",
                    m.rows + m.duplicate_rows, m.input_files, m.rows, m.duplicate_rows,
                    m.replaced_rows, m.table
                ),
                _ if m.dry_run => format!(
                    "dry run: {} rows from {} file(s) ({} bytes) read and checked; nothing written to {}",
                    m.rows, m.input_files, m.input_bytes, m.table
                ),
                Some(id) if m.mode == floe::operations::append::AppendMode::Upsert => format!(
                    "upserted {} key(s) ({}) from {} file(s) into {}: {} row(s) replaced, {} duplicate \
                     input row(s) dropped; {} data file(s), {}, {} file(s) removed whole; \
                     snapshot {id} ({} ms)",
                    m.rows, m.key.join(", "), m.input_files, m.table, m.replaced_rows,
                    m.duplicate_rows, m.data_files,
                    if m.deletion_vectors > 0 {
                        format!("{} deletion vector(s)", m.deletion_vectors)
                    } else {
                        format!("{} position delete file(s)", m.position_delete_files)
                    },
                    m.removed_data_files, m.duration_ms
                ),
                Some(id) => format!(
                    "appended {} rows from {} file(s) to {} as {} data file(s), {} bytes, snapshot {id} ({} ms)",
                    m.rows, m.input_files, m.table, m.data_files, m.bytes_written, m.duration_ms
                ),
                None => format!("no rows in the input: nothing committed to {}", m.table),
            });
            Ok(())
        }
        Command::Delete {
            table,
            filter,
            mode,
            dry_run,
        } => {
            let ident = parse_table_ident(&table)?;
            let mode = mode
                .as_deref()
                .map(|m| floe::operations::change::delete::DeleteMode::parse("--mode", m))
                .transpose()?;
            let catalog = connect(g).await?;
            let (bar, progress) = out.progress("data files");
            let metrics =
                floe::operations::change::delete::DeleteBuilder::new(&catalog, ident, filter)
                    .with_mode(mode)
                    .with_progress(progress)
                    .run(dry_run)
                    .await;
            bar.finish_and_clear();
            let m = metrics?;
            out.result(&serde_json::to_value(&m)?, || {
                let scanned = format!(
                    "{} data file(s) read ({} bytes{})",
                    m.files_scanned,
                    m.bytes_scanned,
                    if m.pruned {
                        ", pruned by the filter"
                    } else {
                        ""
                    }
                );
                match m.snapshot_id {
                    _ if m.dry_run => format!(
                        "dry run: {} row(s) in {} file(s) of {} match; {scanned}; nothing changed",
                        m.rows_deleted, m.files_matched, m.table
                    ),
                    None => format!(
                        "no row of {} matches: nothing to delete; {scanned}",
                        m.table
                    ),
                    Some(id) => {
                        format!(
                        "deleted {} row(s) from {} ({}): {} file(s) removed whole, {}, {} file(s) \
                         rewritten into {}; {scanned}; snapshot {id} ({} ms)",
                        m.rows_deleted, m.table, m.mode.name(), m.removed_data_files,
                        if m.deletion_vectors > 0 {
                            format!("{} deletion vector(s)", m.deletion_vectors)
                        } else {
                            format!("{} position delete file(s)", m.position_delete_files)
                        },
                        m.rewritten_data_files, m.added_data_files, m.duration_ms
                    )
                    }
                }
            });
            Ok(())
        }
        Command::Compact {
            table,
            filter,
            target_file_size,
            min_input_files,
            max_concurrent,
            partial_progress,
            max_commits,
            rewrite_all,
            sort_by,
            options,
            dry_run,
            distributed,
            queue,
            lease_ttl,
            worker_timeout,
        } => {
            let min_input_files = min_input_files
                .map(|n| positive("--min-input-files", n))
                .transpose()?;
            let max_concurrent = max_concurrent
                .map(|n| positive("--max-concurrent", n))
                .transpose()?;
            let max_commits = max_commits
                .map(|n| positive("--max-commits", n))
                .transpose()?;
            let target_file_size = target_file_size
                .map(|s| positive_size("--target-file-size", &s))
                .transpose()?;
            let catalog = connect(g).await?;
            // Typed flags and `--option K=V` fill one typed set of options, parsed once.
            let mut opts = floe::operations::compact::CompactOptions::default();
            for (k, v) in parse_kv(&options)? {
                opts.set(&k, &v)?;
            }
            if let Some(t) = target_file_size {
                opts.target_file_size_bytes = Some(t);
            }
            if let Some(n) = min_input_files {
                opts.min_input_files = Some(n);
            }
            if let Some(n) = max_concurrent {
                opts.max_concurrent_file_group_rewrites = Some(n);
            }
            if partial_progress {
                opts.partial_progress_enabled = Some(true);
            }
            if let Some(n) = max_commits {
                opts.partial_progress_max_commits = Some(n);
            }
            if rewrite_all {
                opts.rewrite_all = Some(true);
            }
            let mut b = floe::operations::compact::CompactBuilder::new(
                &catalog,
                parse_table_ident(&table)?,
            )
            .with_where(filter)
            .with_sort_by(sort_by)
            .with_options(opts);
            let lease_ttl = floe::base::properties::parse_duration("--lease-ttl", &lease_ttl)?;
            let queue_store = match (distributed, &queue) {
                (true, Some(uri)) => Some(std::sync::Arc::new(
                    floe::coordination::Store::connect(uri).await?,
                )),
                _ => None,
            };
            if let Some(store) = &queue_store {
                b = b.with_distributed(floe::operations::compact::distributed::Distributed {
                    store: store.clone(),
                    coordinator: floe::maintain::service::default_holder(),
                    lease_ttl,
                    poll: floe::operations::compact::distributed::Distributed::POLL,
                    worker_timeout: worker_timeout
                        .as_deref()
                        .map(|v| floe::base::properties::parse_duration("--worker-timeout", v))
                        .transpose()?,
                });
            }
            let (bar, progress) = out.progress("groups");
            let m = b.with_progress(progress).run(dry_run).await;
            bar.finish_and_clear();
            let m = m?;
            let failed: Vec<String> = m
                .failed_groups
                .iter()
                .map(|f| {
                    format!(
                        "group {} ({} files): {}",
                        f.partition, f.input_files, f.reason
                    )
                })
                .collect();
            if m.all_groups_failed() {
                // Nothing was committed: the compaction failed, even if each failure was a
                // clean conflict with another writer.
                return Err(Failure {
                    message: format!(
                        "compaction of {} committed nothing: all {} group(s) ({} data files) failed: {}",
                        m.table,
                        failed.len(),
                        m.failed_data_files_count,
                        failed.join("; ")
                    ),
                    details: json!({
                        "failed_groups": m.failed_groups,
                        "failed_data_files_count": m.failed_data_files_count,
                    }),
                }
                .into());
            }
            out.result(&serde_json::to_value(&m)?, || output::compact_text(&m));
            if !failed.is_empty() {
                out.warn(format!(
                    "compaction of {}: {} of {} group(s) not committed (the others were): {}",
                    m.table,
                    failed.len(),
                    m.plan.groups.len(),
                    failed.join("; ")
                ));
            }
            Ok(())
        }
        Command::Ingest(args) => {
            let config = catalog_config(g)?;
            ingest::run(&open(&config).await?, &config, *args, out).await
        }
        Command::Maintain(args) => maintain::run(g, args, out).await,
        Command::Worker(args) => {
            // Credentials of the worker's own catalog configuration, if it has one.
            let storage = catalog_config(g)
                .map(|c| c.storage_props())
                .unwrap_or_default();
            worker::run(storage, args, out).await
        }
        Command::Health(cmd) => health::run(&connect(g).await?, cmd, out).await,
        Command::Sql { query, csv } => {
            if csv && g.json {
                anyhow::bail!("--csv and --json are two output formats: give one");
            }
            let catalog = connect(g).await?;
            let batches = floe::operations::sql::SqlBuilder::new(&catalog, query)
                .query()
                .await?;
            out.batches(&batches, csv)
        }
    }
}

fn main() {
    // Library errors (the iceberg crate's among them) capture a backtrace when created if
    // RUST_BACKTRACE is set, and some are created and dropped on the read path of every file:
    // ~6% of a compaction. floe prints errors as one line, never their backtrace, so library
    // backtraces stay off unless asked for with RUST_LIB_BACKTRACE (panics still honour
    // RUST_BACKTRACE). Set before any thread starts.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(async_main());
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // Exit without dropping the runtime: its shutdown waits for every worker and blocking
    // thread, and one stuck in a library's background task (a connection pool's maintenance
    // loop) would keep a finished command alive. Everything is committed, printed and flushed.
    std::process::exit(code);
}

/// Colours on stderr only for a terminal, and never with NO_COLOR set (https://no-color.org).
fn stderr_colors() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

async fn async_main() -> i32 {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FLOE_LOG")
                // librdkafka's log lines go to debug (target `librdkafka`); floe reports failures itself.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(config::masked_stderr)
        .with_ansi(stderr_colors())
        .init();
    let out = Out::new(cli.global.json);
    let code = match run(cli, &out).await {
        Ok(()) => 0,
        Err(e) => {
            out.error(&e);
            1
        }
    };
    let connected = std::mem::take(&mut *CONNECTED.lock().unwrap_or_else(|e| e.into_inner()));
    for catalog in connected {
        catalog.close(Duration::from_secs(2)).await;
    }
    code
}
