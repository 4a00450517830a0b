//! The Iceberg REST catalog backend.
//!
//! Namespaces and tables (list, create, load, drop) go through `iceberg-catalog-rest`, which
//! handles OAuth2 (`credential = id:secret` or `token`), the `prefix` from `GET /v1/config`, and
//! builds each table's FileIO from the catalog properties merged with the LoadTable `config`
//! (vended storage credentials).
//!
//! Commits are floe's own (the crate cannot replace or delete files): the snapshot producers'
//! requirements and updates are posted as `POST /v1/{prefix}/namespaces/{ns}/tables/{table}`
//! (REST spec, `updateTable` / `CommitTableRequest`). The outcome rules:
//! - 200: committed; the response carries the new metadata and its location.
//! - 409: a requirement failed ([`Error::CommitConflict`]): the retry loop reloads, re-validates
//!   and tries again.
//! - 429 / 503, or a connection that never opened: not applied; retried here with backoff.
//! - 500 / 502 / 504, or a timeout / broken connection after the request was sent: *unknown*.
//!   The table is reloaded: if it shows the commit (its snapshot added, its snapshots removed,
//!   its properties set) the commit is reported as done. If not, the same request is sent again,
//!   which is safe because its requirements (the base snapshot of the branch, the table UUID)
//!   cannot hold twice. If the outcome stays unknown, [`Error::CommitStateUnknown`] tells the
//!   caller to keep every file it wrote.

use std::collections::HashMap;
use std::time::Duration;

use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{Catalog as _, CatalogBuilder as _, TableIdent, TableRequirement, TableUpdate};
use iceberg_catalog_rest::{RestCatalog, RestCatalogBuilder};
use serde_json::json;
use tokio::sync::Mutex;

use super::config::{redact_uri, CatalogConfig};
use crate::base::error::{Error, Result};
use crate::storage::{first_line, rest_storage_factory};
use crate::table::refs;

/// Transient failures retried per request before giving up.
const TRANSPORT_RETRIES: u32 = 4;
/// Per-request timeout of floe's own REST calls.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A connected REST catalog.
pub struct RestBackend {
    /// `name (uri)`, for messages.
    label: String,
    catalog: RestCatalog,
    http: reqwest::Client,
    uri: String,
    props: HashMap<String, String>,
    warehouse: String,
    session: Mutex<Option<Session>>,
}

/// What floe's own requests need: the base URL with prefix, and the bearer token.
#[derive(Clone)]
struct Session {
    base: String,
    token: Option<String>,
    /// The catalog's properties as `GET /v1/config` merged them (server defaults, then the
    /// user's, then server overrides): what a table's FileIO starts from.
    props: HashMap<String, String>,
}

/// How one HTTP exchange ended.
enum Exchange {
    Answered(reqwest::StatusCode, String),
    /// Never reached the server (connect error): safe to retry.
    NotSent(String),
    /// Sent, but no answer (timeout, reset): the server may have applied it.
    Lost(String),
}

impl RestBackend {
    /// Connects: loads `/v1/config` (with authentication) so a bad URI, a wrong credential or a
    /// missing warehouse fail here with one line.
    pub async fn connect(config: &CatalogConfig) -> Result<Self> {
        // HTTPS catalogs: one process-wide TLS provider for every reqwest client (ours and the
        // REST crate's). Installing twice is harmless.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let label = format!("{} ({})", config.name, redact_uri(&config.uri));
        let mut props: HashMap<String, String> = config.storage_props();
        props.insert("uri".into(), config.uri.clone());
        if !config.warehouse.is_empty() {
            props.insert("warehouse".into(), config.warehouse.clone());
        }
        let catalog = RestCatalogBuilder::default()
            .with_storage_factory(rest_storage_factory())
            .load(config.name.clone(), props.clone())
            .await
            .map_err(|e| Error::catalog(label.clone(), first_line(&e.to_string())))?;
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::catalog(label.clone(), e.to_string()))?;
        let backend = Self {
            label,
            catalog,
            http,
            uri: config.uri.trim_end_matches('/').to_string(),
            props,
            warehouse: config.warehouse.clone(),
            session: Mutex::new(None),
        };
        backend.session(false).await?;
        Ok(backend)
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// The iceberg-catalog-rest client, for namespace and table calls.
    pub fn client(&self) -> &RestCatalog {
        &self.catalog
    }

    /// Maps an error of the REST crate to floe's, in one line and without secrets.
    pub fn map_err(&self, e: iceberg::Error) -> Error {
        Error::catalog_with(self.label.clone(), describe(&e), e)
    }

    /// The session (token + prefixed base URL), fetched once; `refresh` forces a new token.
    async fn session(&self, refresh: bool) -> Result<Session> {
        let mut guard = self.session.lock().await;
        if let (Some(s), false) = (guard.as_ref(), refresh) {
            return Ok(s.clone());
        }
        let token = match self.props.get("token") {
            Some(t) if !refresh || !self.props.contains_key("credential") => Some(t.clone()),
            _ => match self.props.get("credential") {
                Some(cred) => Some(self.fetch_token(cred).await?),
                None => None,
            },
        };
        let mut url = reqwest::Url::parse(&format!("{}/v1/config", self.uri))
            .map_err(|e| Error::invalid_option("catalog uri", &self.uri, e.to_string()))?;
        if !self.warehouse.is_empty() {
            url.query_pairs_mut()
                .append_pair("warehouse", &self.warehouse);
        }
        let mut req = self.http.get(url);
        if let Some(t) = &token {
            req = req.bearer_auth(t);
        }
        let body = self
            .expect_success(req, |e| format!("GET /v1/config: {e}"))
            .await?;
        let cfg: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        // Server overrides win over the user's properties, which win over server defaults.
        let from = |section: &str, k: &str| {
            cfg.pointer(&format!("/{section}/{k}"))
                .and_then(|v| v.as_str().map(str::to_string))
        };
        let pick = |k: &str| {
            from("overrides", k)
                .or_else(|| self.props.get(k).cloned())
                .or_else(|| from("defaults", k))
        };
        let uri = pick("uri").unwrap_or_else(|| self.uri.clone());
        let mut base = format!("{}/v1", uri.trim_end_matches('/'));
        if let Some(prefix) = pick("prefix").filter(|p| !p.is_empty()) {
            base.push('/');
            base.push_str(prefix.trim_matches('/'));
        }
        let mut props = HashMap::new();
        for (section, over) in [("defaults", false), ("overrides", true)] {
            if over {
                props.extend(self.props.clone());
            }
            if let Some(m) = cfg.get(section).and_then(|m| m.as_object()) {
                for (k, v) in m {
                    if let Some(v) = v.as_str() {
                        props.insert(k.clone(), v.to_string());
                    }
                }
            }
        }
        let session = Session { base, token, props };
        *guard = Some(session.clone());
        Ok(session)
    }

    /// OAuth2 client-credentials exchange (`credential = client_id:client_secret`).
    async fn fetch_token(&self, credential: &str) -> Result<String> {
        let endpoint = self
            .props
            .get("oauth2-server-uri")
            .cloned()
            .unwrap_or_else(|| format!("{}/v1/oauth/tokens", self.uri));
        let (id, secret) = match credential.split_once(':') {
            Some((id, secret)) => (Some(id), secret),
            None => (None, credential),
        };
        let mut form = vec![
            ("grant_type", "client_credentials".to_string()),
            ("client_secret", secret.to_string()),
            (
                "scope",
                self.props
                    .get("scope")
                    .cloned()
                    .unwrap_or_else(|| "catalog".into()),
            ),
        ];
        if let Some(id) = id {
            form.push(("client_id", id.to_string()));
        }
        for k in ["audience", "resource"] {
            if let Some(v) = self.props.get(k) {
                form.push((k, v.clone()));
            }
        }
        let request = self.http.post(&endpoint).form(&form);
        let body = self
            .expect_success(request, |e| {
                format!(
                    "OAuth2 token request to {} refused the credential: {e}",
                    redact_uri(&endpoint)
                )
            })
            .await?;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v.get("access_token")
            .and_then(|t| t.as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                Error::catalog(
                    self.label.clone(),
                    "the OAuth2 token response has no access_token",
                )
            })
    }

    /// Sends `request` and returns the body of a 2xx answer; anything else is one catalog
    /// error, `what` wrapping the HTTP status and the server's message.
    async fn expect_success(
        &self,
        request: reqwest::RequestBuilder,
        what: impl FnOnce(String) -> String,
    ) -> Result<String> {
        let resp = request
            .send()
            .await
            .map_err(|e| Error::catalog(self.label.clone(), transport(&e)))?;
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(Error::catalog(
                self.label.clone(),
                what(http_error(status, &body)),
            ));
        }
        Ok(body)
    }

    /// LoadTable (`GET .../namespaces/{ns}/tables/{table}`) read by floe itself: what
    /// [`crate::catalog::Catalog::load_table`] falls back to when the REST crate cannot parse
    /// the table's metadata (a column of a type it does not know, [`crate::table::opaque`]).
    /// The FileIO gets the properties the crate would give it: the catalog's merged config,
    /// then the response's `config` (vended credentials), then the user's properties.
    pub async fn load_table_itself(&self, ident: &TableIdent) -> Result<Table> {
        let name = super::ident_string(ident);
        let session = self.session(false).await?;
        let mut req = self.http.get(self.table_url(&session, ident)?);
        if let Some(t) = &session.token {
            req = req.bearer_auth(t);
        }
        let body = self
            .expect_success(req, |e| format!("GET table {name}: {e}"))
            .await?;
        let bad = |e: String| Error::catalog(self.label.clone(), format!("table {name}: {e}"));
        let mut v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| bad(e.to_string()))?;
        let metadata = crate::table::opaque::metadata_from_value(v["metadata"].take())
            .map_err(|e| bad(e.to_string()))?;
        let mut props = session.props.clone();
        if let Some(config) = v.get("config").and_then(|c| c.as_object()) {
            for (k, val) in config {
                if let Some(val) = val.as_str() {
                    props.insert(k.clone(), val.to_string());
                }
            }
        }
        props.extend(self.props.clone());
        let file_io = iceberg::io::FileIOBuilder::new(rest_storage_factory())
            .with_props(props)
            .build();
        let mut builder = Table::builder()
            .identifier(ident.clone())
            .metadata(metadata)
            .file_io(file_io)
            .runtime(iceberg::Runtime::current());
        if let Some(location) = v.get("metadata-location").and_then(|l| l.as_str()) {
            builder = builder.metadata_location(location.to_string());
        }
        Ok(builder.build()?)
    }

    fn table_url(&self, session: &Session, ident: &TableIdent) -> Result<reqwest::Url> {
        let mut url = reqwest::Url::parse(&session.base)
            .map_err(|e| Error::invalid_option("catalog uri", &session.base, e.to_string()))?;
        url.path_segments_mut()
            .map_err(|_| Error::invalid_option("catalog uri", &session.base, "not a base URL"))?
            .push("namespaces")
            .push(&ident.namespace().clone().inner().join("\u{1f}"))
            .push("tables")
            .push(ident.name());
        Ok(url)
    }

    async fn post(&self, url: &reqwest::Url, body: &serde_json::Value) -> Result<Exchange> {
        let mut refreshed = false;
        loop {
            let session = self.session(refreshed).await?;
            let mut req = self.http.post(url.clone()).json(body);
            if let Some(t) = &session.token {
                req = req.bearer_auth(t);
            }
            return Ok(match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    if status == reqwest::StatusCode::UNAUTHORIZED
                        && !refreshed
                        && self.props.contains_key("credential")
                    {
                        refreshed = true; // expired token: one new token, then the same request
                        continue;
                    }
                    match resp.text().await {
                        Ok(text) => Exchange::Answered(status, text),
                        Err(e) => Exchange::Lost(transport(&e)),
                    }
                }
                Err(e) if e.is_connect() => Exchange::NotSent(transport(&e)),
                Err(e) => Exchange::Lost(transport(&e)),
            });
        }
    }

    /// Posts one commit; see the module docs for the outcome rules. `load` reloads the table
    /// (through the catalog) to settle an unknown outcome.
    pub async fn commit(
        &self,
        base: &Table,
        requirements: &[TableRequirement],
        updates: Vec<TableUpdate>,
    ) -> Result<(TableMetadata, String)> {
        let ident = base.identifier();
        let table_name = super::ident_string(ident);
        let mut requirements = requirements.to_vec();
        if !requirements
            .iter()
            .any(|r| matches!(r, TableRequirement::UuidMatch { .. }))
        {
            requirements.push(TableRequirement::UuidMatch {
                uuid: base.metadata().uuid(),
            });
        }
        let mut body = json!({
            "identifier": { "namespace": ident.namespace().clone().inner(), "name": ident.name() },
            "requirements": requirements,
            "updates": updates,
        });
        // A schema carried in an update has its opaque columns as they were read.
        crate::table::opaque::unmask_value(&mut body["updates"]);
        let url = self.table_url(&self.session(false).await?, ident)?;
        let mut unknown: Option<String> = None;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let sent = self.post(&url, &body).await?;
            let retry_reason = match sent {
                Exchange::Answered(status, text) if status.is_success() => {
                    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                        Error::catalog(self.label.clone(), format!("commit response: {e}"))
                    })?;
                    let location = v
                        .get("metadata-location")
                        .and_then(|l| l.as_str())
                        .unwrap_or_default()
                        .to_string();
                    let metadata: TableMetadata = crate::table::opaque::metadata_from_value(
                        v.get("metadata").cloned().unwrap_or_default(),
                    )
                    .map_err(|e| {
                        Error::catalog(self.label.clone(), format!("commit response metadata: {e}"))
                    })?;
                    return Ok((metadata, location));
                }
                Exchange::Answered(status, text) if status == reqwest::StatusCode::CONFLICT => {
                    if unknown.is_some() {
                        if let Some(done) = self.landed(ident, &updates).await {
                            return Ok(done);
                        }
                    }
                    return Err(Error::CommitConflict {
                        table: table_name,
                        attempts: 1,
                        reason: crate::base::error::Conflict::CatalogRefused(http_error(
                            status, &text,
                        )),
                    });
                }
                Exchange::Answered(status, text)
                    if status == reqwest::StatusCode::TOO_MANY_REQUESTS
                        || status == reqwest::StatusCode::SERVICE_UNAVAILABLE =>
                {
                    http_error(status, &text)
                }
                Exchange::Answered(status, text)
                    if status.is_server_error()
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT =>
                {
                    let reason = http_error(status, &text);
                    unknown = Some(reason.clone());
                    if let Some(done) = self.landed(ident, &updates).await {
                        return Ok(done);
                    }
                    reason
                }
                Exchange::Answered(status, _) if status == reqwest::StatusCode::NOT_FOUND => {
                    return Err(Error::TableNotFound { table: table_name });
                }
                Exchange::Answered(status, text) => {
                    // 400 (bad request), 401/403 (credentials), ...: nothing was applied.
                    return Err(Error::catalog(
                        self.label.clone(),
                        format!(
                            "commit to {table_name} rejected: {}",
                            http_error(status, &text)
                        ),
                    ));
                }
                Exchange::NotSent(reason) => reason,
                Exchange::Lost(reason) => {
                    unknown = Some(reason.clone());
                    if let Some(done) = self.landed(ident, &updates).await {
                        return Ok(done);
                    }
                    reason
                }
            };
            if attempt > TRANSPORT_RETRIES {
                return Err(match unknown {
                    Some(reason) => Error::CommitStateUnknown {
                        table: table_name,
                        reason,
                    },
                    None => Error::catalog(
                        self.label.clone(),
                        format!("commit to {table_name} failed after {attempt} attempts: {retry_reason}"),
                    ),
                });
            }
            let wait = Duration::from_millis(250 * (1 << attempt.min(5)));
            tracing::warn!(table = %table_name, attempt, ?wait, reason = %retry_reason, "REST commit not confirmed, retrying");
            tokio::time::sleep(wait).await;
        }
    }

    /// Reloads the table and returns it when it already shows `updates` (the commit landed).
    async fn landed(
        &self,
        ident: &TableIdent,
        updates: &[TableUpdate],
    ) -> Option<(TableMetadata, String)> {
        let table = self.catalog.load_table(ident).await.ok()?;
        let md = table.metadata();
        let mut checked = 0;
        for u in updates {
            let ok = match u {
                TableUpdate::AddSnapshot { snapshot } => {
                    md.snapshot_by_id(snapshot.snapshot_id()).is_some()
                }
                TableUpdate::RemoveSnapshots { snapshot_ids } => snapshot_ids
                    .iter()
                    .all(|id| md.snapshot_by_id(*id).is_none()),
                TableUpdate::SetProperties { updates } => updates
                    .iter()
                    .all(|(k, v)| md.properties().get(k) == Some(v)),
                TableUpdate::RemoveProperties { removals } => {
                    removals.iter().all(|k| !md.properties().contains_key(k))
                }
                // Partition and schema evolution: the spec or schema is among the table's.
                TableUpdate::AddSpec { spec } => md.partition_specs_iter().any(|s| {
                    s.fields().len() == spec.fields().len()
                        && s.fields().iter().zip(spec.fields()).all(|(a, b)| {
                            a.source_id == b.source_id
                                && a.transform == b.transform
                                && a.name == b.name
                        })
                }),
                TableUpdate::AddSchema { schema } => md
                    .schemas_iter()
                    .any(|s| s.as_struct() == schema.as_struct()),
                // A ref moved to a snapshot this commit adds is confirmed by that snapshot
                // (AddSnapshot above): another commit may have moved the ref on since.
                TableUpdate::SetSnapshotRef { reference, .. }
                    if updates.iter().any(|x| {
                        matches!(x, TableUpdate::AddSnapshot { snapshot }
                            if snapshot.snapshot_id() == reference.snapshot_id)
                    }) =>
                {
                    continue
                }
                // `floe table tag|branch create|drop`, and refs an expiry removes.
                TableUpdate::SetSnapshotRef {
                    ref_name,
                    reference,
                } => refs(md).ok()?.get(ref_name) == Some(reference),
                TableUpdate::RemoveSnapshotRef { ref_name } => {
                    !refs(md).ok()?.contains_key(ref_name)
                }
                _ => continue,
            };
            if !ok {
                return None;
            }
            checked += 1;
        }
        if checked == 0 {
            return None;
        }
        let location = table.metadata_location()?.to_string();
        Some((md.clone(), location))
    }
}

/// One line for a transport error, without URLs' credentials.
fn transport(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    match e.url() {
        Some(u) => format!("{kind}: {} {}", redact_uri(u.as_str()), detail)
            .trim()
            .to_string(),
        None => format!("{kind} {detail}").trim().to_string(),
    }
}

/// `HTTP 409 Conflict: <message of the REST ErrorModel>`.
fn http_error(status: reqwest::StatusCode, body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let err = v.get("error").unwrap_or(&v);
    let msg = err
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| {
            v.get("error_description")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| first_line(body).chars().take(200).collect());
    let kind = err.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let msg = if kind.is_empty() {
        msg
    } else {
        format!("{kind}: {msg}")
    };
    format!("HTTP {status}: {}", first_line(&msg))
}

/// One line for an error of the REST crate.
pub(crate) fn describe(e: &iceberg::Error) -> String {
    crate::base::error::describe_iceberg(e)
        .trim_start_matches("iceberg: ")
        .to_string()
}

#[cfg(test)]
mod tests;
