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
use crate::base::properties::{
    self as p, bool_prop, duration_prop, parse_size, u64_prop, Property, MAINTAIN_PREFIX,
};

/// When compaction is due (see the `properties::MAINTAIN_*` constants). Counts, sizes and `interval_ms` of
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
    /// `floe.maintain.expire.max-snapshots` (0: no bound).
    pub max_snapshots: u64,
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
            enabled: p::MAINTAIN_ENABLED_DEFAULT,
            compact: CompactTriggers {
                commit_count: p::MAINTAIN_COMMIT_COUNT_DEFAULT,
                data_file_count: p::MAINTAIN_DATA_FILE_COUNT_DEFAULT,
                data_file_size: p::MAINTAIN_DATA_FILE_SIZE_DEFAULT,
                pos_delete_file_count: p::MAINTAIN_POS_DELETE_FILE_COUNT_DEFAULT,
                eq_delete_file_count: p::MAINTAIN_EQ_DELETE_FILE_COUNT_DEFAULT,
                interval_ms: p::MAINTAIN_INTERVAL_DEFAULT_MS,
                rate_limit_ms: p::MAINTAIN_RATE_LIMIT_DEFAULT_MS,
                partition_idle_time_ms: p::MAINTAIN_PARTITION_IDLE_TIME_DEFAULT_MS,
                small_file_hard_limit: p::MAINTAIN_SMALL_FILE_HARD_LIMIT_DEFAULT,
                roll_up_fan_in: p::MAINTAIN_ROLL_UP_FAN_IN_DEFAULT,
            },
            expire_enabled: p::MAINTAIN_EXPIRE_ENABLED_DEFAULT,
            max_snapshot_age_ms: p::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS_DEFAULT,
            min_snapshots_to_keep: p::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP_DEFAULT,
            max_snapshots: p::MAINTAIN_EXPIRE_MAX_SNAPSHOTS_DEFAULT,
            gc_enabled: p::GC_ENABLED_DEFAULT,
            orphans_interval_ms: p::MAINTAIN_ORPHANS_INTERVAL_DEFAULT_MS,
            orphans_older_than_ms: p::MAINTAIN_ORPHANS_OLDER_THAN_DEFAULT_MS,
            min_manifests: p::MAINTAIN_MIN_MANIFESTS_DEFAULT,
            small_manifest_bytes: p::MAINTAIN_SMALL_MANIFEST_BYTES_DEFAULT,
        }
    }
}

impl Policy {
    /// The policy a table's properties set, defaults for what is unset. Fails on the first
    /// bad value (in the order of `properties::ALL`); [`Policy::problems`] lists them all.
    pub fn from_properties(props: &HashMap<String, String>) -> Result<Policy> {
        let d = Policy::default();
        let c = &d.compact;
        // Read where it decides (`maintain::streaming::judge`); checked here with the rest.
        p::check_stored(None, props, &[p::MAINTAIN_STREAMING.key])?;
        Ok(Policy {
            enabled: bool_prop(props, p::MAINTAIN_ENABLED.key, d.enabled)?,
            compact: CompactTriggers {
                commit_count: count(props, p::MAINTAIN_COMMIT_COUNT, c.commit_count, 0)?,
                data_file_count: count(props, p::MAINTAIN_DATA_FILE_COUNT, c.data_file_count, 0)?,
                data_file_size: size(props, p::MAINTAIN_DATA_FILE_SIZE, c.data_file_size)?,
                pos_delete_file_count: count(
                    props,
                    p::MAINTAIN_POS_DELETE_FILE_COUNT,
                    c.pos_delete_file_count,
                    0,
                )?,
                eq_delete_file_count: count(
                    props,
                    p::MAINTAIN_EQ_DELETE_FILE_COUNT,
                    c.eq_delete_file_count,
                    0,
                )?,
                interval_ms: duration_prop(props, p::MAINTAIN_INTERVAL.key, c.interval_ms, 0)?,
                rate_limit_ms: duration_prop(
                    props,
                    p::MAINTAIN_RATE_LIMIT.key,
                    c.rate_limit_ms,
                    0,
                )?,
                partition_idle_time_ms: duration_prop(
                    props,
                    p::MAINTAIN_PARTITION_IDLE_TIME.key,
                    c.partition_idle_time_ms,
                    0,
                )?,
                small_file_hard_limit: count(
                    props,
                    p::MAINTAIN_SMALL_FILE_HARD_LIMIT,
                    c.small_file_hard_limit,
                    1,
                )?,
                roll_up_fan_in: match count(props, p::MAINTAIN_ROLL_UP_FAN_IN, c.roll_up_fan_in, 0)?
                {
                    1 => {
                        return Err(bad(
                            p::MAINTAIN_ROLL_UP_FAN_IN.key,
                            "1",
                            "expected 0 (off) or at least 2",
                        ))
                    }
                    n => n,
                },
            },
            expire_enabled: bool_prop(props, p::MAINTAIN_EXPIRE_ENABLED.key, d.expire_enabled)?,
            max_snapshot_age_ms: u64_prop(
                props,
                p::HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key,
                d.max_snapshot_age_ms,
            )?,
            min_snapshots_to_keep: u64_prop(
                props,
                p::HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key,
                d.min_snapshots_to_keep,
            )?,
            max_snapshots: count(props, p::MAINTAIN_EXPIRE_MAX_SNAPSHOTS, d.max_snapshots, 0)?,
            gc_enabled: bool_prop(props, p::GC_ENABLED.key, d.gc_enabled)?,
            orphans_interval_ms: duration_prop(
                props,
                p::MAINTAIN_ORPHANS_INTERVAL.key,
                d.orphans_interval_ms,
                p::MAINTAIN_ORPHANS_INTERVAL_MIN_MS,
            )?,
            orphans_older_than_ms: duration_prop(
                props,
                p::MAINTAIN_ORPHANS_OLDER_THAN.key,
                d.orphans_older_than_ms,
                p::MAINTAIN_ORPHANS_OLDER_THAN_MIN_MS,
            )?,
            min_manifests: count(props, p::MAINTAIN_MIN_MANIFESTS, d.min_manifests, 2)?,
            small_manifest_bytes: size(
                props,
                p::MAINTAIN_SMALL_MANIFEST_BYTES,
                d.small_manifest_bytes,
            )?,
        })
    }

    /// Every bad `floe.maintain.*` value of `props`, one error each (sorted by key): what
    /// `floe maintain` reports for a table it skips.
    pub fn problems(props: &HashMap<String, String>) -> Vec<Error> {
        let mut keys: Vec<&str> = p::family(MAINTAIN_PREFIX).map(|p| p.key).collect();
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

/// The check `table create` and `table set-property` make (the property's rule): a stored
/// value is read by the same rule it is set by.
fn check_rule(property: Property, value: &str) -> Result<()> {
    property
        .rule
        .check(value)
        .map(|_| ())
        .map_err(|expected| bad(property.key, value, expected))
}

/// A count (plain, or with a size suffix as `floe compact` options take it) of at least `min`.
fn count(
    props: &HashMap<String, String>,
    property: Property,
    default: u64,
    min: u64,
) -> Result<u64> {
    let key = property.key;
    let Some(v) = props.get(key) else {
        return Ok(default);
    };
    check_rule(property, v)?;
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
fn size(props: &HashMap<String, String>, property: Property, default: u64) -> Result<u64> {
    let key = property.key;
    match props.get(key) {
        None => Ok(default),
        Some(v) => {
            check_rule(property, v)?;
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
