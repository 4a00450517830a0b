//! Snapshot references: create, replace, drop and list the tags and branches of a table
//! (`floe table tag|branch create|drop|list`), as Spark SQL's
//! `ALTER TABLE t CREATE [OR REPLACE] TAG|BRANCH name [AS OF VERSION id] [RETAIN n DAYS]
//! [WITH SNAPSHOT RETENTION n SNAPSHOTS m DAYS]` and `DROP TAG|BRANCH`.
//!
//! Iceberg spec v2, "Snapshot References": a ref names a snapshot; a tag keeps its snapshot
//! until the tag is older than `max-ref-age-ms`; a branch also keeps its ancestors by
//! `min-snapshots-to-keep` and `max-snapshot-age-ms` (branches only). Tags and branches share
//! one namespace; `main` is the table's current state and is neither created nor dropped here.
//! `expire-snapshots` applies these settings ([`crate::expire`]).
//!
//! Each change is one metadata-only commit through [`Committer`]: `SetSnapshotRef` or
//! `RemoveSnapshotRef`, required to find the ref as this command saw it
//! (`assert-ref-snapshot-id`), so a concurrent change to the same ref is never overwritten.
//! Written as an `impl Catalog` block in this operation module, like [`crate::alter`].

use std::collections::HashMap;

use iceberg::spec::{SnapshotReference, SnapshotRetention, TableMetadata, MAIN_BRANCH};
use iceberg::table::Table;
use iceberg::TableIdent;

use crate::catalog::Catalog;
use crate::commit::producer::PreparedCommit;
use crate::commit::{action, Committer, Produced};
use crate::error::{Error, Result};
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

/// What a create or drop did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RefChange {
    pub table: String,
    /// `created`, `replaced`, `unchanged` (a replace with identical settings: no commit) or
    /// `dropped`.
    pub action: &'static str,
    /// The ref after the change (for a drop: the ref that was dropped).
    #[serde(rename = "ref")]
    pub reference: RefInfo,
    /// The ref a replace replaced.
    pub previous: Option<RefInfo>,
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

/// The commit creating (or replacing) ref `name` on `md`, and what it reports; `None` when a
/// replace would change nothing. `snapshot_id` is resolved (the default taken) by the caller.
fn plan_create(
    table: &str,
    md: &TableMetadata,
    name: &str,
    kind: RefKind,
    snapshot_id: i64,
    new: &NewRef,
) -> Result<Option<(PreparedCommit, RefChange)>> {
    let all: HashMap<String, SnapshotReference> = refs(md)?;
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

/// The commit dropping ref `name` of `kind` from `md`, and what it reports.
fn plan_drop(
    table: &str,
    md: &TableMetadata,
    name: &str,
    kind: RefKind,
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
    let all = refs(md)?;
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
        action: "dropped",
        reference: RefInfo::new(md, name, existing),
        previous: None,
    };
    Ok((commit, change))
}

impl Catalog {
    /// Creates (or, with [`NewRef::replace`], replaces) the tag or branch `name` of `ident`
    /// in one metadata-only commit. The snapshot defaults to the current one when the command
    /// starts; a table without snapshots, an unknown snapshot id, an existing name, a tag
    /// named like a branch (or the reverse), and moving `main` are refused.
    pub async fn create_ref(
        &self,
        ident: &TableIdent,
        name: &str,
        kind: RefKind,
        new: NewRef,
    ) -> Result<RefChange> {
        check_name(name, kind)?;
        check_retention(kind, &new)?;
        let table_name = ident_string(ident);
        let table = self.load_table(ident).await?;
        let snapshot_id = match (new.snapshot_id, table.metadata().current_snapshot_id()) {
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
        // Checked on the table the command read, so an "unchanged" replace commits nothing.
        if plan_create(&table_name, table.metadata(), name, kind, snapshot_id, &new)?.is_none() {
            let r = refs(table.metadata())?;
            let info = RefInfo::new(table.metadata(), name, &r[name]);
            return Ok(RefChange {
                table: table_name,
                action: "unchanged",
                reference: info.clone(),
                previous: Some(info),
            });
        }
        let (table_name, new) = (&table_name, &new);
        let done = Committer::new(self, ident)
            .on(table)
            .commit_with(|t| async move {
                // Each attempt checks again on the table it commits on.
                match plan_create(table_name, t.metadata(), name, kind, snapshot_id, new)? {
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
        Ok(done.plan)
    }

    /// Drops the tag or branch `name` of `ident` in one metadata-only commit. Dropping `main`,
    /// a ref that does not exist, or a ref of the other kind is refused. The snapshots it kept
    /// are left to `expire-snapshots`.
    pub async fn drop_ref(
        &self,
        ident: &TableIdent,
        name: &str,
        kind: RefKind,
    ) -> Result<RefChange> {
        let table_name = ident_string(ident);
        let table = self.load_table(ident).await?;
        plan_drop(&table_name, table.metadata(), name, kind)?;
        let table_name = &table_name;
        let done = Committer::new(self, ident)
            .on(table)
            .commit_with(|t| async move {
                let (commit, change) = plan_drop(table_name, t.metadata(), name, kind)?;
                Ok(Produced::new(commit, change))
            })
            .await?;
        Ok(done.plan)
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
