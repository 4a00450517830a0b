//! Table properties floe honours, with Iceberg's names and defaults, and typed getters that
//! reject bad values with an error naming the property.
//!
//! Every property floe reads (and the typed ones iceberg-rust parses, e.g. when dropping a
//! table with `--purge`) has a [`Rule`]: [`validate`] refuses a bad value when it is set, and
//! the getters ([`u64_prop`], [`bool_prop`]) refuse a bad *stored* value (written by another
//! engine, or by an older floe) with [`Error::InvalidTableProperty`], which names the key, the
//! value, what is expected and the `floe table set-property` command that repairs the table.
//! Integer ranges follow the Java types Iceberg reads them with (`int`, `long`), so a value floe
//! accepts never breaks another engine.

use std::collections::HashMap;

use crate::base::error::{Error, Result};

/// Target size of data files written by append, ingest and compaction.
pub const WRITE_TARGET_FILE_SIZE_BYTES: &str = "write.target-file-size-bytes";
/// Iceberg's default target file size: 512 MiB.
pub const WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT: u64 = 512 * 1024 * 1024;
/// Target size of delete files `rewrite-position-delete-files` writes.
pub const WRITE_DELETE_TARGET_FILE_SIZE_BYTES: &str = "write.delete.target-file-size-bytes";
/// Iceberg's default delete file target size: 64 MiB.
pub const WRITE_DELETE_TARGET_FILE_SIZE_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
/// Parquet row group size.
pub const WRITE_PARQUET_ROW_GROUP_SIZE_BYTES: &str = "write.parquet.row-group-size-bytes";
/// Iceberg's default row group size: 128 MiB.
pub const WRITE_PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT: u64 = 128 * 1024 * 1024;
/// Parquet compression codec.
pub const WRITE_PARQUET_COMPRESSION_CODEC: &str = "write.parquet.compression-codec";
/// Compression level (zstd).
pub const WRITE_PARQUET_COMPRESSION_LEVEL: &str = "write.parquet.compression-level";
/// zstd level when unset: 1, the Arrow default that PyIceberg and delta-rs write with
/// (Iceberg Java's parquet-mr uses 3: set the property for its slightly smaller files).
pub const WRITE_PARQUET_ZSTD_LEVEL_DEFAULT: i32 = 1;
/// Number of retries of a commit that lost a race.
pub const COMMIT_RETRY_NUM_RETRIES: &str = "commit.retry.num-retries";
/// Default number of commit retries.
pub const COMMIT_RETRY_NUM_RETRIES_DEFAULT: u64 = 4;
/// Minimum wait between commit retries.
pub const COMMIT_RETRY_MIN_WAIT_MS: &str = "commit.retry.min-wait-ms";
/// Default minimum wait.
pub const COMMIT_RETRY_MIN_WAIT_MS_DEFAULT: u64 = 100;
/// Maximum wait between commit retries.
pub const COMMIT_RETRY_MAX_WAIT_MS: &str = "commit.retry.max-wait-ms";
/// Default maximum wait.
pub const COMMIT_RETRY_MAX_WAIT_MS_DEFAULT: u64 = 60_000;
/// Total time budget of a commit with retries.
pub const COMMIT_RETRY_TOTAL_TIMEOUT_MS: &str = "commit.retry.total-timeout-ms";
/// Default total time budget: 30 minutes.
pub const COMMIT_RETRY_TOTAL_TIMEOUT_MS_DEFAULT: u64 = 1_800_000;
/// Delete metadata files that fall out of the metadata log after a commit.
pub const METADATA_DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
/// Number of previous metadata files kept in the metadata log.
pub const METADATA_PREVIOUS_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";
/// Number of manifests that triggers merging on append.
pub const COMMIT_MANIFEST_MIN_COUNT_TO_MERGE: &str = "commit.manifest.min-count-to-merge";
/// Iceberg's default: 100.
pub const COMMIT_MANIFEST_MIN_COUNT_TO_MERGE_DEFAULT: u64 = 100;
/// Target manifest size when merging.
pub const COMMIT_MANIFEST_TARGET_SIZE_BYTES: &str = "commit.manifest.target-size-bytes";
/// Iceberg's default: 8 MiB.
pub const COMMIT_MANIFEST_TARGET_SIZE_BYTES_DEFAULT: u64 = 8 * 1024 * 1024;
/// Whether appends merge manifests.
pub const COMMIT_MANIFEST_MERGE_ENABLED: &str = "commit.manifest-merge.enabled";

/// Whether files of this table may be garbage-collected (expiry file cleanup, orphan removal).
pub const GC_ENABLED: &str = "gc.enabled";
/// Maximum age of snapshots kept by expiry.
pub const HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS: &str = "history.expire.max-snapshot-age-ms";
/// Iceberg's default: 5 days.
pub const HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS_DEFAULT: u64 = 5 * 24 * 3600 * 1000;
/// Minimum number of snapshots expiry keeps on each branch.
pub const HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP: &str = "history.expire.min-snapshots-to-keep";
/// Iceberg's default: 1.
pub const HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP_DEFAULT: u64 = 1;
/// Maximum age of branches and tags (not `main`) before expiry removes them.
pub const HISTORY_EXPIRE_MAX_REF_AGE_MS: &str = "history.expire.max-ref-age-ms";
/// Default number of previous metadata files kept in the metadata log: 100.
pub const METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT: u64 = 100;

/// Parses a command-line duration such as `5d`, `12h`, `30m`, `10s`, `500ms`, naming `option`
/// in the error. The unit is required: a bare `5` could mean 5 ms or 5 days, and guessing wrong
/// on `--older-than` expires or deletes the wrong things. (Table properties with durations,
/// `history.expire.max-snapshot-age-ms` and the like, are bare milliseconds by their Iceberg
/// names and are read with [`u64_prop`], not with this.)
pub fn parse_duration(option: &str, s: &str) -> Result<std::time::Duration> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        Error::invalid_option(
            option,
            s,
            "expected a duration like 5d, 12h, 30m, 10s or 500ms",
        )
    })?;
    let ms = match unit.trim().to_ascii_lowercase().as_str() {
        "" => {
            return Err(Error::invalid_option(
                option,
                s,
                format!("a duration needs a unit: ms, s, m, h, d or w (e.g. {num}s or {num}d)"),
            ))
        }
        "ms" => 1.0,
        "s" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        "w" => 7.0 * 86_400e3,
        _ => {
            return Err(Error::invalid_option(
                option,
                s,
                "unknown unit: use ms, s, m, h, d or w",
            ))
        }
    };
    Ok(std::time::Duration::from_millis((n * ms).round() as u64))
}

/// `write.metadata.compression-codec` (metadata.json files; read by iceberg-rust on every
/// metadata write).
pub const METADATA_COMPRESSION_CODEC: &str = "write.metadata.compression-codec";
/// `write.distribution-mode` (ingest: how rows are spread over writer tasks).
pub const WRITE_DISTRIBUTION_MODE: &str = "write.distribution-mode";
/// `write.delete.mode`: how `floe delete` removes rows (`merge-on-read`: position deletes, floe's
/// default; `copy-on-write`: affected data files rewritten without them).
pub const WRITE_DELETE_MODE: &str = "write.delete.mode";
/// `write.update.mode` (upserts), with the same values.
pub const WRITE_UPDATE_MODE: &str = "write.update.mode";
/// Prefix of the table-level defaults of `floe compact` options.
pub const COMPACT_PREFIX: &str = "floe.compact.";
/// Prefix of `floe ingest` table properties.
pub const INGEST_PREFIX: &str = "floe.ingest.";
/// `floe.ingest.write-buffer-size`: the ingest buffer budget, in bytes.
pub const INGEST_WRITE_BUFFER_SIZE: &str = "floe.ingest.write-buffer-size";
/// Every `floe.ingest.*` property (`crate::ingest::debt` documents the others).
pub const INGEST_PROPERTIES: [&str; 7] = [
    INGEST_WRITE_BUFFER_SIZE,
    "floe.ingest.maintain",
    "floe.ingest.max-small-files-per-partition",
    "floe.ingest.max-snapshots-since-compaction",
    "floe.ingest.max-time-since-compaction",
    "floe.ingest.max-commit-interval",
    "floe.ingest.source-timeout",
];

const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;

/// What a known property accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A decimal integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// `true` or `false` (any case; stored lowercase).
    Bool,
    /// One of these words (any case).
    OneOf(&'static [&'static str]),
    /// A size such as `512MiB` or `1048576` (as `floe compact --option` parses it), at least
    /// `min` bytes.
    Size { min: u64 },
    /// A count written as `floe compact --option` takes it (plain or with a size suffix), at
    /// least `min`.
    Count { min: u64 },
    /// `floe compact`'s `rewrite-job-order`.
    JobOrder,
    /// A duration such as `30s`, `5m`, `1h` (as `floe ingest` flags take it), of at least
    /// `min_ms` milliseconds.
    Duration { min_ms: u64 },
    /// `floe.maintain.compact.roll-up-fan-in`: `0` (off) or at least 2.
    FanIn,
    /// A `floe.compact.*`, `floe.ingest.*` or `floe.maintain.*` key floe does not know: refused when set (a typo
    /// would silently do nothing), ignored when stored.
    Unknown(&'static str),
}

/// `floe compact` options that may be given table-wide as `floe.compact.<option>`, with the
/// rule `floe compact` parses each with (its `CompactBuilder::plan_options` and `execute`).
/// Values of `floe.compact.rewrite-job-order` (Iceberg's `rewrite-job-order`), as
/// `crate::operations::compact::JobOrder` parses them.
pub const JOB_ORDERS: [&str; 5] = ["none", "bytes-asc", "bytes-desc", "files-asc", "files-desc"];

/// Values of `floe.compact.row-group-merge`.
pub const ROW_GROUP_MERGE_MODES: [&str; 3] = ["auto", "always", "never"];

const COMPACT_OPTIONS: [(&str, Rule); 15] = [
    ("target-file-size-bytes", Rule::Size { min: 1 }),
    ("min-file-size-bytes", Rule::Size { min: 0 }),
    ("max-file-size-bytes", Rule::Size { min: 0 }),
    ("min-input-files", Rule::Count { min: 1 }),
    ("max-file-group-size-bytes", Rule::Size { min: 1 }),
    ("max-concurrent-file-group-rewrites", Rule::Count { min: 0 }),
    ("partial-progress.enabled", Rule::Bool),
    ("partial-progress.max-commits", Rule::Count { min: 0 }),
    ("rewrite-all", Rule::Bool),
    ("rewrite-job-order", Rule::JobOrder),
    ("delete-file-threshold", Rule::Count { min: 0 }),
    ("remove-dangling-deletes", Rule::Bool),
    ("row-group-merge", Rule::OneOf(&ROW_GROUP_MERGE_MODES)),
    ("row-group-merge-min-bytes", Rule::Size { min: 0 }),
    ("plan-batch-files", Rule::Count { min: 1 }),
];

/// Prefix of `floe maintain` table properties (`crate::maintain::policy` reads them).
pub const MAINTAIN_PREFIX: &str = "floe.maintain.";

const DAY_MS: u64 = 24 * 3600 * 1000;

/// Every `floe.maintain.*` property with its rule, as `crate::maintain::policy` reads it (its
/// tests check that the two agree).
pub const MAINTAIN_PROPERTIES: [(&str, Rule); 16] = [
    ("floe.maintain.enabled", Rule::Bool),
    (
        "floe.maintain.compact.trigger.commit-count",
        Rule::Count { min: 0 },
    ),
    (
        "floe.maintain.compact.trigger.data-file-count",
        Rule::Count { min: 0 },
    ),
    (
        "floe.maintain.compact.trigger.data-file-size",
        Rule::Size { min: 0 },
    ),
    (
        "floe.maintain.compact.trigger.pos-delete-file-count",
        Rule::Count { min: 0 },
    ),
    (
        "floe.maintain.compact.trigger.eq-delete-file-count",
        Rule::Count { min: 0 },
    ),
    (
        "floe.maintain.compact.trigger.interval",
        Rule::Duration { min_ms: 0 },
    ),
    (
        "floe.maintain.compact.rate-limit",
        Rule::Duration { min_ms: 0 },
    ),
    (
        "floe.maintain.compact.partition-idle-time",
        Rule::Duration { min_ms: 0 },
    ),
    (
        "floe.maintain.compact.small-file-hard-limit",
        Rule::Count { min: 1 },
    ),
    ("floe.maintain.compact.roll-up-fan-in", Rule::FanIn),
    ("floe.maintain.expire.enabled", Rule::Bool),
    (
        "floe.maintain.orphans.interval",
        Rule::Duration { min_ms: DAY_MS },
    ),
    (
        "floe.maintain.orphans.older-than",
        Rule::Duration { min_ms: 3 * DAY_MS },
    ),
    (
        "floe.maintain.rewrite-manifests.min-manifests",
        Rule::Count { min: 2 },
    ),
    (
        "floe.maintain.rewrite-manifests.small-manifest-bytes",
        Rule::Size { min: 0 },
    ),
];

/// The rule of a known property, `None` for keys floe neither reads nor owns.
pub fn rule(key: &str) -> Option<Rule> {
    let int = |min, max| Some(Rule::Int { min, max });
    match key {
        COMMIT_RETRY_NUM_RETRIES => int(0, INT_MAX),
        COMMIT_RETRY_MIN_WAIT_MS | COMMIT_RETRY_MAX_WAIT_MS | COMMIT_RETRY_TOTAL_TIMEOUT_MS => {
            int(0, LONG_MAX)
        }
        COMMIT_MANIFEST_MIN_COUNT_TO_MERGE => int(0, INT_MAX),
        COMMIT_MANIFEST_TARGET_SIZE_BYTES => int(1, LONG_MAX),
        COMMIT_MANIFEST_MERGE_ENABLED => Some(Rule::Bool),
        WRITE_TARGET_FILE_SIZE_BYTES
        | WRITE_DELETE_TARGET_FILE_SIZE_BYTES
        | WRITE_PARQUET_ROW_GROUP_SIZE_BYTES => int(1, LONG_MAX),
        WRITE_PARQUET_COMPRESSION_CODEC => {
            Some(Rule::OneOf(&["zstd", "snappy", "uncompressed", "none"]))
        }
        // zstd's levels, as the Parquet writer accepts them.
        WRITE_PARQUET_COMPRESSION_LEVEL => int(1, 22),
        METADATA_DELETE_AFTER_COMMIT => Some(Rule::Bool),
        // Java and iceberg-rust keep at least one entry whatever the value.
        METADATA_PREVIOUS_VERSIONS_MAX => int(0, INT_MAX),
        METADATA_COMPRESSION_CODEC => Some(Rule::OneOf(&["none", "gzip"])),
        // `range` is taken as `hash` by ingest (partitions still go to one writer each).
        WRITE_DISTRIBUTION_MODE => Some(Rule::OneOf(&["none", "hash", "range"])),
        WRITE_DELETE_MODE | WRITE_UPDATE_MODE | "write.merge.mode" => {
            Some(Rule::OneOf(&["merge-on-read", "copy-on-write"]))
        }
        HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS | HISTORY_EXPIRE_MAX_REF_AGE_MS => int(0, LONG_MAX),
        // The current snapshot is never expired: at least one is kept.
        HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP => int(1, INT_MAX),
        GC_ENABLED => Some(Rule::Bool),
        INGEST_WRITE_BUFFER_SIZE => int(1, LONG_MAX),
        "floe.ingest.maintain" => Some(Rule::Bool),
        "floe.ingest.max-small-files-per-partition"
        | "floe.ingest.max-snapshots-since-compaction" => int(0, LONG_MAX),
        "floe.ingest.max-time-since-compaction"
        | "floe.ingest.max-commit-interval"
        | "floe.ingest.source-timeout" => Some(Rule::Duration { min_ms: 0 }),
        // Parsed by iceberg-rust's `TableProperties` (drop --purge reads them all).
        "write.datafusion.fanout.enabled" | "write.parquet.content-defined-chunking.enabled" => {
            Some(Rule::Bool)
        }
        "write.parquet.content-defined-chunking.min-chunk-size"
        | "write.parquet.content-defined-chunking.max-chunk-size" => int(0, INT_MAX),
        "write.parquet.content-defined-chunking.norm-level" => int(i32::MIN as i64, INT_MAX),
        "encryption.data-key-length" => int(1, INT_MAX),
        _ => {
            if let Some(option) = key.strip_prefix(COMPACT_PREFIX) {
                Some(
                    COMPACT_OPTIONS
                        .iter()
                        .find(|(name, _)| *name == option)
                        .map_or(Rule::Unknown(COMPACT_PREFIX), |(_, r)| *r),
                )
            } else if key.starts_with(INGEST_PREFIX) {
                Some(Rule::Unknown(INGEST_PREFIX))
            } else if key.starts_with(MAINTAIN_PREFIX) {
                Some(
                    MAINTAIN_PROPERTIES
                        .iter()
                        .find(|(name, _)| *name == key)
                        .map_or(Rule::Unknown(MAINTAIN_PREFIX), |(_, r)| *r),
                )
            } else {
                None
            }
        }
    }
}

impl Rule {
    /// What a valid value looks like, for error messages.
    pub fn expected(&self) -> String {
        match *self {
            Rule::Int { min: 0, max } if max == LONG_MAX => {
                "expected a non-negative integer".into()
            }
            Rule::Int { min: 1, max } if max == LONG_MAX => "expected a positive integer".into(),
            Rule::Int { min, max } => format!("expected an integer from {min} to {max}"),
            Rule::Bool => "expected true or false".into(),
            Rule::OneOf(words) => format!("expected one of: {}", words.join(", ")),
            Rule::Size { min: 0 } => "expected a size such as 512MiB or 1048576".into(),
            Rule::Size { .. } => "expected a positive size such as 512MiB or 1048576".into(),
            Rule::Count { min: 0 } => "expected a non-negative integer".into(),
            Rule::Count { min } => format!("expected an integer of at least {min}"),
            Rule::JobOrder => {
                "expected none, bytes-asc, bytes-desc, files-asc or files-desc".into()
            }
            Rule::Duration { min_ms: 0 } => "expected a duration such as 30s, 5m or 1h".into(),
            Rule::Duration { min_ms } => {
                format!("expected a duration of at least {}", duration_text(min_ms))
            }
            Rule::FanIn => "expected 0 (off) or an integer of at least 2".into(),
            Rule::Unknown(MAINTAIN_PREFIX) => format!(
                "not a floe maintain property; expected one of: {}",
                MAINTAIN_PROPERTIES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Rule::Unknown(COMPACT_PREFIX) => format!(
                "not a floe compact option; expected one of: {}",
                COMPACT_OPTIONS
                    .iter()
                    .map(|(n, _)| format!("{COMPACT_PREFIX}{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Rule::Unknown(_) => {
                format!(
                    "not a floe ingest property; expected one of: {}",
                    INGEST_PROPERTIES.join(", ")
                )
            }
        }
    }

    /// The value in its canonical form (trimmed; integers in decimal; booleans lowercase),
    /// or `Err(expected)`.
    pub fn check(&self, value: &str) -> std::result::Result<String, String> {
        let v = value.trim();
        let ok = match *self {
            Rule::Int { min, max } => {
                let digits = v.strip_prefix('+').unwrap_or(v);
                match digits.parse::<i64>() {
                    Ok(n) if (min..=max).contains(&n) && !digits.starts_with('+') => {
                        Some(n.to_string())
                    }
                    _ => None,
                }
            }
            Rule::Bool => match v.to_ascii_lowercase().as_str() {
                b @ ("true" | "false") => Some(b.to_string()),
                _ => None,
            },
            Rule::OneOf(words) => words
                .iter()
                .any(|w| w.eq_ignore_ascii_case(v))
                .then(|| v.to_string()),
            // A count is whole: `1.5k` is 1536, but `2.5` is no count.
            Rule::Count { .. } if v.contains('.') && v.ends_with(|c: char| c.is_ascii_digit()) => {
                None
            }
            Rule::Size { min } | Rule::Count { min } => parse_size("", v)
                .ok()
                .filter(|n| *n >= min)
                .map(|_| v.to_string()),
            Rule::JobOrder => JOB_ORDERS
                .iter()
                .find(|w| w.eq_ignore_ascii_case(v))
                .map(|w| w.to_string()),
            Rule::Duration { min_ms } => parse_duration("", v)
                .ok()
                .filter(|d| d.as_millis() >= u128::from(min_ms))
                .map(|_| v.to_string()),
            Rule::FanIn => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n != 1 && !v.starts_with('+'))
                .map(|n| n.to_string()),
            Rule::Unknown(_) => None,
        };
        ok.ok_or_else(|| self.expected())
    }
}

/// `ms` in its largest whole unit (`3d`, `12h`, `90s`), for messages.
fn duration_text(ms: u64) -> String {
    for (unit, name) in [(DAY_MS, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")] {
        if ms >= unit && ms.is_multiple_of(unit) {
            return format!("{}{name}", ms / unit);
        }
    }
    format!("{ms}ms")
}

/// Checks a property about to be set. Keys floe does not know pass unchanged; known ones must
/// satisfy their [`Rule`] and come back in canonical form. The error names the key, the value
/// and what is expected.
pub fn validate(key: &str, value: &str) -> Result<String> {
    match rule(key) {
        None => Ok(value.to_string()),
        Some(r) => r.check(value).map_err(|expected| {
            Error::invalid_option(format!("table property {key}"), value, expected)
        }),
    }
}

/// Validates a property update (`set`, then `remove`): each value set ([`validate`], returned
/// canonical); a key may not be both set and removed. The combination `floe compact` would run
/// with is checked by the caller (`crate::operations::alter`) when [`touches_compaction`] says so.
pub fn validate_update(
    set: &HashMap<String, String>,
    remove: &[String],
) -> Result<HashMap<String, String>> {
    if let Some(k) = remove.iter().find(|k| set.contains_key(*k)) {
        return Err(Error::invalid_option(
            "table property update",
            k,
            "the same key is both set and unset",
        ));
    }
    let mut canonical = HashMap::with_capacity(set.len());
    for (k, v) in set {
        canonical.insert(k.clone(), validate(k, v)?);
    }
    Ok(canonical)
}

/// True when an update of these keys changes what `floe compact` plans with
/// (`floe.compact.*` or `write.target-file-size-bytes`).
pub fn touches_compaction<'a>(mut keys: impl Iterator<Item = &'a String>) -> bool {
    keys.any(|k| k.starts_with(COMPACT_PREFIX) || k == WRITE_TARGET_FILE_SIZE_BYTES)
}

/// `current` with `set` applied, then `remove`.
pub fn updated(
    current: &HashMap<String, String>,
    set: &HashMap<String, String>,
    remove: &[String],
) -> HashMap<String, String> {
    let mut after = current.clone();
    after.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    for k in remove {
        after.remove(k);
    }
    after
}

/// Every known property of `props` whose stored value breaks its rule, as
/// [`Error::InvalidTableProperty`] errors naming `table` (sorted by key).
pub fn invalid_stored(table: Option<&str>, props: &HashMap<String, String>) -> Vec<Error> {
    let mut bad: Vec<(&String, &String, String)> = props
        .iter()
        .filter_map(|(k, v)| match rule(k)? {
            // An unknown floe.* key stored by some other tool does nothing: not an error.
            Rule::Unknown(_) => None,
            r => r.check(v).err().map(|expected| (k, v, expected)),
        })
        .collect();
    bad.sort();
    bad.into_iter()
        .map(|(k, v, expected)| Error::InvalidTableProperty {
            table: table.map(str::to_string),
            key: k.clone(),
            value: v.clone(),
            expected,
        })
        .collect()
}

/// Fails with the first bad stored value among `keys` (see [`invalid_stored`]).
pub fn check_stored(
    table: Option<&str>,
    props: &HashMap<String, String>,
    keys: &[&str],
) -> Result<()> {
    for key in keys {
        if let (Some(v), Some(r)) = (props.get(*key), rule(key)) {
            if let Err(expected) = r.check(v) {
                return Err(stored_error(table, key, v, expected));
            }
        }
    }
    Ok(())
}

fn stored_error(table: Option<&str>, key: &str, value: &str, expected: String) -> Error {
    Error::InvalidTableProperty {
        table: table.map(str::to_string),
        key: key.to_string(),
        value: value.to_string(),
        expected,
    }
}

/// `ns.table` of `table`, for errors (as `crate::table::ident_string` writes it; this base
/// module imports no layer above it).
fn table_name(table: &iceberg::table::Table) -> String {
    let ident = table.identifier();
    format!(
        "{}.{}",
        ident.namespace().clone().inner().join("."),
        ident.name()
    )
}

/// [`u64_prop`] of `table`'s properties; a bad stored value's error names the table, so its
/// repair command is one to copy.
pub fn table_u64_prop(table: &iceberg::table::Table, key: &str, default: u64) -> Result<u64> {
    u64_prop(table.metadata().properties(), key, default)
        .map_err(|e| e.for_table(&table_name(table)))
}

/// [`bool_prop`] of `table`'s properties, naming the table (see [`table_u64_prop`]).
pub fn table_bool_prop(table: &iceberg::table::Table, key: &str, default: bool) -> Result<bool> {
    bool_prop(table.metadata().properties(), key, default)
        .map_err(|e| e.for_table(&table_name(table)))
}

/// Reads an unsigned integer property, or its default when unset. A stored value that breaks
/// the key's [`Rule`] is an [`Error::InvalidTableProperty`] (name the table with
/// [`Error::for_table`]).
pub fn u64_prop(props: &HashMap<String, String>, key: &str, default: u64) -> Result<u64> {
    let Some(v) = props.get(key) else {
        return Ok(default);
    };
    let checked = match rule(key) {
        Some(r @ Rule::Int { .. }) => r.check(v),
        _ => Rule::Int {
            min: 0,
            max: LONG_MAX,
        }
        .check(v),
    };
    checked
        .and_then(|n| {
            n.parse::<u64>()
                .map_err(|_| "expected a non-negative integer".into())
        })
        .map_err(|expected| stored_error(None, key, v, expected))
}

/// Reads a boolean property, or its default when unset; a bad stored value is an
/// [`Error::InvalidTableProperty`].
pub fn bool_prop(props: &HashMap<String, String>, key: &str, default: bool) -> Result<bool> {
    match props.get(key) {
        None => Ok(default),
        Some(v) => Rule::Bool
            .check(v)
            .map(|b| b == "true")
            .map_err(|expected| stored_error(None, key, v, expected)),
    }
}

/// Reads a duration property such as `5m`, `1h` or `3d`, of at least `min_ms`, in
/// milliseconds, or its default when unset; a bad stored value is an
/// [`Error::InvalidTableProperty`].
pub fn duration_prop(
    props: &HashMap<String, String>,
    key: &str,
    default: u64,
    min_ms: u64,
) -> Result<u64> {
    let Some(v) = props.get(key) else {
        return Ok(default);
    };
    if let Some(r) = rule(key) {
        r.check(v)
            .map_err(|expected| stored_error(None, key, v, expected))?;
    }
    let ms = parse_duration(key, v)
        .map_err(|_| {
            stored_error(
                None,
                key,
                v,
                "expected a duration such as 30s, 15m, 1h or 3d".into(),
            )
        })?
        .as_millis();
    let ms =
        u64::try_from(ms).map_err(|_| stored_error(None, key, v, "duration too long".into()))?;
    if ms < min_ms {
        return Err(stored_error(
            None,
            key,
            v,
            format!("expected a duration of at least {}", human_ms(min_ms)),
        ));
    }
    Ok(ms)
}

/// A duration for messages: its largest unit and the next one, `1h30m`, `2m13s`, `5d`, `250ms`.
pub fn human_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (DAY_MS, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
        (1, "ms"),
    ];
    for (i, (unit, name)) in UNITS.iter().enumerate() {
        if ms >= *unit || *unit == 1 {
            let mut out = format!("{}{name}", ms / unit);
            if let Some((next, next_name)) = UNITS.get(i + 1).filter(|_| *unit > 1000) {
                let rest = (ms % unit) / next;
                if rest > 0 {
                    out.push_str(&format!("{rest}{next_name}"));
                }
            }
            return out;
        }
    }
    format!("{ms}ms")
}

/// Parses `true` / `false` (any case), naming `option` when it is neither.
pub fn parse_bool(option: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::invalid_option(
            option,
            value,
            "expected true or false",
        )),
    }
}

/// Parses a size such as `512MiB`, `64mb`, `1GiB`, `4096` (bytes).
pub fn parse_size(option: &str, s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        Error::invalid_option(option, s, "expected a size such as 512MiB or 1048576")
    })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(Error::invalid_option(
                option,
                s,
                format!("unknown size unit '{other}'"),
            ));
        }
    };
    Ok((n * mult as f64).round() as u64)
}

#[cfg(test)]
mod tests;
