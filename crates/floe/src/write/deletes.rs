//! Delete files: equality deletes (rows matching the given columns' values are deleted from
//! data files with a lower data sequence number; Iceberg spec v2, "Equality Delete Files").

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use iceberg::spec::{DataFile, DataFileFormat};
use iceberg::table::Table;
use iceberg::writer::base_writer::equality_delete_writer::{
    EqualityDeleteFileWriterBuilder, EqualityDeleteWriterConfig,
};
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};

use crate::error::{Error, Result};

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
        crate::properties::WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT as usize,
        table.file_io().clone(),
        DefaultLocationGenerator::new(md)?,
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
