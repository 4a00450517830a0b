//! Streaming defaults under `floe maintain`: a table fed by a stream (Flink, Kafka Connect,
//! Spark micro-batches, `floe ingest` run without `--maintain`) gets the retention and metadata
//! settings `floe ingest --maintain` gives its own table, so that its `metadata.json` stops
//! growing with every commit.
//!
//! At a commit a second, Iceberg's defaults (`history.expire.max-snapshot-age-ms` of 5 days,
//! `write.metadata.previous-versions-max` 100, nothing deleted) keep 432,000 snapshots in
//! every `metadata.json` and 101 copies of it. The streaming defaults are Paimon's retention
//! ([`POLICY_DEFAULTS`]: 1 h, at least 10 and at most 100 snapshots; the writers' recovery
//! points, tags and branches always kept; with the roll-up of written partitions' small
//! files) and [`METADATA_DEFAULTS`] (each commit deletes the metadata files the log lets go,
//! and the log keeps 5).
//!
//! Which tables: `floe.maintain.streaming` says it.
//! - `true`: the streaming defaults, under the table's own keys (a key the table sets wins);
//! - `false`: never (Iceberg's defaults, as for any table);
//! - `auto` or unset: the table is judged by its commits, at every pass. Once they show a
//!   stream's cadence ([`streaming_cadence`]: at least [`MIN_COMMITS`] commits in the last
//!   hour, some in every 10 minutes of it), the pass records `floe.maintain.streaming=true` on
//!   the table (one property commit, said in the log, with the metadata defaults where the table
//!   sets neither key). The judgement is recorded because the bounded history no longer shows
//!   an hour of commits; a bulk load of many commits in a few minutes is not a stream.
//!
//! The trade, as for `floe ingest --maintain`: time travel reaches 100 commits (or 1 h) back,
//! and a rollback by metadata file 5 commits. Set `floe.maintain.streaming=false`, or the keys
//! themselves, to keep other settings.

use std::collections::HashMap;

use iceberg::spec::TableMetadata;

use crate::base::error::Result;
use crate::base::properties::{
    check_stored, HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS, HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP,
    MAINTAIN_EXPIRE_MAX_SNAPSHOTS, MAINTAIN_ROLL_UP_FAN_IN, MAINTAIN_STREAMING,
    METADATA_DELETE_AFTER_COMMIT, METADATA_PREVIOUS_VERSIONS_MAX,
};

/// The roll-up fan-in `floe ingest --maintain` and a streaming table use unless the table
/// sets `floe.maintain.compact.roll-up-fan-in`.
pub const ROLL_UP_FAN_IN_DEFAULT: &str = "4";
/// The maintenance policy of an ingest that maintains its table, and of a streaming table
/// under `floe maintain`, where the table sets nothing: the roll-up on, and the snapshot
/// retention of a stream (Paimon's `snapshot.time-retained` 1 h and
/// `snapshot.num-retained.min` 10) rather than Iceberg's five days, which at a commit every
/// few seconds is tens of thousands of snapshots in every `metadata.json`, and at most [`MAX_SNAPSHOTS_DEFAULT`] snapshots (Paimon's
/// `snapshot.num-retained.max`), so that file stops growing. The writer's newest snapshot
/// (its recovery point) is always kept.
pub const POLICY_DEFAULTS: &[(&str, &str)] = &[
    (MAINTAIN_ROLL_UP_FAN_IN.key, ROLL_UP_FAN_IN_DEFAULT),
    (HISTORY_EXPIRE_MAX_SNAPSHOT_AGE_MS.key, "3600000"),
    (HISTORY_EXPIRE_MIN_SNAPSHOTS_TO_KEEP.key, "10"),
    (MAINTAIN_EXPIRE_MAX_SNAPSHOTS.key, MAX_SNAPSHOTS_DEFAULT),
];

/// At most this many snapshots (`floe.maintain.expire.max-snapshots`) for a table an ingest
/// maintains and a streaming table, where the table sets nothing: at a commit per second,
/// 100 s of time travel, and a metadata.json that stops growing (the writer's recovery point,
/// tags and branches stay).
pub const MAX_SNAPSHOTS_DEFAULT: &str = "100";

/// The metadata settings `floe ingest --maintain` sets on its table (and `floe maintain` on
/// a streaming table) when the table sets neither: each commit deletes the metadata.json
/// files the log lets go, and the log keeps 5. A commit a second otherwise keeps 101
/// metadata.json files of the whole history each (Iceberg's `previous-versions-max` 100,
/// nothing deleted): most of the table's bytes. A table that sets either key keeps both as
/// they are.
pub const METADATA_DEFAULTS: &[(&str, &str)] = &[
    (METADATA_DELETE_AFTER_COMMIT.key, "true"),
    (METADATA_PREVIOUS_VERSIONS_MAX.key, "5"),
];

/// Commits in the last hour that make a stream (one a minute at least).
pub const MIN_COMMITS: usize = 60;
/// The hour is cut into this many slots, each of which must hold a commit.
const SLOTS: i64 = 6;
const HOUR_MS: i64 = 3_600_000;

/// `floe.maintain.streaming`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Auto,
    On,
    Off,
}

impl Mode {
    /// The table's setting (`auto` when unset); a bad value names the key.
    pub fn of(props: &HashMap<String, String>) -> Result<Self> {
        let key = MAINTAIN_STREAMING.key;
        check_stored(None, props, &[key])?;
        Ok(
            match props
                .get(key)
                .map(|v| v.trim().to_ascii_lowercase())
                .as_deref()
            {
                Some("true") => Mode::On,
                Some("false") => Mode::Off,
                _ => Mode::Auto,
            },
        )
    }
}

/// What the streaming defaults mean for one table at one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Streaming {
    /// The table gets the streaming defaults.
    pub on: bool,
    /// Properties the pass sets on the table (never in a dry run): the recorded judgement and
    /// the metadata defaults where the table sets neither key.
    pub to_set: Vec<(String, String)>,
    /// Why it counts as a stream, for the log.
    pub why: String,
}

impl Streaming {
    /// The log line of `table` once [`Streaming::to_set`] is recorded.
    pub fn recorded(&self, table: &str) -> String {
        let set: Vec<String> = self
            .to_set
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "{table}: a stream ({}): streaming retention where the table sets no key of its own \
             (1 h, 10 to 100 snapshots; writers' recovery points, tags and branches kept); set {} \
             (floe.maintain.streaming=false keeps Iceberg's defaults)",
            self.why,
            set.join(", ")
        )
    }
}

/// Judges `metadata` at `now_ms` (see the module) with `props` its properties, under the
/// service's `defaults`. Defaults that already carry the streaming retention (the maintenance
/// `floe ingest --maintain` runs, which also set the metadata keys at its start) leave nothing
/// to judge or record.
pub fn judge(
    metadata: &TableMetadata,
    props: &HashMap<String, String>,
    defaults: &HashMap<String, String>,
    now_ms: i64,
) -> Result<Streaming> {
    let mode = Mode::of(props)?;
    if POLICY_DEFAULTS
        .iter()
        .all(|(k, _)| defaults.contains_key(*k))
    {
        return Ok(Streaming::default());
    }
    let stamps: Vec<i64> = metadata.snapshots().map(|s| s.timestamp_ms()).collect();
    Ok(decide(mode, &stamps, props, now_ms))
}

/// [`judge`] on the table's snapshot timestamps.
fn decide(mode: Mode, stamps: &[i64], props: &HashMap<String, String>, now_ms: i64) -> Streaming {
    let (on, recorded, why) = match mode {
        Mode::Off => (false, true, String::new()),
        Mode::On => (true, true, format!("{}=true", MAINTAIN_STREAMING.key)),
        Mode::Auto => match streaming_cadence(stamps, now_ms) {
            Some(n) => (true, false, format!("{n} commits in the last hour")),
            None => (false, true, String::new()),
        },
    };
    let mut to_set = Vec::new();
    if on {
        if !recorded {
            to_set.push((MAINTAIN_STREAMING.key.to_string(), "true".to_string()));
        }
        let own_metadata_settings = [
            METADATA_DELETE_AFTER_COMMIT.key,
            METADATA_PREVIOUS_VERSIONS_MAX.key,
        ]
        .iter()
        .any(|k| props.contains_key(*k));
        if !own_metadata_settings {
            to_set.extend(
                METADATA_DEFAULTS
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string())),
            );
        }
    }
    Streaming { on, to_set, why }
}

/// `defaults` with the streaming retention added beneath it: a key `defaults` holds (the
/// service's own defaults) stays, and the table's properties go on top of the result.
pub fn with_streaming_defaults(defaults: &HashMap<String, String>) -> HashMap<String, String> {
    let mut out = defaults.clone();
    for (k, v) in POLICY_DEFAULTS {
        out.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    out
}

/// The number of commits in the hour before `now_ms` when they make a stream: at least
/// [`MIN_COMMITS`], with one in each of the hour's [`SLOTS`] slots of 10 minutes. `None`
/// otherwise (a burst of commits, a stream that stopped, too few).
pub fn streaming_cadence(timestamps_ms: &[i64], now_ms: i64) -> Option<usize> {
    let from = now_ms - HOUR_MS;
    let slot_ms = HOUR_MS / SLOTS;
    let mut slots = [false; SLOTS as usize];
    let mut n = 0;
    for &t in timestamps_ms {
        if t <= from || t > now_ms {
            continue;
        }
        n += 1;
        let k = ((t - from - 1) / slot_ms).clamp(0, SLOTS - 1) as usize;
        slots[k] = true;
    }
    (n >= MIN_COMMITS && slots.iter().all(|s| *s)).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn every(step_ms: i64, from_ago_ms: i64, to_ago_ms: i64) -> Vec<i64> {
        (0..)
            .map(|k| NOW - from_ago_ms + k * step_ms)
            .take_while(|t| *t <= NOW - to_ago_ms)
            .collect()
    }

    #[test]
    fn a_commit_a_second_for_an_hour_is_a_stream() {
        let t = every(1_000, HOUR_MS - 1, 0);
        assert_eq!(streaming_cadence(&t, NOW), Some(3_600));
    }

    #[test]
    fn a_commit_a_minute_is_a_stream_and_fewer_is_not() {
        assert_eq!(
            streaming_cadence(&every(60_000, HOUR_MS - 1, 0), NOW),
            Some(60)
        );
        assert_eq!(streaming_cadence(&every(62_000, HOUR_MS - 1, 0), NOW), None);
    }

    #[test]
    fn a_burst_of_commits_is_not_a_stream() {
        // 500 commits within 5 minutes: a bulk load.
        assert_eq!(streaming_cadence(&every(600, 300_000, 0), NOW), None);
    }

    #[test]
    fn a_stream_that_stopped_is_not_judged_one_and_future_stamps_are_ignored() {
        // Stopped 20 minutes ago.
        assert_eq!(
            streaming_cadence(&every(1_000, HOUR_MS - 1, 1_200_000), NOW),
            None
        );
        // A writer's clock ahead of ours counts nothing.
        let mut t = every(1_000, HOUR_MS - 1, 0);
        t.extend((1..100).map(|k| NOW + k * 1_000));
        assert_eq!(streaming_cadence(&t, NOW), Some(3_600));
        assert_eq!(streaming_cadence(&[], NOW), None);
    }

    #[test]
    fn the_mode_is_read_in_any_case_and_a_bad_value_names_the_key() {
        let props = |v: &str| HashMap::from([(MAINTAIN_STREAMING.key.to_string(), v.to_string())]);
        assert_eq!(Mode::of(&HashMap::new()).unwrap(), Mode::Auto);
        assert_eq!(Mode::of(&props("TRUE")).unwrap(), Mode::On);
        assert_eq!(Mode::of(&props("false")).unwrap(), Mode::Off);
        assert_eq!(Mode::of(&props("auto")).unwrap(), Mode::Auto);
        let e = Mode::of(&props("sometimes")).unwrap_err().to_string();
        assert!(
            e.contains("floe.maintain.streaming") && e.contains("sometimes"),
            "{e}"
        );
    }

    fn set(s: &Streaming) -> Vec<String> {
        s.to_set.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    #[test]
    fn a_stream_found_is_recorded_with_the_metadata_keys_the_table_lacks() {
        let stream = every(1_000, HOUR_MS - 1, 0);
        let none = HashMap::new();
        let found = decide(Mode::Auto, &stream, &none, NOW);
        assert!(found.on);
        assert_eq!(found.why, "3600 commits in the last hour");
        assert_eq!(
            set(&found),
            [
                "floe.maintain.streaming=true",
                "write.metadata.delete-after-commit.enabled=true",
                "write.metadata.previous-versions-max=5"
            ]
        );
        // A table with a metadata key of its own keeps both.
        let own = HashMap::from([(
            "write.metadata.delete-after-commit.enabled".to_string(),
            "false".to_string(),
        )]);
        assert_eq!(
            set(&decide(Mode::Auto, &stream, &own, NOW)),
            ["floe.maintain.streaming=true"]
        );
        // Recorded already: only the metadata keys, once.
        let on = decide(Mode::On, &[], &none, NOW);
        assert!(on.on);
        assert_eq!(set(&on).len(), 2);
        // Off, or no stream: nothing.
        assert_eq!(decide(Mode::Off, &stream, &none, NOW), Streaming::default());
        let burst = every(600, 300_000, 0);
        assert_eq!(decide(Mode::Auto, &burst, &none, NOW), Streaming::default());
    }

    #[test]
    fn streaming_retention_goes_beneath_the_service_defaults() {
        let service = HashMap::from([(
            "history.expire.min-snapshots-to-keep".to_string(),
            "50".to_string(),
        )]);
        let d = with_streaming_defaults(&service);
        assert_eq!(d["history.expire.min-snapshots-to-keep"], "50");
        assert_eq!(d["history.expire.max-snapshot-age-ms"], "3600000");
        assert_eq!(d["floe.maintain.expire.max-snapshots"], "100");
    }
}
