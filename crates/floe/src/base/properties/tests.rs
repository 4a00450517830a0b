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

/// Every table property the README's configuration table lists, plus the ones iceberg-rust
/// parses as typed values.
const KNOWN: [&str; 26] = [
    WRITE_TARGET_FILE_SIZE_BYTES,
    WRITE_PARQUET_ROW_GROUP_SIZE_BYTES,
    WRITE_PARQUET_COMPRESSION_CODEC,
    WRITE_PARQUET_COMPRESSION_LEVEL,
    "floe.compact.min-input-files",
    COMMIT_RETRY_NUM_RETRIES,
    COMMIT_RETRY_MIN_WAIT_MS,
    COMMIT_RETRY_MAX_WAIT_MS,
    COMMIT_RETRY_TOTAL_TIMEOUT_MS,
    COMMIT_MANIFEST_MERGE_ENABLED,
    COMMIT_MANIFEST_MIN_COUNT_TO_MERGE,
    COMMIT_MANIFEST_TARGET_SIZE_BYTES,
    METADATA_DELETE_AFTER_COMMIT,
    METADATA_PREVIOUS_VERSIONS_MAX,
    METADATA_COMPRESSION_CODEC,
    HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS,
    HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP,
    HISTORY_EXPIRE_MAX_REF_AGE_MS,
    INGEST_WRITE_BUFFER_SIZE,
    WRITE_DISTRIBUTION_MODE,
    GC_ENABLED,
    "write.datafusion.fanout.enabled",
    "write.parquet.content-defined-chunking.enabled",
    "write.parquet.content-defined-chunking.min-chunk-size",
    "write.parquet.content-defined-chunking.norm-level",
    "encryption.data-key-length",
];

#[test]
fn every_property_floe_reads_refuses_garbage_naming_key_value_and_expectation() {
    for key in KNOWN {
        assert!(rule(key).is_some(), "{key} has no rule");
        for bad in ["garbage", "-1x", ""] {
            let e = validate(key, bad).unwrap_err().to_string();
            assert!(
                e.contains(key) && e.contains(&format!("'{bad}'")) && e.contains("expected"),
                "{key}={bad}: {e}"
            );
        }
    }
}

#[test]
fn numeric_settings_are_refused_outside_the_range_engines_read() {
    for (key, bad) in [
        (COMMIT_RETRY_NUM_RETRIES, "-1"),
        (COMMIT_RETRY_NUM_RETRIES, "2147483648"),
        (COMMIT_RETRY_MIN_WAIT_MS, "-5"),
        (COMMIT_RETRY_TOTAL_TIMEOUT_MS, "9223372036854775808"),
        (WRITE_TARGET_FILE_SIZE_BYTES, "0"),
        (WRITE_PARQUET_ROW_GROUP_SIZE_BYTES, "0"),
        (WRITE_PARQUET_COMPRESSION_LEVEL, "23"),
        (WRITE_PARQUET_COMPRESSION_LEVEL, "0"),
        (WRITE_PARQUET_COMPRESSION_CODEC, "brotli"),
        (COMMIT_MANIFEST_TARGET_SIZE_BYTES, "0"),
        (HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP, "0"),
        (HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS, "5d"),
        (GC_ENABLED, "yes"),
        (WRITE_DISTRIBUTION_MODE, "random"),
        (METADATA_COMPRESSION_CODEC, "zstd"),
        (INGEST_WRITE_BUFFER_SIZE, "256MiB"),
        ("floe.compact.min-input-files", "0"),
        ("floe.compact.target-file-size-bytes", "0"),
        ("floe.compact.rewrite-job-order", "biggest-first"),
        ("floe.compact.partial-progress.enabled", "1"),
    ] {
        let e = validate(key, bad).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(bad), "{key}={bad}: {e}");
    }
}

#[test]
fn valid_values_are_stored_canonical_and_unknown_keys_pass() {
    assert_eq!(validate(COMMIT_RETRY_NUM_RETRIES, " +8 ").unwrap(), "8");
    assert_eq!(validate(COMMIT_RETRY_NUM_RETRIES, "0").unwrap(), "0");
    assert_eq!(validate(GC_ENABLED, "FALSE").unwrap(), "false");
    assert_eq!(
        validate(WRITE_PARQUET_COMPRESSION_CODEC, "Snappy").unwrap(),
        "Snappy"
    );
    assert_eq!(
        validate("floe.compact.target-file-size-bytes", "256MiB").unwrap(),
        "256MiB"
    );
    assert_eq!(
        validate("floe.compact.rewrite-job-order", "bytes-desc").unwrap(),
        "bytes-desc"
    );
    assert_eq!(validate("owner", "-1 whatever").unwrap(), "-1 whatever");
    assert_eq!(validate("floe.writer-id", "x").unwrap(), "x");
}

#[test]
fn unknown_floe_compact_and_ingest_keys_are_refused_with_the_known_list() {
    let e = validate("floe.compact.min-input-file", "5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("floe.compact.min-input-files"), "{e}");
    let e = validate("floe.ingest.buffer", "5").unwrap_err().to_string();
    assert!(e.contains(INGEST_WRITE_BUFFER_SIZE), "{e}");
    // Stored by another tool, they are ignored, not errors.
    let props = HashMap::from([("floe.compact.typo".to_string(), "x".to_string())]);
    assert!(invalid_stored(None, &props).is_empty());
}

#[test]
fn a_key_both_set_and_unset_is_refused() {
    let set = HashMap::from([(GC_ENABLED.to_string(), "true".to_string())]);
    let e = validate_update(&set, &[GC_ENABLED.to_string()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("both set and unset"), "{e}");
}

#[test]
fn a_bad_stored_value_names_the_table_and_the_repair() {
    let p = HashMap::from([(COMMIT_RETRY_NUM_RETRIES.to_string(), "-1".to_string())]);
    let e = u64_prop(&p, COMMIT_RETRY_NUM_RETRIES, 4)
        .unwrap_err()
        .for_table("n.p")
        .to_string();
    for part in [
        "commit.retry.num-retries",
        "'-1'",
        "n.p",
        "floe table set-property n.p --unset commit.retry.num-retries",
    ] {
        assert!(e.contains(part), "{part}: {e}");
    }
    let p = HashMap::from([(GC_ENABLED.to_string(), "TRUE".to_string())]);
    assert!(
        bool_prop(&p, GC_ENABLED, false).unwrap(),
        "any case, as Java reads it"
    );
    let p = HashMap::from([(GC_ENABLED.to_string(), "maybe".to_string())]);
    let e = bool_prop(&p, GC_ENABLED, true).unwrap_err().to_string();
    assert!(e.contains("--unset gc.enabled"), "{e}");
    let p = HashMap::from([
        (
            HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.to_string(),
            "0".to_string(),
        ),
        ("owner".to_string(), "x".to_string()),
    ]);
    assert_eq!(invalid_stored(Some("n.p"), &p).len(), 1);
    assert!(check_stored(Some("n.p"), &p, &[GC_ENABLED]).is_ok());
    assert!(check_stored(Some("n.p"), &p, &[HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP]).is_err());
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
