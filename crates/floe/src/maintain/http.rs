//! The HTTP side of `floe maintain` on `--listen`: Prometheus `/metrics`, a JSON API over the
//! [`ServiceState`] and a dashboard page, GET only, served by [`crate::base::server`]; the routing is
//! the pure [`route`], unit-tested without sockets.
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

use http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use serde::Serialize;

use super::state::{ServiceState, TableStatus};
use crate::base::error::Result;
use crate::base::server;

/// The dashboard page.
pub const DASHBOARD_HTML: &str = include_str!("dashboard.html");
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

    /// The HTTP response: its content type, `Cache-Control: no-store`, and `Allow: GET` on a
    /// 405 (the server adds the length and `Connection: close`).
    pub fn into_http(self) -> http::Response<String> {
        let mut b = http::Response::builder()
            .status(self.status)
            .header(CONTENT_TYPE, self.content_type)
            .header(CACHE_CONTROL, "no-store");
        if self.status == 405 {
            b = b.header(ALLOW, "GET");
        }
        b.body(self.body).unwrap_or_else(|e| {
            // Only a status outside 100..=999 fails, and route answers none.
            let mut r = http::Response::new(format!("building the answer: {e}"));
            *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
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
    Health,
    Ready,
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
        "/healthz" => Route::Health,
        "/readyz" => Route::Ready,
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
        // Liveness: the process answers (its passes may legitimately wait on a catalog).
        Route::Health => Response::json(200, &serde_json::json!({"status": "ok"})),
        // Readiness: a pass has run and nothing is being waited for (catalog, lease store).
        Route::Ready => {
            let s = state.status();
            match (&s.last_pass_ms, &s.waiting_for) {
                (Some(_), None) => Response::json(200, &serde_json::json!({"status": "ready"})),
                (_, Some(w)) => Response::json(
                    503,
                    &serde_json::json!({"status": "waiting", "waiting_for": w}),
                ),
                (None, None) => Response::json(
                    503,
                    &serde_json::json!({"status": "starting", "waiting_for": "the first pass"}),
                ),
            }
        }
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

/// Serves `state` at `addr` through [`crate::base::server`]; returns the bound address
/// (`127.0.0.1:0` picks a port) and the server's task.
pub async fn serve(
    addr: &str,
    state: Arc<ServiceState>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    server::spawn("--listen", addr, move |method, target| {
        route(&state, method.as_str(), target).into_http()
    })
    .await
}

#[cfg(test)]
mod tests;
