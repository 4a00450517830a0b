//! AWS MSK IAM authentication (`sasl.mechanism=AWS_MSK_IAM`): floe's Kafka clients log in to an
//! Amazon MSK cluster's IAM listener (port 9098, `SASL_SSL`) with the credentials of the default
//! AWS chain, the way Amazon's own signers do (`aws-msk-iam-sasl-signer-python`, `-go`, `-js`).
//!
//! What MSK takes (Amazon MSK developer guide, "IAM access control", and the signers' design):
//! SASL/OAUTHBEARER whose bearer token is a SigV4 **presigned URL**,
//! `https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-...`, signed
//! for the service `kafka-cluster` with a lifetime of 900 s, followed by an unsigned
//! `User-Agent` parameter, then base64url-encoded without padding. The broker checks the
//! signature and the principal's IAM policy (`kafka-cluster:Connect`, then the topic and group
//! actions).
//!
//! - The credentials come from reqsign's default chain, the same the S3 storage uses
//!   (environment `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, the shared
//!   files with `AWS_PROFILE`, SSO, web identity as on EKS with IRSA, ECS task roles, EC2
//!   instance roles), loaded again when they near their expiry.
//! - The region is the broker's (`b-1.name.abc123.c2.kafka.eu-west-1.amazonaws.com`), else
//!   `AWS_REGION` / `AWS_DEFAULT_REGION`.
//! - librdkafka asks for a new token at 80% of the lifetime floe reports
//!   ([`ClientContext::generate_oauth_token`](rdkafka::client::ClientContext)).
//!
//! Why the URL is signed here and not with reqsign's `RequestSigner`: its query presigning
//! follows S3's convention (the payload hash is `UNSIGNED-PAYLOAD`, and the signing time cannot
//! be fixed outside its own tests), while MSK verifies the generic SigV4 query signature, whose
//! canonical request ends with the SHA-256 of the empty payload. The steps below are SigV4's
//! ("Create a signed AWS API request", AWS IAM user guide), on reqsign's HMAC and hash helpers.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqsign_aws_v4::{Credential, DefaultCredentialProvider};
use reqsign_core::hash::{hex_hmac_sha256, hex_sha256, hmac_sha256};
use reqsign_core::{Context, HttpSend, OsEnv, ProvideCredential};

/// The value of `sasl.mechanism` that selects MSK IAM (the name MSK's Java client uses).
pub const MECHANISM: &str = "AWS_MSK_IAM";

/// A token's lifetime, as Amazon's signers give it.
pub const TOKEN_SECONDS: u64 = 900;

/// What SigV4 leaves unescaped in query strings: `A-Z a-z 0-9 - _ . ~`.
const AWS_QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn enc(s: &str) -> String {
    utf8_percent_encode(s, AWS_QUERY).to_string()
}

/// The credentials a token is signed with.
#[derive(Clone)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// For temporary credentials (roles, SSO, web identity).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// The MSK IAM token for `region` signed with `credentials` at `signed_at`, with the
/// `User-Agent` parameter `user_agent`: the base64url token (no padding) and when it expires,
/// in milliseconds since the epoch.
pub fn token(
    credentials: &AwsCredentials,
    region: &str,
    signed_at: DateTime<Utc>,
    user_agent: &str,
) -> (String, i64) {
    let host = format!("kafka.{region}.amazonaws.com");
    let date = signed_at.format("%Y%m%d").to_string();
    let amz_date = signed_at.format("%Y%m%dT%H%M%SZ").to_string();
    let scope = format!("{date}/{region}/kafka-cluster/aws4_request");
    // The URL's parameters in the order Amazon's signers write them; the canonical query
    // string sorts them by name.
    let mut params: Vec<(&str, String)> = vec![
        ("Action", "kafka-cluster:Connect".into()),
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256".into()),
        (
            "X-Amz-Credential",
            format!("{}/{scope}", credentials.access_key_id),
        ),
        ("X-Amz-Date", amz_date.clone()),
        ("X-Amz-Expires", TOKEN_SECONDS.to_string()),
        ("X-Amz-SignedHeaders", "host".into()),
    ];
    if let Some(t) = &credentials.session_token {
        params.push(("X-Amz-Security-Token", t.clone()));
    }
    let query = |ps: &[(&str, String)]| {
        ps.iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect::<Vec<_>>()
            .join("&")
    };
    let mut sorted = params.clone();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let canonical_request = format!(
        "GET\n/\n{}\nhost:{host}\n\nhost\n{}",
        query(&sorted),
        hex_sha256(b"")
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex_sha256(canonical_request.as_bytes())
    );
    let mut key = hmac_sha256(
        format!("AWS4{}", credentials.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    for part in [region, "kafka-cluster", "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    let signature = hex_hmac_sha256(&key, string_to_sign.as_bytes());
    params.push(("X-Amz-Signature", signature));
    params.push(("User-Agent", user_agent.to_string()));
    let url = format!("https://{host}/?{}", query(&params));
    use base64::Engine as _;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url);
    let expires_ms = (signed_at.timestamp() + TOKEN_SECONDS as i64) * 1000;
    (token, expires_ms)
}

/// The region of an MSK broker address: the label after `kafka` or `kafka-serverless` in
/// `<broker>.<cluster>.<id>.<cell>.kafka.<region>.amazonaws.com[:port]`.
pub fn region_of_broker(broker: &str) -> Option<String> {
    let host = broker.rsplit_once(':').map_or(broker, |(h, _)| h);
    let labels: Vec<&str> = host.split('.').collect();
    labels.windows(3).find_map(|w| {
        ((w[0] == "kafka" || w[0] == "kafka-serverless") && w[2] == "amazonaws")
            .then(|| w[1].to_string())
    })
}

/// The region to sign for: the brokers', else `AWS_REGION` or `AWS_DEFAULT_REGION` from `env`.
pub fn region(
    brokers: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> std::result::Result<String, String> {
    if let Some(r) = brokers.iter().find_map(|b| region_of_broker(b)) {
        return Ok(r);
    }
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
        .ok_or_else(|| {
            format!(
                "AWS MSK IAM needs the cluster's region: the broker address ({}) does not name \
                 one (kafka.<region>.amazonaws.com); set AWS_REGION",
                brokers.join(",")
            )
        })
}

/// reqsign's HTTP hook (instance metadata, STS for web identity and SSO) over floe's reqwest
/// client, with short timeouts: off EC2, the instance-metadata endpoint never answers.
#[derive(Debug)]
struct ReqwestSend(reqwest::Client);

impl HttpSend for ReqwestSend {
    async fn http_send(
        &self,
        req: http::Request<Bytes>,
    ) -> reqsign_core::Result<http::Response<Bytes>> {
        let failed = |e: reqwest::Error| {
            reqsign_core::Error::unexpected("AWS credential request failed").with_source(e)
        };
        let req = reqwest::Request::try_from(req).map_err(failed)?;
        let resp = self.0.execute(req).await.map_err(failed)?;
        let mut out = http::Response::builder().status(resp.status());
        for (k, v) in resp.headers() {
            out = out.header(k, v);
        }
        let body = resp.bytes().await.map_err(failed)?;
        out.body(body)
            .map_err(|e| reqsign_core::Error::unexpected("AWS credential response").with_source(e))
    }
}

/// The token source of one Kafka client: the region, and the credentials last loaded.
pub struct MskIam {
    region: String,
    cached: Mutex<Option<Credential>>,
}

impl std::fmt::Debug for MskIam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MskIam")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl MskIam {
    pub fn new(region: String) -> Self {
        Self {
            region,
            cached: Mutex::new(None),
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// A fresh token, signed now: the token and its expiry (ms since the epoch). Credentials
    /// are loaded from the default chain when none are cached or the cached ones expire within
    /// the token's lifetime. Called by librdkafka's refresh on a client's polling thread, which
    /// may be inside a runtime: the chain is walked on a thread of its own.
    pub fn generate(&self) -> std::result::Result<(String, i64), String> {
        let now = Utc::now();
        let valid_until = now + chrono::Duration::seconds(TOKEN_SECONDS as i64);
        let cached = self.cached.lock().expect("not poisoned").clone();
        let fresh = cached.filter(|c| {
            c.expires_in
                .is_none_or(|t| t.as_second() > valid_until.timestamp())
        });
        let cred = match fresh {
            Some(c) => c,
            None => {
                let c = std::thread::scope(|s| {
                    s.spawn(load_default_chain)
                        .join()
                        .unwrap_or_else(|_| Err("loading AWS credentials panicked".into()))
                })?;
                *self.cached.lock().expect("not poisoned") = Some(c.clone());
                c
            }
        };
        let creds = AwsCredentials {
            access_key_id: cred.access_key_id.clone(),
            secret_access_key: cred.secret_access_key.clone(),
            session_token: cred.session_token.clone(),
        };
        let (token, mut expires_ms) = token(&creds, &self.region, now, &user_agent());
        // A token outlives neither its credentials.
        if let Some(t) = cred.expires_in {
            expires_ms = expires_ms.min(t.as_second() * 1000);
        }
        Ok((token, expires_ms))
    }
}

/// floe's `User-Agent` parameter in tokens.
pub fn user_agent() -> String {
    format!("floe/{}", env!("CARGO_PKG_VERSION"))
}

/// The default chain's credentials, on a runtime of this thread's own.
fn load_default_chain() -> std::result::Result<Credential, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("AWS MSK IAM: cannot start a runtime: {e}"))?;
    rt.block_on(async {
        // reqwest's TLS (STS, SSO) on the provider floe's other HTTPS clients use.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("AWS MSK IAM: HTTP client: {e}"))?;
        let ctx = Context::new()
            .with_file_read(reqsign_file_read_tokio::TokioFileRead)
            .with_http_send(ReqwestSend(http))
            .with_env(OsEnv);
        match DefaultCredentialProvider::new()
            .provide_credential(&ctx)
            .await
        {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(NO_CREDENTIALS.to_string()),
            Err(e) => Err(format!("AWS MSK IAM: loading AWS credentials failed: {e}")),
        }
    })
}

/// What a user reads when the chain has nothing.
pub const NO_CREDENTIALS: &str = "AWS MSK IAM: no AWS credentials found in the default chain \
    (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws/credentials, SSO, web \
    identity via AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, an ECS task role or an EC2 \
    instance role)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_comes_from_the_broker_then_the_environment() {
        assert_eq!(
            region_of_broker("b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region_of_broker("boot-x1y2.c1.kafka-serverless.us-east-2.amazonaws.com:9098")
                .as_deref(),
            Some("us-east-2")
        );
        assert_eq!(region_of_broker("localhost:9092"), None);
        let brokers = vec!["localhost:9098".to_string()];
        let env = |k: &str| (k == "AWS_DEFAULT_REGION").then(|| "ap-south-1".to_string());
        assert_eq!(region(&brokers, env).unwrap(), "ap-south-1");
        let e = region(&brokers, |_| None).unwrap_err();
        assert!(
            e.contains("AWS_REGION") && e.contains("localhost:9098"),
            "{e}"
        );
    }

    #[test]
    fn the_token_is_a_presigned_connect_url_that_expires_in_900_seconds() {
        let creds = AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("tok/+=".into()),
        };
        let at = DateTime::parse_from_rfc3339("2026-12-04T07:30:05Z")
            .unwrap()
            .with_timezone(&Utc);
        let (t, exp) = token(&creds, "us-east-1", at, "floe/test");
        use base64::Engine as _;
        let url = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(&t)
                .unwrap(),
        )
        .unwrap();
        assert!(!t.contains('=') && !t.contains('+') && !t.contains('/'));
        assert!(
            url.starts_with(
                "https://kafka.us-east-1.amazonaws.com/?Action=kafka-cluster%3AConnect&"
            ),
            "{url}"
        );
        assert!(url.contains(
            "X-Amz-Credential=AKIDEXAMPLE%2F20261204%2Fus-east-1%2Fkafka-cluster%2Faws4_request"
        ));
        assert!(url.contains("&X-Amz-Security-Token=tok%2F%2B%3D&X-Amz-Signature="));
        assert!(url.ends_with("&User-Agent=floe%2Ftest"));
        assert_eq!(exp, (at.timestamp() + 900) * 1000);
        // A different secret signs differently.
        let other = AwsCredentials {
            secret_access_key: "other".into(),
            ..creds
        };
        assert_ne!(token(&other, "us-east-1", at, "floe/test").0, t);
    }
}
