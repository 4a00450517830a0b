//! The HTTP side of `floe maintain` on `--listen`: Prometheus `/metrics`, a JSON API over the
//! [`ServiceState`] and a dashboard page. A tiny HTTP/1.1 responder (GET only, one request per
//! connection) on tokio's `TcpListener`; the routing is the pure [`route`], unit-tested
//! without sockets.
//!
//! | path                  | answer                                                    |
//! |-----------------------|-----------------------------------------------------------|
//! | `/` and `/dashboard`  | the dashboard page (`dashboard.html`)                     |
//! | `/metrics`            | Prometheus text format 0.0.4                              |
//! | `/api/status`         | holder, start, last pass, what it waits for, counts       |
//! | `/api/tables`         | every table's status and decision table                   |
//! | `/api/tables/{name}`  | `{"status": ..., "history": [sample, ...]}`               |
//! | `/api/jobs?limit=N`   | the newest jobs first (default 100)                       |

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::state::{ServiceState, TableStatus};
use crate::error::{Error, Result};

/// The dashboard page.
pub const DASHBOARD_HTML: &str = include_str!("dashboard.html");
/// The longest request head accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Jobs `/api/jobs` returns without `?limit=`.
pub const DEFAULT_JOBS_LIMIT: usize = 100;

const JSON: &str = "application/json";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn json(status: u16, value: &impl Serialize) -> Self {
        match serde_json::to_string(value) {
            Ok(body) => Response {
                status,
                content_type: JSON,
                body,
            },
            Err(e) => Response::error(500, &format!("serializing the answer: {e}")),
        }
    }

    fn error(status: u16, message: &str) -> Self {
        Response {
            status,
            content_type: JSON,
            body: serde_json::json!({ "error": message }).to_string(),
        }
    }

    /// The response as bytes on the wire (HTTP/1.1, `Connection: close`).
    pub fn to_http(&self) -> Vec<u8> {
        let allow = if self.status == 405 {
            "Allow: GET\r\n"
        } else {
            ""
        };
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{allow}Connection: close\r\n\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

#[derive(Serialize)]
struct TableAnswer {
    status: TableStatus,
    history: Vec<super::state::Sample>,
}

enum Route<'a> {
    Dashboard,
    Metrics,
    Status,
    Tables,
    Table(&'a str),
    Jobs,
}

/// The answer to `method target` (`target`: the path, with an optional `?query`).
pub fn route(state: &ServiceState, method: &str, target: &str) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let r = match path {
        "/" | "/dashboard" => Route::Dashboard,
        "/metrics" => Route::Metrics,
        "/api/status" => Route::Status,
        "/api/tables" => Route::Tables,
        "/api/jobs" => Route::Jobs,
        p => match p.strip_prefix("/api/tables/") {
            Some(name) if !name.is_empty() => Route::Table(name),
            _ => return Response::error(404, &format!("no such path: {path}")),
        },
    };
    if method != "GET" {
        return Response::error(405, &format!("method {method} not allowed: GET only"));
    }
    match r {
        Route::Dashboard => Response {
            status: 200,
            content_type: HTML,
            body: DASHBOARD_HTML.to_string(),
        },
        Route::Metrics => Response {
            status: 200,
            content_type: PROMETHEUS,
            body: state.render_metrics(),
        },
        Route::Status => Response::json(200, &state.status()),
        Route::Tables => Response::json(200, &state.tables()),
        Route::Table(raw) => {
            let Some(name) = percent_decode(raw) else {
                return Response::error(400, &format!("bad percent-encoding in {raw:?}"));
            };
            match state.table(&name) {
                Some((status, history)) => Response::json(200, &TableAnswer { status, history }),
                None => Response::error(404, &format!("unknown table: {name}")),
            }
        }
        Route::Jobs => {
            let mut limit = DEFAULT_JOBS_LIMIT;
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                if k == "limit" {
                    match v.parse::<usize>() {
                        Ok(n) => limit = n,
                        Err(_) => {
                            return Response::error(
                                400,
                                &format!("limit must be a non-negative integer, not {v:?}"),
                            )
                        }
                    }
                }
            }
            Response::json(200, &state.jobs(limit))
        }
    }
}

/// `%XX`-decodes a path segment (`+` stays `+`); `None` on a bad escape or invalid UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Serves `state` at `addr`; returns the bound address (`127.0.0.1:0` picks a port) and the
/// accept loop's task.
pub async fn serve(
    addr: &str,
    state: Arc<ServiceState>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::invalid_option("--listen", addr, e.to_string()))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::invalid_option("--listen", addr, e.to_string()))?;
    let handle = tokio::spawn(async move {
        loop {
            let sock = match listener.accept().await {
                Ok((sock, _)) => sock,
                Err(e) => {
                    // Out of file descriptors and the like: do not spin.
                    tracing::warn!(error = %e, "maintain http: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = state.clone();
            tokio::spawn(async move { handle(sock, &state).await });
        }
    });
    Ok((local, handle))
}

/// What reading a request head gave.
enum Head {
    Complete(String),
    TooLarge,
    TimedOut,
    Malformed,
    Closed,
}

async fn read_head(sock: &mut tokio::net::TcpStream) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            let n = match sock.read(&mut chunk).await {
                Ok(0) | Err(_) if buf.is_empty() => return Head::Closed,
                Ok(0) | Err(_) => return Head::Malformed,
                Ok(n) => n,
            };
            let from = buf.len().saturating_sub(3);
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
                let end = from + end;
                if end > MAX_HEAD_BYTES {
                    return Head::TooLarge;
                }
                return match std::str::from_utf8(&buf[..end]) {
                    Ok(s) => Head::Complete(s.to_string()),
                    Err(_) => Head::Malformed,
                };
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Head::TooLarge;
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read)
        .await
        .unwrap_or(Head::TimedOut)
}

async fn handle(mut sock: tokio::net::TcpStream, state: &ServiceState) {
    let resp = match read_head(&mut sock).await {
        Head::Closed => return,
        Head::TimedOut => Response::error(408, "request head not received in time"),
        Head::TooLarge => Response::error(
            431,
            &format!("request head larger than {MAX_HEAD_BYTES} bytes"),
        ),
        Head::Malformed => Response::error(400, "malformed request"),
        Head::Complete(head) => {
            let line = head.lines().next().unwrap_or("");
            let mut parts = line.split(' ');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(method), Some(target), Some(version), None)
                    if version.starts_with("HTTP/1.") =>
                {
                    // An absolute-form target (`http://host/path`) routes by its path.
                    let target = match target.strip_prefix("http://") {
                        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
                        None => target,
                    };
                    route(state, method, target)
                }
                _ => Response::error(400, "malformed request line"),
            }
        }
    };
    let _ = sock.write_all(&resp.to_http()).await;
    let _ = sock.shutdown().await;
    // Lingering close: read what the client still sends (the rest of a too large head) until
    // it closes, so that closing with unread input does not reset the connection before the
    // client read the answer.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let mut sink = [0u8; 4096];
        while let Ok(n) = sock.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests;
