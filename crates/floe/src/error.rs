//! floe's one error type.
//!
//! Every fallible library call returns [`Result`]. Variants carry the values a user needs to fix
//! the problem (the table, the option, the file and line) and render as one line. Conflicts are
//! marked retryable so the commit loop (`commit::retry`) can tell them from real failures.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in floe.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The namespace does not exist in the catalog.
    #[error("namespace '{namespace}' does not exist (create it with `floe namespace create {namespace}`)")]
    NamespaceNotFound { namespace: String },

    /// The namespace already exists.
    #[error("namespace '{namespace}' already exists")]
    NamespaceExists { namespace: String },

    /// The table does not exist in the catalog.
    #[error("table '{table}' does not exist")]
    TableNotFound { table: String },

    /// The table already exists.
    #[error("table '{table}' already exists")]
    TableExists { table: String },

    /// A user-supplied option or argument is invalid.
    #[error("invalid {option} '{value}': {reason}")]
    InvalidOption {
        option: String,
        value: String,
        reason: String,
    },

    /// A schema or partition definition could not be parsed.
    #[error("invalid {what} at '{fragment}': {reason}")]
    InvalidDefinition {
        what: &'static str,
        fragment: String,
        reason: String,
    },

    /// An input record does not fit the table schema.
    #[error("{file}: {location}: column '{column}' value {value}: {reason}")]
    BadRecord {
        file: String,
        /// "line N" (NDJSON, CSV) or "row N" (Parquet).
        location: String,
        column: String,
        value: String,
        reason: String,
    },

    /// An input file cannot be read at all.
    #[error("cannot read input {path}: {reason}")]
    InputFile { path: PathBuf, reason: String },

    /// The catalog could not be reached or answered with an error.
    #[error("catalog {catalog}: {reason}")]
    Catalog { catalog: String, reason: String },

    /// Table metadata could not be read or is corrupt.
    #[error("cannot read table metadata {location}: {reason}")]
    Metadata { location: String, reason: String },

    /// Another writer changed the table and the change could not be retried.
    #[error("commit to '{table}' failed after {attempts} attempt(s): {reason}")]
    CommitConflict {
        table: String,
        attempts: u32,
        reason: String,
    },

    /// A rewrite or delete is no longer valid against the current table state
    /// (a replaced file is gone, or a new delete file applies to it). Not retryable.
    #[error("validation failed for '{table}': {reason}")]
    ValidationFailed { table: String, reason: String },

    /// A stream rejected more records than allowed (`--max-bad-records`).
    #[error("stopping: {count} bad records exceed --max-bad-records {max}; last: {last}")]
    TooManyBadRecords { count: u64, max: u64, last: String },

    /// A maintenance operation refused to run because it could not prove it safe.
    #[error("refusing to {operation}: {reason}")]
    Refused { operation: String, reason: String },

    /// A SQL statement failed to plan or execute.
    #[error("sql: {0}")]
    Sql(String),

    /// An error from the iceberg crate (spec types, FileIO, scans, writers).
    #[error("iceberg: {0}")]
    Iceberg(#[from] iceberg::Error),

    /// An Arrow error while converting data.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    /// A local I/O error.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// True when retrying the same operation against fresh table state may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::CommitConflict { .. })
    }

    /// Shorthand for an [`Error::InvalidOption`].
    pub fn invalid_option(
        option: impl Into<String>,
        value: impl ToString,
        reason: impl Into<String>,
    ) -> Self {
        Error::InvalidOption {
            option: option.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// Shorthand for an [`Error::Catalog`] error.
    pub fn catalog(catalog: impl Into<String>, reason: impl ToString) -> Self {
        Error::Catalog {
            catalog: catalog.into(),
            reason: reason.to_string(),
        }
    }
}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        // DataFusion wraps our own errors as External: unwrap them back.
        match e {
            datafusion::error::DataFusionError::External(inner) => {
                match inner.downcast::<Error>() {
                    Ok(err) => *err,
                    Err(other) => Error::Sql(other.to_string()),
                }
            }
            other => Error::Sql(other.strip_backtrace()),
        }
    }
}
