//! floe's one HTTP server, for its two endpoints: `floe maintain --listen` (the API, the
//! dashboard and `/metrics`, [`crate::maintain::http`]) and `floe ingest --metrics-addr`
//! ([`crate::ingest::metrics`]). axum's server over hyper accepts the connections and parses
//! the requests (HTTP/1.1); an endpoint is a plain function from the method and the request
//! target to an [`http::Response`], so its routing is tested without sockets.
//!
//! Every answer closes its connection (`Connection: close`: one request per connection), and a
//! client has [`REQUEST_TIMEOUT`] from its connection to send its request.
//! [`exposition`] writes the Prometheus text format both endpoints serve.

pub mod exposition;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use http::header::{HeaderValue, CONNECTION};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::base::error::{Error, Result};

/// How long a client has, from its connection, to send its request; then the connection is
/// closed (a client that connects and sends nothing holds no task).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `addr` and serves each request with `handler(method, target)` (`target`: the path
/// with its `?query`, also of an absolute-form request), on a task of its own. A bind failure
/// is an invalid `option` (the flag that named `addr`). Returns the bound address
/// (`127.0.0.1:0` picks a port) and the server's task: aborting it stops accepting.
pub async fn spawn<F>(
    option: &str,
    addr: &str,
    handler: F,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)>
where
    F: Fn(&http::Method, &str) -> http::Response<String> + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| Error::invalid_option(option, addr, e.to_string()))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::invalid_option(option, addr, e.to_string()))?;
    let handler = Arc::new(handler);
    let app = axum::Router::new().fallback(move |req: Request| {
        let handler = handler.clone();
        async move {
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
            let mut resp = handler(req.method(), target).map(Body::from);
            resp.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            resp
        }
    });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(Timed(listener), app).await {
            tracing::warn!(error = %e, "http server on {local} stopped");
        }
    });
    Ok((local, task))
}

/// The TCP listener whose connections time out on [`REQUEST_TIMEOUT`].
struct Timed(TcpListener);

impl axum::serve::Listener for Timed {
    type Io = Deadline;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Deadline, SocketAddr) {
        // axum's accept retries (and logs) a failed accept.
        let (io, addr) = axum::serve::Listener::accept(&mut self.0).await;
        (
            Deadline {
                io,
                until: Box::pin(tokio::time::sleep(REQUEST_TIMEOUT)),
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection whose reads fail once [`REQUEST_TIMEOUT`] passed since it was accepted
/// (writes do not: an answer is always written).
struct Deadline {
    io: TcpStream,
    until: Pin<Box<tokio::time::Sleep>>,
}

impl AsyncRead for Deadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Pending => match this.until.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "request not received in time",
                ))),
                Poll::Pending => Poll::Pending,
            },
            ready => ready,
        }
    }
}

impl AsyncWrite for Deadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
