//! Over-partitioning: is the partition spec finer than the data rate?
//!
//! The most common cause of small files is a spec that cuts the incoming data into more
//! partitions than the data can fill: every partition of every commit becomes at least one
//! file, and a partition that only ever receives a few MiB can never hold a target-size file
//! however well it is compacted. Iceberg's partitioning guidance (spec, "Partitioning", and the
//! engines' tuning notes) is to pick transforms so that each partition receives a good
//! multiple of the target file size; a stream's spec should follow its data rate.
//!
//! ```text
//!  live data files of the current spec ──> per partition bytes
//!     time transform in the spec:  closed partitions only (no recent commit wrote to them):
//!                                  a closed hour(ts) partition holds one hour of event time
//!     no time transform:           bytes per partition per day of history
//!  median B < target / 8           ──> the spec is finer than the data rate
//!  coarsenings (hour->day->month->year, bucket(N)->bucket(N/k) or none, dropping a
//!  high-cardinality identity/truncate field): each multiplies B by a factor; the suggestion is
//!  the smallest combined factor that brings B to target / 4, else the coarsest one
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use iceberg::spec::Transform;

use super::facts::{active_snapshots, median, LiveEntry, SnapshotFacts, SpecField};
use super::model::{bytes, OverPartitioned, SpecOption};

/// At least this many partitions are measured before a verdict.
pub const MIN_PARTITIONS: usize = 4;
/// The spec is finer than the data rate when the median partition receives under
/// target / FIRE_DIVISOR per window.
pub const FIRE_DIVISOR: u64 = 8;
/// A coarser spec is good enough when its partitions receive at least target / AIM_DIVISOR.
pub const AIM_DIVISOR: u64 = 4;
/// Identity and truncate fields with at least this many distinct values may be dropped.
pub const HIGH_CARDINALITY: usize = 8;
/// Without a time transform, a rate needs this much history (ms).
pub const MIN_HISTORY_MS: i64 = 3_600_000;

const HOUR_MS: f64 = 3_600_000.0;

/// Hours of event time one partition of a time transform covers.
fn unit_hours(t: &Transform) -> Option<f64> {
    match t {
        Transform::Hour => Some(1.0),
        Transform::Day => Some(24.0),
        // Mean Gregorian month and year.
        Transform::Month => Some(365.2425 * 24.0 / 12.0),
        Transform::Year => Some(365.2425 * 24.0),
        _ => None,
    }
}

fn unit_name(t: &Transform) -> &'static str {
    match t {
        Transform::Hour => "hour",
        Transform::Day => "day",
        Transform::Month => "month",
        Transform::Year => "year",
        _ => "partition",
    }
}

/// One field in `table create --partition` syntax (`day(ts)`, `bucket(16, id)`, `col`).
pub(crate) fn field_text(t: &Transform, col: &str) -> String {
    match t {
        Transform::Identity => col.to_string(),
        Transform::Bucket(n) => format!("bucket({n}, {col})"),
        Transform::Truncate(w) => format!("truncate({w}, {col})"),
        Transform::Year => format!("year({col})"),
        Transform::Month => format!("month({col})"),
        Transform::Day => format!("day({col})"),
        Transform::Hour => format!("hour({col})"),
        Transform::Void => format!("void({col})"),
        Transform::Unknown => format!("unknown({col})"),
    }
}

/// A way to change one field: its new text (`None`: dropped) and the factor it merges by.
#[derive(Debug, Clone)]
struct FieldChoice {
    text: Option<String>,
    factor: f64,
    changed: bool,
}

/// The ways to coarsen `f`, given `distinct` values of it among the measured partitions,
/// keeping it first.
fn choices(f: &SpecField, distinct: usize) -> Vec<FieldChoice> {
    let keep = FieldChoice {
        text: Some(field_text(&f.transform, &f.source)),
        factor: 1.0,
        changed: false,
    };
    let mut out = vec![keep];
    let d = distinct.max(1) as f64;
    match f.transform {
        Transform::Hour | Transform::Day | Transform::Month => {
            let from = unit_hours(&f.transform).unwrap_or(1.0);
            for t in [Transform::Day, Transform::Month, Transform::Year] {
                let to = unit_hours(&t).unwrap_or(1.0);
                if to > from {
                    out.push(FieldChoice {
                        text: Some(field_text(&t, &f.source)),
                        factor: to / from,
                        changed: true,
                    });
                }
            }
        }
        Transform::Bucket(n) => {
            // Hashing spreads rows evenly: the observed buckets merge into min(m, seen) ones.
            let mut m = n / 2;
            while m >= 2 {
                out.push(FieldChoice {
                    text: Some(field_text(&Transform::Bucket(m), &f.source)),
                    factor: (d / d.min(m as f64)).max(1.0),
                    changed: true,
                });
                m /= 2;
            }
            if distinct > 1 {
                out.push(FieldChoice {
                    text: None,
                    factor: d,
                    changed: true,
                });
            }
        }
        Transform::Identity | Transform::Truncate(_) if distinct >= HIGH_CARDINALITY => {
            out.push(FieldChoice {
                text: None,
                factor: d,
                changed: true,
            });
        }
        _ => {}
    }
    out.retain(|c| !c.changed || c.factor > 1.0);
    out
}

/// Every combination of the fields' choices (at most a few thousand: specs have few fields).
fn combinations(per_field: &[Vec<FieldChoice>]) -> Vec<Vec<&FieldChoice>> {
    let mut out: Vec<Vec<&FieldChoice>> = vec![vec![]];
    for choices in per_field {
        let mut next = Vec::new();
        for prefix in &out {
            for c in choices {
                let mut v = prefix.clone();
                v.push(c);
                next.push(v);
            }
            if next.len() > 20_000 {
                break;
            }
        }
        out = next;
    }
    out
}

fn spec_of(combo: &[&FieldChoice]) -> String {
    combo
        .iter()
        .filter_map(|c| c.text.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

fn spec_label(spec: &str) -> String {
    if spec.is_empty() {
        "unpartitioned".to_string()
    } else {
        spec.to_string()
    }
}

fn scaled(b: u64, factor: f64) -> u64 {
    (b as f64 * factor).round() as u64
}

/// Whether the current spec (`spec_id`, fields `spec`) is finer than the data rate, from the
/// live data files of that spec, the snapshots, the target file size and the time `now_ms`.
/// `None` when the table is unpartitioned or has no data in its current spec.
pub(crate) fn over_partitioning(
    table: &str,
    spec: &[SpecField],
    spec_id: i32,
    live: &[LiveEntry],
    snapshots: &[SnapshotFacts],
    target: u64,
    now_ms: i64,
) -> Option<OverPartitioned> {
    let spec_text = spec
        .iter()
        .map(|f| field_text(&f.transform, &f.source))
        .collect::<Vec<_>>()
        .join(", ");
    let files: Vec<&LiveEntry> = live
        .iter()
        .filter(|f| f.data && f.spec_id == spec_id && f.values.len() == spec.len())
        .collect();
    if spec.is_empty() || files.is_empty() {
        return None;
    }
    let active = active_snapshots(snapshots);
    // Per partition: bytes, whether a recent commit wrote to it, and its field values.
    let mut parts: BTreeMap<&[String], (u64, bool)> = BTreeMap::new();
    for f in &files {
        let p = parts.entry(f.values.as_slice()).or_insert((0, false));
        p.0 += f.size;
        p.1 |= active.contains(&f.snapshot_id);
    }
    // Per commit: bytes added per partition written (of the files still live).
    let mut per_commit: HashMap<i64, (u64, HashSet<&[String]>)> = HashMap::new();
    for f in &files {
        let c = per_commit.entry(f.snapshot_id).or_default();
        c.0 += f.size;
        c.1.insert(f.values.as_slice());
    }
    let mut commit_rates: Vec<u64> = per_commit
        .values()
        .map(|(b, ps)| b / ps.len().max(1) as u64)
        .collect();
    commit_rates.sort_unstable();
    let per_commit_median = median(&commit_rates);

    let finest_time = spec
        .iter()
        .filter_map(|f| unit_hours(&f.transform).map(|h| (h, f)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let oldest_ms = snapshots.iter().map(|s| s.timestamp_ms).min();
    let fire_below = target / FIRE_DIVISOR;
    let aim = target / AIM_DIVISOR;
    let mut finding = OverPartitioned {
        holds: false,
        spec: spec_text.clone(),
        basis: "closed-partitions",
        window: "day".to_string(),
        partitions: 0,
        bytes_per_partition_median: 0,
        bytes_per_partition_per_commit_median: per_commit_median,
        target,
        fire_below,
        aim,
        windows_for_target: 0.0,
        suggested_spec: None,
        suggested_bytes_per_partition: None,
        alternatives: vec![],
        commands: vec![],
        evidence: String::new(),
    };
    // The measured partitions: what each receives per window.
    let measured: Vec<(&[String], u64)> = match finest_time {
        Some((_, f)) => {
            // A partition still being written is only young, not small: judge closed ones.
            finding.window = unit_name(&f.transform).to_string();
            parts
                .iter()
                .filter(|(_, (_, active))| !active)
                .map(|(k, (b, _))| (*k, *b))
                .collect()
        }
        None => {
            finding.basis = "daily-rate";
            let span = oldest_ms.map_or(0, |o| now_ms - o);
            if span < MIN_HISTORY_MS {
                finding.evidence = format!(
                    "{} partition(s) of {spec_text}; history spans {} s, under the hour a daily rate needs: too young to judge",
                    parts.len(),
                    span.max(0) / 1000
                );
                return Some(finding);
            }
            let per_day = |b: u64| (b as f64 * 24.0 * HOUR_MS / span as f64).round() as u64;
            parts.iter().map(|(k, (b, _))| (*k, per_day(*b))).collect()
        }
    };
    finding.partitions = measured.len() as u64;
    if measured.len() < MIN_PARTITIONS {
        finding.evidence = format!(
            "{} of {} partition(s) of {spec_text} are closed (no recent commit wrote to them); {MIN_PARTITIONS} are needed to judge: too young to judge",
            measured.len(),
            parts.len()
        );
        return Some(finding);
    }
    let mut amounts: Vec<u64> = measured.iter().map(|(_, b)| *b).collect();
    amounts.sort_unstable();
    let b = median(&amounts);
    finding.bytes_per_partition_median = b;
    finding.windows_for_target = target as f64 / b.max(1) as f64;
    let what = match finding.basis {
        "daily-rate" => format!(
            "{spec_text} partitions receive {} per day each (median over {} partitions, from the bytes each holds over the table's history)",
            bytes(b),
            measured.len()
        ),
        _ => format!(
            "{spec_text} partitions receive {} each (median over {} closed partitions, one {} of event time each)",
            bytes(b),
            measured.len(),
            finding.window
        ),
    };
    let per_commit = format!(
        "; commits add {} per partition they write",
        bytes(per_commit_median)
    );
    let need = format!(
        "a target-size file ({}) would need {:.0} {}s of data",
        bytes(target),
        finding.windows_for_target,
        finding.window
    );
    if b >= fire_below {
        finding.evidence = format!(
            "{what}{per_commit}; that is at least target / {FIRE_DIVISOR} ({}): the spec fits the data rate",
            bytes(fire_below)
        );
        return Some(finding);
    }

    // Coarsenings: distinct values per field among the measured partitions.
    let distinct: Vec<usize> = (0..spec.len())
        .map(|i| {
            measured
                .iter()
                .map(|(k, _)| k[i].as_str())
                .collect::<BTreeSet<_>>()
                .len()
        })
        .collect();
    let per_field: Vec<Vec<FieldChoice>> = spec
        .iter()
        .zip(&distinct)
        .map(|(f, d)| choices(f, *d))
        .collect();
    let combos = combinations(&per_field);
    let scored: Vec<(f64, usize, String)> = combos
        .iter()
        .map(|c| {
            let factor: f64 = c.iter().map(|x| x.factor).product();
            let changes = c.iter().filter(|x| x.changed).count();
            (factor, changes, spec_of(c))
        })
        .filter(|(factor, ..)| *factor > 1.0)
        .collect();
    let needed = aim as f64 / b.max(1) as f64;
    let pick = scored
        .iter()
        .filter(|(f, ..)| *f >= needed)
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)))
        .or_else(|| {
            scored
                .iter()
                .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)))
        });
    let mut alternatives: Vec<SpecOption> = scored
        .iter()
        .filter(|(_, changes, _)| *changes == 1)
        .map(|(factor, _, spec)| SpecOption {
            spec: spec.clone(),
            bytes_per_partition: scaled(b, *factor),
            factor: *factor,
        })
        .collect();
    alternatives.sort_by(|a, b| a.factor.total_cmp(&b.factor).then(a.spec.cmp(&b.spec)));
    let alt_text = alternatives
        .iter()
        .take(5)
        .map(|a| format!("{} ~{}", spec_label(&a.spec), bytes(a.bytes_per_partition)))
        .collect::<Vec<_>>()
        .join(", ");
    finding.alternatives = alternatives;
    finding.holds = true;
    match pick {
        Some((factor, _, spec)) => {
            let got = scaled(b, *factor);
            finding.suggested_spec = Some(spec.clone());
            finding.suggested_bytes_per_partition = Some(got);
            finding.commands = vec![
                format!("floe table evolve-partition {table} --spec '{spec}'"),
                format!("floe compact {table}"),
            ];
            let why = if *factor >= needed {
                format!(
                    "the finest coarsening reaching target / {AIM_DIVISOR} ({})",
                    bytes(aim)
                )
            } else {
                format!(
                    "the coarsest sensible one; none reaches target / {AIM_DIVISOR} ({})",
                    bytes(aim)
                )
            };
            finding.evidence = format!(
                "partition spec is finer than the data rate: {what}{per_commit}; {need}; {alt_text}; suggested: {} (x{factor:.0} -> ~{} per partition, {why})",
                spec_label(spec),
                bytes(got)
            );
        }
        None => {
            finding.evidence = format!(
                "partition spec is finer than the data rate: {what}{per_commit}; {need}; no coarser spec of these fields merges partitions (low-cardinality fields are kept)"
            );
        }
    }
    Some(finding)
}
