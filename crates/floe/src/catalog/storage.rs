//! Storage: the FileIO a table's files are read and written with, chosen by location scheme.
//!
//! Local paths and `file://` use the iceberg crate's own filesystem FileIO; `s3://` (and
//! `s3a://`, `s3n://`) use `iceberg-storage-opendal`'s S3 storage, configured with Iceberg's
//! FileIO property names: `s3.endpoint`, `s3.region` (or `client.region`), `s3.access-key-id`,
//! `s3.secret-access-key`, `s3.session-token`, `s3.path-style-access`. A REST catalog's
//! LoadTable `config` (vended credentials) is merged into these by the catalog client.
//!
//! The FileIO cannot list, so [`S3Lister`] builds an opendal operator from the *same*
//! properties (read back from the FileIO's config) for orphan listings: one configuration, one
//! set of credentials.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use futures::TryStreamExt;
use iceberg::io::{FileIO, FileIOBuilder, StorageFactory};
use iceberg_storage_opendal::{OpenDalResolvingStorageFactory, OpenDalStorageFactory};

use crate::error::{Error, Result};

/// True for the S3 family of schemes.
pub fn is_s3(location: &str) -> bool {
    ["s3://", "s3a://", "s3n://"]
        .iter()
        .any(|p| location.starts_with(p))
}

/// The FileIO for tables under `location` (a warehouse or table location).
pub fn file_io_for(location: &str, props: HashMap<String, String>) -> FileIO {
    if is_s3(location) {
        FileIOBuilder::new(Arc::new(OpenDalStorageFactory::S3 {
            customized_credential_load: None,
        }))
        .with_props(props)
        .build()
    } else {
        FileIO::new_with_fs()
    }
}

/// The storage factory REST catalogs build each table's FileIO with: it resolves the scheme of
/// every path, so local (`file://`) and S3 tables both work.
pub fn rest_storage_factory() -> Arc<dyn StorageFactory> {
    Arc::new(OpenDalResolvingStorageFactory::new())
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
            .map_err(|e| storage_error(bucket, e))?
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
            let location = match self.props.get("s3.endpoint") {
                Some(ep) => format!("{location} (endpoint {ep})"),
                None => location.to_string(),
            };
            storage_error(&location, crate::error::describe_opendal(&e))
        };
        let mut lister = op
            .lister_with(&prefix)
            .recursive(true)
            .await
            .map_err(fail)?;
        let mut out = Vec::new();
        while let Some(entry) = lister.try_next().await.map_err(fail)? {
            let meta = entry.metadata();
            if !meta.is_file() {
                continue;
            }
            let modified = match meta.last_modified() {
                Some(t) => SystemTime::from(t),
                // No timestamp: treat as brand new, so no age threshold ever selects it.
                None => SystemTime::now(),
            };
            out.push(ObjectEntry {
                key: format!(
                    "{scheme}://{bucket}/{}",
                    entry.path().trim_start_matches('/')
                ),
                size: meta.content_length(),
                modified,
            });
        }
        Ok(out)
    }
}

/// One line naming the location and what the store answered.
pub(crate) fn storage_error(location: &str, e: impl std::fmt::Display) -> Error {
    Error::Storage {
        location: location.to_string(),
        reason: first_line(&e.to_string()),
    }
}

/// Like [`storage_error`], naming the S3 endpoint `file_io` talks to (transport errors do not).
pub(crate) fn storage_error_on(
    file_io: &FileIO,
    location: &str,
    e: impl std::fmt::Display,
) -> Error {
    let location = match file_io.config().props().get("s3.endpoint") {
        Some(ep) if is_s3(location) => format!("{location} (endpoint {ep})"),
        _ => location.to_string(),
    };
    storage_error(&location, e)
}

/// The first line of a message, trimmed (object-store errors carry multi-line contexts).
pub(crate) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_schemes() {
        assert!(is_s3("s3://b/x"));
        assert!(is_s3("s3a://b/x"));
        assert!(!is_s3("file:///x"));
        assert!(!is_s3("/x/s3://"));
    }
}
