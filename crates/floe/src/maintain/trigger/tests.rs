use super::*;
use crate::maintain::facts::ManifestFacts;

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
const NOW: i64 = 1_000 * DAY;

/// One recent commit after a compaction an hour minus a minute ago: no trigger reached.
fn quiet() -> TableFacts {
    TableFacts {
        commits_since_compaction: 1,
        last_compaction_ms: Some(NOW - HOUR + MIN),
        first_uncompacted_ms: Some(NOW - MIN),
        last_write_ms: Some(NOW - MIN),
        snapshots: 1,
        oldest_snapshot_ms: Some(NOW - MIN),
        metadata_log_entries: 1,
        ..TableFacts::default()
    }
}

fn run(policy: &Policy, facts: &TableFacts, last_runs: &HashMap<JobKind, i64>) -> Vec<Candidate> {
    let out = evaluate(policy, facts, last_runs, NOW);
    assert_eq!(
        out.iter().map(|c| c.job).collect::<Vec<_>>(),
        JobKind::ALL.to_vec()
    );
    // Every job says either why it runs or why not.
    assert!(out.iter().all(|c| c.fired.is_some() || c.skipped.is_some()));
    out
}

fn one(job: JobKind, facts: &TableFacts, last_runs: &HashMap<JobKind, i64>) -> Candidate {
    let out = run(&Policy::default(), facts, last_runs);
    out.into_iter()
        .find(|c| c.job == job)
        .expect("every job is evaluated")
}

fn compact(facts: &TableFacts) -> Candidate {
    one(JobKind::Compact, facts, &HashMap::new())
}

#[test]
fn a_quiet_table_needs_no_compaction() {
    let c = compact(&quiet());
    assert!(!c.is_due());
    let why = c.skipped.unwrap();
    assert!(
        why.starts_with("no trigger reached: commit-count 1 < 10"),
        "{why}"
    );
    assert!(why.contains("interval 59m < 1h"), "{why}");
}

#[test]
fn every_compaction_trigger_fires_at_its_threshold_and_not_one_below() {
    type Set = fn(&mut TableFacts, u64);
    let triggers: [(&str, u64, Set); 5] = [
        ("commit-count", 10, |f, n| f.commits_since_compaction = n),
        ("data-file-count", 50, |f, n| {
            f.data_files_since_compaction = n
        }),
        ("data-file-size", 512 << 20, |f, n| {
            f.bytes_since_compaction = n
        }),
        ("pos-delete-file-count", 10, |f, n| {
            f.pos_delete_files_since_compaction = n
        }),
        ("eq-delete-file-count", 5, |f, n| {
            f.eq_delete_files_since_compaction = n
        }),
    ];
    for (name, threshold, set) in triggers {
        let mut at = quiet();
        set(&mut at, threshold);
        let c = compact(&at);
        assert!(c.is_due(), "{name} at {threshold}: {c:?}");
        assert!(c.fired.as_deref().unwrap().starts_with(name), "{c:?}");
        let mut below = quiet();
        set(&mut below, threshold - 1);
        let c = compact(&below);
        assert!(
            !c.is_due() && c.fired.is_none(),
            "{name} below {threshold}: {c:?}"
        );
    }
    let mut at = quiet();
    at.data_files_since_compaction = 73;
    assert_eq!(
        compact(&at).fired.as_deref(),
        Some("data-file-count 73 >= 50")
    );
}

#[test]
fn the_interval_trigger_fires_after_an_hour() {
    let mut f = quiet();
    f.last_compaction_ms = Some(NOW - HOUR);
    let c = compact(&f);
    assert_eq!(c.fired.as_deref(), Some("interval 1h >= 1h"), "{c:?}");
    f.last_compaction_ms = Some(NOW - HOUR + 1);
    assert!(!compact(&f).is_due());
    // Never compacted: the interval counts from the first commit.
    f.last_compaction_ms = None;
    f.first_uncompacted_ms = Some(NOW - 2 * HOUR);
    assert!(compact(&f).is_due());
}

#[test]
fn nothing_to_compact_without_a_commit() {
    let mut f = quiet();
    f.commits_since_compaction = 0;
    f.last_compaction_ms = Some(NOW - DAY);
    let c = compact(&f);
    assert!(!c.is_due());
    assert!(c.skipped.unwrap().contains("no commit"));
}

#[test]
fn the_rate_limit_holds_a_fired_compaction_back() {
    let mut f = quiet();
    f.commits_since_compaction = 10;
    f.last_compaction_ms = Some(NOW - 2 * MIN);
    let c = compact(&f);
    assert!(c.fired.is_some() && !c.is_due());
    assert_eq!(
        c.skipped.as_deref(),
        Some("rate-limit: last compaction 2m ago < 5m")
    );
    f.last_compaction_ms = Some(NOW - 5 * MIN);
    assert!(compact(&f).is_due());
    // A compaction the service ran (recorded, maybe not yet in the facts) counts too.
    let runs: HashMap<JobKind, i64> = [(JobKind::Compact, NOW - MIN)].into();
    let c = one(JobKind::Compact, &f, &runs);
    assert!(!c.is_due() && c.skipped.unwrap().starts_with("rate-limit"));
}

#[test]
fn a_disabled_table_yields_only_skips() {
    let mut f = quiet();
    f.commits_since_compaction = 1_000;
    f.snapshots = 100;
    f.oldest_snapshot_ms = Some(0);
    let policy = Policy {
        enabled: false,
        ..Policy::default()
    };
    let out = run(&policy, &f, &HashMap::new());
    assert!(out
        .iter()
        .all(|c| c.fired.is_none() && c.skipped.as_deref() == Some("floe.maintain.enabled=false")));
}

#[test]
fn expiry_fires_on_old_snapshots_beyond_the_ones_to_keep() {
    let expire = |f: &TableFacts| one(JobKind::ExpireSnapshots, f, &HashMap::new());
    let mut f = quiet();
    f.snapshots = 2;
    f.oldest_snapshot_ms = Some(NOW - 5 * DAY - 1);
    assert!(expire(&f).is_due(), "{:?}", expire(&f));
    f.oldest_snapshot_ms = Some(NOW - 5 * DAY);
    assert!(!expire(&f).is_due());
    f.oldest_snapshot_ms = Some(NOW - 30 * DAY);
    f.snapshots = 1;
    let c = expire(&f);
    assert!(!c.is_due() && c.skipped.unwrap().contains("min-snapshots-to-keep"));
    f.snapshots = 2;
    let off = Policy {
        expire_enabled: false,
        ..Policy::default()
    };
    let out = run(&off, &f, &HashMap::new());
    assert_eq!(
        out[1].skipped.as_deref(),
        Some("floe.maintain.expire.enabled=false")
    );
}

#[test]
fn expiry_fires_on_a_young_history_past_max_snapshots_plus_its_slack() {
    let bounded = |max: u64| Policy {
        max_snapshots: max,
        ..Policy::default()
    };
    let mut f = quiet();
    f.oldest_snapshot_ms = Some(NOW - MIN);
    // 100 snapshots, slack 10: due above 110.
    f.snapshots = 110;
    assert!(!run(&bounded(100), &f, &HashMap::new())[1].is_due());
    f.snapshots = 111;
    let c = &run(&bounded(100), &f, &HashMap::new())[1];
    assert_eq!(
        c.fired.as_deref(),
        Some("111 snapshots > floe.maintain.expire.max-snapshots 100 + 10"),
        "{c:?}"
    );
    // Unbounded (the default): young snapshots never fire.
    f.snapshots = 100_000;
    assert!(!run(&Policy::default(), &f, &HashMap::new())[1].is_due());
    // A larger minimum raises the bound; slack is a tenth above 100.
    let p = Policy {
        min_snapshots_to_keep: 500,
        ..bounded(100)
    };
    f.snapshots = 550;
    assert!(!run(&p, &f, &HashMap::new())[1].is_due());
    f.snapshots = 551;
    assert!(run(&p, &f, &HashMap::new())[1].is_due());
}

/// The last runs with one orphan removal at `at`.
fn ran(at: i64) -> HashMap<JobKind, i64> {
    HashMap::from([(JobKind::RemoveOrphanFiles, at)])
}

#[test]
fn orphans_run_once_per_interval() {
    let orphans = |runs: &HashMap<JobKind, i64>| one(JobKind::RemoveOrphanFiles, &quiet(), runs);
    assert!(orphans(&HashMap::new()).is_due());
    assert!(orphans(&ran(NOW - DAY)).is_due());
    let c = orphans(&ran(NOW - DAY + 1));
    assert!(!c.is_due());
    assert!(c
        .skipped
        .unwrap()
        .starts_with("orphans.interval: last run 23h59m ago < 1d"));
    let no_gc = Policy {
        gc_enabled: false,
        ..Policy::default()
    };
    let out = run(&no_gc, &quiet(), &HashMap::new());
    assert_eq!(out[2].skipped.as_deref(), Some("gc.enabled=false"));
}

#[test]
fn manifest_jobs_need_manifest_facts() {
    let mut f = quiet();
    let c = one(JobKind::RewriteManifests, &f, &HashMap::new());
    assert!(!c.is_due() && c.skipped.unwrap().contains("not gathered"));
    assert!(!one(JobKind::CleanMetadata, &f, &HashMap::new()).is_due());

    let small = 1 << 19;
    let mut sizes = vec![small; 20];
    sizes.push(8 << 20);
    f.manifests = Some(ManifestFacts {
        manifest_bytes: sizes,
        metadata_json_files: 0,
    });
    let c = one(JobKind::RewriteManifests, &f, &HashMap::new());
    assert_eq!(
        c.fired.as_deref(),
        Some("min-manifests: 20 of 21 manifests under 1MiB >= 20")
    );
    if let Some(m) = f.manifests.as_mut() {
        m.manifest_bytes.remove(0);
    }
    assert!(!one(JobKind::RewriteManifests, &f, &HashMap::new()).is_due());
}

#[test]
fn clean_metadata_fires_past_the_slack() {
    let mut f = quiet();
    f.metadata_log_entries = 5;
    let with_files = |f: &TableFacts, n: u64| {
        let mut f = f.clone();
        f.manifests = Some(ManifestFacts {
            manifest_bytes: vec![],
            metadata_json_files: n,
        });
        one(JobKind::CleanMetadata, &f, &HashMap::new())
    };
    assert!(with_files(&f, 5 + 1 + METADATA_FILES_SLACK + 1).is_due());
    assert!(!with_files(&f, 5 + 1 + METADATA_FILES_SLACK).is_due());
    assert!(!with_files(&f, 0).is_due());
}
