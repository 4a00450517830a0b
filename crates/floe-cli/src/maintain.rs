//! `floe maintain`: the self-driving maintenance service (or one round of it with `--once`),
//! with its decision table, log lines, and `/metrics`, JSON API and dashboard on `--listen`.

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use floe::base::properties::{parse_duration, parse_size};
use floe::catalog::config::CatalogKind;
use floe::coordination::Store;
use floe::maintain::http;
use floe::maintain::policy::human_bytes;
use floe::maintain::service::{
    default_holder, MaintainOptions, MaintainSummary, Maintainer, QueueOptions, Source,
};
use floe::maintain::state::{Decision, ServiceState};

use crate::output::Out;
use crate::{catalog_config, open, Global};

#[derive(Args, Debug)]
pub struct MaintainArgs {
    /// Run passes until no job is due and every job finished, then exit (for cron and
    /// Kubernetes jobs).
    #[arg(long)]
    once: bool,
    /// Print the decision table (table, job, scope, benefit, cost, score, trigger or why
    /// skipped) and exit: no lease taken, nothing run. Implies --once. `--listen` has no
    /// effect with it (nothing would be served), so the two conflict.
    #[arg(long, conflicts_with = "listen")]
    dry_run: bool,
    /// Catalogs to watch, by name (floe.toml / FLOE_CATALOG__*); default: the selected one.
    #[arg(long = "catalogs", value_delimiter = ',', value_name = "NAME,...")]
    catalogs: Vec<String>,
    /// Only namespaces matching this glob (`*`, `?`); repeatable.
    #[arg(long = "namespace", value_name = "GLOB")]
    namespaces: Vec<String>,
    /// Only tables whose `ns.table` matches this glob; repeatable.
    #[arg(long = "table", value_name = "GLOB")]
    tables: Vec<String>,
    /// Jobs running at once, over all tables.
    #[arg(long, default_value_t = 2)]
    max_concurrent_jobs: u64,
    /// Bytes compactions and manifest rewrites may read per hour, over all tables and every
    /// maintainer sharing the lease store (e.g. 50GiB; default unlimited).
    #[arg(long, value_name = "SIZE")]
    max_rewrite_bytes_per_hour: Option<String>,
    /// Time between two passes over the tables.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    interval: String,
    /// Lease and run-history database: postgres://... or sqlite:///path (default: the SQL
    /// catalog's own database; required with a REST catalog).
    #[arg(long, value_name = "URI", env = "FLOE_LEASE_DB")]
    lease_db: Option<String>,
    /// A lease not renewed for this long is taken over (its maintainer died).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    lease_ttl: String,
    /// This maintainer's name in leases and run records (default: host:pid).
    #[arg(long)]
    holder: Option<String>,
    /// Serve /metrics, /api/* and the dashboard on this address (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// On SIGTERM, how long running jobs may take to finish before they are abandoned.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    shutdown_grace: String,
    /// The service's replicas (every `floe maintain` sharing the lease store with the same
    /// group) divide the watched tables among themselves: each registers a heartbeat row and
    /// maintains the tables rendezvous hashing gives it; a dead replica's tables move to the
    /// others after its lease TTL. Default: a name derived from the watched catalogs,
    /// namespaces and tables, so replicas started alike share it. `--once` and `--dry-run`
    /// do not divide.
    #[arg(long, value_name = "NAME", env = "FLOE_REPLICA_GROUP")]
    replica_group: Option<String>,
    /// Send compactions of at least --distribute-above to this distributed-compaction queue
    /// (postgres://... or sqlite:///path): `floe worker` processes rewrite them, this service
    /// plans and commits. Smaller jobs still run in place.
    #[arg(long, value_name = "URI", env = "FLOE_QUEUE")]
    queue: Option<String>,
    /// With --queue: the planned rewrite size from which a compaction goes to the workers.
    #[arg(long, default_value = "1GiB", value_name = "SIZE", requires = "queue")]
    distribute_above: String,
    /// With --queue: a queued compaction fails (and its table backs off) when no worker works
    /// on it for this long.
    #[arg(
        long,
        default_value = "10m",
        value_name = "DURATION",
        requires = "queue"
    )]
    worker_timeout: String,
}

/// Connects with `connect`. The service (not `--once`) waits for an unreachable catalog or
/// lease store, saying so on every retry (1 s, doubling up to `--interval`); a configuration
/// error (bad URI, bad option) fails at once.
async fn connect_retrying<T, F, Fut>(
    what: &str,
    once: bool,
    interval: std::time::Duration,
    mut connect: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut wait = std::time::Duration::from_secs(1);
    let shutdown = crate::ingest::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let e = match connect().await {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        let unreachable = matches!(
            e.downcast_ref::<floe::Error>(),
            Some(floe::Error::Catalog { .. } | floe::Error::Storage { .. } | floe::Error::Io(_))
        );
        if once || !unreachable {
            return Err(e);
        }
        eprintln!(
            "[maintain] waiting: {what} unreachable: {e:#}; retrying in {}",
            floe::base::properties::human_ms(wait.as_millis() as u64)
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = &mut shutdown => anyhow::bail!("stopped while waiting for {what}"),
        }
        wait = (wait * 2).min(interval.max(std::time::Duration::from_secs(1)));
    }
}

fn duration(option: &str, v: &str) -> Result<std::time::Duration> {
    let d = parse_duration(option, v)?;
    if d.is_zero() {
        return Err(floe::Error::invalid_option(option, v, "must be greater than 0").into());
    }
    Ok(d)
}

pub async fn run(g: &Global, args: MaintainArgs, out: &Out) -> Result<()> {
    let mut opts = MaintainOptions {
        holder: args.holder.clone().unwrap_or_else(default_holder),
        max_concurrent_jobs: crate::positive("--max-concurrent-jobs", args.max_concurrent_jobs)?
            as usize,
        max_rewrite_bytes_per_hour: match &args.max_rewrite_bytes_per_hour {
            Some(s) => parse_size("--max-rewrite-bytes-per-hour", s)?,
            None => 0,
        },
        interval: duration("--interval", &args.interval)?,
        lease_ttl: duration("--lease-ttl", &args.lease_ttl)?,
        namespaces: args.namespaces.clone(),
        tables: args.tables.clone(),
        dry_run: args.dry_run,
        shutdown_grace: parse_duration("--shutdown-grace", &args.shutdown_grace)?,
        policy_defaults: Default::default(),
        replica_group: None,
        queue: None,
    };

    // The catalogs, and the lease store: --lease-db, else the first SQL catalog's database.
    let mut configs = Vec::new();
    if args.catalogs.is_empty() {
        configs.push(catalog_config(g)?);
    } else {
        for name in &args.catalogs {
            let mut g = g.clone();
            g.catalog = Some(name.clone());
            configs.push(catalog_config(&g)?);
        }
    }
    let lease_uri = match &args.lease_db {
        Some(u) => u.clone(),
        None => configs
            .iter()
            .find(|c| c.kind == CatalogKind::Sql)
            .map(|c| c.uri.clone())
            .ok_or_else(|| {
                floe::Error::invalid_option(
                    "--lease-db",
                    "",
                    "a REST catalog has no database for leases: give --lease-db postgres://... \
                     (shared by every maintainer) or sqlite:///path (one machine)",
                )
            })?,
    };
    let several = configs.len() > 1;
    let once = args.once || args.dry_run;
    let mut sources = Vec::new();
    for c in &configs {
        let what = format!("catalog {}", c.name);
        let catalog = connect_retrying(&what, once, opts.interval, || open(c)).await?;
        sources.push(Source {
            catalog,
            prefix: several.then(|| c.name.clone()),
            only: None,
        });
    }
    let store = Arc::new(
        connect_retrying("the lease store", once, opts.interval, || async {
            Store::connect(&lease_uri)
                .await
                .with_context(|| "opening the lease store (--lease-db)")
        })
        .await?,
    );
    opts.replica_group = Some(args.replica_group.clone().unwrap_or_else(|| {
        let catalogs: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        let (catalogs, ns, tables) = (
            catalogs.join(","),
            args.namespaces.join(","),
            args.tables.join(","),
        );
        floe::coordination::replicas::default_group(&[&catalogs, &ns, &tables])
    }));
    if let Some(uri) = &args.queue {
        let queue = if *uri == lease_uri {
            store.clone()
        } else {
            Arc::new(
                connect_retrying("the task queue", once, opts.interval, || async {
                    Store::connect(uri)
                        .await
                        .with_context(|| "opening the task queue (--queue)")
                })
                .await?,
            )
        };
        opts.queue = Some(QueueOptions {
            store: queue,
            distribute_above: parse_size("--distribute-above", &args.distribute_above)?,
            worker_timeout: Some(duration("--worker-timeout", &args.worker_timeout)?),
        });
    }
    let state = ServiceState::new(&opts.holder, chrono::Utc::now().timestamp_millis());
    let mut server = None;
    if let Some(addr) = &args.listen {
        let (bound, handle) = http::serve(addr, state.clone()).await?;
        out.note(format!(
            "serving the dashboard on http://{bound}/ (metrics on /metrics, API on /api/tables)"
        ));
        server = Some(handle);
    }
    if !once {
        out.note(format!(
            "maintaining {} catalog(s) as {} (replica group {}): a pass every {}, leases in {}",
            sources.len(),
            opts.holder,
            opts.replica_group.as_deref().unwrap_or("-"),
            args.interval,
            store.display_uri()
        ));
        if let Some(q) = &opts.queue {
            out.note(format!(
                "compactions of {} or more go to the workers of {}",
                human_bytes(q.distribute_above),
                q.store.display_uri()
            ));
        }
    }
    let json = out.is_json();
    let maintainer = Maintainer::new(sources, store.clone(), state, opts.clone()).with_log(
        Arc::new(move |line: &str| {
            if !json {
                eprintln!("[maintain] {line}");
            }
        }),
    );
    let summary = if once {
        maintainer.run_once().await?
    } else {
        maintainer.run(crate::ingest::shutdown_signal()).await?
    };
    if let Some(h) = server {
        h.abort();
    }
    store.close().await;
    out.result(&serde_json::to_value(&summary)?, || text(&summary, &opts));
    // A table skipped as a problem (an invalid property, unreadable metadata) is work a
    // cron job did not do: a failure, naming each table and its problem.
    let mut skipped: Vec<String> = Vec::new();
    for p in summary.passes.iter().flat_map(|p| &p.problems) {
        let line = format!("{}: {}", p.0, p.1).replace('\n', "\\n");
        if !skipped.contains(&line) {
            skipped.push(line);
        }
    }
    if once && !skipped.is_empty() {
        anyhow::bail!("{} table(s) skipped: {}", skipped.len(), skipped.join("; "));
    }
    if once && summary.jobs_failed > 0 {
        // A round that left work undone is a failed cron job; its tables back off.
        anyhow::bail!(
            "{} maintenance job(s) failed (see the log above; their tables back off before a retry)",
            summary.jobs_failed
        );
    }
    Ok(())
}

/// The decision table of the first pass, and the totals.
fn text(s: &MaintainSummary, opts: &MaintainOptions) -> String {
    let mut lines = Vec::new();
    if let Some(first) = s.passes.first() {
        lines.push(table(&first.decisions));
        for (t, p) in &first.problems {
            lines.push(format!(
                "problem  {}: {}",
                crate::output::printable(t),
                crate::output::printable(p)
            ));
        }
        for u in &first.unreachable {
            lines.push(format!("unreachable  {}", crate::output::printable(u)));
        }
    }
    if opts.dry_run {
        let n = s
            .passes
            .first()
            .map_or(0, |p| p.decisions.iter().filter(|d| d.chosen).count());
        lines.push(format!(
            "dry run: {n} job(s) would start now (max-concurrent-jobs {}); nothing was changed",
            opts.max_concurrent_jobs
        ));
    } else {
        lines.push(format!(
            "{} pass(es): {} job(s) succeeded, {} failed; {} rewritten, {} file(s) deleted",
            s.passes_total,
            s.jobs_succeeded,
            s.jobs_failed,
            human_bytes(s.rewritten_bytes),
            s.deleted_files
        ));
    }
    lines.join("\n")
}

/// One row per job considered: what it would do and why it runs or waits.
pub fn table(decisions: &[Decision]) -> String {
    let header = [
        "table", "job", "scope", "benefit", "cost", "est", "score", "decision",
    ];
    let rows: Vec<[String; 8]> = decisions
        .iter()
        .map(|d| {
            let planned = d.fired.is_some() && d.cost_seconds > 0.0;
            let decision = if d.chosen {
                format!("RUN: {}", d.fired.as_deref().unwrap_or(""))
            } else {
                match (&d.fired, &d.skipped) {
                    (Some(f), Some(s)) => format!("wait: {s} (fired: {f})"),
                    (_, Some(s)) => format!("skip: {s}"),
                    (Some(f), None) => format!("due: {f}"),
                    (None, None) => String::new(),
                }
            };
            let num = |x: f64| {
                if planned {
                    format!("{x:.1}")
                } else {
                    "-".into()
                }
            };
            [
                crate::output::printable(&d.table).into_owned(),
                d.job.clone(),
                if planned {
                    crate::output::printable(&d.scope).into_owned()
                } else {
                    "-".into()
                },
                num(d.benefit),
                if planned {
                    format!(
                        "r {} / w {}",
                        human_bytes(d.cost.bytes_to_read),
                        human_bytes(d.cost.bytes_to_write)
                    )
                } else {
                    "-".into()
                },
                if planned {
                    format!("{:.1}s", d.cost_seconds)
                } else {
                    "-".into()
                },
                if planned {
                    format!("{:.2}", d.score)
                } else {
                    "-".into()
                },
                decision,
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate().take(7) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < 7 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    c.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![fmt(header.to_vec())];
    for r in &rows {
        out.push(fmt(r.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}
