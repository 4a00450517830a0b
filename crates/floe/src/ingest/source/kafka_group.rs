//! The table's positions mirrored to a Kafka consumer group (`group.id=NAME` on a Kafka
//! source), as the Kafka Connect Iceberg sink does, so lag monitors that read consumer groups
//! see floe's progress. The table stays the only source of truth: floe never reads these
//! offsets back (a restart resumes from the table), and a failed offset commit is logged and
//! retried with the next table commit, never an ingest failure.
//!
//! rskafka has no group APIs, so this module speaks the two requests a standalone consumer
//! needs, framed as the Kafka protocol guide lays them out (<https://kafka.apache.org/protocol>,
//! "Common Request and Response Structure": a size-prefixed request header v1 and response
//! header v0, big-endian integers, int16-length strings, int32-length arrays):
//! `FindCoordinator` v1 (key type 0 = group) on a bootstrap broker, then `OffsetCommit` v2 on
//! the coordinator with generation id -1 and an empty member id, which Kafka accepts for a
//! group with no active members (the commit of a consumer with manual assignment). Both
//! versions are served by every broker from Kafka 0.11 to 4.x.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// How long one offset commit (connect, find the coordinator, commit) may take.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the end of an ingest waits for its last offset commit.
const FINISH_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest response accepted.
const MAX_RESPONSE: usize = 1 << 20;

const OFFSET_COMMIT: (i16, i16) = (8, 2);
const FIND_COORDINATOR: (i16, i16) = (10, 1);

/// Kafka protocol encoding of request bodies.
#[derive(Default, Clone)]
struct Body(Vec<u8>);

impl Body {
    fn i8(mut self, v: i8) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn string(self, s: &str) -> Self {
        let mut b = self.i16(s.len() as i16);
        b.0.extend(s.as_bytes());
        b
    }
}

/// Reads a response body.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        if self.0.len() < N {
            return Err("response too short".into());
        }
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().expect("N bytes"))
    }
    fn i16(&mut self) -> Result<i16, String> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Result<i32, String> {
        self.take().map(i32::from_be_bytes)
    }
    /// A string, or nothing for null (-1).
    fn string(&mut self) -> Result<Option<String>, String> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(None);
        }
        let n = n as usize;
        if self.0.len() < n {
            return Err("response too short".into());
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(Some(String::from_utf8_lossy(s).into_owned()))
    }
}

fn find_coordinator(group: &str) -> Body {
    Body::default().string(group).i8(0)
}

/// (error code, error message, host, port) of a `FindCoordinator` v1 response.
fn read_coordinator(body: &[u8]) -> Result<(i16, Option<String>, String, i32), String> {
    let mut r = Reader(body);
    let _throttle_time_ms = r.i32()?;
    let code = r.i16()?;
    let message = r.string()?;
    let _node_id = r.i32()?;
    let host = r.string()?.unwrap_or_default();
    Ok((code, message, host, r.i32()?))
}

fn offset_commit(group: &str, topic: &str, offsets: &[(i32, i64)]) -> Body {
    let mut b = Body::default()
        .string(group)
        .i32(-1) // generation id: none (no group membership)
        .string("") // member id
        .i64(-1) // retention time: the broker's default
        .i32(1)
        .string(topic)
        .i32(offsets.len() as i32);
    for (partition, offset) in offsets {
        b = b.i32(*partition).i64(*offset).i16(-1); // null metadata
    }
    b
}

/// (partition, error code) of an `OffsetCommit` v2 response.
fn read_offset_commit(body: &[u8]) -> Result<Vec<(i32, i16)>, String> {
    let mut r = Reader(body);
    let mut out = Vec::new();
    for _ in 0..r.i32()?.max(0) {
        r.string()?;
        for _ in 0..r.i32()?.max(0) {
            let p = r.i32()?;
            out.push((p, r.i16()?));
        }
    }
    Ok(out)
}

/// The names of the error codes these two requests answer with (Kafka protocol guide, "Error
/// Codes").
fn code_name(code: i16) -> String {
    match code {
        3 => "UNKNOWN_TOPIC_OR_PARTITION".into(),
        12 => "OFFSET_METADATA_TOO_LARGE".into(),
        14 => "COORDINATOR_LOAD_IN_PROGRESS".into(),
        15 => "COORDINATOR_NOT_AVAILABLE".into(),
        16 => "NOT_COORDINATOR".into(),
        22 => "ILLEGAL_GENERATION (the group has active members)".into(),
        25 => "UNKNOWN_MEMBER_ID (the group has active members)".into(),
        29 => "TOPIC_AUTHORIZATION_FAILED".into(),
        30 => "GROUP_AUTHORIZATION_FAILED".into(),
        c => format!("error code {c}"),
    }
}

/// A connection to one broker, one request at a time.
struct Conn {
    addr: String,
    stream: TcpStream,
    correlation: i32,
}

impl Conn {
    async fn open(addr: &str) -> Result<Self, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(Self {
            addr: addr.to_string(),
            stream,
            correlation: 0,
        })
    }

    /// Sends `body` as request (api key, version) and returns the response body.
    async fn call(&mut self, (key, version): (i16, i16), body: Body) -> Result<Vec<u8>, String> {
        self.correlation += 1;
        let header = Body::default()
            .i16(key)
            .i16(version)
            .i32(self.correlation)
            .string("floe");
        let size = (header.0.len() + body.0.len()) as i32;
        let mut msg = size.to_be_bytes().to_vec();
        msg.extend(header.0);
        msg.extend(body.0);
        let io = |e: std::io::Error| format!("{}: {e}", self.addr);
        self.stream.write_all(&msg).await.map_err(io)?;
        let size = self.stream.read_i32().await.map_err(io)?;
        if size < 4 || size as usize > MAX_RESPONSE {
            return Err(format!("{}: response of {size} bytes", self.addr));
        }
        let mut buf = vec![0u8; size as usize];
        self.stream.read_exact(&mut buf).await.map_err(io)?;
        let correlation = i32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
        if correlation != self.correlation {
            return Err(format!("{}: answer to another request", self.addr));
        }
        buf.drain(..4);
        Ok(buf)
    }
}

/// The group's coordinator, found through the first bootstrap broker that answers.
async fn coordinator(brokers: &[String], group: &str) -> Result<Conn, String> {
    let mut last = String::from("no broker");
    for b in brokers {
        let mut c = match Conn::open(b).await {
            Ok(c) => c,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let answer = c.call(FIND_COORDINATOR, find_coordinator(group)).await?;
        let (code, message, host, port) = read_coordinator(&answer)?;
        if code != 0 {
            return Err(format!(
                "finding the coordinator: {}{}",
                code_name(code),
                message.map(|m| format!(" ({m})")).unwrap_or_default()
            ));
        }
        return Conn::open(&format!("{host}:{port}")).await;
    }
    Err(last)
}

/// Commits offsets to a consumer group in the background: the latest positions handed to
/// [`GroupCommitter::commit`] win, a slow or gone broker never holds the ingest up.
pub struct GroupCommitter {
    tx: watch::Sender<(u64, Vec<(i32, i64)>)>,
    done: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl GroupCommitter {
    /// Starts committing `topic`'s offsets to `group` through `brokers`.
    pub fn start(brokers: Vec<String>, group: String, topic: String) -> Self {
        let (tx, mut rx) = watch::channel((0u64, Vec::new()));
        let (done_tx, done) = watch::channel(0u64);
        let task = tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            let mut failing = false;
            while rx.changed().await.is_ok() {
                let (seq, offsets) = rx.borrow_and_update().clone();
                let request = offset_commit(&group, &topic, &offsets);
                let attempt = tokio::time::timeout(COMMIT_TIMEOUT, async {
                    // A kept connection may have died with its broker: one failure on it is
                    // tried again on a new one.
                    let answer = match conn.as_mut() {
                        Some(c) => c.call(OFFSET_COMMIT, request.clone()).await.ok(),
                        None => None,
                    };
                    let answer = match answer {
                        Some(a) => a,
                        None => {
                            conn = None;
                            let mut c = coordinator(&brokers, &group).await?;
                            let a = c.call(OFFSET_COMMIT, request).await?;
                            conn = Some(c);
                            a
                        }
                    };
                    match read_offset_commit(&answer)?
                        .iter()
                        .find(|(_, code)| *code != 0)
                    {
                        Some((p, code)) => Err(format!("partition {p}: {}", code_name(*code))),
                        None => Ok(()),
                    }
                })
                .await
                .unwrap_or_else(|_| {
                    Err(format!("no answer within {} s", COMMIT_TIMEOUT.as_secs()))
                });
                match attempt {
                    Ok(()) => {
                        if failing {
                            tracing::info!(group = %group, "consumer group offsets committed again");
                        }
                        failing = false;
                    }
                    Err(e) => {
                        // A new coordinator is looked up next time (it may have moved).
                        conn = None;
                        if !failing {
                            tracing::warn!(group = %group, "committing offsets to the Kafka consumer group (retried at the next table commit): {e}");
                        }
                        failing = true;
                    }
                }
                let _ = done_tx.send(seq);
            }
        });
        Self { tx, done, task }
    }

    /// Commits `offsets` (partition, next offset to read) soon, replacing any not sent yet.
    pub fn commit(&self, offsets: Vec<(i32, i64)>) {
        self.tx.send_modify(|(seq, o)| {
            *seq += 1;
            *o = offsets;
        });
    }

    /// Waits (a few seconds at most) for the last [`GroupCommitter::commit`] to be tried.
    pub async fn finish(&mut self) {
        let last = self.tx.borrow().0;
        let _ = tokio::time::timeout(FINISH_TIMEOUT, self.done.wait_for(|d| *d >= last)).await;
    }
}

impl Drop for GroupCommitter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_commit_is_encoded_as_the_protocol_guide_lays_it_out() {
        let mut want: Vec<u8> = Vec::new();
        want.extend([0, 1, b'g']); // group id
        want.extend((-1i32).to_be_bytes()); // generation id
        want.extend([0, 0]); // member id ""
        want.extend((-1i64).to_be_bytes()); // retention time
        want.extend(1i32.to_be_bytes()); // one topic
        want.extend([0, 1, b't']);
        want.extend(1i32.to_be_bytes()); // one partition
        want.extend(2i32.to_be_bytes());
        want.extend(7i64.to_be_bytes());
        want.extend((-1i16).to_be_bytes()); // null metadata
        assert_eq!(offset_commit("g", "t", &[(2, 7)]).0, want);
        assert_eq!(find_coordinator("g").0, vec![0, 1, b'g', 0]);

        // topics -> partitions -> error codes.
        let mut answer: Vec<u8> = Vec::new();
        answer.extend(1i32.to_be_bytes());
        answer.extend([0, 1, b't']);
        answer.extend(2i32.to_be_bytes());
        answer.extend(2i32.to_be_bytes());
        answer.extend(0i16.to_be_bytes());
        answer.extend(3i32.to_be_bytes());
        answer.extend(25i16.to_be_bytes());
        assert_eq!(read_offset_commit(&answer).unwrap(), vec![(2, 0), (3, 25)]);
        assert!(read_offset_commit(&answer[..answer.len() - 1]).is_err());
        assert!(code_name(25).contains("active members"));

        let mut answer: Vec<u8> = Vec::new();
        answer.extend(0i32.to_be_bytes()); // throttle
        answer.extend(0i16.to_be_bytes());
        answer.extend((-1i16).to_be_bytes()); // null message
        answer.extend(7i32.to_be_bytes()); // node
        answer.extend([0, 2, b'h', b'1']);
        answer.extend(9092i32.to_be_bytes());
        assert_eq!(
            read_coordinator(&answer).unwrap(),
            (0, None, "h1".to_string(), 9092)
        );
    }
}
