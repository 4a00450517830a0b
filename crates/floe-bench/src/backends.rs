//! `backends`: the same table and maintenance operations on local disk (embedded SQLite
//! catalog) and on S3 behind a REST catalog (SeaweedFS from `.ci/setup`), with the S3 requests
//! each operation issued, read from SeaweedFS's Prometheus counters
//! (`SeaweedFS_s3_request_total{bucket,code,type}`) before and after.
//!
//! Operations: build (N small files over S commits), diagnose, compact, expire-snapshots
//! (`--older-than 0s --retain-last 1`), remove-orphan-files dry run.

use floe::operations::{Operation, Query};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use arrow::record_batch::RecordBatch;
use floe::catalog::{Catalog, CatalogConfig};
use serde_json::{json, Value};

/// S3 request counts by type (LIST, GET, PUT, POST, DELETE, ...) for one bucket.
type Counts = BTreeMap<String, u64>;

/// Scrapes the counters of `bucket` from a Prometheus text endpoint (`http://host:port/path`).
fn scrape(metrics: &str, bucket: &str) -> Result<Counts> {
    let rest = metrics
        .strip_prefix("http://")
        .context("metrics URL must be http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /{path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let mut out = Counts::new();
    let want = format!("bucket=\"{bucket}\"");
    for line in text.lines() {
        if !line.starts_with("SeaweedFS_s3_request_total{") || !line.contains(&want) {
            continue;
        }
        let Some(t) = line
            .split("type=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
        else {
            continue;
        };
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *out.entry(t.to_string()).or_default() += n as u64;
    }
    Ok(out)
}

fn delta(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

struct Backend {
    name: &'static str,
    catalog: Catalog,
    /// Metrics endpoint and bucket, for S3.
    counters: Option<(String, String)>,
}

impl Backend {
    fn counts(&self) -> Result<Counts> {
        match &self.counters {
            Some((url, bucket)) => scrape(url, bucket),
            None => Ok(Counts::new()),
        }
    }
}

/// Runs `op` and returns (seconds, S3 requests it issued).
async fn measure<F, Fut, T>(b: &Backend, op: F) -> Result<(f64, Counts, T)>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let before = b.counts()?;
    let t = Instant::now();
    let v = op().await.with_context(|| format!("on {}", b.name))?;
    let secs = t.elapsed().as_secs_f64();
    let after = b.counts()?;
    Ok((secs, delta(&after, &before), v))
}

pub async fn run(files: usize, commits: usize) -> Result<()> {
    let env = |k: &str| {
        std::env::var(k).with_context(|| format!("{k} (run `eval \"$(bash .ci/setup)\"`)"))
    };
    let tmp = tempfile::tempdir()?;
    let local = Catalog::connect(&CatalogConfig::embedded(Some(&tmp.path().join("wh")))?).await?;
    let warehouse = env("FLOE_TEST_REST_WAREHOUSE")?;
    let props: BTreeMap<String, String> = [
        ("type", "rest".to_string()),
        ("uri", env("FLOE_TEST_REST_URI")?),
        ("warehouse", warehouse.clone()),
        ("credential", env("FLOE_TEST_REST_CREDENTIAL")?),
        ("s3.endpoint", env("FLOE_TEST_S3_ENDPOINT")?),
        ("s3.access-key-id", env("FLOE_TEST_S3_ACCESS_KEY")?),
        ("s3.secret-access-key", env("FLOE_TEST_S3_SECRET_KEY")?),
        ("s3.region", env("FLOE_TEST_S3_REGION")?),
        ("s3.path-style-access", "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let rest = Catalog::connect(&CatalogConfig::from_props("bench", props)?).await?;
    let backends = [
        Backend {
            name: "local",
            catalog: local,
            counters: None,
        },
        Backend {
            name: "s3+rest",
            catalog: rest,
            counters: Some((env("FLOE_TEST_S3_METRICS")?, warehouse)),
        },
    ];
    let ns = format!("bench_{}", std::process::id());
    let name = format!("{ns}.backends");
    let mut report: Vec<Value> = vec![];
    let rows = crate::file_rows(files, 7);
    for b in &backends {
        let c = &b.catalog;
        let (table, schema) = crate::history::create_table(
            c,
            &name,
            "id bigint not null, name string, amount double, payload string",
            None,
        )
        .await?;
        let ident = table.identifier().clone();
        let per_commit = files.div_ceil(commits.max(1));
        let (build_s, build_req, _) = measure(b, || async {
            let mut table = table.clone();
            let mut next_id = 0i64;
            let options = floe::write::WriteOptions {
                target_file_size_bytes: Some(1),
                ..Default::default()
            };
            for chunk in rows.chunks(per_commit) {
                let batches: Vec<RecordBatch> = chunk
                    .iter()
                    .map(|&n| {
                        let batch = crate::small_batch(&schema, next_id, n);
                        next_id += n as i64;
                        batch
                    })
                    .collect();
                let written =
                    floe::operations::append::write_files(&table, batches, &options).await?;
                table = floe::commit::Committer::new(c, &ident)
                    .commit(floe::commit::SnapshotUpdate::append(written))
                    .await?
                    .table;
            }
            Ok(())
        })
        .await?;
        let mut ops = vec![
            json!({"op": format!("build ({files} files, {commits} commits)"), "seconds": build_s, "requests": build_req}),
        ];
        eprintln!("{}: built in {build_s:.2} s", b.name);
        let (s, r, _) = measure(b, || async {
            Ok(
                floe::operations::diagnose::DiagnoseBuilder::new(c, ident.clone())
                    .query()
                    .await?,
            )
        })
        .await?;
        ops.push(json!({"op": "diagnose", "seconds": s, "requests": r}));
        eprintln!("{}: diagnosed in {s:.2} s", b.name);
        let (s, r, m) = measure(b, || async {
            Ok(
                floe::operations::compact::CompactBuilder::new(c, ident.clone())
                    .execute()
                    .await?,
            )
        })
        .await?;
        ops.push(json!({"op": format!("compact ({} -> {} files)", m.live_files_before, m.live_files_after), "seconds": s, "requests": r}));
        eprintln!("{}: compacted in {s:.2} s", b.name);
        let (s, r, e) = measure(b, || async {
            Ok(
                floe::operations::expire::ExpireBuilder::new(c, ident.clone())
                    .with_older_than_age(Duration::ZERO)
                    .with_retain_last(1)
                    .execute()
                    .await?,
            )
        })
        .await?;
        ops.push(json!({"op": format!("expire-snapshots ({} snapshots, {} files deleted)", e.plan.expired_snapshots.len(), e.deleted.deleted), "seconds": s, "requests": r}));
        eprintln!("{}: expired in {s:.2} s", b.name);
        let (s, r, o) = measure(b, || async {
            Ok(
                floe::operations::clean::orphans::OrphanBuilder::new(c, ident.clone())
                    .with_older_than(Duration::ZERO)
                    .with_force(true)
                    .run(true)
                    .await?,
            )
        })
        .await?;
        ops.push(json!({"op": format!("remove-orphan-files --dry-run ({} listed)", o.listed_files), "seconds": s, "requests": r}));
        floe::operations::clean::purge::DropBuilder::new(c, ident.clone())
            .with_purge(true)
            .execute()
            .await?;
        report.push(json!({"backend": b.name, "ops": ops}));
    }
    // Side by side.
    println!(
        "{:<48} {:>9} {:>9} {:>7}  s3 requests",
        "operation", "local s", "s3 s", "ratio"
    );
    let local_ops = report[0]["ops"].as_array().cloned().unwrap_or_default();
    let s3_ops = report[1]["ops"].as_array().cloned().unwrap_or_default();
    for (l, s) in local_ops.iter().zip(&s3_ops) {
        let ls = l["seconds"].as_f64().unwrap_or(0.0);
        let ss = s["seconds"].as_f64().unwrap_or(0.0);
        let req: HashMap<String, u64> =
            serde_json::from_value(s["requests"].clone()).unwrap_or_default();
        let mut req: Vec<_> = req.into_iter().collect();
        req.sort();
        let req = req
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "{:<48} {:>9.3} {:>9.3} {:>6.1}x  {}",
            s["op"].as_str().unwrap_or(""),
            ls,
            ss,
            ss / ls.max(1e-9),
            req
        );
    }
    println!(
        "{}",
        json!({"files": files, "commits": commits, "backends": report})
    );
    Ok(())
}
