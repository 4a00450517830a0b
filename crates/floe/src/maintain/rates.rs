//! How long a job will take, from floe's own past runs on this machine: the cost model of
//! the scheduler.
//!
//! A job's run time is modelled as `seconds = a * files + b * bytes`, where `files` is every
//! file it opens, writes or deletes and `bytes` every byte it reads or writes (its
//! [`Cost`]). `a` (seconds per file: open, footer, request) and `b` (seconds per byte:
//! decode, encode, transfer) are fitted per job kind by least squares over the last
//! successful runs recorded in the store ([`crate::coordination::RunRecord`]), both kept
//! non-negative. Until a kind has [`MIN_RUNS`] runs on record, a prior stands in
//! ([`Rates::PRIOR`]: 5 ms per file, 50 MB/s), and the decision table says so; the prior is
//! only a starting point, replaced by the measurement as soon as there is one.

use serde::Serialize;

use crate::base::cost::Cost;

use crate::coordination::RunRecord;

/// Runs of a kind needed before the fitted rates replace the prior.
pub const MIN_RUNS: usize = 3;

/// Seconds per file and per byte of one job kind.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rates {
    pub seconds_per_file: f64,
    pub seconds_per_byte: f64,
    /// Runs the rates were fitted on; 0 for the prior.
    pub runs: usize,
}

impl Rates {
    /// The starting point before any run: 5 ms per file, 50 MB/s.
    pub const PRIOR: Rates = Rates {
        seconds_per_file: 0.005,
        seconds_per_byte: 1.0 / 50e6,
        runs: 0,
    };

    /// Estimated run time of `cost`, in seconds.
    pub fn seconds(&self, cost: &Cost) -> f64 {
        let (files, bytes) = work(cost);
        self.seconds_per_file * files + self.seconds_per_byte * bytes
    }

    /// Where the rates come from, for the decision table.
    pub fn source(&self) -> String {
        if self.runs == 0 {
            format!("prior (fewer than {MIN_RUNS} runs on record)")
        } else {
            format!(
                "fitted on {} runs: {:.1} ms/file, {:.1} MB/s",
                self.runs,
                self.seconds_per_file * 1e3,
                if self.seconds_per_byte > 0.0 {
                    1e-6 / self.seconds_per_byte
                } else {
                    f64::INFINITY
                }
            )
        }
    }
}

/// The files and bytes a cost moves.
fn work(c: &Cost) -> (f64, f64) {
    (
        (c.files_to_read + c.files_to_write + c.files_to_delete) as f64,
        (c.bytes_to_read + c.bytes_to_write) as f64,
    )
}

/// The cost a finished run had (what it read, wrote and deleted).
pub fn run_cost(r: &RunRecord) -> Cost {
    Cost {
        files_to_read: r.files_read,
        bytes_to_read: r.bytes_read,
        files_to_write: r.files_written,
        bytes_to_write: r.bytes_written,
        files_to_delete: r.files_deleted,
        bytes_to_delete: r.bytes_deleted,
    }
}

/// The rates fitted on `runs` (one job kind; failed runs and runs that did nothing are
/// ignored), or the prior when fewer than [`MIN_RUNS`] remain.
pub fn fit(runs: &[RunRecord]) -> Rates {
    let points: Vec<(f64, f64, f64)> = runs
        .iter()
        .filter(|r| r.succeeded && r.finished_ms >= r.started_ms)
        .map(|r| {
            let (f, b) = work(&run_cost(r));
            (f, b, (r.finished_ms - r.started_ms) as f64 / 1e3)
        })
        .filter(|(f, b, _)| *f > 0.0 || *b > 0.0)
        .collect();
    if points.len() < MIN_RUNS {
        return Rates::PRIOR;
    }
    let n = points.len();
    // Scale bytes to MB so that the normal equations are well conditioned.
    let (mut ff, mut fb, mut bb, mut fd, mut bd) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (f, b, d) in &points {
        let b = b / 1e6;
        ff += f * f;
        fb += f * b;
        bb += b * b;
        fd += f * d;
        bd += b * d;
    }
    let only_files = || (if ff > 0.0 { fd / ff } else { 0.0 }, 0.0);
    let only_bytes = || (0.0, if bb > 0.0 { bd / bb } else { 0.0 });
    let sse = |(a, b): (f64, f64)| -> f64 {
        points
            .iter()
            .map(|(f, by, d)| (d - a * f - b * by / 1e6).powi(2))
            .sum()
    };
    let det = ff * bb - fb * fb;
    let both = if det.abs() > 1e-9 * (ff * bb).max(1e-30) {
        let a = (fd * bb - bd * fb) / det;
        let b = (bd * ff - fd * fb) / det;
        (a >= 0.0 && b >= 0.0).then_some((a, b))
    } else {
        None
    };
    let (a, b_mb) = match both {
        Some(ab) => ab,
        None => {
            let (x, y) = (only_files(), only_bytes());
            if sse(x) <= sse(y) {
                x
            } else {
                y
            }
        }
    };
    Rates {
        seconds_per_file: a.max(0.0),
        seconds_per_byte: b_mb.max(0.0) / 1e6,
        runs: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(files: u64, bytes: u64, seconds: f64) -> RunRecord {
        RunRecord {
            job: "compact".into(),
            started_ms: 1_000,
            finished_ms: 1_000 + (seconds * 1e3) as i64,
            succeeded: true,
            files_read: files,
            bytes_read: bytes,
            ..RunRecord::default()
        }
    }

    #[test]
    fn too_few_runs_give_the_prior() {
        assert_eq!(fit(&[run(10, 1 << 20, 1.0)]), Rates::PRIOR);
        assert!(Rates::PRIOR.source().starts_with("prior"));
    }

    #[test]
    fn the_fit_recovers_per_file_and_per_byte_rates() {
        // Generated with 20 ms per file and 100 MB/s.
        let truth = |f: u64, b: u64| 0.02 * f as f64 + b as f64 / 100e6;
        let runs: Vec<RunRecord> = [
            (10, 5_000_000),
            (200, 1_000_000),
            (50, 400_000_000),
            (5, 80_000_000),
        ]
        .into_iter()
        .map(|(f, b)| run(f, b, truth(f, b)))
        .collect();
        let r = fit(&runs);
        assert_eq!(r.runs, 4);
        assert!((r.seconds_per_file - 0.02).abs() < 1e-3, "{r:?}");
        assert!((1.0 / r.seconds_per_byte - 100e6).abs() < 5e6, "{r:?}");
        let c = Cost {
            files_to_read: 100,
            bytes_to_read: 200_000_000,
            ..Cost::default()
        };
        assert!((r.seconds(&c) - 4.0).abs() < 0.1, "{}", r.seconds(&c));
        assert!(r.source().contains("4 runs"));
    }

    #[test]
    fn failed_and_empty_runs_are_ignored_and_rates_stay_non_negative() {
        let mut failed = run(1000, 1, 500.0);
        failed.succeeded = false;
        // Files alone explain the time; a free fit would make bytes negative.
        let runs = vec![
            failed,
            run(0, 0, 3.0),
            run(100, 1_000_000_000, 1.0),
            run(200, 10_000_000, 2.0),
            run(300, 500_000_000, 3.0),
        ];
        let r = fit(&runs);
        assert_eq!(r.runs, 3);
        assert!(r.seconds_per_file >= 0.0 && r.seconds_per_byte >= 0.0);
        assert!((r.seconds_per_file - 0.01).abs() < 2e-3, "{r:?}");
    }
}
