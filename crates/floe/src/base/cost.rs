//! What every operation reports, so that a scheduler can weigh them alike: [`Cost`] (the files
//! and bytes the work reads, writes and deletes, given by plans and metrics through
//! [`Costed`]) and one [`Progress`] event, reported through `with_progress` while it runs. The
//! contract operations implement (`plan()` a value, `apply(plan)`, `execute()`) is
//! `crate::operations::Operation`, one layer up (it needs the catalog).

use std::ops::{Add, AddAssign};
use std::sync::Arc;

use serde::Serialize;

/// What an operation reads, writes and deletes, in files and bytes. Estimates from the plan
/// (a compaction writes about the bytes it reads, in its expected output files); exact once
/// the operation ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    pub files_to_read: u64,
    pub bytes_to_read: u64,
    pub files_to_write: u64,
    pub bytes_to_write: u64,
    pub files_to_delete: u64,
    pub bytes_to_delete: u64,
}

impl Cost {
    /// True when the operation has nothing to do.
    pub fn is_zero(&self) -> bool {
        *self == Cost::default()
    }
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            files_to_read: self.files_to_read + o.files_to_read,
            bytes_to_read: self.bytes_to_read + o.bytes_to_read,
            files_to_write: self.files_to_write + o.files_to_write,
            bytes_to_write: self.bytes_to_write + o.bytes_to_write,
            files_to_delete: self.files_to_delete + o.files_to_delete,
            bytes_to_delete: self.bytes_to_delete + o.bytes_to_delete,
        }
    }
}

impl AddAssign for Cost {
    fn add_assign(&mut self, o: Cost) {
        *self = *self + o;
    }
}

/// A plan or a result that knows its cost.
pub trait Costed {
    fn cost(&self) -> Cost;
}

/// The kind of work a [`Progress`] event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Reading input and writing data files: append (steps are input files), compaction
    /// (steps are file groups).
    Write,
    /// Deleting files: expiry, orphan removal, purge, metadata cleanup (steps are files).
    Delete,
    /// Commits landing in a stream: ingest (steps are commits).
    Commit,
}

/// An amount of work: `steps` in the phase's unit, and the files, bytes and rows they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Amount {
    pub steps: u64,
    pub files: u64,
    pub bytes: u64,
    pub rows: u64,
}

impl AddAssign for Amount {
    fn add_assign(&mut self, o: Amount) {
        self.steps += o.steps;
        self.files += o.files;
        self.bytes += o.bytes;
        self.rows += o.rows;
    }
}

/// What a running operation reports, one type for every operation: in `phase`, `done` of
/// `total` so far. `done` is cumulative; a zero `total` means not known ahead (a stream). The
/// first event of a phase has `done` zero and announces the total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub phase: Phase,
    pub done: Amount,
    pub total: Amount,
}

impl Progress {
    /// The start of `phase`, with the work ahead.
    pub fn start(phase: Phase, total: Amount) -> Self {
        Progress {
            phase,
            done: Amount::default(),
            total,
        }
    }

    /// A step of the deleting phase: `done` of `total` files.
    pub fn deleted(done: u64, total: u64) -> Self {
        Progress {
            phase: Phase::Delete,
            done: Amount {
                steps: done,
                files: done,
                ..Amount::default()
            },
            total: Amount {
                steps: total,
                files: total,
                ..Amount::default()
            },
        }
    }
}

/// Receives [`Progress`] events (set with an operation's `with_progress`).
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_add_field_by_field() {
        let a = Cost {
            files_to_read: 2,
            bytes_to_read: 10,
            ..Cost::default()
        };
        let b = Cost {
            files_to_read: 1,
            files_to_delete: 3,
            bytes_to_delete: 7,
            ..Cost::default()
        };
        let mut c = a + b;
        assert_eq!(
            (c.files_to_read, c.bytes_to_read, c.files_to_delete),
            (3, 10, 3)
        );
        c += b;
        assert_eq!(c.bytes_to_delete, 14);
        assert!(!c.is_zero() && Cost::default().is_zero());
    }
}
