//! Manifest lists and manifests of a table's snapshots, and the live files they hold.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataFile, Manifest, ManifestFile, Snapshot};
use iceberg::table::Table;

use crate::base::error::{Error, Result};

/// Manifests read at once.
pub(crate) const MANIFEST_READ_CONCURRENCY: usize = 16;

/// A data or delete file that is live in a snapshot, with the metadata a rewrite needs to carry
/// it (the partition spec it was written with and its sequence numbers).
#[derive(Debug, Clone)]
pub struct LiveFile {
    pub file: DataFile,
    pub spec_id: i32,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    pub file_sequence_number: Option<i64>,
    /// The data file's `first_row_id` (format v3 row lineage), inherited from its manifest
    /// when the entry has none ([`crate::table::lineage`]); `None` for delete files and
    /// tables without lineage.
    pub first_row_id: Option<i64>,
}

pub(crate) async fn load_manifests(
    table: &Table,
    manifests: &[ManifestFile],
) -> Result<Vec<Manifest>> {
    let loads: Vec<_> = manifests
        .iter()
        .cloned()
        .map(|m| {
            let io = table.file_io().clone();
            spawned(async move {
                crate::table::opaque::load_manifest(&m, &io)
                    .await
                    .map_err(Error::from)
            })
        })
        .collect();
    futures::stream::iter(loads)
        .buffered(MANIFEST_READ_CONCURRENCY)
        .try_collect()
        .await
}

/// Runs `f` on its own tokio task (so that decoding runs on every core, not on the task that
/// polls the stream) and gives its result.
pub(crate) async fn spawned<T: Send + 'static>(
    f: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(f)
        .await
        .map_err(Error::task("reading table metadata"))?
}

pub(crate) fn live_file(entry: &iceberg::spec::ManifestEntry, spec_id: i32) -> LiveFile {
    live_file_as(entry, spec_id, entry.data_file().clone())
}

/// The entry's lineage (snapshot, sequence numbers) with `file` as its data file.
pub(crate) fn live_file_as(
    entry: &iceberg::spec::ManifestEntry,
    spec_id: i32,
    file: DataFile,
) -> LiveFile {
    LiveFile {
        file,
        spec_id,
        snapshot_id: entry.snapshot_id().unwrap_or_default(),
        sequence_number: entry.sequence_number().unwrap_or_default(),
        first_row_id: entry.data_file().first_row_id(),
        file_sequence_number: entry.file_sequence_number,
    }
}

/// The live entries of `manifest` (read from `mf`) as [`LiveFile`]s, with `first_row_id`
/// inherited (spec v3, "First Row ID Inheritance").
pub(crate) fn live_entries(mf: &ManifestFile, manifest: &Manifest) -> Vec<LiveFile> {
    let entries = manifest.entries();
    let ids =
        crate::table::lineage::inherited_first_row_ids(mf, entries.iter().map(|e| e.data_file()));
    entries
        .iter()
        .zip(ids)
        .filter(|(e, _)| e.is_alive())
        .map(|(e, id)| LiveFile {
            first_row_id: id,
            ..live_file(e, mf.partition_spec_id)
        })
        .collect()
}

/// Loads every live data and delete file of the current snapshot, with spec ids and sequence
/// numbers (what compaction and the metadata tables need).
pub async fn live_files(table: &Table) -> Result<Vec<LiveFile>> {
    live_files_of(table, &current_manifests(table).await?).await
}

/// Manifests decoded at once by [`decoded`]: a decoded manifest of 70,000 entries is about
/// 100 MiB.
pub(crate) const MANIFESTS_DECODED_AT_ONCE: usize = 2;

/// `manifests` decoded in order, each on its own task ([`spawned`]),
/// [`MANIFESTS_DECODED_AT_ONCE`] at a time: memory follows two manifests, not the table.
pub(crate) fn decoded(
    table: &Table,
    manifests: Vec<ManifestFile>,
) -> impl futures::Stream<Item = Result<(ManifestFile, Manifest)>> {
    let io = table.file_io().clone();
    futures::stream::iter(manifests.into_iter().map(move |mf| {
        let io = io.clone();
        spawned(async move {
            let m = crate::table::opaque::load_manifest(&mf, &io).await?;
            Ok((mf, m))
        })
    }))
    .buffered(MANIFESTS_DECODED_AT_ONCE)
}

/// The live files of the current snapshot whose path `keep` accepts, read manifest by
/// manifest: memory follows what is kept, not the table.
pub async fn live_files_where(table: &Table, keep: impl Fn(&str) -> bool) -> Result<Vec<LiveFile>> {
    let manifests = current_manifests(table).await?;
    let mut loads = std::pin::pin!(decoded(table, manifests));
    let mut out = Vec::new();
    while let Some(loaded) = loads.next().await {
        let (mf, m) = loaded?;
        out.extend(
            live_entries(&mf, &m)
                .into_iter()
                .filter(|f| keep(f.file.file_path())),
        );
    }
    Ok(out)
}

/// The live data and delete files `manifests` hold (a manifest list already read).
pub async fn live_files_of(table: &Table, manifests: &[ManifestFile]) -> Result<Vec<LiveFile>> {
    let loaded = load_manifests(table, manifests).await?;
    let mut out = Vec::new();
    for (mf, m) in manifests.iter().zip(loaded) {
        out.extend(live_entries(mf, &m));
    }
    Ok(out)
}

/// The row lineage of every live data file in `live` (format v3), by path.
pub fn lineage_of<'a>(
    live: impl IntoIterator<Item = &'a LiveFile>,
) -> std::collections::HashMap<String, crate::table::lineage::FileLineage> {
    live.into_iter()
        .filter(|f| f.file.content_type() == iceberg::spec::DataContentType::Data)
        .map(|f| {
            (
                f.file.file_path().to_string(),
                crate::table::lineage::FileLineage {
                    first_row_id: f.first_row_id,
                    sequence_number: f.sequence_number,
                },
            )
        })
        .collect()
}

/// Shared handle used by callers that only need the manifests of a snapshot.
/// Counts the iceberg crate's reader misses (a list Java wrote in format v1 names them
/// otherwise) are read by field id ([`super::manifest_counts`]).
pub async fn manifests_of(table: &Table, snapshot: &Arc<Snapshot>) -> Result<Vec<ManifestFile>> {
    let mut files: Vec<ManifestFile> = table
        .manifest_list_reader(snapshot)
        .load()
        .await?
        .consume_entries()
        .into_iter()
        .collect();
    super::manifest_counts::fill_by_id(table.file_io(), snapshot.manifest_list(), &mut files)
        .await?;
    Ok(files)
}

/// The manifests of the table's current snapshot (none for an empty table).
pub async fn current_manifests(table: &Table) -> Result<Vec<ManifestFile>> {
    match table.metadata().current_snapshot() {
        Some(s) => manifests_of(table, s).await,
        None => Ok(vec![]),
    }
}

/// Loads manifests (public wrapper for inspect/compact).
pub async fn read_manifests(table: &Table, manifests: &[ManifestFile]) -> Result<Vec<Manifest>> {
    load_manifests(table, manifests).await
}

/// Live files for unit tests of the layers that read them (planning, commits, cleanup).
#[cfg(test)]
pub(crate) mod test_support {
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Struct};

    use super::LiveFile;

    fn entry(b: &mut DataFileBuilder, seq: i64) -> LiveFile {
        LiveFile {
            file: b.build().expect("valid test file"),
            spec_id: 0,
            snapshot_id: 1,
            sequence_number: seq,
            file_sequence_number: Some(seq),
            first_row_id: None,
        }
    }

    /// A live file of spec 0 with the given content, partition, sequence number and
    /// (for position deletes) referenced data file.
    pub fn live_file(
        path: &str,
        content: DataContentType,
        partition: Struct,
        seq: i64,
        referenced: Option<&str>,
    ) -> LiveFile {
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .record_count(1)
            .file_size_in_bytes(10)
            .partition_spec_id(0)
            .referenced_data_file(referenced.map(str::to_string));
        entry(&mut b, seq)
    }

    /// A deletion vector (format v3) in Puffin file `puffin`, at `offset`, for `data`.
    pub fn deletion_vector(puffin: &str, data: &str, offset: i64, seq: i64) -> LiveFile {
        let mut b = DataFileBuilder::default();
        b.content(DataContentType::PositionDeletes)
            .file_path(puffin.to_string())
            .file_format(DataFileFormat::Puffin)
            .partition(Struct::empty())
            .record_count(3)
            .file_size_in_bytes(1000)
            .partition_spec_id(0)
            .referenced_data_file(Some(data.to_string()))
            .content_offset(Some(offset))
            .content_size_in_bytes(Some(40));
        entry(&mut b, seq)
    }
}
