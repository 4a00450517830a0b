//! The `floe maintain` dashboard renders in a real browser: headless Chromium loads the page
//! from `floe::maintain::http::serve`, its script fetches the JSON API and draws one card per
//! table (a plot point per sample), the recent jobs, and escapes every text it inserts.
//! Chromium is installed by `.ci/setup`; without it this test fails.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use floe::base::cost::Cost;
use floe::maintain::http::serve;
use floe::maintain::state::{Decision, ServiceState, TableStatus};

const CHROMIUM: &str = "/usr/bin/chromium";
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);
const PROBLEM: &str = "metadata unreadable: <b>boom</b> & gone";

fn status(table: &str, ts_ms: i64, k: u64) -> TableStatus {
    TableStatus {
        table: table.to_string(),
        sampled_ms: ts_ms,
        live_data_files: 40 + 7 * k,
        small_files: 30 + 5 * k,
        delete_files: 1,
        snapshots: 10 + k,
        manifests: 4,
        data_bytes: (300 + 20 * k) << 20,
        metadata_bytes: 2 << 20,
        debt: 3.5,
        problem: None,
        decisions: vec![
            Decision {
                table: table.to_string(),
                job: "compact".into(),
                scope: "3 of 12 partitions: day=2026-11-30, ...".into(),
                fired: Some(format!("small-files {} >= 20", 30 + 5 * k)),
                skipped: None,
                benefit: 3.5,
                cost: Cost {
                    files_to_read: 30,
                    bytes_to_read: 120 << 20,
                    files_to_write: 1,
                    bytes_to_write: 118 << 20,
                    ..Cost::default()
                },
                cost_seconds: 4.2,
                score: 0.83,
                chosen: true,
            },
            Decision {
                table: table.to_string(),
                job: "expire-snapshots".into(),
                scope: "table".into(),
                fired: None,
                skipped: Some("max-snapshot-age: oldest 2h < 5d".into()),
                ..Decision::default()
            },
        ],
    }
}

/// The state the page shows: `ns.events` with 5 samples, `ns.orders` with 3 samples and a
/// problem holding markup, a finished and a failed job.
fn state(now: i64) -> std::sync::Arc<ServiceState> {
    let s = ServiceState::new("maintain-test-host", now - 3_600_000);
    for k in 0..5u64 {
        s.record_table(status("ns.events", now - (5 - k as i64) * 30_000, k));
    }
    for k in 0..3u64 {
        s.record_table(status("ns.orders", now - (3 - k as i64) * 30_000, k));
    }
    s.record_problem("ns.orders", PROBLEM.to_string(), now - 1_000);
    let ok = s.job_started(
        "ns.events",
        "compact",
        "table",
        "small-files 50 >= 20",
        Cost {
            bytes_to_read: 100 << 20,
            ..Cost::default()
        },
        now - 120_000,
    );
    s.job_finished(
        ok,
        Ok(Cost {
            files_to_read: 30,
            bytes_to_read: 120 << 20,
            files_to_write: 1,
            bytes_to_write: 118 << 20,
            files_to_delete: 0,
            bytes_to_delete: 0,
        }),
        now - 100_000,
    );
    let failed = s.job_started(
        "ns.orders",
        "expire-snapshots",
        "table",
        "max-snapshots 40 > 30",
        Cost::default(),
        now - 60_000,
    );
    s.job_finished(failed, Err("commit conflict: retry".into()), now - 58_000);
    s.set_last_pass(
        now - 5_000,
        Some("catalog unreachable: connection refused, retrying in 30s".into()),
    );
    s
}

/// Runs headless Chromium on `url` and returns the DOM after its scripts ran.
fn dump_dom(url: &str) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: this test loads the dashboard in headless Chromium; \
         .ci/setup installs it (apt-get install chromium)"
    );
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile");
    let out_path = dir.path().join("dom.html");
    let err_path = dir.path().join("stderr.txt");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=10000", "--dump-dom", url])
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {CHROMIUM}: {e}"));
    let stderr_tail = || {
        let s = std::fs::read_to_string(&err_path).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    let exit = loop {
        match child.try_wait() {
            Ok(Some(exit)) => break exit,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chromium (pid {}) did not finish in {BROWSER_TIMEOUT:?}; stderr:\n{}",
                    child.id(),
                    stderr_tail()
                );
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("waiting for chromium: {e}");
            }
        }
    };
    let dom = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        exit.success() && dom.contains("</html>"),
        "chromium failed ({exit}); stderr:\n{}\nstdout:\n{dom}",
        stderr_tail()
    );
    dom
}

/// The `<section class="table-card" data-table="...">` of `table`.
fn card<'a>(dom: &'a str, table: &str) -> &'a str {
    let at = dom
        .find(&format!("data-table=\"{table}\""))
        .unwrap_or_else(|| panic!("no card for {table} in\n{dom}"));
    let start = dom[..at].rfind("<section").unwrap();
    let end = at + dom[at..].find("</section>").unwrap();
    &dom[start..end]
}

/// The number of x,y pairs in the polyline of the plot of `metric`.
fn plot_points(card: &str, metric: &str) -> usize {
    let at = card
        .find(&format!("data-metric=\"{metric}\""))
        .unwrap_or_else(|| panic!("no plot of {metric} in\n{card}"));
    let svg = &card[at..at + card[at..].find("</svg>").unwrap()];
    let p = svg.find("points=\"").expect("a polyline with points") + "points=\"".len();
    let points = &svg[p..p + svg[p..].find('"').unwrap()];
    let pairs: Vec<&str> = points.split_whitespace().collect();
    for pair in &pairs {
        let (x, y) = pair.split_once(',').expect("x,y");
        assert!(
            x.parse::<f64>().is_ok() && y.parse::<f64>().is_ok(),
            "{pair}"
        );
    }
    pairs.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_renders_tables_plots_and_jobs_in_chromium() {
    let now = chrono::Utc::now().timestamp_millis();
    let (addr, server) = serve("127.0.0.1:0", state(now)).await.unwrap();
    let url = format!("http://{addr}/");
    let dom = tokio::task::spawn_blocking(move || dump_dom(&url))
        .await
        .unwrap();
    server.abort();
    // The rendered page, without the script's source (which holds the markup it builds).
    let dom = &dom[..dom.rfind("<script").expect("the page's script")];

    let body = &dom[dom.find("<body").expect("a body")..];
    let body_tag = &body[..body.find('>').unwrap()];
    assert!(
        body_tag.contains("data-ready=\"1\""),
        "the page did not finish its first render: {body_tag}\n{dom}"
    );
    let error_at = dom.find("id=\"error\"").expect("the error banner");
    let error_tag = &dom[error_at..error_at + dom[error_at..].find('>').unwrap()];
    assert!(
        error_tag.contains("hidden"),
        "the page reported an error:\n{dom}"
    );
    assert!(dom.contains("maintain-test-host"));
    assert!(dom.contains("catalog unreachable: connection refused, retrying in 30s"));

    assert_eq!(dom.matches("class=\"table-card").count(), 2, "{dom}");
    let events = card(dom, "ns.events");
    let orders = card(dom, "ns.orders");
    assert!(dom.find("data-table=\"ns.events\"") < dom.find("data-table=\"ns.orders\""));
    for metric in ["live_data_files", "small_files", "snapshots", "data_bytes"] {
        assert_eq!(plot_points(events, metric), 5, "ns.events {metric}");
        assert_eq!(plot_points(orders, metric), 3, "ns.orders {metric}");
    }
    // Axis labels: the min and max of the live data files of ns.events (40 .. 68).
    assert!(
        events.contains(">40</text>") && events.contains(">68</text>"),
        "{events}"
    );
    // The decision table.
    assert!(
        events.contains("fired: small-files 50 &gt;= 20"),
        "{events}"
    );
    assert!(events.contains("skipped: max-snapshot-age: oldest 2h &lt; 5d"));
    assert!(!events.contains("class=\"problem\""));
    // The problem is text, escaped, not markup; a problem clears the decisions.
    assert!(orders.contains("class=\"problem\""), "{orders}");
    assert!(
        orders.contains("metadata unreadable: &lt;b&gt;boom&lt;/b&gt; &amp; gone"),
        "{orders}"
    );
    assert!(
        !dom.contains("<b>boom"),
        "the problem was inserted as markup"
    );
    assert!(orders.contains("no decisions in the last pass"));

    let jobs_at = dom.find("id=\"jobs\"").expect("the jobs table");
    let jobs = &dom[jobs_at..jobs_at + dom[jobs_at..].find("</table>").unwrap()];
    let rows: Vec<&str> = jobs.split("<tr class=\"job\"").skip(1).collect();
    assert_eq!(rows.len(), 2, "{jobs}");
    // Newest first: the failed expiry, then the compaction.
    assert!(rows[0].contains("data-state=\"failed\""), "{}", rows[0]);
    assert!(rows[0].contains("ns.orders") && rows[0].contains("expire-snapshots"));
    assert!(rows[0].contains("commit conflict: retry"));
    assert!(rows[0].contains("max-snapshots 40 &gt; 30"));
    assert!(rows[1].contains("data-state=\"succeeded\""), "{}", rows[1]);
    assert!(rows[1].contains("ns.events") && rows[1].contains("compact"));
    assert!(
        rows[1].contains("read 120 MiB, wrote 118 MiB"),
        "{}",
        rows[1]
    );
    assert!(rows[1].contains("20 s"), "duration: {}", rows[1]);
}
