//! Snapshot producer: turns a [`SnapshotUpdate`] into manifests, a manifest list and the
//! catalog updates of one new snapshot on `main` (Iceberg spec v2, "Snapshots", "Manifests",
//! "Manifest Lists", "Sequence Numbers").
//!
//! Cost: an append reads only the parent's manifest list (plus, once every
//! `commit.manifest.min-count-to-merge` commits, the small manifests it merges); a rewrite or
//! delete also reads the manifests with live files and rewrites the ones holding removed files
//! into one merged manifest per (content, spec).

use std::collections::{BTreeMap, HashSet};

use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, ManifestContentType, ManifestFile,
    ManifestListWriter, Snapshot, MAIN_BRANCH,
};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};
use uuid::Uuid;

use crate::base::error::{Error, Result};
use crate::base::properties;
use crate::commit::{summary, validate, Conflict, Ledger, LiveFile, SnapshotUpdate};
use crate::table::manifest_writer::ManifestWriter;
use crate::table::manifests::{
    current_manifests, live_file, live_file_as, load_manifests, MANIFEST_READ_CONCURRENCY,
};
use crate::table::{ident_string, lineage};

/// A commit ready for the catalog: requirements, updates, and the files written for it (to
/// delete if the catalog refuses it).
#[derive(Debug, Clone)]
pub struct PreparedCommit {
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
    pub written: Vec<String>,
}

/// Builds the new snapshot of `update` on top of `table`'s current `main`.
///
/// Data files are committed only in the schema they were written in: when the table's current
/// schema is no longer that one ([`SnapshotUpdate::written_in`]), nothing is written and the
/// answer is [`Error::SchemaChanged`] (not retried here: the caller converts its rows).
pub async fn prepare(table: &Table, update: &SnapshotUpdate) -> Result<PreparedCommit> {
    let current = table.metadata().current_schema_id();
    if let Some(written) = update.written_schema_id {
        if written != current && !update.added_data_files.is_empty() {
            return Err(Error::SchemaChanged {
                table: ident_string(table.identifier()),
                written,
                current,
            });
        }
    }
    check_update(table, update)?;
    let mut ctx = Ctx::new(table);
    let result = produce(&mut ctx, update).await;
    match result {
        Ok((requirements, updates)) => Ok(PreparedCommit {
            requirements,
            updates,
            written: ctx.written,
        }),
        Err(e) => {
            Ledger::of(table).with(ctx.written).discard().await;
            Err(e)
        }
    }
}

/// [`prepare`] for an attempt that wrote `written` itself (delete files, re-encoded data):
/// they join the commit's written files (deleted by the committer if the attempt loses), or
/// are deleted here when preparing fails.
pub async fn prepare_with(
    table: &Table,
    update: &SnapshotUpdate,
    written: Vec<String>,
) -> Result<PreparedCommit> {
    match prepare(table, update).await {
        Ok(mut commit) => {
            commit.written.extend(written);
            Ok(commit)
        }
        Err(e) => {
            Ledger::of(table).with(written).discard().await;
            Err(e)
        }
    }
}

/// Refuses an update the table's format cannot take, before anything is written: format v3
/// tables take deletion vectors (Puffin), never new Parquet position delete files (spec v3,
/// "Deletion Vectors": writers must not add position delete files to v3 tables). Format v1
/// refuses delete files when its manifest is written ([`Ctx::manifest_writer`]).
///
/// A table with a column of a type floe carries but does not parse ([`crate::table::opaque`])
/// takes no snapshot from floe: its manifests would carry the placeholder type in their header.
pub fn check_update(table: &Table, update: &SnapshotUpdate) -> Result<()> {
    crate::table::opaque::refuse(
        table.metadata().current_schema(),
        &format!("commit to '{}'", ident_string(table.identifier())),
        "write",
    )?;
    if table.metadata().format_version() < FormatVersion::V3 {
        return Ok(());
    }
    if let Some(f) = update.added_delete_files.iter().find(|f| {
        f.content_type() == DataContentType::PositionDeletes
            && f.file_format() != DataFileFormat::Puffin
    }) {
        return Err(Error::Refused {
            operation: format!("commit to '{}'", ident_string(table.identifier())),
            reason: format!(
                "it is an Iceberg format v3 table, which takes deletion vectors, not position \
                 delete files like {}",
                f.file_path()
            ),
        });
    }
    Ok(())
}

struct Ctx<'a> {
    table: &'a Table,
    name: String,
    snapshot_id: i64,
    sequence_number: i64,
    commit_uuid: Uuid,
    manifest_counter: u32,
    written: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn new(table: &'a Table) -> Self {
        let md = table.metadata();
        Self {
            table,
            name: ident_string(table.identifier()),
            snapshot_id: new_snapshot_id(table),
            sequence_number: md.next_sequence_number(),
            commit_uuid: Uuid::new_v4(),
            manifest_counter: 0,
            written: Vec::new(),
        }
    }

    async fn manifest_writer(
        &mut self,
        content: ManifestContentType,
        spec_id: i32,
    ) -> Result<ManifestWriter> {
        let md = self.table.metadata();
        let spec = md
            .partition_spec_by_id(spec_id)
            .ok_or_else(|| Error::Metadata {
                location: self
                    .table
                    .metadata_location()
                    .unwrap_or_default()
                    .to_string(),
                reason: format!("partition spec {spec_id} is not in the table metadata"),
                source: None,
            })?
            .as_ref()
            .clone();
        let path = format!(
            "{}/metadata/{}-m{}.{}",
            md.location(),
            self.commit_uuid,
            self.manifest_counter,
            DataFileFormat::Avro
        );
        self.manifest_counter += 1;
        self.written.push(path.clone());
        let output = self.table.file_io().new_output(&path)?;
        // Format v1 (spec "Manifests", v1 columns): no sequence numbers, no delete files.
        if let (FormatVersion::V1, ManifestContentType::Deletes) = (md.format_version(), content) {
            return Err(Error::Refused {
                operation: format!("commit delete files to '{}'", self.name),
                reason: "it is an Iceberg format v1 table, which has no row-level deletes \
                             (`floe table upgrade` it to format 2 first)"
                    .to_string(),
            });
        }
        // Format v3 (spec "Row Lineage"): the manifest list assigns data manifests their
        // first_row_id; carried entries hold theirs explicitly (`carry_existing`).
        Ok(ManifestWriter::new(
            output,
            Some(self.snapshot_id),
            md.current_schema().clone(),
            spec,
            md.format_version(),
            content,
        )
        .await?)
    }
}

/// Random positive snapshot id not used by the table (spec: ids are unique within a table).
fn new_snapshot_id(table: &Table) -> i64 {
    loop {
        let (a, b) = Uuid::new_v4().as_u64_pair();
        let id = ((a ^ b) & (i64::MAX as u64)) as i64;
        if id != 0 && table.metadata().snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// Entries per manifest a rewrite or delete writes before rolling to the next one (a few MB of
/// Avro; the iceberg crate's writer holds a whole manifest in memory until it is written).
const MANIFEST_ROLL_ENTRIES: usize = 10_000;

/// A removed file as validation and the snapshot summary need it: identity, partition, counts,
/// delete references; no column metrics (most of an entry's memory, and a compaction removes
/// every file it rewrites).
fn without_metrics(f: &DataFile, spec_id: i32) -> Result<DataFile> {
    let mut b = iceberg::spec::DataFileBuilder::default();
    b.content(f.content_type())
        .file_path(f.file_path().to_string())
        .file_format(f.file_format())
        .partition(f.partition().clone())
        .partition_spec_id(spec_id)
        .record_count(f.record_count())
        .file_size_in_bytes(f.file_size_in_bytes())
        .equality_ids(f.equality_ids())
        .referenced_data_file(f.referenced_data_file());
    b.build().map_err(|e| Error::Metadata {
        location: f.file_path().to_string(),
        reason: format!("manifest entry: {e}"),
        source: Some(Box::new(e)),
    })
}

async fn produce(
    ctx: &mut Ctx<'_>,
    update: &SnapshotUpdate,
) -> Result<(Vec<TableRequirement>, Vec<TableUpdate>)> {
    let table = ctx.table;
    let md = table.metadata();
    let parent = md.current_snapshot().cloned();
    let parent_manifests = current_manifests(table).await?;
    // Manifests with no live entries describe only older snapshots' deletions: drop them.
    let mut carried: Vec<ManifestFile> = parent_manifests
        .into_iter()
        .filter(|m| m.has_added_files() || m.has_existing_files())
        .collect();
    let mut new_manifests: Vec<ManifestFile> = Vec::new();
    let mut removed: Vec<LiveFile> = Vec::new();
    let mut extra = update.summary_properties.clone();

    if update.rewrite_manifests {
        let (rewritten, stats) = rewrite_manifests(ctx, carried).await?;
        carried = rewritten;
        extra.extend(stats);
    } else if !update.removed_files.is_empty() || !update.removed_vectors.is_empty() {
        let wanted: HashSet<&str> = update.removed_files.iter().map(String::as_str).collect();
        let wanted_vectors: HashSet<(&str, &str)> = update
            .removed_vectors
            .iter()
            .map(|(p, d)| (p.as_str(), d.as_str()))
            .collect();
        // Why an entry leaves: named by path, a named deletion vector (one blob of a Puffin
        // file other vectors share), or the deletion vector of a removed data file (spec v3:
        // a vector never outlives its data file; Java's MergingSnapshotProducer removes it in
        // the same commit).
        let removal = |f: &DataFile| -> Option<Removal> {
            if wanted.contains(f.file_path()) {
                return Some(Removal::Path);
            }
            if f.file_format() != DataFileFormat::Puffin {
                return None;
            }
            let data = f.referenced_data_file()?;
            if wanted_vectors.contains(&(f.file_path(), data.as_str())) {
                Some(Removal::Vector)
            } else if wanted.contains(data.as_str()) {
                Some(Removal::OfRemovedFile)
            } else {
                None
            }
        };
        // One pass over the parent's manifests, a few loads in flight. A manifest holding
        // removed files is written out as soon as it is read, so memory does not grow with the
        // table: the merged manifests roll every MANIFEST_ROLL_ENTRIES entries (the iceberg
        // crate's writer buffers a whole manifest), and removed files are kept without their
        // column metrics. Written manifests are the attempt's files (`ctx.written`): a failure
        // later in the pass deletes them.
        let io = table.file_io().clone();
        let mut loads = futures::stream::iter(carried.into_iter().map(|mf| {
            let io = io.clone();
            async move {
                let manifest = crate::table::opaque::load_manifest(&mf, &io).await;
                (mf, manifest)
            }
        }))
        .buffered(MANIFEST_READ_CONCURRENCY);
        let mut writers: BTreeMap<(u8, i32), (ManifestWriter, usize)> = BTreeMap::new();
        let mut untouched = Vec::new();
        let mut touched = Vec::new();
        let mut found_vectors: HashSet<(String, String)> = HashSet::new();
        while let Some((mf, manifest)) = loads.next().await {
            let manifest = manifest?;
            let hit = manifest
                .entries()
                .iter()
                .any(|e| e.is_alive() && removal(e.data_file()).is_some());
            if !hit {
                untouched.push(mf);
                continue;
            }
            let spec_id = mf.partition_spec_id;
            let key = (content_key(mf.content), spec_id);
            let slot = match writers.entry(key) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert((ctx.manifest_writer(mf.content, spec_id).await?, 0))
                }
            };
            let (entries, _) = manifest.into_parts();
            let row_ids =
                lineage::inherited_first_row_ids(&mf, entries.iter().map(|e| e.data_file()));
            for (e, row_id) in entries.iter().zip(row_ids).filter(|(e, _)| e.is_alive()) {
                if slot.1 >= MANIFEST_ROLL_ENTRIES {
                    let next = ctx.manifest_writer(mf.content, spec_id).await?;
                    let full = std::mem::replace(&mut slot.0, next);
                    new_manifests.push(full.write_manifest_file().await?);
                    slot.1 = 0;
                }
                slot.1 += 1;
                let seq = e.sequence_number().unwrap_or_default();
                let file_seq = e.file_sequence_number.or(Some(seq));
                match removal(e.data_file()) {
                    Some(why) => {
                        if why == Removal::Vector {
                            found_vectors.insert((
                                e.file_path().to_string(),
                                e.data_file().referenced_data_file().unwrap_or_default(),
                            ));
                        }
                        let slim = without_metrics(e.data_file(), spec_id)?;
                        removed.push(live_file_as(e, spec_id, slim));
                        let file = lineage::with_first_row_id(e.data_file(), spec_id, row_id)?;
                        slot.0.add_delete_file(file, seq, file_seq)?;
                    }
                    None => carry_existing(&mut slot.0, e, spec_id, row_id)?,
                }
            }
            touched.push(mf);
        }
        drop(loads);
        carried = untouched;
        for (_, (writer, _)) in writers {
            new_manifests.push(writer.write_manifest_file().await?);
        }
        let found: HashSet<&str> = removed
            .iter()
            .map(|f| f.file.file_path())
            .filter(|p| wanted.contains(p))
            .collect();
        if let Some(missing) = update
            .removed_files
            .iter()
            .find(|p| !found.contains(p.as_str()))
        {
            return Err(Error::ValidationFailed {
                table: ctx.name.clone(),
                reason: Conflict::RemovedConcurrently {
                    path: missing.clone(),
                },
            });
        }
        if let Some((puffin, data)) = update
            .removed_vectors
            .iter()
            .find(|v| !found_vectors.contains(*v))
        {
            return Err(Error::ValidationFailed {
                table: ctx.name.clone(),
                reason: Conflict::RemovedConcurrently {
                    path: format!("{puffin} (deletion vector of {data})"),
                },
            });
        }
        if found.len() != update.removed_files.len() {
            return Err(Error::ValidationFailed {
                table: ctx.name.clone(),
                reason: Conflict::RemovedTwice,
            });
        }
        // Manifests rewritten here may hold deletes committed since the start too (a vector
        // of a removed data file is removed with it): they are checked like the carried ones.
        let seen: Vec<ManifestFile> = carried.iter().chain(&touched).cloned().collect();
        check_new_deletes(ctx, update, &removed, &seen).await?;
    } else {
        carried = merge_small_manifests(ctx, carried).await?;
        if update
            .added_delete_files
            .iter()
            .any(|f| f.file_format() == DataFileFormat::Puffin)
        {
            check_new_deletes(ctx, update, &removed, &carried).await?;
        }
    }

    let default_spec = md.default_partition_spec_id();
    if !update.added_data_files.is_empty() {
        let mut writer = ctx
            .manifest_writer(ManifestContentType::Data, default_spec)
            .await?;
        let seq = update.data_sequence_number.unwrap_or(-1);
        for f in &update.added_data_files {
            if f.content_type() != DataContentType::Data {
                return Err(Error::invalid_option(
                    "added data file",
                    f.file_path(),
                    "is a delete file",
                ));
            }
            writer.add_file(f.clone(), seq)?;
        }
        new_manifests.push(writer.write_manifest_file().await?);
    }
    if !update.added_delete_files.is_empty() {
        // One manifest per spec: rewritten delete files stay in the spec of the files they
        // replace, with their data sequence number.
        let mut by_spec: BTreeMap<i32, Vec<(&DataFile, i64)>> = BTreeMap::new();
        for f in &update.added_delete_files {
            if f.content_type() == DataContentType::Data {
                return Err(Error::invalid_option(
                    "added delete file",
                    f.file_path(),
                    "is a data file",
                ));
            }
            let (spec, seq) = update
                .delete_placement
                .get(&crate::commit::placement_key(f))
                .copied()
                .unwrap_or((default_spec, -1));
            by_spec.entry(spec).or_default().push((f, seq));
        }
        for (spec, files) in by_spec {
            let mut writer = ctx
                .manifest_writer(ManifestContentType::Deletes, spec)
                .await?;
            for (f, seq) in files {
                writer.add_file(f.clone(), seq)?;
            }
            new_manifests.push(writer.write_manifest_file().await?);
        }
    }

    // No list floe writes holds a NULL count (Java's metadata tables refuse one).
    crate::table::manifest_counts::complete(table.file_io(), &mut carried).await?;
    // Manifest list: this commit's manifests first, then the carried ones.
    let list_path = format!(
        "{}/metadata/snap-{}-1-{}.avro",
        md.location(),
        ctx.snapshot_id,
        ctx.commit_uuid
    );
    ctx.written.push(list_path.clone());
    let parent_id = parent.as_ref().map(|p| p.snapshot_id());
    let out = table.file_io().new_output(&list_path)?.writer().await?;
    let mut list = match md.format_version() {
        FormatVersion::V1 => ManifestListWriter::v1(out, ctx.snapshot_id, parent_id),
        FormatVersion::V2 => {
            ManifestListWriter::v2(out, ctx.snapshot_id, parent_id, ctx.sequence_number)
        }
        // Spec v3, "Snapshot Row IDs": the snapshot's first-row-id is the table's next-row-id;
        // the list assigns it on to the data manifests without one, and how far it got is the
        // snapshot's added-rows (the table's next-row-id advances by it).
        FormatVersion::V3 => ManifestListWriter::v3(
            out,
            ctx.snapshot_id,
            parent_id,
            ctx.sequence_number,
            Some(md.next_row_id()),
        ),
    };
    list.add_manifests(new_manifests.into_iter().chain(carried))?;
    let row_range = match (md.format_version(), list.next_row_id()) {
        (FormatVersion::V3, Some(next)) => Some((md.next_row_id(), next - md.next_row_id())),
        _ => None,
    };
    list.close().await?;

    let added: Vec<_> = update
        .added_data_files
        .iter()
        .chain(&update.added_delete_files)
        .collect();
    let removed_refs: Vec<_> = removed.iter().map(|f| &f.file).collect();
    let summary = summary::build(
        update.operation.clone(),
        &added,
        &removed_refs,
        parent.as_ref().map(|p| p.summary()),
        &extra,
    );
    let now = chrono::Utc::now().timestamp_millis();
    let snapshot = Snapshot::builder()
        .with_snapshot_id(ctx.snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(ctx.sequence_number)
        .with_timestamp_ms(now.max(md.last_updated_ms() + 1))
        .with_manifest_list(list_path)
        .with_summary(summary)
        .with_schema_id(md.current_schema_id());
    let snapshot = match row_range {
        Some((first, added)) => snapshot.with_row_range(first, added).build(),
        None => snapshot.build(),
    };
    // Setting the branch through the metadata builder keeps main's retention settings; its
    // change list is exactly the updates a catalog needs (AddSnapshot, SetSnapshotRef).
    let updates = iceberg::spec::TableMetadataBuilder::new_from_metadata(md.clone(), None)
        .set_branch_snapshot(snapshot, MAIN_BRANCH)?
        .build()?
        .changes;
    let requirements = vec![
        TableRequirement::UuidMatch { uuid: md.uuid() },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: parent_id,
        },
        // The snapshot names the current schema, and its data files were written in it.
        TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: md.current_schema_id(),
        },
    ];
    Ok((requirements, updates))
}

/// Carries a live entry into a new manifest as EXISTING, keeping the snapshot that added it
/// and its sequence numbers (spec: a rewritten manifest must not change an entry's lineage).
/// `first_row_id` is the entry's inherited one (format v3), written into the entry as the spec's
/// "First Row ID Inheritance" requires for EXISTING entries.
fn carry_existing(
    writer: &mut ManifestWriter,
    e: &iceberg::spec::ManifestEntry,
    spec_id: i32,
    first_row_id: Option<i64>,
) -> Result<()> {
    let seq = e.sequence_number().unwrap_or_default();
    writer.add_existing_file(
        lineage::with_first_row_id(e.data_file(), spec_id, first_row_id)?,
        e.snapshot_id().unwrap_or_default(),
        seq,
        e.file_sequence_number.or(Some(seq)),
    )?;
    Ok(())
}

/// Why the producer removes an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// Its path is in [`SnapshotUpdate::removed_files`].
    Path,
    /// It is a deletion vector in [`SnapshotUpdate::removed_vectors`].
    Vector,
    /// It is the deletion vector of a removed data file.
    OfRemovedFile,
}

fn content_key(c: ManifestContentType) -> u8 {
    match c {
        ManifestContentType::Data => 0,
        ManifestContentType::Deletes => 1,
    }
}

/// Fails when a delete file committed after the starting snapshot applies to a removed file.
async fn check_new_deletes(
    ctx: &Ctx<'_>,
    update: &SnapshotUpdate,
    removed: &[LiveFile],
    carried: &[ManifestFile],
) -> Result<()> {
    let md = ctx.table.metadata();
    let newer = validate::snapshots_since(md, update.starting_snapshot_id, &ctx.name)?;
    if newer.is_empty() {
        return Ok(());
    }
    let candidates: Vec<ManifestFile> = carried
        .iter()
        .filter(|m| {
            m.content == ManifestContentType::Deletes && newer.contains(&m.added_snapshot_id)
        })
        .cloned()
        .collect();
    let mut new_deletes = Vec::new();
    for (mf, manifest) in candidates
        .iter()
        .zip(load_manifests(ctx.table, &candidates).await?)
    {
        for e in manifest.entries() {
            if e.status() == iceberg::spec::ManifestStatus::Added
                && e.snapshot_id().is_some_and(|s| newer.contains(&s))
            {
                new_deletes.push(live_file(e, mf.partition_spec_id));
            }
        }
    }
    // Spec v3: at most one deletion vector per data file. A vector committed since the start
    // for a file this update writes one for (planned without it) would make two.
    let ours: HashSet<String> = update
        .added_delete_files
        .iter()
        .filter(|f| f.file_format() == DataFileFormat::Puffin)
        .filter_map(|f| f.referenced_data_file())
        .collect();
    if let Some((theirs, data)) = new_deletes.iter().find_map(|d| {
        let data = d.file.referenced_data_file()?;
        (d.file.file_format() == DataFileFormat::Puffin && ours.contains(&data))
            .then(|| (d.file.file_path().to_string(), data))
    }) {
        return Err(Error::ValidationFailed {
            table: ctx.name.clone(),
            reason: Conflict::DeleteAdded {
                delete: theirs,
                replaced: data,
            },
        });
    }
    let ignore_eq = update.data_sequence_number.is_some();
    match validate::conflicting_delete(removed, &new_deletes, ignore_eq) {
        Some(reason) => Err(Error::ValidationFailed {
            table: ctx.name.clone(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Append-time manifest merging (Java's `MergeAppend`): when the parent carries at least
/// `commit.manifest.min-count-to-merge` data manifests smaller than
/// `commit.manifest.target-size-bytes` in the default spec, merge them into one, so manifest
/// count (which dominates read planning) stays bounded under streaming appends.
async fn merge_small_manifests(
    ctx: &mut Ctx<'_>,
    carried: Vec<ManifestFile>,
) -> Result<Vec<ManifestFile>> {
    if !properties::table_bool_prop(
        ctx.table,
        properties::COMMIT_MANIFEST_MERGE_ENABLED.key,
        true,
    )? {
        return Ok(carried);
    }
    let min_count = properties::table_u64_prop(
        ctx.table,
        properties::COMMIT_MANIFEST_MIN_COUNT_TO_MERGE.key,
        properties::COMMIT_MANIFEST_MIN_COUNT_TO_MERGE_DEFAULT,
    )?
    .max(2) as usize;
    let target = properties::table_u64_prop(
        ctx.table,
        properties::COMMIT_MANIFEST_TARGET_SIZE_BYTES.key,
        properties::COMMIT_MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
    )? as i64;
    let spec = ctx.table.metadata().default_partition_spec_id();
    let (small, mut keep): (Vec<_>, Vec<_>) = carried.into_iter().partition(|m| {
        m.content == ManifestContentType::Data
            && m.partition_spec_id == spec
            && m.manifest_length < target
    });
    if small.len() < min_count {
        keep.splice(0..0, small);
        return Ok(keep);
    }
    // Bins of at most the target size, each merged into one manifest (Java's
    // ManifestMergeManager bins the same way): a merged manifest stays about the target, and
    // one bin is in memory at a time.
    let mut bins: Vec<Vec<ManifestFile>> = Vec::new();
    let mut bin: Vec<ManifestFile> = Vec::new();
    let mut bytes = 0i64;
    for m in small {
        if !bin.is_empty() && bytes + m.manifest_length > target {
            bins.push(std::mem::take(&mut bin));
            bytes = 0;
        }
        bytes += m.manifest_length;
        bin.push(m);
    }
    bins.push(bin);
    let mut merged = Vec::new();
    for bin in bins {
        if bin.len() < 2 {
            merged.extend(bin);
            continue;
        }
        let loaded = load_manifests(ctx.table, &bin).await?;
        let mut writer = ctx.manifest_writer(ManifestContentType::Data, spec).await?;
        for (mf, manifest) in bin.iter().zip(&loaded) {
            let entries = manifest.entries();
            let row_ids =
                lineage::inherited_first_row_ids(mf, entries.iter().map(|e| e.data_file()));
            for (e, row_id) in entries.iter().zip(row_ids).filter(|(e, _)| e.is_alive()) {
                carry_existing(&mut writer, e, spec, row_id)?;
            }
        }
        merged.push(writer.write_manifest_file().await?);
    }
    keep.splice(0..0, merged);
    Ok(keep)
}

/// `rewrite-manifests` (Java's `RewriteManifests` with `clusterBy(partition)`): for every
/// (content, spec) with more than one manifest, all live entries are rewritten as EXISTING
/// (snapshot ids and sequence numbers kept) in partition order, into manifests of about
/// `commit.manifest.target-size-bytes`. Returns the new manifest set and Iceberg's summary keys
/// (`manifests-created`, `manifests-replaced`, `manifests-kept`, `entries-processed`).
async fn rewrite_manifests(
    ctx: &mut Ctx<'_>,
    carried: Vec<ManifestFile>,
) -> Result<(Vec<ManifestFile>, Vec<(String, String)>)> {
    let target = properties::table_u64_prop(
        ctx.table,
        properties::COMMIT_MANIFEST_TARGET_SIZE_BYTES.key,
        properties::COMMIT_MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
    )?
    .max(1);
    let mut groups: BTreeMap<(u8, i32), Vec<ManifestFile>> = BTreeMap::new();
    for m in carried {
        groups
            .entry((content_key(m.content), m.partition_spec_id))
            .or_default()
            .push(m);
    }
    let (mut created, mut replaced, mut kept, mut entries) = (0u64, 0u64, 0u64, 0u64);
    let mut out = Vec::new();
    for ((_, spec_id), group) in groups {
        if group.len() < 2 {
            kept += group.len() as u64;
            out.extend(group);
            continue;
        }
        let content = group[0].content;
        let bytes: u64 = group.iter().map(|m| m.manifest_length.max(0) as u64).sum();
        let loaded = load_manifests(ctx.table, &group).await?;
        let mut live: Vec<(String, &iceberg::spec::ManifestEntry, Option<i64>)> = Vec::new();
        for (mf, m) in group.iter().zip(&loaded) {
            let entries = m.entries();
            let row_ids =
                lineage::inherited_first_row_ids(mf, entries.iter().map(|e| e.data_file()));
            for (e, row_id) in entries.iter().zip(row_ids).filter(|(e, _)| e.is_alive()) {
                live.push((
                    format!("{:?}", e.data_file().partition()),
                    e.as_ref(),
                    row_id,
                ));
            }
        }
        let total_entries: u64 = loaded.iter().map(|m| m.entries().len() as u64).sum();
        live.sort_by(|a, b| a.0.cmp(&b.0));
        let per_entry = (bytes / total_entries.max(1)).max(1);
        let per_manifest = (target / per_entry).max(1) as usize;
        replaced += group.len() as u64;
        entries += live.len() as u64;
        for chunk in live.chunks(per_manifest) {
            let mut writer = ctx.manifest_writer(content, spec_id).await?;
            for (_, e, row_id) in chunk {
                carry_existing(&mut writer, e, spec_id, *row_id)?;
            }
            out.push(writer.write_manifest_file().await?);
            created += 1;
        }
    }
    let stats = vec![
        ("manifests-created".to_string(), created.to_string()),
        ("manifests-replaced".to_string(), replaced.to_string()),
        ("manifests-kept".to_string(), kept.to_string()),
        ("entries-processed".to_string(), entries.to_string()),
    ];
    Ok((out, stats))
}
