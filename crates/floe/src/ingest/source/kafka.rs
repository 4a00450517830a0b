//! Kafka source: `kafka://HOST:PORT[,HOST:PORT]/TOPIC[?partitions=0,2&start=earliest|latest]`.
//!
//! One fetch task per partition reads from the position committed in the table (or the
//! earliest/latest offset on first start) and feeds a bounded channel, so a slow table write
//! applies back-pressure instead of buffering without limit. No consumer group and no offset
//! commit to Kafka: the table is the only source of truth for positions (exactly-once).
//! Lag per partition is the fetch response's high watermark minus the next offset.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use tokio::sync::mpsc;

use super::{recv_batch, Positions, Source, SourceRecord, StreamLag};
use crate::error::{Error, Result};

/// Records buffered between the fetch tasks and the engine.
const CHANNEL: usize = 16 * 1024;
/// Bytes asked per fetch.
const FETCH_MAX_BYTES: i32 = 4 * 1024 * 1024;
/// How long the broker may hold a fetch when there is no data.
const FETCH_WAIT_MS: i32 = 500;

/// Where to start a partition that has no committed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
}

/// A Kafka topic (all partitions or a chosen subset).
pub struct KafkaSource {
    brokers: Vec<String>,
    topic: String,
    partitions: Option<Vec<i32>>,
    start: Start,
    rx: Option<mpsc::Receiver<Result<SourceRecord>>>,
    lag: Arc<Mutex<HashMap<String, i64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The stream name of a topic partition in positions and summaries.
pub fn stream_name(topic: &str, partition: i32) -> String {
    format!("kafka:{topic}:{partition}")
}

/// How long connecting to the brokers may take before floe gives up with an error (the client
/// itself retries forever).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Connects to `brokers` (clear error naming them when unreachable).
pub async fn connect(brokers: &[String]) -> Result<Client> {
    let unreachable = |reason: String| Error::InputFile {
        path: brokers.join(",").into(),
        reason,
    };
    let build = ClientBuilder::new(brokers.to_vec())
        .client_id("floe")
        .build();
    match tokio::time::timeout(CONNECT_TIMEOUT, build).await {
        Err(_) => Err(unreachable(format!(
            "cannot connect to Kafka within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
        Ok(r) => r.map_err(|e| unreachable(format!("cannot connect to Kafka: {e}"))),
    }
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
                // A consumer group name is accepted for familiarity but never used: positions
                // live in the table.
                "group" => {}
                other => {
                    return Err(Error::invalid_option(
                        "--source",
                        uri,
                        format!("unknown parameter '{other}' (known: partitions, start)"),
                    ))
                }
            }
        }
        Ok(Self {
            brokers,
            topic,
            partitions,
            start,
            rx: None,
            lag: Arc::default(),
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
        let client = connect(&self.brokers).await?;
        let topics = client.list_topics().await.map_err(|e| Error::InputFile {
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
        for p in partitions {
            let pc = client
                .partition_client(self.topic.clone(), p, UnknownTopicHandling::Retry)
                .await
                .map_err(|e| Error::InputFile {
                    path: self.uri().into(),
                    reason: format!("partition {p}: {e}"),
                })?;
            let stream: Arc<str> = stream_name(&self.topic, p).into();
            let mut offset = match resume.get(stream.as_ref()) {
                Some(o) => *o,
                None => pc
                    .get_offset(match self.start {
                        Start::Earliest => OffsetAt::Earliest,
                        Start::Latest => OffsetAt::Latest,
                    })
                    .await
                    .map_err(|e| Error::InputFile {
                        path: self.uri().into(),
                        reason: format!("partition {p}: cannot read the start offset: {e}"),
                    })?,
            };
            let tx = tx.clone();
            let lag = self.lag.clone();
            self.tasks.push(tokio::spawn(async move {
                loop {
                    match pc
                        .fetch_records(offset, 1..FETCH_MAX_BYTES, FETCH_WAIT_MS)
                        .await
                    {
                        Err(e) => {
                            let _ = tx
                                .send(Err(Error::InputFile {
                                    path: format!("{stream}").into(),
                                    reason: format!("fetch at offset {offset}: {e}"),
                                }))
                                .await;
                            return;
                        }
                        Ok((records, high_watermark)) => {
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
                                };
                                if tx.send(Ok(rec)).await.is_err() {
                                    return;
                                }
                            }
                            lag.lock()
                                .expect("not poisoned")
                                .insert(stream.to_string(), (high_watermark - offset).max(0));
                        }
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
        let mut out: Vec<StreamLag> = self
            .lag
            .lock()
            .expect("not poisoned")
            .iter()
            .map(|(s, l)| StreamLag {
                stream: s.clone(),
                lag: *l,
            })
            .collect();
        out.sort_by(|a, b| a.stream.cmp(&b.stream));
        out
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
    }
}
