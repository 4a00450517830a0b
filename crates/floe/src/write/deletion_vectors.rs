//! Deletion vectors (format v3): the deleted positions of many data files, one
//! `deletion-vector-v1` blob each, in one Puffin file, and the delete file entries that point
//! at them (Iceberg spec v3, "Deletion Vectors"; Puffin spec, "deletion-vector-v1").
//!
//! A data file has at most one vector: the caller passes the union of the file's old vector
//! (and of the position delete files of a table upgraded from v2) with the new positions, and
//! removes the old vector's entry in the same commit.
//!
//! The iceberg crate's [`PuffinWriter`] does not report where it put a blob, so the offsets
//! are counted here: the file opens with the 4-byte magic and blobs follow one after another,
//! uncompressed (a `deletion-vector-v1` blob must not be compressed).

use std::collections::HashMap;

use iceberg::puffin::{Blob, CompressionCodec, PuffinWriter, DELETION_VECTOR_V1};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use iceberg::table::Table;
use iceberg::writer::file_writer::location_generator::LocationGenerator;

use crate::base::error::{Error, Result};
use crate::table::deletion_vector::DeletionVector;

/// Field id the blob metadata names (`_pos`, spec "Reserved Field IDs": a vector holds row
/// positions). Java writes the same.
const ROW_POSITION_FIELD_ID: i32 = i32::MAX - 2;
/// Length of the Puffin magic that opens the file (the first blob starts after it).
const PUFFIN_MAGIC_LEN: u64 = 4;

/// The deletion vector of one data file, to write.
#[derive(Debug, Clone)]
pub struct VectorOf {
    /// The data file the positions are in.
    pub data_file: String,
    /// Its partition spec and partition (the delete entry's).
    pub spec_id: i32,
    pub partition: Struct,
    pub vector: DeletionVector,
}

/// Writes `vectors` into one Puffin file and returns one delete file entry per vector, with its
/// partition spec id (not committed); nothing for no vectors (an empty vector is skipped). A
/// failed write leaves no file behind.
pub async fn write_deletion_vectors(
    table: &Table,
    vectors: Vec<VectorOf>,
) -> Result<Vec<(DataFile, i32)>> {
    let vectors: Vec<VectorOf> = vectors
        .into_iter()
        .filter(|v| !v.vector.is_empty())
        .collect();
    if vectors.is_empty() {
        return Ok(vec![]);
    }
    let md = table.metadata();
    let name = format!("{}-deletes.puffin", uuid::Uuid::now_v7());
    let path = crate::write::location::Locations::new(md)?.generate_location(None, &name);
    let write = async {
        let output = table.file_io().new_output(&path)?;
        let props = HashMap::from([(
            iceberg::puffin::CREATED_BY_PROPERTY.to_string(),
            format!("floe {}", env!("CARGO_PKG_VERSION")),
        )]);
        let mut writer = PuffinWriter::new(&output, props, false).await?;
        let mut placed = Vec::with_capacity(vectors.len());
        let mut offset = PUFFIN_MAGIC_LEN;
        for v in &vectors {
            let data = v.vector.encode();
            let length = data.len() as u64;
            let blob = Blob::builder()
                .r#type(DELETION_VECTOR_V1.to_string())
                .fields(vec![ROW_POSITION_FIELD_ID])
                // Spec: a vector's blob has snapshot id and sequence number -1 (they are
                // the commit's, known only when it lands).
                .snapshot_id(-1)
                .sequence_number(-1)
                .data(data)
                .properties(HashMap::from([
                    ("referenced-data-file".to_string(), v.data_file.clone()),
                    ("cardinality".to_string(), v.vector.len().to_string()),
                ]))
                .build();
            writer.add(blob, CompressionCodec::None).await?;
            placed.push((offset, length));
            offset += length;
        }
        writer.close().await?;
        let size = table.file_io().new_input(&path)?.metadata().await?.size;
        Ok::<_, iceberg::Error>((placed, size))
    };
    let (placed, size) =
        crate::write::deletes::settle_write(table, &path, "deletion vectors", write.await).await?;
    vectors
        .iter()
        .zip(placed)
        .map(|(v, (offset, length))| {
            let mut b = DataFileBuilder::default();
            b.content(DataContentType::PositionDeletes)
                .file_path(path.clone())
                .file_format(DataFileFormat::Puffin)
                .partition(v.partition.clone())
                .partition_spec_id(v.spec_id)
                .record_count(v.vector.len())
                .file_size_in_bytes(size)
                .referenced_data_file(Some(v.data_file.clone()))
                .content_offset(Some(offset as i64))
                .content_size_in_bytes(Some(length as i64));
            let entry = b.build().map_err(|e| Error::Metadata {
                location: path.clone(),
                reason: format!("deletion vector entry: {e}"),
                source: Some(Box::new(e)),
            })?;
            Ok((entry, v.spec_id))
        })
        .collect()
}
