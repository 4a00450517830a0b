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

use iceberg::TableIdent;

use crate::catalog::{ident_string, Catalog, CatalogKind};
use crate::clean::check_gc_enabled;
use crate::error::Result;
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
pub struct DropBuilder<'a> {
    catalog: &'a Catalog,
    ident: TableIdent,
    purge: bool,
    delete_external: bool,
    progress: Option<crate::operation::ProgressFn>,
}

impl<'a> DropBuilder<'a> {
    /// Drops `ident` from the catalog, keeping its files.
    pub fn new(catalog: &'a Catalog, ident: TableIdent) -> Self {
        Self {
            catalog,
            ident,
            purge: false,
            delete_external: false,
            progress: None,
        }
    }

    /// Also delete the files the table references (inside its location).
    pub fn purge(mut self, yes: bool) -> Self {
        self.purge = yes;
        self
    }

    /// With purge, also delete referenced files outside the table location.
    pub fn delete_external_files(mut self, yes: bool) -> Self {
        self.delete_external = yes;
        self
    }

    /// Receives delete progress.
    pub fn with_progress(
        mut self,
        f: impl Fn(&crate::operation::Progress) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(std::sync::Arc::new(f));
        self
    }

    /// Runs the drop.
    pub async fn execute(self) -> Result<DropMetrics> {
        let table = self.catalog.load_table(&self.ident).await?;
        let mut result = DropMetrics {
            table: ident_string(&self.ident),
            purged: self.purge,
            purged_by_server: false,
            referenced_files: 0,
            deleted: DeleteStats::default(),
            kept: KeptFiles::default(),
        };
        if self.catalog.kind() == CatalogKind::Rest {
            self.catalog.drop_entry(&table, self.purge).await?;
            result.purged_by_server = self.purge;
            return Ok(result);
        }
        if !self.purge {
            self.catalog.drop_entry(&table, false).await?;
            return Ok(result);
        }
        check_gc_enabled(&table, "purge the table's files")?;
        let reach = reachable_from_table(&table).await?;
        let fence = Fence::for_table(self.catalog, &table)
            .await?
            .allow_external(self.delete_external);
        result.referenced_files = reach.files.len() as u64;
        let mut paths: Vec<String> = reach.files.into_keys().collect();
        paths.sort();
        let (allowed, kept) = fence.partition(paths);
        result.kept = kept;
        self.catalog.drop_entry(&table, false).await?;
        result.deleted = delete_files(table.file_io(), &fence, allowed, self.progress).await;
        Ok(result)
    }
}
