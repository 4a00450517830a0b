//! Reachability: every file a set of snapshots needs (Iceberg spec v2, "Snapshots": a snapshot
//! is its manifest list, the manifests it lists and the live entries of those manifests; plus
//! the statistics files attached to it).
//!
//! This is the ground truth of every delete floe makes: expiry deletes what only expired
//! snapshots reached, orphan removal deletes what no snapshot reaches. Any manifest list or
//! manifest that cannot be read fails the whole computation: a partial answer would make live
//! files look unreferenced.

use std::collections::{HashMap, HashSet};

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataContentType, ManifestContentType, ManifestFile};
use iceberg::table::Table;

use crate::base::error::{Error, Result};

/// Manifest lists and manifests read concurrently.
const READ_CONCURRENCY: usize = 16;

/// What kind of file a reachable path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Data,
    PositionDeletes,
    EqualityDeletes,
    Manifest,
    ManifestList,
    Statistics,
    Metadata,
}

impl FileKind {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Data => "data",
            FileKind::PositionDeletes => "position-deletes",
            FileKind::EqualityDeletes => "equality-deletes",
            FileKind::Manifest => "manifest",
            FileKind::ManifestList => "manifest-list",
            FileKind::Statistics => "statistics",
            FileKind::Metadata => "metadata",
        }
    }

    fn of_content(c: DataContentType) -> Self {
        match c {
            DataContentType::Data => FileKind::Data,
            DataContentType::PositionDeletes => FileKind::PositionDeletes,
            DataContentType::EqualityDeletes => FileKind::EqualityDeletes,
        }
    }
}

/// A reachable file: its kind and size when the metadata records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reached {
    pub kind: FileKind,
    pub size: Option<u64>,
}

/// The files a set of snapshots reaches, by path.
#[derive(Debug, Default, Clone)]
pub struct Reachable {
    pub files: HashMap<String, Reached>,
}

impl Reachable {
    /// True when `path` is reachable.
    pub fn contains(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Files in `self` that `other` does not reach.
    pub fn minus(&self, other: &Reachable) -> Vec<(String, Reached)> {
        let mut out: Vec<_> = self
            .files
            .iter()
            .filter(|(p, _)| !other.contains(p))
            .map(|(p, r)| (p.clone(), *r))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Merges `other` into `self`.
    pub fn extend(&mut self, other: Reachable) {
        self.files.extend(other.files);
    }

    pub(crate) fn add(&mut self, path: &str, kind: FileKind, size: Option<u64>) {
        self.files
            .entry(path.to_string())
            .or_insert(Reached { kind, size });
    }
}

/// A manifest's length and live entries.
type ManifestReach = (Option<u64>, Vec<(String, Reached)>);

/// The manifests of a set of snapshots, each read once, kept in memory so reachability of many
/// subsets (all snapshots, the retained ones, the current one) costs one read.
#[derive(Debug, Default)]
pub struct ReachIndex {
    /// Snapshot id -> its manifest list path and the manifest paths it lists.
    lists: HashMap<i64, (String, Vec<String>)>,
    /// Manifest path -> (manifest length, live entries).
    manifests: HashMap<String, ManifestReach>,
    /// Snapshot id -> statistics files attached to it.
    statistics: HashMap<i64, Vec<(String, Option<u64>)>>,
    /// With [`ReachIndex::load_with_live`]: the live entries of one snapshot, in full.
    live: Vec<crate::table::manifests::LiveFile>,
}

impl ReachIndex {
    /// Reads the manifest lists of `snapshot_ids` (ids not in the metadata are ignored) and every
    /// distinct manifest they list, `READ_CONCURRENCY` at a time.
    pub async fn load(table: &Table, snapshot_ids: &[i64]) -> Result<Self> {
        Self::load_with_live(table, snapshot_ids, None).await
    }

    /// Like [`ReachIndex::load`], and also keeps the live entries (data file, spec, snapshot,
    /// sequence numbers) of the manifests snapshot `live_of` lists, from the same single read
    /// of each manifest; [`ReachIndex::take_live`] hands them out. `live_of` must be one of
    /// `snapshot_ids`.
    pub async fn load_with_live(
        table: &Table,
        snapshot_ids: &[i64],
        live_of: Option<i64>,
    ) -> Result<Self> {
        let mut index = ReachIndex::default();
        index.add(table, snapshot_ids, live_of).await?;
        Ok(index)
    }

    /// Reads what the index lacks for `snapshot_ids`: the manifest lists of snapshots not yet
    /// in it and the manifests none of its lists named. A retried commit (expiry racing a
    /// streaming writer) pays for the new snapshots only.
    pub async fn extend_to(&mut self, table: &Table, snapshot_ids: &[i64]) -> Result<()> {
        self.add(table, snapshot_ids, None).await
    }

    async fn add(
        &mut self,
        table: &Table,
        snapshot_ids: &[i64],
        live_of: Option<i64>,
    ) -> Result<()> {
        let index = self;
        let md = table.metadata();
        let snapshots: Vec<_> = snapshot_ids
            .iter()
            .filter(|id| !index.lists.contains_key(id))
            .filter_map(|id| md.snapshot_by_id(*id).cloned())
            .collect();
        let wanted: HashSet<i64> = snapshots.iter().map(|s| s.snapshot_id()).collect();
        let stats = md
            .statistics_iter()
            .map(|s| (s.snapshot_id, &s.statistics_path, s.file_size_in_bytes))
            .chain(
                md.partition_statistics_iter()
                    .map(|s| (s.snapshot_id, &s.statistics_path, s.file_size_in_bytes)),
            );
        for (id, path, size) in stats {
            if wanted.contains(&id) {
                index
                    .statistics
                    .entry(id)
                    .or_default()
                    .push((path.clone(), u64::try_from(size).ok()));
            }
        }
        let lists: Vec<(i64, String, Vec<ManifestFile>)> =
            futures::stream::iter(snapshots.into_iter().map(|s| {
                let table = table.clone();
                // Each on its own task: lists and manifests are decoded on every core.
                crate::table::manifests::spawned(async move {
                    let list = s.manifest_list().to_string();
                    let files = table
                        .manifest_list_reader(&s)
                        .load()
                        .await
                        .map(|l| l.consume_entries().into_iter().collect::<Vec<_>>())
                        .map_err(|e| unreadable(&list, e))?;
                    Ok::<_, Error>((s.snapshot_id(), list, files))
                })
            }))
            .buffer_unordered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        let mut to_read: HashMap<String, ManifestFile> = HashMap::new();
        let mut keep_live: HashSet<String> = HashSet::new();
        for (id, list, files) in lists {
            if Some(id) == live_of {
                keep_live.extend(files.iter().map(|m| m.manifest_path.clone()));
            }
            let paths = files.iter().map(|m| m.manifest_path.clone()).collect();
            index.lists.insert(id, (list, paths));
            for m in files {
                if !index.manifests.contains_key(&m.manifest_path)
                    || keep_live.contains(&m.manifest_path)
                {
                    to_read.entry(m.manifest_path.clone()).or_insert(m);
                }
            }
        }
        let mut loads = futures::stream::iter(to_read.into_values().map(|m| {
            let io = table.file_io().clone();
            crate::table::manifests::spawned(async move {
                let path = m.manifest_path.clone();
                let length = u64::try_from(m.manifest_length).ok();
                let content = m.content;
                let spec_id = m.partition_spec_id;
                crate::table::opaque::load_manifest(&m, &io)
                    .await
                    .map(|manifest| (path.clone(), length, content, spec_id, manifest))
                    .map_err(|e| unreadable(&path, e))
            })
        }))
        .buffer_unordered(READ_CONCURRENCY);
        while let Some(loaded) = loads.next().await {
            let (path, length, content, spec_id, manifest) = loaded?;
            if keep_live.contains(&path) {
                index.live.extend(
                    manifest
                        .entries()
                        .iter()
                        .filter(|e| e.is_alive())
                        .map(|e| crate::table::manifests::live_file(e, spec_id)),
                );
            }
            let entries = manifest
                .entries()
                .iter()
                .filter(|e| e.is_alive())
                .map(|e| {
                    let f = e.data_file();
                    let kind = match content {
                        ManifestContentType::Data => FileKind::Data,
                        ManifestContentType::Deletes => FileKind::of_content(f.content_type()),
                    };
                    (
                        f.file_path().to_string(),
                        Reached {
                            kind,
                            size: Some(f.file_size_in_bytes()),
                        },
                    )
                })
                .collect();
            index.manifests.insert(path, (length, entries));
        }
        Ok(())
    }

    /// The live entries kept by [`ReachIndex::load_with_live`] (empty after the first call).
    pub fn take_live(&mut self) -> Vec<crate::table::manifests::LiveFile> {
        std::mem::take(&mut self.live)
    }

    /// The manifests snapshot `id` lists, with their lengths (empty when not loaded).
    pub fn manifests_of(&self, id: i64) -> Vec<(&str, Option<u64>)> {
        self.lists
            .get(&id)
            .map(|(_, ms)| {
                ms.iter()
                    .map(|m| (m.as_str(), self.manifests.get(m).and_then(|(len, _)| *len)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Files reachable from `snapshot_ids` (each must have been loaded; others are ignored).
    pub fn reachable(&self, snapshot_ids: &[i64]) -> Reachable {
        let mut out = Reachable::default();
        let mut seen: HashSet<&str> = HashSet::new();
        for id in snapshot_ids {
            let Some((list, manifests)) = self.lists.get(id) else {
                continue;
            };
            out.add(list, FileKind::ManifestList, None);
            for (path, size) in self.statistics.get(id).into_iter().flatten() {
                out.add(path, FileKind::Statistics, *size);
            }
            for m in manifests {
                if !seen.insert(m.as_str()) {
                    continue;
                }
                if let Some((length, entries)) = self.manifests.get(m) {
                    out.add(m, FileKind::Manifest, *length);
                    for (path, r) in entries {
                        out.add(path, r.kind, r.size);
                    }
                }
            }
        }
        out
    }
}

/// Every file reachable from the snapshots `snapshot_ids` of `table` (ids not in the metadata
/// are ignored), reading each distinct manifest once however many snapshots share it.
pub async fn reachable(table: &Table, snapshot_ids: &[i64]) -> Result<Reachable> {
    Ok(ReachIndex::load(table, snapshot_ids)
        .await?
        .reachable(snapshot_ids))
}

/// The metadata files the table itself needs: the current metadata.json and its metadata log.
pub fn metadata_files(table: &Table) -> Reachable {
    let mut out = Reachable::default();
    if let Some(loc) = table.metadata_location() {
        out.add(loc, FileKind::Metadata, None);
    }
    for log in table.metadata().metadata_log() {
        out.add(&log.metadata_file, FileKind::Metadata, None);
    }
    out
}

/// Every file any snapshot of `table` reaches, plus the metadata files the table itself needs
/// (see [`metadata_files`]).
pub async fn reachable_from_table(table: &Table) -> Result<Reachable> {
    let ids: Vec<i64> = table
        .metadata()
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect();
    let mut out = reachable(table, &ids).await?;
    out.extend(metadata_files(table));
    Ok(out)
}

fn unreadable(path: &str, e: iceberg::Error) -> Error {
    Error::Metadata {
        location: path.to_string(),
        reason: format!("cannot read ({e}); nothing was deleted"),
        source: Some(Box::new(e)),
    }
}
