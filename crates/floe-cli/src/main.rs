//! The `floe` command line: arguments -> library calls -> human or `--json` output.

mod health;
mod ingest;
mod output;
mod quickstart;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use floe::catalog::{config, parse_namespace, parse_table_ident, Catalog, CatalogConfig, NewTable};
use floe::ingest::files::InputFormat;
use floe::properties::parse_size;
use floe::write::WriteOptions;
use serde_json::json;

use crate::output::{Failure, Out};

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
        /// Reads and checks every record, writes and commits nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Compacts small files (Iceberg's rewrite_data_files, bin-pack) in one replace commit.
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
        /// Sort each output: 'col [asc|desc] [nulls first|last], ...' (default: the table's
        /// sort order, if any).
        #[arg(long)]
        sort_by: Option<String>,
        /// Any Iceberg rewrite_data_files option as K=V (min-file-size-bytes,
        /// max-file-group-size-bytes, rewrite-job-order, delete-file-threshold, ...).
        #[arg(long = "option", value_name = "K=V")]
        options: Vec<String>,
        /// Print the plan and commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Writes a stream (Kafka, NDJSON files, stdin) into a table: few large files,
    /// exactly-once commits, bad records to a dead-letter sink.
    Ingest(ingest::IngestArgs),
    #[command(flatten)]
    Health(health::HealthCmd),
    /// Runs SQL over tables (ns.t) and metadata tables (ns.t$files, $snapshots, ...).
    Sql {
        /// The statement.
        query: String,
        /// CSV output.
        #[arg(long)]
        csv: bool,
    },
}

#[derive(Subcommand, Debug)]
enum CatalogCmd {
    /// Lists the catalogs of the config file and the environment.
    List,
    /// Shows the catalog a command would use, connects to it and counts its namespaces.
    Show,
}

#[derive(Subcommand, Debug)]
enum NamespaceCmd {
    /// Creates a namespace.
    Create { namespace: String },
    /// Lists namespaces.
    List,
}

#[derive(Subcommand, Debug)]
enum TableCmd {
    /// Creates an Iceberg v2 table.
    Create {
        table: String,
        /// Columns: 'id bigint not null, ts timestamp, name string, ...'.
        #[arg(long, conflicts_with = "schema_file")]
        schema: Option<String>,
        /// Iceberg schema JSON file.
        #[arg(long)]
        schema_file: Option<PathBuf>,
        /// Partition spec: 'day(ts), bucket(16, id), truncate(4, name), identity(col)'.
        #[arg(long)]
        partition: Option<String>,
        /// Table property k=v (repeatable).
        #[arg(long = "property", value_name = "K=V")]
        properties: Vec<String>,
    },
    /// Lists tables (of one namespace, or all).
    List { namespace: Option<String> },
    /// Shows schema, partition spec, properties and current snapshot.
    Describe { table: String },
    /// Drops a table; --purge also deletes its files.
    Drop {
        table: String,
        /// Also delete the files the table references (inside its location).
        #[arg(long)]
        purge: bool,
        /// With --purge, also delete referenced files outside the table location (added with
        /// add_files, say); by default they are kept and listed. Never another table's files.
        #[arg(long, requires = "purge")]
        delete_external_files: bool,
    },
    /// Sets (k=v) and removes (--unset k) table properties.
    SetProperty {
        table: String,
        #[arg(value_name = "K=V")]
        set: Vec<String>,
        #[arg(long, value_name = "K")]
        unset: Vec<String>,
    },
}

fn parse_kv(items: &[String]) -> Result<HashMap<String, String>> {
    items
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| anyhow::anyhow!("invalid property '{kv}': expected KEY=VALUE"))
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

async fn run(cli: Cli, out: &Out) -> Result<()> {
    let g = &cli.global;
    match cli.command {
        Command::Quickstart => quickstart::run(g.warehouse.clone(), out).await,
        Command::Catalog(CatalogCmd::List) => {
            let file = config::ConfigFile::discover(g.config.as_deref())?;
            let env = config::env_catalogs(std::env::vars());
            let mut names: Vec<String> = file.catalogs.keys().chain(env.keys()).cloned().collect();
            names.sort();
            names.dedup();
            let mut rows = Vec::new();
            for name in &names {
                let sel = config::CatalogSelection {
                    name: Some(name.clone()),
                    ..Default::default()
                };
                let row = match config::resolve(&sel, &file, &env) {
                    Ok(c) => {
                        json!({"name": name, "type": c.kind.as_str(), "properties": c.redacted()})
                    }
                    Err(e) => json!({"name": name, "error": config::mask(&e.to_string())}),
                };
                rows.push(row);
            }
            let source = file.path.as_ref().map(|p| p.display().to_string());
            out.result(
                &json!({"config_file": source, "default": file.default_catalog, "catalogs": rows}),
                || {
                    let mut text = format!(
                        "config file: {}\n",
                        source.clone().unwrap_or_else(|| "(none)".into())
                    );
                    for r in &rows {
                        let default = file.default_catalog.as_deref() == r["name"].as_str();
                        text.push_str(&format!(
                            "{}{} {} {}\n",
                            r["name"].as_str().unwrap_or(""),
                            if default { " (default)" } else { "" },
                            r["type"].as_str().unwrap_or("?"),
                            r["properties"]["uri"]
                                .as_str()
                                .or(r["error"].as_str())
                                .unwrap_or("")
                        ));
                    }
                    text.push_str("embedded: sqlite catalog in <warehouse>/catalog.db (when no catalog is named)");
                    text
                },
            );
            Ok(())
        }
        Command::Catalog(CatalogCmd::Show) => {
            let config = catalog_config(g)?;
            let catalog = open(&config).await?;
            let namespaces = catalog.list_namespaces().await?;
            let props = config.redacted();
            out.result(
                &json!({"name": config.name, "type": config.kind.as_str(), "properties": props, "namespaces": namespaces.len()}),
                || {
                    let mut text = format!("{} ({})\n", config.name, config.kind.as_str());
                    for (k, v) in &props {
                        text.push_str(&format!("  {k} = {v}\n"));
                    }
                    text.push_str(&format!("connected: {} namespace(s)", namespaces.len()));
                    text
                },
            );
            Ok(())
        }
        Command::Namespace(cmd) => {
            let catalog = connect(g).await?;
            match cmd {
                NamespaceCmd::Create { namespace } => {
                    catalog
                        .create_namespace(&parse_namespace(&namespace)?)
                        .await?;
                    out.result(&json!({"created": namespace}), || {
                        format!("created namespace {namespace}")
                    });
                }
                NamespaceCmd::List => {
                    let names = catalog.list_namespaces().await?;
                    out.result(&json!(names), || names.join("\n"));
                }
            }
            Ok(())
        }
        Command::Table(cmd) => table_cmd(g, cmd, out).await,
        Command::Append {
            table,
            files,
            format,
            target_file_size,
            dry_run,
        } => {
            let ident = parse_table_ident(&table)?;
            let format = format.as_deref().map(InputFormat::parse).transpose()?;
            let options = WriteOptions {
                target_file_size_bytes: target_file_size
                    .as_deref()
                    .map(|s| positive_size("--target-file-size", s))
                    .transpose()?,
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
            let metrics = floe::append::AppendBuilder::new(&catalog, ident)
                .with_inputs(files)
                .with_format(format)
                .with_write_options(options)
                .with_dry_run(dry_run)
                .with_progress(progress)
                .execute()
                .await;
            bar.finish_and_clear();
            let m = metrics?;
            out.result(&serde_json::to_value(&m)?, || match m.snapshot_id {
                _ if m.dry_run => format!(
                    "dry run: {} rows from {} file(s) ({} bytes) read and checked; nothing written to {}",
                    m.rows, m.input_files, m.input_bytes, m.table
                ),
                Some(id) => format!(
                    "appended {} rows from {} file(s) to {} as {} data file(s), {} bytes, snapshot {id} ({} ms)",
                    m.rows, m.input_files, m.table, m.data_files, m.bytes_written, m.duration_ms
                ),
                None => format!("no rows in the input: nothing committed to {}", m.table),
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
            let mut opts = floe::compact::CompactOptions::default();
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
            let b = floe::compact::CompactBuilder::new(&catalog, parse_table_ident(&table)?)
                .with_where(filter)
                .with_sort_by(sort_by)
                .with_dry_run(dry_run)
                .with_options(opts);
            let (bar, progress) = out.progress("groups");
            let m = b.with_progress(progress).execute().await;
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
                        "compaction of {} committed nothing: all {} group(s) failed: {}",
                        m.table,
                        failed.len(),
                        failed.join("; ")
                    ),
                    details: json!({ "failed_groups": m.failed_groups }),
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
        Command::Ingest(args) => ingest::run(&connect(g).await?, args, out).await,
        Command::Health(cmd) => health::run(&connect(g).await?, cmd, out).await,
        Command::Sql { query, csv } => {
            if csv && g.json {
                anyhow::bail!("--csv and --json are two output formats: give one");
            }
            let catalog = connect(g).await?;
            let batches = floe::sql::query(&catalog, &query).await?;
            out.batches(&batches, csv)
        }
    }
}

async fn table_cmd(g: &Global, cmd: TableCmd, out: &Out) -> Result<()> {
    let catalog = connect(g).await?;
    match cmd {
        TableCmd::Create {
            table,
            schema,
            schema_file,
            partition,
            properties,
        } => {
            let ident = parse_table_ident(&table)?;
            let schema = match (schema, schema_file) {
                (Some(s), _) => floe::table::schema::parse_schema(&s)?,
                (None, Some(f)) => {
                    let text = std::fs::read_to_string(&f)
                        .with_context(|| format!("cannot read schema file {}", f.display()))?;
                    floe::table::schema::parse_schema_json(&text)?
                }
                (None, None) => {
                    anyhow::bail!("give the columns with --schema '...' or --schema-file FILE")
                }
            };
            let spec = match partition.as_deref() {
                Some(p) if !p.trim().is_empty() => {
                    floe::table::schema::parse_partition(p, &schema)?
                }
                _ => floe::table::schema::unpartitioned(),
            };
            let t = catalog
                .create_table(NewTable {
                    ident,
                    schema,
                    partition_spec: spec,
                    sort_order: None,
                    properties: parse_kv(&properties)?,
                })
                .await?;
            out.result(&output::describe_json(&t), || {
                format!("created table {table} at {}", t.metadata().location())
            });
        }
        TableCmd::List { namespace } => {
            let ns = namespace.as_deref().map(parse_namespace).transpose()?;
            let tables: Vec<String> = catalog
                .list_tables(ns.as_ref())
                .await?
                .iter()
                .map(floe::catalog::ident_string)
                .collect();
            out.result(&json!(tables), || tables.join("\n"));
        }
        TableCmd::Describe { table } => {
            let t = catalog.load_table(&parse_table_ident(&table)?).await?;
            out.result(&output::describe_json(&t), || output::describe_text(&t));
        }
        TableCmd::Drop {
            table,
            purge,
            delete_external_files,
        } => {
            let (bar, progress) = out.progress("files");
            let r = floe::clean::purge::DropBuilder::new(&catalog, parse_table_ident(&table)?)
                .purge(purge)
                .delete_external_files(delete_external_files)
                .with_progress(progress)
                .execute()
                .await;
            bar.finish_and_clear();
            let r = r?;
            let mut v = serde_json::to_value(&r)?;
            v["dropped"] = json!(table);
            out.result(&v, || {
                let mut s = format!("dropped {table}");
                if r.purged_by_server {
                    s.push_str(" (the catalog server purges its files)");
                } else if r.purged {
                    s.push_str(&format!(
                        " and deleted {} of its {} referenced file(s)",
                        r.deleted.deleted, r.referenced_files
                    ));
                    s.push_str(&output::kept_lines(&r.kept));
                    if r.deleted.failed > 0 {
                        s.push_str(&format!(
                            "\n  {} delete(s) failed: {}",
                            r.deleted.failed,
                            r.deleted.failures.join("; ")
                        ));
                    }
                }
                s
            });
        }
        TableCmd::SetProperty { table, set, unset } => {
            if set.is_empty() && unset.is_empty() {
                anyhow::bail!("nothing to change: give KEY=VALUE pairs and/or --unset KEY");
            }
            let t = catalog
                .set_properties(&parse_table_ident(&table)?, parse_kv(&set)?, unset)
                .await?;
            out.result(
                &json!({"table": table, "properties": t.metadata().properties()}),
                || format!("updated properties of {table}"),
            );
        }
    }
    Ok(())
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
                // rskafka logs every reconnect attempt at warn; floe reports the failure itself.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rskafka=error")),
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
