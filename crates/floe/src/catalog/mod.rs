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
//! needs (local disk or S3) in `storage.rs`.
//!
//! Invariant: [`Catalog::commit`] is the only place a table pointer moves. It checks the commit's
//! requirements against the *current* metadata, writes a new `metadata.json` and swaps the pointer
//! with compare-and-swap; a lost race is [`Error::CommitConflict`] (retryable) and leaves no file
//! behind.

pub mod config;
mod rest;
mod sql;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use futures::StreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, Schema, SortOrder, TableMetadata, TableMetadataBuilder, UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::Catalog as _;
use iceberg::{
    MetadataLocation, NamespaceIdent, TableCreation, TableIdent, TableRequirement, TableUpdate,
};

use crate::error::{Error, Result};
use crate::properties;
use crate::storage::fence::Fence;
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

    /// The location of every table in the catalog (for a SQL catalog: of every catalog name in
    /// its database), for the delete fence ([`crate::storage::fence`]). A SQL catalog derives it
    /// from the metadata pointer (`<location>/metadata/<file>`, no read), reading the
    /// metadata file only when the pointer is elsewhere; a REST catalog loads each table, and a
    /// table that cannot be loaded is skipped with a warning.
    pub async fn table_roots(&self) -> Result<Vec<(TableIdent, String)>> {
        match &self.backend {
            Backend::Sql { inner, file_io, .. } => {
                let mut out = Vec::new();
                for (catalog, ns, name, metadata) in inner.all_tables().await? {
                    let Ok(ns_ident) = NamespaceIdent::from_strs(ns.split('.')) else {
                        continue;
                    };
                    // Another catalog name's table gets a name that cannot equal one of ours.
                    let ident = if catalog == inner.name() {
                        TableIdent::new(ns_ident, name)
                    } else {
                        TableIdent::new(ns_ident, format!("{name} (catalog {catalog})"))
                    };
                    let root = match metadata.rsplit_once('/') {
                        Some((dir, _)) if dir.ends_with("/metadata") => {
                            dir.trim_end_matches("/metadata").to_string()
                        }
                        _ => match read_metadata(file_io, &metadata).await {
                            Ok(md) => md.location().to_string(),
                            Err(e) => {
                                tracing::warn!(table = %ident_string(&ident), error = %e, "cannot read a table's metadata; its pointer's directory stands for its location");
                                metadata
                                    .rsplit_once('/')
                                    .map(|(d, _)| d.to_string())
                                    .unwrap_or(metadata)
                            }
                        },
                    };
                    out.push((ident, root));
                }
                Ok(out)
            }
            Backend::Rest(_) => {
                let idents = self.list_tables(None).await?;
                let loads = futures::stream::iter(idents.into_iter().map(|ident| async move {
                    let t = self.load_table(&ident).await;
                    (ident, t)
                }))
                .buffer_unordered(8);
                let loaded: Vec<_> = loads.collect().await;
                Ok(loaded
                    .into_iter()
                    .filter_map(|(ident, t)| match t {
                        Ok(t) => Some((ident, t.metadata().location().to_string())),
                        Err(e) => {
                            tracing::warn!(table = %ident_string(&ident), error = %e, "cannot load a table to learn its location");
                            None
                        }
                    })
                    .collect())
            }
        }
    }

    /// The catalog's own files, which no delete may touch.
    pub fn protected_files(&self) -> Vec<String> {
        match &self.backend {
            Backend::Sql { database_files, .. } => database_files.clone(),
            Backend::Rest(_) => vec![],
        }
    }

    /// The warehouse root of a SQL catalog.
    pub fn warehouse(&self) -> Option<&str> {
        match &self.backend {
            Backend::Sql { warehouse, .. } => Some(warehouse),
            Backend::Rest(_) => None,
        }
    }

    /// Default location of a new table in a SQL catalog: `{warehouse}/{ns}/{table}` (the
    /// layout of PyIceberg's SqlCatalog and Java's JdbcCatalog). REST servers choose their own.
    pub fn default_location(&self, ident: &TableIdent) -> Option<String> {
        match &self.backend {
            Backend::Sql { warehouse, .. } => {
                let root = if warehouse.contains("://") {
                    warehouse.clone()
                } else {
                    format!("file://{warehouse}")
                };
                Some(format!(
                    "{root}/{}/{}",
                    ns_string(ident.namespace()),
                    ident.name()
                ))
            }
            Backend::Rest(_) => None,
        }
    }

    /// Creates a v2 table and returns it loaded. Names that would escape or nest in the
    /// warehouse are refused ([`validate_name`]).
    pub async fn create_table(&self, new: NewTable) -> Result<Table> {
        validate_namespace(new.ident.namespace())?;
        validate_name("table name", new.ident.name(), true)?;
        let ns = ns_string(new.ident.namespace());
        let name = ident_string(&new.ident);
        let mut creation = TableCreation::builder()
            .name(new.ident.name().to_string())
            .schema(new.schema)
            .partition_spec(new.partition_spec)
            .properties(new.properties)
            .format_version(FormatVersion::V2)
            .build();
        creation.sort_order = new.sort_order;
        let (inner, file_io) = match &self.backend {
            Backend::Rest(r) => {
                // Some servers answer a create of an existing table with that table (200).
                if r.client()
                    .table_exists(&new.ident)
                    .await
                    .map_err(|e| r.map_err(e))?
                {
                    return Err(Error::TableExists { table: name });
                }
                return match r
                    .client()
                    .create_table(new.ident.namespace(), creation)
                    .await
                {
                    Ok(t) => Ok(t),
                    Err(e) if e.kind() == iceberg::ErrorKind::TableAlreadyExists => {
                        Err(Error::TableExists { table: name })
                    }
                    Err(e) if e.kind() == iceberg::ErrorKind::NamespaceNotFound => {
                        Err(Error::NamespaceNotFound { namespace: ns })
                    }
                    Err(e) => Err(r.map_err(e)),
                };
            }
            Backend::Sql { inner, file_io, .. } => (inner, file_io),
        };
        if !inner.namespace_exists(&ns).await? {
            return Err(Error::NamespaceNotFound { namespace: ns });
        }
        if inner
            .metadata_location(&ns, new.ident.name())
            .await?
            .is_some()
        {
            return Err(Error::TableExists { table: name });
        }
        let location = self
            .default_location(&new.ident)
            .expect("SQL catalogs place tables under their warehouse");
        creation.location = Some(location.clone());
        let metadata = TableMetadataBuilder::from_table_creation(creation)?
            .build()?
            .metadata;
        let metadata_location = MetadataLocation::new_with_metadata(&location, &metadata);
        let loc = metadata_location.to_string();
        if let Err(e) = metadata.write_to(file_io, &metadata_location).await {
            // A partial file (a full disk) must not stay behind under a version number.
            let _ = file_io.delete(&loc).await;
            return Err(crate::storage::storage_error_on(
                file_io,
                &loc,
                rest::describe(&e),
                e,
            ));
        }
        if let Err(e) = inner.insert_table(&ns, new.ident.name(), &loc).await {
            let _ = file_io.delete(&loc).await;
            return Err(match e {
                Error::TableExists { .. } => Error::TableExists { table: name },
                other => other,
            });
        }
        table_from(file_io, new.ident, metadata, loc)
    }

    /// Loads a table's current metadata.
    pub async fn load_table(&self, ident: &TableIdent) -> Result<Table> {
        let (inner, file_io) = match &self.backend {
            Backend::Rest(r) => {
                return match r.client().load_table(ident).await {
                    Ok(t) => Ok(t),
                    Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => {
                        Err(Error::TableNotFound {
                            table: ident_string(ident),
                        })
                    }
                    Err(e) => Err(r.map_err(e)),
                };
            }
            Backend::Sql { inner, file_io, .. } => (inner, file_io),
        };
        let ns = ns_string(ident.namespace());
        let Some(location) = inner.metadata_location(&ns, ident.name()).await? else {
            if !inner.namespace_exists(&ns).await? {
                return Err(Error::NamespaceNotFound { namespace: ns });
            }
            return Err(Error::TableNotFound {
                table: ident_string(ident),
            });
        };
        let metadata = read_metadata(file_io, &location).await?;
        table_from(file_io, ident.clone(), metadata, location)
    }

    /// Removes `table`'s entry from the catalog (SQL: only if its pointer is still the one
    /// loaded). With `server_purge`, a REST catalog is asked to delete the files too
    /// (`purgeRequested=true`); a SQL catalog never deletes files here: that is
    /// [`crate::clean::purge::DropBuilder`]'s job, under the table's delete fence.
    pub async fn drop_entry(&self, table: &Table, server_purge: bool) -> Result<()> {
        let ident = table.identifier();
        match &self.backend {
            Backend::Sql { inner, .. } => {
                let ns = ns_string(ident.namespace());
                inner
                    .delete_table(&ns, ident.name(), table.metadata_location_result()?)
                    .await
            }
            // REST: the server owns the purge (`purgeRequested=true`, REST spec dropTable);
            // deleting files from here too would race the server's own cleanup.
            Backend::Rest(r) => {
                let dropped = if server_purge {
                    r.client().purge_table(ident).await
                } else {
                    r.client().drop_table(ident).await
                };
                dropped.map_err(|e| r.map_err(e))
            }
        }
    }

    /// Commits `updates` on top of `base` if `requirements` hold.
    ///
    /// SQL catalogs: checks the requirements against `base`, writes
    /// `metadata/NNNNN-<uuid>.metadata.json` (next version after `base`), then swaps the
    /// pointer with `UPDATE ... WHERE metadata_location = <base's>`: if another commit moved
    /// the pointer since `base` was loaded, nothing changes and [`Error::CommitConflict`] is
    /// returned (the caller reloads and retries); the metadata file written is deleted. When
    /// the swap statement itself fails, the pointer is re-read: if it shows our file, the
    /// commit did happen and is reported as a success; if it cannot be re-read the outcome is
    /// [`Error::CommitStateUnknown`], so files of a landed commit are never deleted. Honours
    /// `write.metadata.delete-after-commit.enabled` / `write.metadata.previous-versions-max`.
    ///
    /// REST catalogs: posts the requirements and updates; see `rest.rs` for the outcome rules.
    pub(crate) async fn commit(
        &self,
        base: &Table,
        requirements: &[TableRequirement],
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        match &self.backend {
            Backend::Sql { inner, .. } => commit_sql(inner, base, requirements, updates).await,
            Backend::Rest(r) => {
                let (metadata, location) = r.commit(base, requirements, updates).await?;
                table_from(
                    base.file_io(),
                    base.identifier().clone(),
                    metadata,
                    location,
                )
            }
        }
    }
}

/// The SQL catalog's commit: local requirement check, new metadata file, pointer CAS.
async fn commit_sql(
    inner: &SqlCatalog,
    base: &Table,
    requirements: &[TableRequirement],
    updates: Vec<TableUpdate>,
) -> Result<Table> {
    let ident = base.identifier();
    let ns = ns_string(ident.namespace());
    let name = ident_string(ident);
    let file_io = base.file_io();
    let current_location = base.metadata_location_result()?.to_string();
    for req in requirements {
        if let Err(e) = req.check(Some(base.metadata())) {
            return Err(Error::CommitConflict {
                table: name,
                attempts: 1,
                reason: e.message().to_string(),
            });
        }
    }
    let mut builder = TableMetadataBuilder::new_from_metadata(
        base.metadata().clone(),
        Some(current_location.clone()),
    );
    for update in updates {
        builder = update.apply(builder)?;
    }
    let built = builder.build()?;
    let new_location = MetadataLocation::from_str(&current_location)
        .map(|l| l.with_next_version())
        .unwrap_or_else(|_| {
            MetadataLocation::new_with_metadata(built.metadata.location(), &built.metadata)
        })
        .with_new_metadata(&built.metadata);
    let new_loc = new_location.to_string();
    if let Err(e) = built.metadata.write_to(file_io, &new_location).await {
        // A partial file (a full disk) would take the version number of the next commit.
        let _ = file_io.delete(&new_loc).await;
        return Err(crate::storage::storage_error_on(
            file_io,
            &new_loc,
            rest::describe(&e),
            e,
        ));
    }
    let swapped = match inner
        .swap(&ns, ident.name(), &current_location, &new_loc)
        .await
    {
        Ok(swapped) => swapped,
        Err(e) => {
            // Unknown outcome: trust only the pointer itself.
            match inner.metadata_location(&ns, ident.name()).await {
                Ok(Some(now)) if now == new_loc => true,
                Ok(_) => {
                    let _ = file_io.delete(&new_loc).await;
                    return Err(e);
                }
                Err(_) => {
                    return Err(Error::CommitStateUnknown {
                        table: name,
                        reason: e.to_string(),
                    })
                }
            }
        }
    };
    if !swapped {
        let _ = file_io.delete(&new_loc).await;
        return Err(Error::CommitConflict {
            table: name,
            attempts: 1,
            reason: "the table pointer moved during the commit".into(),
        });
    }
    // The pointer has moved: the commit landed. A bad stored value must not turn it into an
    // error now (callers would delete the files of a landed commit): keep the old metadata
    // files and say why.
    let delete_old = properties::bool_prop(
        built.metadata.properties(),
        properties::METADATA_DELETE_AFTER_COMMIT,
        false,
    )
    .unwrap_or_else(|e| {
        tracing::warn!("{}; old metadata files were kept", e.for_table(&name));
        false
    });
    if delete_old {
        // The metadata log is table input: only entries inside the table location go.
        let fence = Fence::at(built.metadata.location());
        for old in &built.expired_metadata_logs {
            if !fence.verdict(&old.metadata_file).deletable() {
                tracing::warn!(file = %old.metadata_file, "old metadata file outside the table location kept");
            } else if let Err(e) = file_io.delete(&old.metadata_file).await {
                tracing::warn!(file = %old.metadata_file, error = %e, "could not delete old metadata file");
            }
        }
    }
    table_from(file_io, ident.clone(), built.metadata, new_loc)
}

fn table_from(
    file_io: &FileIO,
    ident: TableIdent,
    metadata: TableMetadata,
    location: String,
) -> Result<Table> {
    Ok(Table::builder()
        .identifier(ident)
        .metadata(metadata)
        .metadata_location(location)
        .file_io(file_io.clone())
        .runtime(iceberg::Runtime::current())
        .build()?)
}

fn ns_string(ns: &NamespaceIdent) -> String {
    ns.clone().inner().join(".")
}

impl Fence {
    /// The fence of `table` inside `catalog`: its location minus every other table's location
    /// and the catalog's own files.
    pub async fn for_table(catalog: &Catalog, table: &Table) -> Result<Fence> {
        let me = table.identifier();
        let others = catalog
            .table_roots()
            .await?
            .into_iter()
            .filter(|(ident, _)| ident != me)
            .map(|(ident, loc)| (ident_string(&ident), loc))
            .collect();
        Ok(Self::new(
            ident_string(me),
            table.metadata().location(),
            others,
            catalog.protected_files(),
        ))
    }
}
