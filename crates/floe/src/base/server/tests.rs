use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

fn echo(method: &http::Method, target: &str) -> http::Response<String> {
    let status = if target.starts_with("/missing") {
        404
    } else {
        200
    };
    http::Response::builder()
        .status(status)
        .header("Content-Type", "text/plain; charset=utf-8")
        .body(format!("{method} {target}"))
        .unwrap()
}

fn client() -> reqwest::Client {
    // reqwest's rustls needs a process-wide provider even for plain HTTP.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::new()
}

#[tokio::test]
async fn serves_a_real_client_then_stops() {
    let (addr, task) = spawn("--test-addr", "127.0.0.1:0", echo).await.unwrap();
    assert_ne!(addr.port(), 0);
    let http = client();

    let r = http
        .get(format!("http://{addr}/a%20b/c?limit=3&x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; charset=utf-8",
        "{r:?}"
    );
    assert_eq!(r.headers()["connection"], "close");
    assert_eq!(r.text().await.unwrap(), "GET /a%20b/c?limit=3&x");

    let r = http
        .post(format!("http://{addr}/missing"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "POST /missing");

    // One request per connection: a client reading to the end gets it, without asking for
    // `Connection: close`.
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    sock.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\nGET /x"), "{out}");

    // Not HTTP: hyper answers 400.
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"nonsense\r\n\r\n").await.unwrap();
    let mut out = String::new();
    sock.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");

    // The address taken: the option named in the error.
    let err = spawn("--test-addr", &addr.to_string(), echo)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--test-addr"), "{err}");

    task.abort();
    let _ = task.await;
    assert!(
        http.get(format!("http://{addr}/")).send().await.is_err(),
        "still serving after the abort"
    );
}

#[tokio::test]
async fn a_silent_client_is_closed_after_the_request_timeout() {
    let (addr, task) = spawn("--test-addr", "127.0.0.1:0", echo).await.unwrap();
    let start = Instant::now();
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET / HT").await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(
        REQUEST_TIMEOUT + Duration::from_secs(5),
        sock.read_to_end(&mut out),
    )
    .await;
    assert!(read.is_ok(), "the connection stayed open");
    assert!(start.elapsed() >= REQUEST_TIMEOUT - Duration::from_millis(100));
    task.abort();
}
