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

use crate::error::{Error, Result};

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

    fn add(&mut self, path: &str, kind: FileKind, size: Option<u64>) {
        self.files
            .entry(path.to_string())
            .or_insert(Reached { kind, size });
    }
}

/// Every file reachable from the snapshots `snapshot_ids` of `table` (ids not in the metadata
/// are ignored), reading each distinct manifest once however many snapshots share it.
pub async fn reachable(table: &Table, snapshot_ids: &[i64]) -> Result<Reachable> {
    let md = table.metadata();
    let mut out = Reachable::default();
    let snapshots: Vec<_> = snapshot_ids
        .iter()
        .filter_map(|id| md.snapshot_by_id(*id).cloned())
        .collect();
    let wanted: HashSet<i64> = snapshots.iter().map(|s| s.snapshot_id()).collect();
    for s in &snapshots {
        out.add(s.manifest_list(), FileKind::ManifestList, None);
    }
    for st in md.statistics_iter() {
        if wanted.contains(&st.snapshot_id) {
            out.add(
                &st.statistics_path,
                FileKind::Statistics,
                u64::try_from(st.file_size_in_bytes).ok(),
            );
        }
    }
    for st in md.partition_statistics_iter() {
        if wanted.contains(&st.snapshot_id) {
            out.add(
                &st.statistics_path,
                FileKind::Statistics,
                u64::try_from(st.file_size_in_bytes).ok(),
            );
        }
    }
    let lists: Vec<Vec<ManifestFile>> = futures::stream::iter(snapshots.into_iter().map(|s| {
        let table = table.clone();
        async move {
            let list = s.manifest_list().to_string();
            table
                .manifest_list_reader(&s)
                .load()
                .await
                .map(|l| l.consume_entries().into_iter().collect::<Vec<_>>())
                .map_err(|e| unreadable(&list, e))
        }
    }))
    .buffer_unordered(READ_CONCURRENCY)
    .try_collect()
    .await?;
    let mut manifests: HashMap<String, ManifestFile> = HashMap::new();
    for m in lists.into_iter().flatten() {
        manifests.entry(m.manifest_path.clone()).or_insert(m);
    }
    for m in manifests.values() {
        out.add(
            &m.manifest_path,
            FileKind::Manifest,
            u64::try_from(m.manifest_length).ok(),
        );
    }
    let mut entries = futures::stream::iter(manifests.into_values().map(|m| {
        let io = table.file_io().clone();
        async move {
            let path = m.manifest_path.clone();
            let content = m.content;
            m.load_manifest(&io)
                .await
                .map(|manifest| (content, manifest))
                .map_err(|e| unreadable(&path, e))
        }
    }))
    .buffer_unordered(READ_CONCURRENCY);
    while let Some(loaded) = entries.next().await {
        let (content, manifest) = loaded?;
        for e in manifest.entries().iter().filter(|e| e.is_alive()) {
            let f = e.data_file();
            let kind = match content {
                ManifestContentType::Data => FileKind::Data,
                ManifestContentType::Deletes => FileKind::of_content(f.content_type()),
            };
            out.add(f.file_path(), kind, Some(f.file_size_in_bytes()));
        }
    }
    Ok(out)
}

/// Every file any snapshot of `table` reaches, plus the metadata files the table itself needs:
/// the current metadata.json and every file of its metadata log.
pub async fn reachable_from_table(table: &Table) -> Result<Reachable> {
    let md = table.metadata();
    let ids: Vec<i64> = md.snapshots().map(|s| s.snapshot_id()).collect();
    let mut out = reachable(table, &ids).await?;
    if let Some(loc) = table.metadata_location() {
        out.add(loc, FileKind::Metadata, None);
    }
    for log in md.metadata_log() {
        out.add(&log.metadata_file, FileKind::Metadata, None);
    }
    Ok(out)
}

fn unreadable(path: &str, e: iceberg::Error) -> Error {
    Error::Metadata {
        location: path.to_string(),
        reason: format!("cannot read ({e}); nothing was deleted"),
    }
}
