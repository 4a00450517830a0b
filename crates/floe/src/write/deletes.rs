//! Delete files: equality deletes (rows matching the given columns' values are deleted from
//! data files with a lower data sequence number; Iceberg spec v2, "Equality Delete Files") and
//! position deletes (a data file path and a row position per deleted row; "Position Delete
//! Files").

use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, NestedField, PartitionKey, PrimitiveType, Schema,
    Struct, Type,
};
use iceberg::table::Table;
use iceberg::writer::base_writer::equality_delete_writer::{
    EqualityDeleteFileWriterBuilder, EqualityDeleteWriterConfig,
};
use iceberg::writer::file_writer::location_generator::DefaultFileNameGenerator;
use iceberg::writer::file_writer::location_generator::LocationGenerator;
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};

use crate::base::error::{Error, Result};

/// Writes an equality delete file for an unpartitioned table: `rows` (in the table schema)
/// give the values of `columns` to delete. Returns the delete files (not committed).
pub async fn write_equality_deletes(
    table: &Table,
    columns: &[&str],
    rows: Vec<RecordBatch>,
) -> Result<Vec<DataFile>> {
    let md = table.metadata();
    if !md.default_partition_spec().is_unpartitioned() {
        return Err(Error::invalid_option(
            "equality delete",
            crate::catalog::ident_string(table.identifier()),
            "only unpartitioned tables are supported so far",
        ));
    }
    let schema = md.current_schema().clone();
    let ids = columns
        .iter()
        .map(|c| {
            schema
                .field_by_name(c)
                .map(|f| f.id)
                .ok_or_else(|| Error::invalid_option("equality delete column", c, "no such column"))
        })
        .collect::<Result<Vec<_>>>()?;
    let config = EqualityDeleteWriterConfig::new(ids, schema.clone())?;
    let delete_schema = Arc::new(iceberg::arrow::arrow_schema_to_schema(
        config.projected_arrow_schema_ref(),
    )?);
    let parquet =
        ParquetWriterBuilder::new(crate::write::parquet_properties(table)?, delete_schema);
    let rolling = RollingFileWriterBuilder::new(
        parquet,
        crate::base::properties::WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT as usize,
        table.file_io().clone(),
        crate::write::location::Locations::new(md)?,
        DefaultFileNameGenerator::new(
            format!("eq-del-{}", uuid::Uuid::now_v7()),
            None,
            DataFileFormat::Parquet,
        ),
    );
    let mut writer = EqualityDeleteFileWriterBuilder::new(rolling, config)
        .build(None)
        .await?;
    for b in rows {
        writer.write(b).await?;
    }
    Ok(writer.close().await?)
}

/// What writing the delete file at `path` gave: on failure (a full disk) the partial file is
/// deleted, and the error names `what` was written and where.
pub(crate) async fn settle_write<T, E>(
    table: &Table,
    path: &str,
    what: &str,
    written: std::result::Result<T, E>,
) -> Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    match written {
        Ok(done) => Ok(done),
        Err(e) => {
            crate::commit::Ledger::of(table)
                .with([path.to_string()])
                .discard()
                .await;
            Err(Error::Storage {
                reason: format!("writing {what}: {e}"),
                location: path.to_string(),
                source: Some(Box::new(e)),
            })
        }
    }
}

/// The distinct paths of `files` (the deletion vectors of one Puffin file share its path).
pub fn distinct_paths(files: &[DataFile]) -> Vec<String> {
    let mut paths: Vec<String> = files.iter().map(|f| f.file_path().to_string()).collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Reserved field id of a position delete file's `file_path` column (Iceberg spec v2,
/// "Reserved Field IDs"); its bounds in a delete file's metrics say which data files it targets.
pub const POSITION_DELETE_FILE_PATH_ID: i32 = 2147483546;
/// Reserved field id of a position delete file's `pos` column.
pub const POSITION_DELETE_POS_ID: i32 = 2147483545;

/// The schema of a position delete file: `file_path string`, `pos long` (both required).
pub fn position_delete_schema() -> Result<Schema> {
    Ok(Schema::builder()
        .with_fields(vec![
            NestedField::required(
                POSITION_DELETE_FILE_PATH_ID,
                "file_path",
                Type::Primitive(PrimitiveType::String),
            )
            .into(),
            NestedField::required(
                POSITION_DELETE_POS_ID,
                "pos",
                Type::Primitive(PrimitiveType::Long),
            )
            .into(),
        ])
        .build()?)
}

/// Writes one position delete file of `rows` (data file path, row position) for the data
/// files of partition `partition` of spec `spec_id`. Rows are sorted by path, then position,
/// as the spec requires. With `reference`, a file whose rows all point at one data file gets
/// `referenced_data_file` (readers then open it for that file only). Returns the file (not
/// committed); `None` for no rows.
pub async fn write_position_delete_file(
    table: &Table,
    spec_id: i32,
    partition: Struct,
    mut rows: Vec<(String, i64)>,
    reference: bool,
) -> Result<Option<DataFile>> {
    if rows.is_empty() {
        return Ok(None);
    }
    rows.sort();
    rows.dedup();
    let md = table.metadata();
    let spec = md.partition_spec_by_id(spec_id).ok_or_else(|| {
        Error::invalid_option(
            "position delete partition spec",
            spec_id,
            "not in the table metadata",
        )
    })?;
    let schema = Arc::new(position_delete_schema()?);
    let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?);
    let single = rows.first().map(|r| &r.0) == rows.last().map(|r| &r.0);
    let referenced = (reference && single).then(|| rows[0].0.clone());
    let batch = RecordBatch::try_new(
        arrow_schema,
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )?;
    // Full (untruncated) file_path bounds: lower == upper then proves a single target.
    let props = crate::write::parquet_properties(table)?
        .into_builder()
        .set_statistics_truncate_length(None)
        .build();
    let key = PartitionKey::new(
        spec.as_ref().clone(),
        md.current_schema().clone(),
        partition.clone(),
    );
    let name = format!("{}-pos-deletes.parquet", uuid::Uuid::now_v7());
    let path = crate::write::location::Locations::new(md)?
        .generate_location((!spec.is_unpartitioned()).then_some(&key), &name);
    let write = async {
        let output = table.file_io().new_output(&path)?;
        let mut writer = ParquetWriterBuilder::new(props, schema)
            .build(output)
            .await?;
        writer.write(&batch).await?;
        Ok::<_, Error>(writer.close().await?)
    };
    let mut built = settle_write(table, &path, "position delete file", write.await).await?;
    let Some(mut b) = built.pop() else {
        return Ok(None);
    };
    b.content(DataContentType::PositionDeletes)
        .partition(partition)
        .partition_spec_id(spec_id)
        .referenced_data_file(referenced);
    b.build().map(Some).map_err(|e| Error::Metadata {
        location: path,
        reason: format!("position delete file: {e}"),
        source: Some(Box::new(e)),
    })
}
