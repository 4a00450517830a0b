//! The read-only contract: `diagnose`, metadata tables (`inspect`) and `sql` change nothing,
//! so they have no plan to print or keep; they are built like an operation and queried.
//!
//! ```text
//!   XBuilder::new(&catalog, ident).with_*(..)      one Ctx: catalog, table, progress, clock
//!        └─ query()   reads, computes and returns the output; writes and deletes nothing
//! ```
//!
//! `sql` spans the catalog rather than one table, so its builder holds the catalog alone.

use std::future::Future;

use crate::base::error::Result;

/// The contract of a read-only query (see the module docs).
pub trait Query: Sized + Send {
    /// What the query returns: a report, a metadata table, a query result.
    type Output: Send;

    /// Reads and computes, changing nothing.
    fn query(self) -> impl Future<Output = Result<Self::Output>> + Send;
}
