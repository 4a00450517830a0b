//! Where a catalog's tables live: the warehouse root, the default location of a new table,
//! the location of every table in the catalog and the catalog's own files, and from those the
//! delete fence of one table ([`Fence::for_table`]).

use futures::StreamExt;
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableIdent};

use super::{ident_string, ns_string, read_metadata, Backend, Catalog};
use crate::base::error::Result;
use crate::storage::fence::Fence;
use crate::table::reach::reachable_from_table;

impl Catalog {
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
}

impl Fence {
    /// The fence of `table` inside `catalog`: its location minus every other table's location
    /// and the catalog's own files. When another table's location holds this one, that
    /// table's referenced files are read too ([`Fence::set_container_files`]); one that cannot
    /// be read keeps every path inside it.
    pub async fn for_table(catalog: &Catalog, table: &Table) -> Result<Fence> {
        let me = table.identifier();
        let others: Vec<(TableIdent, String)> = catalog
            .table_roots()
            .await?
            .into_iter()
            .filter(|(ident, _)| ident != me)
            .collect();
        let mut fence = Self::new(
            ident_string(me),
            table.metadata().location(),
            others
                .iter()
                .map(|(ident, loc)| (ident_string(ident), loc.clone()))
                .collect(),
            catalog.protected_files(),
        );
        for name in fence.containers() {
            let Some((ident, _)) = others.iter().find(|(i, _)| ident_string(i) == name) else {
                continue;
            };
            let files = match catalog.load_table(ident).await {
                Ok(t) => reachable_from_table(&t).await,
                Err(e) => Err(e),
            };
            match files {
                Ok(reach) => fence.set_container_files(&name, reach.files.into_keys()),
                Err(e) => tracing::warn!(
                    table = %ident_string(me),
                    container = %name,
                    error = %e,
                    "cannot read the files of a table whose location holds this one; nothing inside it is deleted"
                ),
            }
        }
        Ok(fence)
    }
}
