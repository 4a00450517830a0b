//! `floe ingest`: arguments -> the library's ingest engine, a progress line per commit,
//! metrics on --metrics-addr, SIGINT/SIGTERM commit and stop.

use anyhow::Result;
use clap::Args;
use floe::base::properties::{parse_duration, parse_size};
use floe::catalog::{parse_table_ident, Catalog, CatalogConfig, CatalogKind};
use floe::ingest::dead_letter::DeadLetterSink;
use floe::ingest::stream::{CommitReport, IngestBuilder, IngestOptions};

use crate::output::{human_bytes, Out};

#[derive(Args, Debug)]
pub struct IngestArgs {
    /// Table as NAMESPACE.TABLE.
    table: String,
    /// kafka://HOST:PORT/TOPIC[?partitions=0,1&start=earliest|latest], '-' (stdin), or an
    /// NDJSON file path or glob. Kafka client properties go in the query too, e.g.
    /// `?security.protocol=SASL_SSL&sasl.mechanism=SCRAM-SHA-512&sasl.username=U` (password in
    /// FLOE_KAFKA__SASL__PASSWORD) or `?security.protocol=SASL_SSL&sasl.mechanism=AWS_MSK_IAM`.
    #[arg(long)]
    source: String,
    /// Keep reading appended lines and new files (file sources).
    #[arg(long)]
    follow: bool,
    /// Writer identity in snapshot summaries; positions resume per writer id (default:
    /// derived from the source).
    #[arg(long)]
    writer_id: Option<String>,
    /// Commit at least this often (default 60s).
    #[arg(long, default_value = "60s")]
    commit_interval: String,
    /// Commit once this much input arrived (e.g. 512MiB).
    #[arg(long)]
    commit_bytes: Option<String>,
    /// Commit once this many records arrived.
    #[arg(long)]
    commit_records: Option<u64>,
    /// Memory for buffered rows before spilling to disk (default floe.ingest.write-buffer-size
    /// or 256MiB).
    #[arg(long)]
    write_buffer_size: Option<String>,
    /// none | hash | range: how rows are spread over the --write-parallelism writer tasks
    /// (default write.distribution-mode, else none).
    #[arg(long)]
    distribution_mode: Option<String>,
    /// Writer tasks (files are written in parallel at commit).
    #[arg(long, default_value_t = 1)]
    write_parallelism: usize,
    /// Target data file size (default write.target-file-size-bytes).
    #[arg(long)]
    target_file_size: Option<String>,
    /// Dead-letter sink: FILE.ndjson or kafka://HOST:PORT/TOPIC.
    #[arg(long)]
    dead_letter: Option<String>,
    /// Stop with an error once more records than this were rejected.
    #[arg(long)]
    max_bad_records: Option<u64>,
    /// append (default) | upsert (a record replaces its key's row; a Kafka tombstone or a
    /// record with the delete field true deletes it) | cdc (Debezium change events).
    #[arg(long, default_value = "append")]
    mode: String,
    /// Upsert/cdc key columns, comma-separated (default: the table's primary key).
    #[arg(long)]
    key: Option<String>,
    /// Upsert: the field that marks a record deleted (default __deleted).
    #[arg(long)]
    delete_field: Option<String>,
    /// Serve Prometheus metrics here, e.g. 127.0.0.1:9464.
    #[arg(long)]
    metrics_addr: Option<String>,
    /// Commit and stop once no record arrived for this long (e.g. 5s).
    #[arg(long)]
    stop_when_idle: Option<String>,
    /// Once the source (a Kafka broker) has not answered for this long, commit what was read
    /// and exit with an error (default: the table property floe.ingest.source-timeout, else
    /// wait forever, reporting the wait every 5 s).
    #[arg(long, value_name = "DURATION")]
    source_timeout: Option<String>,
    /// Run the table's maintenance in this process between commits: compaction (rolling up
    /// the small files of partitions still being written, by size tier), snapshot expiry,
    /// orphan and metadata cleanup, by the table's floe.maintain.* policy. Default: the
    /// table property floe.ingest.maintain.
    #[arg(long)]
    maintain: bool,
    /// Scale-out: this process is one worker of group NAME. Kafka's consumer group (group.id,
    /// default NAME) assigns the partitions among the workers and moves them when one joins,
    /// stops or dies, or each worker reads a static subset (`?partitions=0,1`). Workers hand
    /// their files to the group's coordinator (one of them, elected by lease), which commits
    /// once per interval for all. NAME is the writer id the group's positions are stored under.
    #[arg(long, value_name = "NAME")]
    group: Option<String>,
    /// This worker's name in the group (default host:pid).
    #[arg(long)]
    worker_id: Option<String>,
    /// Lease and run-history database of --maintain and --group (default: the SQL catalog's database,
    /// the one `floe maintain` uses, so the two never run a job on the table at once).
    #[arg(long, value_name = "URI", env = "FLOE_LEASE_DB")]
    lease_db: Option<String>,
}

fn default_writer_id(source: &str) -> String {
    let base = source.split('?').next().unwrap_or(source);
    match base.strip_prefix("kafka://") {
        // The topic, not the brokers: moving brokers keeps the positions.
        Some(rest) => format!(
            "kafka:{}",
            rest.split_once('/').map(|x| x.1).unwrap_or(rest)
        ),
        None => format!("ingest:{}", base.strip_prefix("file://").unwrap_or(base)),
    }
}

fn progress_line(r: &CommitReport) -> String {
    let lag: i64 = r.lag.iter().map(|l| l.lag).sum();
    let throttled = match &r.debt {
        Some(d) if !d.over.is_empty() => format!(
            "; backpressure: {}; next commit in {} ms",
            d.over.join(", "),
            r.commit_interval_ms
        ),
        _ => String::new(),
    };
    format!(
        "{} {}: {} records{} -> {} file(s), {} in {} partition(s); flush {} ms, commit {} ms{}{}{}{}",
        if r.handoff.is_some() { "hand-off" } else { "commit" },
        r.commit,
        r.records,
        match (r.bad_records, r.replaced_rows) {
            (0, 0) => String::new(),
            (b, 0) => format!(" ({b} bad)"),
            (0, n) => format!(" ({n} live rows replaced or deleted)"),
            (b, n) => format!(" ({b} bad, {n} live rows replaced or deleted)"),
        },
        r.data_files,
        human_bytes(r.bytes),
        r.partitions,
        r.flush_ms,
        r.commit_ms,
        if r.spilled_bytes > 0 { format!("; spilled {}", human_bytes(r.spilled_bytes)) } else { String::new() },
        if r.lag.is_empty() { String::new() } else { format!("; lag {lag}") },
        if r.attempts > 1 { format!("; {} attempts (another process committed)", r.attempts) } else { String::new() },
        throttled,
    )
}

/// For a file source: the path or pattern when no file matches it (yet).
fn nothing_to_read_yet(source: &str) -> Option<String> {
    if source.starts_with("kafka://") || source == "-" || source == "stdin" {
        return None;
    }
    let path = std::path::absolute(source.strip_prefix("file://").unwrap_or(source)).ok()?;
    let (dir, pattern) = (path.parent()?, path.file_name()?.to_string_lossy());
    let any = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            e.path().is_file()
                && floe::ingest::source::file::glob_match(
                    &pattern,
                    &e.file_name().to_string_lossy(),
                )
        });
    (!any).then(|| path.display().to_string())
}

pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub async fn run(
    catalog: &Catalog,
    config: &CatalogConfig,
    a: IngestArgs,
    out: &Out,
) -> Result<()> {
    let ident = parse_table_ident(&a.table)?;
    let source = floe::ingest::source::open(&a.source, a.follow)?;
    if a.follow {
        if let Some(pattern) = nothing_to_read_yet(&a.source) {
            eprintln!("no file matches {pattern} yet: waiting for files (--follow)");
        }
    }
    let mut o = IngestOptions::new(match (&a.group, &a.writer_id) {
        (Some(g), None) => g.clone(),
        (Some(_), Some(_)) => {
            return Err(floe::Error::invalid_option(
                "--writer-id",
                a.writer_id.as_deref().unwrap_or(""),
                "a group's writer id is its name: give --group only",
            )
            .into())
        }
        (None, w) => w
            .clone()
            .unwrap_or_else(|| default_writer_id(&source.uri())),
    });
    o.commit_interval = parse_duration("--commit-interval", &a.commit_interval)?;
    o.commit_bytes = a
        .commit_bytes
        .as_deref()
        .map(|s| parse_size("--commit-bytes", s))
        .transpose()?;
    o.commit_records = a.commit_records;
    o.write_buffer_size = a
        .write_buffer_size
        .as_deref()
        .map(|s| parse_size("--write-buffer-size", s))
        .transpose()?;
    o.distribution = a.distribution_mode.as_deref().map(str::parse).transpose()?;
    o.write_parallelism = a.write_parallelism;
    o.max_bad_records = a.max_bad_records;
    o.stop_when_idle = a
        .stop_when_idle
        .as_deref()
        .map(|s| parse_duration("--stop-when-idle", s))
        .transpose()?;
    o.source_timeout = a
        .source_timeout
        .as_deref()
        .map(|s| parse_duration("--source-timeout", s))
        .transpose()?;
    o.write.target_file_size_bytes = a
        .target_file_size
        .as_deref()
        .map(|s| parse_size("--target-file-size", s))
        .transpose()?;
    o.maintain = a.maintain.then_some(true);
    o.changes = floe::ingest::upsert::ChangeOptions {
        mode: a.mode.parse()?,
        key: a.key.as_deref().map(crate::key_columns),
        delete_field: a.delete_field.clone(),
    };
    // The lease store `floe maintain` shares: --lease-db, else the SQL catalog's database;
    // with a REST catalog and no --lease-db, a private one (no other maintainer sees it).
    o.maintain_store = match (&a.lease_db, config.kind) {
        (Some(u), _) => Some(u.clone()),
        (None, CatalogKind::Sql) => Some(config.uri.clone()),
        (None, _) => None,
    };
    if a.group.is_some() {
        let store = o.maintain_store.clone().ok_or_else(|| {
            floe::Error::invalid_option(
                "--lease-db",
                "",
                "--group needs a database every worker reaches: give --lease-db postgres://... \
                 (a REST catalog has none)",
            )
        })?;
        o.group = Some(floe::ingest::group::GroupOptions {
            worker: a
                .worker_id
                .clone()
                .unwrap_or_else(floe::maintain::service::default_holder),
            store_uri: store,
            lease_ttl: (o.commit_interval * 3).max(std::time::Duration::from_secs(10)),
        });
    }
    // Zero counts, sizes and durations are refused before anything starts.
    o.validate()?;
    let metrics = floe::ingest::metrics::Metrics::new();
    let _server = match &a.metrics_addr {
        Some(addr) => Some(floe::ingest::metrics::serve(addr, metrics.clone()).await?),
        None => None,
    };
    // The table's maintenance (with --maintain or floe.ingest.maintain) and the debt measure
    // of backpressure, logged on stderr as `[maintain] ...`.
    let mut b = IngestBuilder::new(catalog, ident, source, o)
        .with_metrics(metrics)
        .with_maintenance(floe::maintain::in_stream::InStream::new())
        .with_shutdown(shutdown_signal());
    if let Some(dl) = &a.dead_letter {
        b = b.with_dead_letter(DeadLetterSink::open(dl).await?);
    }
    let json = out.is_json();
    let summary = b
        .on_source_status(move |s| {
            // The line on stderr in both modes; with --json also the event on stdout.
            eprintln!("[ingest] {}", s.line());
            if json {
                if let Ok(s) = serde_json::to_string(&serde_json::json!({ "source_status": s })) {
                    crate::output::line(format_args!("{s}"));
                }
            }
        })
        .on_coordinate(move |c| {
            if json {
                if let Ok(s) = serde_json::to_string(&serde_json::json!({ "coordinated": c })) {
                    crate::output::line(format_args!("{s}"));
                }
            } else {
                eprintln!(
                    "coordinator: committed {} hand-off(s), {} records in {} file(s) as snapshot {}{}",
                    c.handoffs,
                    c.records,
                    c.data_files,
                    c.snapshot_id,
                    if c.refused.is_empty() { String::new() } else { format!("; refused: {}", c.refused.join("; ")) }
                );
            }
        })
        .on_commit(move |r| {
            if json {
                if let Ok(s) = serde_json::to_string(r) {
                    crate::output::line(format_args!("{s}"));
                }
            } else {
                eprintln!("{}", progress_line(r));
            }
        })
        .execute()
        .await?;
    out.result(&serde_json::to_value(&summary)?, || {
        format!(
            "ingested into {} as writer '{}': {} records ({} bad) in {} commit(s), {} data file(s); stopped by {} after {} ms",
            summary.table,
            summary.writer_id,
            summary.records,
            summary.bad_records,
            summary.commits,
            summary.data_files,
            summary.stopped_by,
            summary.duration_ms
        )
    });
    Ok(())
}
