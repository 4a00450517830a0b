//! Table properties floe honours, with Iceberg's names and defaults, and typed getters that
//! reject bad values with an error naming the property.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Target size of data files written by append, ingest and compaction.
pub const WRITE_TARGET_FILE_SIZE_BYTES: &str = "write.target-file-size-bytes";
/// Iceberg's default target file size: 512 MiB.
pub const WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT: u64 = 512 * 1024 * 1024;
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

/// Reads an unsigned integer property, or its default when unset.
pub fn u64_prop(props: &HashMap<String, String>, key: &str, default: u64) -> Result<u64> {
    match props.get(key) {
        None => Ok(default),
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            Error::invalid_option(
                format!("table property {key}"),
                v,
                "expected a non-negative integer",
            )
        }),
    }
}

/// Reads a boolean property, or its default when unset.
pub fn bool_prop(props: &HashMap<String, String>, key: &str, default: bool) -> Result<bool> {
    match props.get(key) {
        None => Ok(default),
        Some(v) => parse_bool(&format!("table property {key}"), v),
    }
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
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("x", "512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("x", "4096").unwrap(), 4096);
        assert_eq!(parse_size("x", "1.5k").unwrap(), 1536);
        assert!(parse_size("x", "12 parsecs").is_err());
        assert!(parse_size("x", "MiB").is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("x", "5d").unwrap().as_secs(), 5 * 86_400);
        assert_eq!(parse_duration("x", "0s").unwrap().as_millis(), 0);
        assert_eq!(parse_duration("x", "1.5h").unwrap().as_secs(), 5400);
        assert_eq!(parse_duration("x", "250ms").unwrap().as_millis(), 250);
        assert!(parse_duration("x", "5 fortnights").is_err());
        assert!(parse_duration("x", "d").is_err());
    }

    #[test]
    fn a_duration_without_a_unit_is_refused_naming_the_option_and_the_units() {
        for bare in ["5", "0", "250", " 12 ", "1.5"] {
            let e = parse_duration("--older-than", bare)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--older-than") && e.contains("ms, s, m, h, d or w"),
                "{bare}: {e}"
            );
        }
    }

    #[test]
    fn duration_properties_stay_bare_milliseconds() {
        let mut p = HashMap::new();
        p.insert(
            HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.to_string(),
            "432000000".to_string(),
        );
        assert_eq!(
            u64_prop(&p, HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS, 0).unwrap(),
            432_000_000
        );
    }

    #[test]
    fn bad_property_values_name_the_property() {
        let mut p = HashMap::new();
        p.insert(COMMIT_RETRY_NUM_RETRIES.to_string(), "many".to_string());
        let e = u64_prop(&p, COMMIT_RETRY_NUM_RETRIES, 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("commit.retry.num-retries"), "{e}");
        assert_eq!(
            u64_prop(&HashMap::new(), COMMIT_RETRY_NUM_RETRIES, 4).unwrap(),
            4
        );
    }
}
