//! Catalog configuration the way PyIceberg users write it.
//!
//! Named catalogs live in a TOML file (`--config FILE`, else `./floe.toml`, else
//! `$XDG_CONFIG_HOME/floe/floe.toml` / `~/.config/floe/floe.toml`):
//!
//! ```toml
//! default-catalog = "lake"
//!
//! [catalog.lake]
//! type = "rest"                       # or "sql"; inferred from the uri when absent
//! uri = "https://catalog.example.com"
//! warehouse = "analytics"
//! credential = "client-id:client-secret"   # OAuth2 client credentials, or `token = "..."`
//! "s3.endpoint" = "https://s3.example.com"
//! "s3.region" = "eu-west-1"
//! "s3.path-style-access" = "true"
//! ```
//!
//! The same keys come from environment variables, PyIceberg's convention with floe's prefix:
//! `FLOE_CATALOG__LAKE__URI`, `FLOE_CATALOG__LAKE__S3__ENDPOINT` (`__` is a `.` in the key, `_` a
//! `-`, so `FLOE_CATALOG__LAKE__S3__SECRET_ACCESS_KEY` is `s3.secret-access-key`). Precedence,
//! lowest first: file, environment, `--catalog-prop k=v`.
//!
//! Without a catalog name floe uses the embedded default: a SQLite catalog in
//! `<warehouse>/catalog.db` over a local warehouse directory.
//!
//! Secrets (credential, token, secret keys, passwords and secret parameters in URIs) never leave
//! this module in clear: [`CatalogConfig`]'s `Debug` and [`CatalogConfig::redacted`] mask them,
//! and every configuration [`resolve`] returns has its secret values registered with [`mask`],
//! the one masking function everything floe prints goes through ([`crate::base::secrets`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::base::error::{Error, Result};

pub use crate::base::secrets::{
    is_secret_name, mask, mask_property, mask_with, masked_stderr, register_config_secrets,
    register_secrets, secret_parts, secrets_of, MaskedStderr, MASK,
};

/// Catalog implementations floe speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogKind {
    /// Iceberg JDBC-schema catalog on SQLite or PostgreSQL.
    Sql,
    /// Iceberg REST catalog (Polaris, Lakekeeper, Gravitino, Unity, Nessie, S3 Tables, ...).
    Rest,
}

impl CatalogKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogKind::Sql => "sql",
            CatalogKind::Rest => "rest",
        }
    }
}

/// How to reach one catalog: its kind, name and every property (`uri`, `warehouse`,
/// `credential`, `s3.*`, ...), which also configure the FileIO its tables are read with.
#[derive(Clone)]
pub struct CatalogConfig {
    /// Catalog name (for SQL catalogs the `catalog_name` column shared with PyIceberg/Java).
    pub name: String,
    pub kind: CatalogKind,
    /// `uri`: `sqlite:///abs/path.db`, `postgres://...` or the REST endpoint.
    pub uri: String,
    /// `warehouse`: for SQL catalogs the root of new tables (a path, `file://` or `s3://` URI);
    /// for REST catalogs the warehouse name or location the server expects (may be empty).
    pub warehouse: String,
    /// Every other property, passed to the catalog client and the FileIO.
    pub props: BTreeMap<String, String>,
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("uri", &mask(&self.uri))
            .field("warehouse", &mask(&self.warehouse))
            .field("props", &redact_props(&self.props))
            .finish()
    }
}

/// The default catalog name, shared with PyIceberg configs that point at floe's catalog.
pub const DEFAULT_CATALOG_NAME: &str = "floe";

impl CatalogConfig {
    /// The embedded default: `./warehouse/` with a SQLite catalog at `./warehouse/catalog.db`,
    /// or the same layout under `warehouse` when given.
    pub fn embedded(warehouse: Option<&Path>) -> Result<Self> {
        let warehouse = super::absolute(warehouse.unwrap_or(Path::new("warehouse")))?;
        let uri = format!("sqlite://{}", warehouse.join("catalog.db").display());
        Ok(Self {
            name: DEFAULT_CATALOG_NAME.to_string(),
            kind: CatalogKind::Sql,
            uri,
            warehouse: warehouse.display().to_string(),
            props: BTreeMap::new(),
        })
    }

    /// A config from a flat property map (`type`, `uri`, `warehouse` and the rest). Its secret
    /// values are registered with [`mask`].
    pub fn from_props(name: &str, mut props: BTreeMap<String, String>) -> Result<Self> {
        register_config_secrets(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let uri = props.remove("uri").unwrap_or_default();
        let warehouse = props.remove("warehouse").unwrap_or_default();
        let kind = match props.remove("type").as_deref().map(str::to_ascii_lowercase) {
            Some(t) if t == "rest" => CatalogKind::Rest,
            Some(t) if t == "sql" || t == "jdbc" => CatalogKind::Sql,
            Some(t) => {
                return Err(Error::invalid_option(
                    format!("catalog.{name}.type"),
                    t,
                    "supported catalog types: rest, sql",
                ))
            }
            None if uri.starts_with("http://") || uri.starts_with("https://") => CatalogKind::Rest,
            None => CatalogKind::Sql,
        };
        if uri.is_empty() {
            return Err(Error::invalid_option(
                format!("catalog.{name}.uri"),
                "",
                "missing: set uri in the config file, FLOE_CATALOG__<NAME>__URI or --catalog-prop uri=...",
            ));
        }
        if kind == CatalogKind::Sql && warehouse.is_empty() {
            return Err(Error::invalid_option(
                format!("catalog.{name}.warehouse"),
                "",
                "a SQL catalog needs a warehouse (path or s3:// URI) for new tables",
            ));
        }
        let name = props
            .remove("catalog-name")
            .unwrap_or_else(|| name.to_string());
        for key in props.keys() {
            check_key(&name, key)?;
        }
        Ok(Self {
            name,
            kind,
            uri,
            warehouse,
            props,
        })
    }

    /// Every property with secrets masked, for display and `--json`.
    pub fn redacted(&self) -> BTreeMap<String, String> {
        let mut out = redact_props(&self.props);
        out.insert("type".into(), self.kind.as_str().into());
        out.insert("uri".into(), mask(&self.uri));
        if !self.warehouse.is_empty() {
            out.insert("warehouse".into(), mask(&self.warehouse));
        }
        out
    }

    /// Every property as a `(key, value)` pair, `uri` and `warehouse` included.
    fn all_props(&self) -> impl Iterator<Item = (&str, &str)> {
        [
            ("uri", self.uri.as_str()),
            ("warehouse", self.warehouse.as_str()),
        ]
        .into_iter()
        .chain(self.props.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// The secret values of this configuration (see [`secrets_of`]).
    pub fn secrets(&self) -> Vec<String> {
        secrets_of(self.all_props())
    }

    /// Registers this configuration's secrets with [`mask`], so no message floe prints shows
    /// them, whatever library echoed them.
    pub fn register_secrets(&self) {
        register_secrets(self.secrets());
    }

    /// Properties for the FileIO of this catalog's tables (storage keys such as `s3.*`).
    pub fn storage_props(&self) -> std::collections::HashMap<String, String> {
        self.props
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Catalog keys floe reads besides `type`, `uri`, `warehouse` and `catalog-name`: the REST
/// client's (Iceberg's REST catalog spec and the iceberg crate's client) and the FileIO's
/// (the iceberg crate's `s3.*`, `gcs.*`, `adls.*`, `client.*` constants, and PyIceberg's
/// FileIO keys, which configurations shared with PyIceberg carry).
const KNOWN_KEYS: &[&str] = &[
    "credential",
    "token",
    "scope",
    "oauth2-server-uri",
    "prefix",
    "audience",
    "resource",
    "s3.endpoint",
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "s3.region",
    "s3.path-style-access",
    "s3.force-virtual-addressing",
    "s3.allow-anonymous",
    "s3.disable-ec2-metadata",
    "s3.disable-config-load",
    "s3.sse.type",
    "s3.sse.key",
    "s3.sse.md5",
    "s3.role-arn",
    "s3.role-session-name",
    "s3.signer",
    "s3.signer.uri",
    "s3.signer.endpoint",
    "s3.proxy-uri",
    "s3.connect-timeout",
    "s3.request-timeout",
    "s3.anonymous",
    "s3.resolve-region",
    "client.region",
    "client.assume-role.arn",
    "client.assume-role.external-id",
    "client.assume-role.session-name",
    "gcs.credentials-json",
    "gcs.oauth2.token",
    "gcs.project-id",
    "gcs.service.host",
    "gcs.service.path",
    "gcs.user-project",
    "gcs.no-auth",
    "gcs.allow-anonymous",
    "gcs.disable-vm-metadata",
    "gcs.disable-config-load",
    "gcs.oauth2.token-expires-at",
    "gcs.access",
    "gcs.consistency",
    "gcs.cache-timeout",
    "gcs.requester-pays",
    "gcs.default-location",
    "gcs.version-aware",
    "adls.account-name",
    "adls.account-key",
    "adls.sas-token",
    "adls.connection-string",
    "adls.tenant-id",
    "adls.client-id",
    "adls.client-secret",
    "adls.authority-host",
    "adls.blob-storage-authority",
    "adls.blob-storage-scheme",
    "adls.auth.shared-key.account.name",
    "adls.auth.shared-key.account.key",
    "adls.account-host",
    "adls.dfs-storage-authority",
    "adls.dfs-storage-scheme",
    "adls.token",
    "adls.anon",
    "hf.endpoint",
    "hf.token",
];

/// Families whose keys are open: REST headers (`header.X-Name`) and PyIceberg's per-account
/// SAS tokens (`adls.sas-token.<account>`).
const OPEN_PREFIXES: &[&str] = &["header.", "adls.sas-token."];

/// Refuses a catalog key floe does not read, by name: a typo (`s3.endpont`) or a sub-table
/// (`[catalog.x.storage]`) would otherwise do nothing without a word.
fn check_key(name: &str, key: &str) -> Result<()> {
    if KNOWN_KEYS.contains(&key) || OPEN_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return Ok(());
    }
    let family = key.split('.').next().unwrap_or(key);
    let mut near: Vec<&str> = KNOWN_KEYS
        .iter()
        .copied()
        .filter(|k| k.split('.').next() == Some(family) || close(k, key))
        .collect();
    near.truncate(12);
    let hint = match near.is_empty() {
        true => "keys floe reads: type, uri, warehouse, catalog-name, credential, token, scope, \
                 oauth2-server-uri, prefix, header.*, s3.*, gcs.*, adls.*, client.*"
            .to_string(),
        false => format!("did you mean one of: {}", near.join(", ")),
    };
    Err(Error::invalid_option(
        format!("catalog.{name} key"),
        key,
        format!("not a catalog property floe reads; {hint}"),
    ))
}

/// Whether two keys differ by at most two edits (a typo).
fn close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()] <= 2
}

fn redact_props(props: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    props
        .iter()
        .map(|(k, v)| (k.clone(), mask_property(k, v)))
        .collect()
}

/// A URI as it may be shown: userinfo password and secret query parameters masked ([`mask`]).
pub fn redact_uri(uri: &str) -> String {
    mask(uri)
}

/// The parsed config file: named catalogs and the optional default.
#[derive(Debug, Default, Clone)]
pub struct ConfigFile {
    pub path: Option<PathBuf>,
    pub default_catalog: Option<String>,
    pub catalogs: BTreeMap<String, BTreeMap<String, String>>,
    /// `[kafka]`: client properties of every Kafka client (`security.protocol`, `ssl.*`,
    /// `sasl.*`; [`crate::ingest::source::kafka_client`]).
    pub kafka: BTreeMap<String, String>,
}

impl ConfigFile {
    /// Reads `explicit` (which must exist), else the first of `./floe.toml` and the user's
    /// config dir that exists, else an empty config.
    pub fn discover(explicit: Option<&Path>) -> Result<Self> {
        if let Some(p) = explicit {
            return Self::read(p);
        }
        let mut candidates = vec![PathBuf::from("floe.toml")];
        if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
            candidates.push(PathBuf::from(dir).join("floe").join("floe.toml"));
        } else if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            candidates.push(
                PathBuf::from(home)
                    .join(".config")
                    .join("floe")
                    .join("floe.toml"),
            );
        }
        match candidates.into_iter().find(|p| p.is_file()) {
            Some(p) => Self::read(&p),
            None => Ok(Self::default()),
        }
    }

    /// Reads and parses one config file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::InputFile {
            path: path.to_path_buf(),
            reason: format!("cannot read the config file: {e}"),
        })?;
        let mut parsed = Self::parse(&text).map_err(|reason| Error::InputFile {
            path: path.to_path_buf(),
            reason,
        })?;
        parsed.path = Some(path.to_path_buf());
        Ok(parsed)
    }

    /// Parses the TOML text (errors name the offending key, never a value).
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| format!("invalid TOML: {}", e.message()))?;
        let mut out = Self::default();
        for (key, value) in doc {
            match (key.as_str(), value) {
                ("default-catalog", toml::Value::String(s)) => out.default_catalog = Some(s),
                ("catalog", toml::Value::Table(catalogs)) => {
                    for (name, props) in catalogs {
                        let toml::Value::Table(props) = props else {
                            return Err(format!("[catalog.{name}] must be a table of key = value"));
                        };
                        let mut flat = BTreeMap::new();
                        flatten(&mut flat, "", props, &name)?;
                        out.catalogs.insert(name, flat);
                    }
                }
                ("kafka", toml::Value::Table(props)) => {
                    flatten(&mut out.kafka, "", props, "kafka")?;
                }
                (other, _) => {
                    return Err(format!(
                    "unknown top-level key '{other}' (expected default-catalog, [catalog.NAME] or [kafka])"
                ))
                }
            }
        }
        Ok(out)
    }
}

/// Top-level catalog keys whose TOML value must be a string.
const STRING_KEYS: &[&str] = &[
    "type",
    "uri",
    "warehouse",
    "catalog-name",
    "credential",
    "token",
];

/// Flattens nested tables (`[catalog.x.s3] endpoint = ...` is `s3.endpoint`) into strings.
fn flatten(
    out: &mut BTreeMap<String, String>,
    prefix: &str,
    table: toml::Table,
    name: &str,
) -> std::result::Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        let s = match v {
            toml::Value::String(s) => s,
            // Names, addresses and secrets are text: `uri = 5` is a mistake, not "5".
            _ if prefix.is_empty() && STRING_KEYS.contains(&key.as_str()) => {
                let at = if name == "kafka" {
                    "kafka".to_string()
                } else {
                    format!("catalog.{name}")
                };
                return Err(format!("{at}.{key}: expected a string"));
            }
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Table(t) => {
                flatten(out, &key, t, name)?;
                continue;
            }
            _ => {
                let at = if name == "kafka" {
                    "kafka".to_string()
                } else {
                    format!("catalog.{name}")
                };
                return Err(format!("{at}.{key}: expected a string, number or boolean"));
            }
        };
        out.insert(key, s);
    }
    Ok(())
}

/// Catalog properties from environment variables `FLOE_CATALOG__<NAME>__<KEY>`.
pub fn env_catalogs(
    vars: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (k, v) in vars {
        let Some(rest) = k.strip_prefix("FLOE_CATALOG__") else {
            continue;
        };
        let Some((name, key)) = rest.split_once("__") else {
            continue;
        };
        if name.is_empty() || key.is_empty() {
            continue;
        }
        let key = key
            .to_ascii_lowercase()
            .replace("__", ".")
            .replace('_', "-");
        out.entry(name.to_ascii_lowercase())
            .or_default()
            .insert(key, v);
    }
    out
}

/// What the command line asked for.
#[derive(Debug, Default, Clone)]
pub struct CatalogSelection {
    /// `--catalog NAME` (a URI here is taken as the SQL catalog URI, as in floe 0.1).
    pub name: Option<String>,
    /// `--catalog-uri`: the embedded default's SQL URI.
    pub uri: Option<String>,
    /// `--warehouse`.
    pub warehouse: Option<PathBuf>,
    /// `--catalog-name`: the JDBC `catalog_name` of a SQL catalog.
    pub catalog_name: Option<String>,
    /// `--catalog-prop k=v`, applied last.
    pub overrides: Vec<(String, String)>,
}

/// Resolves the catalog to use from the selection, the config file and the environment. The
/// secrets of the result (and of the properties it was built from, even when they turn out
/// invalid) are registered with [`mask`].
pub fn resolve(
    sel: &CatalogSelection,
    file: &ConfigFile,
    env: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<CatalogConfig> {
    register_config_secrets(
        sel.overrides
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(sel.uri.iter().map(|u| ("uri", u.as_str())))
            .chain(sel.name.iter().map(|n| ("uri", n.as_str()))),
    );
    let config = resolve_unregistered(sel, file, env)?;
    config.register_secrets();
    Ok(config)
}

fn resolve_unregistered(
    sel: &CatalogSelection,
    file: &ConfigFile,
    env: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<CatalogConfig> {
    let name = sel
        .name
        .clone()
        .or_else(|| file.default_catalog.clone())
        .filter(|n| !n.is_empty());
    let mut config = match name {
        Some(uri) if uri.contains("://") || uri.starts_with("sqlite:") => {
            let mut c = CatalogConfig::embedded(sel.warehouse.as_deref())?;
            c.uri = uri;
            c
        }
        Some(name) => {
            let lower = name.to_ascii_lowercase();
            let from_file = file.catalogs.get(&name);
            let from_env = env.get(&lower);
            if from_file.is_none() && from_env.is_none() {
                let mut known: Vec<&str> = file
                    .catalogs
                    .keys()
                    .map(String::as_str)
                    .chain(env.keys().map(String::as_str))
                    .collect();
                known.sort_unstable();
                known.dedup();
                let source = match &file.path {
                    Some(p) => format!("{}", p.display()),
                    None => {
                        "no config file found (--config, ./floe.toml, ~/.config/floe/floe.toml)"
                            .to_string()
                    }
                };
                return Err(Error::invalid_option(
                    "catalog",
                    &name,
                    format!(
                        "no such catalog in {source} or FLOE_CATALOG__{}__*; known: {}",
                        name.to_ascii_uppercase(),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
            let mut props = from_file.cloned().unwrap_or_default();
            props.extend(from_env.cloned().unwrap_or_default());
            props.extend(sel.overrides.iter().cloned());
            if !props.contains_key("warehouse") {
                if let Some(w) = &sel.warehouse {
                    props.insert(
                        "warehouse".into(),
                        super::absolute(w)?.display().to_string(),
                    );
                }
            }
            let mut c = CatalogConfig::from_props(&name, props)?;
            if let Some(n) = &sel.catalog_name {
                c.name = n.clone();
            }
            return Ok(c);
        }
        None => {
            let mut c = CatalogConfig::embedded(sel.warehouse.as_deref())?;
            if let Some(uri) = &sel.uri {
                c.uri = uri.clone();
            }
            c
        }
    };
    if let Some(n) = &sel.catalog_name {
        config.name = n.clone();
    }
    for (k, v) in &sel.overrides {
        match k.as_str() {
            "uri" => config.uri = v.clone(),
            "warehouse" => config.warehouse = v.clone(),
            "type" if v != "sql" => {
                return Err(Error::invalid_option(
                    "catalog-prop",
                    format!("type={v}"),
                    "the embedded catalog is SQL; name a configured catalog with --catalog",
                ))
            }
            _ => {
                check_key(&config.name, k)?;
                config.props.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests;
