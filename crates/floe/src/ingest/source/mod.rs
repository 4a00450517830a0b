//! Stream sources. A source yields micro-batches of records, each with the stream it came from
//! and the position right after it; positions are what floe commits into the table with the
//! data (never into the source), so a restart resumes exactly after the last committed record.
//!
//! - `kafka://HOST:PORT/TOPIC[?partitions=0,2&start=earliest|latest]` ([`kafka`]);
//! - `-` or `stdin`: NDJSON on standard input ([`mod@file`]; not resumable);
//! - a path or glob of NDJSON files, optionally `file://`-prefixed, with `--follow` to keep
//!   reading appended lines and new files ([`mod@file`]).

pub mod file;
pub mod kafka;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// Next position per stream (Kafka: `kafka:<topic>:<partition>` -> next offset; files:
/// `file:<path>` -> byte offset after the last consumed line; stdin: `stdin` -> lines).
pub type Positions = BTreeMap<String, i64>;

/// One record of a stream.
#[derive(Debug, Clone)]
pub struct SourceRecord {
    pub stream: Arc<str>,
    /// The position right after this record.
    pub next_position: i64,
    /// This record's own position (Kafka offset, file byte offset, stdin line number).
    pub position: i64,
    pub payload: Vec<u8>,
}

/// Lag of one stream: records (or bytes, for files) not yet read.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamLag {
    pub stream: String,
    pub lag: i64,
}

/// A source of records.
#[async_trait::async_trait]
pub trait Source: Send {
    /// The source as a URI, recorded in snapshot summaries (never holds secrets).
    fn uri(&self) -> String;

    /// Starts reading from `resume` (streams not in it start at the beginning).
    async fn start(&mut self, resume: &Positions) -> Result<()>;

    /// Up to `max` records, waiting at most `wait` for the first one; `Some(vec![])` when none
    /// arrived in time, `None` once the source has ended. Cancel-safe.
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Option<Vec<SourceRecord>>>;

    /// Current lag per stream, when the source knows it.
    fn lag(&self) -> Vec<StreamLag> {
        Vec::new()
    }
}

/// Opens the source named by `uri`.
pub fn open(uri: &str, follow: bool) -> Result<Box<dyn Source>> {
    if uri.starts_with("kafka://") {
        return Ok(Box::new(kafka::KafkaSource::parse(uri)?));
    }
    if uri == "-" || uri == "stdin" {
        return Ok(Box::new(file::FileSource::stdin()));
    }
    let path = uri.strip_prefix("file://").unwrap_or(uri);
    if path.is_empty() {
        return Err(Error::invalid_option("--source", uri, "empty path"));
    }
    Ok(Box::new(file::FileSource::files(path, follow)?))
}

/// Receives from a background reader, batching up to `max` records.
pub(crate) async fn recv_batch(
    rx: &mut tokio::sync::mpsc::Receiver<Result<SourceRecord>>,
    max: usize,
    wait: Duration,
) -> Result<Option<Vec<SourceRecord>>> {
    let first = match tokio::time::timeout(wait, rx.recv()).await {
        Err(_) => return Ok(Some(Vec::new())),
        Ok(None) => return Ok(None),
        Ok(Some(r)) => r?,
    };
    let mut out = vec![first];
    while out.len() < max {
        match rx.try_recv() {
            Ok(r) => out.push(r?),
            Err(_) => break,
        }
    }
    Ok(Some(out))
}
