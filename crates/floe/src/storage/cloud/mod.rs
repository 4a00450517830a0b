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
//!
//! ```text
//!  mod.rs      which locations are cloud ones, and the configuration (FileIO properties)
//!  gcs.rs      GCS: `gs://` paths and the operator for a bucket
//!  azure.rs    Azure: `abfss://` / `wasbs://` paths and the operator for a container
//!  adapter.rs  opendal operators as an iceberg `Storage` (cached per bucket or container)
//! ```

mod adapter;
mod azure;
mod gcs;

use std::collections::HashMap;

use opendal::Operator;

pub use adapter::{CloudStorage, CloudStorageHandle};
pub use azure::AzurePath;
use gcs::split_gcs;

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
pub(super) fn content_type(path: &str) -> &'static str {
    if path.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

pub(super) fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

pub(super) fn invalid(msg: impl Into<String>) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, msg.into())
}

pub(super) fn io_error(what: &str, path: &str, e: opendal::Error) -> iceberg::Error {
    let kind = match e.kind() {
        opendal::ErrorKind::Unsupported => iceberg::ErrorKind::FeatureUnsupported,
        _ => iceberg::ErrorKind::Unexpected,
    };
    iceberg::Error::new(kind, format!("{what} {path}")).with_source(e)
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

    pub(super) fn get(&self, k: &str) -> Option<&str> {
        self.props
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(super) fn flag(&self, k: &str) -> bool {
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
    pub(super) fn cache_key(location: &str) -> iceberg::Result<(String, String)> {
        if is_gcs(location) {
            let (bucket, key) = split_gcs(location).map_err(invalid)?;
            Ok((format!("gs://{bucket}"), key.to_string()))
        } else {
            let path = AzurePath::parse(location).map_err(invalid)?;
            Ok((path.operator_key(), path.key))
        }
    }
}

#[cfg(test)]
mod tests;
