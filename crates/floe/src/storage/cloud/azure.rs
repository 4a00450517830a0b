//! Azure Blob Storage / ADLS Gen2: `abfss://container@account.dfs.core.windows.net/key`
//! locations (and `abfs://`, `wasbs://`, `wasb://`) and the operator for a container.

use opendal::Operator;

use super::{invalid, io_error, CloudConfig};

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

    pub(super) fn secure(&self) -> bool {
        self.scheme.ends_with('s')
    }

    /// The operator cache key: one operator per account and container.
    pub(super) fn operator_key(&self) -> String {
        format!(
            "{}://{}@{}.{}",
            self.scheme, self.container, self.account, self.endpoint_suffix
        )
    }
}

impl CloudConfig {
    /// The value of a per-account property (`prefix.<account>` or `prefix.<account host>`).
    fn per_account(&self, prefix: &str, path: &AzurePath) -> Option<&str> {
        let host_dfs = format!("{}.dfs.{}", path.account, path.endpoint_suffix);
        let host_blob = format!("{}.blob.{}", path.account, path.endpoint_suffix);
        [path.account.as_str(), &host_dfs, &host_blob]
            .iter()
            .find_map(|a| self.get(&format!("{prefix}.{a}")))
    }

    pub(super) fn azure_operator(&self, path: &AzurePath) -> iceberg::Result<Operator> {
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
