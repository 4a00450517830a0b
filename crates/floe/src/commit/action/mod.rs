//! The commit vocabulary: every change floe makes to a table is one named action, one file
//! each, and goes through [`crate::commit::Committer`].
//!
//! Snapshot actions build a [`SnapshotUpdate`] (committed with [`Committer::commit`], or per
//! attempt through [`crate::commit::producer::prepare`]):
//! [`append`](SnapshotUpdate::append) ([`append`]), [`rewrite`](SnapshotUpdate::rewrite)
//! ([`rewrite`]), [`delete`](SnapshotUpdate::delete) / [`overwrite`](SnapshotUpdate::overwrite)
//! ([`row_delta`]), [`rewrite_deletes`](SnapshotUpdate::rewrite_deletes) ([`rewrite_deletes`]),
//! [`rewrite_manifests`](SnapshotUpdate::rewrite_manifests) ([`rewrite_manifests`]).
//!
//! Metadata actions build a [`PreparedCommit`] (requirements + updates, no files), committed
//! per attempt with [`Committer::commit_with`]: [`properties`], [`refs`] (set, remove),
//! [`expire`], [`evolve`] (schema and partition spec, through iceberg's metadata builder).
//!
//! An attempt of any action produces a commit or nothing ([`Produced::new`],
//! [`Produced::nothing`]: a concurrent commit already did the work); files an action wrote
//! are in the operation's [`crate::commit::Ledger`], which the committer settles.
//!
//! [`Committer::commit`]: crate::commit::Committer::commit
//! [`Committer::commit_with`]: crate::commit::Committer::commit_with
//! [`Produced::new`]: crate::commit::Produced::new
//! [`Produced::nothing`]: crate::commit::Produced::nothing

pub mod append;
pub mod evolve;
pub mod expire;
pub mod properties;
pub mod refs;
pub mod rewrite;
pub mod rewrite_deletes;
pub mod rewrite_manifests;
pub mod row_delta;

#[allow(unused_imports)]
use crate::commit::producer::PreparedCommit;
#[allow(unused_imports)]
use crate::commit::SnapshotUpdate;
