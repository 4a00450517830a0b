//! A DataFusion table over an Iceberg table's current snapshot: planned with the iceberg crate's
//! scan, read with [`crate::table::rows`] (position and equality deletes, and the deletion
//! vectors of format v3). Projection is pushed into the scan.

use std::any::Any;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt};
use iceberg::table::Table;

use crate::base::error::Result;

/// Table provider over one Iceberg table.
#[derive(Debug)]
pub struct IcebergScanTable {
    table: Table,
    schema: SchemaRef,
}

impl IcebergScanTable {
    pub fn try_new(table: Table) -> Result<Self> {
        let schema = iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())?;
        let schema = Arc::new(strip(&schema));
        // The current snapshot through the current schema (columns added, renamed, dropped or
        // widened since the last data commit).
        let table = crate::table::current_state(&table)?;
        Ok(Self { table, schema })
    }
}

fn strip(schema: &Schema) -> Schema {
    Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(Default::default()))
            .collect::<Vec<_>>(),
    )
}

#[async_trait]
impl TableProvider for IcebergScanTable {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn table_type(&self) -> TableType {
        TableType::Base
    }
    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        // The iceberg crate's scan parses each manifest's schema, opaque columns included.
        crate::table::opaque::refuse(
            self.table.metadata().current_schema(),
            &format!(
                "read '{}' (its metadata tables, `$files`, `$snapshots`..., still can)",
                crate::table::ident_string(self.table.identifier())
            ),
            "read",
        )
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let columns: Vec<usize> = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let projected = Arc::new(self.schema.project(&columns)?);
        let part = Arc::new(SnapshotStream {
            table: self.table.clone(),
            schema: projected.clone(),
        });
        Ok(Arc::new(StreamingTableExec::try_new(
            projected,
            vec![part],
            None,
            [],
            false,
            limit,
        )?))
    }
}

#[derive(Debug)]
struct SnapshotStream {
    table: Table,
    schema: SchemaRef,
}

impl PartitionStream for SnapshotStream {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let table = self.table.clone();
        let schema = self.schema.clone();
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let out_schema = schema.clone();
        let stream = futures::stream::once(async move {
            // Read by floe's reader: the deletion vectors of a v3 table are applied there (the
            // iceberg crate's `to_arrow` cannot read them).
            crate::table::rows::read_current(&table, Some(names))
                .await
                .map(|batches| batches.map_err(floe_ext))
                .map_err(floe_ext)
        })
        .try_flatten()
        .map(move |b| b.and_then(|b| conform(&out_schema, b)));
        Box::pin(RecordBatchStreamAdapter::new(schema, stream))
    }
}

fn floe_ext(e: crate::base::error::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn conform(schema: &SchemaRef, batch: RecordBatch) -> DfResult<RecordBatch> {
    let options =
        arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    let mut cols = Vec::with_capacity(schema.fields().len());
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        cols.push(if c.data_type() == f.data_type() {
            c.clone()
        } else {
            arrow::compute::cast(c, f.data_type())?
        });
    }
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &options,
    )?)
}

/// A table over one in-memory batch (metadata tables). Scans go through
/// `StreamingTableExec`, which applies projection and `LIMIT` itself.
#[derive(Debug)]
pub struct BatchTable {
    batch: RecordBatch,
}

impl BatchTable {
    pub fn new(batch: RecordBatch) -> Self {
        Self { batch }
    }
}

#[async_trait]
impl TableProvider for BatchTable {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }
    fn table_type(&self) -> TableType {
        TableType::View
    }
    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let part = Arc::new(OneBatch {
            batch: self.batch.clone(),
        });
        Ok(Arc::new(StreamingTableExec::try_new(
            self.batch.schema(),
            vec![part],
            projection,
            [],
            false,
            limit,
        )?))
    }
}

#[derive(Debug)]
struct OneBatch {
    batch: RecordBatch,
}

impl PartitionStream for OneBatch {
    fn schema(&self) -> &SchemaRef {
        self.batch.schema_ref()
    }
    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let batch = self.batch.clone();
        Box::pin(RecordBatchStreamAdapter::new(
            batch.schema(),
            futures::stream::once(async move { Ok(batch) }),
        ))
    }
}
