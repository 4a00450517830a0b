//! Dead-letter sinks: records that do not fit the table go here with their original payload,
//! source position and reason, and the stream goes on. `--dead-letter FILE.ndjson` appends one
//! JSON object per line; `--dead-letter kafka://HOST:PORT/TOPIC` produces to a topic.
//!
//! Entries are written before the data commit that moves past them, so none is lost; after a
//! crash the records since the last commit are read again and their entries may repeat.

use std::io::Write;

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::FromClientConfigAndContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::ingest::source::kafka_client::{FloeContext, KafkaSettings};

use crate::base::error::{Error, Result};
use crate::records::value::BadValue;

/// One rejected record.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeadLetter {
    /// The source URI.
    pub source: String,
    /// Stream and position of the record (Kafka offset, file byte offset, stdin line).
    pub stream: String,
    pub position: i64,
    /// The original payload (lossy UTF-8: bytes that are not UTF-8 become U+FFFD).
    pub payload: String,
    /// The original payload in hex, when it is not valid UTF-8 (so no byte is lost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_hex: Option<String>,
    pub column: String,
    pub value: String,
    pub reason: String,
    /// RFC 3339 time of the rejection.
    pub rejected_at: String,
}

impl DeadLetter {
    /// An entry for `payload` rejected because of `bad`.
    pub fn new(source: &str, stream: &str, position: i64, payload: &[u8], bad: BadValue) -> Self {
        Self {
            source: source.to_string(),
            stream: stream.to_string(),
            position,
            payload: String::from_utf8_lossy(payload).into_owned(),
            payload_hex: std::str::from_utf8(payload)
                .is_err()
                .then(|| payload.iter().map(|b| format!("{b:02x}")).collect()),
            column: bad.column,
            value: bad.value,
            reason: bad.reason,
            rejected_at: chrono::Utc::now().to_rfc3339(),
        }
    }
}

/// How long one dead letter may take to reach the topic.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Where rejected records go.
pub enum DeadLetterSink {
    File {
        path: std::path::PathBuf,
        file: std::io::BufWriter<std::fs::File>,
    },
    Kafka {
        uri: String,
        topic: String,
        producer: Box<FutureProducer<FloeContext>>,
        ctx: FloeContext,
    },
}

impl DeadLetterSink {
    /// Opens `spec`: a file path (appended to) or `kafka://HOST:PORT/TOPIC` (created if missing,
    /// one partition).
    pub async fn open(spec: &str) -> Result<Self> {
        if spec.starts_with("kafka://") {
            return Self::open_kafka(spec).await;
        }
        let path = std::path::PathBuf::from(spec.strip_prefix("file://").unwrap_or(spec));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::InputFile {
                path: path.clone(),
                reason: format!("cannot open the dead-letter file: {e}"),
            })?;
        Ok(Self::File {
            path,
            file: std::io::BufWriter::new(file),
        })
    }

    /// Writes entries.
    pub async fn write(&mut self, entries: &[DeadLetter]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        match self {
            Self::File { path, file } => {
                for e in entries {
                    let line = serde_json::to_string(e).map_err(std::io::Error::other)?;
                    writeln!(file, "{line}").map_err(|err| Error::InputFile {
                        path: path.clone(),
                        reason: format!("cannot write the dead-letter file: {err}"),
                    })?;
                }
                Ok(())
            }
            Self::Kafka {
                uri,
                topic,
                producer,
                ctx,
            } => {
                let sends = entries.iter().map(|e| {
                    let key = format!("{}@{}", e.stream, e.position);
                    let value = serde_json::to_vec(e).unwrap_or_default();
                    let producer = &producer;
                    let topic = topic.as_str();
                    async move {
                        let record = FutureRecord::to(topic).key(&key).payload(&value);
                        producer
                            .send(record, SEND_TIMEOUT)
                            .await
                            .map(|_| ())
                            .map_err(|(e, _)| e.to_string())
                    }
                });
                let results = futures::future::join_all(sends).await;
                match results.into_iter().find_map(|r| r.err()) {
                    None => Ok(()),
                    Some(e) => Err(Error::InputFile {
                        path: uri.clone().into(),
                        reason: format!(
                            "cannot produce dead letters: {}",
                            ctx.fatal().unwrap_or(e)
                        ),
                    }),
                }
            }
        }
    }

    /// A dead-letter topic, created with one partition when it does not exist; the client
    /// has the source's security settings (the URI's parameters, `floe.toml`, environment).
    async fn open_kafka(spec: &str) -> Result<Self> {
        let crate::ingest::source::kafka::KafkaUri {
            brokers,
            topic,
            query,
        } = crate::ingest::source::kafka::parse_uri(spec)?;
        let settings = KafkaSettings::resolve(&query)?;
        let ctx = FloeContext::new(&settings, &brokers)?;
        let mut config = settings.client_config(&brokers);
        config
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "30000");
        let bad = |reason: String| Error::InputFile {
            path: crate::base::secrets::mask(spec).into(),
            reason,
        };
        let admin = AdminClient::from_config_and_context(&config, ctx.clone())
            .map_err(|e| bad(format!("dead-letter topic: {e}")))?;
        // The broker's default replication factor first (-1, KIP-464: a managed cluster may
        // demand 3), then 1 for a broker too old for that or with a single node.
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
        // rdkafka's admin client never serves the queue a token refresh arrives on, so with
        // AWS MSK IAM it could not log in: the topic must exist (MSK's usual
        // `auto.create.topics.enable=false` asks for that anyway); a missing one is named at
        // the first produce.
        let replications: &[i32] = if settings.msk_iam() { &[] } else { &[-1, 1] };
        for &replication in replications {
            let created = admin
                .create_topics(
                    &[NewTopic::new(
                        &topic,
                        1,
                        TopicReplication::Fixed(replication),
                    )],
                    &options,
                )
                .await;
            if let Some(fatal) = ctx.fatal() {
                return Err(bad(fatal));
            }
            match created.as_deref() {
                Ok([Ok(_)]) => break,
                Ok([Err((_, RDKafkaErrorCode::TopicAlreadyExists))]) => break,
                // Any other failure shows at the first produce, by name.
                other => tracing::debug!(
                    "creating the dead-letter topic {topic} (replication {replication}): {other:?}"
                ),
            }
        }
        let producer = FutureProducer::from_config_and_context(&config, ctx.clone())
            .map_err(|e| bad(format!("dead-letter topic: {e}")))?;
        Ok(Self::Kafka {
            uri: crate::base::secrets::mask(spec),
            topic,
            producer: Box::new(producer),
            ctx,
        })
    }

    /// Makes written entries durable (before the commit that moves past them).
    pub async fn sync(&mut self) -> Result<()> {
        if let Self::File { file, .. } = self {
            file.flush()?;
            file.get_ref().sync_data()?;
        }
        Ok(())
    }
}
