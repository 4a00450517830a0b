//! Kafka source:
//! `kafka://HOST:PORT[,HOST:PORT]/TOPIC[?partitions=0,2&start=earliest|latest&group.id=NAME]`.
//!
//! One fetch task per partition reads from the position committed in the table (or the
//! earliest/latest offset on first start) and feeds a bounded channel, so a slow table write
//! applies back-pressure instead of buffering without limit. The table is the only source of
//! truth for positions (exactly-once); with `group.id` the positions of each table commit are
//! also committed to that consumer group ([`super::kafka_group`]), for lag monitors only.
//! Lag per partition is the fetch response's high watermark minus the next offset.
//!
//! A broker that goes away mid-stream: the client's own retries are bounded ([`backoff`]: a
//! few seconds per call) and each fetch has a time limit, so the fetch task gets control back,
//! marks its partition unreachable ([`Source::unreachable`]: what, why, since when) and tries
//! again, from the same offset, until the broker answers: nothing is skipped or read twice.
//! The engine reports the wait and gives up after `--source-timeout`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rskafka::client::error::{Error as KafkaError, RequestError};
use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::BackoffConfig;
use tokio::sync::mpsc;

use super::kafka_group::GroupCommitter;
use super::{recv_batch, Positions, Source, SourceRecord, StreamLag, Unreachable};
use crate::base::error::{Error, Result};

/// Records buffered between the fetch tasks and the engine.
const CHANNEL: usize = 16 * 1024;
/// Bytes asked per fetch.
const FETCH_MAX_BYTES: i32 = 4 * 1024 * 1024;
/// How long the broker may hold a fetch when there is no data.
const FETCH_WAIT_MS: i32 = 500;
/// How long one fetch (with the client's retries inside) may take before the partition counts
/// as unreachable: a network that drops packets, where connecting hangs instead of failing.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between fetch attempts while the broker is unreachable.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Where to start a partition that has no committed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
}

/// What a fetch task knows of its partition.
#[derive(Debug)]
struct PartitionState {
    partition: i32,
    /// Where this process started reading.
    start: i64,
    /// The next offset to fetch.
    next: i64,
    high_watermark: Option<i64>,
    /// Since when and why the broker does not answer for this partition.
    down: Option<(Instant, String)>,
    /// When a fetch last succeeded.
    last_ok: Instant,
}

type Shared = Arc<Mutex<BTreeMap<String, PartitionState>>>;

/// A Kafka topic (all partitions or a chosen subset).
pub struct KafkaSource {
    brokers: Vec<String>,
    topic: String,
    partitions: Option<Vec<i32>>,
    start: Start,
    /// Consumer group the table's positions are mirrored to (`group.id`).
    group: Option<String>,
    committer: Option<GroupCommitter>,
    rx: Option<mpsc::Receiver<Result<SourceRecord>>>,
    state: Shared,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The stream name of a topic partition in positions and summaries.
pub fn stream_name(topic: &str, partition: i32) -> String {
    format!("kafka:{topic}:{partition}")
}

/// How long connecting to the brokers may take before floe gives up with an error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The client's retry policy for a source: rskafka retries a lost connection inside each call
/// with an exponential backoff that by default grows to minutes and never gives up, which
/// hides a gone broker. Bounded here (at most 500 ms between attempts, about 1 s of waiting
/// per call; a fetch retries twice nested, reconnecting inside), the call fails within a few
/// seconds and the fetch task reports the wait and tries again.
pub fn backoff() -> BackoffConfig {
    BackoffConfig {
        init_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(500),
        base: 2.0,
        deadline: Some(Duration::from_secs(1)),
    }
}

/// Connects to `brokers` with rskafka's default retries (clear error naming them when
/// unreachable after 15 s).
pub async fn connect(brokers: &[String]) -> Result<Client> {
    connect_with(brokers, None).await
}

/// Connects to `brokers`, with `backoff` for the client's calls when given; tries again until
/// 15 s passed, then fails with an error naming the brokers.
pub async fn connect_with(brokers: &[String], backoff: Option<BackoffConfig>) -> Result<Client> {
    let unreachable = |reason: String| Error::InputFile {
        path: brokers.join(",").into(),
        reason,
    };
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let mut last = String::new();
    loop {
        let mut b = ClientBuilder::new(brokers.to_vec()).client_id("floe");
        if let Some(c) = &backoff {
            b = b.backoff_config(c.clone());
        }
        match tokio::time::timeout_at(deadline, b.build()).await {
            Ok(Ok(c)) => return Ok(c),
            Ok(Err(e)) if tokio::time::Instant::now() + RETRY_PAUSE < deadline => {
                last = format!(": {}", short_reason(&e));
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Ok(Err(e)) => return Err(unreachable(format!("cannot connect to Kafka: {e}"))),
            Err(_) => {
                return Err(unreachable(format!(
                    "cannot connect to Kafka within {} s{last}",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        }
    }
}

/// Errors a fetch task retries: the broker or the network is gone (the client's own retries
/// ran out), not a request the broker refused (an offset out of range stays fatal).
fn transient(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::Connection(_)
            | KafkaError::RetryFailed(_)
            | KafkaError::Timeout
            | KafkaError::Request(RequestError::IO(_) | RequestError::Poisoned(_))
    )
}

/// Runs a start-up call again while it fails with a transient error, for up to 15 s: the
/// bounded [`backoff`] gives up after a second, but a topic just created or a leader being
/// elected takes longer.
async fn patiently<T, F, Fut>(f: F) -> std::result::Result<T, KafkaError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, KafkaError>>,
{
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    loop {
        match f().await {
            Err(e) if transient(&e) && Instant::now() + RETRY_PAUSE < deadline => {
                tokio::time::sleep(RETRY_PAUSE).await
            }
            r => return r,
        }
    }
}

/// The innermost cause of `e`, short: `connection refused` rather than the client's chain.
fn short_reason(e: &(dyn std::error::Error + 'static)) -> String {
    let full = e.to_string();
    for (needle, short) in [
        ("Connection refused", "connection refused"),
        ("Connection reset", "connection reset"),
        ("Broken pipe", "connection closed"),
        ("timed out", "timed out"),
        ("No route to host", "no route to host"),
        ("failed to lookup address", "unknown host"),
    ] {
        if full.contains(needle) {
            return short.to_string();
        }
    }
    let mut inner: &dyn std::error::Error = e;
    while let Some(s) = inner.source() {
        inner = s;
    }
    inner.to_string()
}

/// A parsed `kafka://h:p,h2:p/topic?query`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaUri {
    pub brokers: Vec<String>,
    pub topic: String,
    pub query: Vec<(String, String)>,
}

/// Splits `kafka://h:p,h2:p/topic?query` into brokers, topic and query pairs.
pub fn parse_uri(uri: &str) -> Result<KafkaUri> {
    let bad = |why: &str| Error::invalid_option("--source", uri, why);
    let rest = uri
        .strip_prefix("kafka://")
        .ok_or_else(|| bad("expected kafka://HOST:PORT/TOPIC"))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hosts, topic) = rest
        .split_once('/')
        .ok_or_else(|| bad("expected kafka://HOST:PORT/TOPIC"))?;
    if hosts.is_empty() || topic.is_empty() {
        return Err(bad("expected kafka://HOST:PORT/TOPIC"));
    }
    let brokers = hosts.split(',').map(str::to_string).collect();
    let pairs = query
        .split('&')
        .filter(|q| !q.is_empty())
        .map(|q| {
            q.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| bad("query parameters are KEY=VALUE"))
        })
        .collect::<Result<_>>()?;
    Ok(KafkaUri {
        brokers,
        topic: topic.to_string(),
        query: pairs,
    })
}

impl KafkaSource {
    /// Parses the source URI.
    pub fn parse(uri: &str) -> Result<Self> {
        let KafkaUri {
            brokers,
            topic,
            query,
        } = parse_uri(uri)?;
        let mut partitions = None;
        let mut start = Start::Earliest;
        let mut group = None;
        for (k, v) in query {
            match k.as_str() {
                "partitions" => {
                    let list = v
                        .split(',')
                        .map(|p| p.trim().parse::<i32>())
                        .collect::<std::result::Result<Vec<_>, _>>()
                        .map_err(|_| Error::invalid_option("partitions", &v, "expected 0,1,2"))?;
                    partitions = Some(list);
                }
                "start" => {
                    start = match v.as_str() {
                        "earliest" => Start::Earliest,
                        "latest" => Start::Latest,
                        _ => {
                            return Err(Error::invalid_option(
                                "start",
                                v,
                                "expected earliest or latest",
                            ))
                        }
                    }
                }
                // Kafka's consumer property name; `group` is the short form.
                "group.id" | "group" => {
                    if v.trim().is_empty() {
                        return Err(Error::invalid_option(&k, v, "expected a group name"));
                    }
                    group = Some(v);
                }
                other => {
                    return Err(Error::invalid_option(
                        "--source",
                        uri,
                        format!("unknown parameter '{other}' (known: partitions, start, group.id)"),
                    ))
                }
            }
        }
        Ok(Self {
            brokers,
            topic,
            partitions,
            start,
            group,
            committer: None,
            rx: None,
            state: Arc::default(),
            tasks: Vec::new(),
        })
    }
}

impl Drop for KafkaSource {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[async_trait::async_trait]
impl Source for KafkaSource {
    fn uri(&self) -> String {
        format!("kafka://{}/{}", self.brokers.join(","), self.topic)
    }

    async fn start(&mut self, resume: &Positions) -> Result<()> {
        let client = connect_with(&self.brokers, Some(backoff())).await?;
        let topics = patiently(|| client.list_topics())
            .await
            .map_err(|e| Error::InputFile {
                path: self.uri().into(),
                reason: format!("cannot list topics: {e}"),
            })?;
        let existing = topics
            .into_iter()
            .find(|t| t.name == self.topic)
            .map(|t| t.partitions.into_iter().collect::<Vec<_>>())
            .ok_or_else(|| Error::InputFile {
                path: self.uri().into(),
                reason: format!("topic '{}' does not exist", self.topic),
            })?;
        let partitions = match &self.partitions {
            None => existing,
            Some(chosen) => {
                if let Some(p) = chosen.iter().find(|p| !existing.contains(p)) {
                    return Err(Error::invalid_option(
                        "partitions",
                        p,
                        format!("topic '{}' has partitions {existing:?}", self.topic),
                    ));
                }
                chosen.clone()
            }
        };
        let (tx, rx) = mpsc::channel(CHANNEL);
        self.rx = Some(rx);
        if let Some(g) = &self.group {
            self.committer = Some(GroupCommitter::start(
                self.brokers.clone(),
                g.clone(),
                self.topic.clone(),
            ));
        }
        for p in partitions {
            let pc = patiently(|| {
                client.partition_client(self.topic.clone(), p, UnknownTopicHandling::Retry)
            })
            .await
            .map_err(|e| Error::InputFile {
                path: self.uri().into(),
                reason: format!("partition {p}: {e}"),
            })?;
            let stream: Arc<str> = stream_name(&self.topic, p).into();
            let mut offset = match resume.get(stream.as_ref()) {
                Some(o) => *o,
                None => patiently(|| {
                    pc.get_offset(match self.start {
                        Start::Earliest => OffsetAt::Earliest,
                        Start::Latest => OffsetAt::Latest,
                    })
                })
                .await
                .map_err(|e| Error::InputFile {
                    path: self.uri().into(),
                    reason: format!("partition {p}: cannot read the start offset: {e}"),
                })?,
            };
            self.state.lock().expect("not poisoned").insert(
                stream.to_string(),
                PartitionState {
                    partition: p,
                    start: offset,
                    next: offset,
                    high_watermark: None,
                    down: None,
                    last_ok: Instant::now(),
                },
            );
            let tx = tx.clone();
            let state = self.state.clone();
            self.tasks.push(tokio::spawn(async move {
                loop {
                    let fetch = pc.fetch_records(offset, 1..FETCH_MAX_BYTES, FETCH_WAIT_MS);
                    let failed = match tokio::time::timeout(FETCH_TIMEOUT, fetch).await {
                        Ok(Ok(got)) => Ok(got),
                        Ok(Err(e)) if transient(&e) => Err(short_reason(&e)),
                        Ok(Err(e)) => {
                            let _ = tx
                                .send(Err(Error::InputFile {
                                    path: format!("{stream}").into(),
                                    reason: format!("fetch at offset {offset}: {e}"),
                                }))
                                .await;
                            return;
                        }
                        Err(_) => Err(format!("no answer within {} s", FETCH_TIMEOUT.as_secs())),
                    };
                    let (records, high_watermark) = match failed {
                        Ok(got) => got,
                        Err(reason) => {
                            // Marked and retried from the same offset: nothing skipped.
                            if let Some(s) = state.lock().expect("not poisoned").get_mut(&*stream) {
                                let since = s.down.as_ref().map_or(s.last_ok, |d| d.0);
                                s.down = Some((since, reason));
                            }
                            tokio::time::sleep(RETRY_PAUSE).await;
                            continue;
                        }
                    };
                    if let Some(s) = state.lock().expect("not poisoned").get_mut(&*stream) {
                        s.down = None;
                        s.last_ok = Instant::now();
                        s.high_watermark = Some(high_watermark);
                    }
                    for r in records {
                        if r.offset < offset {
                            continue;
                        }
                        offset = r.offset + 1;
                        let rec = SourceRecord {
                            stream: stream.clone(),
                            next_position: offset,
                            position: r.offset,
                            payload: r.record.value.unwrap_or_default(),
                            key: r.record.key,
                        };
                        if tx.send(Ok(rec)).await.is_err() {
                            return;
                        }
                    }
                    if let Some(s) = state.lock().expect("not poisoned").get_mut(&*stream) {
                        s.next = offset;
                    }
                }
            }));
        }
        Ok(())
    }

    async fn next(&mut self, max: usize, wait: Duration) -> Result<Option<Vec<SourceRecord>>> {
        match &mut self.rx {
            None => Err(Error::invalid_option("source", self.uri(), "not started")),
            Some(rx) => recv_batch(rx, max, wait).await,
        }
    }

    fn lag(&self) -> Vec<StreamLag> {
        // Ordered by stream name (a BTreeMap).
        self.state
            .lock()
            .expect("not poisoned")
            .iter()
            .filter_map(|(stream, s)| {
                let hw = s.high_watermark?;
                Some(StreamLag {
                    stream: stream.clone(),
                    lag: (hw - s.next).max(0),
                    high_watermark: Some(hw),
                    start: Some(s.start),
                })
            })
            .collect()
    }

    fn committed(&mut self, positions: &Positions) {
        if let Some(c) = &self.committer {
            let prefix = format!("kafka:{}:", self.topic);
            let offsets = positions
                .iter()
                .filter_map(|(s, p)| Some((s.strip_prefix(&prefix)?.parse().ok()?, *p)))
                .collect::<Vec<(i32, i64)>>();
            if !offsets.is_empty() {
                c.commit(offsets);
            }
        }
    }

    async fn finish(&mut self) {
        if let Some(c) = &mut self.committer {
            c.finish().await;
        }
    }

    fn unreachable(&self) -> Option<Unreachable> {
        let state = self.state.lock().expect("not poisoned");
        let down: Vec<(&PartitionState, &(Instant, String))> = state
            .values()
            .filter_map(|s| Some((s, s.down.as_ref()?)))
            .collect();
        let (first, (since, reason)) = *down.iter().min_by_key(|(_, d)| d.0)?;
        let partitions = down
            .iter()
            .map(|(s, _)| s.partition.to_string())
            .collect::<Vec<_>>();
        Some(Unreachable {
            what: format!(
                "Kafka broker {} (topic {} partition{} {})",
                self.brokers.join(","),
                self.topic,
                if partitions.len() > 1 { "s" } else { "" },
                partitions.join(", ")
            ),
            reason: reason.clone(),
            since: *since,
            position: first.next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_with_clear_errors() {
        let u = parse_uri("kafka://h1:9092,h2:9092/events?partitions=0,2").unwrap();
        assert_eq!(u.brokers, vec!["h1:9092", "h2:9092"]);
        assert_eq!(u.topic, "events");
        assert_eq!(u.query, vec![("partitions".to_string(), "0,2".to_string())]);
        assert!(parse_uri("kafka://h1:9092").is_err());
        assert!(KafkaSource::parse("kafka://h:1/t?start=middle").is_err());
        assert!(KafkaSource::parse("kafka://h:1/t?partitions=a").is_err());
        assert!(KafkaSource::parse("kafka://h:1/t?bogus=1").is_err());
        let s = KafkaSource::parse("kafka://h:1/t?start=latest&group=g").unwrap();
        assert_eq!(s.start, Start::Latest);
        assert_eq!(s.group.as_deref(), Some("g"));
        let s = KafkaSource::parse("kafka://h:1/t?group.id=floe-events").unwrap();
        assert_eq!(s.group.as_deref(), Some("floe-events"));
        let e = KafkaSource::parse("kafka://h:1/t?group.id=")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("group.id"), "{e}");
    }
}
