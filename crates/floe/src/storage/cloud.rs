//! Google Cloud Storage (`gs://bucket/path`) and Azure Blob Storage / ADLS Gen2
//! (`abfss://container@account.dfs.core.windows.net/path`, `abfs://`, `wasbs://`, `wasb://`),
//! configured with the FileIO property names Iceberg's Java and Python implementations use.
//!
//! Both go through opendal's `gcs` and `azblob` services. Azure is reached through the Blob API
//! for both URI families: an ADLS Gen2 (hierarchical namespace) account serves the Blob API too
//! (multi-protocol access), which is what PyIceberg's `adlfs` and Arrow's `AzureFileSystem`
//! do as well, and it is the API emulators implement. One operator is built per bucket (or per
//! account and container) and kept, so a compaction's thousands of reads do not each rebuild
//! a client and reload credentials.
//!
//! | Property | Meaning |
//! |---|---|
//! | `gcs.service.host` (also `gcs.service.path`) | endpoint, e.g. an emulator's `http://127.0.0.1:4443` |
//! | `gcs.oauth2.token` | a bearer token |
//! | `gcs.credentials-json` | a service-account key (JSON, raw or base64) |
//! | `gcs.no-auth`, `gcs.allow-anonymous` | send unsigned requests |
//! | `gcs.disable-vm-metadata`, `gcs.disable-config-load` | skip those credential sources |
//! | `adls.connection-string` | an Azure connection string (`AccountName=..;AccountKey=..;BlobEndpoint=..`, `UseDevelopmentStorage=true`) |
//! | `adls.connection-string.<account>` | per account (Java): a connection string, or the account's endpoint URL |
//! | `adls.account-name`, `adls.account-key` | shared key (also Java's `adls.auth.shared-key.account.name` / `.key`) |
//! | `adls.sas-token`, `adls.sas-token.<account>` | a SAS token, for all accounts or one |
//! | `adls.blob-storage-authority`, `adls.blob-storage-scheme` | endpoint host (PyIceberg): `.blob.core.windows.net` style (account prepended) or `host:port` (account appended as the path, as emulators expect) |
//! | `adls.anon` | send unsigned requests |
//!
//! Without credentials in the properties, opendal's default loaders apply (GCS: the
//! `GOOGLE_APPLICATION_CREDENTIALS` file, gcloud's config, the VM metadata server; Azure: the
//! `AZURE_STORAGE_*` environment). `adls.tenant-id` / `adls.client-id` / `adls.client-secret`
//! (a service principal) are refused with an error naming them rather than ignored.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::io::{FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage};
use opendal::Operator;

/// Bytes a writer buffers before it sends a part (a multiple of GCS's 256 KiB resumable chunk;
/// within Azure's block size limits). Files smaller than this are sent in one request.
const WRITE_CHUNK: usize = 8 * 1024 * 1024;

/// True for `gs://` locations.
pub fn is_gcs(location: &str) -> bool {
    location.starts_with("gs://")
}

/// True for Azure locations (`abfs://`, `abfss://`, `wasb://`, `wasbs://`).
pub fn is_azure(location: &str) -> bool {
    ["abfs://", "abfss://", "wasb://", "wasbs://"]
        .iter()
        .any(|p| location.starts_with(p))
}

/// True for the stores this module serves.
pub fn is_cloud(location: &str) -> bool {
    is_gcs(location) || is_azure(location)
}

/// The content type objects are written with. Stores default it (GCS to
/// `application/octet-stream`), but saying it keeps every store and emulator consistent and
/// lets a browser of the bucket show metadata files as JSON.
fn content_type(path: &str) -> &'static str {
    if path.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

fn invalid(msg: impl Into<String>) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, msg.into())
}

fn io_error(what: &str, path: &str, e: opendal::Error) -> iceberg::Error {
    let kind = match e.kind() {
        opendal::ErrorKind::Unsupported => iceberg::ErrorKind::FeatureUnsupported,
        _ => iceberg::ErrorKind::Unexpected,
    };
    iceberg::Error::new(kind, format!("{what} {path}")).with_source(e)
}

/// An Azure location split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzurePath {
    /// `abfs`, `abfss`, `wasb` or `wasbs`.
    pub scheme: String,
    pub container: String,
    pub account: String,
    /// What follows `dfs.` or `blob.` in the host (`core.windows.net`).
    pub endpoint_suffix: String,
    /// The object key inside the container, without a leading `/`.
    pub key: String,
}

impl AzurePath {
    /// Parses `scheme://container@account.(dfs|blob).suffix[/key]`.
    pub fn parse(location: &str) -> Result<Self, String> {
        let (scheme, rest) = location
            .split_once("://")
            .ok_or_else(|| format!("{location}: not an Azure URI"))?;
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        let (container, host) = authority.split_once('@').ok_or_else(|| {
            format!(
                "{location}: an Azure location names its container: \
                 {scheme}://CONTAINER@ACCOUNT.{}.core.windows.net/path",
                if scheme.starts_with("wasb") {
                    "blob"
                } else {
                    "dfs"
                }
            )
        })?;
        let (account, service_suffix) = host
            .split_once('.')
            .ok_or_else(|| format!("{location}: no storage account in the host '{host}'"))?;
        let (service, suffix) = service_suffix.split_once('.').ok_or_else(|| {
            format!("{location}: the host '{host}' names no service (dfs or blob) and suffix")
        })?;
        let expected = if scheme.starts_with("wasb") {
            "blob"
        } else {
            "dfs"
        };
        if service != expected {
            return Err(format!(
                "{location}: {scheme}:// locations use the '{expected}' endpoint, not '{service}'"
            ));
        }
        if container.is_empty() || account.is_empty() {
            return Err(format!("{location}: empty container or account"));
        }
        Ok(Self {
            scheme: scheme.to_ascii_lowercase(),
            container: container.to_string(),
            account: account.to_string(),
            endpoint_suffix: suffix.trim_end_matches('/').to_string(),
            key: key.trim_start_matches('/').to_string(),
        })
    }

    fn secure(&self) -> bool {
        self.scheme.ends_with('s')
    }

    /// The operator cache key: one operator per account and container.
    fn operator_key(&self) -> String {
        format!(
            "{}://{}@{}.{}",
            self.scheme, self.container, self.account, self.endpoint_suffix
        )
    }
}

/// A `gs://` location split into bucket and key.
fn split_gcs(location: &str) -> Result<(&str, &str), String> {
    let rest = location
        .strip_prefix("gs://")
        .ok_or_else(|| format!("{location}: not a gs:// URI"))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("{location}: no bucket"));
    }
    Ok((bucket, key.trim_start_matches('/')))
}

/// opendal 0.57's GCS writer percent-encodes an object name twice in one-shot uploads
/// (`POST /upload/storage/v1/b/B/o?uploadType=...&name=N`): `ts_day=2026-11-01` is stored as
/// `ts_day%3D2026-11-01`, so every Hive-style partition path would be written under a name no
/// reader finds (opendal issue 7926, fixed in 0.59, which floe cannot take while the iceberg
/// crate's S3 storage pins 0.57). This HTTP client decodes the `name` parameter of those
/// uploads once before sending, so the store decodes it to the intended name. Signing is a
/// bearer header for GCS, so the URL may change after it. Reads, listings and deletes encode
/// once and pass through untouched.
struct SingleEncodedUploads(opendal::raw::HttpClient);

impl SingleEncodedUploads {
    fn fix(uri: &http::Uri) -> Option<http::Uri> {
        if !uri.path().contains("/upload/storage/v1/b/") {
            return None;
        }
        let query = uri.query()?;
        let mut changed = false;
        let fixed: Vec<String> = query
            .split('&')
            .map(|kv| match kv.strip_prefix("name=") {
                Some(v) if v.contains("%25") => {
                    changed = true;
                    format!("name={}", super::fence::percent_decode(v))
                }
                _ => kv.to_string(),
            })
            .collect();
        if !changed {
            return None;
        }
        let pq = format!("{}?{}", uri.path(), fixed.join("&"));
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = pq.parse().ok();
        http::Uri::from_parts(parts).ok()
    }
}

impl opendal::raw::HttpFetch for SingleEncodedUploads {
    async fn fetch(
        &self,
        mut req: http::Request<opendal::Buffer>,
    ) -> opendal::Result<http::Response<opendal::raw::HttpBody>> {
        if req.method() == http::Method::POST {
            if let Some(uri) = Self::fix(req.uri()) {
                *req.uri_mut() = uri;
            }
        }
        self.0.fetch(req).await
    }
}

/// The configuration of the GCS and Azure stores: FileIO properties.
#[derive(Debug, Clone, Default)]
pub struct CloudConfig {
    props: HashMap<String, String>,
}

impl CloudConfig {
    pub fn new(props: HashMap<String, String>) -> Self {
        Self { props }
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.props
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, k: &str) -> bool {
        self.get(k).is_some_and(truthy)
    }

    /// The operator for `location` and the key of the object inside it, plus the operator's
    /// cache key.
    pub fn operator(&self, location: &str) -> iceberg::Result<(Operator, String, String)> {
        if is_gcs(location) {
            let (bucket, key) = split_gcs(location).map_err(invalid)?;
            let op = self.gcs_operator(bucket)?;
            Ok((op, key.to_string(), format!("gs://{bucket}")))
        } else if is_azure(location) {
            let path = AzurePath::parse(location).map_err(invalid)?;
            let op = self.azure_operator(&path)?;
            Ok((op, path.key.clone(), path.operator_key()))
        } else {
            Err(invalid(format!(
                "{location}: not a GCS (gs://) or Azure (abfss://, wasbs://) location"
            )))
        }
    }

    /// The key the operator for `location` is cached under, without building it.
    fn cache_key(location: &str) -> iceberg::Result<(String, String)> {
        if is_gcs(location) {
            let (bucket, key) = split_gcs(location).map_err(invalid)?;
            Ok((format!("gs://{bucket}"), key.to_string()))
        } else {
            let path = AzurePath::parse(location).map_err(invalid)?;
            Ok((path.operator_key(), path.key))
        }
    }

    fn gcs_operator(&self, bucket: &str) -> iceberg::Result<Operator> {
        let mut b = opendal::services::Gcs::default().bucket(bucket).root("/");
        if let Some(ep) = self
            .get("gcs.service.host")
            .or(self.get("gcs.service.path"))
        {
            b = b.endpoint(ep.trim_end_matches('/'));
        }
        if let Some(t) = self.get("gcs.oauth2.token") {
            b = b.token(t.to_string());
        }
        if let Some(json) = self.get("gcs.credentials-json") {
            // opendal takes the key base64-encoded; users paste the JSON itself as often.
            let encoded = if json.trim_start().starts_with('{') {
                base64::engine::general_purpose::STANDARD.encode(json.as_bytes())
            } else {
                json.to_string()
            };
            b = b.credential(&encoded);
        }
        if self.flag("gcs.no-auth") || self.flag("gcs.allow-anonymous") {
            b = b
                .skip_signature()
                .disable_vm_metadata()
                .disable_config_load();
        }
        if self.get("gcs.oauth2.token").is_some() || self.get("gcs.credentials-json").is_some() {
            b = b.disable_vm_metadata().disable_config_load();
        }
        if self.flag("gcs.disable-vm-metadata") {
            b = b.disable_vm_metadata();
        }
        if self.flag("gcs.disable-config-load") {
            b = b.disable_config_load();
        }
        let op = Operator::new(b)
            .map_err(|e| io_error("configuring GCS for bucket", bucket, e))?
            .finish();
        opendal::raw::Access::info(op.inner())
            .update_http_client(|c| opendal::raw::HttpClient::with(SingleEncodedUploads(c)));
        Ok(op)
    }

    /// The value of a per-account property (`prefix.<account>` or `prefix.<account host>`).
    fn per_account(&self, prefix: &str, path: &AzurePath) -> Option<&str> {
        let host_dfs = format!("{}.dfs.{}", path.account, path.endpoint_suffix);
        let host_blob = format!("{}.blob.{}", path.account, path.endpoint_suffix);
        [path.account.as_str(), &host_dfs, &host_blob]
            .iter()
            .find_map(|a| self.get(&format!("{prefix}.{a}")))
    }

    fn azure_operator(&self, path: &AzurePath) -> iceberg::Result<Operator> {
        for k in ["adls.tenant-id", "adls.client-id", "adls.client-secret"] {
            if self.get(k).is_some() {
                return Err(iceberg::Error::new(
                    iceberg::ErrorKind::FeatureUnsupported,
                    format!(
                        "property {k}: service-principal credentials are not supported for \
                         Azure; use adls.account-key, adls.sas-token or adls.connection-string"
                    ),
                ));
            }
        }
        let configured = self
            .get("adls.account-name")
            .or(self.get("adls.auth.shared-key.account.name"));
        if let Some(name) = configured {
            if name != path.account {
                return Err(invalid(format!(
                    "adls.account-name is '{name}' but the location names account '{}'",
                    path.account
                )));
            }
        }
        let conn = self
            .per_account("adls.connection-string", path)
            .or(self.get("adls.connection-string"));
        let mut b = match conn {
            Some(c) if c.contains('=') => opendal::services::Azblob::from_connection_string(c)
                .map_err(|e| {
                    io_error(
                        "parsing adls.connection-string for account",
                        &path.account,
                        e,
                    )
                })?,
            Some(endpoint) => opendal::services::Azblob::default().endpoint(endpoint),
            None => {
                let scheme = self
                    .get("adls.blob-storage-scheme")
                    .unwrap_or(if path.secure() { "https" } else { "http" });
                let endpoint = match self.get("adls.blob-storage-authority") {
                    // `.blob.core.windows.net`: the account is the first label of the host.
                    Some(auth) if auth.starts_with('.') => {
                        format!("{scheme}://{}{auth}", path.account)
                    }
                    // `host:port`: emulator style, the account is the first path segment.
                    Some(auth) => format!("{scheme}://{auth}/{}", path.account),
                    None => format!("{scheme}://{}.blob.{}", path.account, path.endpoint_suffix),
                };
                opendal::services::Azblob::default()
                    .endpoint(&endpoint)
                    .account_name(&path.account)
            }
        };
        b = b.container(&path.container).root("/");
        if let Some(key) = self
            .get("adls.account-key")
            .or(self.get("adls.auth.shared-key.account.key"))
        {
            b = b.account_name(&path.account).account_key(key);
        }
        if let Some(sas) = self
            .per_account("adls.sas-token", path)
            .or(self.get("adls.sas-token"))
        {
            b = b.sas_token(sas.trim_start_matches('?'));
        }
        if self.flag("adls.anon") {
            b = b.skip_signature();
        }
        Ok(Operator::new(b)
            .map_err(|e| io_error("configuring Azure for", &path.operator_key(), e))?
            .finish())
    }
}

/// The iceberg `Storage` for GCS and Azure locations (see the module docs).
#[derive(Debug)]
pub struct CloudStorage {
    config: CloudConfig,
    operators: Mutex<HashMap<String, Operator>>,
}

impl CloudStorage {
    pub fn new(props: HashMap<String, String>) -> Self {
        Self {
            config: CloudConfig::new(props),
            operators: Mutex::new(HashMap::new()),
        }
    }

    /// The (kept) operator for `path` and the object key inside it.
    pub fn operator(&self, path: &str) -> iceberg::Result<(Operator, String)> {
        self.locate(path).map(|(op, key, _)| (op, key))
    }

    /// The operator for `path`, the object key, and the key the operator is kept under.
    fn locate(&self, path: &str) -> iceberg::Result<(Operator, String, String)> {
        let (cache, key) = CloudConfig::cache_key(path)?;
        if let Some(op) = self
            .operators
            .lock()
            .ok()
            .and_then(|m| m.get(&cache).cloned())
        {
            return Ok((op, key, cache));
        }
        let (op, key, cache) = self.config.operator(path)?;
        let op = op
            .layer(opendal::layers::TimeoutLayer::new())
            .layer(opendal::layers::RetryLayer::new().with_jitter());
        if let Ok(mut m) = self.operators.lock() {
            m.insert(cache.clone(), op.clone());
        }
        Ok((op, key, cache))
    }

    pub async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        let (op, key) = self.operator(path)?;
        op.exists(&key).await.map_err(|e| io_error("stat", path, e))
    }

    pub async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let (op, key) = self.operator(path)?;
        let meta = op.stat(&key).await.map_err(|e| io_error("stat", path, e))?;
        Ok(FileMetadata {
            size: meta.content_length(),
        })
    }

    pub async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let (op, key) = self.operator(path)?;
        Ok(op
            .read(&key)
            .await
            .map_err(|e| io_error("read", path, e))?
            .to_bytes())
    }

    pub async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        let (op, key) = self.operator(path)?;
        let reader = op
            .reader(&key)
            .await
            .map_err(|e| io_error("open", path, e))?;
        Ok(Box::new(CloudRead {
            reader,
            path: path.to_string(),
        }))
    }

    pub async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let (op, key) = self.operator(path)?;
        op.write_with(&key, bs)
            .content_type(content_type(path))
            .await
            .map_err(|e| io_error("write", path, e))?;
        Ok(())
    }

    pub async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let (op, key) = self.operator(path)?;
        let writer = op
            .writer_with(&key)
            .chunk(WRITE_CHUNK)
            .content_type(content_type(path))
            .await
            .map_err(|e| io_error("create", path, e))?;
        Ok(Box::new(CloudWrite {
            writer,
            path: path.to_string(),
        }))
    }

    pub async fn delete(&self, path: &str) -> iceberg::Result<()> {
        let (op, key) = self.operator(path)?;
        op.delete(&key)
            .await
            .map_err(|e| io_error("delete", path, e))
    }

    pub async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let (op, key) = self.operator(path)?;
        let key = if key.is_empty() || key.ends_with('/') {
            key
        } else {
            format!("{key}/")
        };
        if key.is_empty() {
            return Err(invalid(format!(
                "{path}: refusing to delete a whole bucket or container"
            )));
        }
        op.delete_with(&key)
            .recursive(true)
            .await
            .map_err(|e| io_error("delete prefix", path, e))
    }

    /// Batched deletes: opendal groups keys into the store's batch requests (GCS JSON batch of
    /// 100, Azure Blob Batch of 256).
    pub async fn delete_stream(
        &self,
        mut paths: BoxStream<'static, String>,
    ) -> iceberg::Result<()> {
        let mut deleters: HashMap<String, opendal::Deleter> = HashMap::new();
        while let Some(path) = paths.next().await {
            let (op, key, cache) = self.locate(&path)?;
            let deleter = match deleters.entry(cache) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(
                    op.deleter()
                        .await
                        .map_err(|e| io_error("delete", &path, e))?,
                ),
            };
            deleter
                .delete(key)
                .await
                .map_err(|e| io_error("delete", &path, e))?;
        }
        for (name, mut d) in deleters {
            d.close()
                .await
                .map_err(|e| io_error("delete batch in", &name, e))?;
        }
        Ok(())
    }

    /// Every object under `location`, recursively, as full URIs.
    pub async fn list(&self, location: &str) -> iceberg::Result<Vec<super::ObjectEntry>> {
        let (op, key) = self.operator(location)?;
        let prefix = match key.trim_matches('/') {
            "" => String::new(),
            k => format!("{k}/"),
        };
        // The location up to the key: `gs://bucket/` or `abfss://c@a.dfs.suffix/`.
        let base = &location[..location.len() - key.len()];
        let base = if base.ends_with('/') {
            base.to_string()
        } else {
            format!("{base}/")
        };
        super::list_under(&op, &prefix, &base)
            .await
            .map_err(|e| io_error("list", location, e))
    }

    pub fn new_input(self: &Arc<Self>, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(
            Arc::new(CloudStorageHandle {
                storage: self.clone(),
            }),
            path.to_string(),
        ))
    }

    pub fn new_output(self: &Arc<Self>, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(
            Arc::new(CloudStorageHandle {
                storage: self.clone(),
            }),
            path.to_string(),
        ))
    }
}

/// `CloudStorage` as an iceberg `Storage` (input and output files hold one).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct CloudStorageHandle {
    #[serde(skip, default = "unconfigured")]
    pub storage: Arc<CloudStorage>,
}

fn unconfigured() -> Arc<CloudStorage> {
    Arc::new(CloudStorage::new(HashMap::new()))
}

#[typetag::serde]
#[async_trait::async_trait]
impl Storage for CloudStorageHandle {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        self.storage.exists(path).await
    }
    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        self.storage.metadata(path).await
    }
    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.storage.read(path).await
    }
    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        self.storage.reader(path).await
    }
    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.storage.write(path, bs).await
    }
    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        self.storage.writer(path).await
    }
    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        self.storage.delete(path).await
    }
    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        self.storage.delete_prefix(path).await
    }
    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        self.storage.delete_stream(paths).await
    }
    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        self.storage.new_input(path)
    }
    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        self.storage.new_output(path)
    }
}

struct CloudRead {
    reader: opendal::Reader,
    path: String,
}

#[async_trait::async_trait]
impl FileRead for CloudRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        Ok(self
            .reader
            .read(range)
            .await
            .map_err(|e| io_error("read", &self.path, e))?
            .to_bytes())
    }
}

struct CloudWrite {
    writer: opendal::Writer,
    path: String,
}

#[async_trait::async_trait]
impl FileWrite for CloudWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.writer
            .write(bs)
            .await
            .map_err(|e| io_error("write", &self.path, e))
    }
    async fn close(&mut self) -> iceberg::Result<()> {
        self.writer
            .close()
            .await
            .map_err(|e| io_error("close", &self.path, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_paths() {
        let p = AzurePath::parse("abfss://lake@acct.dfs.core.windows.net/wh/db/t/data/a.parquet")
            .unwrap();
        assert_eq!(p.container, "lake");
        assert_eq!(p.account, "acct");
        assert_eq!(p.endpoint_suffix, "core.windows.net");
        assert_eq!(p.key, "wh/db/t/data/a.parquet");
        assert!(p.secure());
        let w = AzurePath::parse("wasb://c@a.blob.core.chinacloudapi.cn").unwrap();
        assert_eq!(w.key, "");
        assert!(!w.secure());
        assert_eq!(w.endpoint_suffix, "core.chinacloudapi.cn");
        for bad in [
            "abfss://acct.dfs.core.windows.net/x",
            "abfss://c@acct.blob.core.windows.net/x",
            "wasbs://c@acct.dfs.core.windows.net/x",
            "abfss://c@acct/x",
            "abfss://@acct.dfs.core.windows.net/x",
        ] {
            assert!(AzurePath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gcs_paths() {
        assert_eq!(
            split_gcs("gs://b/a/b.parquet").unwrap(),
            ("b", "a/b.parquet")
        );
        assert_eq!(split_gcs("gs://b").unwrap(), ("b", ""));
        assert!(split_gcs("gs:///x").is_err());
        assert!(is_cloud("gs://b/x") && is_cloud("abfss://c@a.dfs.x.y/z"));
        assert!(!is_cloud("s3://b/x") && !is_cloud("/tmp/gs://x"));
    }

    #[test]
    fn doubly_encoded_upload_names_are_decoded_once() {
        let uri: http::Uri = "http://h:1/upload/storage/v1/b/lake/o?uploadType=multipart&name=wh%2Fdata%2Fts_day%253D2026-11-01%2Fa%2520b.parquet"
            .parse()
            .unwrap();
        let fixed = SingleEncodedUploads::fix(&uri).unwrap();
        assert_eq!(
            fixed.query().unwrap(),
            "uploadType=multipart&name=wh/data/ts_day%3D2026-11-01/a%20b.parquet"
        );
        // Singly encoded names, reads and other requests are left alone.
        for ok in [
            "http://h/upload/storage/v1/b/lake/o?uploadType=media&name=wh%2Fa.json",
            "http://h/storage/v1/b/lake/o/wh%2Fts_day%3D1%2Fa.parquet?alt=media",
        ] {
            assert!(
                SingleEncodedUploads::fix(&ok.parse().unwrap()).is_none(),
                "{ok}"
            );
        }
        assert_eq!(
            crate::storage::fence::percent_decode("a%2525b%zz%4"),
            "a%25b%zz%4"
        );
    }

    #[test]
    fn azure_configuration_errors_name_the_property() {
        let path = "abfss://c@acct.dfs.core.windows.net/x";
        let cfg = CloudConfig::new(HashMap::from([(
            "adls.client-secret".to_string(),
            "s".to_string(),
        )]));
        let e = cfg.operator(path).unwrap_err().to_string();
        assert!(e.contains("adls.client-secret"), "{e}");
        let cfg = CloudConfig::new(HashMap::from([(
            "adls.account-name".to_string(),
            "other".to_string(),
        )]));
        let e = cfg.operator(path).unwrap_err().to_string();
        assert!(e.contains("adls.account-name") && e.contains("acct"), "{e}");
        // A configured key builds (no request is made here).
        let cfg = CloudConfig::new(HashMap::from([
            ("adls.account-name".to_string(), "acct".to_string()),
            ("adls.account-key".to_string(), "a2V5".to_string()),
        ]));
        let (_, key, cache) = cfg.operator(path).unwrap();
        assert_eq!(key, "x");
        assert_eq!(cache, "abfss://c@acct.core.windows.net");
    }
}
