//! Metadata tables as Arrow, with Iceberg's names and columns (as Spark shows them):
//! `snapshots`, `history`, `refs`, `metadata_log_entries`, `manifests`, `files` (and
//! `data_files`, `delete_files`), `entries`, `partitions`.
//!
//! Computed from metadata only: the current snapshot's manifest list and manifests (one read
//! each), never data files. DataFusion adapts these batches in [`crate::operations::sql`].
//!
//! [`MetadataTable`] names the tables and dispatches a scan; the tables read from the table
//! metadata alone (`snapshots`, `history`, `refs`, `metadata_log_entries`) are built in
//! `from_metadata`, those that read the current manifests in `from_manifests`, and `arrays`
//! turns partition tuples into Arrow columns.
//!
//! [`InspectBuilder`] is the entry point, a read-only [`Query`]:
//! `InspectBuilder::new(&catalog, ident, MetadataTable::Files).query()` gives the rows.

mod arrays;
mod from_manifests;
mod from_metadata;

use std::sync::Arc;

use arrow::array::{ArrayRef, TimestampMillisecondArray};
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::operations::{Ctx, Query};
use from_manifests::{entries, files, manifests, partitions};
use from_metadata::{history, metadata_log_entries, refs, snapshots};

/// The metadata tables floe serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataTable {
    Snapshots,
    History,
    Refs,
    MetadataLogEntries,
    Manifests,
    Files,
    DataFiles,
    DeleteFiles,
    Entries,
    Partitions,
}

impl MetadataTable {
    /// All tables, for listings.
    pub const ALL: [MetadataTable; 10] = [
        Self::Snapshots,
        Self::History,
        Self::Refs,
        Self::MetadataLogEntries,
        Self::Manifests,
        Self::Files,
        Self::DataFiles,
        Self::DeleteFiles,
        Self::Entries,
        Self::Partitions,
    ];

    /// The suffix after `$`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Snapshots => "snapshots",
            Self::History => "history",
            Self::Refs => "refs",
            Self::MetadataLogEntries => "metadata_log_entries",
            Self::Manifests => "manifests",
            Self::Files => "files",
            Self::DataFiles => "data_files",
            Self::DeleteFiles => "delete_files",
            Self::Entries => "entries",
            Self::Partitions => "partitions",
        }
    }

    /// Parses the suffix after `$`.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|t| t.name()).collect();
                Error::invalid_option(
                    "metadata table",
                    s,
                    format!("expected one of {}", names.join(", ")),
                )
            })
    }

    /// Whether the table reads the current snapshot's manifests (and so has a state as of any
    /// snapshot, for time travel), rather than the whole history in the table metadata.
    pub fn reads_manifests(self) -> bool {
        !matches!(
            self,
            Self::Snapshots | Self::History | Self::Refs | Self::MetadataLogEntries
        )
    }

    /// Computes the table's rows.
    async fn scan(self, table: &Table) -> Result<RecordBatch> {
        match self {
            Self::Snapshots => snapshots(table),
            Self::History => history(table),
            Self::Refs => refs(table),
            Self::MetadataLogEntries => metadata_log_entries(table),
            Self::Manifests => manifests(table).await,
            Self::Files => files(table, None).await,
            Self::DataFiles => files(table, Some(true)).await,
            Self::DeleteFiles => files(table, Some(false)).await,
            Self::Entries => entries(table).await,
            Self::Partitions => partitions(table).await,
        }
    }
}

/// One metadata table of one table, as Arrow: a [`Query`].
#[derive(Clone)]
pub struct InspectBuilder {
    ctx: Ctx,
    kind: MetadataTable,
    table: Option<Table>,
}

impl InspectBuilder {
    /// The metadata table `kind` of `ident`.
    pub fn new(catalog: &Catalog, ident: TableIdent, kind: MetadataTable) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            kind,
            table: None,
        }
    }

    /// Reads this already loaded table instead of loading it.
    pub fn with_table(mut self, table: Table) -> Self {
        self.table = Some(table);
        self
    }
}

impl Query for InspectBuilder {
    type Output = RecordBatch;

    /// Loads the table (unless given) and computes the metadata table's rows.
    async fn query(self) -> Result<RecordBatch> {
        let table = match self.table {
            Some(t) => t,
            None => self.ctx.load().await?,
        };
        self.kind.scan(&table).await
    }
}

fn ts_field(name: &str, nullable: bool) -> Field {
    Field::new(
        name,
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        nullable,
    )
}

fn ts_array(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC"))
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}
