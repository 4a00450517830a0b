//! `table drop [--purge]`: remove a table from its catalog and, with purge, delete its files.
//!
//! Purge deletes what the table's metadata references (every snapshot's data, delete, manifest,
//! manifest-list and statistics files, the current metadata file and its log), as Iceberg's
//! `CatalogUtil.dropTableData` does, with floe's one delete rule on top: the table's fence
//! ([`crate::storage::fence`]). Referenced files outside the table location (added with
//! `add_files`, say) are kept and listed unless [`DropBuilder::delete_external_files`] asks,
//! exactly as `expire-snapshots` keeps them; files inside another table's location and the
//! catalog's own files are never deleted.
//!
//! Order: every manifest is read first (an unreadable one aborts with the table still in the
//! catalog), then the catalog entry is dropped (compare-and-swap on the metadata pointer), then
//! the files are deleted. A crash after the drop leaves files no catalog references. REST
//! catalogs purge on the server (`purgeRequested=true`).

use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::Result;
use crate::catalog::{ident_string, Catalog, CatalogKind};
use crate::operations::clean::check_gc_enabled;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::storage::delete::{delete_files, DeleteStats};
use crate::storage::fence::{Fence, KeptFiles};
use crate::table::reach::reachable_from_table;

/// What `table drop` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DropMetrics {
    pub table: String,
    pub purged: bool,
    /// The catalog server purged the files itself (REST).
    pub purged_by_server: bool,
    /// Files the metadata referenced.
    pub referenced_files: u64,
    pub deleted: DeleteStats,
    /// Referenced files the fence kept (outside the location, another table's, the catalog's).
    pub kept: KeptFiles,
}

/// Builds and runs a table drop.
pub struct DropBuilder {
    ctx: Ctx,
    purge: bool,
    delete_external: bool,
}

impl DropBuilder {
    /// Drops `ident` from the catalog, keeping its files.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            purge: false,
            delete_external: false,
        }
    }

    /// Also delete the files the table references (inside its location).
    pub fn with_purge(mut self, yes: bool) -> Self {
        self.purge = yes;
        self
    }

    /// With purge, also delete referenced files outside the table location.
    pub fn with_delete_external_files(mut self, yes: bool) -> Self {
        self.delete_external = yes;
        self
    }

    /// Receives delete progress.
    pub fn with_progress(
        mut self,
        f: impl Fn(&crate::base::cost::Progress) + Send + Sync + 'static,
    ) -> Self {
        self.ctx.progress = Some(std::sync::Arc::new(f));
        self
    }
}

/// What a drop's `apply` needs: the table as planned and, with purge, the files to delete.
pub struct DropWork {
    table: Table,
    purge: Option<(Fence, Vec<String>)>,
}

impl std::fmt::Debug for DropWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.purge.as_ref().map(|(_, p)| p.len()).unwrap_or(0);
        write!(f, "DropWork({n} files to delete)")
    }
}

/// A drop's plan: the report (files referenced, kept by the fence) and the files to delete.
pub type DropPlan = Planned<DropMetrics, DropWork>;

impl Costed for DropMetrics {
    /// The referenced files a purge deletes (sizes are not read ahead).
    fn cost(&self) -> Cost {
        Cost {
            files_to_delete: if self.purged {
                self.referenced_files
                    .saturating_sub(self.kept.outside_location)
            } else {
                0
            },
            ..Cost::default()
        }
    }
}

impl Operation for DropBuilder {
    type Plan = DropPlan;
    type Metrics = DropMetrics;

    /// Reads every manifest (with purge, on a catalog floe drops itself), deleting nothing: an
    /// unreadable one fails here, with the table still in the catalog.
    async fn plan(&self) -> Result<DropPlan> {
        let table = self.ctx.load().await?;
        let mut report = DropMetrics {
            table: ident_string(&self.ctx.ident),
            purged: self.purge,
            purged_by_server: false,
            referenced_files: 0,
            deleted: DeleteStats::default(),
            kept: KeptFiles::default(),
        };
        let snapshot_id = snapshot_of(&table);
        if self.ctx.catalog.kind() == CatalogKind::Rest || !self.purge {
            return Ok(Planned::new(
                report,
                snapshot_id,
                DropWork { table, purge: None },
            ));
        }
        let reach = reachable_from_table(&table).await?;
        let fence = Fence::for_table(&self.ctx.catalog, &table)
            .await?
            .allow_external(self.delete_external);
        report.referenced_files = reach.files.len() as u64;
        let mut paths: Vec<String> = reach.files.into_keys().collect();
        paths.sort();
        let (allowed, kept) = fence.partition(paths);
        report.kept = kept;
        Ok(Planned::new(
            report,
            snapshot_id,
            DropWork {
                table,
                purge: Some((fence, allowed)),
            },
        ))
    }

    /// Drops the catalog entry (a compare-and-swap on the planned metadata pointer: a table
    /// changed since the plan is not dropped), then deletes the planned files.
    async fn apply(self, plan: DropPlan) -> Result<DropMetrics> {
        let mut result = plan.report;
        let DropWork { table, purge } = plan.work;
        let catalog = &self.ctx.catalog;
        if catalog.kind() == CatalogKind::Rest {
            catalog.drop_entry(&table, self.purge).await?;
            result.purged_by_server = self.purge;
            return Ok(result);
        }
        let Some((fence, allowed)) = purge else {
            catalog.drop_entry(&table, false).await?;
            return Ok(result);
        };
        check_gc_enabled(&table, "purge the table's files")?;
        catalog.drop_entry(&table, false).await?;
        result.deleted =
            delete_files(table.file_io(), &fence, allowed, self.ctx.progress.clone()).await;
        Ok(result)
    }
}
