//! Snapshot references: create, replace, drop and list the tags and branches of a table
//! (`floe table tag|branch create|drop|list`), as Spark SQL's
//! `ALTER TABLE t CREATE [OR REPLACE] TAG|BRANCH name [AS OF VERSION id] [RETAIN n DAYS]
//! [WITH SNAPSHOT RETENTION n SNAPSHOTS m DAYS]` and `DROP TAG|BRANCH`.
//!
//! Iceberg spec v2, "Snapshot References": a ref names a snapshot; a tag keeps its snapshot
//! until the tag is older than `max-ref-age-ms`; a branch also keeps its ancestors by
//! `min-snapshots-to-keep` and `max-snapshot-age-ms` (branches only). Tags and branches share
//! one namespace; `main` is the table's current state and is neither created nor dropped here.
//! `expire-snapshots` applies these settings ([`crate::operations::expire`]).
//!
//! [`CreateRefBuilder`] and [`DropRefBuilder`] run on the operation contract
//! ([`crate::operations::Operation`]): `plan()` reads the table and decides (every refusal,
//! naming the ref, comes from it) and reports the change ([`RefChange`]) without committing;
//! `apply(plan)` makes it in one metadata-only commit through [`Committer`]: `SetSnapshotRef`
//! or `RemoveSnapshotRef`, required to find the ref as the plan saw it
//! (`assert-ref-snapshot-id`), and checked again at every attempt against the ref as it then is:
//! a ref created, moved, re-set or dropped since the plan is refused, never overwritten.

use std::collections::HashMap;

use iceberg::spec::{SnapshotReference, SnapshotRetention, TableMetadata, MAIN_BRANCH};
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::commit::producer::PreparedCommit;
use crate::commit::{action, Committer, Produced};
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::table::{ident_string, refs};

/// A branch or a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    Branch,
    Tag,
}

impl RefKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Branch => "branch",
            Self::Tag => "tag",
        }
    }

    fn of(r: &SnapshotReference) -> Self {
        match r.retention {
            SnapshotRetention::Branch { .. } => Self::Branch,
            SnapshotRetention::Tag { .. } => Self::Tag,
        }
    }
}

/// What to create: the snapshot (default: the current one) and the retention settings.
#[derive(Debug, Clone, Default)]
pub struct NewRef {
    /// The snapshot the ref names (default: the table's current snapshot).
    pub snapshot_id: Option<i64>,
    /// `max-ref-age-ms` (Spark `RETAIN n DAYS`): the ref is removed by expiry once its
    /// snapshot is older than this. Unset: `history.expire.max-ref-age-ms`, else forever.
    pub max_ref_age_ms: Option<i64>,
    /// Branches only: `max-snapshot-age-ms`, the age up to which expiry keeps the branch's
    /// ancestors (unset: the expiry's age limit).
    pub max_snapshot_age_ms: Option<i64>,
    /// Branches only: `min-snapshots-to-keep` (unset: the expiry's `--retain-last`).
    pub min_snapshots_to_keep: Option<i32>,
    /// Replace a ref of the same kind and name instead of refusing (Spark `CREATE OR REPLACE`).
    pub replace: bool,
}

/// One ref as listed and reported.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RefInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: RefKind,
    pub snapshot_id: i64,
    /// The commit time of the snapshot (None if the metadata lacks it).
    pub snapshot_timestamp_ms: Option<i64>,
    pub max_ref_age_ms: Option<i64>,
    pub max_snapshot_age_ms: Option<i64>,
    pub min_snapshots_to_keep: Option<i32>,
}

impl RefInfo {
    fn new(md: &TableMetadata, name: &str, r: &SnapshotReference) -> Self {
        let (max_ref_age_ms, max_snapshot_age_ms, min_snapshots_to_keep) = match r.retention {
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                max_ref_age_ms,
            } => (max_ref_age_ms, max_snapshot_age_ms, min_snapshots_to_keep),
            SnapshotRetention::Tag { max_ref_age_ms } => (max_ref_age_ms, None, None),
        };
        Self {
            name: name.to_string(),
            kind: RefKind::of(r),
            snapshot_id: r.snapshot_id,
            snapshot_timestamp_ms: md.snapshot_by_id(r.snapshot_id).map(|s| s.timestamp_ms()),
            max_ref_age_ms,
            max_snapshot_age_ms,
            min_snapshots_to_keep,
        }
    }
}

/// What a create or drop did (or, in a dry run, would do).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RefChange {
    pub table: String,
    pub dry_run: bool,
    /// `created`, `replaced`, `unchanged` (a replace with identical settings: no commit) or
    /// `dropped`.
    pub action: &'static str,
    /// The ref after the change (for a drop: the ref that was dropped).
    #[serde(rename = "ref")]
    pub reference: RefInfo,
    /// The ref a replace replaced.
    pub previous: Option<RefInfo>,
}

impl Costed for RefChange {
    /// A metadata-only change: no data or manifest file is read, written or deleted (the
    /// snapshots a dropped ref kept are `expire-snapshots`' work).
    fn cost(&self) -> Cost {
        Cost::default()
    }
}

/// Every ref of `table`, `main` first, then by name.
pub fn list_refs(table: &Table) -> Result<Vec<RefInfo>> {
    let md = table.metadata();
    let mut out: Vec<RefInfo> = refs(md)?
        .iter()
        .map(|(name, r)| RefInfo::new(md, name, r))
        .collect();
    out.sort_by(|a, b| (a.name != MAIN_BRANCH, &a.name).cmp(&(b.name != MAIN_BRANCH, &b.name)));
    Ok(out)
}

fn refused(table: &str, action: &str, kind: RefKind, name: &str, reason: String) -> Error {
    Error::Refused {
        operation: format!("{action} {} '{name}' of {table}", kind.as_str()),
        reason,
    }
}

/// A ref name: not empty, no surrounding whitespace or control characters.
fn check_name(name: &str, kind: RefKind) -> Result<()> {
    if name.trim().is_empty() || name.trim() != name || name.chars().any(char::is_control) {
        return Err(Error::invalid_option(
            format!("{} name", kind.as_str()),
            name,
            "must be non-empty, without surrounding whitespace or control characters",
        ));
    }
    Ok(())
}

/// Checks the retention settings of `new` for a ref of `kind`.
fn check_retention(kind: RefKind, new: &NewRef) -> Result<()> {
    for (option, v) in [
        ("--retain", new.max_ref_age_ms),
        ("--max-snapshot-age", new.max_snapshot_age_ms),
    ] {
        if let Some(ms) = v.filter(|ms| *ms <= 0) {
            return Err(Error::invalid_option(
                option,
                format!("{ms}ms"),
                "must be greater than 0",
            ));
        }
    }
    if let Some(n) = new.min_snapshots_to_keep.filter(|n| *n < 1) {
        return Err(Error::invalid_option(
            "--min-snapshots-to-keep",
            n,
            "must be at least 1",
        ));
    }
    if kind == RefKind::Tag
        && (new.max_snapshot_age_ms.is_some() || new.min_snapshots_to_keep.is_some())
    {
        return Err(Error::invalid_option(
            "tag retention",
            "max-snapshot-age / min-snapshots-to-keep",
            "apply to branches only (a tag keeps exactly one snapshot)",
        ));
    }
    Ok(())
}

/// The commit creating (or replacing) ref `name` on `md`, whose refs are `all`, and what it
/// reports; `None` when a replace would change nothing. `snapshot_id` is resolved (the default
/// taken) by the caller.
fn plan_create(
    table: &str,
    md: &TableMetadata,
    all: &HashMap<String, SnapshotReference>,
    (name, kind): (&str, RefKind),
    snapshot_id: i64,
    new: &NewRef,
) -> Result<Option<(PreparedCommit, RefChange)>> {
    let existing = all.get(name);
    if let Some(e) = existing.filter(|e| RefKind::of(e) != kind) {
        return Err(refused(
            table,
            "create",
            kind,
            name,
            format!(
                "a {} named '{name}' exists (snapshot {}); tags and branches share one namespace: choose another name",
                RefKind::of(e).as_str(),
                e.snapshot_id
            ),
        ));
    }
    if name == MAIN_BRANCH {
        // Only main's retention can change here: moving it is a rollback, and it never ages out.
        if md.current_snapshot_id() != Some(snapshot_id) {
            return Err(refused(
                table,
                "create",
                kind,
                name,
                format!(
                    "'main' is the table's current state (snapshot {}); floe does not move it",
                    md.current_snapshot_id().unwrap_or(-1)
                ),
            ));
        }
        if new.max_ref_age_ms.is_some() {
            return Err(refused(
                table,
                "create",
                kind,
                name,
                "'main' never expires: --retain does not apply to it".into(),
            ));
        }
    }
    if let Some(e) = existing.filter(|_| !new.replace) {
        return Err(refused(
            table,
            "create",
            kind,
            name,
            format!(
                "it already exists (snapshot {}); give --replace to replace it",
                e.snapshot_id
            ),
        ));
    }
    if md.snapshot_by_id(snapshot_id).is_none() {
        return Err(Error::invalid_option(
            "--snapshot-id",
            snapshot_id,
            format!("no such snapshot in {table} (see `floe sql \"SELECT snapshot_id, committed_at FROM {table}$snapshots\"`)"),
        ));
    }
    let retention = match kind {
        RefKind::Tag => SnapshotRetention::Tag {
            max_ref_age_ms: new.max_ref_age_ms,
        },
        RefKind::Branch => SnapshotRetention::Branch {
            min_snapshots_to_keep: new.min_snapshots_to_keep,
            max_snapshot_age_ms: new.max_snapshot_age_ms,
            max_ref_age_ms: new.max_ref_age_ms,
        },
    };
    let reference = SnapshotReference {
        snapshot_id,
        retention,
    };
    let previous = existing.map(|e| RefInfo::new(md, name, e));
    let change = RefChange {
        table: table.to_string(),
        dry_run: true,
        action: if existing.is_some() {
            "replaced"
        } else {
            "created"
        },
        reference: RefInfo::new(md, name, &reference),
        previous,
    };
    if existing == Some(&reference) {
        return Ok(None);
    }
    let commit = action::refs::set_ref(md, name, existing.map(|e| e.snapshot_id), reference);
    Ok(Some((commit, change)))
}

/// The commit dropping ref `name` of `kind` from `md`, whose refs are `all`, and what it
/// reports.
fn plan_drop(
    table: &str,
    md: &TableMetadata,
    all: &HashMap<String, SnapshotReference>,
    (name, kind): (&str, RefKind),
) -> Result<(PreparedCommit, RefChange)> {
    if name == MAIN_BRANCH {
        return Err(refused(
            table,
            "drop",
            kind,
            name,
            "'main' is the table's current state; it cannot be dropped".into(),
        ));
    }
    let Some(existing) = all.get(name) else {
        let mut same: Vec<&String> = all
            .iter()
            .filter(|(n, r)| RefKind::of(r) == kind && *n != MAIN_BRANCH)
            .map(|(n, _)| n)
            .collect();
        same.sort();
        let names: Vec<&str> = same.iter().map(|s| s.as_str()).collect();
        return Err(refused(
            table,
            "drop",
            kind,
            name,
            format!(
                "no such {}; the table's {}s: {}",
                kind.as_str(),
                kind.as_str(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        ));
    };
    if RefKind::of(existing) != kind {
        let other = RefKind::of(existing).as_str();
        return Err(refused(
            table,
            "drop",
            kind,
            name,
            format!("'{name}' is a {other}: use `floe table {other} drop`"),
        ));
    }
    let commit = action::refs::remove_ref(md, name, existing.snapshot_id);
    let change = RefChange {
        table: table.to_string(),
        dry_run: true,
        action: "dropped",
        reference: RefInfo::new(md, name, existing),
        previous: None,
    };
    Ok((commit, change))
}

/// A ref as a refusal names it: its kind and snapshot (`none`: no ref of that name).
fn describe(r: Option<&SnapshotReference>) -> String {
    match r {
        None => "none".to_string(),
        Some(r) => format!(
            "a {} at snapshot {}",
            RefKind::of(r).as_str(),
            r.snapshot_id
        ),
    }
}

/// Refuses unless ref `name` is now (`now`) what the plan decided on (`planned`; `None`: no
/// ref of that name): a change decided on one state of a ref is not made on another.
fn check_as_planned(
    table: &str,
    action: &str,
    (name, kind): (&str, RefKind),
    planned: Option<&SnapshotReference>,
    now: Option<&SnapshotReference>,
) -> Result<()> {
    if now == planned {
        return Ok(());
    }
    let what = match (planned, now) {
        (Some(p), Some(n))
            if RefKind::of(p) == RefKind::of(n) && p.snapshot_id == n.snapshot_id =>
        {
            "its retention settings changed".to_string()
        }
        _ => format!("then: {}; now: {}", describe(planned), describe(now)),
    };
    Err(refused(
        table,
        action,
        kind,
        name,
        format!("it changed after this was planned ({what}); plan it again"),
    ))
}

/// `table tag|branch create`: creates (or, with [`NewRef::replace`], replaces) one tag or
/// branch in one metadata-only commit. The snapshot defaults to the current one when planned;
/// a table without snapshots, an unknown snapshot id, an existing name, a tag named like a
/// branch (or the reverse), and moving `main` are refused.
#[derive(Clone)]
pub struct CreateRefBuilder {
    ctx: Ctx,
    kind: RefKind,
    name: String,
    new: NewRef,
}

impl CreateRefBuilder {
    /// A ref to create on `ident`; name it with [`Self::with_tag`] or [`Self::with_branch`].
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            kind: RefKind::Tag,
            name: String::new(),
            new: NewRef::default(),
        }
    }

    /// Creates the tag `name`.
    pub fn with_tag(self, name: impl Into<String>) -> Self {
        self.with_ref(RefKind::Tag, name)
    }

    /// Creates the branch `name`.
    pub fn with_branch(self, name: impl Into<String>) -> Self {
        self.with_ref(RefKind::Branch, name)
    }

    /// Creates the ref `name` of `kind`.
    pub fn with_ref(mut self, kind: RefKind, name: impl Into<String>) -> Self {
        self.kind = kind;
        self.name = name.into();
        self
    }

    /// The snapshot, retention settings and replace flag, all at once.
    pub fn with_new_ref(mut self, new: NewRef) -> Self {
        self.new = new;
        self
    }

    /// The snapshot the ref names (default: the current snapshot).
    pub fn with_snapshot_id(mut self, id: i64) -> Self {
        self.new.snapshot_id = Some(id);
        self
    }

    /// `max-ref-age-ms` ([`NewRef::max_ref_age_ms`]).
    pub fn with_max_ref_age_ms(mut self, ms: i64) -> Self {
        self.new.max_ref_age_ms = Some(ms);
        self
    }

    /// Branches only: `max-snapshot-age-ms` ([`NewRef::max_snapshot_age_ms`]).
    pub fn with_max_snapshot_age_ms(mut self, ms: i64) -> Self {
        self.new.max_snapshot_age_ms = Some(ms);
        self
    }

    /// Branches only: `min-snapshots-to-keep` ([`NewRef::min_snapshots_to_keep`]).
    pub fn with_min_snapshots_to_keep(mut self, n: i32) -> Self {
        self.new.min_snapshots_to_keep = Some(n);
        self
    }

    /// Replaces a ref of the same kind and name instead of refusing.
    pub fn with_replace(mut self, replace: bool) -> Self {
        self.new.replace = replace;
        self
    }
}

/// What a create's `apply` needs: the table planned on, the snapshot resolved, and the ref of
/// that name as the plan found it.
pub struct CreateRefWork {
    table: Table,
    snapshot_id: i64,
    existing: Option<SnapshotReference>,
}

impl std::fmt::Debug for CreateRefWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CreateRefWork(snapshot {})", self.snapshot_id)
    }
}

/// A create's plan: the ref it makes (or `unchanged`).
pub type CreateRefPlan = Planned<RefChange, CreateRefWork>;

impl Operation for CreateRefBuilder {
    type Plan = CreateRefPlan;
    type Metrics = RefChange;

    /// Checks the name and settings, resolves the snapshot and decides against the table's
    /// refs; commits nothing.
    async fn plan(&self) -> Result<CreateRefPlan> {
        let (kind, name, new) = (self.kind, self.name.as_str(), &self.new);
        check_name(name, kind)?;
        check_retention(kind, new)?;
        let table_name = ident_string(&self.ctx.ident);
        let table = self.ctx.load().await?;
        let md = table.metadata();
        let snapshot_id = match (new.snapshot_id, md.current_snapshot_id()) {
            (Some(id), _) => id,
            (None, Some(current)) => current,
            (None, None) => {
                return Err(refused(
                    &table_name,
                    "create",
                    kind,
                    name,
                    "the table has no snapshot yet: a ref names a snapshot (write to it first)"
                        .into(),
                ))
            }
        };
        let all = refs(md)?;
        let report = match plan_create(&table_name, md, &all, (name, kind), snapshot_id, new)? {
            Some((_, change)) => change,
            None => {
                let info = RefInfo::new(md, name, &all[name]);
                RefChange {
                    table: table_name,
                    dry_run: true,
                    action: "unchanged",
                    reference: info.clone(),
                    previous: Some(info),
                }
            }
        };
        let work = CreateRefWork {
            snapshot_id,
            existing: all.get(name).cloned(),
            table,
        };
        Ok(Planned::new(report, snapshot_of(&work.table), work))
    }

    /// Sets the ref (nothing for an `unchanged` plan). Each attempt checks the ref is still as
    /// planned and the plan still holds on the table it commits on.
    async fn apply(self, plan: CreateRefPlan) -> Result<RefChange> {
        let planned = plan.report;
        if planned.action == "unchanged" {
            return Ok(RefChange {
                dry_run: false,
                ..planned
            });
        }
        let CreateRefWork {
            table,
            snapshot_id,
            existing,
        } = plan.work;
        let (kind, name, new) = (self.kind, self.name.as_str(), &self.new);
        let (table_name, existing) = (&planned.table, existing.as_ref());
        let done = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(table)
            .commit_with(|t| async move {
                let (md, all) = (t.metadata(), refs(t.metadata())?);
                check_as_planned(table_name, "create", (name, kind), existing, all.get(name))?;
                match plan_create(table_name, md, &all, (name, kind), snapshot_id, new)? {
                    Some((commit, change)) => Ok(Produced::new(commit, change)),
                    None => Err(Error::CommitConflict {
                        table: table_name.clone(),
                        attempts: 1,
                        reason: crate::commit::Conflict::RefSetMeanwhile {
                            kind: kind.as_str(),
                            name: name.to_string(),
                        },
                    }),
                }
            })
            .await?;
        Ok(RefChange {
            dry_run: false,
            ..done.plan
        })
    }
}

/// `table tag|branch drop`: drops one tag or branch in one metadata-only commit. Dropping
/// `main`, a ref that does not exist, or a ref of the other kind is refused. The snapshots it
/// kept are left to `expire-snapshots`.
#[derive(Clone)]
pub struct DropRefBuilder {
    ctx: Ctx,
    kind: RefKind,
    name: String,
}

impl DropRefBuilder {
    /// A ref to drop from `ident`; name it with [`Self::with_tag`] or [`Self::with_branch`].
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            kind: RefKind::Tag,
            name: String::new(),
        }
    }

    /// Drops the tag `name`.
    pub fn with_tag(self, name: impl Into<String>) -> Self {
        self.with_ref(RefKind::Tag, name)
    }

    /// Drops the branch `name`.
    pub fn with_branch(self, name: impl Into<String>) -> Self {
        self.with_ref(RefKind::Branch, name)
    }

    /// Drops the ref `name` of `kind`.
    pub fn with_ref(mut self, kind: RefKind, name: impl Into<String>) -> Self {
        self.kind = kind;
        self.name = name.into();
        self
    }
}

/// What a drop's `apply` needs: the table planned on and the ref as the plan found it.
pub struct DropRefWork {
    table: Table,
    existing: SnapshotReference,
}

impl std::fmt::Debug for DropRefWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DropRefWork(snapshot {})", self.existing.snapshot_id)
    }
}

/// A drop's plan: the ref it removes.
pub type DropRefPlan = Planned<RefChange, DropRefWork>;

impl Operation for DropRefBuilder {
    type Plan = DropRefPlan;
    type Metrics = RefChange;

    /// Finds the ref and checks it may be dropped; commits nothing.
    async fn plan(&self) -> Result<DropRefPlan> {
        let (kind, name) = (self.kind, self.name.as_str());
        let table_name = ident_string(&self.ctx.ident);
        let table = self.ctx.load().await?;
        let md = table.metadata();
        let mut all = refs(md)?;
        let (_, report) = plan_drop(&table_name, md, &all, (name, kind))?;
        let existing = all.remove(name).expect("plan_drop found it");
        let snapshot_id = snapshot_of(&table);
        Ok(Planned::new(
            report,
            snapshot_id,
            DropRefWork { table, existing },
        ))
    }

    /// Removes the ref. Each attempt checks it is still as planned on the table it commits on.
    async fn apply(self, plan: DropRefPlan) -> Result<RefChange> {
        let DropRefWork { table, existing } = plan.work;
        let (kind, name) = (self.kind, self.name.as_str());
        let (table_name, existing) = (&plan.report.table, &existing);
        let done = Committer::new(&self.ctx.catalog, &self.ctx.ident)
            .on(table)
            .commit_with(|t| async move {
                let (md, all) = (t.metadata(), refs(t.metadata())?);
                check_as_planned(
                    table_name,
                    "drop",
                    (name, kind),
                    Some(existing),
                    all.get(name),
                )?;
                let (commit, change) = plan_drop(table_name, md, &all, (name, kind))?;
                Ok(Produced::new(commit, change))
            })
            .await?;
        Ok(RefChange {
            dry_run: false,
            ..done.plan
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_settings_are_checked() {
        let ok = NewRef::default();
        check_retention(RefKind::Tag, &ok).unwrap();
        let e = check_retention(
            RefKind::Tag,
            &NewRef {
                min_snapshots_to_keep: Some(2),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("branches only"), "{e}");
        let e = check_retention(
            RefKind::Branch,
            &NewRef {
                max_ref_age_ms: Some(0),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--retain") && e.contains("greater than 0"),
            "{e}"
        );
        let e = check_retention(
            RefKind::Branch,
            &NewRef {
                min_snapshots_to_keep: Some(0),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--min-snapshots-to-keep"), "{e}");
        for bad in ["", " x", "a\tb"] {
            assert!(check_name(bad, RefKind::Tag).is_err(), "{bad:?}");
        }
        check_name("v1.0-release", RefKind::Tag).unwrap();
    }
}
