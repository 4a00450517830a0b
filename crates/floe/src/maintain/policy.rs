//! The maintenance policy of one table, read from its properties (`floe.maintain.*`, plus
//! Iceberg's `history.expire.*` and `gc.enabled`), with defaults that keep an unconfigured
//! table healthy.
//!
//! The compaction triggers are named after Flink's `TableMaintenance` (`scheduleOnCommitCount`,
//! `scheduleOnDataFileCount`, `scheduleOnDataFileSize`, `scheduleOnPosDeleteFileCount`,
//! `scheduleOnEqDeleteFileCount`, `scheduleOnInterval`, `rateLimit`). A count, size or
//! interval trigger set to `0` is off.
//!
//! Every bad stored value is one [`Error::InvalidTableProperty`] naming the key, the value and
//! what is expected (name the table with [`Error::for_table`]).

use std::collections::HashMap;

use crate::base::error::{Error, Result};
use crate::base::properties::{self, bool_prop, duration_prop, parse_size, u64_prop};

/// Prefix of every maintenance property.
pub const PREFIX: &str = "floe.maintain.";

/// `floe.maintain.enabled` (default `true`): `false` keeps `floe maintain` off this table.
pub const ENABLED: &str = "floe.maintain.enabled";
/// `floe.maintain.compact.trigger.commit-count` (default `10`): commits since the last
/// compaction that trigger one (Flink `scheduleOnCommitCount`).
pub const COMMIT_COUNT: &str = "floe.maintain.compact.trigger.commit-count";
/// `floe.maintain.compact.trigger.data-file-count` (default `50`): data files added since the
/// last compaction that trigger one (Flink `scheduleOnDataFileCount`).
pub const DATA_FILE_COUNT: &str = "floe.maintain.compact.trigger.data-file-count";
/// `floe.maintain.compact.trigger.data-file-size` (default `512MiB`): bytes of data files
/// added since the last compaction that trigger one (Flink `scheduleOnDataFileSize`).
pub const DATA_FILE_SIZE: &str = "floe.maintain.compact.trigger.data-file-size";
/// `floe.maintain.compact.trigger.pos-delete-file-count` (default `10`): position delete
/// files added since the last compaction that trigger one (Flink
/// `scheduleOnPosDeleteFileCount`).
pub const POS_DELETE_FILE_COUNT: &str = "floe.maintain.compact.trigger.pos-delete-file-count";
/// `floe.maintain.compact.trigger.eq-delete-file-count` (default `5`): equality delete files
/// added since the last compaction that trigger one (Flink `scheduleOnEqDeleteFileCount`).
pub const EQ_DELETE_FILE_COUNT: &str = "floe.maintain.compact.trigger.eq-delete-file-count";
/// `floe.maintain.compact.trigger.interval` (default `1h`): time since the last compaction
/// (or since the first commit after it, when the table never was compacted) after which any
/// new commit triggers one (Flink `scheduleOnInterval`).
pub const INTERVAL: &str = "floe.maintain.compact.trigger.interval";
/// `floe.maintain.compact.rate-limit` (default `5m`): minimum time between two compactions of
/// one table, whatever fired (Flink `rateLimit`). `0s` is no limit.
pub const RATE_LIMIT: &str = "floe.maintain.compact.rate-limit";
/// `floe.maintain.compact.partition-idle-time` (default `15m`): a partition without a write
/// for this long is done being written and may be compacted; a still-active one is left to
/// its writers (used by the planning step).
pub const PARTITION_IDLE_TIME: &str = "floe.maintain.compact.partition-idle-time";
/// `floe.maintain.compact.small-file-hard-limit` (default `100`): small files in one
/// still-active partition that force compacting it anyway (used by the planning step).
pub const SMALL_FILE_HARD_LIMIT: &str = "floe.maintain.compact.small-file-hard-limit";
/// `floe.maintain.compact.roll-up-fan-in` (default `0`: off; `floe ingest --maintain` uses `4`
/// unless set): compacts a partition still being written by size tiers, so its small files
/// stay few however short the commit interval. A tier spans a factor of the fan-in in file
/// size, starting at the partition's smallest file; once a tier holds fan-in files, every
/// small file of that tier and below is merged into one. A partition being written then holds
/// fewer than fan-in files per tier (`fan-in - 1` times `log_fan-in(min-file-size / smallest
/// file)` at most), and each byte is rewritten at most once per tier.
pub const ROLL_UP_FAN_IN: &str = "floe.maintain.compact.roll-up-fan-in";
/// `floe.maintain.expire.enabled` (default `true`): expire snapshots by Iceberg's
/// `history.expire.max-snapshot-age-ms` and `history.expire.min-snapshots-to-keep`.
pub const EXPIRE_ENABLED: &str = "floe.maintain.expire.enabled";
/// `floe.maintain.orphans.interval` (default `1d`, at least `1d`): time between two orphan
/// file removals.
pub const ORPHANS_INTERVAL: &str = "floe.maintain.orphans.interval";
/// `floe.maintain.orphans.older-than` (default `3d`, at least `3d`): only files older than this
/// are orphans (younger ones may belong to a commit in flight).
pub const ORPHANS_OLDER_THAN: &str = "floe.maintain.orphans.older-than";
/// `floe.maintain.rewrite-manifests.min-manifests` (default `20`): small manifests in the
/// current snapshot that trigger a manifest rewrite.
pub const MIN_MANIFESTS: &str = "floe.maintain.rewrite-manifests.min-manifests";
/// `floe.maintain.rewrite-manifests.small-manifest-bytes` (default `1MiB`): a manifest under
/// this size counts as small.
pub const SMALL_MANIFEST_BYTES: &str = "floe.maintain.rewrite-manifests.small-manifest-bytes";

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;
const MIB: u64 = 1 << 20;

/// Every `floe.maintain.*` property with its default, as the README lists them.
pub const PROPERTIES: &[(&str, &str)] = &[
    (ENABLED, "true"),
    (COMMIT_COUNT, "10"),
    (DATA_FILE_COUNT, "50"),
    (DATA_FILE_SIZE, "512MiB"),
    (POS_DELETE_FILE_COUNT, "10"),
    (EQ_DELETE_FILE_COUNT, "5"),
    (INTERVAL, "1h"),
    (RATE_LIMIT, "5m"),
    (PARTITION_IDLE_TIME, "15m"),
    (SMALL_FILE_HARD_LIMIT, "100"),
    (ROLL_UP_FAN_IN, "0"),
    (EXPIRE_ENABLED, "true"),
    (ORPHANS_INTERVAL, "1d"),
    (ORPHANS_OLDER_THAN, "3d"),
    (MIN_MANIFESTS, "20"),
    (SMALL_MANIFEST_BYTES, "1MiB"),
];

/// When compaction is due (see the property constants). Counts, sizes and `interval_ms` of
/// `0` turn their trigger off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactTriggers {
    pub commit_count: u64,
    pub data_file_count: u64,
    pub data_file_size: u64,
    pub pos_delete_file_count: u64,
    pub eq_delete_file_count: u64,
    pub interval_ms: u64,
    pub rate_limit_ms: u64,
    pub partition_idle_time_ms: u64,
    pub small_file_hard_limit: u64,
    /// 0: no roll-up of active partitions.
    pub roll_up_fan_in: u64,
}

/// The maintenance policy of one table. `Policy::default()` is the policy of an unconfigured
/// table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `floe.maintain.enabled`.
    pub enabled: bool,
    pub compact: CompactTriggers,
    /// `floe.maintain.expire.enabled`.
    pub expire_enabled: bool,
    /// `history.expire.max-snapshot-age-ms` (Iceberg's default: 5 days).
    pub max_snapshot_age_ms: u64,
    /// `history.expire.min-snapshots-to-keep` (Iceberg's default: 1).
    pub min_snapshots_to_keep: u64,
    /// `gc.enabled`: when `false`, no orphan removal (Iceberg forbids deleting files then).
    pub gc_enabled: bool,
    pub orphans_interval_ms: u64,
    pub orphans_older_than_ms: u64,
    pub min_manifests: u64,
    pub small_manifest_bytes: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            enabled: true,
            compact: CompactTriggers {
                commit_count: 10,
                data_file_count: 50,
                data_file_size: 512 * MIB,
                pos_delete_file_count: 10,
                eq_delete_file_count: 5,
                interval_ms: HOUR_MS,
                rate_limit_ms: 5 * MINUTE_MS,
                partition_idle_time_ms: 15 * MINUTE_MS,
                small_file_hard_limit: 100,
                roll_up_fan_in: 0,
            },
            expire_enabled: true,
            max_snapshot_age_ms: properties::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS_DEFAULT,
            min_snapshots_to_keep: properties::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP_DEFAULT,
            gc_enabled: true,
            orphans_interval_ms: DAY_MS,
            orphans_older_than_ms: 3 * DAY_MS,
            min_manifests: 20,
            small_manifest_bytes: MIB,
        }
    }
}

impl Policy {
    /// The policy a table's properties set, defaults for what is unset. Fails on the first
    /// bad value (in the order of [`PROPERTIES`]); [`Policy::problems`] lists them all.
    pub fn from_properties(props: &HashMap<String, String>) -> Result<Policy> {
        let d = Policy::default();
        let c = &d.compact;
        Ok(Policy {
            enabled: bool_prop(props, ENABLED, d.enabled)?,
            compact: CompactTriggers {
                commit_count: count(props, COMMIT_COUNT, c.commit_count, 0)?,
                data_file_count: count(props, DATA_FILE_COUNT, c.data_file_count, 0)?,
                data_file_size: size(props, DATA_FILE_SIZE, c.data_file_size)?,
                pos_delete_file_count: count(
                    props,
                    POS_DELETE_FILE_COUNT,
                    c.pos_delete_file_count,
                    0,
                )?,
                eq_delete_file_count: count(
                    props,
                    EQ_DELETE_FILE_COUNT,
                    c.eq_delete_file_count,
                    0,
                )?,
                interval_ms: duration_prop(props, INTERVAL, c.interval_ms, 0)?,
                rate_limit_ms: duration_prop(props, RATE_LIMIT, c.rate_limit_ms, 0)?,
                partition_idle_time_ms: duration_prop(
                    props,
                    PARTITION_IDLE_TIME,
                    c.partition_idle_time_ms,
                    0,
                )?,
                small_file_hard_limit: count(
                    props,
                    SMALL_FILE_HARD_LIMIT,
                    c.small_file_hard_limit,
                    1,
                )?,
                roll_up_fan_in: match count(props, ROLL_UP_FAN_IN, c.roll_up_fan_in, 0)? {
                    1 => return Err(bad(ROLL_UP_FAN_IN, "1", "expected 0 (off) or at least 2")),
                    n => n,
                },
            },
            expire_enabled: bool_prop(props, EXPIRE_ENABLED, d.expire_enabled)?,
            max_snapshot_age_ms: u64_prop(
                props,
                properties::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS,
                d.max_snapshot_age_ms,
            )?,
            min_snapshots_to_keep: u64_prop(
                props,
                properties::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP,
                d.min_snapshots_to_keep,
            )?,
            gc_enabled: bool_prop(props, properties::GC_ENABLED, d.gc_enabled)?,
            orphans_interval_ms: duration_prop(
                props,
                ORPHANS_INTERVAL,
                d.orphans_interval_ms,
                DAY_MS,
            )?,
            orphans_older_than_ms: duration_prop(
                props,
                ORPHANS_OLDER_THAN,
                d.orphans_older_than_ms,
                3 * DAY_MS,
            )?,
            min_manifests: count(props, MIN_MANIFESTS, d.min_manifests, 2)?,
            small_manifest_bytes: size(props, SMALL_MANIFEST_BYTES, d.small_manifest_bytes)?,
        })
    }

    /// Every bad `floe.maintain.*` value of `props`, one error each (sorted by key): what
    /// `floe maintain` reports for a table it skips.
    pub fn problems(props: &HashMap<String, String>) -> Vec<Error> {
        let mut keys: Vec<&str> = PROPERTIES.iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        keys.into_iter()
            .filter_map(|key| {
                let v = props.get(key)?;
                let one: HashMap<String, String> = [(key.to_string(), v.clone())].into();
                Policy::from_properties(&one).err()
            })
            .collect()
    }
}

fn bad(key: &str, value: &str, expected: impl Into<String>) -> Error {
    Error::InvalidTableProperty {
        table: None,
        key: key.to_string(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// The check `table create` and `table set-property` make ([`properties::rule`]): a stored
/// value is read by the same rule it is set by.
fn check_rule(key: &str, value: &str) -> Result<()> {
    match properties::rule(key) {
        Some(r) => r
            .check(value)
            .map(|_| ())
            .map_err(|expected| bad(key, value, expected)),
        None => Ok(()),
    }
}

/// A count (plain, or with a size suffix as `floe compact` options take it) of at least `min`.
fn count(props: &HashMap<String, String>, key: &str, default: u64, min: u64) -> Result<u64> {
    let Some(v) = props.get(key) else {
        return Ok(default);
    };
    check_rule(key, v)?;
    match parse_size(key, v) {
        Ok(n) if n >= min => Ok(n),
        _ if min == 0 => Err(bad(
            key,
            v,
            "expected a non-negative integer (0 turns it off)",
        )),
        _ => Err(bad(
            key,
            v,
            format!("expected an integer of at least {min}"),
        )),
    }
}

/// A size such as `512MiB` or `1048576`.
fn size(props: &HashMap<String, String>, key: &str, default: u64) -> Result<u64> {
    match props.get(key) {
        None => Ok(default),
        Some(v) => {
            check_rule(key, v)?;
            parse_size(key, v).map_err(|_| bad(key, v, "expected a size such as 512MiB or 1048576"))
        }
    }
}

/// A size for messages, in the largest binary unit it reaches (`512MiB`, `1.5GiB`, `300B`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if n >= unit {
            let x = n as f64 / unit as f64;
            return if n.is_multiple_of(unit) {
                format!("{}{name}", n / unit)
            } else {
                format!("{x:.1}{name}")
            };
        }
    }
    format!("{n}B")
}

#[cfg(test)]
mod tests;
