//! Storage: the FileIO a table's files are read and written with, chosen by location scheme;
//! listings ([`listing`]); the delete fence ([`fence`]) and the only delete functions
//! ([`delete`]).
//!
//! Local paths and `file://` use the iceberg crate's own filesystem FileIO; `s3://` (and
//! `s3a://`, `s3n://`) use `iceberg-storage-opendal`'s S3 storage, configured with Iceberg's
//! FileIO property names: `s3.endpoint`, `s3.region` (or `client.region`), `s3.access-key-id`,
//! `s3.secret-access-key`, `s3.session-token`, `s3.path-style-access`. A REST catalog's
//! LoadTable `config` (vended credentials) is merged into these by the catalog client.
//!
//! Object-store reads go through [`WholeFileReads`]: a read that starts at byte 0 of a small
//! object (the Parquet footer prefetch covers all of a file under 512 KiB) is remembered, so
//! the column chunks the reader asks for next come from memory instead of another GET. For
//! compaction's many small inputs that halves the GETs.
//!
//! Google Cloud Storage (`gs://`) and Azure (`abfss://`, `abfs://`, `wasbs://`, `wasb://`) are
//! floe's own storage over opendal ([`cloud`]), configured with Iceberg's `gcs.*` and `adls.*`
//! properties.
//!
//! The FileIO cannot list, so [`S3Lister`] (and [`cloud::CloudStorage::list`]) build an opendal
//! operator from the *same* properties (read back from the FileIO's config) for orphan
//! listings: one configuration, one set of credentials.

pub mod cloud;
pub mod delete;
pub mod fence;
pub mod listing;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg_storage_opendal::{OpenDalResolvingStorageFactory, OpenDalStorageFactory};

use crate::base::error::{Error, Result};

/// True for the S3 family of schemes.
pub fn is_s3(location: &str) -> bool {
    ["s3://", "s3a://", "s3n://"]
        .iter()
        .any(|p| location.starts_with(p))
}

/// True for locations on an object store (S3, GCS, Azure): deletes are batched and listings
/// page through the store's API.
pub fn is_object_store(location: &str) -> bool {
    is_s3(location) || cloud::is_cloud(location)
}

/// The FileIO for tables under `location` (a warehouse or table location).
pub fn file_io_for(location: &str, props: HashMap<String, String>) -> FileIO {
    if cloud::is_cloud(location) {
        FileIOBuilder::new(Arc::new(WholeFileReadsFactory {
            inner: InnerFactory::Cloud,
        }))
        .with_props(props)
        .build()
    } else if is_s3(location) {
        FileIOBuilder::new(Arc::new(WholeFileReadsFactory {
            inner: InnerFactory::S3(OpenDalStorageFactory::S3 {
                customized_credential_load: None,
            }),
        }))
        .with_props(props)
        .build()
    } else {
        FileIO::new_with_fs()
    }
}

/// The storage factory REST catalogs build each table's FileIO with: it resolves the scheme of
/// every path, so local (`file://`), S3, GCS and Azure tables all work.
pub fn rest_storage_factory() -> Arc<dyn StorageFactory> {
    Arc::new(WholeFileReadsFactory {
        inner: InnerFactory::Resolving(OpenDalResolvingStorageFactory::new()),
    })
}

/// Reads that start at byte 0 and return at most this much are remembered.
const REMEMBER_MAX_BYTES: usize = 1024 * 1024;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum InnerFactory {
    S3(OpenDalStorageFactory),
    /// GCS and Azure only ([`cloud`]).
    Cloud,
    /// Any scheme: GCS and Azure paths go to [`cloud`], the rest to iceberg's resolving storage.
    Resolving(OpenDalResolvingStorageFactory),
}

/// Builds [`WholeFileReads`] around an opendal storage.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WholeFileReadsFactory {
    inner: InnerFactory,
}

#[typetag::serde]
impl StorageFactory for WholeFileReadsFactory {
    fn build(&self, config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        let cloud = || -> Arc<dyn Storage> {
            Arc::new(cloud::CloudStorageHandle {
                storage: Arc::new(cloud::CloudStorage::new(config.props().clone())),
            })
        };
        let (inner, cloud) = match &self.inner {
            InnerFactory::S3(f) => (Some(f.build(config)?), None),
            InnerFactory::Cloud => (None, Some(cloud())),
            InnerFactory::Resolving(f) => (Some(f.build(config)?), Some(cloud())),
        };
        Ok(Arc::new_cyclic(|me: &Weak<WholeFileReads>| {
            WholeFileReads {
                inner,
                cloud,
                me: me.clone(),
            }
        }))
    }
}

/// A storage whose readers remember a read of a small object's head (see the module docs).
/// Every other operation is the inner storage's. (`Storage` is a serde trait; floe never
/// serializes a storage, and a deserialized one has no inner storage and refuses to work.)
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WholeFileReads {
    #[serde(skip)]
    inner: Option<Arc<dyn Storage>>,
    /// The storage of GCS and Azure paths, when this FileIO serves them.
    #[serde(skip)]
    cloud: Option<Arc<dyn Storage>>,
    /// Input files must read through this wrapper, not the inner storage.
    #[serde(skip)]
    me: Weak<WholeFileReads>,
}

impl WholeFileReads {
    /// The storage that serves `path`.
    fn inner(&self, path: &str) -> iceberg::Result<&Arc<dyn Storage>> {
        let routed = if cloud::is_cloud(path) {
            self.cloud.as_ref()
        } else {
            self.inner.as_ref()
        };
        routed.ok_or_else(|| {
            iceberg::Error::new(
                iceberg::ErrorKind::FeatureUnsupported,
                format!("{path}: this FileIO is not configured for that store"),
            )
        })
    }
}

#[typetag::serde]
#[async_trait::async_trait]
impl Storage for WholeFileReads {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        self.inner(path)?.exists(path).await
    }
    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        self.inner(path)?.metadata(path).await
    }
    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.inner(path)?.read(path).await
    }
    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(RememberingRead {
            inner: self.inner(path)?.reader(path).await?,
            head: Mutex::new(None),
        }))
    }
    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.inner(path)?.write(path, bs).await
    }
    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        self.inner(path)?.writer(path).await
    }
    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        self.inner(path)?.delete(path).await
    }
    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        self.inner(path)?.delete_prefix(path).await
    }
    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        // One store per stream (floe deletes a table's files, which live on one store); the
        // first path picks it.
        let mut paths = paths.peekable();
        let first = match std::pin::Pin::new(&mut paths).peek().await {
            Some(p) => p.clone(),
            None => return Ok(()),
        };
        self.inner(&first)?.delete_stream(paths.boxed()).await
    }
    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        match self.me.upgrade() {
            Some(me) => Ok(InputFile::new(me, path.to_string())),
            None => self.inner(path)?.new_input(path),
        }
    }
    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        self.inner(path)?.new_output(path)
    }
}

/// A reader that keeps the bytes of its first read when it starts at 0 and is small, and
/// answers later reads inside them from memory.
struct RememberingRead {
    inner: Box<dyn FileRead>,
    head: Mutex<Option<Bytes>>,
}

#[async_trait::async_trait]
impl FileRead for RememberingRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        let cached = self.head.lock().map(|h| h.clone()).unwrap_or(None);
        if let Some(head) = cached {
            if range.start <= range.end && range.end <= head.len() as u64 {
                return Ok(head.slice(range.start as usize..range.end as usize));
            }
        }
        let bytes = self.inner.read(range.clone()).await?;
        if range.start == 0 && bytes.len() <= REMEMBER_MAX_BYTES {
            if let Ok(mut h) = self.head.lock() {
                *h = Some(bytes.clone());
            }
        }
        Ok(bytes)
    }
}

/// A listed object.
#[derive(Debug, Clone)]
pub struct ObjectEntry {
    pub key: String,
    pub size: u64,
    pub modified: SystemTime,
}

/// Lists S3 prefixes with the FileIO's own configuration (paged by the S3 ListObjectsV2 API).
pub struct S3Lister {
    props: HashMap<String, String>,
}

impl S3Lister {
    /// A lister for the storage `file_io` talks to.
    pub fn new(file_io: &FileIO) -> Self {
        Self {
            props: file_io.config().props().clone(),
        }
    }

    fn operator(&self, bucket: &str) -> Result<opendal::Operator> {
        let p = |k: &str| self.props.get(k).map(String::as_str);
        let mut b = opendal::services::S3::default().bucket(bucket).root("/");
        if let Some(v) = p("s3.endpoint") {
            b = b.endpoint(v);
        }
        let region = p("s3.region").or(p("client.region")).unwrap_or("us-east-1");
        b = b.region(region);
        if let Some(v) = p("s3.access-key-id") {
            b = b.access_key_id(v);
        }
        if let Some(v) = p("s3.secret-access-key") {
            b = b.secret_access_key(v);
        }
        if let Some(v) = p("s3.session-token") {
            b = b.session_token(v);
        }
        // Iceberg's default is virtual-host style; `s3.path-style-access=true` turns it off.
        let path_style = p("s3.path-style-access")
            .map(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
            .unwrap_or(false);
        if !path_style {
            b = b.enable_virtual_host_style();
        }
        if p("s3.access-key-id").is_some() {
            b = b.disable_config_load().disable_ec2_metadata();
        }
        Ok(opendal::Operator::new(b)
            .map_err(|e| storage_error(bucket, e.to_string(), e))?
            .finish())
    }

    /// Every object under `location` (`s3://bucket/prefix`), recursively, as full URIs in the
    /// location's own scheme.
    pub async fn list(&self, location: &str) -> Result<Vec<ObjectEntry>> {
        let (scheme, rest) = location.split_once("://").ok_or_else(|| {
            Error::invalid_option("location", location, "expected s3://bucket/prefix")
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let mut prefix = prefix.trim_matches('/').to_string();
        if !prefix.is_empty() {
            prefix.push('/');
        }
        let op = self.operator(bucket)?;
        let fail = |e: opendal::Error| {
            storage_error(
                &with_endpoint(&self.props, location),
                crate::base::error::describe_opendal(&e),
                e,
            )
        };
        list_under(&op, &prefix, &format!("{scheme}://{bucket}/"))
            .await
            .map_err(fail)
    }
}

/// Every object below `prefix` (a key prefix ending in `/`, or empty) of `op`, recursively, as
/// `base` + key (`base` is the location up to the key, ending in `/`). An object without a
/// timestamp counts as brand new, so no age threshold ever selects it.
pub(crate) async fn list_under(
    op: &opendal::Operator,
    prefix: &str,
    base: &str,
) -> opendal::Result<Vec<ObjectEntry>> {
    let mut lister = op.lister_with(prefix).recursive(true).await?;
    let mut out = Vec::new();
    while let Some(entry) = lister.try_next().await? {
        let meta = entry.metadata();
        if !meta.is_file() {
            continue;
        }
        out.push(ObjectEntry {
            key: format!("{base}{}", entry.path().trim_start_matches('/')),
            size: meta.content_length(),
            modified: meta
                .last_modified()
                .map_or_else(SystemTime::now, SystemTime::from),
        });
    }
    Ok(out)
}

/// One line naming the location and what the store answered (`reason`), keeping the store's
/// error as the source.
pub(crate) fn storage_error<E>(location: &str, reason: impl std::fmt::Display, source: E) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    Error::Storage {
        location: location.to_string(),
        reason: first_line(&reason.to_string()),
        source: Some(Box::new(source)),
    }
}

/// Like [`storage_error`], naming the S3 endpoint `file_io` talks to (transport errors do not).
pub(crate) fn storage_error_on<E>(
    file_io: &FileIO,
    location: &str,
    reason: impl std::fmt::Display,
    source: E,
) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    storage_error(
        &with_endpoint(file_io.config().props(), location),
        reason,
        source,
    )
}

/// `location (endpoint URL)` for S3 and GCS locations when the properties name an endpoint.
fn with_endpoint(props: &HashMap<String, String>, location: &str) -> String {
    let endpoint = if is_s3(location) {
        props.get("s3.endpoint")
    } else if cloud::is_gcs(location) {
        props
            .get("gcs.service.host")
            .or(props.get("gcs.service.path"))
    } else {
        None
    };
    match endpoint {
        Some(ep) => format!("{location} (endpoint {ep})"),
        None => location.to_string(),
    }
}

/// The first line of a message, trimmed (object-store errors carry multi-line contexts).
pub(crate) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts inner reads.
    struct Counting(Bytes, Arc<std::sync::atomic::AtomicUsize>);

    #[async_trait::async_trait]
    impl FileRead for Counting {
        async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(self.0.slice(range.start as usize..range.end as usize))
        }
    }

    #[tokio::test]
    async fn a_whole_small_file_is_read_once() {
        let data = Bytes::from((0..=255u8).cycle().take(4096).collect::<Vec<u8>>());
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let r = RememberingRead {
            inner: Box::new(Counting(data.clone(), reads.clone())),
            head: Mutex::new(None),
        };
        assert_eq!(r.read(0..4096).await.unwrap(), data);
        assert_eq!(r.read(100..200).await.unwrap(), data.slice(100..200));
        assert_eq!(r.read(4000..4096).await.unwrap(), data.slice(4000..4096));
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
        // A read that does not start at 0 is not remembered.
        let r = RememberingRead {
            inner: Box::new(Counting(data.clone(), reads.clone())),
            head: Mutex::new(None),
        };
        r.read(10..20).await.unwrap();
        r.read(10..20).await.unwrap();
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn s3_schemes() {
        assert!(is_s3("s3://b/x"));
        assert!(is_s3("s3a://b/x"));
        assert!(!is_s3("file:///x"));
        assert!(!is_s3("/x/s3://"));
    }
}
