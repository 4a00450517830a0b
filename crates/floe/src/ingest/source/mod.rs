//! Stream sources. A source yields micro-batches of records, each with the stream it came from
//! and the position right after it; positions are what floe commits into the table with the
//! data (never into the source), so a restart resumes exactly after the last committed record.
//!
//! - `kafka://HOST:PORT/TOPIC[?partitions=0,2&start=earliest|latest&group.id=NAME&security...]`
//!   ([`kafka`], through the client of [`kafka_client`], which also mirrors the committed
//!   positions to consumer group NAME);
//! - `-` or `stdin`: NDJSON on standard input ([`mod@file`]; not resumable);
//! - a path or glob of NDJSON files, optionally `file://`-prefixed, with `--follow` to keep
//!   reading appended lines and new files ([`mod@file`]).

pub mod file;
pub mod follow;
pub mod kafka;
pub mod kafka_client;
pub mod kafka_msk_iam;
mod lines;

use std::sync::Arc;
use std::time::Duration;

use crate::base::error::{Error, Result};

pub use crate::table::exactly_once::Positions;

/// One record of a stream.
#[derive(Debug, Clone)]
pub struct SourceRecord {
    pub stream: Arc<str>,
    /// The position right after this record.
    pub next_position: i64,
    /// This record's own position (Kafka offset, file byte offset, stdin line number).
    pub position: i64,
    /// The value; empty for a Kafka tombstone (null value). A slice of a block shared by the
    /// records read with it (one allocation per chunk of lines).
    pub payload: bytes::Bytes,
    /// The Kafka message key (upsert tombstones carry their key only there).
    pub key: Option<Vec<u8>>,
    /// Not a record: the source read past positions it delivers nothing for (a Kafka
    /// transaction's control records and the records of aborted transactions), and the
    /// stream's position moves to `next_position` with the records before it.
    pub marker: bool,
}

/// Lag of one stream: records (or bytes, for files) not yet read.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StreamLag {
    pub stream: String,
    pub lag: i64,
    /// Kafka: the partition's high watermark (the offset after its last record), which
    /// [`committed_lag`] counts from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_watermark: Option<i64>,
    /// Where this process started reading the stream (the committed position when it had
    /// one): the committed position of a stream not committed yet.
    #[serde(skip)]
    pub start: Option<i64>,
}

/// Lag from the committed position, per stream that has a high watermark: the high watermark
/// minus the next position stored in the table (`floe.position.<stream>` of this writer's
/// last commit, or where reading started when nothing was committed yet). It covers what was
/// read but not committed yet too; [`StreamLag::lag`] counts from what was fetched.
pub fn committed_lag(lag: &[StreamLag], committed: &Positions) -> Vec<StreamLag> {
    lag.iter()
        .filter_map(|l| {
            let hw = l.high_watermark?;
            let next = committed.get(&l.stream).copied().or(l.start)?;
            Some(StreamLag {
                stream: l.stream.clone(),
                lag: (hw - next).max(0),
                high_watermark: Some(hw),
                start: l.start,
            })
        })
        .collect()
}

/// A source that stopped answering (a Kafka broker gone): what the ingest waits for.
#[derive(Debug, Clone)]
pub struct Unreachable {
    /// What is waited for, e.g. `Kafka broker 127.0.0.1:9092 (topic events partition 0)`.
    pub what: String,
    /// Why the last attempt failed, e.g. `connection refused`.
    pub reason: String,
    /// When the source last answered (or the first failure, if it never did).
    pub since: std::time::Instant,
    /// The position the failing read asks for.
    pub position: i64,
}

/// Reads the positions a worker of a `--group` resumes streams from (the group's chain: the
/// table's positions overlaid with the hand-offs still waiting), anew at each call.
pub type Resolver =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<Positions>> + Send + Sync>;

/// A change of the streams this worker reads, made by the source's own group protocol (Kafka's
/// consumer group, [`Source::assign_by_group`]).
#[derive(Debug)]
pub enum Rebalance {
    /// These streams are now this worker's, from these positions (`None`: the group never
    /// handed off a position of the stream, reading starts by the source's `start`).
    Assigned(std::collections::BTreeMap<String, Option<i64>>),
    /// These streams are taken away: every record read from them must be handed off before
    /// `done` is answered (or dropped, when the ingest stops), since their next owner resumes
    /// from the group's chain.
    Revoked {
        streams: Vec<String>,
        done: tokio::sync::oneshot::Sender<()>,
    },
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

    /// `Some` while the source does not answer and its reader retries (a Kafka broker gone);
    /// sources that cannot become unreachable always answer `None`.
    fn unreachable(&self) -> Option<Unreachable> {
        None
    }

    /// The table now holds `positions` (called after each commit): a Kafka source with
    /// `group.id` mirrors them to its consumer group, in the background.
    fn committed(&mut self, _positions: &Positions) {}

    /// The ingest ends: waits (briefly) for background work such as the last consumer group
    /// commit.
    async fn finish(&mut self) {}

    /// Called before [`Source::start`] by a worker of `--group NAME`: a source that can let its
    /// own group protocol assign streams among the workers (Kafka without `?partitions=`)
    /// does so, resolving each assigned stream's position with `resolver`, and reports the
    /// changes through [`Source::rebalance`]; it answers whether it does.
    fn assign_by_group(&mut self, _group: &str, _resolver: Resolver) -> bool {
        false
    }

    /// The next change of the streams this worker reads, if any (see [`Rebalance`]).
    fn rebalance(&mut self) -> Option<Rebalance> {
        None
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

/// How long a batch waits for more records after its first while fewer than `max` are
/// queued. A reader that hands records over one at a time (Kafka's) otherwise races the
/// decoder into batches of a few records each, whose fixed cost then dominates; 5 ms adds
/// nothing a commit interval would notice.
const LINGER: Duration = Duration::from_millis(5);

/// Receives from a background reader that sends records in chunks (the line reader of
/// [`mod@file`] and [`follow`], the Kafka reader), batching up to `max` records. `open` turns an
/// item into its records, or keeps it (a control event) and answers `None`, which ends the
/// batch there. What a chunk holds beyond `max` waits in `rest` for the next call; a control
/// item is only taken once `rest` is empty, so it stays behind every record sent before it.
///
/// Waits up to `wait` for the first records (an empty batch when none came, `None` once the
/// reader ended), then lingers [`LINGER`] for more while the batch is not full.
pub(crate) async fn recv_chunks<T>(
    rx: &mut tokio::sync::mpsc::Receiver<Result<T>>,
    rest: &mut std::collections::VecDeque<SourceRecord>,
    max: usize,
    wait: Duration,
    mut open: impl FnMut(T) -> Option<Vec<SourceRecord>>,
) -> Result<Option<Vec<SourceRecord>>> {
    use tokio::sync::mpsc::error::TryRecvError;
    let max = max.max(1);
    let take = |rest: &mut std::collections::VecDeque<SourceRecord>, out: &mut Vec<_>| {
        let n = (max - out.len()).min(rest.len());
        out.extend(rest.drain(..n));
    };
    // A chunk that fits whole goes straight into the batch; only what is left over waits in
    // `rest` (each record moved once, not twice).
    let add = |chunk: Vec<SourceRecord>,
               rest: &mut std::collections::VecDeque<SourceRecord>,
               out: &mut Vec<SourceRecord>| {
        if rest.is_empty() && out.len() + chunk.len() <= max {
            match out.is_empty() {
                true => *out = chunk,
                false => out.extend(chunk),
            }
        } else {
            rest.extend(chunk);
            take(rest, out);
        }
    };
    let mut out = Vec::new();
    take(rest, &mut out);
    if out.is_empty() {
        let first = match tokio::time::timeout(wait, rx.recv()).await {
            Err(_) => return Ok(Some(Vec::new())),
            Ok(None) => return Ok(None),
            Ok(Some(item)) => item?,
        };
        match open(first) {
            Some(chunk) => add(chunk, rest, &mut out),
            None => return Ok(Some(Vec::new())),
        }
    }
    // The batch grows by whole chunks: room for what it may still take, within reason.
    out.reserve((max - out.len()).min(64 * 1024));
    let linger_until = tokio::time::Instant::now() + LINGER;
    while out.len() < max {
        let item = match rx.try_recv() {
            Ok(item) => item?,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                match tokio::time::timeout_at(linger_until, rx.recv()).await {
                    Ok(Some(item)) => item?,
                    Ok(None) | Err(_) => break,
                }
            }
        };
        match open(item) {
            Some(chunk) => add(chunk, rest, &mut out),
            None => break,
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(stream: &str, lag: i64, hw: Option<i64>, start: Option<i64>) -> StreamLag {
        StreamLag {
            stream: stream.into(),
            lag,
            high_watermark: hw,
            start,
        }
    }

    #[tokio::test]
    async fn chunks_are_cut_to_the_batch_size_and_nothing_is_lost_or_reordered() {
        let rec = |i: i64| SourceRecord {
            stream: Arc::from("s"),
            next_position: i + 1,
            position: i,
            payload: i.to_string().into_bytes().into(),
            key: None,
            marker: false,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        // Chunks of 7, 1 and 12 records, then the reader ends.
        let mut next = 0;
        for size in [7, 1, 12] {
            tx.send(Ok((next..next + size).map(rec).collect()))
                .await
                .unwrap();
            next += size;
        }
        drop(tx);
        let mut rest = std::collections::VecDeque::new();
        let wait = Duration::from_secs(5);
        let mut sizes = Vec::new();
        let mut got = Vec::new();
        while let Some(batch) = recv_chunks(&mut rx, &mut rest, 5, wait, Some)
            .await
            .unwrap()
        {
            assert!(!batch.is_empty() && batch.len() <= 5, "{}", batch.len());
            sizes.push(batch.len());
            got.extend(batch.into_iter().map(|r| r.position));
        }
        assert_eq!(got, (0..20).collect::<Vec<_>>());
        assert_eq!(sizes, vec![5, 5, 5, 5]);
        // An error from the reader reaches the engine; an idle reader gives an empty batch.
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        tx.send(Err(Error::invalid_option("x", "y", "z")))
            .await
            .unwrap();
        assert!(recv_chunks(&mut rx, &mut rest, 5, wait, Some)
            .await
            .is_err());
        let short = Duration::from_millis(10);
        let idle = recv_chunks(&mut rx, &mut rest, 5, short, Some)
            .await
            .unwrap();
        assert_eq!(idle.map(|b| b.len()), Some(0));
    }

    /// A control item (a Kafka rebalance) ends the batch and is taken only after every record
    /// sent before it, even those of a chunk cut by the batch size.
    #[tokio::test]
    async fn a_control_item_stays_behind_the_records_sent_before_it() {
        enum Item {
            Records(Vec<SourceRecord>),
            Control(&'static str),
        }
        let rec = |i: i64| SourceRecord {
            stream: Arc::from("s"),
            next_position: i + 1,
            position: i,
            payload: bytes::Bytes::new(),
            key: None,
            marker: false,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        for item in [
            Item::Records((0..7).map(rec).collect()),
            Item::Control("revoked"),
            Item::Records((7..10).map(rec).collect()),
        ] {
            tx.send(Ok(item)).await.unwrap();
        }
        drop(tx);
        let mut rest = std::collections::VecDeque::new();
        let wait = Duration::from_secs(5);
        // (records delivered before the control was seen, the control)
        let mut seen: Option<(Vec<i64>, &str)> = None;
        let mut got: Vec<i64> = Vec::new();
        loop {
            let mut control = None;
            let batch = recv_chunks(&mut rx, &mut rest, 5, wait, |item| match item {
                Item::Records(r) => Some(r),
                Item::Control(c) => {
                    control = Some(c);
                    None
                }
            })
            .await
            .unwrap();
            let Some(batch) = batch else { break };
            got.extend(batch.iter().map(|r| r.position));
            if let Some(c) = control {
                assert!(seen.is_none());
                seen = Some((got.clone(), c));
            }
        }
        assert_eq!(seen, Some(((0..7).collect(), "revoked")));
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn committed_lag_counts_from_the_table_position_not_the_fetch_position() {
        let fetched = vec![
            // Fetched up to 90 of 100, committed up to 40: 60 not in the table yet.
            lag("kafka:t:0", 10, Some(100), Some(0)),
            // Never committed in this table: counts from where reading started.
            lag("kafka:t:1", 5, Some(50), Some(20)),
            // No high watermark (not a Kafka stream): no committed lag.
            lag("file:a", 3, None, None),
            // A high watermark below the committed position (truncated topic): 0, never
            // negative.
            lag("kafka:t:2", 0, Some(5), Some(0)),
        ];
        let committed: Positions = [("kafka:t:0".to_string(), 40), ("kafka:t:2".to_string(), 9)]
            .into_iter()
            .collect();
        let got: Vec<(String, i64)> = committed_lag(&fetched, &committed)
            .into_iter()
            .map(|l| (l.stream, l.lag))
            .collect();
        assert_eq!(
            got,
            vec![
                ("kafka:t:0".to_string(), 60),
                ("kafka:t:1".to_string(), 30),
                ("kafka:t:2".to_string(), 0),
            ]
        );
        // Everything committed: both lags agree.
        let all: Positions = [("kafka:t:0".to_string(), 90)].into_iter().collect();
        assert_eq!(committed_lag(&fetched[..1], &all)[0].lag, 10);
    }
}
