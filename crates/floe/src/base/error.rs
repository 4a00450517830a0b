//! floe's one error type.
//!
//! Every fallible library call returns [`Result`]. Variants carry the values a user needs to fix
//! the problem (the table, the option, the file and line) and render as one line. Conflicts are
//! marked retryable so the commit loop (`commit::retry`) can tell them from real failures.

use std::path::PathBuf;

use crate::base::secrets::mask;

mod conflict;
pub use conflict::Conflict;

/// A cause kept behind a floe error (`#[source]`), for callers that walk the chain.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

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

    /// A table property stored in the table (by floe before it validated, or by another
    /// engine) has a value floe cannot use. Says how to repair the table.
    #[error("{}", bad_table_property(.table.as_deref(), .key, .value, .expected))]
    InvalidTableProperty {
        /// `ns.table` when known.
        table: Option<String>,
        key: String,
        value: String,
        expected: String,
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
    Catalog {
        catalog: String,
        reason: String,
        /// The client's error (sqlx, the REST client), for callers that walk the chain.
        #[source]
        source: Option<BoxError>,
    },

    /// Table metadata could not be read or is corrupt.
    #[error("cannot read table metadata {location}: {reason}")]
    Metadata {
        location: String,
        reason: String,
        #[source]
        source: Option<BoxError>,
    },

    /// Another writer changed the table and the change could not be retried.
    #[error("commit to '{table}' failed after {attempts} attempt(s): {reason}")]
    CommitConflict {
        table: String,
        attempts: u32,
        reason: Conflict,
    },

    /// A rewrite or delete is no longer valid against the current table state
    /// (a replaced file is gone, or a new delete file applies to it). Not retryable.
    #[error("validation failed for '{table}': {reason}")]
    ValidationFailed { table: String, reason: Conflict },

    /// Rows cannot be written in the table's schema: a column the table requires is missing,
    /// or a type cannot be converted (columns are matched by Iceberg field id).
    #[error("column '{column}': {reason}")]
    SchemaMismatch { column: String, reason: String },

    /// The table's schema changed after the files of a commit were written in the schema it
    /// had before: the commit is not made (files are committed only in the schema they are
    /// committed against). Callers that hold the rows convert them and commit again.
    #[error("the schema of '{table}' changed (schema id {written} -> {current}) while files were written for a commit; nothing was committed and the files were deleted (run it again: it plans on the new schema)")]
    SchemaChanged {
        table: String,
        written: i32,
        current: i32,
    },

    /// A stream rejected more records than allowed (`--max-bad-records`).
    #[error("stopping: {count} bad records exceed --max-bad-records {max}; last: {last}")]
    TooManyBadRecords { count: u64, max: u64, last: String },

    /// A maintenance operation refused to run because it could not prove it safe.
    #[error("refusing to {operation}: {reason}")]
    Refused { operation: String, reason: String },

    /// Object storage refused or failed a request (credentials, bucket, permissions, network).
    #[error("storage {location}: {reason}")]
    Storage {
        location: String,
        reason: String,
        #[source]
        source: Option<BoxError>,
    },

    /// The catalog may or may not have applied a commit (timeout or server error after the
    /// request was sent) and reloading could not tell. Files of the commit are kept: deleting
    /// them could corrupt a table where the commit did land.
    #[error("commit to '{table}' has an unknown outcome: {reason}; its files were kept (run `floe table describe {table}` to check; `floe remove-orphan-files {table}` cleans them if it did not land)")]
    CommitStateUnknown { table: String, reason: String },

    /// A SQL statement failed to plan or execute.
    #[error("sql: {message}")]
    Sql {
        message: String,
        /// DataFusion's error, when the failure came from it.
        #[source]
        source: Option<BoxError>,
    },

    /// A background task floe started panicked or was cancelled (a bug, or the runtime
    /// shutting down): `what` names the work it was doing.
    #[error("{what} task failed: {source}")]
    Task {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },

    /// An error from the iceberg crate (spec types, FileIO, scans, writers).
    #[error("{}", describe_iceberg(.0))]
    Iceberg(#[from] iceberg::Error),

    /// An Arrow error while converting data.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    /// A local I/O error.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),

    /// Parquet encoding failed (floe's own compaction writer).
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
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

    /// Shorthand for an [`Error::Catalog`] error. Both parts go through the masking function:
    /// catalog clients (sqlx, reqwest) may echo a URI with its password or token.
    pub fn catalog(catalog: impl Into<String>, reason: impl ToString) -> Self {
        Error::Catalog {
            catalog: mask(&catalog.into()),
            reason: mask(&reason.to_string()),
            source: None,
        }
    }

    /// An [`Error::Catalog`] with the client's error kept as its source (`reason` is what
    /// users read, masked as in [`Error::catalog`]).
    pub fn catalog_with<E>(catalog: impl Into<String>, reason: impl ToString, source: E) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Error::Catalog {
            catalog: mask(&catalog.into()),
            reason: mask(&reason.to_string()),
            source: Some(Box::new(source)),
        }
    }

    /// An [`Error::Metadata`] for `location` without a further cause.
    pub fn metadata(location: impl Into<String>, reason: impl ToString) -> Self {
        Error::Metadata {
            location: location.into(),
            reason: reason.to_string(),
            source: None,
        }
    }

    /// An [`Error::Task`] for a task that did not finish.
    pub fn task(what: &'static str) -> impl FnOnce(tokio::task::JoinError) -> Self {
        move |source| Error::Task { what, source }
    }

    /// An [`Error::Sql`] with a message only.
    pub fn sql(message: impl Into<String>) -> Self {
        Error::Sql {
            message: message.into(),
            source: None,
        }
    }

    /// Names the table in an [`Error::InvalidTableProperty`] that does not name one yet (the
    /// property getters only see the property map); other errors are returned unchanged.
    pub fn for_table(self, table: &str) -> Self {
        match self {
            Error::InvalidTableProperty {
                table: None,
                key,
                value,
                expected,
            } => Error::InvalidTableProperty {
                table: Some(table.to_string()),
                key,
                value,
                expected,
            },
            other => other,
        }
    }
}

/// `table property K = 'V' is invalid (expected ...); repair: floe table set-property ...`.
fn bad_table_property(table: Option<&str>, key: &str, value: &str, expected: &str) -> String {
    let (t, of) = match table {
        Some(t) => (t, format!(" of table '{t}'")),
        None => ("NS.TABLE", String::new()),
    };
    format!(
        "table property {key}{of} has an invalid value '{value}' ({expected}); fix it with \
         `floe table set-property {t} {key}=VALUE` or `floe table set-property {t} --unset {key}`"
    )
}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        // DataFusion wraps our own errors as External: unwrap them back.
        match e {
            datafusion::error::DataFusionError::External(inner) => {
                match inner.downcast::<Error>() {
                    Ok(err) => *err,
                    Err(other) => Error::Sql {
                        message: other.to_string(),
                        source: Some(other),
                    },
                }
            }
            other => Error::Sql {
                message: other.strip_backtrace(),
                source: Some(Box::new(other)),
            },
        }
    }
}

/// One short line for an iceberg error: its message, then the root cause. Object-store causes
/// are reduced to what a user acts on (operation, object, status, S3 error code and message);
/// the HTTP headers and repeated contexts opendal attaches are dropped. Secrets (a presigned
/// URL's signature, a URI password) are masked.
pub fn describe_iceberg(e: &iceberg::Error) -> String {
    mask(&describe_iceberg_unmasked(e))
}

fn describe_iceberg_unmasked(e: &iceberg::Error) -> String {
    let mut out = format!("iceberg: {}", e.message().trim_end_matches('.'));
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut root: Option<String> = None;
    while let Some(s) = source {
        if let Some(oe) = s.downcast_ref::<opendal::Error>() {
            root = Some(describe_opendal_unmasked(oe));
            break;
        }
        let line = s.to_string();
        root = Some(
            line.lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(300)
                .collect(),
        );
        source = s.source();
    }
    if let Some(r) = root.filter(|r| !r.is_empty() && !out.contains(r.as_str())) {
        out.push_str(": ");
        out.push_str(&r);
    }
    out
}

/// `PermissionDenied at write http://host/bucket/key: SignatureDoesNotMatch: <message>`,
/// secrets masked.
pub fn describe_opendal(e: &opendal::Error) -> String {
    mask(&describe_opendal_unmasked(e))
}

fn describe_opendal_unmasked(e: &opendal::Error) -> String {
    let full = e.to_string();
    let field = |name: &str| -> Option<String> {
        let start = full.find(name)? + name.len();
        let rest = &full[start..];
        let rest = rest.strip_prefix('"').unwrap_or(rest);
        let end = rest.find(['"', ',', ' ', '}']).unwrap_or(rest.len());
        Some(rest[..end].to_string())
    };
    let mut out = e.kind().to_string();
    if let Some(op) = field(" at ") {
        out.push_str(&format!(" at {op}"));
    }
    if let Some(uri) = field("uri: ") {
        out.push(' ');
        out.push_str(&uri);
    }
    match (field("code: "), full.find("message: \"")) {
        (Some(code), Some(i)) => {
            let msg = &full[i + 10..];
            let msg = &msg[..msg.find('"').unwrap_or(msg.len())];
            out.push_str(&format!(": {code}: {msg}"));
        }
        (Some(code), None) => out.push_str(&format!(": {code}")),
        _ => {
            if let Some(status) = field("status: ") {
                out.push_str(&format!(": HTTP {status}"));
            }
            // Transport failures: opendal's message and the root cause (connection refused,
            // DNS, TLS).
            out.push_str(&format!(": {}", e.message()));
            let mut source = std::error::Error::source(e);
            let mut root = None;
            while let Some(s) = source {
                root = Some(s.to_string());
                source = s.source();
            }
            if let Some(r) = root {
                out.push_str(&format!(": {}", r.lines().next().unwrap_or("")));
            }
        }
    }
    out
}
