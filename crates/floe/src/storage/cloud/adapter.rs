//! The adapter: opendal operators (one per bucket or container, built once and kept) as an
//! iceberg `Storage`, with streamed reads and chunked writes.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::io::{FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage};
use opendal::Operator;

use super::{content_type, invalid, io_error, CloudConfig};

/// Bytes a writer buffers before it sends a part (a multiple of GCS's 256 KiB resumable chunk;
/// within Azure's block size limits). Files smaller than this are sent in one request.
const WRITE_CHUNK: usize = 8 * 1024 * 1024;

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
    pub async fn list(&self, location: &str) -> iceberg::Result<Vec<crate::storage::ObjectEntry>> {
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
        crate::storage::list_under(&op, &prefix, &base)
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
