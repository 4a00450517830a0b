//! A table's life in the catalog: [`Catalog::create_table`] (v2 unless the `format-version`
//! property says 1 or 3; a SQL catalog writes
//! the first metadata file and inserts the pointer, a REST server does both),
//! [`Catalog::load_table`] (pointer -> `metadata.json` -> [`Table`]),
//! [`Catalog::load_table_head`] (the same without the history, for appends) and
//! [`Catalog::drop_entry`] (removes the catalog entry; a SQL catalog never deletes files here).

use std::sync::Arc;

use iceberg::spec::{FormatVersion, TableMetadataBuilder};
use iceberg::table::Table;
use iceberg::Catalog as _;
use iceberg::{MetadataLocation, TableCreation, TableIdent};

use super::heads::Head;
use super::{ident_string, ns_string, rest, table_from, validate_name, Backend, Catalog, NewTable};
use crate::base::error::{Error, Result};
use crate::table::ident::validate_namespace;

/// `1`, `2` or `3`: an Iceberg table format version.
pub fn parse_format_version(v: &str) -> Result<FormatVersion> {
    match v.trim() {
        "1" => Ok(FormatVersion::V1),
        "2" => Ok(FormatVersion::V2),
        "3" => Ok(FormatVersion::V3),
        other => Err(Error::invalid_option(
            "format-version",
            other,
            "an Iceberg table format version is 1, 2 or 3",
        )),
    }
}

impl Catalog {
    /// Creates a table (format v2, or the `format-version` property's) and returns it loaded. Names that would escape or nest in the
    /// warehouse are refused ([`validate_name`]), and so are bad values of the properties floe
    /// reads ([`crate::base::properties::validate_update`], as `set-property` checks them).
    pub async fn create_table(&self, new: NewTable) -> Result<Table> {
        validate_namespace(new.ident.namespace())?;
        validate_name("table name", new.ident.name(), true)?;
        // The one check `table set-property` makes too: a value every append would fail on
        // is refused here, naming the property.
        // `format-version` is not stored: it picks the table's format (as in Iceberg's Java
        // and Python implementations), 2 when not given.
        let mut properties = new.properties.clone();
        let format_version = match properties.remove("format-version") {
            None => FormatVersion::V2,
            Some(v) => parse_format_version(&v)?,
        };
        let properties = crate::base::properties::validate_update(&properties, &[])?;
        let ns = ns_string(new.ident.namespace());
        let name = ident_string(&new.ident);
        let mut creation = TableCreation::builder()
            .name(new.ident.name().to_string())
            .schema(new.schema)
            .partition_spec(new.partition_spec)
            .properties(properties)
            .format_version(format_version)
            .build();
        creation.sort_order = new.sort_order;
        let (inner, file_io) = match &self.backend {
            Backend::Rest(r) => {
                // The REST create request has no format field: the format is asked for by the
                // `format-version` property, as Java's RESTCatalog does (the server picks it).
                if let Some(v) = new.properties.get("format-version") {
                    creation
                        .properties
                        .insert("format-version".into(), v.clone());
                }
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
        if let Err(e) = crate::table::write_metadata(file_io, &metadata, &metadata_location).await {
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
                    // The crate parses the metadata itself and knows no v3-only column
                    // type: floe reads the answer then (`table::opaque`).
                    Err(e) if e.message().starts_with("Failed to parse response") => {
                        match r.load_table_itself(ident).await {
                            Ok(t) => Ok(t),
                            Err(_) => Err(r.map_err(e)),
                        }
                    }
                    Err(e) => Err(r.map_err(e)),
                };
            }
            Backend::Sql { inner, file_io, .. } => (inner, file_io),
        };
        let location = pointer(inner, ident).await?;
        let name = ident_string(ident);
        let json = crate::table::read_metadata_json(file_io, &location).await?;
        let metadata = crate::table::parse_metadata_json(&json, &location)?;
        let metadata = self
            .wholes
            .put(&name, &location, Arc::new(metadata), json.len());
        table_from(file_io, ident.clone(), metadata, location)
    }

    /// Loads a table as [`Catalog::load_table`] does, reusing the metadata this catalog last
    /// read or committed for it while the pointer still names that file (a metadata file never
    /// changes once written): what a process that commits to a table again and again calls
    /// (an ingest's flushes, a commit's reload), so it parses the table's history once, not
    /// per commit. A REST catalog's table loads as by `load_table`.
    pub async fn load_table_kept(&self, ident: &TableIdent) -> Result<Table> {
        if let Backend::Sql { inner, file_io, .. } = &self.backend {
            let location = pointer(inner, ident).await?;
            if let Some(whole) = self.wholes.get(&ident_string(ident), &location) {
                return table_from(file_io, ident.clone(), whole, location);
            }
        }
        self.load_table(ident).await
    }

    /// Loads a table for an append: its metadata is the *head* of the current `metadata.json`
    /// ([`crate::table::metadata_json`]), every field but the history (only the snapshots refs
    /// point to are parsed), so loading and committing cost the same at 10 or 10,000
    /// snapshots. A head of the same file is reused while the pointer names it.
    ///
    /// Fit for what an append reads (schema, spec, properties, the parent snapshot); never for
    /// what walks the history (validation, expiry, time travel): use [`Catalog::load_table`].
    /// A REST catalog's table, or a file that cannot be split, loads whole.
    pub async fn load_table_head(&self, ident: &TableIdent) -> Result<Table> {
        let (inner, file_io) = match &self.backend {
            Backend::Rest(_) => return self.load_table(ident).await,
            Backend::Sql { inner, file_io, .. } => (inner, file_io),
        };
        let location = pointer(inner, ident).await?;
        let name = ident_string(ident);
        if let Some(head) = self.heads.get(&name, &location) {
            return table_from(file_io, ident.clone(), head.metadata.clone(), location);
        }
        // Read once: split, or (a file that cannot be split) parsed whole.
        let json = crate::table::read_metadata_json(file_io, &location).await?;
        match self.keep_head(&name, &location, json.clone()) {
            Some(head) => table_from(file_io, ident.clone(), head.metadata.clone(), location),
            None => {
                let metadata = crate::table::parse_metadata_json(&json, &location)?;
                table_from(file_io, ident.clone(), metadata, location)
            }
        }
    }

    /// The head of `ident`'s metadata file at `location`: kept, or read and split (`None`
    /// when the file cannot be split).
    pub(super) async fn head_at(
        &self,
        file_io: &iceberg::io::FileIO,
        ident: &TableIdent,
        location: &str,
    ) -> Result<Option<Arc<Head>>> {
        let name = ident_string(ident);
        if let Some(head) = self.heads.get(&name, location) {
            return Ok(Some(head));
        }
        let json = crate::table::read_metadata_json(file_io, location).await?;
        Ok(self.keep_head(&name, location, json))
    }

    /// Splits the JSON of the metadata file at `location` and keeps its head as `name`'s.
    fn keep_head(&self, name: &str, location: &str, json: bytes::Bytes) -> Option<Arc<Head>> {
        let weight = json.len();
        let split = crate::table::metadata_json::split(json)?;
        let head = Head {
            metadata: Arc::new(split.head),
            history: split.history,
        };
        Some(self.heads.put(name, location, Arc::new(head), weight))
    }

    /// Removes `table`'s entry from the catalog (SQL: only if its pointer is still the one
    /// loaded). With `server_purge`, a REST catalog is asked to delete the files too
    /// (`purgeRequested=true`); a SQL catalog never deletes files here: that is
    /// [`crate::operations::clean::purge::DropBuilder`]'s job, under the table's delete fence.
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
}

/// The metadata location the SQL catalog's pointer names for `ident`.
async fn pointer(inner: &super::SqlCatalog, ident: &TableIdent) -> Result<String> {
    let ns = ns_string(ident.namespace());
    match inner.metadata_location(&ns, ident.name()).await? {
        Some(location) => Ok(location),
        None if !inner.namespace_exists(&ns).await? => {
            Err(Error::NamespaceNotFound { namespace: ns })
        }
        None => Err(Error::TableNotFound {
            table: ident_string(ident),
        }),
    }
}
