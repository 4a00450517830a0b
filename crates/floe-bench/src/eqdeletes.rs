//! `equality-deletes`: commits one equality delete file on a column, of every live row whose
//! value is a multiple of `modulo`, as a Flink upsert sink would write them. The compaction
//! matrix (`peers/compact_matrix.py`) uses it for its equality-delete cell: floe itself never
//! writes equality deletes.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use arrow::array::{Array, BooleanArray, Int64Array};
use arrow::compute::filter_record_batch;
use floe::catalog::{Catalog, CatalogConfig};
use floe::iceberg::TableIdent;
use futures::TryStreamExt;
use serde_json::json;

pub async fn run(warehouse: PathBuf, table: String, column: String, modulo: i64) -> Result<()> {
    if modulo <= 0 {
        bail!("--modulo must be positive, got {modulo}");
    }
    let catalog = Catalog::connect(&CatalogConfig::embedded(Some(&warehouse))?).await?;
    let ident = TableIdent::from_strs(table.split('.'))?;
    let t = catalog.load_table(&ident).await?;
    let batches: Vec<arrow::record_batch::RecordBatch> =
        t.scan().build()?.to_arrow().await?.try_collect().await?;
    let mut rows = Vec::new();
    let mut deleted = 0usize;
    for b in batches {
        let values = b
            .column_by_name(&column)
            .with_context(|| format!("no column {column}"))?
            .as_any()
            .downcast_ref::<Int64Array>()
            .with_context(|| format!("column {column} is not a bigint"))?;
        let keep: BooleanArray = (0..values.len())
            .map(|i| Some(values.is_valid(i) && values.value(i) % modulo == 0))
            .collect();
        let picked = filter_record_batch(&b, &keep)?;
        deleted += picked.num_rows();
        if picked.num_rows() > 0 {
            rows.push(picked);
        }
    }
    let files = floe::write::deletes::write_equality_deletes(&t, &[column.as_str()], rows).await?;
    let n = files.len();
    let committed = floe::commit::Committer::new(&catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], files))
        .await?;
    println!(
        "{}",
        json!({
            "table": table,
            "deleted_rows": deleted,
            "delete_files": n,
            "snapshot_id": committed.snapshot_id,
            "metadata_location": committed.table.metadata_location(),
        })
    );
    Ok(())
}
