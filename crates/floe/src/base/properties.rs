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

/// A table property floe knows: its key and the [`Rule`] its values follow (which says its
/// type). Every known key is declared once, as a `pub const` of this type, and listed once in
/// [`ALL`]; other modules name a key as `properties::NAME.key`. Defaults sit next to their key
/// as `NAME_DEFAULT` constants, typed as the key is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Property {
    pub key: &'static str,
    pub rule: Rule,
}

const fn prop(key: &'static str, rule: Rule) -> Property {
    Property { key, rule }
}

const fn int(key: &'static str, min: i64, max: i64) -> Property {
    prop(key, Rule::Int { min, max })
}

const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;
const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;
const MIB: u64 = 1 << 20;

/// Target size of data files written by append, ingest and compaction.
pub const WRITE_TARGET_FILE_SIZE_BYTES: Property = int("write.target-file-size-bytes", 1, LONG_MAX);
/// Iceberg's default target file size: 512 MiB.
pub const WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT: u64 = 512 * MIB;
/// Target size of delete files `rewrite-position-delete-files` writes.
pub const WRITE_DELETE_TARGET_FILE_SIZE_BYTES: Property =
    int("write.delete.target-file-size-bytes", 1, LONG_MAX);
/// Iceberg's default delete file target size: 64 MiB.
pub const WRITE_DELETE_TARGET_FILE_SIZE_BYTES_DEFAULT: u64 = 64 * MIB;
/// Parquet row group size.
pub const WRITE_PARQUET_ROW_GROUP_SIZE_BYTES: Property =
    int("write.parquet.row-group-size-bytes", 1, LONG_MAX);
/// Iceberg's default row group size: 128 MiB.
pub const WRITE_PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT: u64 = 128 * MIB;
/// Parquet compression codec.
pub const WRITE_PARQUET_COMPRESSION_CODEC: Property = prop(
    "write.parquet.compression-codec",
    Rule::OneOf(&["zstd", "snappy", "uncompressed", "none"]),
);
/// Compression level (zstd): zstd's levels, as the Parquet writer accepts them.
pub const WRITE_PARQUET_COMPRESSION_LEVEL: Property = int("write.parquet.compression-level", 1, 22);
/// zstd level when unset: 1, the Arrow default that PyIceberg and delta-rs write with
/// (Iceberg Java's parquet-mr uses 3: set the property for its slightly smaller files).
pub const WRITE_PARQUET_ZSTD_LEVEL_DEFAULT: i32 = 1;
/// Number of retries of a commit that lost a race.
pub const COMMIT_RETRY_NUM_RETRIES: Property = int("commit.retry.num-retries", 0, INT_MAX);
/// Default number of commit retries.
pub const COMMIT_RETRY_NUM_RETRIES_DEFAULT: u64 = 4;
/// Minimum wait between commit retries.
pub const COMMIT_RETRY_MIN_WAIT_MS: Property = int("commit.retry.min-wait-ms", 0, LONG_MAX);
/// Default minimum wait.
pub const COMMIT_RETRY_MIN_WAIT_MS_DEFAULT: u64 = 100;
/// Maximum wait between commit retries.
pub const COMMIT_RETRY_MAX_WAIT_MS: Property = int("commit.retry.max-wait-ms", 0, LONG_MAX);
/// Default maximum wait.
pub const COMMIT_RETRY_MAX_WAIT_MS_DEFAULT: u64 = 60_000;
/// Total time budget of a commit with retries.
pub const COMMIT_RETRY_TOTAL_TIMEOUT_MS: Property =
    int("commit.retry.total-timeout-ms", 0, LONG_MAX);
/// Default total time budget: 30 minutes.
pub const COMMIT_RETRY_TOTAL_TIMEOUT_MS_DEFAULT: u64 = 1_800_000;
/// Delete metadata files that fall out of the metadata log after a commit.
pub const METADATA_DELETE_AFTER_COMMIT: Property =
    prop("write.metadata.delete-after-commit.enabled", Rule::Bool);
/// Number of previous metadata files kept in the metadata log (Java and iceberg-rust keep at
/// least one entry whatever the value).
pub const METADATA_PREVIOUS_VERSIONS_MAX: Property =
    int("write.metadata.previous-versions-max", 0, INT_MAX);
/// Default number of previous metadata files kept in the metadata log: 100.
pub const METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT: u64 = 100;
/// Number of manifests that triggers merging on append.
pub const COMMIT_MANIFEST_MIN_COUNT_TO_MERGE: Property =
    int("commit.manifest.min-count-to-merge", 0, INT_MAX);
/// Iceberg's default: 100.
pub const COMMIT_MANIFEST_MIN_COUNT_TO_MERGE_DEFAULT: u64 = 100;
/// Target manifest size when merging.
pub const COMMIT_MANIFEST_TARGET_SIZE_BYTES: Property =
    int("commit.manifest.target-size-bytes", 1, LONG_MAX);
/// Iceberg's default: 8 MiB.
pub const COMMIT_MANIFEST_TARGET_SIZE_BYTES_DEFAULT: u64 = 8 * MIB;
/// Whether appends merge manifests.
pub const COMMIT_MANIFEST_MERGE_ENABLED: Property =
    prop("commit.manifest-merge.enabled", Rule::Bool);

/// Whether files of this table may be garbage-collected (expiry file cleanup, orphan removal).
pub const GC_ENABLED: Property = prop("gc.enabled", Rule::Bool);
/// Iceberg's default: `true`.
pub const GC_ENABLED_DEFAULT: bool = true;
/// Maximum age of snapshots kept by expiry.
pub const HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS: Property =
    int("history.expire.max-snapshot-age-ms", 0, LONG_MAX);
/// Iceberg's default: 5 days.
pub const HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS_DEFAULT: u64 = 5 * DAY_MS;
/// Minimum number of snapshots expiry keeps on each branch (the current snapshot is never
/// expired: at least one is kept).
pub const HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP: Property =
    int("history.expire.min-snapshots-to-keep", 1, INT_MAX);
/// Iceberg's default: 1.
pub const HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP_DEFAULT: u64 = 1;
/// Maximum age of branches and tags (not `main`) before expiry removes them.
pub const HISTORY_EXPIRE_MAX_REF_AGE_MS: Property =
    int("history.expire.max-ref-age-ms", 0, LONG_MAX);
/// `floe.expire.writer-max-age`: a streaming writer (floe, Flink, Kafka Connect) whose newest
/// snapshot is younger than this keeps, through expiry, the whole parent chain from each branch
/// head down to that snapshot: Flink's and Kafka Connect's committers find their recovery point
/// by walking parent ids from the head and stop at the first missing one. `0s` turns it off.
pub const EXPIRE_WRITER_MAX_AGE: Property =
    prop("floe.expire.writer-max-age", Rule::Duration { min_ms: 0 });
/// Default: 7 days.
pub const EXPIRE_WRITER_MAX_AGE_DEFAULT_MS: u64 = 7 * DAY_MS;

/// `write.metadata.compression-codec` (metadata.json files; read by iceberg-rust on every
/// metadata write).
pub const METADATA_COMPRESSION_CODEC: Property = prop(
    "write.metadata.compression-codec",
    Rule::OneOf(&["none", "gzip"]),
);
/// `write.distribution-mode` (ingest: how rows are spread over writer tasks). `range` is taken
/// as `hash` by ingest (partitions still go to one writer each).
pub const WRITE_DISTRIBUTION_MODE: Property = prop(
    "write.distribution-mode",
    Rule::OneOf(&["none", "hash", "range"]),
);
/// Values of the row-level operation modes.
const ROW_LEVEL_MODES: &[&str] = &["merge-on-read", "copy-on-write"];
/// `write.delete.mode`: how `floe delete` removes rows (`merge-on-read`: position deletes, floe's
/// default; `copy-on-write`: affected data files rewritten without them).
pub const WRITE_DELETE_MODE: Property = prop("write.delete.mode", Rule::OneOf(ROW_LEVEL_MODES));
/// `write.update.mode` (upserts), with the same values.
pub const WRITE_UPDATE_MODE: Property = prop("write.update.mode", Rule::OneOf(ROW_LEVEL_MODES));
/// `write.merge.mode`, with the same values.
pub const WRITE_MERGE_MODE: Property = prop("write.merge.mode", Rule::OneOf(ROW_LEVEL_MODES));

// Parsed by iceberg-rust's `TableProperties` (drop --purge reads them all).
/// `write.datafusion.fanout.enabled` (iceberg-rust).
pub const WRITE_DATAFUSION_FANOUT_ENABLED: Property =
    prop("write.datafusion.fanout.enabled", Rule::Bool);
/// `write.parquet.content-defined-chunking.enabled` (iceberg-rust).
pub const WRITE_PARQUET_CDC_ENABLED: Property =
    prop("write.parquet.content-defined-chunking.enabled", Rule::Bool);
/// `write.parquet.content-defined-chunking.min-chunk-size` (iceberg-rust).
pub const WRITE_PARQUET_CDC_MIN_CHUNK_SIZE: Property = int(
    "write.parquet.content-defined-chunking.min-chunk-size",
    0,
    INT_MAX,
);
/// `write.parquet.content-defined-chunking.max-chunk-size` (iceberg-rust).
pub const WRITE_PARQUET_CDC_MAX_CHUNK_SIZE: Property = int(
    "write.parquet.content-defined-chunking.max-chunk-size",
    0,
    INT_MAX,
);
/// `write.parquet.content-defined-chunking.norm-level` (iceberg-rust).
pub const WRITE_PARQUET_CDC_NORM_LEVEL: Property = int(
    "write.parquet.content-defined-chunking.norm-level",
    i32::MIN as i64,
    INT_MAX,
);
/// `encryption.data-key-length` (iceberg-rust).
pub const ENCRYPTION_DATA_KEY_LENGTH: Property = int("encryption.data-key-length", 1, INT_MAX);

/// Prefix of the table-level defaults of `floe compact` options.
pub const COMPACT_PREFIX: &str = "floe.compact.";
/// Prefix of `floe ingest` table properties.
pub const INGEST_PREFIX: &str = "floe.ingest.";
/// Prefix of `floe maintain` table properties (`crate::maintain::policy` reads them).
pub const MAINTAIN_PREFIX: &str = "floe.maintain.";
/// Prefix of `expire-snapshots` table properties floe adds to Iceberg's `history.expire.*`.
pub const EXPIRE_PREFIX: &str = "floe.expire.";
/// Prefix of the keys floe keeps in metadata in memory and never writes
/// (`crate::table::reserved`): refused when set, ignored when another engine wrote one.
pub const RESERVED_PREFIX: &str = "floe.internal.";

/// `floe.ingest.write-buffer-size`: the ingest buffer budget, in bytes.
pub const INGEST_WRITE_BUFFER_SIZE: Property = int("floe.ingest.write-buffer-size", 1, LONG_MAX);
/// Default write buffer budget: 256 MiB.
pub const INGEST_WRITE_BUFFER_SIZE_DEFAULT: u64 = 256 * MIB;
/// `floe.ingest.maintain`: `true` runs the table's maintenance in every `floe ingest` into it
/// (as `--maintain` does).
pub const INGEST_MAINTAIN: Property = prop("floe.ingest.maintain", Rule::Bool);
/// Default: `false`.
pub const INGEST_MAINTAIN_DEFAULT: bool = false;
/// `floe.ingest.max-small-files-per-partition`: small files in one partition above which the
/// writer slows down.
pub const INGEST_MAX_SMALL_FILES: Property =
    int("floe.ingest.max-small-files-per-partition", 0, LONG_MAX);
/// Default with `--maintain` (without it, unset limits are off).
pub const INGEST_MAX_SMALL_FILES_DEFAULT: u64 = 200;
/// `floe.ingest.max-snapshots-since-compaction`: snapshots since the last compaction above
/// which the writer slows down.
pub const INGEST_MAX_SNAPSHOTS: Property =
    int("floe.ingest.max-snapshots-since-compaction", 0, LONG_MAX);
/// Default with `--maintain` (without it, unset limits are off).
pub const INGEST_MAX_SNAPSHOTS_DEFAULT: u64 = 1000;
/// `floe.ingest.max-time-since-compaction`: how long small files may wait since the last
/// compaction before the writer slows down.
pub const INGEST_MAX_TIME: Property = prop(
    "floe.ingest.max-time-since-compaction",
    Rule::Duration { min_ms: 0 },
);
/// Default with `--maintain` (without it, unset limits are off): 1h.
pub const INGEST_MAX_TIME_DEFAULT_MS: u64 = HOUR_MS;
/// `floe.ingest.max-commit-interval`: the longest commit interval backpressure stretches to
/// (default: 10x `--commit-interval`, at least 60s; `crate::ingest::debt` computes it).
pub const INGEST_MAX_COMMIT_INTERVAL: Property = prop(
    "floe.ingest.max-commit-interval",
    Rule::Duration { min_ms: 0 },
);
/// `floe.ingest.source-timeout`: how long a source (a Kafka broker) may stay unreachable before
/// the ingest commits what it read and exits with an error (default: wait forever, reporting
/// the wait).
pub const INGEST_SOURCE_TIMEOUT: Property =
    prop("floe.ingest.source-timeout", Rule::Duration { min_ms: 0 });

/// Values of `floe.compact.rewrite-job-order` (Iceberg's `rewrite-job-order`), as
/// `crate::operations::compact::JobOrder` parses them.
pub const JOB_ORDERS: [&str; 5] = ["none", "bytes-asc", "bytes-desc", "files-asc", "files-desc"];

/// Values of `floe.compact.row-group-merge`.
pub const ROW_GROUP_MERGE_MODES: [&str; 3] = ["auto", "always", "never"];

// `floe compact` options that may be given table-wide as `floe.compact.<option>`, with the
// rule `floe compact` parses each with (its `CompactBuilder::plan_options` and `execute`).
/// `floe.compact.target-file-size-bytes`.
pub const COMPACT_TARGET_FILE_SIZE_BYTES: Property =
    prop("floe.compact.target-file-size-bytes", Rule::Size { min: 1 });
/// `floe.compact.min-file-size-bytes`.
pub const COMPACT_MIN_FILE_SIZE_BYTES: Property =
    prop("floe.compact.min-file-size-bytes", Rule::Size { min: 0 });
/// `floe.compact.max-file-size-bytes`.
pub const COMPACT_MAX_FILE_SIZE_BYTES: Property =
    prop("floe.compact.max-file-size-bytes", Rule::Size { min: 0 });
/// `floe.compact.min-input-files`.
pub const COMPACT_MIN_INPUT_FILES: Property =
    prop("floe.compact.min-input-files", Rule::Count { min: 1 });
/// `floe.compact.max-file-group-size-bytes`.
pub const COMPACT_MAX_FILE_GROUP_SIZE_BYTES: Property = prop(
    "floe.compact.max-file-group-size-bytes",
    Rule::Size { min: 1 },
);
/// `floe.compact.max-concurrent-file-group-rewrites`.
pub const COMPACT_MAX_CONCURRENT_FILE_GROUP_REWRITES: Property = prop(
    "floe.compact.max-concurrent-file-group-rewrites",
    Rule::Count { min: 0 },
);
/// `floe.compact.partial-progress.enabled`.
pub const COMPACT_PARTIAL_PROGRESS_ENABLED: Property =
    prop("floe.compact.partial-progress.enabled", Rule::Bool);
/// `floe.compact.partial-progress.max-commits`.
pub const COMPACT_PARTIAL_PROGRESS_MAX_COMMITS: Property = prop(
    "floe.compact.partial-progress.max-commits",
    Rule::Count { min: 0 },
);
/// `floe.compact.rewrite-all`.
pub const COMPACT_REWRITE_ALL: Property = prop("floe.compact.rewrite-all", Rule::Bool);
/// `floe.compact.rewrite-job-order`.
pub const COMPACT_REWRITE_JOB_ORDER: Property =
    prop("floe.compact.rewrite-job-order", Rule::JobOrder);
/// `floe.compact.delete-file-threshold`.
pub const COMPACT_DELETE_FILE_THRESHOLD: Property =
    prop("floe.compact.delete-file-threshold", Rule::Count { min: 0 });
/// `floe.compact.remove-dangling-deletes`.
pub const COMPACT_REMOVE_DANGLING_DELETES: Property =
    prop("floe.compact.remove-dangling-deletes", Rule::Bool);
/// `floe.compact.row-group-merge`.
pub const COMPACT_ROW_GROUP_MERGE: Property = prop(
    "floe.compact.row-group-merge",
    Rule::OneOf(&ROW_GROUP_MERGE_MODES),
);
/// `floe.compact.row-group-merge-min-bytes`.
pub const COMPACT_ROW_GROUP_MERGE_MIN_BYTES: Property = prop(
    "floe.compact.row-group-merge-min-bytes",
    Rule::Size { min: 0 },
);
/// `floe.compact.plan-batch-files`.
pub const COMPACT_PLAN_BATCH_FILES: Property =
    prop("floe.compact.plan-batch-files", Rule::Count { min: 1 });
/// `floe.compact.sort-job-size-bytes`.
pub const COMPACT_SORT_JOB_SIZE_BYTES: Property =
    prop("floe.compact.sort-job-size-bytes", Rule::Size { min: 1 });

// The `floe.maintain.*` properties, as `crate::maintain::policy` reads them. The compaction
// triggers are named after Flink's `TableMaintenance`; a count, size or interval trigger set
// to `0` is off.
/// `floe.maintain.enabled`: `false` keeps `floe maintain` off this table.
pub const MAINTAIN_ENABLED: Property = prop("floe.maintain.enabled", Rule::Bool);
pub const MAINTAIN_ENABLED_DEFAULT: bool = true;
/// `floe.maintain.compact.trigger.commit-count`: commits since the last compaction that
/// trigger one (Flink `scheduleOnCommitCount`).
pub const MAINTAIN_COMMIT_COUNT: Property = prop(
    "floe.maintain.compact.trigger.commit-count",
    Rule::Count { min: 0 },
);
pub const MAINTAIN_COMMIT_COUNT_DEFAULT: u64 = 10;
/// `floe.maintain.compact.trigger.data-file-count`: data files added since the last
/// compaction that trigger one (Flink `scheduleOnDataFileCount`).
pub const MAINTAIN_DATA_FILE_COUNT: Property = prop(
    "floe.maintain.compact.trigger.data-file-count",
    Rule::Count { min: 0 },
);
pub const MAINTAIN_DATA_FILE_COUNT_DEFAULT: u64 = 50;
/// `floe.maintain.compact.trigger.data-file-size`: bytes of data files added since the last
/// compaction that trigger one (Flink `scheduleOnDataFileSize`).
pub const MAINTAIN_DATA_FILE_SIZE: Property = prop(
    "floe.maintain.compact.trigger.data-file-size",
    Rule::Size { min: 0 },
);
pub const MAINTAIN_DATA_FILE_SIZE_DEFAULT: u64 = 512 * MIB;
/// `floe.maintain.compact.trigger.pos-delete-file-count`: position delete files added since
/// the last compaction that trigger one (Flink `scheduleOnPosDeleteFileCount`).
pub const MAINTAIN_POS_DELETE_FILE_COUNT: Property = prop(
    "floe.maintain.compact.trigger.pos-delete-file-count",
    Rule::Count { min: 0 },
);
pub const MAINTAIN_POS_DELETE_FILE_COUNT_DEFAULT: u64 = 10;
/// `floe.maintain.compact.trigger.eq-delete-file-count`: equality delete files added since
/// the last compaction that trigger one (Flink `scheduleOnEqDeleteFileCount`).
pub const MAINTAIN_EQ_DELETE_FILE_COUNT: Property = prop(
    "floe.maintain.compact.trigger.eq-delete-file-count",
    Rule::Count { min: 0 },
);
pub const MAINTAIN_EQ_DELETE_FILE_COUNT_DEFAULT: u64 = 5;
/// `floe.maintain.compact.trigger.interval`: time since the last compaction (or since the
/// first commit after it, when the table never was compacted) after which any new commit
/// triggers one (Flink `scheduleOnInterval`).
pub const MAINTAIN_INTERVAL: Property = prop(
    "floe.maintain.compact.trigger.interval",
    Rule::Duration { min_ms: 0 },
);
pub const MAINTAIN_INTERVAL_DEFAULT_MS: u64 = HOUR_MS;
/// `floe.maintain.compact.rate-limit`: minimum time between two compactions of one table,
/// whatever fired (Flink `rateLimit`). `0s` is no limit.
pub const MAINTAIN_RATE_LIMIT: Property = prop(
    "floe.maintain.compact.rate-limit",
    Rule::Duration { min_ms: 0 },
);
pub const MAINTAIN_RATE_LIMIT_DEFAULT_MS: u64 = 5 * MINUTE_MS;
/// `floe.maintain.compact.partition-idle-time`: a partition without a write for this long is
/// done being written and may be compacted; a still-active one is left to its writers (used
/// by the planning step).
pub const MAINTAIN_PARTITION_IDLE_TIME: Property = prop(
    "floe.maintain.compact.partition-idle-time",
    Rule::Duration { min_ms: 0 },
);
pub const MAINTAIN_PARTITION_IDLE_TIME_DEFAULT_MS: u64 = 15 * MINUTE_MS;
/// `floe.maintain.compact.small-file-hard-limit`: small files in one still-active partition
/// that force compacting it anyway (used by the planning step).
pub const MAINTAIN_SMALL_FILE_HARD_LIMIT: Property = prop(
    "floe.maintain.compact.small-file-hard-limit",
    Rule::Count { min: 1 },
);
pub const MAINTAIN_SMALL_FILE_HARD_LIMIT_DEFAULT: u64 = 100;
/// `floe.maintain.compact.roll-up-fan-in` (`0`: off; `floe ingest --maintain` uses `4` unless
/// set): compacts a partition still being written by size tiers, so its small files stay few
/// however short the commit interval. A tier spans a factor of the fan-in in file size,
/// starting at the partition's smallest file; once a tier holds fan-in files, every small file
/// of that tier and below is merged into one. A partition being written then holds fewer than
/// fan-in files per tier (`fan-in - 1` times `log_fan-in(min-file-size / smallest file)` at
/// most), and each byte is rewritten at most once per tier.
pub const MAINTAIN_ROLL_UP_FAN_IN: Property =
    prop("floe.maintain.compact.roll-up-fan-in", Rule::FanIn);
pub const MAINTAIN_ROLL_UP_FAN_IN_DEFAULT: u64 = 0;
/// `floe.maintain.expire.enabled`: expire snapshots by Iceberg's
/// `history.expire.max-snapshot-age-ms` and `history.expire.min-snapshots-to-keep`.
pub const MAINTAIN_EXPIRE_ENABLED: Property = prop("floe.maintain.expire.enabled", Rule::Bool);
pub const MAINTAIN_EXPIRE_ENABLED_DEFAULT: bool = true;
/// `floe.maintain.expire.max-snapshots` (Paimon's `snapshot.num-retained.max`): the maintainer
/// keeps at most this many snapshots per branch however young they are, so a table committing
/// every second keeps a bounded history and a metadata.json that stops growing. Ref heads and
/// writer recovery points always stay; never fewer than `history.expire.min-snapshots-to-keep`.
/// `0`: no bound (Iceberg's behaviour, the default of `floe maintain`).
pub const MAINTAIN_EXPIRE_MAX_SNAPSHOTS: Property =
    prop("floe.maintain.expire.max-snapshots", Rule::Count { min: 0 });
pub const MAINTAIN_EXPIRE_MAX_SNAPSHOTS_DEFAULT: u64 = 0;
/// `floe.maintain.streaming`: `true` gives the table the streaming defaults under `floe
/// maintain` (see [`crate::maintain::streaming`]); `false` never; `auto` (the default) sets
/// `true` on the table once its commits show a stream's cadence.
pub const MAINTAIN_STREAMING: Property = prop(
    "floe.maintain.streaming",
    Rule::OneOf(&["auto", "true", "false"]),
);
/// `floe.maintain.orphans.interval` (at least `1d`): time between two orphan file removals.
pub const MAINTAIN_ORPHANS_INTERVAL: Property = prop(
    "floe.maintain.orphans.interval",
    Rule::Duration {
        min_ms: MAINTAIN_ORPHANS_INTERVAL_MIN_MS,
    },
);
pub const MAINTAIN_ORPHANS_INTERVAL_MIN_MS: u64 = DAY_MS;
pub const MAINTAIN_ORPHANS_INTERVAL_DEFAULT_MS: u64 = DAY_MS;
/// `floe.maintain.orphans.older-than` (at least `3d`): only files older than this are orphans
/// (younger ones may belong to a commit in flight).
pub const MAINTAIN_ORPHANS_OLDER_THAN: Property = prop(
    "floe.maintain.orphans.older-than",
    Rule::Duration {
        min_ms: MAINTAIN_ORPHANS_OLDER_THAN_MIN_MS,
    },
);
pub const MAINTAIN_ORPHANS_OLDER_THAN_MIN_MS: u64 = 3 * DAY_MS;
pub const MAINTAIN_ORPHANS_OLDER_THAN_DEFAULT_MS: u64 = 3 * DAY_MS;
/// `floe.maintain.rewrite-manifests.min-manifests` (at least 2): small manifests in the
/// current snapshot that trigger a manifest rewrite.
pub const MAINTAIN_MIN_MANIFESTS: Property = prop(
    "floe.maintain.rewrite-manifests.min-manifests",
    Rule::Count { min: 2 },
);
pub const MAINTAIN_MIN_MANIFESTS_DEFAULT: u64 = 20;
/// `floe.maintain.rewrite-manifests.small-manifest-bytes`: a manifest under this size counts
/// as small.
pub const MAINTAIN_SMALL_MANIFEST_BYTES: Property = prop(
    "floe.maintain.rewrite-manifests.small-manifest-bytes",
    Rule::Size { min: 0 },
);
pub const MAINTAIN_SMALL_MANIFEST_BYTES_DEFAULT: u64 = MIB;

/// Every property floe knows, each once; a family (`floe.compact.*`, `floe.ingest.*`,
/// `floe.maintain.*`) in the order its error message lists it.
pub const ALL: &[Property] = &[
    WRITE_TARGET_FILE_SIZE_BYTES,
    WRITE_DELETE_TARGET_FILE_SIZE_BYTES,
    WRITE_PARQUET_ROW_GROUP_SIZE_BYTES,
    WRITE_PARQUET_COMPRESSION_CODEC,
    WRITE_PARQUET_COMPRESSION_LEVEL,
    COMMIT_RETRY_NUM_RETRIES,
    COMMIT_RETRY_MIN_WAIT_MS,
    COMMIT_RETRY_MAX_WAIT_MS,
    COMMIT_RETRY_TOTAL_TIMEOUT_MS,
    METADATA_DELETE_AFTER_COMMIT,
    METADATA_PREVIOUS_VERSIONS_MAX,
    COMMIT_MANIFEST_MIN_COUNT_TO_MERGE,
    COMMIT_MANIFEST_TARGET_SIZE_BYTES,
    COMMIT_MANIFEST_MERGE_ENABLED,
    GC_ENABLED,
    HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS,
    HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP,
    HISTORY_EXPIRE_MAX_REF_AGE_MS,
    EXPIRE_WRITER_MAX_AGE,
    METADATA_COMPRESSION_CODEC,
    WRITE_DISTRIBUTION_MODE,
    WRITE_DELETE_MODE,
    WRITE_UPDATE_MODE,
    WRITE_MERGE_MODE,
    WRITE_DATAFUSION_FANOUT_ENABLED,
    WRITE_PARQUET_CDC_ENABLED,
    WRITE_PARQUET_CDC_MIN_CHUNK_SIZE,
    WRITE_PARQUET_CDC_MAX_CHUNK_SIZE,
    WRITE_PARQUET_CDC_NORM_LEVEL,
    ENCRYPTION_DATA_KEY_LENGTH,
    INGEST_WRITE_BUFFER_SIZE,
    INGEST_MAINTAIN,
    INGEST_MAX_SMALL_FILES,
    INGEST_MAX_SNAPSHOTS,
    INGEST_MAX_TIME,
    INGEST_MAX_COMMIT_INTERVAL,
    INGEST_SOURCE_TIMEOUT,
    COMPACT_TARGET_FILE_SIZE_BYTES,
    COMPACT_MIN_FILE_SIZE_BYTES,
    COMPACT_MAX_FILE_SIZE_BYTES,
    COMPACT_MIN_INPUT_FILES,
    COMPACT_MAX_FILE_GROUP_SIZE_BYTES,
    COMPACT_MAX_CONCURRENT_FILE_GROUP_REWRITES,
    COMPACT_PARTIAL_PROGRESS_ENABLED,
    COMPACT_PARTIAL_PROGRESS_MAX_COMMITS,
    COMPACT_REWRITE_ALL,
    COMPACT_REWRITE_JOB_ORDER,
    COMPACT_DELETE_FILE_THRESHOLD,
    COMPACT_REMOVE_DANGLING_DELETES,
    COMPACT_ROW_GROUP_MERGE,
    COMPACT_ROW_GROUP_MERGE_MIN_BYTES,
    COMPACT_PLAN_BATCH_FILES,
    COMPACT_SORT_JOB_SIZE_BYTES,
    MAINTAIN_ENABLED,
    MAINTAIN_COMMIT_COUNT,
    MAINTAIN_DATA_FILE_COUNT,
    MAINTAIN_DATA_FILE_SIZE,
    MAINTAIN_POS_DELETE_FILE_COUNT,
    MAINTAIN_EQ_DELETE_FILE_COUNT,
    MAINTAIN_INTERVAL,
    MAINTAIN_RATE_LIMIT,
    MAINTAIN_PARTITION_IDLE_TIME,
    MAINTAIN_SMALL_FILE_HARD_LIMIT,
    MAINTAIN_ROLL_UP_FAN_IN,
    MAINTAIN_EXPIRE_ENABLED,
    MAINTAIN_EXPIRE_MAX_SNAPSHOTS,
    MAINTAIN_STREAMING,
    MAINTAIN_ORPHANS_INTERVAL,
    MAINTAIN_ORPHANS_OLDER_THAN,
    MAINTAIN_MIN_MANIFESTS,
    MAINTAIN_SMALL_MANIFEST_BYTES,
];

/// The properties of [`ALL`] under `prefix` (one family: [`COMPACT_PREFIX`],
/// [`INGEST_PREFIX`], [`MAINTAIN_PREFIX`]), in their order.
pub fn family(prefix: &str) -> impl Iterator<Item = &'static Property> + '_ {
    ALL.iter().filter(move |p| p.key.starts_with(prefix))
}

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
    /// A `floe.internal.*` key ([`RESERVED_PREFIX`]): floe's own bookkeeping, refused when set
    /// or unset, ignored (dropped when the metadata is read) when another engine wrote one.
    Reserved,
}

/// The rule of a known property, `None` for keys floe neither reads nor owns: the rule of its
/// entry in [`ALL`], else [`Rule::Unknown`] for a key under a floe prefix.
pub fn rule(key: &str) -> Option<Rule> {
    if let Some(p) = ALL.iter().find(|p| p.key == key) {
        return Some(p.rule);
    }
    if key.starts_with(RESERVED_PREFIX) {
        return Some(Rule::Reserved);
    }
    [
        COMPACT_PREFIX,
        INGEST_PREFIX,
        MAINTAIN_PREFIX,
        EXPIRE_PREFIX,
    ]
    .into_iter()
    .find(|prefix| key.starts_with(prefix))
    .map(Rule::Unknown)
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
                family_keys(MAINTAIN_PREFIX)
            ),
            Rule::Unknown(EXPIRE_PREFIX) => format!(
                "not a floe expire property; expected one of: {}",
                family_keys(EXPIRE_PREFIX)
            ),
            Rule::Unknown(COMPACT_PREFIX) => format!(
                "not a floe compact option; expected one of: {}",
                family_keys(COMPACT_PREFIX)
            ),
            Rule::Unknown(_) => {
                format!(
                    "not a floe ingest property; expected one of: {}",
                    family_keys(INGEST_PREFIX)
                )
            }
            Rule::Reserved => format!(
                "{RESERVED_PREFIX}* keys are reserved for floe's own bookkeeping and cannot be set \
                 or unset"
            ),
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
            Rule::Unknown(_) | Rule::Reserved => None,
        };
        ok.ok_or_else(|| self.expected())
    }
}

/// The keys of a family of [`ALL`], comma-separated, for messages.
fn family_keys(prefix: &str) -> String {
    family(prefix).map(|p| p.key).collect::<Vec<_>>().join(", ")
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
    if let Some(k) = remove.iter().find(|k| k.starts_with(RESERVED_PREFIX)) {
        return Err(Error::invalid_option(
            format!("table property {k}"),
            "(unset)",
            Rule::Reserved.expected(),
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
    keys.any(|k| k.starts_with(COMPACT_PREFIX) || k == WRITE_TARGET_FILE_SIZE_BYTES.key)
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
            // An unknown floe.* key stored by some other tool does nothing: not an error; a
            // reserved one is dropped when the metadata is read.
            Rule::Unknown(_) | Rule::Reserved => None,
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
