//! Kafka source:
//! `kafka://HOST:PORT[,HOST:PORT]/TOPIC[?partitions=0,2&start=earliest|latest&group.id=NAME]`,
//! plus the client's security settings as parameters ([`super::kafka_client`]:
//! `security.protocol`, `ssl.*`, `sasl.*`).
//!
//! One librdkafka consumer with a manual assignment reads every chosen partition from the
//! position committed in the table (or the earliest/latest offset on first start) and feeds a
//! bounded channel, so a slow table write applies back-pressure instead of buffering without
//! limit. The table is the only source of truth for positions (exactly-once); with `group.id`
//! the positions of each table commit are also committed to that consumer group (with
//! generation -1, as a consumer with a manual assignment does), for lag monitors only.
//!
//! Partitions assigned by the group ([`Source::assign_by_group`], a `--group` worker without
//! `?partitions=`): the consumer subscribes to the topic in Kafka consumer group `group.id`
//! (else the floe group's name), with librdkafka's default assignment strategy,
//! `range,roundrobin` (eager: a rebalance takes every partition and hands them out again).
//! `partition.assignment.strategy=cooperative-sticky` (KIP-429) moves only the partitions
//! that change owner and works with the same handler; it is not the default because both
//! brokers floe is tested on stall in its second round (Tansu 0.6 leaves the joining member
//! waiting for its SyncGroup answer until the round is over; noida-db 0.2.3 never assigns it
//! anything, with confluent-kafka alone too). Its rebalance callback ([`GroupAssign`])
//! runs on the reader's own thread, inside its poll: an assigned partition starts at the
//! group's chain read at that moment; a partition taken away is announced to the engine,
//! which hands off what it read, and only then unassigned (so the next owner, who reads the
//! chain when the partition is assigned to it, starts where this one stopped).
//!
//! Transactions: the consumer reads committed data only (`isolation.level=read_committed`):
//! librdkafka drops the records of aborted transactions and the control records, and the
//! reader moves the stream's position past them ([`SourceRecord::marker`]) once it is idle, so
//! a restart in the middle of transactions neither loses nor repeats a record. Lag counts to the
//! last stable offset (the end a committed reader can reach).
//!
//! A broker that goes away mid-stream: librdkafka reconnects (bounded backoff, 0.5 s at most)
//! and reports each failure; the reader marks its partitions unreachable
//! ([`Source::unreachable`]: what, why, since when) until a broker is up again, and reads on
//! from the same offsets: nothing is skipped or read twice. The engine reports the wait and
//! gives up after `--source-timeout`. A failure retrying cannot fix (credentials, TLS, ACLs)
//! stops the reader with one line naming the broker and the setting.

use futures::FutureExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::FromClientConfigAndContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::kafka_client::{classify, FloeContext, KafkaSettings, RebalanceHandler, Severity};
use super::lines::CHUNK;
use super::{
    recv_chunks, Positions, Rebalance, Resolver, Source, SourceRecord, StreamLag, Unreachable,
};
use crate::base::error::{Error, Result};

/// Chunks of records (up to [`CHUNK`] each) buffered between the reader and the engine.
const CHANNEL: usize = 16;
/// How long the reader waits for a message before it looks at positions and errors.
const IDLE: Duration = Duration::from_millis(250);
/// How long start-up calls (metadata, offsets) may take before floe gives up with an error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The group of a consumer without `group.id` (librdkafka needs one to assign partitions;
/// floe never joins it nor commits to it).
pub const IMPLICIT_GROUP: &str = "floe-ingest";
/// How long the end of an ingest waits for its last consumer group commit.
const FINISH_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the end of an ingest waits for the consumer to leave its group.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where to start a partition that has no committed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
}

impl Start {
    /// The offset to start from in a partition whose offsets run from `low` to `high`.
    fn pick(self, (low, high): (i64, i64)) -> i64 {
        match self {
            Start::Earliest => low,
            Start::Latest => high,
        }
    }
}

/// Partition `p` of `topic` is read from `offset` on: known to the lag and reachability
/// reports (`state`) and, at its next turn, to the reader (`inbox`).
fn begin(state: &Shared, inbox: &Inbox, topic: &str, p: i32, offset: i64) {
    state.lock().expect("not poisoned").insert(
        stream_name(topic, p),
        PartitionState {
            partition: p,
            start: offset,
            next: offset,
        },
    );
    inbox.lock().expect("not poisoned").push((p, Some(offset)));
}

/// What the reader knows of a partition.
#[derive(Debug)]
struct PartitionState {
    partition: i32,
    /// Where this process started reading.
    start: i64,
    /// The next offset to read.
    next: i64,
}

type Shared = Arc<Mutex<BTreeMap<String, PartitionState>>>;
type Consumer_ = StreamConsumer<FloeContext>;

/// What the reader hands the engine: records in order, or a change of the partitions it
/// reads (after every record read before it).
enum Item {
    Records(Vec<SourceRecord>),
    Control(Rebalance),
}

/// Records the reader took from the client and has not sent yet: the reader sends them when
/// [`CHUNK`] are held and before it waits for the client; a rebalance, which runs inside the
/// reader's poll, sends them before its change ([`GroupAssign`]), so the engine hands off
/// every record read before the partitions moved.
type Held = Arc<Mutex<Vec<SourceRecord>>>;

/// Takes the held records out, moving each stream's next offset past its last one.
fn take_held(held: &Held, state: &Shared) -> Vec<SourceRecord> {
    let records = std::mem::take(&mut *held.lock().expect("not poisoned"));
    if !records.is_empty() {
        let mut st = state.lock().expect("not poisoned");
        for (i, r) in records.iter().enumerate() {
            let last_of_run = records
                .get(i + 1)
                .is_none_or(|next| next.stream != r.stream);
            if let Some(s) = st.get_mut(r.stream.as_ref()).filter(|_| last_of_run) {
                s.next = r.next_position;
            }
        }
    }
    records
}

/// Partition changes the rebalance callback made (inside the reader's poll), applied by the
/// reader before it looks at what the poll returned: `Some(offset)` assigned from that offset,
/// `None` taken away.
type Inbox = Arc<Mutex<Vec<(i32, Option<i64>)>>>;

/// A Kafka topic (all partitions or a chosen subset).
pub struct KafkaSource {
    brokers: Vec<String>,
    topic: String,
    partitions: Option<Vec<i32>>,
    start: Start,
    /// Consumer group the table's positions are mirrored to (`group.id`).
    group: Option<String>,
    settings: KafkaSettings,
    ctx: FloeContext,
    consumer: Option<Arc<Consumer_>>,
    /// The last positions mirrored to the group (committed again, synchronously, at the end).
    mirrored: Option<TopicPartitionList>,
    rx: Option<mpsc::Receiver<Result<Item>>>,
    /// Records of a chunk received beyond what the engine asked for.
    rest: std::collections::VecDeque<SourceRecord>,
    /// A partition change the engine has not taken yet ([`Source::rebalance`]).
    control: Option<Rebalance>,
    /// `--group NAME` with partitions assigned by Kafka's consumer group: the group, and how
    /// an assigned partition's position is read.
    by_group: Option<(String, Resolver)>,
    state: Shared,
    /// The reader's thread, and what tells it to stop.
    reader: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

/// The stream name of a topic partition in positions and summaries.
pub fn stream_name(topic: &str, partition: i32) -> String {
    format!("kafka:{topic}:{partition}")
}

/// A consumer for `brokers` with `settings` (reads committed data only, never commits on its
/// own, never resets a position it cannot find: an offset out of range is an error).
pub fn consumer(
    brokers: &[String],
    settings: &KafkaSettings,
    group: Option<&str>,
) -> Result<(Arc<Consumer_>, FloeContext)> {
    let ctx = FloeContext::new(settings, brokers)?;
    let mut config = settings.client_config(brokers);
    config
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "error")
        .set("fetch.wait.max.ms", "500")
        // When floe's queue is full librdkafka waits this long before fetching again
        // (default 1 s: ingest stalled a second at every refill, 4x slower than the broker).
        .set("fetch.queue.backoff.ms", "20")
        .set("statistics.interval.ms", "1000")
        .set("enable.partition.eof", "false");
    // The user's tuning (fetch sizes, timeouts) over floe's defaults above.
    for (k, v) in super::kafka_client::tuning(settings) {
        config.set(k, v);
    }
    // librdkafka assigns partitions only to a consumer with a group (and only then serves
    // errors and statistics on the consumer's queue): without `group.id` floe uses its own
    // group, never joined and never committed to, whose authorization errors are ignored.
    let ctx = match group {
        Some(g) => {
            config.set("group.id", g);
            ctx
        }
        None => {
            config.set("group.id", IMPLICIT_GROUP);
            ctx.with_implicit_group()
        }
    };
    let c =
        Consumer_::from_config_and_context(&config, ctx.clone()).map_err(|e| Error::InputFile {
            path: brokers.join(",").into(),
            reason: format!("cannot create the Kafka client: {e}"),
        })?;
    Ok((Arc::new(c), ctx))
}

/// Runs a blocking client call off the runtime; the error names what was asked, and a fatal
/// failure the client reported meanwhile (TLS, credentials) comes first.
///
/// While the call runs, the consumer's queue is served, so the client's error reports reach
/// [`FloeContext`] as they happen: a TLS or credential failure ends the wait at once instead of
/// after the call's timeout. Called before any partition is assigned (no message can come).
async fn blocking<T: Send + 'static>(
    consumer: &Consumer_,
    ctx: &FloeContext,
    what: String,
    f: impl FnOnce() -> rdkafka::error::KafkaResult<T> + Send + 'static,
) -> std::result::Result<T, String> {
    let mut call = tokio::task::spawn_blocking(f);
    let r = loop {
        tokio::select! {
            r = &mut call => break r.map_err(|e| format!("{what}: {e}"))?,
            // Serves errors, logs and statistics; there is no message before an assignment.
            _ = consumer.recv() => {}
        }
        if let Some(fatal) = ctx.fatal() {
            // The blocking call ends on its own timeout; its answer no longer matters.
            return Err(fatal);
        }
    };
    if r.is_err() {
        // The error event that explains a failed call (TLS on a plaintext port, a refused
        // login) may still sit in the queue: serve it briefly before deciding.
        let _ = tokio::time::timeout(Duration::from_millis(300), consumer.recv()).await;
    }
    if let Some(fatal) = ctx.fatal() {
        return Err(fatal);
    }
    r.map_err(
        |e| match classify(e.rdkafka_error_code(), &e.to_string(), "") {
            Severity::Fatal(line) => line,
            Severity::Transient(_) => {
                let down = ctx.events.lock().expect("not poisoned").down.clone();
                match down {
                    Some((_, why)) => format!("cannot connect to Kafka ({why}): {what}: {e}"),
                    None => format!("{what}: {e}"),
                }
            }
        },
    )
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
    /// Parses the source URI; parameters other than floe's own are the client's settings
    /// ([`KafkaSettings::resolve`], over `floe.toml` and the environment).
    pub fn parse(uri: &str) -> Result<Self> {
        let KafkaUri {
            brokers,
            topic,
            query,
        } = parse_uri(uri)?;
        let mut partitions = None;
        let mut start = Start::Earliest;
        let mut group = None;
        let mut client = Vec::new();
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
                _ => client.push((k, v)),
            }
        }
        // What the URI set is blamed on --source; what the environment or floe.toml set is
        // named as it was set (KafkaSettings::resolve).
        let from_uri = |option: &str| client.iter().any(|(k, _)| k == option);
        let settings = KafkaSettings::resolve(&client).map_err(|e| match e {
            Error::InvalidOption { option, reason, .. } if from_uri(&option) => {
                Error::invalid_option(
                    "--source",
                    crate::base::secrets::mask(uri),
                    format!(
                        "{option}: {reason} (floe's own parameters: partitions, start, group.id)"
                    ),
                )
            }
            e => e,
        })?;
        let ctx = FloeContext::new(&settings, &brokers).map_err(|e| match e {
            Error::InvalidOption { reason, .. } => {
                Error::invalid_option("--source", crate::base::secrets::mask(uri), reason)
            }
            e => e,
        })?;
        Ok(Self {
            brokers,
            topic,
            partitions,
            start,
            group,
            ctx,
            settings,
            consumer: None,
            mirrored: None,
            rx: None,
            rest: Default::default(),
            control: None,
            by_group: None,
            state: Arc::default(),
            reader: None,
            stop: Arc::default(),
        })
    }

    fn input_error(&self, reason: String) -> Error {
        Error::InputFile {
            path: self.uri().into(),
            reason,
        }
    }
}

impl Drop for KafkaSource {
    fn drop(&mut self) {
        // A rebalance while the consumer closes waits for nobody.
        self.ctx.clear_rebalance_handler();
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[async_trait::async_trait]
impl Source for KafkaSource {
    fn uri(&self) -> String {
        format!("kafka://{}/{}", self.brokers.join(","), self.topic)
    }

    async fn start(&mut self, resume: &Positions) -> Result<()> {
        // With partitions assigned by the group, its workers join the group.id given, else
        // the floe group's name.
        let subscribe = self.by_group.is_some();
        let group = match &self.by_group {
            Some((name, _)) => Some(self.group.clone().unwrap_or_else(|| name.clone())),
            None => self.group.clone(),
        };
        let (consumer, ctx) = consumer(&self.brokers, &self.settings, group.as_deref())?;
        self.ctx = ctx.clone();
        let topic = self.topic.clone();
        let metadata = {
            let (c, t) = (consumer.clone(), topic.clone());
            blocking(&consumer, &ctx, "cannot list topics".into(), move || {
                c.fetch_metadata(Some(&t), CONNECT_TIMEOUT)
            })
            .await
            .map_err(|reason| self.input_error(reason))?
        };
        let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Err(self.input_error(format!("topic '{topic}' does not exist")));
        };
        if let Some(e) = t.error() {
            let code: rdkafka::types::RDKafkaErrorCode = e.into();
            return Err(self.input_error(match classify(Some(code), &topic, "") {
                Severity::Fatal(line) => line,
                Severity::Transient(_)
                    if code == rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition =>
                {
                    format!("topic '{topic}' does not exist")
                }
                Severity::Transient(_) => format!("topic '{topic}': {code}"),
            }));
        }
        let existing: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
        if existing.is_empty() {
            return Err(self.input_error(format!("topic '{topic}' does not exist")));
        }
        let partitions = match &self.partitions {
            None => existing,
            Some(chosen) => {
                if let Some(p) = chosen.iter().find(|p| !existing.contains(p)) {
                    return Err(Error::invalid_option(
                        "partitions",
                        p,
                        format!("topic '{topic}' has partitions {existing:?}"),
                    ));
                }
                chosen.clone()
            }
        };
        if group.is_some() {
            // The group's offsets are only a mirror, but a group the principal may not use
            // is a setting to fix: asked once here, so it fails now, by name.
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition(&topic, partitions[0]);
            let c = consumer.clone();
            let asked = blocking(
                &consumer,
                &ctx,
                "cannot read the consumer group".into(),
                move || c.committed_offsets(tpl, CONNECT_TIMEOUT),
            )
            .await;
            if let Err(reason) = asked {
                if reason.contains("authorization") {
                    return Err(self.input_error(reason));
                }
                tracing::warn!("reading consumer group offsets (a mirror only): {reason}");
            }
        }
        let (tx, rx) = mpsc::channel(CHANNEL);
        let inbox = Inbox::default();
        let held = Held::default();
        if let Some((_, resolver)) = &self.by_group {
            ctx.set_rebalance_handler(Arc::new(GroupAssign {
                topic: topic.clone(),
                start: self.start,
                resolver: resolver.clone(),
                runtime: tokio::runtime::Handle::current(),
                tx: tx.clone(),
                inbox: inbox.clone(),
                state: self.state.clone(),
                held: held.clone(),
            }));
            consumer
                .subscribe(&[&topic])
                .map_err(|e| self.input_error(format!("cannot join consumer group: {e}")))?;
        }
        if !subscribe {
            let mut assignment = TopicPartitionList::new();
            for &p in &partitions {
                let offset = match resume.get(&stream_name(&topic, p)) {
                    Some(o) => *o,
                    None => {
                        let (c, t) = (consumer.clone(), topic.clone());
                        let watermarks = blocking(
                            &consumer,
                            &ctx,
                            format!("partition {p}: cannot read the start offset"),
                            move || c.fetch_watermarks(&t, p, CONNECT_TIMEOUT),
                        )
                        .await
                        .map_err(|reason| self.input_error(reason))?;
                        self.start.pick(watermarks)
                    }
                };
                assignment
                    .add_partition_offset(&topic, p, Offset::Offset(offset))
                    .map_err(|e| self.input_error(format!("partition {p}: {e}")))?;
                begin(&self.state, &inbox, &topic, p, offset);
            }
            consumer
                .assign(&assignment)
                .map_err(|e| self.input_error(format!("cannot assign partitions: {e}")))?;
        }
        self.rx = Some(rx);
        self.consumer = Some(consumer.clone());
        // The reader polls on a thread of its own: a rebalance runs inside its poll and waits
        // there (for the engine's hand-off, for the group's positions) without holding up the
        // runtime's threads.
        let reader = Reader {
            consumer,
            ctx,
            topic,
            state: self.state.clone(),
            inbox,
            held,
            tx,
            uri: self.uri(),
            stop: self.stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("floe-kafka-reader".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(reader.run()),
                    Err(e) => {
                        let why = format!("cannot start the Kafka reader: {e}");
                        let _ = reader.tx.blocking_send(Err(Error::InputFile {
                            path: reader.uri.clone().into(),
                            reason: why,
                        }));
                    }
                }
            })
            .map_err(|e| self.input_error(format!("cannot start the Kafka reader: {e}")))?;
        self.reader = Some(thread);
        Ok(())
    }

    async fn next(&mut self, max: usize, wait: Duration) -> Result<Option<Vec<SourceRecord>>> {
        if self.control.is_some() {
            // The engine takes the change first (records after it wait in the channel).
            return Ok(Some(Vec::new()));
        }
        let uri = self.uri();
        let (rx, rest, control) = (&mut self.rx, &mut self.rest, &mut self.control);
        match rx {
            None => Err(Error::invalid_option("source", uri, "not started")),
            Some(rx) => {
                recv_chunks(rx, rest, max, wait, |item| match item {
                    Item::Records(r) => Some(r),
                    Item::Control(c) => {
                        *control = Some(c);
                        None
                    }
                })
                .await
            }
        }
    }

    fn assign_by_group(&mut self, group: &str, resolver: Resolver) -> bool {
        if self.partitions.is_some() {
            // `?partitions=`: the static split the user chose.
            return false;
        }
        self.by_group = Some((group.to_string(), resolver));
        true
    }

    fn rebalance(&mut self) -> Option<Rebalance> {
        self.control.take()
    }

    fn lag(&self) -> Vec<StreamLag> {
        let ends = self.ctx.events.lock().expect("not poisoned").ends.clone();
        // Ordered by stream name (a BTreeMap).
        self.state
            .lock()
            .expect("not poisoned")
            .iter()
            .filter_map(|(stream, s)| {
                let end = *ends.get(&s.partition)?;
                Some(StreamLag {
                    stream: stream.clone(),
                    lag: (end - s.next).max(0),
                    high_watermark: Some(end),
                    start: Some(s.start),
                })
            })
            .collect()
    }

    fn committed(&mut self, positions: &Positions) {
        let (Some(_), Some(consumer)) = (&self.group, &self.consumer) else {
            return;
        };
        let prefix = format!("kafka:{}:", self.topic);
        let mut tpl = TopicPartitionList::new();
        // Assigned by the group: only the partitions this member owns may be committed.
        let owned = self.state.lock().expect("not poisoned");
        for (s, p) in positions
            .iter()
            .filter(|(s, _)| self.by_group.is_none() || owned.contains_key(*s))
        {
            if let Some(part) = s.strip_prefix(&prefix).and_then(|p| p.parse().ok()) {
                let _ = tpl.add_partition_offset(&self.topic, part, Offset::Offset(*p));
            }
        }
        drop(owned);
        if tpl.count() == 0 {
            return;
        }
        // Its outcome reaches the context's commit callback (a failure is a warning).
        if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
            tracing::warn!("committing offsets to the Kafka consumer group (retried at the next table commit): {e}");
        }
        self.mirrored = Some(tpl);
    }

    async fn finish(&mut self) {
        // What the reader still reads is nobody's to hand off any more.
        self.ctx.clear_rebalance_handler();
        if let (Some(tpl), Some(consumer)) = (self.mirrored.take(), self.consumer.clone()) {
            let commit = tokio::task::spawn_blocking(move || last_commit(&consumer, &tpl));
            match tokio::time::timeout(FINISH_TIMEOUT, commit).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::warn!("the last consumer group commit failed: {e}"),
                _ => tracing::warn!("the last consumer group commit did not finish in time"),
            }
        }
        // The reader stops, then the consumer closes: a member of a group leaves it, so its
        // partitions move to the other workers at once rather than after the session timeout.
        self.stop.store(true, Ordering::Relaxed);
        self.rx = None;
        self.control = None;
        let (reader, consumer) = (self.reader.take(), self.consumer.take());
        let close = tokio::task::spawn_blocking(move || {
            if let Some(r) = reader {
                let _ = r.join();
            }
            drop(consumer);
        });
        if tokio::time::timeout(CLOSE_TIMEOUT, close).await.is_err() {
            tracing::warn!("the Kafka consumer did not close in time (its group waits for its session timeout)");
        }
    }

    fn unreachable(&self) -> Option<Unreachable> {
        let (since, reason) = self.ctx.events.lock().expect("not poisoned").down.clone()?;
        let state = self.state.lock().expect("not poisoned");
        let Some(first) = state.values().next() else {
            // Subscribed, nothing assigned yet.
            return Some(Unreachable {
                what: format!(
                    "Kafka broker {} (topic {}, no partition assigned yet)",
                    self.brokers.join(","),
                    self.topic
                ),
                reason,
                since,
                position: 0,
            });
        };
        let partitions = state
            .values()
            .map(|s| s.partition.to_string())
            .collect::<Vec<_>>();
        Some(Unreachable {
            what: format!(
                "Kafka broker {} (topic {} partition{} {})",
                self.brokers.join(","),
                self.topic,
                if partitions.len() > 1 { "s" } else { "" },
                partitions.join(", ")
            ),
            reason,
            since,
            position: first.next,
        })
    }
}

/// The last commit to the consumer group, synchronous, read back: an earlier asynchronous
/// commit that librdkafka retried after a broker came back can land after it (seen once in
/// the outage test, the group left at the position before the outage), and is overwritten.
fn last_commit(consumer: &Consumer_, tpl: &TopicPartitionList) -> rdkafka::error::KafkaResult<()> {
    consumer.commit(tpl, CommitMode::Sync)?;
    let mut ask = TopicPartitionList::new();
    for e in tpl.elements() {
        ask.add_partition(e.topic(), e.partition());
    }
    let now = consumer.committed_offsets(ask, Duration::from_secs(2))?;
    let behind = tpl.elements().iter().any(|e| {
        now.find_partition(e.topic(), e.partition())
            .map(|n| n.offset())
            != Some(e.offset())
    });
    if behind {
        consumer.commit(tpl, CommitMode::Sync)?;
    }
    Ok(())
}

/// The reader: messages to the channel in partition order; when idle, positions moved past
/// records never delivered (transaction control records, aborted transactions) as markers; a
/// fatal client error ends it with that error. Partitions come and go through the inbox (a
/// rebalance, or the first assignment).
struct Reader {
    consumer: Arc<Consumer_>,
    ctx: FloeContext,
    topic: String,
    state: Shared,
    inbox: Inbox,
    held: Held,
    tx: mpsc::Sender<Result<Item>>,
    uri: String,
    stop: Arc<AtomicBool>,
}

impl Reader {
    async fn run(self) {
        let Reader {
            consumer,
            ctx,
            topic,
            state,
            inbox,
            held,
            tx,
            uri,
            stop,
        } = self;
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        let mut streams: BTreeMap<i32, Arc<str>> = BTreeMap::new();
        let fail = |reason: String| Error::InputFile {
            path: uri.clone().into(),
            reason,
        };
        // The held records to the engine (the source answers: the outage ends), without
        // waiting while the channel has room (the common case), else waiting for it.
        let flush = || async {
            let records = take_held(&held, &state);
            if records.is_empty() {
                return Ok(());
            }
            {
                let mut ev = ctx.events.lock().expect("not poisoned");
                ev.down = None;
                ev.last_up = Some(Instant::now());
            }
            match tx.try_send(Ok(Item::Records(records))) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(item)) => tx.send(item).await.map_err(drop),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
            }
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if let Some(line) = ctx.fatal() {
                let _ = tx.send(Err(fail(line))).await;
                return;
            }
            // A message already fetched is taken without a timer (a timer per message cost
            // this thread more than the message did); the timer only runs when it waits, and
            // what was read goes to the engine before it does.
            let got = match consumer.recv().now_or_never() {
                Some(m) => Ok(m),
                None => {
                    if flush().await.is_err() {
                        return;
                    }
                    tokio::time::timeout(IDLE, consumer.recv()).await
                }
            };
            // A rebalance runs inside the poll: its changes apply before the message it
            // returned (possibly the first of a partition just assigned).
            for (p, offset) in inbox.lock().expect("not poisoned").drain(..) {
                match offset {
                    Some(o) => {
                        next.insert(p, o);
                        streams
                            .entry(p)
                            .or_insert_with(|| Arc::from(stream_name(&topic, p)));
                    }
                    None => {
                        next.remove(&p);
                    }
                }
            }
            // Owned data only from here on: the borrowed message and the position list hold
            // raw client pointers that must not live across an `.await`.
            let step = match got {
                Ok(Ok(m)) => match (streams.get(&m.partition()), next.get_mut(&m.partition())) {
                    (Some(stream), Some(n)) if m.offset() >= *n => {
                        *n = m.offset() + 1;
                        Step::Record(SourceRecord {
                            stream: stream.clone(),
                            next_position: *n,
                            position: m.offset(),
                            payload: m
                                .payload()
                                .map(bytes::Bytes::copy_from_slice)
                                .unwrap_or_default(),
                            key: m.key().map(<[u8]>::to_vec),
                            marker: false,
                        })
                    }
                    _ => continue,
                },
                Ok(Err(e)) => Step::Failed(e.rdkafka_error_code(), e.to_string()),
                Err(_) => Step::Idle(
                    consumer
                        .position()
                        .map(|tpl| {
                            tpl.elements()
                                .iter()
                                .filter_map(|e| match e.offset() {
                                    Offset::Offset(o) => Some((e.partition(), o)),
                                    _ => None,
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
            };
            match step {
                Step::Record(rec) => {
                    let full = {
                        let mut h = held.lock().expect("not poisoned");
                        h.push(rec);
                        h.len() >= CHUNK
                    };
                    if full {
                        if flush().await.is_err() {
                            return;
                        }
                        // Stream names of the next chunk's own: their counts of references
                        // are touched here while the engine drops this chunk's records.
                        for s in streams.values_mut() {
                            *s = Arc::from(&**s);
                        }
                    }
                }
                Step::Failed(code, text) => {
                    if matches!(
                        code,
                        Some(RDKafkaErrorCode::AutoOffsetReset)
                            | Some(RDKafkaErrorCode::OffsetOutOfRange)
                    ) {
                        let _ = tx
                            .send(Err(fail(format!(
                                "the position to read is no longer in the topic (deleted by \
                                 retention?): {text}"
                            ))))
                            .await;
                        return;
                    }
                    match classify(code, &text, "") {
                        // The client's error callback reports the same failure with its cause
                        // ("connection refused"); this consumer error only says "transport
                        // failure".
                        Severity::Transient(_)
                            if matches!(
                                code,
                                Some(RDKafkaErrorCode::BrokerTransportFailure)
                                    | Some(RDKafkaErrorCode::AllBrokersDown)
                            ) => {}
                        Severity::Transient(short) => {
                            let mut ev = ctx.events.lock().expect("not poisoned");
                            if ev.down.is_none() {
                                ev.down = Some((Instant::now(), short));
                            }
                        }
                        Severity::Fatal(line) => {
                            let _ = tx.send(Err(fail(line))).await;
                            return;
                        }
                    }
                }
                Step::Idle(positions) => {
                    // The consumer's position passed records it never delivered (control
                    // records, aborted transactions): move the stream's position with a marker.
                    for (p, o) in positions {
                        let (Some(n), Some(stream)) = (next.get_mut(&p), streams.get(&p)) else {
                            continue;
                        };
                        if o > *n {
                            *n = o;
                            held.lock().expect("not poisoned").push(SourceRecord {
                                stream: stream.clone(),
                                next_position: o,
                                position: o - 1,
                                payload: bytes::Bytes::new(),
                                key: None,
                                marker: true,
                            });
                        }
                    }
                    if flush().await.is_err() {
                        return;
                    }
                    let mut st = state.lock().expect("not poisoned");
                    for (p, n) in &next {
                        if let Some(s) = st.get_mut(streams[p].as_ref()) {
                            s.next = *n;
                        }
                    }
                }
            }
        }
    }
}

/// Partitions assigned by Kafka's consumer group to a worker of a floe group: each starts at
/// the group's chain (the table's positions overlaid with the waiting hand-offs), read when it
/// is assigned; one taken away is handed off first. Runs on the reader's thread, inside its
/// poll (see [`RebalanceHandler`]), so waiting here holds back no record of the partitions.
struct GroupAssign {
    topic: String,
    start: Start,
    resolver: Resolver,
    /// The ingest's runtime: the resolver reads the store and the catalog there.
    runtime: tokio::runtime::Handle,
    tx: mpsc::Sender<Result<Item>>,
    inbox: Inbox,
    state: Shared,
    held: Held,
}

impl GroupAssign {
    /// Sends the records the reader holds, then `control`: every record read before a
    /// partition change reaches the engine before it. `Err` once the engine is gone.
    fn send_after_held(&self, control: Rebalance) -> std::result::Result<(), ()> {
        let records = take_held(&self.held, &self.state);
        if !records.is_empty() {
            futures::executor::block_on(self.tx.send(Ok(Item::Records(records)))).map_err(drop)?;
        }
        futures::executor::block_on(self.tx.send(Ok(Item::Control(control)))).map_err(drop)
    }

    fn fail(&self, reason: String) {
        let e = Error::InputFile {
            path: format!("kafka topic {}", self.topic).into(),
            reason,
        };
        let _ = futures::executor::block_on(self.tx.send(Err(e)));
    }

    /// The partitions of this consumer's topic in `tpl`.
    fn ours(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        tpl.elements()
            .iter()
            .filter(|e| e.topic() == self.topic)
            .map(|e| e.partition())
            .collect()
    }
}

impl RebalanceHandler for GroupAssign {
    fn assigned(
        &self,
        consumer: &BaseConsumer<FloeContext>,
        partitions: &TopicPartitionList,
    ) -> Option<TopicPartitionList> {
        let parts = self.ours(partitions);
        if parts.is_empty() {
            return Some(TopicPartitionList::new());
        }
        let chain = match futures::executor::block_on(self.runtime.spawn((self.resolver)())) {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                self.fail(format!(
                    "Kafka assigned partitions {parts:?}, but the group's positions cannot be read: {e}"
                ));
                return None;
            }
            Err(e) => {
                self.fail(format!("reading the group's positions: {e}"));
                return None;
            }
        };
        let mut tpl = TopicPartitionList::new();
        let mut assigned = BTreeMap::new();
        let mut offsets = Vec::new();
        for p in parts {
            let stream = stream_name(&self.topic, p);
            let known = chain.get(&stream).copied();
            let offset = match known {
                Some(o) => o,
                None => match consumer.fetch_watermarks(&self.topic, p, CONNECT_TIMEOUT) {
                    Ok(watermarks) => self.start.pick(watermarks),
                    Err(e) => {
                        self.fail(format!("partition {p}: cannot read the start offset: {e}"));
                        return None;
                    }
                },
            };
            if let Err(e) = tpl.add_partition_offset(&self.topic, p, Offset::Offset(offset)) {
                self.fail(format!("partition {p}: {e}"));
                return None;
            }
            assigned.insert(stream, known);
            offsets.push((p, offset));
        }
        // The engine learns where the streams start before any of their records.
        if self.send_after_held(Rebalance::Assigned(assigned)).is_err() {
            return None;
        }
        for (p, o) in offsets {
            begin(&self.state, &self.inbox, &self.topic, p, o);
        }
        Some(tpl)
    }

    fn revoked(&self, partitions: &TopicPartitionList, lost: bool) {
        let parts = self.ours(partitions);
        if parts.is_empty() {
            return;
        }
        let streams: Vec<String> = parts.iter().map(|p| stream_name(&self.topic, *p)).collect();
        if lost {
            // Another member may read them already: a hand-off of them is committed only if
            // it still continues the group's chain (else this worker stops, see group.rs).
            tracing::warn!(
                "Kafka partitions {parts:?} were lost (this worker's session timed out); handing off what was read"
            );
        }
        // Everything read from them is in the channel before this: the engine hands it off,
        // then answers (or drops the answer when it stops).
        let (done, handed_off) = tokio::sync::oneshot::channel();
        let control = Rebalance::Revoked {
            streams: streams.clone(),
            done,
        };
        if self.send_after_held(control).is_ok() {
            let _ = futures::executor::block_on(handed_off);
        }
        let mut state = self.state.lock().expect("not poisoned");
        for s in &streams {
            state.remove(s);
        }
        self.inbox
            .lock()
            .expect("not poisoned")
            .extend(parts.iter().map(|&p| (p, None)));
    }
}

/// One turn of the reader, as owned data.
enum Step {
    Record(SourceRecord),
    Failed(Option<RDKafkaErrorCode>, String),
    Idle(Vec<(i32, i64)>),
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
