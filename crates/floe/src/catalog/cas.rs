//! The commit: [`Catalog::commit`], the only place a table pointer moves. A SQL catalog checks
//! the requirements against the base metadata, writes the next `metadata.json` and swaps the
//! pointer with compare-and-swap (`commit_sql`); a REST catalog posts requirements and updates
//! and the server does the same.

use std::str::FromStr;
use std::sync::Arc;

use iceberg::spec::{TableMetadata, TableMetadataBuildResult, TableMetadataBuilder};
use iceberg::table::Table;
use iceberg::{MetadataLocation, TableRequirement, TableUpdate};

use super::heads::Head;
use super::{ident_string, ns_string, rest, table_from, Backend, Catalog, SqlCatalog};
use crate::base::error::{Error, Result};
use crate::base::properties;
use crate::storage::fence::Fence;
use crate::table::metadata_json;

impl Catalog {
    /// Commits `updates` on top of `base` if `requirements` hold.
    ///
    /// SQL catalogs: checks the requirements against `base`, writes
    /// `metadata/NNNNN-<uuid>.metadata.json` (next version after `base`), then swaps the
    /// pointer with `UPDATE ... WHERE metadata_location = <base's>`: if another commit moved
    /// the pointer since `base` was loaded, nothing changes and [`Error::CommitConflict`] is
    /// returned (the caller reloads and retries); the metadata file written is deleted. When
    /// the swap statement itself fails, the pointer is re-read: if it shows our file, the
    /// commit did happen and is reported as a success; if it cannot be re-read the outcome is
    /// [`Error::CommitStateUnknown`], so files of a landed commit are never deleted. Honours
    /// `write.metadata.delete-after-commit.enabled` / `write.metadata.previous-versions-max`.
    ///
    /// REST catalogs: posts the requirements and updates; see `rest.rs` for the outcome rules.
    pub(crate) async fn commit(
        &self,
        base: &Table,
        requirements: &[TableRequirement],
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        match &self.backend {
            Backend::Sql { inner, .. } => {
                commit_sql(self, inner, base, requirements, updates).await
            }
            Backend::Rest(r) => {
                let (metadata, location) = r.commit(base, requirements, updates).await?;
                table_from(
                    base.file_io(),
                    base.identifier().clone(),
                    metadata,
                    location,
                )
            }
        }
    }
}

/// The SQL catalog's commit: local requirement check, new metadata file, pointer CAS.
///
/// A commit that only adds to the history (an append: [`metadata_json::spliceable`]) applies
/// its updates to the table's head and splices the new snapshot onto the unparsed history
/// ([`metadata_json::splice`]); its cost does not grow with the number of snapshots. Any other
/// commit applies them to the whole table, which a head base is first replaced by.
async fn commit_sql(
    catalog: &Catalog,
    inner: &SqlCatalog,
    base: &Table,
    requirements: &[TableRequirement],
    updates: Vec<TableUpdate>,
) -> Result<Table> {
    let ident = base.identifier();
    let ns = ns_string(ident.namespace());
    let name = ident_string(ident);
    let file_io = base.file_io();
    let current_location = base.metadata_location_result()?.to_string();
    for req in requirements {
        // A v1 table's refs are floe's to check (the crate sees only `main` there).
        let checked = match crate::table::reserved::check_v1_ref(base.metadata(), req) {
            Some(r) => r,
            None => req
                .check(Some(base.metadata()))
                .map_err(|e| e.message().to_string()),
        };
        if let Err(e) = checked {
            return Err(Error::CommitConflict {
                table: name,
                attempts: 1,
                reason: crate::base::error::Conflict::RequirementFailed(e),
            });
        }
    }
    let head = match metadata_json::spliceable(&updates) {
        true => catalog
            .head_at(file_io, ident, &current_location)
            .await?
            .filter(|h| metadata_json::splices_onto(&h.metadata, &updates)),
        false => None,
    };
    // The whole table, for a commit that cannot be spliced on a head.
    let whole;
    let base_md = match (&head, metadata_json::is_head(base.metadata())) {
        (None, true) => {
            whole = crate::table::read_metadata(file_io, &current_location).await?;
            &whole
        }
        _ => base.metadata(),
    };
    let apply =
        |md: &TableMetadata, updates: Vec<TableUpdate>| -> Result<TableMetadataBuildResult> {
            let v1_refs = crate::table::reserved::committed(md, &updates);
            let mut builder =
                TableMetadataBuilder::new_from_metadata(md.clone(), Some(current_location.clone()));
            for update in updates {
                builder = update.apply(builder)?;
            }
            // A v1 table carries its refs in a reserved property (the crate drops them).
            if let Some(props) = v1_refs {
                builder = builder.set_properties(props)?;
            }
            Ok(builder.build()?)
        };
    // What is written (the head's build when spliced), and the table the commit returns.
    let (built, spliced, returned) = match &head {
        Some(head) => {
            // An id the head does not know may still be an old snapshot's (ids are random):
            // a conflict, retried with a new one.
            for u in &updates {
                if let TableUpdate::AddSnapshot { snapshot } = u {
                    if head.history.may_hold_id(snapshot.snapshot_id()) {
                        return Err(Error::CommitConflict {
                            table: name,
                            attempts: 1,
                            reason: crate::base::error::Conflict::RequirementFailed(format!(
                                "snapshot id {} may already be in the table's history",
                                snapshot.snapshot_id()
                            )),
                        });
                    }
                }
            }
            let returned = match metadata_json::is_head(base_md) {
                true => None,
                false => Some(apply(base_md, updates.clone())?.metadata),
            };
            let built = apply(&head.metadata, updates)?;
            let spliced = metadata_json::splice(&head.history, &head.metadata, &built.metadata)
                .map_err(|e| Error::Metadata {
                    location: current_location.clone(),
                    reason: format!("splicing the next metadata file: {e}"),
                    source: Some(Box::new(e)),
                })?;
            (built, Some(spliced), returned)
        }
        None => (apply(base_md, updates)?, None, None),
    };
    let new_location = MetadataLocation::from_str(&current_location)
        .map(|l| l.with_next_version())
        .unwrap_or_else(|_| {
            MetadataLocation::new_with_metadata(built.metadata.location(), &built.metadata)
        })
        .with_new_metadata(&built.metadata);
    let new_loc = new_location.to_string();
    let written = match &spliced {
        Some((pieces, _)) => {
            crate::table::write_metadata_pieces(file_io, pieces.clone(), &new_location).await
        }
        None => crate::table::write_metadata(file_io, &built.metadata, &new_location).await,
    };
    if let Err(e) = written {
        // A partial file (a full disk) would take the version number of the next commit.
        let _ = file_io.delete(&new_loc).await;
        return Err(crate::storage::storage_error_on(
            file_io,
            &new_loc,
            rest::describe(&e),
            e,
        ));
    }
    let swapped = match inner
        .swap(&ns, ident.name(), &current_location, &new_loc)
        .await
    {
        Ok(swapped) => swapped,
        Err(e) => {
            // Unknown outcome: trust only the pointer itself.
            match inner.metadata_location(&ns, ident.name()).await {
                Ok(Some(now)) if now == new_loc => true,
                Ok(_) => {
                    let _ = file_io.delete(&new_loc).await;
                    return Err(e);
                }
                Err(_) => {
                    return Err(Error::CommitStateUnknown {
                        table: name,
                        reason: e.to_string(),
                    })
                }
            }
        }
    };
    if !swapped {
        let _ = file_io.delete(&new_loc).await;
        return Err(Error::CommitConflict {
            table: name,
            attempts: 1,
            reason: crate::base::error::Conflict::PointerMoved,
        });
    }
    // The pointer has moved: the commit landed. A bad stored value must not turn it into an
    // error now (callers would delete the files of a landed commit): keep the old metadata
    // files and say why.
    let delete_old = properties::bool_prop(
        built.metadata.properties(),
        properties::METADATA_DELETE_AFTER_COMMIT.key,
        false,
    )
    .unwrap_or_else(|e| {
        tracing::warn!("{}; old metadata files were kept", e.for_table(&name));
        false
    });
    if delete_old {
        // The metadata log is table input: only entries inside the table location go.
        let fence = Fence::at(built.metadata.location());
        for old in &built.expired_metadata_logs {
            if !fence.verdict(&old.metadata_file).deletable() {
                tracing::warn!(file = %old.metadata_file, "old metadata file outside the table location kept");
            } else if let Err(e) = file_io.delete(&old.metadata_file).await {
                tracing::warn!(file = %old.metadata_file, error = %e, "could not delete old metadata file");
            }
        }
    }
    match spliced {
        Some((pieces, next)) => {
            let weight = pieces.iter().map(bytes::Bytes::len).sum();
            let head = Head {
                metadata: Arc::new(next.head),
                history: next.history,
            };
            let head = catalog.heads.put(&name, &new_loc, Arc::new(head), weight);
            match returned {
                Some(whole) => {
                    let whole = catalog.wholes.put(&name, &new_loc, Arc::new(whole), weight);
                    table_from(file_io, ident.clone(), whole, new_loc)
                }
                None => table_from(file_io, ident.clone(), head.metadata.clone(), new_loc),
            }
        }
        None => {
            let weight = super::heads::weight_of(&built.metadata);
            let whole = catalog
                .wholes
                .put(&name, &new_loc, Arc::new(built.metadata), weight);
            table_from(file_io, ident.clone(), whole, new_loc)
        }
    }
}
