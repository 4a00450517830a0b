//! The replicas of `floe maintain` that divide the watched tables among themselves.
//!
//! Table `floe_maintain_replicas(replica_group, holder, instance, started_ms, expires_ms)`: one
//! row per live replica, renewed by its heartbeat ([`Store::heartbeat`]) every third of the
//! lease TTL. A replica whose row was not renewed for a TTL is dead; a replica that stops
//! cleanly deletes its row ([`Store::leave`]) so that its tables move at once.
//!
//! **Who maintains a table**: of the live replicas of a group, the one that [`owner`] names:
//! rendezvous hashing (highest random weight, Thaler and Ravishankar, 1998). Every replica
//! computes the same answer from the same list, without talking to the others, and when a
//! replica joins or dies only the tables it gains or held move (about 1/n of them), never the
//! tables of the replicas that stay. During a change of membership two replicas may briefly
//! both consider a table theirs (one has seen the change, the other not yet): the table's
//! lease ([`Store::try_acquire`]) still lets only one of them run a job on it, so the
//! division saves work and never decides safety.
//!
//! Replicas divide only within their **group** (`--replica-group`; by default a digest of what
//! they watch): two maintainers that watch different catalogs or tables never hand each other
//! tables the other does not watch.
//!
//! A replica also writes a per-process `instance` id: two live processes that were given the
//! same holder name would take each other's leases as their own (a lease is the holder's),
//! so a heartbeat that finds the name live under another instance is refused, and the
//! service reports it.

use std::time::Duration;

use sqlx::Row;

use super::{expiry, Store};
use crate::base::error::{Error, Result};

/// A live replica.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Replica {
    pub holder: String,
    pub started_ms: i64,
    pub expires_ms: i64,
}

/// Rows of replicas dead for longer than this are deleted by the next heartbeat.
const FORGET_AFTER_MS: i64 = 24 * 3_600_000;

impl Store {
    pub(super) async fn ensure_replica_schema(&self) -> Result<()> {
        self.create_if_missing(
            "CREATE TABLE IF NOT EXISTS floe_maintain_replicas (\
               replica_group VARCHAR(255) NOT NULL, \
               holder VARCHAR(255) NOT NULL, \
               instance VARCHAR(36) NOT NULL, \
               started_ms BIGINT NOT NULL, \
               expires_ms BIGINT NOT NULL, \
               PRIMARY KEY (replica_group, holder))",
            "SELECT holder FROM floe_maintain_replicas WHERE 1 = 0",
        )
        .await
    }

    /// Registers or renews replica `holder` (process `instance`) of `group` until
    /// `now_ms + ttl`. Refused when the holder name is live under another instance (two
    /// processes given one `--holder`).
    pub async fn heartbeat(
        &self,
        group: &str,
        holder: &str,
        instance: &str,
        ttl: Duration,
        now_ms: i64,
    ) -> Result<()> {
        let done = sqlx::query(
            "INSERT INTO floe_maintain_replicas \
               (replica_group, holder, instance, started_ms, expires_ms) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (replica_group, holder) DO UPDATE \
             SET instance = excluded.instance, expires_ms = excluded.expires_ms, \
                 started_ms = CASE WHEN floe_maintain_replicas.instance = excluded.instance \
                              THEN floe_maintain_replicas.started_ms \
                              ELSE excluded.started_ms END \
             WHERE floe_maintain_replicas.instance = $6 \
                OR floe_maintain_replicas.expires_ms <= $7",
        )
        .bind(group)
        .bind(holder)
        .bind(instance)
        .bind(now_ms)
        .bind(expiry(now_ms, ttl))
        .bind(instance)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        if done.rows_affected() == 0 {
            return Err(Error::Refused {
                operation: "register this maintainer".into(),
                reason: format!(
                    "another live maintainer of replica group {group} already runs as {holder} \
                     (its heartbeat is not older than the lease TTL): give every replica its own \
                     --holder (the default, host:pid, is unique)"
                ),
            });
        }
        sqlx::query("DELETE FROM floe_maintain_replicas WHERE expires_ms < $1")
            .bind(now_ms.saturating_sub(FORGET_AFTER_MS))
            .execute(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The live replicas of `group` (`expires_ms > now_ms`), by holder name.
    pub async fn live_replicas(&self, group: &str, now_ms: i64) -> Result<Vec<Replica>> {
        let rows = sqlx::query(
            "SELECT holder, started_ms, expires_ms FROM floe_maintain_replicas \
             WHERE replica_group = $1 AND expires_ms > $2 ORDER BY holder",
        )
        .bind(group)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                Ok(Replica {
                    holder: r.try_get(0)?,
                    started_ms: r.try_get(1)?,
                    expires_ms: r.try_get(2)?,
                })
            })
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(|e| self.err(e))
    }

    /// Deletes this replica's row (a clean stop): its tables move to the others at their next
    /// pass instead of after a TTL.
    pub async fn leave(&self, group: &str, holder: &str, instance: &str) -> Result<()> {
        sqlx::query(
            "DELETE FROM floe_maintain_replicas \
             WHERE replica_group = $1 AND holder = $2 AND instance = $3",
        )
        .bind(group)
        .bind(holder)
        .bind(instance)
        .execute(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(())
    }
}

/// The replica (of `replicas`, holder names) that maintains table `scope`: the one of highest
/// weight `hash(replica, scope)` (rendezvous hashing); `None` when there is none.
pub fn owner<'a>(scope: &str, replicas: &'a [String]) -> Option<&'a str> {
    replicas
        .iter()
        .max_by_key(|r| (weight(r, scope), r.as_str()))
        .map(String::as_str)
}

/// A 64-bit hash of `(replica, scope)`, the same in every process and every build: FNV-1a
/// over both (separated by a byte no UTF-8 text holds), then SplitMix64's finalizer to spread
/// FNV's weak low bits. Written here because the standard library's hasher is not guaranteed
/// stable across Rust releases, and replicas built by different releases must agree.
pub fn weight(replica: &str, scope: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in replica
        .as_bytes()
        .iter()
        .chain(&[0xff])
        .chain(scope.as_bytes())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A replica group name derived from what a maintainer watches (catalog names, namespace and
/// table patterns): maintainers started with the same selection share it.
pub fn default_group(parts: &[&str]) -> String {
    format!(
        "auto-{:016x}",
        weight("floe-replica-group", &parts.join("\u{1f}"))
    )
}
