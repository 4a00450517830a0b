//! Catalogs: where a table's current metadata pointer lives.
//!
//! floe talks to an Iceberg catalog to list namespaces and tables, load a table (metadata pointer
//! -> `metadata.json` -> [`iceberg::table::Table`]) and swap the pointer atomically on commit.
//! The SQL catalog (SQLite, PostgreSQL) uses the Iceberg JDBC catalog schema, so a catalog that
//! PyIceberg's `SqlCatalog` or Java's `JdbcCatalog` created works here and vice versa.
//!
//! Invariant: [`Catalog::commit`] is the only place a table pointer moves. It checks the commit's
//! requirements against the *current* metadata, writes a new `metadata.json` and swaps the pointer
//! with compare-and-swap; a lost race is [`Error::CommitConflict`] (retryable) and leaves no file
//! behind.

mod sql;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, PartitionSpec, Schema, SortOrder, TableMetadata, TableMetadataBuilder,
    UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::{
    MetadataLocation, NamespaceIdent, TableCreation, TableIdent, TableRequirement, TableUpdate,
};

use crate::error::{Error, Result};
use crate::properties;
pub use sql::SqlCatalog;

/// The default catalog name, shared with PyIceberg configs that point at floe's catalog.
pub const DEFAULT_CATALOG_NAME: &str = "floe";

/// How to reach a catalog.
#[derive(Debug, Clone)]
pub struct CatalogConfig {
    /// Catalog name (the `catalog_name` column of the JDBC schema).
    pub name: String,
    /// `sqlite:///abs/path.db`, `sqlite:rel.db` or `postgres://user@host:port/db`.
    pub uri: String,
    /// Root under which new tables get their location (`{warehouse}/{ns}/{table}`).
    pub warehouse: PathBuf,
}

impl CatalogConfig {
    /// The embedded default: `./warehouse/` with a SQLite catalog at `./warehouse/catalog.db`,
    /// or the same layout under `warehouse` when given.
    pub fn embedded(warehouse: Option<&Path>) -> Result<Self> {
        let warehouse = absolute(warehouse.unwrap_or(Path::new("warehouse")))?;
        let uri = format!("sqlite://{}", warehouse.join("catalog.db").display());
        Ok(Self {
            name: DEFAULT_CATALOG_NAME.to_string(),
            uri,
            warehouse,
        })
    }
}

/// Makes a path absolute without requiring it to exist.
pub(crate) fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// A connected catalog plus the FileIO its tables live on.
#[derive(Clone)]
pub struct Catalog {
    inner: Arc<SqlCatalog>,
    file_io: FileIO,
    warehouse: PathBuf,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("name", &self.inner.name())
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

/// Parses `ns.table` (the last dot separates the table name; namespaces may be nested).
pub fn parse_table_ident(s: &str) -> Result<TableIdent> {
    let (ns, name) = s
        .rsplit_once('.')
        .ok_or_else(|| Error::invalid_option("table", s, "expected NAMESPACE.TABLE"))?;
    if ns.is_empty() || name.is_empty() {
        return Err(Error::invalid_option(
            "table",
            s,
            "expected NAMESPACE.TABLE",
        ));
    }
    Ok(TableIdent::new(parse_namespace(ns)?, name.to_string()))
}

/// Parses `a` or `a.b` into a namespace.
pub fn parse_namespace(s: &str) -> Result<NamespaceIdent> {
    if s.is_empty() || s.split('.').any(str::is_empty) {
        return Err(Error::invalid_option(
            "namespace",
            s,
            "empty namespace level",
        ));
    }
    NamespaceIdent::from_strs(s.split('.'))
        .map_err(|e| Error::invalid_option("namespace", s, e.to_string()))
}

/// `ns.table` as users write it.
pub fn ident_string(ident: &TableIdent) -> String {
    format!(
        "{}.{}",
        ident.namespace().clone().inner().join("."),
        ident.name()
    )
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
    /// Connects to the catalog, creating the JDBC-schema tables (and the warehouse directory) when
    /// missing.
    pub async fn connect(config: &CatalogConfig) -> Result<Self> {
        std::fs::create_dir_all(&config.warehouse).map_err(|e| Error::InputFile {
            path: config.warehouse.clone(),
            reason: format!("cannot create warehouse directory: {e}"),
        })?;
        let inner = SqlCatalog::connect(&config.name, &config.uri).await?;
        Ok(Self {
            inner: Arc::new(inner),
            file_io: FileIO::new_with_fs(),
            warehouse: config.warehouse.clone(),
        })
    }

    /// The catalog name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The FileIO tables of this catalog are read and written with.
    pub fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    /// Creates a namespace.
    pub async fn create_namespace(&self, ns: &NamespaceIdent) -> Result<()> {
        self.inner.create_namespace(&ns_string(ns)).await
    }

    /// Lists namespaces (from tables and namespace properties).
    pub async fn list_namespaces(&self) -> Result<Vec<String>> {
        self.inner.list_namespaces().await
    }

    /// True when the namespace exists.
    pub async fn namespace_exists(&self, ns: &NamespaceIdent) -> Result<bool> {
        self.inner.namespace_exists(&ns_string(ns)).await
    }

    /// Lists the tables of one namespace, or of all when `None`, as `ns.table`.
    pub async fn list_tables(&self, ns: Option<&NamespaceIdent>) -> Result<Vec<TableIdent>> {
        let rows = self.inner.list_tables(ns.map(ns_string).as_deref()).await?;
        rows.into_iter()
            .map(|(ns, t)| Ok(TableIdent::new(parse_namespace(&ns)?, t)))
            .collect()
    }

    /// Default location of a new table: `{warehouse}/{ns}/{table}` (the layout of PyIceberg's SqlCatalog and Java's JdbcCatalog).
    pub fn default_location(&self, ident: &TableIdent) -> String {
        format!(
            "file://{}/{}/{}",
            self.warehouse.display(),
            ns_string(ident.namespace()),
            ident.name()
        )
    }

    /// Creates a v2 table and returns it loaded.
    pub async fn create_table(&self, new: NewTable) -> Result<Table> {
        let ns = ns_string(new.ident.namespace());
        if !self.inner.namespace_exists(&ns).await? {
            return Err(Error::NamespaceNotFound { namespace: ns });
        }
        let name = ident_string(&new.ident);
        if self
            .inner
            .metadata_location(&ns, new.ident.name())
            .await?
            .is_some()
        {
            return Err(Error::TableExists { table: name });
        }
        let location = self.default_location(&new.ident);
        let mut creation = TableCreation::builder()
            .name(new.ident.name().to_string())
            .location(location.clone())
            .schema(new.schema)
            .partition_spec(new.partition_spec)
            .properties(new.properties)
            .format_version(FormatVersion::V2)
            .build();
        creation.sort_order = new.sort_order;
        let metadata = TableMetadataBuilder::from_table_creation(creation)?
            .build()?
            .metadata;
        let metadata_location = MetadataLocation::new_with_metadata(&location, &metadata);
        metadata.write_to(&self.file_io, &metadata_location).await?;
        let loc = metadata_location.to_string();
        if let Err(e) = self.inner.insert_table(&ns, new.ident.name(), &loc).await {
            let _ = self.file_io.delete(&loc).await;
            return Err(match e {
                Error::TableExists { .. } => Error::TableExists { table: name },
                other => other,
            });
        }
        self.table_from(new.ident, metadata, loc)
    }

    /// Loads a table's current metadata.
    pub async fn load_table(&self, ident: &TableIdent) -> Result<Table> {
        let ns = ns_string(ident.namespace());
        let Some(location) = self.inner.metadata_location(&ns, ident.name()).await? else {
            if !self.inner.namespace_exists(&ns).await? {
                return Err(Error::NamespaceNotFound { namespace: ns });
            }
            return Err(Error::TableNotFound {
                table: ident_string(ident),
            });
        };
        let metadata = read_metadata(&self.file_io, &location).await?;
        self.table_from(ident.clone(), metadata, location)
    }

    fn table_from(
        &self,
        ident: TableIdent,
        metadata: TableMetadata,
        location: String,
    ) -> Result<Table> {
        Ok(Table::builder()
            .identifier(ident)
            .metadata(metadata)
            .metadata_location(location)
            .file_io(self.file_io.clone())
            .runtime(iceberg::Runtime::current())
            .build()?)
    }

    /// Drops a table from the catalog; with `purge`, also deletes every file its metadata
    /// references (data, deletes, manifests, manifest lists, metadata files).
    pub async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        let table = self.load_table(ident).await?;
        let ns = ns_string(ident.namespace());
        self.inner
            .delete_table(&ns, ident.name(), table.metadata_location_result()?)
            .await?;
        if purge {
            iceberg::drop_table_data(&table).await?;
        }
        Ok(())
    }

    /// Commits `updates` on top of `base` if `requirements` hold against it.
    ///
    /// Writes `metadata/NNNNN-<uuid>.metadata.json` (next version after `base`), then swaps the
    /// pointer with `UPDATE ... WHERE metadata_location = <base's>`: if another commit moved the
    /// pointer since `base` was loaded, nothing changes and [`Error::CommitConflict`] is
    /// returned (the caller reloads and retries); the metadata file written is deleted. When the
    /// swap statement itself fails, the pointer is re-read: if it shows our file, the commit did
    /// happen and is reported as a success, so files of a landed commit are never deleted. Honours `write.metadata.delete-after-commit.enabled` /
    /// `write.metadata.previous-versions-max` after a successful swap.
    pub async fn commit(
        &self,
        base: &Table,
        requirements: &[TableRequirement],
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        let ident = base.identifier();
        let ns = ns_string(ident.namespace());
        let name = ident_string(ident);
        let current = base;
        let current_location = current.metadata_location_result()?.to_string();
        for req in requirements {
            if let Err(e) = req.check(Some(current.metadata())) {
                return Err(Error::CommitConflict {
                    table: name,
                    attempts: 1,
                    reason: e.message().to_string(),
                });
            }
        }
        let mut builder = TableMetadataBuilder::new_from_metadata(
            current.metadata().clone(),
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
        built
            .metadata
            .write_to(&self.file_io, &new_location)
            .await?;
        let new_loc = new_location.to_string();
        let swapped = match self
            .inner
            .swap(&ns, ident.name(), &current_location, &new_loc)
            .await
        {
            Ok(swapped) => swapped,
            Err(e) => {
                // Unknown outcome: trust only the pointer itself.
                match self.inner.metadata_location(&ns, ident.name()).await {
                    Ok(Some(now)) if now == new_loc => true,
                    Ok(_) => {
                        let _ = self.file_io.delete(&new_loc).await;
                        return Err(e);
                    }
                    Err(_) => return Err(e),
                }
            }
        };
        if !swapped {
            let _ = self.file_io.delete(&new_loc).await;
            return Err(Error::CommitConflict {
                table: name,
                attempts: 1,
                reason: "the table pointer moved during the commit".into(),
            });
        }
        if properties::bool_prop(
            built.metadata.properties(),
            properties::METADATA_DELETE_AFTER_COMMIT,
            false,
        )? {
            for old in &built.expired_metadata_logs {
                if let Err(e) = self.file_io.delete(&old.metadata_file).await {
                    tracing::warn!(file = %old.metadata_file, error = %e, "could not delete old metadata file");
                }
            }
        }
        self.table_from(ident.clone(), built.metadata, new_loc)
    }

    /// Sets and removes table properties in one commit.
    pub async fn set_properties(
        &self,
        ident: &TableIdent,
        set: HashMap<String, String>,
        remove: Vec<String>,
    ) -> Result<Table> {
        let mut updates = Vec::new();
        if !set.is_empty() {
            updates.push(TableUpdate::SetProperties { updates: set });
        }
        if !remove.is_empty() {
            updates.push(TableUpdate::RemoveProperties { removals: remove });
        }
        crate::commit::retry::with_retry(self, ident, None, |_table| {
            let updates = updates.clone();
            async move {
                Ok(crate::commit::producer::PreparedCommit {
                    requirements: vec![],
                    updates,
                    written: vec![],
                })
            }
        })
        .await
    }
}

/// Reads a `metadata.json`, mapping failures to a clear [`Error::Metadata`].
pub async fn read_metadata(file_io: &FileIO, location: &str) -> Result<TableMetadata> {
    TableMetadata::read_from(file_io, location)
        .await
        .map_err(|e| Error::Metadata {
            location: location.to_string(),
            reason: e.to_string(),
        })
}

fn ns_string(ns: &NamespaceIdent) -> String {
    ns.clone().inner().join(".")
}

/// The partition spec a new data file must be written with.
pub fn default_spec(table: &Table) -> PartitionSpec {
    table.metadata().default_partition_spec().as_ref().clone()
}

/// The table's refs (branches and tags). The iceberg crate keeps them private, so they are read
/// back from the metadata's own JSON form (the `refs` object of the table spec).
pub fn refs(metadata: &TableMetadata) -> Result<HashMap<String, iceberg::spec::SnapshotReference>> {
    let mut json = serde_json::to_value(metadata).map_err(|e| Error::Metadata {
        location: metadata.location().to_string(),
        reason: e.to_string(),
    })?;
    let refs = json
        .get_mut("refs")
        .map(serde_json::Value::take)
        .unwrap_or_default();
    if refs.is_null() {
        return Ok(HashMap::new());
    }
    serde_json::from_value(refs).map_err(|e| Error::Metadata {
        location: metadata.location().to_string(),
        reason: format!("bad refs: {e}"),
    })
}
