//! Scale-out of one stream: `floe ingest --group NAME` on several processes, each reading a
//! subset of the source's partitions into the same table, with one commit per interval for all
//! of them (Kafka Connect's Iceberg sink model: workers write files, one coordinator commits).
//!
//! ```text
//!  worker A ─┐ files + (from, to) positions            ┌─ coordinator (the worker holding the
//!  worker B ─┼──> hand-offs (SQL store) ──────────────>┤   group's lease): one append with
//!  worker C ─┘   floe_ingest_handoffs                  └─   every hand-off's files and positions
//! ```
//!
//! - **Workers** write their files at each interval and record a hand-off: the data files and
//!   the positions of the streams they advanced, from and to. A worker resumes from the
//!   group's positions in the table overlaid with the hand-offs still waiting (read in that
//!   order: the store first, so a hand-off committed meanwhile is in the table when it is read).
//! - **The coordinator** is whichever worker holds the group's lease (`ingest:<table>` in the
//!   lease store; a dead coordinator's lease expires after its TTL and another worker takes
//!   over). At each interval it commits every waiting hand-off in one append, whose summary
//!   holds the group's positions for every stream (`floe.writer-id` = the group), then removes
//!   them from the store.
//! - **Exactly-once**: positions advance per stream in a chain. A hand-off is committed only
//!   when its `from` positions are where the chain is (the table's positions, plus the
//!   hand-offs accepted before it); one whose `to` positions the table already holds was
//!   committed before (the coordinator died before removing it) and is dropped; any other
//!   (a zombie worker reading streams another one took over) is refused and its files
//!   deleted. A worker checks the same chain before handing off and stops with an error
//!   instead of handing off data another worker already covered. The commit itself is fenced
//!   on the group's positions it started from, so two coordinators cannot both commit.
//! - **Failures**: a worker killed before its hand-off leaves orphans and its records are read
//!   again by its restart; a coordinator killed before its commit leaves the hand-offs for the
//!   next; killed after it, the next one finds them committed. Hand-off files are never
//!   deleted by a failed commit (a later coordinator commits them).

use std::sync::Arc;
use std::time::Duration;

use iceberg::spec::{
    deserialize_data_file_from_json, serialize_data_file_to_json, DataFile, FormatVersion,
};
use iceberg::TableIdent;
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::commit::Ledger;
use crate::commit::{Committer, SnapshotUpdate};
use crate::coordination::handoffs::Handoff;
use crate::coordination::{LeaseOutcome, Store};
use crate::ingest::source::{Positions, Resolver};
use crate::table::exactly_once::{
    already_committed, chain_head, continues, current_positions, fence_group, summary,
};
use crate::table::ident_string;

/// How a worker joins its group.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// This worker's name (hand-offs, the coordinator lease): unique in the group.
    pub worker: String,
    /// The store of hand-offs and the coordinator lease (a SQL database every worker reaches).
    pub store_uri: String,
    /// A coordinator that does not renew its lease for this long is replaced.
    pub lease_ttl: Duration,
}

/// One data file of a hand-off, as stored.
#[derive(Serialize, Deserialize)]
struct HandedFile {
    spec_id: i32,
    data_file: String,
}

/// A stored file entry of hand-off `id`, as a data file of `md`.
fn decode(md: &iceberg::spec::TableMetadata, id: &str, stored: &str) -> Result<DataFile> {
    let bad = |reason: String| Error::Refused {
        operation: "commit of a hand-off".into(),
        reason: format!("hand-off {id}: {reason}"),
    };
    let hf: HandedFile =
        serde_json::from_str(stored).map_err(|e| bad(format!("unreadable file entry: {e}")))?;
    let spec = md
        .partition_spec_by_id(hf.spec_id)
        .ok_or_else(|| bad(format!("partition spec {} is not the table's", hf.spec_id)))?;
    let schema = md.current_schema();
    let pt = spec.partition_type(schema)?;
    Ok(deserialize_data_file_from_json(
        &hf.data_file,
        hf.spec_id,
        &pt,
        schema,
    )?)
}

/// What a coordinator committed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coordinated {
    /// The snapshot committed (0: nothing to commit, only hand-offs found committed or
    /// refused).
    pub snapshot_id: i64,
    pub handoffs: u64,
    pub data_files: u64,
    pub records: u64,
    /// Hand-offs found already committed (a coordinator died before removing them).
    pub already_committed: u64,
    /// Hand-offs refused: their positions do not continue the table's (a zombie worker).
    pub refused: Vec<String>,
}

/// A worker of a group.
pub struct Group {
    store: Arc<Store>,
    /// The table, as the lease and hand-offs name it.
    scope: String,
    writer_id: String,
    opts: GroupOptions,
}

/// The position of every stream once `handoffs` (in order) apply on `table_positions`.
fn head_after(table_positions: &Positions, handoffs: &[Handoff]) -> Positions {
    chain_head(table_positions, handoffs.iter().map(|h| &h.to))
}

/// The head of the group's chain: the positions in the table overlaid with the hand-offs still
/// waiting, the store read first (a hand-off removed meanwhile was committed before, so it is
/// in the table read after).
async fn chain_positions(
    store: &Store,
    scope: &str,
    writer_id: &str,
    catalog: &Catalog,
    ident: &TableIdent,
) -> Result<Positions> {
    let waiting = store.handoffs(scope).await?;
    let table = catalog.load_table(ident).await?;
    let in_table = current_positions(&table, writer_id);
    Ok(head_after(&in_table, &waiting))
}

impl Group {
    /// The group's name: the writer id of its commits (and, without `group.id`, the Kafka
    /// consumer group its workers join).
    pub fn name(&self) -> &str {
        &self.writer_id
    }

    /// Joins the group writing `ident` under `writer_id`.
    pub async fn join(
        catalog: &Catalog,
        ident: &TableIdent,
        writer_id: &str,
        opts: GroupOptions,
    ) -> Result<Group> {
        let store = Arc::new(Store::connect(&opts.store_uri).await?);
        Ok(Group {
            store,
            scope: format!("{}.{}", catalog.name(), ident_string(ident)),
            writer_id: writer_id.to_string(),
            opts,
        })
    }

    fn lease_scope(&self) -> String {
        format!("ingest:{}", self.scope)
    }

    /// Where this worker resumes: the group's positions in the table, overlaid with the
    /// hand-offs still waiting (the store is read before the table).
    pub async fn resume_positions(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
    ) -> Result<Positions> {
        chain_positions(&self.store, &self.scope, &self.writer_id, catalog, ident).await
    }

    /// [`Group::resume_positions`] as a function a source calls whenever its own group
    /// protocol assigns it streams (Kafka's consumer group): each call reads the chain anew.
    pub fn resolver(&self, catalog: &Catalog, ident: &TableIdent) -> Resolver {
        let (store, scope) = (self.store.clone(), self.scope.clone());
        let (writer_id, catalog, ident) = (self.writer_id.clone(), catalog.clone(), ident.clone());
        Arc::new(move || {
            let (store, scope) = (store.clone(), scope.clone());
            let (writer_id, catalog, ident) = (writer_id.clone(), catalog.clone(), ident.clone());
            Box::pin(
                async move { chain_positions(&store, &scope, &writer_id, &catalog, &ident).await },
            )
        })
    }

    /// Hands off `files` covering the streams of `to` from `from`; refused when the chain of
    /// one of those streams is no longer at `from` (another worker covered it).
    ///
    /// The store is read before the table (as in [`Group::resume_positions`]): a coordinator
    /// commits a hand-off before removing it, so one removed meanwhile is in the table read.
    pub async fn hand_off(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        files: &[DataFile],
        from: &Positions,
        to: &Positions,
    ) -> Result<String> {
        let waiting = self.store.handoffs(&self.scope).await?;
        let table = &catalog.load_table_kept(ident).await?;
        let in_table = current_positions(table, &self.writer_id);
        let head = head_after(&in_table, &waiting);
        if !continues(&head, from, to) {
            return Err(Error::Refused {
                operation: format!("hand-off of worker '{}'", self.opts.worker),
                reason: format!(
                    "another worker of group '{}' covered these streams (the group is at {:?}, this worker at {from:?}); restart to resume from the table",
                    self.writer_id,
                    to.keys().map(|s| (s, head.get(s))).collect::<Vec<_>>()
                ),
            });
        }
        let md = table.metadata();
        let spec = md.default_partition_spec();
        let partition_type = spec.partition_type(md.current_schema())?;
        let mut stored = Vec::with_capacity(files.len());
        for f in files {
            let data_file =
                serialize_data_file_to_json(f.clone(), &partition_type, FormatVersion::V2)?;
            stored.push(
                serde_json::to_string(&HandedFile {
                    spec_id: spec.spec_id(),
                    data_file,
                })
                .expect("serializable"),
            );
        }
        self.store
            .add_handoff(&self.scope, &self.opts.worker, from, to, &stored)
            .await
    }

    /// The coordinator's turn: when this worker holds (or can take) the group's lease, commits
    /// every waiting hand-off in one append. `None` when another worker coordinates.
    pub async fn coordinate(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        source: &str,
    ) -> Result<Option<Coordinated>> {
        // The store's clock, as `floe maintain` takes leases: workers' clocks may disagree.
        let now = self.store.now_ms().await?;
        match self
            .store
            .try_acquire(
                &self.lease_scope(),
                &self.opts.worker,
                self.opts.lease_ttl,
                now,
            )
            .await?
        {
            LeaseOutcome::HeldBy { .. } => return Ok(None),
            LeaseOutcome::Acquired => {}
        }
        let waiting = self.store.handoffs(&self.scope).await?;
        if waiting.is_empty() {
            return Ok(Some(Coordinated::default()));
        }
        let table = catalog.load_table_kept(ident).await?;
        let start = current_positions(&table, &self.writer_id);
        let mut head = start.clone();
        let mut done = Coordinated::default();
        let (mut accepted, mut drop_ids, mut refused_files) = (vec![], vec![], vec![]);
        for h in &waiting {
            if already_committed(&head, &h.to) && !h.to.is_empty() {
                done.already_committed += 1;
                drop_ids.push(h.id.clone());
            } else if continues(&head, &h.from, &h.to) {
                for (s, p) in &h.to {
                    head.insert(s.clone(), *p);
                }
                accepted.push(h);
            } else {
                done.refused.push(format!(
                    "{} from worker {}: positions {:?} do not continue the group's {:?}",
                    h.id,
                    h.worker,
                    h.from,
                    h.to.keys().map(|s| (s, head.get(s))).collect::<Vec<_>>()
                ));
                drop_ids.push(h.id.clone());
                refused_files.extend(h.files.iter().cloned());
            }
        }
        let md = table.metadata();
        let mut files: Vec<DataFile> = vec![];
        for h in &accepted {
            for stored in &h.files {
                files.push(decode(md, &h.id, stored)?);
            }
        }
        if !accepted.is_empty() {
            done.handoffs = accepted.len() as u64;
            done.data_files = files.len() as u64;
            done.records = files.iter().map(|f| f.record_count()).sum();
            let props = summary(&self.writer_id, source, &head);
            let writer_id = self.writer_id.clone();
            let expected = start.clone();
            let out = Committer::new(catalog, ident)
                .on(table.clone())
                .retrying_conflicts()
                // A later coordinator commits these files: never delete them on failure.
                .keep_files_on_failure()
                .with_precondition(move |t| fence_group(t, &writer_id, &expected))
                .commit(SnapshotUpdate::append(files).with_summary_properties(props))
                .await?;
            done.snapshot_id = out.snapshot_id;
            drop_ids.extend(accepted.iter().map(|h| h.id.clone()));
        }
        self.store.remove_handoffs(&drop_ids).await?;
        if !refused_files.is_empty() {
            let paths: Vec<String> = refused_files
                .iter()
                .filter_map(|stored| decode(md, "refused", stored).ok())
                .map(|f| f.file_path().to_string())
                .collect();
            Ledger::of(&table).with(paths).discard().await;
        }
        Ok(Some(done))
    }

    /// Before leaving: coordinates until no hand-off of this worker waits, for at most the
    /// lease TTL and a little more (another worker may hold the lease, or a dead one until it
    /// expires). Says what it waits for; returns the last commit made as the coordinator.
    pub async fn finish(
        &self,
        catalog: &Catalog,
        ident: &TableIdent,
        source: &str,
    ) -> Result<Option<Coordinated>> {
        let deadline = std::time::Instant::now() + self.opts.lease_ttl + Duration::from_secs(2);
        let mut last = None;
        loop {
            if let Some(c) = self.coordinate(catalog, ident, source).await? {
                if c.snapshot_id != 0 {
                    last = Some(c);
                }
            }
            let mine = self
                .store
                .handoffs(&self.scope)
                .await?
                .iter()
                .filter(|h| h.worker == self.opts.worker)
                .count();
            if mine == 0 {
                return Ok(last);
            }
            if std::time::Instant::now() >= deadline {
                tracing::warn!(
                    worker = %self.opts.worker,
                    "{mine} hand-off(s) of this worker still wait for the group's coordinator; the next one commits them"
                );
                return Ok(last);
            }
            tracing::warn!(
                worker = %self.opts.worker,
                "waiting for the group's coordinator lease to commit {mine} hand-off(s) before stopping"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Leaves the group: frees the coordinator lease if held.
    pub async fn leave(&self) {
        let _ = self
            .store
            .release(&self.lease_scope(), &self.opts.worker)
            .await;
        self.store.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(to: &[(&str, i64)]) -> Handoff {
        Handoff {
            id: "1".into(),
            scope: "t".into(),
            worker: "w".into(),
            created_ms: 0,
            from: Positions::new(),
            to: to.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
            files: vec![],
        }
    }

    #[test]
    fn waiting_hand_offs_overlay_the_table_positions() {
        let table: Positions = [("k:0".to_string(), 10)].into();
        let head = head_after(&table, &[h(&[("k:0", 20)]), h(&[("k:1", 5)])]);
        let want: Positions = [("k:0".to_string(), 20), ("k:1".to_string(), 5)].into();
        assert_eq!(head, want);
    }
}
