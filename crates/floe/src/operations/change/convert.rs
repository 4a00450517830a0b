//! `floe convert-equality-deletes`: equality delete files become position delete files,
//! without rewriting data (the conversion Iceberg's `ConvertEqualityDeleteFiles` action names).
//!
//! Readers handle equality deletes badly (PyIceberg 0.12 cannot read a table that has them;
//! others join every older data file of the partition against them). An equality delete file
//! (spec v2, "Equality Delete Files") deletes, from every data file of its partition (any
//! partition when it is unpartitioned) with a smaller data sequence number, the rows whose
//! equality columns equal one of its rows. floe reads its rows into a key index, locates the
//! matching live rows of exactly those data files ([`crate::operations::change::locate`]), and writes them
//! as position deletes that take the equality delete's spec and data sequence number, so they
//! apply where it did. One `replace` commit removes the equality deletes and adds the position
//! deletes; table content does not change. Each commit attempt converts again on the table it
//! commits on, so a concurrent compaction or writer is seen.
//!
//! Not converted (left as they are, with the reason in the output): equality deletes on
//! columns that are not top-level primitives, or with a null value (a null equals a null for
//! an equality delete; a key index has no null keys).
//!
//! [`ConvertBuilder`] is an [`Operation`]: `plan()` locates the rows (the `--dry-run` report),
//! `apply()` writes and commits them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use futures::TryStreamExt;
use iceberg::spec::{DataContentType, DataFile};
use iceberg::table::Table;
use iceberg::TableIdent;
use serde::Serialize;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::{ident_string, Catalog};
use crate::commit::producer::prepare_with;
use crate::commit::{Committer, Ledger, LiveFile, Produced, SnapshotUpdate};
use crate::operations::change::keys::KeyIndex;
use crate::operations::change::locate::{candidates, locate_known, Known};
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::write::deletes::write_position_delete_file;

/// What a conversion did (or, dry run, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConvertMetrics {
    pub table: String,
    pub dry_run: bool,
    /// Equality delete files converted, and their rows.
    pub equality_delete_files: usize,
    pub equality_delete_rows: u64,
    /// Position delete files written, and the positions they hold.
    pub position_delete_files: usize,
    pub positions: u64,
    /// Data files read to find the rows.
    pub data_files_read: usize,
    /// Equality delete files left as they are, with the reason.
    pub skipped: Vec<(String, String)>,
    pub snapshot_id: Option<i64>,
    pub commit_attempts: u32,
    pub duration_ms: u64,
}

impl Costed for ConvertMetrics {
    fn cost(&self) -> Cost {
        Cost {
            files_to_read: (self.data_files_read + self.equality_delete_files) as u64,
            files_to_write: self.position_delete_files as u64,
            ..Cost::default()
        }
    }
}

/// Builder of a conversion: `plan()` locates the rows the equality deletes remove (the dry
/// run), `apply()` writes them as position deletes and commits.
#[derive(Clone)]
pub struct ConvertBuilder {
    ctx: Ctx,
}

impl ConvertBuilder {
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
        }
    }
}

/// What a conversion was planned on: the table and the rows located (written by the first
/// commit attempt when the table has not moved).
pub struct ConvertWork {
    table: Table,
    conversion: Conversion,
    data_files_read: usize,
    planning: std::time::Duration,
}

impl std::fmt::Debug for ConvertWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConvertWork")
    }
}

/// A conversion plan: the dry-run report (what would be converted).
pub type ConvertPlan = Planned<ConvertMetrics, ConvertWork>;

impl Operation for ConvertBuilder {
    type Plan = ConvertPlan;
    type Metrics = ConvertMetrics;

    /// Reads the equality deletes and locates the rows they remove; writes nothing.
    async fn plan(&self) -> Result<ConvertPlan> {
        let started = Instant::now();
        let table = self.ctx.load().await?;
        let (conversion, data_files_read) = locate_conversion(&table).await?;
        let mut m = conversion.metrics(data_files_read);
        m.table = ident_string(&self.ctx.ident);
        m.dry_run = true;
        m.duration_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            m,
            snapshot_id,
            ConvertWork {
                table,
                conversion,
                data_files_read,
                planning: started.elapsed(),
            },
        ))
    }

    /// Writes the position deletes and commits one `replace`; an attempt on a table that
    /// moved since the plan converts again on it.
    async fn apply(self, plan: ConvertPlan) -> Result<ConvertMetrics> {
        let started = Instant::now();
        let ConvertWork {
            table,
            conversion,
            data_files_read,
            planning,
        } = plan.work;
        let planned_on = plan.snapshot_id;
        let mut first = Some((conversion, data_files_read));
        let done = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(table)
            .commit_with(|t| {
                let reuse = first
                    .take()
                    .filter(|_| t.metadata().current_snapshot_id() == planned_on);
                async move {
                    let (mut c, read) = match reuse {
                        Some(planned) => planned,
                        None => locate_conversion(&t).await?,
                    };
                    if c.removed.is_empty() {
                        // Nothing convertible: report what was skipped.
                        return Ok(Produced::nothing(c.metrics(0)));
                    }
                    write_conversion(&t, &mut c).await?;
                    let written = c.written();
                    let update = SnapshotUpdate::rewrite_deletes(
                        &t,
                        c.removed.clone(),
                        c.added.clone(),
                        c.placement.clone(),
                    )
                    .removing_vectors(c.removed_vectors.clone());
                    let commit = prepare_with(&t, &update, written).await?;
                    Ok(Produced::new(commit, c.metrics(read)))
                }
            })
            .await?;
        let mut m = done.plan;
        if done.changed {
            m.snapshot_id = done.table.metadata().current_snapshot_id();
            m.commit_attempts = done.attempts;
        }
        m.table = ident_string(&self.ctx.ident);
        m.dry_run = false;
        m.duration_ms = (started.elapsed() + planning).as_millis() as u64;
        Ok(m)
    }
}

/// One position delete file to write: its spec, partition, rows, and the data sequence number
/// of the equality delete it comes from.
type Pending = (i32, iceberg::spec::Struct, Vec<(String, i64)>, i64);

/// One attempt's conversion: located (`pending`), then written (`added`, `placement`).
#[derive(Default)]
struct Conversion {
    removed: Vec<String>,
    removed_rows: u64,
    pending: Vec<Pending>,
    added: Vec<DataFile>,
    positions: u64,
    placement: HashMap<String, (i32, i64)>,
    skipped: Vec<(String, String)>,
    /// Format v3: the new deletion vector of each data file (its old one merged in), by path.
    vectors: BTreeMap<String, PendingVector>,
    /// Format v3: the vectors the new ones replace, as (Puffin file, data file).
    removed_vectors: Vec<(String, String)>,
}

/// A data file's deletion vector to write (format v3): its spec and partition, every position
/// deleted (before and now), and the Puffin file of the vector it replaces.
struct PendingVector {
    spec_id: i32,
    partition: iceberg::spec::Struct,
    vector: crate::table::deletion_vector::DeletionVector,
    replaces: Option<String>,
}

impl Conversion {
    /// The files written (the vectors of one Puffin file share its path).
    fn written(&self) -> Vec<String> {
        crate::write::deletes::distinct_paths(&self.added)
    }

    fn metrics(&self, data_files_read: usize) -> ConvertMetrics {
        ConvertMetrics {
            equality_delete_files: self.removed.len(),
            equality_delete_rows: self.removed_rows,
            position_delete_files: self.added.len(),
            positions: self.positions,
            data_files_read,
            skipped: self.skipped.clone(),
            ..ConvertMetrics::default()
        }
    }
}

/// Locates, for every equality delete file of `table`, the live rows it removes, writing
/// nothing. Returns the conversion and the data files read.
async fn locate_conversion(table: &Table) -> Result<(Conversion, usize)> {
    let live = crate::table::manifests::live_files(table).await?;
    let eq: Vec<&LiveFile> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::EqualityDeletes)
        .collect();
    let mut out = Conversion::default();
    if eq.is_empty() {
        return Ok((out, 0));
    }
    let tasks = candidates(table, None).await?;
    // Existing position deletes and specs are read once for every equality delete file (the
    // rows the equality deletes remove are what is located).
    let known = Known::positions_of(table, &tasks).await?;
    let data: HashMap<&str, &LiveFile> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| (f.file.file_path(), f))
        .collect();
    let mut read: BTreeSet<String> = BTreeSet::new();
    for e in eq {
        let path = e.file.file_path().to_string();
        let keys = match key_index(table, e).await {
            Ok(k) => k,
            Err(reason) => {
                out.skipped.push((path, reason));
                continue;
            }
        };
        let global = e.file.partition().fields().is_empty();
        let targets: Vec<_> = tasks
            .iter()
            .filter(|t| {
                data.get(t.data_file_path.as_str()).is_some_and(|d| {
                    d.sequence_number < e.sequence_number
                        && (global
                            || (d.spec_id == e.spec_id && d.file.partition() == e.file.partition()))
                })
            })
            .cloned()
            .collect();
        read.extend(targets.iter().map(|t| t.data_file_path.clone()));
        let keys = Arc::new(keys);
        let (matched, _) = locate_known(
            table,
            &known,
            targets,
            &keys.field_ids,
            keys.matcher(),
            None,
        )
        .await?;
        out.removed.push(path);
        out.removed_rows += e.file.record_count();
        if table.metadata().format_version() >= iceberg::spec::FormatVersion::V3 {
            // One deletion vector per data file (spec v3), whatever equality deletes hit it:
            // it may take the commit's sequence number, as it applies to its one data file.
            for m in matched {
                out.positions += m.positions.len() as u64;
                let v = out
                    .vectors
                    .entry(m.path.clone())
                    .or_insert_with(|| PendingVector {
                        spec_id: m.spec_id,
                        partition: m.partition.clone(),
                        vector: crate::table::deletion_vector::DeletionVector::from_positions(
                            m.deleted_before.iter().map(|&p| p as u64),
                        ),
                        replaces: m.vector.clone(),
                    });
                v.vector.union(
                    &crate::table::deletion_vector::DeletionVector::from_positions(
                        m.positions.iter().map(|&p| p as u64),
                    ),
                );
            }
            continue;
        }
        // One position delete file per partition of the data files it names, in the
        // equality delete's data sequence number.
        let mut groups: HashMap<(i32, iceberg::spec::Struct), Vec<(String, i64)>> = HashMap::new();
        for m in matched {
            out.positions += m.positions.len() as u64;
            groups
                .entry((m.spec_id, m.partition.clone()))
                .or_default()
                .extend(m.positions.iter().map(|&p| (m.path.clone(), p)));
        }
        out.pending.extend(
            groups
                .into_iter()
                .map(|((spec, partition), rows)| (spec, partition, rows, e.sequence_number)),
        );
    }
    Ok((out, read.len()))
}

/// Writes the located rows of `c` as position delete files (deleted here if a later one
/// fails).
async fn write_conversion(table: &Table, c: &mut Conversion) -> Result<()> {
    let step = async {
        for (spec, partition, rows, seq) in std::mem::take(&mut c.pending) {
            if let Some(f) = write_position_delete_file(table, spec, partition, rows, true).await? {
                c.placement.insert(f.file_path().to_string(), (spec, seq));
                c.added.push(f);
            }
        }
        let mut vectors = Vec::new();
        for (data_file, v) in std::mem::take(&mut c.vectors) {
            if let Some(puffin) = v.replaces {
                c.removed_vectors.push((puffin, data_file.clone()));
            }
            vectors.push(crate::write::deletion_vectors::VectorOf {
                data_file,
                spec_id: v.spec_id,
                partition: v.partition,
                vector: v.vector,
            });
        }
        for (f, spec) in
            crate::write::deletion_vectors::write_deletion_vectors(table, vectors).await?
        {
            c.placement
                .insert(crate::commit::placement_key(&f), (spec, -1));
            c.added.push(f);
        }
        Ok::<_, Error>(())
    };
    if let Err(e) = step.await {
        Ledger::of(table).with(c.written()).discard().await;
        return Err(e);
    }
    Ok(())
}

/// The rows of equality delete file `e` as a key index over its equality columns; `Err` is
/// why the file cannot be converted.
async fn key_index(table: &Table, e: &LiveFile) -> std::result::Result<KeyIndex, String> {
    let ids = e.file.equality_ids().unwrap_or_default();
    let schema = table.metadata().current_schema();
    if ids.is_empty() {
        return Err("no equality field ids".into());
    }
    let names: Vec<String> = ids
        .iter()
        .map(|id| {
            schema
                .as_struct()
                .fields()
                .iter()
                .find(|f| f.id == *id)
                .map(|f| f.name.clone())
                .ok_or_else(|| format!("equality field {id} is not a top-level column"))
        })
        .collect::<std::result::Result<_, _>>()?;
    let mut keys = KeyIndex::for_schema(schema, Some(&names), &ident_string(table.identifier()))
        .map_err(|e| e.to_string())?;
    let read = async {
        let rows = crate::table::read_file_columns(
            table,
            e.file.file_path(),
            e.file.file_size_in_bytes(),
            ids.clone(),
        )?;
        Ok::<Vec<RecordBatch>, Error>(rows.try_collect().await?)
    };
    let batches = read.await.map_err(|e| format!("cannot read it: {e}"))?;
    for b in batches {
        let ordinals: Vec<u64> = (0..b.num_rows() as u64).collect();
        keys.observe_deletes(&b, &ordinals, &[])
            .map_err(|_| "a null value in an equality column".to_string())?;
    }
    Ok(keys)
}
