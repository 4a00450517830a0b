//! Hand-offs of `floe ingest --group`: data files a worker wrote and the positions they cover,
//! waiting for the group's coordinator to commit them (`crate::ingest::group`).
//!
//! Table `floe_ingest_handoffs(handoff_id PK, scope, worker, created_ms, from_positions,
//! to_positions, files)`: positions as JSON objects (stream -> next position), files as a JSON
//! array of Iceberg data files (iceberg's `serialize_data_file_to_json`). A row lives from the
//! worker's insert until a coordinator committed it (or found it committed, or refused it).

use sqlx::Row;

use crate::base::error::Result;
/// Next position per stream (as `floe ingest` stores them in snapshot summaries).
pub type Positions = std::collections::BTreeMap<String, i64>;

use super::Store;

/// One worker's hand-off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// Time-ordered (UUID v7): the order hand-offs are committed in.
    pub id: String,
    /// The table (`catalog.ns.table`).
    pub scope: String,
    pub worker: String,
    pub created_ms: i64,
    /// Positions of the streams before the hand-off's records (absent: from the start).
    pub from: Positions,
    /// Positions after them.
    pub to: Positions,
    /// The data files, as iceberg's data file JSON.
    pub files: Vec<String>,
}

impl Store {
    pub(super) async fn ensure_handoff_schema(&self) -> Result<()> {
        self.create_if_missing(
            "CREATE TABLE IF NOT EXISTS floe_ingest_handoffs (\
               handoff_id VARCHAR(36) NOT NULL PRIMARY KEY, \
               scope VARCHAR(1000) NOT NULL, \
               worker VARCHAR(255) NOT NULL, \
               created_ms BIGINT NOT NULL, \
               from_positions TEXT NOT NULL, \
               to_positions TEXT NOT NULL, \
               files TEXT NOT NULL)",
            "SELECT handoff_id FROM floe_ingest_handoffs WHERE 1 = 0",
        )
        .await
    }

    /// Records a hand-off (its id is made here, time-ordered) and returns the id.
    pub async fn add_handoff(
        &self,
        scope: &str,
        worker: &str,
        from: &Positions,
        to: &Positions,
        files: &[String],
    ) -> Result<String> {
        let id = uuid::Uuid::now_v7().to_string();
        sqlx::query(
            "INSERT INTO floe_ingest_handoffs \
             (handoff_id, scope, worker, created_ms, from_positions, to_positions, files) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&id)
        .bind(scope)
        .bind(worker)
        .bind(chrono::Utc::now().timestamp_millis())
        .bind(self.json(serde_json::to_string(from))?)
        .bind(self.json(serde_json::to_string(to))?)
        .bind(self.json(serde_json::to_string(files))?)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(id)
    }

    /// The hand-offs waiting for `scope`, oldest first.
    pub async fn handoffs(&self, scope: &str) -> Result<Vec<Handoff>> {
        let rows = sqlx::query(
            "SELECT handoff_id, scope, worker, created_ms, from_positions, to_positions, files \
             FROM floe_ingest_handoffs WHERE scope = $1 ORDER BY handoff_id",
        )
        .bind(scope)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let get = |i: usize| -> Result<String> { row.try_get(i).map_err(|e| self.err(e)) };
            out.push(Handoff {
                id: get(0)?,
                scope: get(1)?,
                worker: get(2)?,
                created_ms: row.try_get(3).map_err(|e| self.err(e))?,
                from: self.json(serde_json::from_str(&get(4)?))?,
                to: self.json(serde_json::from_str(&get(5)?))?,
                files: self.json(serde_json::from_str(&get(6)?))?,
            });
        }
        Ok(out)
    }

    fn json<T>(&self, r: serde_json::Result<T>) -> Result<T> {
        r.map_err(|e| {
            crate::base::error::Error::catalog(
                self.display_uri.clone(),
                format!("ingest hand-off: not valid JSON: {e}"),
            )
        })
    }

    /// Removes hand-offs (committed, or refused).
    pub async fn remove_handoffs(&self, ids: &[String]) -> Result<()> {
        for id in ids {
            sqlx::query("DELETE FROM floe_ingest_handoffs WHERE handoff_id = $1")
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}
