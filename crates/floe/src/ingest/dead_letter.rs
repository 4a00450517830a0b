//! Dead-letter sinks: records that do not fit the table go here with their original payload,
//! source position and reason, and the stream goes on. `--dead-letter FILE.ndjson` appends one
//! JSON object per line; `--dead-letter kafka://HOST:PORT/TOPIC` produces to a topic.
//!
//! Entries are written before the data commit that moves past them, so none is lost; after a
//! crash the records since the last commit are read again and their entries may repeat.

use std::io::Write;

use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::record::Record;

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

/// Where rejected records go.
pub enum DeadLetterSink {
    File {
        path: std::path::PathBuf,
        file: std::io::BufWriter<std::fs::File>,
    },
    Kafka {
        uri: String,
        client: Box<PartitionClient>,
    },
}

impl DeadLetterSink {
    /// Opens `spec`: a file path (appended to) or `kafka://HOST:PORT/TOPIC` (created if missing,
    /// one partition).
    pub async fn open(spec: &str) -> Result<Self> {
        if spec.starts_with("kafka://") {
            let crate::ingest::source::kafka::KafkaUri { brokers, topic, .. } =
                crate::ingest::source::kafka::parse_uri(spec)?;
            let client = crate::ingest::source::kafka::connect(&brokers).await?;
            let exists = client
                .list_topics()
                .await
                .map(|ts| ts.iter().any(|t| t.name == topic))
                .unwrap_or(false);
            if !exists {
                if let Ok(c) = client.controller_client() {
                    let _ = c.create_topic(topic.clone(), 1, 1, 5_000).await;
                }
            }
            let pc = client
                .partition_client(topic.clone(), 0, UnknownTopicHandling::Retry)
                .await
                .map_err(|e| Error::InputFile {
                    path: spec.into(),
                    reason: format!("dead-letter topic: {e}"),
                })?;
            return Ok(Self::Kafka {
                uri: spec.to_string(),
                client: Box::new(pc),
            });
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
            Self::Kafka { uri, client } => {
                let records = entries
                    .iter()
                    .map(|e| Record {
                        key: Some(format!("{}@{}", e.stream, e.position).into_bytes()),
                        value: serde_json::to_vec(e).ok(),
                        headers: Default::default(),
                        timestamp: chrono::Utc::now(),
                    })
                    .collect();
                client
                    .produce(records, Compression::NoCompression)
                    .await
                    .map(|_| ())
                    .map_err(|e| Error::InputFile {
                        path: uri.clone().into(),
                        reason: format!("cannot produce dead letters: {e}"),
                    })
            }
        }
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
