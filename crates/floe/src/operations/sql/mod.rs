//! SQL over tables and metadata tables (DataFusion adapter).
//!
//! Each namespace is a DataFusion schema of the `floe` catalog: `SELECT * FROM ns.t` scans the
//! table's current snapshot through the iceberg crate (which applies delete files), and
//! `ns.t$files`, `ns.t$snapshots`, ... serve [`crate::operations::inspect`] tables.
//!
//! Read-only by construction, in three layers: [`SqlBuilder`] runs only queries (an allow-list on the
//! parsed statement: SELECT, WITH, VALUES, TABLE, EXPLAIN of one of these, SHOW, DESCRIBE), the
//! plan is checked again with DataFusion's `SQLOptions` (no DDL, DML, COPY or session
//! statements), and the session has no file formats, table factories or URL tables, so no
//! statement can read or write a file outside floe's tables. Listing tables (`SHOW TABLES`,
//! `information_schema.tables`) reads the catalog's list only, never a table's metadata.

mod scan;
mod time_travel;

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement};

use crate::base::error::{Error, Result};
use crate::catalog::{parse_namespace, Catalog};
use crate::operations::inspect::{InspectBuilder, MetadataTable};
use crate::operations::Query as _;

/// Name of the DataFusion catalog floe registers.
pub const SQL_CATALOG: &str = "floe";

/// Creates a DataFusion session over the catalog's namespaces and tables.
///
/// The session can read floe's tables only: no file formats (COPY has nothing to write with),
/// no table factories (CREATE EXTERNAL TABLE has nothing to read with) and no URL tables
/// (`SELECT * FROM '/some/file'`). Run statements through [`SqlBuilder`], which also refuses
/// anything but queries.
async fn session(catalog: &Catalog, at: Arc<Vec<time_travel::AsOf>>) -> Result<SessionContext> {
    let config = SessionConfig::new()
        .with_default_catalog_and_schema(SQL_CATALOG, "default")
        .with_information_schema(true);
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_file_formats(vec![])
        .with_table_factories(HashMap::new())
        .build();
    let ctx = SessionContext::new_with_state(state);
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
                at: at.clone(),
            }) as Arc<dyn SchemaProvider>,
        );
    }
    ctx.register_catalog(SQL_CATALOG, Arc::new(FloeCatalog { schemas }));
    Ok(ctx)
}

/// One read-only SQL statement over the catalog's tables (`floe sql`): a
/// [`Query`](crate::operations::Query). SQL spans the catalog, not one table, so the builder
/// holds the catalog and the statement only.
#[derive(Clone)]
pub struct SqlBuilder {
    catalog: Catalog,
    sql: String,
}

impl SqlBuilder {
    pub fn new(catalog: &Catalog, sql: impl Into<String>) -> Self {
        Self {
            catalog: catalog.clone(),
            sql: sql.into(),
        }
    }
}

impl crate::operations::Query for SqlBuilder {
    type Output = Vec<RecordBatch>;

    /// Runs the statement and collects its result. Anything but a query (COPY, INSERT,
    /// CREATE, DROP, SET, PREPARE, EXECUTE, ..., also inside EXPLAIN) is [`Error::Refused`]
    /// before it is planned.
    async fn query(self) -> Result<Vec<RecordBatch>> {
        query(&self.catalog, &self.sql).await
    }
}

/// Runs one read-only statement and collects its result (see [`SqlBuilder`]).
async fn query(catalog: &Catalog, sql: &str) -> Result<Vec<RecordBatch>> {
    // Time travel (`FOR VERSION AS OF ...`) is taken out first: DataFusion's parser knows none
    // of its spellings (see `time_travel`).
    let rewritten = time_travel::rewrite(sql)?;
    let ctx = session(catalog, Arc::new(rewritten.at)).await?;
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state.sql_to_statement(&rewritten.sql, &dialect)?;
    if let Err(kind) = read_only(&statement) {
        return Err(refused(&kind));
    }
    let plan = state.statement_to_plan(statement).await?;
    // The same rule on the plan, with DataFusion's own check: no node may define, modify or
    // copy data or change the session.
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
        .verify_plan(&plan)
        .map_err(|e| refused(&e.strip_backtrace()))?;
    let df = ctx.execute_logical_plan(plan).await?;
    Ok(df.collect().await?)
}

fn refused(what: &str) -> Error {
    Error::Refused {
        operation: format!("run {what}"),
        reason: "`floe sql` is read-only: it runs queries only (SELECT, WITH, VALUES, TABLE, \
                 EXPLAIN, SHOW, DESCRIBE)"
            .into(),
    }
}

/// `Ok` for statements that only read floe's tables; otherwise the kind of statement (`COPY`,
/// `CREATE TABLE`, ...) for the error.
fn read_only(statement: &DfStatement) -> std::result::Result<(), String> {
    match statement {
        DfStatement::Statement(s) => sql_read_only(s),
        DfStatement::Explain(e) => read_only(&e.statement),
        DfStatement::CopyTo(_) => Err("COPY".into()),
        DfStatement::CreateExternalTable(_) => Err("CREATE EXTERNAL TABLE".into()),
        DfStatement::Reset(_) => Err("RESET".into()),
    }
}

fn sql_read_only(statement: &Statement) -> std::result::Result<(), String> {
    match statement {
        Statement::Query(q) => query_read_only(q),
        // `DESCRIBE SELECT ...`.
        Statement::Explain { statement, .. } => sql_read_only(statement),
        Statement::ExplainTable { .. }
        | Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowVariable { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowFunctions { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowViews { .. } => Ok(()),
        other => Err(statement_kind(&other.to_string())),
    }
}

fn query_read_only(q: &Query) -> std::result::Result<(), String> {
    if let Some(with) = &q.with {
        for cte in &with.cte_tables {
            query_read_only(&cte.query)?;
        }
    }
    set_expr_read_only(&q.body)
}

fn set_expr_read_only(e: &SetExpr) -> std::result::Result<(), String> {
    match e {
        SetExpr::Select(s) if s.into.is_some() => Err("SELECT INTO".into()),
        SetExpr::Select(_) | SetExpr::Values(_) | SetExpr::Table(_) => Ok(()),
        SetExpr::Query(q) => query_read_only(q),
        SetExpr::SetOperation { left, right, .. } => {
            set_expr_read_only(left)?;
            set_expr_read_only(right)
        }
        // INSERT, UPDATE, DELETE, MERGE (e.g. after a WITH clause).
        other => Err(statement_kind(&other.to_string())),
    }
}

/// The leading keywords of a statement as sqlparser prints it (keywords in upper case):
/// `INSERT INTO`, `CREATE TABLE`, `DROP TABLE`, `SET`, `PREPARE`.
fn statement_kind(text: &str) -> String {
    let words: Vec<&str> = text
        .split_whitespace()
        .take_while(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .take(4)
        .collect();
    if words.is_empty() {
        text.split_whitespace()
            .next()
            .unwrap_or("statement")
            .to_string()
    } else {
        words.join(" ")
    }
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
    /// The statement's time-travel clauses, by the index its rewritten table names carry.
    at: Arc<Vec<time_travel::AsOf>>,
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
        let (name, at) = time_travel::split_name(name);
        let at = match at {
            Some(i) => Some(self.at.get(i).cloned().ok_or_else(|| {
                external(Error::sql(format!("no time-travel clause {i} for {name}")))
            })?),
            None => None,
        };
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
            // DataFusion would name the rewritten table; name the one the statement wrote.
            return match at {
                Some(_) => Err(external(Error::sql(format!(
                    "table '{}.{base}' not found",
                    self.namespace
                )))),
                None => Ok(None),
            };
        };
        let meta: Option<String> = meta.map(str::to_string);
        let full_name = format!("{}.{}", self.namespace, base);
        let ident = crate::catalog::parse_table_ident(&full_name).map_err(external)?;
        let kind = meta
            .as_deref()
            .map(MetadataTable::parse)
            .transpose()
            .map_err(external)?;
        let table = self.catalog.load_table(&ident).await.map_err(|e| {
            // A table that cannot be loaded is named, whatever the error says (a metadata
            // read error names the file only).
            let text = e.to_string();
            external(if text.contains(&full_name) {
                e
            } else {
                Error::sql(format!("table {full_name}: {text}"))
            })
        })?;
        let table = match &at {
            None => table,
            Some(at) => {
                let shown = match &meta {
                    Some(m) => format!("{full_name}${m}"),
                    None => full_name.clone(),
                };
                if let Some(kind) = kind {
                    if !kind.reads_manifests() {
                        return Err(external(Error::sql(format!(
                            "{shown} {at}: ${} lists the whole history, it has no state as of a \
                             snapshot (filter it by snapshot_id instead); $files, $data_files, \
                             $delete_files, $entries, $partitions and $manifests can time travel",
                            kind.name()
                        ))));
                    }
                }
                time_travel::view_at(&table, &shown, at).map_err(external)?
            }
        };
        match kind {
            None => Ok(Some(Arc::new(
                scan::IcebergScanTable::try_new(table).map_err(external)?,
            ))),
            Some(kind) => {
                let batch = InspectBuilder::new(&self.catalog, ident, kind)
                    .with_table(table)
                    .query()
                    .await
                    .map_err(external)?;
                Ok(Some(Arc::new(scan::BatchTable::new(batch))))
            }
        }
    }

    /// Answered from the catalog's table list: `SHOW TABLES` and `information_schema.tables`
    /// must not load (and so fail on) every table.
    async fn table_type(&self, name: &str) -> Result<Option<TableType>, DataFusionError> {
        let name = time_travel::split_name(name).0;
        Ok(self.table_exist(name).then_some(if name.contains('$') {
            TableType::View
        } else {
            TableType::Base
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        let name = time_travel::split_name(name).0;
        let base = name.split('$').next().unwrap_or(name);
        self.tables.iter().any(|t| t.eq_ignore_ascii_case(base))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::parser::DFParser;

    use super::*;

    fn check(sql: &str) -> std::result::Result<(), String> {
        let mut statements = DFParser::parse_sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(statements.len(), 1, "{sql}");
        read_only(&statements.pop_front().unwrap())
    }

    #[test]
    fn only_queries_pass_the_read_only_check() {
        for sql in [
            "SELECT * FROM db.t",
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            "VALUES (1), (2)",
            "SELECT 1 UNION ALL (SELECT 2)",
            "EXPLAIN SELECT count(*) FROM db.t",
            "EXPLAIN ANALYZE SELECT count(*) FROM db.t",
            "EXPLAIN VERBOSE SELECT 1",
            "SHOW TABLES",
            "SHOW COLUMNS FROM db.t",
            "SHOW ALL",
            "DESCRIBE db.t",
            "SELECT * FROM generate_series(1, 3)",
        ] {
            assert_eq!(check(sql), Ok(()), "{sql}");
        }
    }

    #[test]
    fn statements_that_write_define_or_change_the_session_are_refused() {
        for (sql, kind) in [
            ("COPY (SELECT 1 AS x) TO '/tmp/x.csv' STORED AS CSV", "COPY"),
            ("COPY db.t TO '/tmp/x.parquet'", "COPY"),
            (
                "EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '/tmp/x.csv' STORED AS CSV",
                "COPY",
            ),
            ("EXPLAIN COPY db.t TO '/tmp/x.json' STORED AS JSON", "COPY"),
            (
                "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/passwd'",
                "CREATE EXTERNAL TABLE",
            ),
            ("CREATE TABLE x AS SELECT 1", "CREATE TABLE"),
            ("CREATE TABLE x (a INT)", "CREATE TABLE"),
            ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
            ("CREATE SCHEMA s", "CREATE SCHEMA"),
            ("DROP TABLE db.t", "DROP TABLE"),
            ("INSERT INTO db.t VALUES (1)", "INSERT INTO"),
            ("DELETE FROM db.t", "DELETE FROM"),
            ("UPDATE db.t SET id = 1", "UPDATE"),
            (
                "WITH x AS (SELECT 1 AS id) INSERT INTO db.t SELECT id FROM x",
                "INSERT INTO",
            ),
            ("SELECT 1 AS a INTO newtab", "SELECT INTO"),
            ("SET datafusion.catalog.location = '/tmp'", "SET"),
            ("RESET datafusion.execution.batch_size", "RESET"),
            ("PREPARE p AS SELECT 1", "PREPARE"),
            ("EXECUTE p", "EXECUTE"),
            ("EXPLAIN INSERT INTO db.t VALUES (1)", "INSERT INTO"),
            ("START TRANSACTION", "START TRANSACTION"),
        ] {
            let got = check(sql);
            assert!(
                got.as_ref().is_err_and(|k| k.starts_with(kind)),
                "{sql}: {got:?}"
            );
        }
    }
}
