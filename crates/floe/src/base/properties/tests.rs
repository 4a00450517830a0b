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
    WRITE_TARGET_FILE_SIZE_BYTES.key,
    WRITE_PARQUET_ROW_GROUP_SIZE_BYTES.key,
    WRITE_PARQUET_COMPRESSION_CODEC.key,
    WRITE_PARQUET_COMPRESSION_LEVEL.key,
    "floe.compact.min-input-files",
    COMMIT_RETRY_NUM_RETRIES.key,
    COMMIT_RETRY_MIN_WAIT_MS.key,
    COMMIT_RETRY_MAX_WAIT_MS.key,
    COMMIT_RETRY_TOTAL_TIMEOUT_MS.key,
    COMMIT_MANIFEST_MERGE_ENABLED.key,
    COMMIT_MANIFEST_MIN_COUNT_TO_MERGE.key,
    COMMIT_MANIFEST_TARGET_SIZE_BYTES.key,
    METADATA_DELETE_AFTER_COMMIT.key,
    METADATA_PREVIOUS_VERSIONS_MAX.key,
    METADATA_COMPRESSION_CODEC.key,
    HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key,
    HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key,
    HISTORY_EXPIRE_MAX_REF_AGE_MS.key,
    INGEST_WRITE_BUFFER_SIZE.key,
    WRITE_DISTRIBUTION_MODE.key,
    GC_ENABLED.key,
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
        (COMMIT_RETRY_NUM_RETRIES.key, "-1"),
        (COMMIT_RETRY_NUM_RETRIES.key, "2147483648"),
        (COMMIT_RETRY_MIN_WAIT_MS.key, "-5"),
        (COMMIT_RETRY_TOTAL_TIMEOUT_MS.key, "9223372036854775808"),
        (WRITE_TARGET_FILE_SIZE_BYTES.key, "0"),
        (WRITE_PARQUET_ROW_GROUP_SIZE_BYTES.key, "0"),
        (WRITE_PARQUET_COMPRESSION_LEVEL.key, "23"),
        (WRITE_PARQUET_COMPRESSION_LEVEL.key, "0"),
        (WRITE_PARQUET_COMPRESSION_CODEC.key, "brotli"),
        (COMMIT_MANIFEST_TARGET_SIZE_BYTES.key, "0"),
        (HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key, "0"),
        (HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key, "5d"),
        (GC_ENABLED.key, "yes"),
        (WRITE_DISTRIBUTION_MODE.key, "random"),
        (METADATA_COMPRESSION_CODEC.key, "zstd"),
        (INGEST_WRITE_BUFFER_SIZE.key, "256MiB"),
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
    assert_eq!(validate(COMMIT_RETRY_NUM_RETRIES.key, " +8 ").unwrap(), "8");
    assert_eq!(validate(COMMIT_RETRY_NUM_RETRIES.key, "0").unwrap(), "0");
    assert_eq!(validate(GC_ENABLED.key, "FALSE").unwrap(), "false");
    assert_eq!(
        validate(WRITE_PARQUET_COMPRESSION_CODEC.key, "Snappy").unwrap(),
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
    assert!(e.contains(INGEST_WRITE_BUFFER_SIZE.key), "{e}");
    // Stored by another tool, they are ignored, not errors.
    let props = HashMap::from([("floe.compact.typo".to_string(), "x".to_string())]);
    assert!(invalid_stored(None, &props).is_empty());
}

#[test]
fn a_key_both_set_and_unset_is_refused() {
    let set = HashMap::from([(GC_ENABLED.key.to_string(), "true".to_string())]);
    let e = validate_update(&set, &[GC_ENABLED.key.to_string()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("both set and unset"), "{e}");
}

#[test]
fn a_bad_stored_value_names_the_table_and_the_repair() {
    let p = HashMap::from([(COMMIT_RETRY_NUM_RETRIES.key.to_string(), "-1".to_string())]);
    let e = u64_prop(&p, COMMIT_RETRY_NUM_RETRIES.key, 4)
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
    let p = HashMap::from([(GC_ENABLED.key.to_string(), "TRUE".to_string())]);
    assert!(
        bool_prop(&p, GC_ENABLED.key, false).unwrap(),
        "any case, as Java reads it"
    );
    let p = HashMap::from([(GC_ENABLED.key.to_string(), "maybe".to_string())]);
    let e = bool_prop(&p, GC_ENABLED.key, true).unwrap_err().to_string();
    assert!(e.contains("--unset gc.enabled"), "{e}");
    let p = HashMap::from([
        (
            HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key.to_string(),
            "0".to_string(),
        ),
        ("owner".to_string(), "x".to_string()),
    ]);
    assert_eq!(invalid_stored(Some("n.p"), &p).len(), 1);
    assert!(check_stored(Some("n.p"), &p, &[GC_ENABLED.key]).is_ok());
    assert!(check_stored(Some("n.p"), &p, &[HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key]).is_err());
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
        HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key.to_string(),
        "432000000".to_string(),
    );
    assert_eq!(
        u64_prop(&p, HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key, 0).unwrap(),
        432_000_000
    );
}

#[test]
fn bad_property_values_name_the_property() {
    let mut p = HashMap::new();
    p.insert(COMMIT_RETRY_NUM_RETRIES.key.to_string(), "many".to_string());
    let e = u64_prop(&p, COMMIT_RETRY_NUM_RETRIES.key, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("commit.retry.num-retries"), "{e}");
    assert_eq!(
        u64_prop(&HashMap::new(), COMMIT_RETRY_NUM_RETRIES.key, 4).unwrap(),
        4
    );
}

#[test]
fn every_key_is_declared_once_and_under_its_familys_prefix() {
    let mut keys: Vec<&str> = ALL.iter().map(|p| p.key).collect();
    keys.sort_unstable();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "a key is listed twice in ALL");
    for p in ALL {
        assert_eq!(rule(p.key), Some(p.rule), "{}", p.key);
        assert!(!matches!(p.rule, Rule::Unknown(_)), "{}", p.key);
        if p.key.starts_with("floe.") {
            assert!(
                [
                    COMPACT_PREFIX,
                    INGEST_PREFIX,
                    MAINTAIN_PREFIX,
                    EXPIRE_PREFIX
                ]
                .iter()
                .any(|prefix| p.key.starts_with(prefix)),
                "{} is in no floe family",
                p.key
            );
        }
    }
    for prefix in [
        COMPACT_PREFIX,
        INGEST_PREFIX,
        MAINTAIN_PREFIX,
        EXPIRE_PREFIX,
    ] {
        assert!(family(prefix).count() > 0, "{prefix}");
        assert_eq!(
            rule(&format!("{prefix}no-such-key")),
            Some(Rule::Unknown(prefix))
        );
    }
}
