use super::*;

const MIB: u64 = 1 << 20;

fn compaction(table: &str, score: f64, partitions: &[u64]) -> Proposal {
    Proposal {
        table: table.into(),
        job: "compact".into(),
        score,
        rewrite_bytes: partitions.iter().sum(),
        partitions: partitions
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("p={i}"), *b))
            .collect(),
    }
}

fn runs(v: &Verdict) -> bool {
    matches!(v, Verdict::Run { .. })
}

#[test]
fn best_score_first_within_the_concurrency_limit() {
    let props = vec![
        compaction("a", 1.0, &[MIB]),
        compaction("b", 3.0, &[MIB]),
        compaction("c", 2.0, &[MIB]),
    ];
    let v = schedule(
        &props,
        &Budget {
            max_concurrent_jobs: 2,
            ..Budget::default()
        },
    );
    assert!(!runs(&v[0]) && runs(&v[1]) && runs(&v[2]));
    assert_eq!(v[0], Verdict::Wait("max-concurrent-jobs 2 reached".into()));
}

#[test]
fn one_job_per_table_and_busy_tables_wait() {
    let mut expire = compaction("a", 0.5, &[]);
    expire.job = "expire-snapshots".into();
    let props = vec![
        compaction("a", 2.0, &[MIB]),
        expire,
        compaction("b", 1.0, &[MIB]),
    ];
    let budget = Budget {
        max_concurrent_jobs: 10,
        busy_tables: ["b".to_string()].into(),
        running: 1,
        ..Budget::default()
    };
    let v = schedule(&props, &budget);
    assert!(runs(&v[0]));
    assert!(matches!(&v[1], Verdict::Wait(w) if w.contains("better-scored job")));
    assert!(matches!(&v[2], Verdict::Wait(w) if w.contains("is running")));
}

#[test]
fn the_hourly_budget_counts_what_was_used() {
    let props = vec![compaction("a", 1.0, &[300 * MIB])];
    let budget = Budget {
        max_concurrent_jobs: 2,
        max_rewrite_bytes_per_hour: 1024 * MIB,
        rewritten_last_hour: 800 * MIB,
        ..Budget::default()
    };
    let v = schedule(&props, &budget);
    assert!(
        matches!(&v[0], Verdict::Wait(w) if w.contains("needs 300MiB at least, 224MiB left")),
        "{v:?}"
    );
}

/// 50 small tables and one large one, the large one scoring best: over passes, every small
/// table is served, the large one is cut to partitions, and no hour spends more than the
/// budget.
#[test]
fn one_large_table_cannot_starve_fifty_small_ones() {
    let budget_per_hour = 10 * 1024 * MIB;
    let mut large_left: Vec<u64> = vec![512 * MIB; 40]; // 20 GiB in 40 partitions
    let mut small_done = [false; 50];
    let mut used_this_hour = 0u64;
    let mut large_runs = 0;
    for _pass in 0..30 {
        let mut props = Vec::new();
        if !large_left.is_empty() {
            props.push(compaction("large", 100.0, &large_left));
        }
        for (i, done) in small_done.iter().enumerate() {
            if !done {
                props.push(compaction(
                    &format!("small{i:02}"),
                    1.0,
                    &[4 * MIB, 4 * MIB],
                ));
            }
        }
        if props.is_empty() {
            break;
        }
        let v = schedule(
            &props,
            &Budget {
                max_concurrent_jobs: 4,
                max_rewrite_bytes_per_hour: budget_per_hour,
                rewritten_last_hour: used_this_hour,
                ..Budget::default()
            },
        );
        for (p, verdict) in props.iter().zip(&v) {
            if let Verdict::Run {
                partitions,
                rewrite_bytes,
            } = verdict
            {
                used_this_hour += rewrite_bytes;
                if p.table == "large" {
                    large_runs += 1;
                    let n = partitions.as_ref().map_or(large_left.len(), |v| v.len());
                    assert!(n < 40, "the large table is cut to a share");
                    large_left.drain(..n);
                } else {
                    let i: usize = p.table[5..].parse().unwrap();
                    small_done[i] = true;
                }
            }
        }
        assert!(used_this_hour <= budget_per_hour, "{used_this_hour}");
    }
    assert!(
        small_done.iter().all(|d| *d),
        "every small table was served"
    );
    assert!(
        large_runs >= 3,
        "the large table progressed too: {large_runs} runs"
    );
}

#[test]
fn an_unlimited_budget_never_cuts() {
    let props = vec![compaction("a", 1.0, &[u64::MAX / 4, u64::MAX / 4])];
    let v = schedule(
        &props,
        &Budget {
            max_concurrent_jobs: 1,
            ..Budget::default()
        },
    );
    assert_eq!(
        v[0],
        Verdict::Run {
            partitions: None,
            rewrite_bytes: u64::MAX / 2 - 1
        }
    );
}
