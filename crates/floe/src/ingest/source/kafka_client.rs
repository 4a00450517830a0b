//! The Kafka client every Kafka path of floe goes through (source, consumer-group mirror,
//! dead-letter topic): librdkafka through the `rdkafka` crate, configured with the client
//! property names users already have in their Kafka client configs.
//!
//! Why librdkafka (measured in the note and in BENCHMARKS.md): it reads committed data
//! only (`isolation.level=read_committed` drops the records of aborted transactions and the
//! control records, which rskafka 0.6 does not), speaks TLS, SASL PLAIN/SCRAM and OAUTHBEARER
//! with OIDC client credentials refreshed before expiry, and the consumer group protocol; floe
//! writes no Kafka protocol framing of its own.
//!
//! Settings ([`KafkaSettings`]), lowest precedence first:
//! - the `[kafka]` table of `floe.toml` ([`set_file_settings`]);
//! - the environment, floe's convention: `FLOE_KAFKA__SECURITY__PROTOCOL=SSL` is
//!   `security.protocol` (`__` is a `.`);
//! - query parameters of the `kafka://` URI
//!   (`kafka://host:9093/topic?security.protocol=SSL&ssl.ca.location=/etc/ca.pem`).
//!
//! Secret values (`sasl.password`, `ssl.key.password`, `sasl.oauthbearer.client.secret`) are
//! registered with floe's masking, so no message or `--json` shows them.
//!
//! Errors a person can act on ([`classify`]): librdkafka retries connections forever and
//! reports each failure to [`FloeContext::error`]; a failure that retrying cannot fix (wrong
//! password, untrusted or expired certificate, hostname mismatch, TLS against a plaintext port
//! and the reverse, authorization denied) is kept as fatal, and the reader stops with one line
//! naming the broker and the setting to check. Anything else (connection refused, timeouts)
//! marks the broker unreachable, reported while the client retries.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::TopicPartitionList;

use super::kafka_msk_iam as msk;
use crate::base::error::{Error, Result};

/// Client properties floe passes to librdkafka, with what each is for (in error messages).
const KNOWN: &[&str] = &[
    "security.protocol",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
];

/// Tuning properties a user may set (they override floe's defaults, see [`tuning`]); the
/// properties exactly-once depends on (`enable.auto.commit`, `isolation.level`,
/// `auto.offset.reset`: [`FLOE_OWNED`]) are floe's and refused by name; `group.id` is a
/// parameter of the source URI.
const TUNING: &[&str] = &[
    "client.id",
    "client.rack",
    "receive.message.max.bytes",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "fetch.queue.backoff.ms",
    "queued.max.messages.kbytes",
    "queued.min.messages",
    "socket.keepalive.enable",
    "socket.connection.setup.timeout.ms",
    "connections.max.idle.ms",
    "metadata.max.age.ms",
    "broker.address.family",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.protocol",
    "group.instance.id",
    "message.max.bytes",
    "compression.type",
    // librdkafka's debug contexts (`cgrp,fetch`), logged at debug (FLOE_LOG=librdkafka=debug).
    "debug",
];

/// Properties floe sets itself because exactly-once depends on them.
const FLOE_OWNED: &[&str] = &[
    "enable.auto.commit",
    "enable.auto.offset.store",
    "isolation.level",
    "auto.offset.reset",
    "enable.partition.eof",
    "bootstrap.servers",
];

/// The tuning properties among `settings` (applied last, over floe's defaults).
pub fn tuning(settings: &KafkaSettings) -> impl Iterator<Item = (&str, &str)> {
    settings
        .props
        .iter()
        .filter(|(k, _)| TUNING.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

const PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];
const MECHANISMS: &[&str] = &[
    "PLAIN",
    "SCRAM-SHA-256",
    "SCRAM-SHA-512",
    "OAUTHBEARER",
    msk::MECHANISM,
];

static FILE_SETTINGS: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// The `[kafka]` table of `floe.toml`: defaults for every Kafka client of this process. Set
/// once, by the command line, before any source opens.
pub fn set_file_settings(settings: BTreeMap<String, String>) {
    crate::base::secrets::register_config_secrets(
        settings.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let _ = FILE_SETTINGS.set(settings);
}

/// `FLOE_KAFKA__<KEY>` variables as Kafka property names (`__` is a `.`).
pub fn env_settings(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter_map(|(k, v)| {
            let key = k.strip_prefix("FLOE_KAFKA__")?;
            (!key.is_empty()).then(|| (key.to_ascii_lowercase().replace("__", "."), v))
        })
        .collect()
}

/// The security settings of one Kafka client, validated.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaSettings {
    props: BTreeMap<String, String>,
}

impl std::fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: BTreeMap<&str, String> = self
            .props
            .iter()
            .map(|(k, v)| (k.as_str(), crate::base::secrets::mask_property(k, v)))
            .collect();
        f.debug_struct("KafkaSettings")
            .field("props", &shown)
            .finish()
    }
}

impl KafkaSettings {
    /// `floe.toml`'s `[kafka]`, then the environment, then `uri_props` (the URI's own
    /// parameters), validated: an unknown property, an unknown protocol or mechanism, a SASL
    /// setting without a SASL protocol, or a file that does not exist is an error naming it.
    /// An error about a property names where it was set: `FLOE_KAFKA__<KEY>`, `[kafka] <key>`
    /// in floe.toml, or (left as the key) the `--source` URI's parameter.
    pub fn resolve(uri_props: &[(String, String)]) -> Result<Self> {
        let file = FILE_SETTINGS.get().cloned().unwrap_or_default();
        let env = env_settings(std::env::vars());
        let mut origin: BTreeMap<String, String> = BTreeMap::new();
        for k in file.keys() {
            origin.insert(k.clone(), format!("[kafka] {k} in floe.toml"));
        }
        for k in env.keys() {
            origin.insert(
                k.clone(),
                format!("FLOE_KAFKA__{}", k.to_ascii_uppercase().replace('.', "__")),
            );
        }
        for (k, _) in uri_props {
            origin.remove(k);
        }
        let mut props = file;
        props.extend(env);
        props.extend(uri_props.iter().cloned());
        Self::from_props(props).map_err(|e| match e {
            Error::InvalidOption {
                option,
                value,
                reason,
            } => match origin.get(&option) {
                Some(set_by) => Error::invalid_option(set_by, value, reason),
                None => Error::InvalidOption {
                    option,
                    value,
                    reason,
                },
            },
            e => e,
        })
    }

    /// Validates `props` (see [`KafkaSettings::resolve`]).
    pub fn from_props(mut props: BTreeMap<String, String>) -> Result<Self> {
        for k in props.keys() {
            if FLOE_OWNED.contains(&k.as_str()) {
                return Err(Error::invalid_option(
                    k,
                    "",
                    "floe sets this Kafka property itself: exactly-once depends on it \
                     (positions come from the table, data is read committed)",
                ));
            }
            if !KNOWN.contains(&k.as_str()) && !TUNING.contains(&k.as_str()) {
                return Err(Error::invalid_option(
                    k,
                    "",
                    format!(
                        "unknown Kafka client property (security: {}; tuning: {})",
                        KNOWN.join(", "),
                        TUNING.join(", ")
                    ),
                ));
            }
        }
        if let Some(m) = props.remove("sasl.mechanisms") {
            props.entry("sasl.mechanism".into()).or_insert(m);
        }
        let protocol = match props.get("security.protocol") {
            None => "PLAINTEXT".to_string(),
            Some(p) => {
                let up = p.trim().to_ascii_uppercase();
                if !PROTOCOLS.contains(&up.as_str()) {
                    return Err(Error::invalid_option(
                        "security.protocol",
                        p,
                        format!("expected one of {}", PROTOCOLS.join(", ")),
                    ));
                }
                props.insert("security.protocol".into(), up.clone());
                up
            }
        };
        let sasl = protocol.starts_with("SASL_");
        if let Some(m) = props.get("sasl.mechanism") {
            let up = m.trim().to_ascii_uppercase();
            if !MECHANISMS.contains(&up.as_str()) {
                return Err(Error::invalid_option(
                    "sasl.mechanism",
                    m,
                    format!("expected one of {}", MECHANISMS.join(", ")),
                ));
            }
            props.insert("sasl.mechanism".into(), up);
        }
        if let Some(k) = props.keys().find(|k| k.starts_with("sasl.")) {
            if !sasl {
                return Err(Error::invalid_option(
                    k,
                    "",
                    format!(
                        "a SASL setting needs security.protocol SASL_SSL or SASL_PLAINTEXT \
                         (it is {protocol})"
                    ),
                ));
            }
        }
        if sasl {
            let mechanism = props
                .entry("sasl.mechanism".into())
                .or_insert_with(|| "PLAIN".into())
                .clone();
            if mechanism == msk::MECHANISM {
                // floe signs the tokens (see `kafka_msk_iam`): no user, password or OIDC.
                if let Some(k) = props.keys().find(|k| {
                    k.starts_with("sasl.") && *k != "sasl.mechanism" && *k != "sasl.mechanisms"
                }) {
                    return Err(Error::invalid_option(
                        k,
                        "",
                        "sasl.mechanism AWS_MSK_IAM signs its tokens with the AWS credentials \
                         of the default chain: no other SASL setting applies",
                    ));
                }
            } else if mechanism == "OAUTHBEARER" {
                if !props.contains_key("sasl.oauthbearer.token.endpoint.url") {
                    return Err(Error::invalid_option(
                        "sasl.oauthbearer.token.endpoint.url",
                        "",
                        "sasl.mechanism OAUTHBEARER needs the identity provider's token \
                         endpoint (with sasl.oauthbearer.client.id and \
                         sasl.oauthbearer.client.secret); on Amazon MSK use \
                         sasl.mechanism=AWS_MSK_IAM",
                    ));
                }
                // librdkafka's own OIDC client-credentials flow (token fetched and
                // refreshed before it expires).
                props
                    .entry("sasl.oauthbearer.method".into())
                    .or_insert_with(|| "oidc".into());
            } else {
                for k in ["sasl.username", "sasl.password"] {
                    if !props.contains_key(k) {
                        return Err(Error::invalid_option(
                            k,
                            "",
                            format!(
                                "sasl.mechanism {mechanism} needs sasl.username and sasl.password"
                            ),
                        ));
                    }
                }
            }
        }
        if let Some(k) = props.keys().find(|k| k.starts_with("ssl.")) {
            if !protocol.ends_with("SSL") {
                return Err(Error::invalid_option(
                    k,
                    "",
                    format!(
                        "a TLS setting needs security.protocol SSL or SASL_SSL (it is {protocol})"
                    ),
                ));
            }
        }
        for k in [
            "ssl.ca.location",
            "ssl.certificate.location",
            "ssl.key.location",
        ] {
            if let Some(path) = props.get(k) {
                if !std::path::Path::new(path).exists() {
                    return Err(Error::invalid_option(k, path, "no such file"));
                }
            }
        }
        if let Some(v) = props.get("ssl.endpoint.identification.algorithm") {
            let v = v.trim().to_ascii_lowercase();
            if v != "https" && v != "none" && !v.is_empty() {
                return Err(Error::invalid_option(
                    "ssl.endpoint.identification.algorithm",
                    v,
                    "expected https or none",
                ));
            }
        }
        crate::base::secrets::register_config_secrets(
            props.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        Ok(Self { props })
    }

    /// `security.protocol` (PLAINTEXT when not set).
    pub fn protocol(&self) -> &str {
        self.props
            .get("security.protocol")
            .map_or("PLAINTEXT", String::as_str)
    }

    /// `sasl.mechanism` is AWS_MSK_IAM.
    pub fn msk_iam(&self) -> bool {
        self.props.get("sasl.mechanism").map(String::as_str) == Some(msk::MECHANISM)
    }

    /// A librdkafka configuration for `brokers` with these settings and floe's defaults for
    /// every client (bounded reconnect backoff, so a broker back is seen within a second).
    pub fn client_config(&self, brokers: &[String]) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", brokers.join(","))
            .set("client.id", "floe")
            .set("reconnect.backoff.ms", "100")
            .set("reconnect.backoff.max.ms", "500")
            .set("socket.connection.setup.timeout.ms", "10000")
            // Info: some connection failures are logged at that level only (see
            // `tls_mismatch`); floe's log callback keeps them at debug.
            .set_log_level(RDKafkaLogLevel::Info);
        for (k, v) in &self.props {
            c.set(k, v);
        }
        if self.msk_iam() {
            // OAUTHBEARER with floe's token callback (`FloeContext::generate_oauth_token`).
            c.set("sasl.mechanism", "OAUTHBEARER");
        }
        if self.props.contains_key("debug") {
            // The contexts asked for log at debug level.
            c.set_log_level(RDKafkaLogLevel::Debug);
        }
        c
    }
}

/// What the client reported, kept for the reader and for start-up errors.
#[derive(Debug, Default)]
pub struct ClientEvents {
    /// A failure retrying cannot fix: the line to exit with.
    pub fatal: Option<String>,
    /// Since when and why no broker answers (cleared when one is up again).
    pub down: Option<(Instant, String)>,
    /// Failures seen so far that mean client and port disagree on TLS (see `tls_mismatch`).
    tls_mismatches: u32,
    /// Per partition: the end a read_committed reader can reach (the last stable offset, or
    /// the high watermark where the broker reports none).
    pub ends: BTreeMap<i32, i64>,
    /// When a broker was last seen up.
    pub last_up: Option<Instant>,
    /// An OAUTHBEARER token was made (a later failure to refresh one is not fatal).
    token_made: bool,
}

/// The client context of floe's Kafka clients: collects errors and statistics.
#[derive(Clone, Default)]
pub struct FloeContext {
    pub events: Arc<Mutex<ClientEvents>>,
    /// The settings, for the advice in error lines.
    protocol: String,
    /// The consumer's group is floe's placeholder (no `group.id` given): the principal may
    /// have no right on it, and that is no error.
    implicit_group: bool,
    /// What a consumer that subscribed (partitions assigned by its group) does when they move.
    rebalance: Arc<Mutex<Option<Arc<dyn RebalanceHandler>>>>,
    /// With `sasl.mechanism=AWS_MSK_IAM`: what signs the client's tokens.
    msk: Option<Arc<msk::MskIam>>,
}

/// What a subscribed consumer does when its group assigns or takes partitions. Called on the
/// thread that polls the consumer, inside the poll: it may block (the reader waits meanwhile,
/// librdkafka keeps the group membership alive on its own threads).
pub trait RebalanceHandler: Send + Sync {
    /// `partitions` are assigned to this consumer: the list to assign, each with the offset to
    /// read from; `None` assigns nothing (the handler reported why to the reader).
    fn assigned(
        &self,
        consumer: &BaseConsumer<FloeContext>,
        partitions: &TopicPartitionList,
    ) -> Option<TopicPartitionList>;

    /// `partitions` are taken away (`lost`: the group already gave them to another member, as
    /// after a session timeout); they are unassigned when this returns.
    fn revoked(&self, partitions: &TopicPartitionList, lost: bool);
}

impl FloeContext {
    /// The context of a client of `brokers` with `settings`; with AWS MSK IAM, an error names
    /// a region neither the brokers nor the environment give.
    pub fn new(settings: &KafkaSettings, brokers: &[String]) -> Result<Self> {
        let msk = match settings.msk_iam() {
            false => None,
            true => {
                let region = msk::region(brokers, |k| std::env::var(k).ok())
                    .map_err(|e| Error::invalid_option("sasl.mechanism", msk::MECHANISM, e))?;
                Some(Arc::new(msk::MskIam::new(region)))
            }
        };
        Ok(Self {
            events: Arc::default(),
            protocol: settings.protocol().to_string(),
            implicit_group: false,
            rebalance: Arc::default(),
            msk,
        })
    }

    /// Handles the rebalances of a subscribed consumer from now on.
    pub fn set_rebalance_handler(&self, handler: Arc<dyn RebalanceHandler>) {
        *self.rebalance.lock().expect("not poisoned") = Some(handler);
    }

    /// Rebalances from now on only assign and unassign (a consumer closing: nobody waits for
    /// what it read any more).
    pub fn clear_rebalance_handler(&self) {
        *self.rebalance.lock().expect("not poisoned") = None;
    }

    /// The context of a consumer in floe's placeholder group (see `implicit_group`).
    pub fn with_implicit_group(self) -> Self {
        Self {
            implicit_group: true,
            ..self
        }
    }

    /// Records a failure the client reported (error callback, or a FAIL log line), masked.
    fn failure(&self, code: Option<RDKafkaErrorCode>, reason: &str, from_log: bool) {
        if self.implicit_group && code == Some(RDKafkaErrorCode::GroupAuthorizationFailed) {
            tracing::debug!("floe's placeholder consumer group: {reason}");
            return;
        }
        let mut ev = self.events.lock().expect("not poisoned");
        if ev.fatal.is_some() {
            return;
        }
        // A reset is counted from the log lines only (the error callback may repeat them), with
        // the repeats librdkafka folded into one line.
        let sighting = tls_mismatch(reason, &self.protocol).filter(|(_, proof)| *proof || from_log);
        if let Some((line, proof)) = sighting {
            ev.tls_mismatches += 1 + suppressed(reason);
            let enough = match (ev.last_up, proof) {
                (None, true) => 1,
                (None, false) => 2,
                (Some(_), true) => 2,
                (Some(_), false) => u32::MAX,
            };
            if ev.tls_mismatches >= enough {
                ev.fatal = Some(line);
                return;
            }
        }
        match classify(code, reason, &self.protocol) {
            Severity::Fatal(line) if self.msk.is_some() && line.contains("sasl.password") => {
                // The advice for a user and password does not apply to IAM.
                ev.fatal = Some(format!(
                    "Kafka refused the AWS MSK IAM login at {}: check the AWS credentials \
                     floe found (the default chain), that the cluster's region is {}, and \
                     that the principal's IAM policy allows kafka-cluster:Connect on the \
                     cluster: {reason}",
                    broker_of(reason),
                    self.msk.as_ref().map_or("", |m| m.region())
                ))
            }
            Severity::Fatal(line) => ev.fatal = Some(line),
            // "1/1 brokers are down" says less than the failure before it.
            Severity::Transient(_)
                if code == Some(RDKafkaErrorCode::AllBrokersDown) && ev.down.is_some() => {}
            Severity::Transient(short) => {
                let since = ev
                    .down
                    .as_ref()
                    .map(|d| d.0)
                    .or(ev.last_up)
                    .unwrap_or_else(Instant::now);
                ev.down = Some((since, short));
            }
        }
    }

    /// The fatal error reported so far, if any.
    pub fn fatal(&self) -> Option<String> {
        self.events.lock().expect("not poisoned").fatal.clone()
    }
}

/// How an error the client reported is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Severity {
    /// Retrying cannot fix it: stop with this line.
    Fatal(String),
    /// The broker is unreachable for now: report this short reason and keep retrying.
    Transient(String),
}

/// Sorts a client error into [`Severity`]: the line names the broker (librdkafka's reason
/// starts with it) and the setting to check.
pub fn classify(code: Option<RDKafkaErrorCode>, reason: &str, protocol: &str) -> Severity {
    let lower = reason.to_ascii_lowercase();
    let broker = broker_of(reason);
    use RDKafkaErrorCode as C;
    match code {
        Some(C::Authentication) | Some(C::SaslAuthenticationFailed) => {
            return Severity::Fatal(format!(
                "Kafka authentication failed at {broker} (check sasl.mechanism, sasl.username \
                 and sasl.password): {reason}"
            ))
        }
        Some(C::TopicAuthorizationFailed) => {
            return Severity::Fatal(format!(
                "Kafka denied access to the topic (topic authorization failed: the principal \
                 needs READ and DESCRIBE on it): {reason}"
            ))
        }
        Some(C::GroupAuthorizationFailed) => {
            return Severity::Fatal(format!(
                "Kafka denied access to the consumer group (group authorization failed: the \
                 principal needs READ on the group of group.id): {reason}"
            ))
        }
        Some(C::ClusterAuthorizationFailed) => {
            return Severity::Fatal(format!(
                "Kafka denied access to the cluster (cluster authorization failed): {reason}"
            ))
        }
        _ => {}
    }
    if code == Some(C::InconsistentGroupProtocol) || lower.contains("inconsistent group protocol") {
        return Severity::Fatal(format!(
            "the Kafka consumer group has members that speak another protocol: another \
             consumer uses this group.id, or the workers set different \
             partition.assignment.strategy (give every worker the same, or another group.id): \
             {reason}"
        ));
    }
    if lower.contains("hostname mismatch") || lower.contains("hostname verification") {
        return Severity::Fatal(format!(
            "TLS to {broker}: the broker's certificate does not name the host connected to \
             (check the broker address, or ssl.endpoint.identification.algorithm): {reason}"
        ));
    }
    if lower.contains("certificate verify failed") || lower.contains("certificate has expired") {
        // OpenSSL reports a certificate for another host with the same words as an untrusted
        // one, so the line names every cause and the setting behind each.
        return Severity::Fatal(format!(
            "TLS to {broker}: the broker's certificate is not trusted (check ssl.ca.location), \
             has expired, or does not name the host connected to (check the broker address; \
             ssl.endpoint.identification.algorithm=none turns the host check off): {reason}"
        ));
    }
    if lower.contains("ssl handshake failed") || lower.contains("ssl transport error") {
        let plaintext_port = [
            "wrong version number",
            "packet length too long",
            "record layer failure",
            "unexpected eof",
            "http request",
            "disconnected",
        ]
        .iter()
        .any(|n| lower.contains(n));
        return Severity::Fatal(if plaintext_port {
            format!(
                "TLS to {broker} failed: the port does not speak TLS (security.protocol is \
                 {protocol}; a plaintext listener wants PLAINTEXT or SASL_PLAINTEXT): {reason}"
            )
        } else {
            format!(
                "TLS to {broker} failed (check ssl.ca.location, ssl.certificate.location and \
                 ssl.key.location): {reason}"
            )
        });
    }
    if lower.contains("sasl authentication") || lower.contains("invalid credentials") {
        return Severity::Fatal(format!(
            "Kafka authentication failed at {broker} (check sasl.mechanism, sasl.username and \
             sasl.password): {reason}"
        ));
    }
    if lower.contains("unsupported sasl mechanism") || lower.contains("sasl mechanism") {
        return Severity::Fatal(format!(
            "{broker} does not accept this SASL mechanism (check sasl.mechanism): {reason}"
        ));
    }
    Severity::Transient(short_text(reason))
}

/// A short form of a client's failure text: `connection refused` rather than librdkafka's
/// whole line.
pub fn short_text(full: &str) -> String {
    for (needle, short) in [
        ("Connection refused", "connection refused"),
        ("Connection reset", "connection reset"),
        ("Broken pipe", "connection closed"),
        ("Disconnected", "connection closed"),
        ("timed out", "timed out"),
        ("No route to host", "no route to host"),
        ("Failed to resolve", "unknown host"),
        ("failed to lookup address", "unknown host"),
        ("brokers are down", "all brokers are down"),
    ] {
        if full.contains(needle) {
            return short.to_string();
        }
    }
    full.to_string()
}

/// The broker a librdkafka reason starts with: `ssl://host:port/bootstrap: ...` or
/// `host:port/1: ...`, in log lines after a `[thrd:...]: ` prefix.
fn broker_of(reason: &str) -> String {
    let mut r = reason.trim_start();
    if r.starts_with("[thrd:") {
        if let Some(i) = r.find("]: ") {
            r = &r[i + 3..];
        }
    }
    let head = r.split(": ").next().unwrap_or("");
    let head = head.split_once("://").map_or(head, |(_, rest)| rest);
    let addr = head.split('/').next().unwrap_or(head);
    if addr.contains(':') && !addr.contains(' ') {
        addr.to_string()
    } else {
        "the broker".into()
    }
}

/// How many identical failures before this one librdkafka folded into its line
/// (`..., 3 identical error(s) suppressed)`).
fn suppressed(reason: &str) -> u32 {
    reason
        .split(" identical error(s) suppressed")
        .next()
        .filter(|head| head.len() < reason.len())
        .and_then(|head| head.rsplit([' ', ',', '(']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A failure that suggests client and port disagree on TLS: the line to stop on, and whether
/// one sighting at start-up is proof enough.
///
/// - A plaintext client on a TLS port: the TLS server drops the first Kafka request.
///   librdkafka says `Disconnected while requesting ApiVersion` with its hint of an SSL
///   listener when the server closes (proof), or `connection reset by peer` in state
///   APIVERSION_QUERY when it resets (stunnel does; a broker restarting can too, so only a
///   reset repeated at start-up counts).
/// - A TLS client on a plaintext port that never answers the TLS hello: the connection setup
///   times out in state SSL_HANDSHAKE (proof; a port that answers fails the handshake
///   instead, which [`classify`] handles).
///
/// Once a broker was up, each takes two sightings: a broker restarting mid-handshake shows
/// one.
fn tls_mismatch(reason: &str, protocol: &str) -> Option<(String, bool)> {
    let broker = broker_of(reason);
    let hint = reason.contains("while requesting ApiVersion") && reason.contains("SSL listener");
    let reset = !protocol.ends_with("SSL")
        && reason.contains("connection reset by peer")
        && reason.contains("in state APIVERSION_QUERY");
    if hint || reset {
        return Some((
            format!(
                "the broker {broker} dropped the connection at the first request: its port \
                 speaks TLS (security.protocol is {protocol}; a TLS listener wants SSL or \
                 SASL_SSL), or it is not a Kafka port: {reason}"
            ),
            hint,
        ));
    }
    if reason.contains("timed out in state SSL_HANDSHAKE") {
        return Some((
            format!(
                "TLS to {broker} failed: the port does not speak TLS, it never answered the TLS \
                 handshake (security.protocol is {protocol}; a plaintext listener wants PLAINTEXT \
                 or SASL_PLAINTEXT): {reason}"
            ),
            true,
        ));
    }
    None
}

impl ClientContext for FloeContext {
    /// librdkafka asks the context for OAUTHBEARER tokens unless its own OIDC flow has them
    /// (that refresh never reaches the application): with AWS MSK IAM floe signs them.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _config: Option<&str>,
    ) -> std::result::Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        let made = match &self.msk {
            Some(m) => m.generate(),
            None => Err("sasl.mechanism OAUTHBEARER without a token endpoint: set \
                 sasl.oauthbearer.token.endpoint.url, or AWS_MSK_IAM on Amazon MSK"
                .to_string()),
        };
        match made {
            Ok((token, lifetime_ms)) => {
                self.events.lock().expect("not poisoned").token_made = true;
                tracing::debug!(
                    "AWS MSK IAM token signed for {}, valid until {lifetime_ms} ms",
                    self.msk.as_ref().map_or("", |m| m.region())
                );
                Ok(rdkafka::client::OAuthToken {
                    token,
                    principal_name: "floe".into(),
                    lifetime_ms,
                })
            }
            Err(e) => {
                let mut ev = self.events.lock().expect("not poisoned");
                if ev.token_made {
                    // A refresh that fails (STS or instance metadata away for a moment):
                    // librdkafka retries it while the current token lasts.
                    ev.down = Some((Instant::now(), e.clone()));
                } else if ev.fatal.is_none() {
                    ev.fatal = Some(e.clone());
                }
                Err(e.into())
            }
        }
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        // Failures reach `error` too; the log lines stay at debug, masked.
        let message = crate::base::secrets::mask(message);
        // librdkafka reports some connection failures only as a log line (a TLS handshake
        // that times out never reaches the error callback): a TLS mismatch among them is
        // sorted like an error.
        if fac == "FAIL" && tls_mismatch(&message, &self.protocol).is_some() {
            self.failure(None, &message, true);
        }
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical => {
                tracing::warn!(target: "librdkafka", "{fac}: {message}")
            }
            _ => tracing::debug!(target: "librdkafka", "{fac}: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.failure(
            error.rdkafka_error_code(),
            &crate::base::secrets::mask(reason),
            false,
        );
    }

    fn stats(&self, stats: Statistics) {
        let mut ev = self.events.lock().expect("not poisoned");
        if stats
            .brokers
            .values()
            .any(|b| b.nodeid >= 0 && b.state == "UP")
        {
            ev.last_up = Some(Instant::now());
            ev.down = None;
        }
        for t in stats.topics.values() {
            for (p, s) in &t.partitions {
                let end = if s.ls_offset >= 0 {
                    s.ls_offset
                } else {
                    s.hi_offset
                };
                if *p >= 0 && end >= 0 {
                    ev.ends.insert(*p, end);
                }
            }
        }
    }
}

impl ConsumerContext for FloeContext {
    /// librdkafka's default (assign what the group assigns, unassign what it takes), with the
    /// [`RebalanceHandler`] asked first: it sets where each assigned partition starts and
    /// hands off what was read from a partition before it goes.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let handler = self.rebalance.lock().expect("not poisoned").clone();
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let done = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let assign = match &handler {
                    Some(h) => h.assigned(consumer, tpl),
                    None => Some(tpl.clone()),
                };
                match (assign, cooperative) {
                    (None, _) => Ok(()),
                    (Some(a), true) => consumer.incremental_assign(&a),
                    (Some(a), false) => consumer.assign(&a),
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                if let Some(h) = &handler {
                    h.revoked(tpl, consumer.assignment_lost());
                }
                match cooperative {
                    true => consumer.incremental_unassign(tpl),
                    false => consumer.unassign(),
                }
            }
            other => {
                let code: RDKafkaErrorCode = other.into();
                tracing::warn!("Kafka consumer group rebalance failed: {code}");
                consumer.unassign()
            }
        };
        if let Err(e) = done {
            tracing::warn!("Kafka consumer group rebalance: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_are_validated_with_errors_naming_the_property() {
        let ok = KafkaSettings::from_props(props(&[
            ("security.protocol", "sasl_ssl"),
            ("sasl.mechanisms", "scram-sha-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p4ssw0rd-secret"),
        ]))
        .unwrap();
        assert_eq!(ok.protocol(), "SASL_SSL");
        assert_eq!(ok.props["sasl.mechanism"], "SCRAM-SHA-512");
        assert!(!format!("{ok:?}").contains("p4ssw0rd-secret"));
        let err = |p: &[(&str, &str)]| KafkaSettings::from_props(props(p)).unwrap_err().to_string();
        assert!(err(&[("ssl.ca.locaton", "x")]).contains("ssl.ca.locaton"));
        assert!(err(&[("security.protocol", "TLS")]).contains("security.protocol"));
        let e = err(&[("sasl.username", "u")]);
        assert!(
            e.contains("sasl.username") && e.contains("PLAINTEXT"),
            "{e}"
        );
        let e = err(&[("security.protocol", "SASL_SSL"), ("sasl.username", "u")]);
        assert!(e.contains("sasl.password"), "{e}");
        let e = err(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "KERBEROS"),
        ]);
        assert!(e.contains("sasl.mechanism"), "{e}");
        let e = err(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/no/such/ca.pem"),
        ]);
        assert!(
            e.contains("ssl.ca.location") && e.contains("no such file"),
            "{e}"
        );
        let e = err(&[("ssl.ca.location", "/etc/hostname")]);
        assert!(e.contains("security.protocol"), "{e}");
        // OIDC client credentials: librdkafka's own flow.
        let o = KafkaSettings::from_props(props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
            ("sasl.oauthbearer.client.id", "floe"),
            ("sasl.oauthbearer.client.secret", "s"),
        ]))
        .unwrap();
        assert_eq!(o.props["sasl.oauthbearer.method"], "oidc");
        let e = err(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ]);
        assert!(
            e.contains("sasl.oauthbearer.token.endpoint.url") && e.contains("AWS_MSK_IAM"),
            "{e}"
        );
        // AWS MSK IAM: librdkafka sees OAUTHBEARER (floe signs the tokens); a user or
        // password is refused, it would never be used.
        let m = KafkaSettings::from_props(props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "aws_msk_iam"),
        ]))
        .unwrap();
        assert!(m.msk_iam());
        assert_eq!(
            m.client_config(&["b:9098".into()]).get("sasl.mechanism"),
            Some("OAUTHBEARER")
        );
        let e = err(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "AWS_MSK_IAM"),
            ("sasl.username", "u"),
        ]);
        assert!(e.contains("sasl.username"), "{e}");
        // Tuning passes through; what exactly-once depends on is refused by name.
        let t = KafkaSettings::from_props(props(&[
            ("receive.message.max.bytes", "300000000"),
            ("partition.assignment.strategy", "range"),
        ]))
        .unwrap();
        let tuned: Vec<_> = tuning(&t).collect();
        assert_eq!(
            tuned,
            vec![
                ("partition.assignment.strategy", "range"),
                ("receive.message.max.bytes", "300000000")
            ]
        );
        let e = err(&[("enable.auto.commit", "true")]);
        assert!(
            e.contains("enable.auto.commit") && e.contains("exactly-once"),
            "{e}"
        );
        let e = err(&[("isolation.level", "read_uncommitted")]);
        assert!(e.contains("isolation.level"), "{e}");
    }

    #[test]
    fn environment_variables_name_properties() {
        let env = env_settings(vec![
            (
                "FLOE_KAFKA__SECURITY__PROTOCOL".to_string(),
                "SSL".to_string(),
            ),
            (
                "FLOE_KAFKA__SSL__CA__LOCATION".to_string(),
                "/ca.pem".to_string(),
            ),
            ("FLOE_CATALOG__X__URI".to_string(), "y".to_string()),
        ]);
        assert_eq!(
            env,
            props(&[("security.protocol", "SSL"), ("ssl.ca.location", "/ca.pem")])
        );
    }

    #[test]
    fn reasons_name_the_broker_and_tls_mismatches_the_protocol() {
        assert_eq!(
            broker_of("ssl://10.0.0.1:9093/bootstrap: SSL handshake failed"),
            "10.0.0.1:9093"
        );
        assert_eq!(
            broker_of("sasl_plaintext://b:9092/2: Disconnected"),
            "b:9092"
        );
        assert_eq!(
            broker_of("[thrd:ssl://h:1/bootstrap]: ssl://h:1/bootstrap: x"),
            "h:1"
        );
        assert_eq!(
            broker_of("127.0.0.1:9092/bootstrap: Connect failed"),
            "127.0.0.1:9092"
        );
        assert_eq!(broker_of("1/1 brokers are down"), "the broker");
        let (l, proof) = tls_mismatch("ssl://127.0.0.1:9092/bootstrap: Connection setup timed out in state SSL_HANDSHAKE (after 10029ms in state SSL_HANDSHAKE)", "SSL").unwrap();
        assert!(
            l.starts_with("TLS to 127.0.0.1:9092 failed")
                && l.contains("does not speak TLS")
                && proof,
            "{l}"
        );
        let (l, proof) = tls_mismatch("127.0.0.1:9093/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 (see api.version.request) (after 2ms in state APIVERSION_QUERY)", "PLAINTEXT").unwrap();
        assert!(
            l.contains("127.0.0.1:9093")
                && l.contains("speaks TLS")
                && l.contains("PLAINTEXT")
                && proof,
            "{l}"
        );
        let reset = "[thrd:127.0.0.1:9093/bootstrap]: 127.0.0.1:9093/bootstrap: Disconnected: connection reset by peer (after 8ms in state APIVERSION_QUERY)";
        let (l, proof) = tls_mismatch(reset, "PLAINTEXT").unwrap();
        assert!(l.contains("the broker 127.0.0.1:9093 ") && !proof, "{l}");
        assert_eq!(
            tls_mismatch(reset, "SSL"),
            None,
            "a TLS client was not refused for plaintext"
        );
        assert_eq!(suppressed(reset), 0);
        assert_eq!(suppressed("b:1/bootstrap: Disconnected: connection reset by peer (after 8ms in state APIVERSION_QUERY, 12 identical error(s) suppressed)"), 12);
        assert_eq!(
            tls_mismatch(
                "b:1/bootstrap: Connect to ipv4#1.2.3.4:1 failed: Connection refused",
                "SSL"
            ),
            None
        );
    }

    #[test]
    fn failures_retrying_cannot_fix_are_fatal_and_name_the_setting() {
        let fatal = |code, reason: &str| match classify(code, reason, "SSL") {
            Severity::Fatal(l) => l,
            Severity::Transient(t) => panic!("transient: {t}"),
        };
        let l = fatal(None, "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured (after 3ms in state SSL_HANDSHAKE)");
        assert!(
            l.starts_with("TLS to 127.0.0.1:9093:") && l.contains("ssl.ca.location"),
            "{l}"
        );
        assert!(l.contains("ssl.endpoint.identification.algorithm"), "{l}");
        let l = fatal(None, "ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: error:0A00010B:SSL routines::wrong version number (after 1ms in state SSL_HANDSHAKE)");
        assert!(
            l.contains("does not speak TLS") && l.contains("security.protocol"),
            "{l}"
        );
        let l = fatal(
            Some(RDKafkaErrorCode::Authentication),
            "sasl_ssl://b:9093/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256",
        );
        assert!(
            l.contains("sasl.password") && l.contains("at b:9093 "),
            "{l}"
        );
        let l = fatal(Some(RDKafkaErrorCode::TopicAuthorizationFailed), "events");
        assert!(l.contains("topic authorization failed"), "{l}");
        let l = fatal(Some(RDKafkaErrorCode::GroupAuthorizationFailed), "g");
        assert!(l.contains("group.id"), "{l}");
        // Seen on Tansu: a worker with another assignment strategy than the group's members.
        let l = fatal(
            None,
            "JoinGroup failed: Broker: Inconsistent group protocol",
        );
        assert!(
            l.contains("partition.assignment.strategy") && l.contains("group.id"),
            "{l}"
        );
        assert_eq!(
            classify(
                Some(RDKafkaErrorCode::BrokerTransportFailure),
                "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)",
                "PLAINTEXT"
            ),
            Severity::Transient("connection refused".into())
        );
    }
}
