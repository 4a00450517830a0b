//! Row lineage (Iceberg format v3, spec "Row Lineage"): every row has a `_row_id` and a
//! `_last_updated_sequence_number`, stored in the data file or inherited from its metadata.
//!
//! ```text
//!  table next-row-id ──> snapshot first-row-id ──> manifest first_row_id (assigned by the
//!  manifest list) ──> data file first_row_id (inherited on read) ──> _row_id = first_row_id + _pos
//! ```
//!
//! - "First Row ID Inheritance": a data file whose `first_row_id` is null takes the manifest's
//!   `first_row_id` plus the `record_count` of every data file before it in the manifest that
//!   also had a null `first_row_id`. The iceberg crate (0.10.1) does not apply this rule when
//!   it reads a manifest, so [`inherited_first_row_ids`] does, and every path that carries an
//!   entry into a new manifest (EXISTING or DELETED) writes the inherited value explicitly
//!   ([`with_first_row_id`]), as the spec requires.
//! - A null `_row_id` in a data file is `first_row_id + _pos`; a null
//!   `_last_updated_sequence_number` is the data sequence number of the file's entry.
//!   Compaction writes both columns into its outputs so a row keeps its identity.

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, ManifestContentType, ManifestFile, NestedField,
    PrimitiveType, Schema, Type,
};

use crate::base::error::{Error, Result};

/// Field id of `_row_id` (spec "Reserved Field IDs": 2147483540).
pub const ROW_ID_FIELD_ID: i32 = i32::MAX - 107;
/// Field id of `_last_updated_sequence_number` (2147483539).
pub const LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID: i32 = i32::MAX - 108;
/// Column names of the two lineage fields.
pub const ROW_ID: &str = "_row_id";
pub const LAST_UPDATED_SEQUENCE_NUMBER: &str = "_last_updated_sequence_number";

/// What a data file's manifest entry says of its rows' lineage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileLineage {
    /// The file's `first_row_id`, inherited ([`inherited_first_row_ids`]); `None` for a file
    /// from before the table had lineage.
    pub first_row_id: Option<i64>,
    /// The entry's data sequence number (what a null `_last_updated_sequence_number` is).
    pub sequence_number: i64,
}

/// `schema` with the two lineage fields after its own (optional longs): the schema a
/// compaction of a format v3 table reads and writes its rows in, so each keeps its
/// `_row_id` and `_last_updated_sequence_number` (what Iceberg's Java compaction writes too).
pub fn with_lineage_fields(schema: &Schema) -> Result<Schema> {
    let mut fields: Vec<_> = schema.as_struct().fields().to_vec();
    for (id, name) in [
        (ROW_ID_FIELD_ID, ROW_ID),
        (
            LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
            LAST_UPDATED_SEQUENCE_NUMBER,
        ),
    ] {
        if schema.field_by_id(id).is_none() {
            fields
                .push(NestedField::optional(id, name, Type::Primitive(PrimitiveType::Long)).into());
        }
    }
    Ok(Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_identifier_field_ids(schema.identifier_field_ids())
        .with_fields(fields)
        .build()?)
}

/// The `first_row_id` of each entry of a manifest, in entry order, with inheritance applied:
/// `None` for delete files, for entries of a manifest without a `first_row_id` (written before
/// the table had row lineage: the manifest list assigns one when it is next written), and for
/// manifests that are not data manifests.
pub fn inherited_first_row_ids<'a>(
    manifest: &ManifestFile,
    files: impl IntoIterator<Item = &'a DataFile>,
) -> Vec<Option<i64>> {
    let base = match (manifest.content, manifest.first_row_id) {
        (ManifestContentType::Data, Some(first)) => Some(first as i64),
        _ => None,
    };
    let mut next = base;
    files
        .into_iter()
        .map(|f| {
            if f.content_type() != DataContentType::Data {
                return None;
            }
            match (f.first_row_id(), next) {
                (Some(own), _) => Some(own),
                (None, Some(n)) => {
                    next = Some(n + f.record_count() as i64);
                    Some(n)
                }
                (None, None) => None,
            }
        })
        .collect()
}

/// `file` with `first_row_id` set (the inherited value written into an EXISTING or DELETED
/// entry); `file` itself when it already has that value or `first_row_id` is `None`.
/// `spec_id` is the partition spec of the entry's manifest.
pub fn with_first_row_id(
    file: &DataFile,
    spec_id: i32,
    first_row_id: Option<i64>,
) -> Result<DataFile> {
    if first_row_id.is_none() || file.first_row_id() == first_row_id {
        return Ok(file.clone());
    }
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .partition_spec_id(spec_id)
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(first_row_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| Error::Metadata {
        location: file.file_path().to_string(),
        reason: format!("manifest entry with first_row_id: {e}"),
        source: Some(Box::new(e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataFileFormat, Struct};

    fn data(path: &str, rows: u64, first: Option<i64>) -> DataFile {
        let mut b = DataFileBuilder::default();
        b.content(DataContentType::Data)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(rows)
            .file_size_in_bytes(10)
            .first_row_id(first);
        b.build().unwrap()
    }

    fn manifest(first: Option<u64>) -> ManifestFile {
        ManifestFile {
            manifest_path: "m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: None,
            existing_files_count: None,
            deleted_files_count: None,
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id: first,
        }
    }

    #[test]
    fn null_ids_continue_from_the_manifest_and_skip_explicit_ones() {
        // The spec's example: explicit ids are kept and do not advance the counter.
        let files = [
            data("a", 50, None),
            data("b", 7, Some(5_000)),
            data("c", 25, None),
        ];
        let ids = inherited_first_row_ids(&manifest(Some(1_000)), files.iter());
        assert_eq!(ids, vec![Some(1_000), Some(5_000), Some(1_050)]);
        // Before the table had lineage: nothing to inherit.
        let ids = inherited_first_row_ids(&manifest(None), files.iter());
        assert_eq!(ids, vec![None, Some(5_000), None]);
    }

    #[test]
    fn an_inherited_id_is_written_into_the_entry() {
        let f = data("a", 3, None);
        let g = with_first_row_id(&f, 0, Some(42)).unwrap();
        assert_eq!(g.first_row_id(), Some(42));
        assert_eq!(g.file_path(), "a");
        assert_eq!(g.record_count(), 3);
        assert_eq!(with_first_row_id(&f, 0, None).unwrap().first_row_id(), None);
    }
}
