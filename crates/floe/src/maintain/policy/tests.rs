use super::*;
use crate::base::properties::human_ms;

// Short names of the keys these tests set.
const ENABLED: &str = p::MAINTAIN_ENABLED.key;
const COMMIT_COUNT: &str = p::MAINTAIN_COMMIT_COUNT.key;
const DATA_FILE_COUNT: &str = p::MAINTAIN_DATA_FILE_COUNT.key;
const DATA_FILE_SIZE: &str = p::MAINTAIN_DATA_FILE_SIZE.key;
const INTERVAL: &str = p::MAINTAIN_INTERVAL.key;
const RATE_LIMIT: &str = p::MAINTAIN_RATE_LIMIT.key;
const SMALL_FILE_HARD_LIMIT: &str = p::MAINTAIN_SMALL_FILE_HARD_LIMIT.key;
const ROLL_UP_FAN_IN: &str = p::MAINTAIN_ROLL_UP_FAN_IN.key;
const ORPHANS_INTERVAL: &str = p::MAINTAIN_ORPHANS_INTERVAL.key;
const ORPHANS_OLDER_THAN: &str = p::MAINTAIN_ORPHANS_OLDER_THAN.key;
const MIN_MANIFESTS: &str = p::MAINTAIN_MIN_MANIFESTS.key;
const SMALL_MANIFEST_BYTES: &str = p::MAINTAIN_SMALL_MANIFEST_BYTES.key;

/// Every `floe.maintain.*` property with its default as the README writes it.
const PROPERTIES: &[(&str, &str)] = &[
    (ENABLED, "true"),
    (COMMIT_COUNT, "10"),
    (DATA_FILE_COUNT, "50"),
    (DATA_FILE_SIZE, "512MiB"),
    (p::MAINTAIN_POS_DELETE_FILE_COUNT.key, "10"),
    (p::MAINTAIN_EQ_DELETE_FILE_COUNT.key, "5"),
    (INTERVAL, "1h"),
    (RATE_LIMIT, "5m"),
    (p::MAINTAIN_PARTITION_IDLE_TIME.key, "15m"),
    (SMALL_FILE_HARD_LIMIT, "100"),
    (ROLL_UP_FAN_IN, "0"),
    (p::MAINTAIN_EXPIRE_ENABLED.key, "true"),
    (p::MAINTAIN_EXPIRE_MAX_SNAPSHOTS.key, "0"),
    (p::MAINTAIN_STREAMING.key, "auto"),
    (ORPHANS_INTERVAL, "1d"),
    (ORPHANS_OLDER_THAN, "3d"),
    (MIN_MANIFESTS, "20"),
    (SMALL_MANIFEST_BYTES, "1MiB"),
];

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn an_unconfigured_table_gets_the_defaults() {
    let p = Policy::from_properties(&HashMap::new()).unwrap();
    assert_eq!(p, Policy::default());
    assert!(p.enabled && p.expire_enabled && p.gc_enabled);
    assert_eq!(p.compact.commit_count, 10);
    assert_eq!(p.compact.data_file_count, 50);
    assert_eq!(p.compact.data_file_size, 512 << 20);
    assert_eq!(p.compact.pos_delete_file_count, 10);
    assert_eq!(p.compact.eq_delete_file_count, 5);
    assert_eq!(p.compact.interval_ms, 3_600_000);
    assert_eq!(p.compact.rate_limit_ms, 300_000);
    assert_eq!(p.compact.partition_idle_time_ms, 900_000);
    assert_eq!(p.compact.small_file_hard_limit, 100);
    assert_eq!(p.orphans_interval_ms, 86_400_000);
    assert_eq!(p.orphans_older_than_ms, 3 * 86_400_000);
    assert_eq!(p.min_manifests, 20);
    assert_eq!(p.small_manifest_bytes, 1 << 20);
    assert_eq!(p.max_snapshot_age_ms, 5 * 86_400_000);
    assert_eq!(p.min_snapshots_to_keep, 1);
}

#[test]
fn the_documented_defaults_are_the_defaults() {
    let all = props(PROPERTIES);
    assert_eq!(Policy::from_properties(&all).unwrap(), Policy::default());
    assert!(PROPERTIES
        .iter()
        .all(|(k, _)| k.starts_with(MAINTAIN_PREFIX)));
}

#[test]
fn set_values_are_read() {
    let p = Policy::from_properties(&props(&[
        (ENABLED, "FALSE"),
        (COMMIT_COUNT, "3"),
        (DATA_FILE_SIZE, "64MiB"),
        (INTERVAL, "30m"),
        (RATE_LIMIT, "0s"),
        (ORPHANS_INTERVAL, "2d"),
        (ORPHANS_OLDER_THAN, "1w"),
        (SMALL_MANIFEST_BYTES, "512k"),
        ("history.expire.max-snapshot-age-ms", "3600000"),
        ("history.expire.min-snapshots-to-keep", "5"),
        ("gc.enabled", "false"),
    ]))
    .unwrap();
    assert!(!p.enabled && !p.gc_enabled);
    assert_eq!(p.compact.commit_count, 3);
    assert_eq!(p.compact.data_file_size, 64 << 20);
    assert_eq!(p.compact.interval_ms, 1_800_000);
    assert_eq!(p.compact.rate_limit_ms, 0);
    assert_eq!(p.orphans_interval_ms, 2 * 86_400_000);
    assert_eq!(p.orphans_older_than_ms, 7 * 86_400_000);
    assert_eq!(p.small_manifest_bytes, 512 << 10);
    assert_eq!(p.max_snapshot_age_ms, 3_600_000);
    assert_eq!(p.min_snapshots_to_keep, 5);
}

/// The error of one bad value, as text.
fn error_of(key: &str, value: &str) -> String {
    Policy::from_properties(&props(&[(key, value)]))
        .expect_err(&format!("{key}={value} must be refused"))
        .to_string()
}

#[test]
fn a_bad_value_names_the_property_and_the_value() {
    for (key, value) in [
        (ENABLED, "yes"),
        (COMMIT_COUNT, "-1"),
        (DATA_FILE_COUNT, "many"),
        (DATA_FILE_COUNT, "1.5"),
        (DATA_FILE_SIZE, "12 parsecs"),
        (INTERVAL, "60"),
        (RATE_LIMIT, "5 fortnights"),
        (SMALL_FILE_HARD_LIMIT, "0"),
        (ORPHANS_INTERVAL, "12h"),
        (ORPHANS_OLDER_THAN, "2d"),
        (MIN_MANIFESTS, "1"),
        ("history.expire.min-snapshots-to-keep", "0"),
        ("gc.enabled", "maybe"),
    ] {
        let msg = error_of(key, value);
        assert!(
            msg.contains(key) && msg.contains(value),
            "{key}={value}: {msg}"
        );
    }
    assert!(error_of(ORPHANS_INTERVAL, "12h").contains("at least 1d"));
    assert!(error_of(ORPHANS_OLDER_THAN, "2d").contains("at least 3d"));
}

#[test]
fn problems_lists_every_bad_value() {
    let p = props(&[(COMMIT_COUNT, "x"), (INTERVAL, "y"), (ENABLED, "true")]);
    let found = Policy::problems(&p);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(Policy::problems(&HashMap::new()).is_empty());
}

#[test]
fn durations_and_sizes_print_short() {
    assert_eq!(human_ms(300_000), "5m");
    assert_eq!(human_ms(133_000), "2m13s");
    assert_eq!(human_ms(5_400_000), "1h30m");
    assert_eq!(human_ms(86_400_000), "1d");
    assert_eq!(human_ms(250), "250ms");
    assert_eq!(human_ms(0), "0ms");
    assert_eq!(human_bytes(512 << 20), "512MiB");
    assert_eq!(human_bytes(3 << 29), "1.5GiB");
    assert_eq!(human_bytes(300), "300B");
}

#[test]
fn every_maintain_property_is_validated_when_set_by_the_rule_it_is_read_with() {
    use crate::base::properties::validate;
    let mut known: Vec<&str> = p::family(MAINTAIN_PREFIX).map(|p| p.key).collect();
    let mut read: Vec<&str> = PROPERTIES.iter().map(|(k, _)| *k).collect();
    known.sort_unstable();
    read.sort_unstable();
    assert_eq!(known, read);
    for (key, default) in PROPERTIES {
        validate(key, default).unwrap();
        Policy::from_properties(&props(&[(key, default)])).unwrap();
        for bad in ["-1", "maybe", ""] {
            assert!(validate(key, bad).is_err(), "{key}={bad} accepted when set");
            assert!(
                Policy::from_properties(&props(&[(key, bad)])).is_err(),
                "{key}={bad} accepted when read"
            );
        }
    }
    for (key, v) in [
        (ORPHANS_OLDER_THAN, "1d"),
        (ORPHANS_INTERVAL, "1h"),
        (ROLL_UP_FAN_IN, "1"),
        (MIN_MANIFESTS, "1"),
        (SMALL_FILE_HARD_LIMIT, "0"),
        (COMMIT_COUNT, "2.5"),
        ("floe.maintain.compact.trigger.comit-count", "5"),
    ] {
        let e = validate(key, v).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
}
