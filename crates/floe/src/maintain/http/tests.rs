use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::base::cost::Cost;
use crate::maintain::state::{Decision, TableStatus};

fn state() -> Arc<ServiceState> {
    let s = ServiceState::new("host-1", 1_000);
    for (i, t) in ["ns.b", "ns.a t"].iter().enumerate() {
        for k in 0..3 {
            s.record_table(TableStatus {
                table: t.to_string(),
                sampled_ms: 2_000 + k,
                live_data_files: 10 + k as u64 + i as u64,
                decisions: vec![Decision {
                    table: t.to_string(),
                    job: "compact".into(),
                    scope: "table".into(),
                    fired: Some("small-files 9 >= 5".into()),
                    score: 2.5,
                    chosen: true,
                    ..Decision::default()
                }],
                ..TableStatus::default()
            });
        }
    }
    let id = s.job_started(
        "ns.b",
        "compact",
        "table",
        "small-files",
        Cost::default(),
        3_000,
    );
    s.job_finished(id, Err("boom".into()), 3_500);
    s.job_started(
        "ns.b",
        "expire-snapshots",
        "table",
        "max",
        Cost::default(),
        4_000,
    );
    s.set_last_pass(
        5_000,
        Some("catalog unreachable: refused, retrying in 30s".into()),
    );
    s
}

fn json(r: &Response) -> serde_json::Value {
    assert_eq!(r.content_type, "application/json");
    serde_json::from_str(&r.body).unwrap()
}

#[test]
fn status_tables_and_jobs_are_json() {
    let s = state();
    let r = route(&s, "GET", "/api/status");
    assert_eq!(r.status, 200);
    let v = json(&r);
    assert_eq!(v["holder"], "host-1");
    assert_eq!(v["started_ms"], 1_000);
    assert_eq!(v["last_pass_ms"], 5_000);
    assert_eq!(
        v["waiting_for"],
        "catalog unreachable: refused, retrying in 30s"
    );
    assert_eq!(v["running_jobs"], 1);
    assert_eq!(v["tables"], 2);

    let v = json(&route(&s, "GET", "/api/tables"));
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ns.a t", "ns.b"]);
    assert_eq!(v[1]["live_data_files"], 12);
    assert_eq!(v[1]["problem"], serde_json::Value::Null);
    assert_eq!(v[1]["decisions"][0]["job"], "compact");
    assert_eq!(v[1]["decisions"][0]["cost"]["bytes_to_read"], 0);
    assert_eq!(v[1]["decisions"][0]["chosen"], true);

    let v = json(&route(&s, "GET", "/api/jobs"));
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["state"], "running");
    assert_eq!(v[0]["job"], "expire-snapshots");
    assert_eq!(v[1]["state"], "failed");
    assert_eq!(v[1]["error"], "boom");
    assert_eq!(v[1]["finished_ms"], 3_500);
    let v = json(&route(&s, "GET", "/api/jobs?limit=1"));
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(route(&s, "GET", "/api/jobs?limit=x").status, 400);
}

#[test]
fn a_table_by_its_percent_encoded_name() {
    let s = state();
    let r = route(&s, "GET", "/api/tables/ns.a%20t");
    assert_eq!(r.status, 200);
    let v = json(&r);
    assert_eq!(v["status"]["table"], "ns.a t");
    let h = v["history"].as_array().unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!(h[0]["ts_ms"], 2_000);
    assert_eq!(h[2]["live_data_files"], 13);

    let r = route(&s, "GET", "/api/tables/ns.nope");
    assert_eq!(r.status, 404);
    assert_eq!(json(&r)["error"], "unknown table: ns.nope");
    assert_eq!(route(&s, "GET", "/api/tables/ns.%zz").status, 400);
    assert_eq!(route(&s, "GET", "/api/tables/").status, 404);

    assert_eq!(percent_decode("a%2Fb%25c+d").as_deref(), Some("a/b%c+d"));
    assert_eq!(percent_decode("%C3%A9").as_deref(), Some("é"));
    assert_eq!(percent_decode("%"), None);
    assert_eq!(percent_decode("%ff"), None);
}

#[test]
fn pages_metrics_and_errors() {
    let s = state();
    for p in ["/", "/dashboard"] {
        let r = route(&s, "GET", p);
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type, "text/html; charset=utf-8");
        assert!(r.body.contains("dataset.ready"));
    }
    let r = route(&s, "GET", "/metrics");
    assert_eq!(r.status, 200);
    assert!(r.content_type.starts_with("text/plain; version=0.0.4"));
    assert!(r
        .body
        .contains("floe_maintain_jobs_failed_total{job=\"compact\"} 1"));

    let r = route(&s, "GET", "/nope");
    assert_eq!(r.status, 404);
    assert!(json(&r)["error"].as_str().unwrap().contains("/nope"));
    let r = route(&s, "POST", "/api/status");
    assert_eq!(r.status, 405);
    assert!(json(&r)["error"].is_string());
    let r = r.into_http();
    assert_eq!(r.headers()["allow"], "GET");
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert_eq!(route(&s, "DELETE", "/api/tables/ns.b").status, 405);
}

async fn get(addr: SocketAddr, request: &[u8]) -> String {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(request).await.unwrap();
    let mut out = String::new();
    sock.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn serves_over_tcp() {
    let (addr, task) = serve("127.0.0.1:0", state()).await.unwrap();
    assert_ne!(addr.port(), 0);

    let out = get(addr, b"GET /api/tables/ns.b HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(
        head.contains("content-type: application/json\r\n"),
        "{head}"
    );
    assert!(head.contains("cache-control: no-store\r\n"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(head.contains(&format!("content-length: {}", body.len())));
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["status"]["table"], "ns.b");

    // A request head split over several writes.
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET /metrics HT").await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    sock.write_all(b"TP/1.1\r\n\r\n").await.unwrap();
    let mut out = String::new();
    sock.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(out
        .to_ascii_lowercase()
        .contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    assert!(out.contains("floe_maintain_tables 2"));

    // An absolute-form target routes by its path; a 405 names the allowed method.
    let out = get(addr, b"GET http://x/api/status HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(out.contains("\"holder\":\"host-1\""), "{out}");
    let out = get(addr, b"POST /api/status HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 405 "), "{out}");
    assert!(
        out.to_ascii_lowercase().contains("\r\nallow: get\r\n"),
        "{out}"
    );

    let out = get(addr, b"nonsense\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");

    let err = serve(&addr.to_string(), state()).await.unwrap_err();
    assert!(err.to_string().contains("--listen"), "{err}");
    task.abort();
}

#[test]
fn healthz_answers_and_readyz_waits_for_a_pass_with_nothing_awaited() {
    let s = ServiceState::new("host-1", 1_000);
    assert_eq!(route(&s, "GET", "/healthz").status, 200);
    let r = route(&s, "GET", "/readyz");
    assert_eq!(r.status, 503);
    assert_eq!(json(&r)["waiting_for"], "the first pass");
    s.set_last_pass(2_000, Some("catalog unreachable: refused".into()));
    let r = route(&s, "GET", "/readyz");
    assert_eq!(r.status, 503);
    assert!(json(&r)["waiting_for"]
        .as_str()
        .unwrap()
        .contains("catalog unreachable"));
    s.set_last_pass(3_000, None);
    assert_eq!(route(&s, "GET", "/readyz").status, 200);
    assert_eq!(route(&s, "POST", "/readyz").status, 405);
}
