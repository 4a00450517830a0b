//! The planning walk: the current snapshot's live data files as scan tasks, each with the
//! delete files that apply to it, in one pass over the manifests.
//!
//! It makes the tasks the iceberg crate's `TableScan::plan_files` makes for a scan of every
//! column without a filter, matched the same way (Iceberg spec, "Scan Planning"):
//! - a position delete file applies to the data files of its partition and spec whose data
//!   sequence number is at most its own;
//! - an equality delete file applies to those whose data sequence number is lower; one of an
//!   unpartitioned spec applies to every data file ("global").
//!
//! Why not the crate's scan: it spawns a task and sends two channel messages per manifest entry,
//! which at 1,000,000 files costs about as much as decoding the manifests themselves. Here the
//! manifests are decoded as [`crate::table::manifests::decoded`] does (each on its own tokio
//! task, two at a time), and each one's entries become tasks in one loop.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::{
    DataContentType, ManifestContentType, ManifestEntryRef, ManifestFile, NameMapping, Struct,
};
use iceberg::table::Table;

use crate::base::error::{Error, Result};
use crate::table::manifests::decoded;

/// Live delete files by what they apply to.
#[derive(Default)]
struct DeleteIndex {
    global_equality: Vec<Delete>,
    equality: HashMap<Struct, Vec<Delete>>,
    position: HashMap<Struct, Vec<Delete>>,
}

struct Delete {
    spec_id: i32,
    sequence_number: Option<i64>,
    file: FileScanTaskDeleteFile,
}

impl DeleteIndex {
    fn add(&mut self, spec_id: i32, entry: &ManifestEntryRef) {
        let file = entry.data_file();
        let delete = Delete {
            spec_id,
            sequence_number: entry.sequence_number(),
            file: FileScanTaskDeleteFile {
                file_path: file.file_path().to_string(),
                file_size_in_bytes: file.file_size_in_bytes(),
                file_type: file.content_type(),
                partition_spec_id: spec_id,
                equality_ids: file.equality_ids(),
            },
        };
        let partition = file.partition();
        match file.content_type() {
            DataContentType::PositionDeletes => self
                .position
                .entry(partition.clone())
                .or_default()
                .push(delete),
            _ if partition.fields().is_empty() => self.global_equality.push(delete),
            _ => self
                .equality
                .entry(partition.clone())
                .or_default()
                .push(delete),
        }
    }

    /// The delete files that apply to a data file of `partition` under `spec_id` with data
    /// sequence number `seq` (unknown: every one of its partition).
    fn applying_to(
        &self,
        partition: &Struct,
        spec_id: i32,
        seq: Option<i64>,
    ) -> Vec<FileScanTaskDeleteFile> {
        let newer = |d: &&Delete| seq.is_none_or(|s| d.sequence_number > Some(s));
        let not_older = |d: &&Delete| seq.is_none_or(|s| d.sequence_number >= Some(s));
        let same_spec = |d: &&Delete| d.spec_id == spec_id;
        let mut out: Vec<FileScanTaskDeleteFile> = self
            .global_equality
            .iter()
            .filter(newer)
            .map(|d| d.file.clone())
            .collect();
        if let Some(ds) = self.equality.get(partition) {
            out.extend(
                ds.iter()
                    .filter(|d| newer(d) && same_spec(d))
                    .map(|d| d.file.clone()),
            );
        }
        if let Some(ds) = self.position.get(partition) {
            out.extend(
                ds.iter()
                    .filter(|d| not_older(d) && same_spec(d))
                    .map(|d| d.file.clone()),
            );
        }
        out
    }
}

/// Calls `each` with a scan task for every live data file of the current snapshot of `table`
/// (none without one), read through that snapshot's schema, all columns, with the delete files
/// that apply to it.
pub(super) async fn data_tasks(
    table: &Table,
    mut each: impl FnMut(FileScanTask) -> Result<()>,
) -> Result<()> {
    let md = table.metadata();
    let Some(snapshot) = md.current_snapshot() else {
        return Ok(());
    };
    let schema = snapshot.schema(md)?;
    let field_ids: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    let name_mapping: Option<Arc<NameMapping>> = md
        .properties()
        .get(iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING)
        .map(|raw| {
            serde_json::from_str::<NameMapping>(raw).map_err(|e| {
                Error::invalid_option(
                    iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING,
                    raw,
                    format!("not a name mapping: {e}"),
                )
            })
        })
        .transpose()?
        .map(Arc::new);
    let manifests = crate::table::manifests::manifests_of(table, snapshot).await?;
    let (delete_manifests, data_manifests): (Vec<_>, Vec<_>) = manifests
        .into_iter()
        .partition(|m| m.content == ManifestContentType::Deletes);

    let mut index = DeleteIndex::default();
    let mut loads = std::pin::pin!(decoded(table, delete_manifests));
    while let Some(loaded) = loads.next().await {
        let (mf, m) = loaded?;
        for e in m.entries().iter().filter(|e| e.is_alive()) {
            if e.content_type() == DataContentType::Data {
                return Err(misplaced(&mf, "a data file", "delete"));
            }
            index.add(mf.partition_spec_id, e);
        }
    }

    let mut loads = std::pin::pin!(decoded(table, data_manifests));
    while let Some(loaded) = loads.next().await {
        let (mf, m) = loaded?;
        for e in m.entries().iter().filter(|e| e.is_alive()) {
            if e.content_type() != DataContentType::Data {
                return Err(misplaced(&mf, "a delete file", "data"));
            }
            let file = e.data_file();
            let size = file.file_size_in_bytes();
            each(FileScanTask {
                file_size_in_bytes: size,
                start: 0,
                length: size,
                record_count: Some(file.record_count()),
                data_file_path: file.file_path().to_string(),
                data_file_format: file.file_format(),
                schema: schema.clone(),
                project_field_ids: field_ids.clone(),
                predicate: None,
                deletes: index.applying_to(
                    file.partition(),
                    mf.partition_spec_id,
                    e.sequence_number(),
                ),
                partition: Some(file.partition().clone()),
                partition_spec: None,
                name_mapping: name_mapping.clone(),
                case_sensitive: true,
            })?;
        }
    }
    Ok(())
}

fn misplaced(mf: &ManifestFile, what: &str, kind: &str) -> Error {
    Error::Io(std::io::Error::other(format!(
        "manifest {} holds {what} entry but the manifest list says it is a {kind} manifest",
        mf.manifest_path
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataFileBuilder, DataFileFormat, Literal, ManifestEntry, ManifestStatus};

    fn entry(content: DataContentType, partition: Struct, seq: i64) -> ManifestEntryRef {
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(format!("file:///d/{content:?}-{seq}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .file_size_in_bytes(10)
            .record_count(1)
            .partition(partition);
        if content == DataContentType::EqualityDeletes {
            b.equality_ids(Some(vec![1]));
        }
        Arc::new(
            ManifestEntry::builder()
                .status(ManifestStatus::Added)
                .snapshot_id(1)
                .sequence_number(seq)
                .file_sequence_number(seq)
                .data_file(b.build().unwrap())
                .build(),
        )
    }

    fn names(ds: &[FileScanTaskDeleteFile]) -> Vec<String> {
        let mut v: Vec<String> = ds
            .iter()
            .map(|d| d.file_path.trim_start_matches("file:///d/").to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn deletes_apply_by_partition_spec_and_sequence_number_as_the_spec_says() {
        let p = |v: i32| Struct::from_iter([Some(Literal::int(v))]);
        let mut index = DeleteIndex::default();
        index.add(0, &entry(DataContentType::PositionDeletes, p(1), 5));
        index.add(0, &entry(DataContentType::EqualityDeletes, p(1), 6));
        index.add(0, &entry(DataContentType::PositionDeletes, p(2), 7));
        index.add(
            1,
            &entry(DataContentType::EqualityDeletes, Struct::empty(), 8),
        );
        // Data at sequence 5 in partition 1: the position delete of the same sequence applies,
        // the newer equality delete too, the global one (any spec) too.
        assert_eq!(
            names(&index.applying_to(&p(1), 0, Some(5))),
            [
                "EqualityDeletes-6.parquet",
                "EqualityDeletes-8.parquet",
                "PositionDeletes-5.parquet"
            ]
        );
        // At sequence 6 the equality delete of sequence 6 no longer applies.
        assert_eq!(
            names(&index.applying_to(&p(1), 0, Some(6))),
            ["EqualityDeletes-8.parquet"]
        );
        // Another spec's file of an equal tuple gets only the global delete.
        assert_eq!(
            names(&index.applying_to(&p(1), 3, Some(1))),
            ["EqualityDeletes-8.parquet"]
        );
        // Unknown sequence: everything of its partition.
        assert_eq!(names(&index.applying_to(&p(2), 0, None)).len(), 2);
        assert!(index.applying_to(&p(3), 0, Some(9)).is_empty());
    }
}
