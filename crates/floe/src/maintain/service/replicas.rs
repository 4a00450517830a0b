//! Replicas of the service dividing the watched tables ([`crate::coordination::replicas`]):
//! a heartbeat renewed in the background (every third of the lease TTL, so that a long pass
//! never lets it lapse), the live replicas read at each pass, and each table left to the
//! replica that rendezvous hashing names. A change in the live replicas (one joined, died or
//! left) wakes the service for a pass at once, so a dead replica's tables move within its TTL.

use std::sync::Arc;

use super::Maintainer;
use crate::base::error::Result;
use crate::coordination::replicas::owner;
use crate::coordination::Store;
use crate::maintain::state::ReplicaView;

/// What the background heartbeat needs.
struct Beat {
    store: Arc<Store>,
    group: String,
    holder: String,
    instance: String,
    ttl: std::time::Duration,
}

impl Beat {
    /// Renews the row; the live replicas' names after it.
    async fn beat(&self) -> Result<Vec<String>> {
        let now = self.store.now_ms().await?;
        self.store
            .heartbeat(&self.group, &self.holder, &self.instance, self.ttl, now)
            .await?;
        Ok(self
            .store
            .live_replicas(&self.group, now)
            .await?
            .into_iter()
            .map(|r| r.holder)
            .collect())
    }
}

impl Maintainer {
    fn beat_of(&self) -> Option<Beat> {
        let group = self.opts.replica_group.clone()?;
        Some(Beat {
            store: self.store.clone(),
            group,
            holder: self.opts.holder.clone(),
            instance: self.instance.clone(),
            ttl: self.opts.lease_ttl,
        })
    }

    /// Starts dividing the tables (the service, when a replica group is set and this is no dry
    /// run): the background heartbeat, whose handle the caller aborts at the end.
    pub(super) fn start_dividing(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        if self.opts.dry_run {
            return None;
        }
        let beat = self.beat_of()?;
        self.dividing = true;
        let (membership, log) = (self.membership.clone(), self.log.clone());
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(beat.ttl / 3);
            let mut seen: Option<Vec<String>> = None;
            let mut failing = false;
            loop {
                tick.tick().await;
                match beat.beat().await {
                    Ok(live) => {
                        if failing {
                            log("heartbeat renewed: the replica is registered again");
                            failing = false;
                        }
                        if seen.as_ref().is_some_and(|s| *s != live) {
                            membership.notify_one();
                        }
                        seen = Some(live);
                    }
                    Err(e) => {
                        // Said once per outage, not every tick; the passes say it too.
                        if !failing {
                            log(&format!(
                                "waiting: heartbeat of replica {} failed: {e}; the other \
                                 replicas take its tables once it is a lease TTL old",
                                beat.holder
                            ));
                        }
                        failing = true;
                    }
                }
            }
        }))
    }

    /// A clean stop: this replica's row deleted, so its tables move at the others' next pass.
    pub(super) async fn stop_dividing(&mut self, heartbeat: Option<tokio::task::JoinHandle<()>>) {
        if let Some(h) = heartbeat {
            h.abort();
        }
        if !self.dividing {
            return;
        }
        if let Some(group) = &self.opts.replica_group {
            if let Err(e) = self
                .store
                .leave(group, &self.opts.holder, &self.instance)
                .await
            {
                (self.log)(&format!(
                    "could not leave replica group {group} (its row expires after the TTL): {e}"
                ));
            }
        }
    }

    /// At the start of a pass: the live replicas (after renewing this one), or `None` when
    /// this service maintains every watched table.
    pub(super) async fn live_replicas(&self) -> Result<Option<Vec<String>>> {
        if !self.dividing {
            return Ok(None);
        }
        match self.beat_of() {
            Some(b) => b.beat().await.map(Some),
            None => Ok(None),
        }
    }

    /// Whether this replica maintains table `scope`, given the live replicas.
    pub(super) fn owns(&self, scope: &str, live: &Option<Vec<String>>) -> bool {
        match live {
            None => true,
            Some(live) => owner(scope, live).is_none_or(|o| o == self.opts.holder),
        }
    }

    /// The view a pass reports.
    pub(super) fn replica_view(
        &self,
        live: &Option<Vec<String>>,
        owned: usize,
        elsewhere: usize,
    ) -> Option<ReplicaView> {
        let live = live.as_ref()?;
        Some(ReplicaView {
            group: self.opts.replica_group.clone().unwrap_or_default(),
            live: live.clone(),
            owned_tables: owned,
            tables_elsewhere: elsewhere,
        })
    }
}
