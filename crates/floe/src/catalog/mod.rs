//! Catalogs: where a table's current metadata pointer lives.
//!
//! floe talks to an Iceberg catalog to list namespaces and tables, load a table (metadata pointer
//! -> `metadata.json` -> [`iceberg::table::Table`]) and swap the pointer atomically on commit.
//! The SQL catalog (SQLite, PostgreSQL) uses the Iceberg JDBC catalog schema, so a catalog that
//! PyIceberg's `SqlCatalog` or Java's `JdbcCatalog` created works here and vice versa.
//!
//! A REST catalog (`rest.rs`) does the same through the Iceberg REST protocol; the server checks
//! the requirements and swaps the pointer, floe only posts requirements + updates.
//! Configuration (named catalogs, env, overrides) is in `config.rs`; the FileIO a location
//! needs (local disk or S3) comes from [`crate::storage`].
//!
//! Invariant: `Catalog::commit` (crate-private) is the only place a table pointer moves. It checks the commit's
//! requirements against the *current* metadata, writes a new `metadata.json` and swaps the pointer
//! with compare-and-swap; a lost race is [`Error::CommitConflict`] (retryable) and leaves no file
//! behind.
//!
//! Here: the [`Catalog`] type, its connection, and the namespace and table listings. Creating,
//! loading and dropping a table is in `tables.rs`; the commit (requirement check, new metadata
//! file, pointer compare-and-swap) in `cas.rs`, with the heads of tables appended to in
//! `heads.rs` (an append's commit splices its snapshot onto the unparsed history,
//! [`crate::table::metadata_json`]); where tables live (warehouse, default and
//! existing table locations, the catalog's own files) and the delete fence built from them in
//! `locations.rs`.

mod cas;
pub mod config;
mod heads;
mod locations;
mod rest;
pub(crate) mod sql;
pub mod tables;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{Schema, SortOrder, UnboundPartitionSpec};
use iceberg::table::Table;
use iceberg::Catalog as _;
use iceberg::{NamespaceIdent, TableIdent};

use crate::base::error::{Error, Result};
use crate::table::ident::validate_namespace;
pub use crate::table::{
    default_spec, ident_string, parse_namespace, parse_table_ident, read_metadata, refs,
    validate_name,
};
pub use config::{CatalogConfig, CatalogKind, DEFAULT_CATALOG_NAME};
use rest::RestBackend;
pub use sql::SqlCatalog;

/// Makes a path absolute without requiring it to exist.
pub(crate) fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// A connected catalog.
#[derive(Clone)]
pub struct Catalog {
    backend: Backend,
    name: String,
    /// Heads of tables loaded for appends or committed since, and whole tables loaded or
    /// committed, by metadata file (`heads.rs`), shared by clones.
    heads: Arc<heads::Kept<heads::Head>>,
    wholes: Arc<heads::Kept<iceberg::spec::TableMetadata>>,
}

#[derive(Clone)]
enum Backend {
    /// JDBC-schema SQL catalog: floe writes metadata.json and swaps the pointer itself.
    Sql {
        inner: Arc<SqlCatalog>,
        /// The FileIO of the warehouse (local disk or S3).
        file_io: FileIO,
        /// Root of new tables: a local path or an `s3://` URI, without trailing slash.
        warehouse: String,
        /// The catalog's own files (a SQLite database and its journals): never deleted.
        database_files: Vec<String>,
    },
    /// Iceberg REST catalog.
    Rest(Arc<RestBackend>),
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Catalog");
        d.field("name", &self.name);
        match &self.backend {
            Backend::Sql { warehouse, .. } => d.field("warehouse", warehouse),
            Backend::Rest(r) => d.field("rest", &r.label()),
        };
        d.finish()
    }
}

/// A table to create.
#[derive(Debug, Clone)]
pub struct NewTable {
    pub ident: TableIdent,
    pub schema: Schema,
    pub partition_spec: UnboundPartitionSpec,
    pub sort_order: Option<SortOrder>,
    pub properties: HashMap<String, String>,
}

impl Catalog {
    /// Connects to the catalog. A SQL catalog gets the JDBC-schema tables (and a local
    /// warehouse directory) created when missing; a REST catalog is asked for its config, so a
    /// wrong URI or credential fails here.
    pub async fn connect(config: &CatalogConfig) -> Result<Self> {
        let backend = match config.kind {
            CatalogKind::Rest => Backend::Rest(Arc::new(RestBackend::connect(config).await?)),
            CatalogKind::Sql => {
                let warehouse = config.warehouse.trim_end_matches('/').to_string();
                if let Some(dir) = crate::storage::listing::local_dir(&warehouse) {
                    std::fs::create_dir_all(&dir).map_err(|e| Error::InputFile {
                        path: dir.clone(),
                        reason: format!("cannot create warehouse directory: {e}"),
                    })?;
                }
                let inner = SqlCatalog::connect(&config.name, &config.uri).await?;
                Backend::Sql {
                    inner: Arc::new(inner),
                    file_io: crate::storage::file_io_for(&warehouse, config.storage_props()),
                    warehouse,
                    database_files: SqlCatalog::database_files(&config.uri),
                }
            }
        };
        Ok(Self {
            backend,
            name: config.name.clone(),
            heads: Arc::default(),
            wholes: Arc::default(),
        })
    }

    /// The catalog name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kind of catalog.
    pub fn kind(&self) -> CatalogKind {
        match self.backend {
            Backend::Sql { .. } => CatalogKind::Sql,
            Backend::Rest(_) => CatalogKind::Rest,
        }
    }

    /// Closes the catalog's connections (a SQL catalog's pool; a REST catalog holds none open),
    /// waiting at most `timeout` for connections in use. Every clone shares the pool, so call
    /// it once the work is done, before the runtime shuts down: a pool dropped with the runtime
    /// can leave a task the shutdown waits on.
    pub async fn close(&self, timeout: std::time::Duration) {
        if let Backend::Sql { inner, .. } = &self.backend {
            if tokio::time::timeout(timeout, inner.close()).await.is_err() {
                tracing::debug!("catalog connections still in use after {timeout:?}");
            }
        }
    }

    /// Creates a namespace. Names that would escape or nest in the warehouse are refused
    /// ([`validate_name`]).
    pub async fn create_namespace(&self, ns: &NamespaceIdent) -> Result<()> {
        validate_namespace(ns)?;
        match &self.backend {
            Backend::Sql { inner, .. } => inner.create_namespace(&ns_string(ns)).await,
            Backend::Rest(r) => match r.client().create_namespace(ns, HashMap::new()).await {
                Ok(_) => Ok(()),
                Err(e) if e.kind() == iceberg::ErrorKind::NamespaceAlreadyExists => {
                    Err(Error::NamespaceExists {
                        namespace: ns_string(ns),
                    })
                }
                Err(e) => Err(r.map_err(e)),
            },
        }
    }

    /// Lists namespaces.
    pub async fn list_namespaces(&self) -> Result<Vec<String>> {
        match &self.backend {
            Backend::Sql { inner, .. } => inner.list_namespaces().await,
            Backend::Rest(r) => {
                let mut out: Vec<String> = r
                    .client()
                    .list_namespaces(None)
                    .await
                    .map_err(|e| r.map_err(e))?
                    .iter()
                    .map(ns_string)
                    .collect();
                out.sort();
                Ok(out)
            }
        }
    }

    /// True when the namespace exists.
    pub async fn namespace_exists(&self, ns: &NamespaceIdent) -> Result<bool> {
        match &self.backend {
            Backend::Sql { inner, .. } => inner.namespace_exists(&ns_string(ns)).await,
            Backend::Rest(r) => r
                .client()
                .namespace_exists(ns)
                .await
                .map_err(|e| r.map_err(e)),
        }
    }

    /// Lists the tables of one namespace, or of all when `None`, as `ns.table`.
    pub async fn list_tables(&self, ns: Option<&NamespaceIdent>) -> Result<Vec<TableIdent>> {
        match &self.backend {
            Backend::Sql { inner, .. } => {
                let rows = inner.list_tables(ns.map(ns_string).as_deref()).await?;
                rows.into_iter()
                    .map(|(ns, t)| Ok(TableIdent::new(parse_namespace(&ns)?, t)))
                    .collect()
            }
            Backend::Rest(r) => {
                let namespaces = match ns {
                    Some(ns) => vec![ns.clone()],
                    None => r
                        .client()
                        .list_namespaces(None)
                        .await
                        .map_err(|e| r.map_err(e))?,
                };
                let mut out = Vec::new();
                for ns in namespaces {
                    match r.client().list_tables(&ns).await {
                        Ok(t) => out.extend(t),
                        Err(e) if e.kind() == iceberg::ErrorKind::NamespaceNotFound => {
                            return Err(Error::NamespaceNotFound {
                                namespace: ns_string(&ns),
                            })
                        }
                        Err(e) => return Err(r.map_err(e)),
                    }
                }
                out.sort_by_key(ident_string);
                Ok(out)
            }
        }
    }
}

/// A loaded table. Its manifest cache is off: the iceberg crate (0.10) weighs a cached manifest
/// by the size of its struct, not of its entries, so its 32 MB bound never evicts and a scan of
/// a 200,000-file table kept every manifest entry (metrics included) for the table's life,
/// about 1.5 KB per data file. floe reads manifests once per operation and streams them.
pub(crate) fn table_from(
    file_io: &FileIO,
    ident: TableIdent,
    metadata: impl Into<iceberg::spec::TableMetadataRef>,
    location: String,
) -> Result<Table> {
    Ok(Table::builder()
        .identifier(ident)
        .metadata(metadata)
        .metadata_location(location)
        .file_io(file_io.clone())
        .runtime(iceberg::Runtime::current())
        .disable_cache()
        .build()?)
}

fn ns_string(ns: &NamespaceIdent) -> String {
    ns.clone().inner().join(".")
}
