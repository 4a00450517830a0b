//! SQL over tables and metadata tables (DataFusion adapter).
//!
//! Each namespace is a DataFusion schema of the `floe` catalog: `SELECT * FROM ns.t` scans the
//! table's current snapshot through the iceberg crate (which applies delete files), and
//! `ns.t$files`, `ns.t$snapshots`, ... serve [`crate::inspect`] tables.

mod scan;

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::DataFusionError;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::catalog::{parse_namespace, Catalog};
use crate::error::{Error, Result};
use crate::inspect::MetadataTable;

/// Name of the DataFusion catalog floe registers.
pub const SQL_CATALOG: &str = "floe";

/// Creates a DataFusion session over the catalog's namespaces and tables.
pub async fn session(catalog: &Catalog) -> Result<SessionContext> {
    let config = SessionConfig::new()
        .with_default_catalog_and_schema(SQL_CATALOG, "default")
        .with_information_schema(true);
    let ctx = SessionContext::new_with_config(config);
    let mut schemas = HashMap::new();
    for ns in catalog.list_namespaces().await? {
        let ident = parse_namespace(&ns)?;
        let tables: Vec<String> = catalog
            .list_tables(Some(&ident))
            .await?
            .into_iter()
            .map(|t| t.name().to_string())
            .collect();
        schemas.insert(
            ns.clone(),
            Arc::new(NamespaceSchema {
                catalog: catalog.clone(),
                namespace: ns,
                tables,
            }) as Arc<dyn SchemaProvider>,
        );
    }
    ctx.register_catalog(SQL_CATALOG, Arc::new(FloeCatalog { schemas }));
    Ok(ctx)
}

/// Runs one statement and collects its result.
pub async fn query(catalog: &Catalog, sql: &str) -> Result<Vec<RecordBatch>> {
    let ctx = session(catalog).await?;
    let df = ctx.sql(sql).await?;
    Ok(df.collect().await?)
}

#[derive(Debug)]
struct FloeCatalog {
    schemas: HashMap<String, Arc<dyn SchemaProvider>>,
}

impl CatalogProvider for FloeCatalog {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.schemas.keys().cloned().collect();
        names.sort();
        names
    }
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.schemas.get(name).cloned()
    }
}

struct NamespaceSchema {
    catalog: Catalog,
    namespace: String,
    tables: Vec<String>,
}

impl std::fmt::Debug for NamespaceSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceSchema")
            .field("namespace", &self.namespace)
            .finish()
    }
}

fn external(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

#[async_trait]
impl SchemaProvider for NamespaceSchema {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn table_names(&self) -> Vec<String> {
        self.tables.clone()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let (base, meta) = match name.split_once('$') {
            Some((b, m)) => (b, Some(m)),
            None => (name, None),
        };
        let found: Option<String> = self
            .tables
            .iter()
            .find(|t| t.as_str() == base || t.eq_ignore_ascii_case(base))
            .cloned();
        let Some(base) = found else {
            return Ok(None);
        };
        let meta: Option<String> = meta.map(str::to_string);
        let ident = crate::catalog::parse_table_ident(&format!("{}.{}", self.namespace, base))
            .map_err(external)?;
        let table = self.catalog.load_table(&ident).await.map_err(external)?;
        match meta {
            None => Ok(Some(Arc::new(
                scan::IcebergScanTable::try_new(table).map_err(external)?,
            ))),
            Some(m) => {
                let kind = MetadataTable::parse(&m).map_err(external)?;
                let batch = kind.scan(&table).await.map_err(external)?;
                Ok(Some(Arc::new(scan::BatchTable::new(batch))))
            }
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        let base = name.split('$').next().unwrap_or(name);
        self.tables.iter().any(|t| t.eq_ignore_ascii_case(base))
    }
}
