//! The SQL catalog in the Iceberg JDBC catalog schema, on SQLite or PostgreSQL.
//!
//! Tables: `iceberg_tables(catalog_name, table_namespace, table_name, metadata_location,
//! previous_metadata_location, iceberg_type)` and `iceberg_namespace_properties(catalog_name,
//! namespace, property_key, property_value)`. floe writes `iceberg_type = 'TABLE'` and reads rows
//! where it is `'TABLE'` or NULL (Java's JdbcCatalog v0 schema has no such column; we add it, as
//! Java does on upgrade). A namespace exists when it has a property row or a table (PyIceberg
//! writes the property `exists = true`).
//!
//! Every statement uses `$N` placeholders, which both SQLite and PostgreSQL accept.

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Row};
use std::str::FromStr;
use std::time::Duration;

use crate::base::error::{Error, Result};

const TABLE_FILTER: &str = "(iceberg_type = 'TABLE' OR iceberg_type IS NULL)";

/// A connection pool on one catalog name.
pub struct SqlCatalog {
    name: String,
    /// URI without credentials, for messages.
    display_uri: String,
    pool: AnyPool,
}

impl SqlCatalog {
    /// Connects and creates the JDBC-schema tables when missing.
    pub async fn connect(name: &str, uri: &str) -> Result<Self> {
        let (pool, display_uri) = connect_pool(uri).await?;
        let catalog = Self {
            name: name.to_string(),
            display_uri,
            pool,
        };
        catalog.ensure_schema().await?;
        Ok(catalog)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Closes the pool: waits for connections in use, closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    fn err(&self, e: sqlx::Error) -> Error {
        Error::catalog_with(self.display_uri.clone(), describe_sqlx(&e), e)
    }

    async fn ensure_schema(&self) -> Result<()> {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS iceberg_tables (\
               catalog_name VARCHAR(255) NOT NULL, \
               table_namespace VARCHAR(255) NOT NULL, \
               table_name VARCHAR(255) NOT NULL, \
               metadata_location VARCHAR(1000), \
               previous_metadata_location VARCHAR(1000), \
               iceberg_type VARCHAR(5), \
               PRIMARY KEY (catalog_name, table_namespace, table_name))",
        )
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (\
               catalog_name VARCHAR(255) NOT NULL, \
               namespace VARCHAR(255) NOT NULL, \
               property_key VARCHAR(255) NOT NULL, \
               property_value VARCHAR(1000), \
               PRIMARY KEY (catalog_name, namespace, property_key))",
        )
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        // A JdbcCatalog v0 schema has no iceberg_type column: add it (NULL reads as TABLE).
        if sqlx::query("SELECT iceberg_type FROM iceberg_tables WHERE 1 = 0")
            .fetch_all(&self.pool)
            .await
            .is_err()
        {
            sqlx::query("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)")
                .execute(&self.pool)
                .await
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    pub async fn create_namespace(&self, ns: &str) -> Result<()> {
        if self.namespace_exists(ns).await? {
            return Err(Error::NamespaceExists {
                namespace: ns.to_string(),
            });
        }
        sqlx::query(
            "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) \
             VALUES ($1, $2, 'exists', 'true')",
        )
        .bind(&self.name)
        .bind(ns)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    pub async fn namespace_exists(&self, ns: &str) -> Result<bool> {
        let like = format!("{ns}.%");
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM iceberg_namespace_properties WHERE catalog_name = $1 AND (namespace = $2 OR namespace LIKE $3)) \
                  + (SELECT COUNT(*) FROM iceberg_tables WHERE catalog_name = $1 AND (table_namespace = $2 OR table_namespace LIKE $3))",
        )
        .bind(&self.name)
        .bind(ns)
        .bind(&like)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        let n: i64 = row.try_get(0).map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    pub async fn list_namespaces(&self) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1 \
             UNION SELECT table_namespace FROM iceberg_tables WHERE catalog_name = $1 ORDER BY 1",
        )
        .bind(&self.name)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(|e| self.err(e)))
            .collect()
    }

    pub async fn list_tables(&self, ns: Option<&str>) -> Result<Vec<(String, String)>> {
        let sql = format!(
            "SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = $1 AND {TABLE_FILTER} \
             AND ($2 = '' OR table_namespace = $2) ORDER BY 1, 2"
        );
        let rows = sqlx::query(&sql)
            .bind(&self.name)
            .bind(ns.unwrap_or(""))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>(0).map_err(|e| self.err(e))?,
                    r.try_get::<String, _>(1).map_err(|e| self.err(e))?,
                ))
            })
            .collect()
    }

    /// Every table row of the database, of every catalog name (their files are never this
    /// catalog's to delete either): `(catalog name, namespace, table, metadata location)`.
    pub async fn all_tables(&self) -> Result<Vec<(String, String, String, String)>> {
        let sql = format!(
            "SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables \
             WHERE {TABLE_FILTER} AND metadata_location IS NOT NULL"
        );
        let rows = sqlx::query(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                let col = |i: usize| r.try_get::<String, _>(i).map_err(|e| self.err(e));
                Ok((col(0)?, col(1)?, col(2)?, col(3)?))
            })
            .collect()
    }

    /// The SQLite database file and its journals, for a SQLite catalog.
    pub fn database_files(uri: &str) -> Vec<String> {
        let Ok(url) = normalize_uri(uri) else {
            return vec![];
        };
        let Some(rest) = url.strip_prefix("sqlite:") else {
            return vec![];
        };
        let path = rest.trim_start_matches("//");
        let path = path.split('?').next().unwrap_or(path);
        if path.is_empty() || path == ":memory:" {
            return vec![];
        }
        let path = crate::catalog::absolute(std::path::Path::new(path))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.to_string());
        ["", "-wal", "-shm", "-journal"]
            .iter()
            .map(|s| format!("{path}{s}"))
            .collect()
    }

    pub async fn metadata_location(&self, ns: &str, table: &str) -> Result<Option<String>> {
        let sql = format!(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 \
             AND table_name = $3 AND {TABLE_FILTER}"
        );
        let row = sqlx::query(&sql)
            .bind(&self.name)
            .bind(ns)
            .bind(table)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        match row {
            None => Ok(None),
            Some(r) => Ok(r.try_get::<Option<String>, _>(0).map_err(|e| self.err(e))?),
        }
    }

    pub async fn insert_table(&self, ns: &str, table: &str, location: &str) -> Result<()> {
        let res = sqlx::query(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type) \
             VALUES ($1, $2, $3, $4, NULL, 'TABLE')",
        )
        .bind(&self.name)
        .bind(ns)
        .bind(table)
        .bind(location)
        .execute(&self.pool)
        .await;
        match res {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Err(Error::TableExists {
                table: format!("{ns}.{table}"),
            }),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Compare-and-swap of the metadata pointer. `Ok(false)` when another commit won.
    pub async fn swap(&self, ns: &str, table: &str, expected: &str, new: &str) -> Result<bool> {
        let sql = format!(
            "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2 \
             WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND {TABLE_FILTER} \
             AND metadata_location = $2"
        );
        let res = sqlx::query(&sql)
            .bind(new)
            .bind(expected)
            .bind(&self.name)
            .bind(ns)
            .bind(table)
            .execute(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        Ok(res.rows_affected() == 1)
    }

    pub async fn delete_table(&self, ns: &str, table: &str, expected: &str) -> Result<()> {
        let sql = format!(
            "DELETE FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 \
             AND {TABLE_FILTER} AND metadata_location = $4"
        );
        let res = sqlx::query(&sql)
            .bind(&self.name)
            .bind(ns)
            .bind(table)
            .bind(expected)
            .execute(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        if res.rows_affected() != 1 {
            return Err(Error::CommitConflict {
                table: format!("{ns}.{table}"),
                attempts: 1,
                reason: crate::base::error::Conflict::ChangedWhileDropping,
            });
        }
        Ok(())
    }
}

/// Opens a pool of up to 4 connections on `uri` (see [`normalize_uri`]); returns it with the
/// URI as it may be shown ([`redact`]).
pub(crate) async fn connect_pool(uri: &str) -> Result<(AnyPool, String)> {
    sqlx::any::install_default_drivers();
    let display_uri = redact(uri);
    let url = normalize_uri(uri)?;
    let err = |e: sqlx::Error| Error::catalog_with(display_uri.clone(), describe_sqlx(&e), e);
    let options = AnyConnectOptions::from_str(&url).map_err(err)?;
    let pool = AnyPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        // No idle timeout and no max lifetime: then sqlx starts no background maintenance
        // task. That task can spin forever on a miscounted idle queue
        // (launchbadge/sqlx#3645), holding the process at exit. A connection the server
        // closed meanwhile is still caught: the pool tests each one before handing it out.
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(options)
        .await
        .map_err(err)?;
    Ok((pool, display_uri))
}

/// Accepts `sqlite:///abs.db`, SQLAlchemy's `sqlite:////abs.db`, `sqlite:rel.db`, and
/// `postgres://` / `postgresql://` (also SQLAlchemy's `postgresql+psycopg2://`).
pub(crate) fn normalize_uri(uri: &str) -> Result<String> {
    if let Some(rest) = uri.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        let path = if path.starts_with("//") {
            &path[1..]
        } else {
            path
        };
        if path.is_empty() {
            return Err(Error::invalid_option(
                "catalog",
                uri,
                "missing SQLite database path",
            ));
        }
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        if let Some(parent) = std::path::Path::new(path).parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                return Err(Error::invalid_option(
                    "catalog",
                    uri,
                    format!("directory {} does not exist", parent.display()),
                ));
            }
        }
        let mut q = if query.is_empty() {
            String::new()
        } else {
            format!("{query}&")
        };
        if !q.contains("mode=") {
            q.push_str("mode=rwc");
        }
        return Ok(format!("sqlite://{path}?{}", q.trim_end_matches('&')));
    }
    for prefix in [
        "postgresql+psycopg2://",
        "postgresql+psycopg://",
        "postgresql://",
        "postgres://",
    ] {
        if let Some(rest) = uri.strip_prefix(prefix) {
            return Ok(format!("postgres://{rest}"));
        }
    }
    Err(Error::invalid_option(
        "catalog",
        redact(uri),
        "expected sqlite:///path.db or postgres://user@host:port/db",
    ))
}

/// The URI as it may be shown: floe's one masking function (userinfo password, secret query
/// parameters, any registered secret).
pub(crate) fn redact(uri: &str) -> String {
    super::config::redact_uri(uri)
}

pub(crate) fn describe_sqlx(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => {
            let msg = db.message();
            if msg.contains("locked") || msg.contains("busy") {
                format!("catalog database is locked by another process ({msg})")
            } else {
                msg.to_string()
            }
        }
        sqlx::Error::Io(io) => format!("cannot connect: {io}"),
        sqlx::Error::PoolTimedOut => {
            "timed out waiting for a catalog connection (is the server up?)".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_uris_of_floe_and_sqlalchemy_normalize_alike() {
        assert_eq!(
            normalize_uri("sqlite:///tmp/c.db").unwrap(),
            "sqlite:///tmp/c.db?mode=rwc"
        );
        assert_eq!(
            normalize_uri("sqlite:////tmp/c.db").unwrap(),
            "sqlite:///tmp/c.db?mode=rwc"
        );
        assert_eq!(
            normalize_uri("postgresql+psycopg2://u@h/db").unwrap(),
            "postgres://u@h/db"
        );
        assert!(normalize_uri("mysql://x").is_err());
        assert!(normalize_uri("sqlite:///no/such/dir/c.db").is_err());
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:****@h:5432/db"
        );
        assert_eq!(
            redact("postgres://u@h:5432/db?password=secret&sslmode=disable"),
            "postgres://u@h:5432/db?password=****&sslmode=disable"
        );
        assert_eq!(redact("sqlite:///x.db"), "sqlite:///x.db");
    }
}
