//! When an ingest commits: the commit trigger, pure (no I/O; every decision takes the clock
//! value it is made at).
//!
//! A window commits when the commit interval has passed since the last commit, or it holds
//! `--commit-bytes` / `--commit-records`, or an upsert window is full; the ingest stops (after
//! a last commit) once no record arrived for `--stop-when-idle`. Reads wait at most until the
//! next commit is due (between 10 and 200 ms) and never past `--commit-records`.
//! Backpressure changes the interval: doubled (up to a maximum) while the table's compaction
//! debt is over a limit, halved back toward the base once under every one ([`next_interval`]).

use std::time::{Duration, Instant};

use crate::ingest::options::IngestOptions;

/// The debt is read after a commit at most this often (one read of the live files).
const DEBT_EVERY: Duration = Duration::from_secs(2);

/// What the current window (since the last commit) holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub records: u64,
    /// Payload bytes of the good records.
    pub bytes: u64,
    pub bad: u64,
}

/// The commit trigger of one ingest.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// The commit interval in effect (the base one, or longer under backpressure).
    interval: Duration,
    base_interval: Duration,
    commit_bytes: Option<u64>,
    commit_records: Option<u64>,
    stop_when_idle: Option<Duration>,
    batch_records: usize,
    last_commit: Instant,
    last_record: Instant,
    last_debt: Option<Instant>,
}

impl Trigger {
    /// The trigger of an ingest with `options`, started at `now`.
    pub fn new(options: &IngestOptions, now: Instant) -> Self {
        let batch_records = options
            .batch_records
            .min(options.commit_records.unwrap_or(u64::MAX).max(1) as usize)
            .max(1);
        Self {
            interval: options.commit_interval,
            base_interval: options.commit_interval,
            commit_bytes: options.commit_bytes,
            commit_records: options.commit_records,
            stop_when_idle: options.stop_when_idle,
            batch_records,
            last_commit: now,
            last_record: now,
            last_debt: None,
        }
    }

    /// The commit interval in effect.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How long a read may wait for records at `now`: until the next commit is due, between
    /// 10 and 200 ms.
    pub fn wait(&self, now: Instant) -> Duration {
        let due_in = self
            .interval
            .saturating_sub(now.saturating_duration_since(self.last_commit));
        due_in.clamp(Duration::from_millis(10), Duration::from_millis(200))
    }

    /// The most records the next read may take: a micro-batch, and never past
    /// `--commit-records` (a commit holds exactly that many records).
    pub fn max_read(&self, window: &Window) -> usize {
        match self.commit_records {
            Some(r) => self
                .batch_records
                .min(r.saturating_sub(window.records).max(1) as usize),
            None => self.batch_records,
        }
    }

    /// Records arrived at `now`.
    pub fn record_arrived(&mut self, now: Instant) {
        self.last_record = now;
    }

    /// No record arrived for `--stop-when-idle` at `now`.
    pub fn idle(&self, now: Instant) -> bool {
        self.stop_when_idle
            .is_some_and(|d| now.saturating_duration_since(self.last_record) >= d)
    }

    /// Whether `window` commits at `now` (`changes_full`: an upsert window reached its
    /// budget).
    pub fn due(&self, now: Instant, window: &Window, changes_full: bool) -> bool {
        now.saturating_duration_since(self.last_commit) >= self.interval
            || self.commit_bytes.is_some_and(|b| window.bytes >= b)
            || self.commit_records.is_some_and(|r| window.records >= r)
            || changes_full
    }

    /// A window ended (committed, or nothing to commit) at `now`.
    pub fn window_ended(&mut self, now: Instant) {
        self.last_commit = now;
    }

    /// How much longer than the base the interval in effect is, in ms (0 without
    /// backpressure): what a commit adds to the throttled time.
    pub fn throttled_ms(&self) -> u64 {
        self.interval.saturating_sub(self.base_interval).as_millis() as u64
    }

    /// Whether the debt is read after a commit at `now` (at most every 2 s); when so, the
    /// read counts as done at `now`.
    pub fn debt_due(&mut self, now: Instant) -> bool {
        if self
            .last_debt
            .is_none_or(|t| now.saturating_duration_since(t) >= DEBT_EVERY)
        {
            self.last_debt = Some(now);
            true
        } else {
            false
        }
    }

    /// Backpressure after a debt read: the interval [`next_interval`] gives. `Some` with the
    /// new interval when it changed.
    pub fn backpressure(&mut self, over: bool, max: Duration) -> Option<Duration> {
        let next = next_interval(self.interval, self.base_interval, over, max);
        let changed = next != self.interval;
        self.interval = next;
        changed.then_some(next)
    }
}

/// The next commit interval: doubled (up to the maximum) while over a limit, halved back
/// toward `base` once under every one.
pub fn next_interval(current: Duration, base: Duration, over: bool, max: Duration) -> Duration {
    if over {
        (current * 2).min(max.max(base))
    } else {
        (current / 2).max(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(edit: impl FnOnce(&mut IngestOptions)) -> IngestOptions {
        let mut o = IngestOptions::new("w");
        o.commit_interval = Duration::from_secs(5);
        edit(&mut o);
        o
    }

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_interval_commits_a_window_and_reads_wait_until_it_is_due() {
        let t0 = Instant::now();
        let mut t = Trigger::new(&opts(|_| {}), t0);
        let w = Window::default();
        assert!(!t.due(t0 + S(4), &w, false));
        assert!(t.due(t0 + S(5), &w, false));
        assert_eq!(t.wait(t0), MS(200), "at most 200 ms");
        assert_eq!(t.wait(t0 + MS(4_950)), MS(50));
        assert_eq!(
            t.wait(t0 + S(9)),
            MS(10),
            "at least 10 ms, also when overdue"
        );
        t.window_ended(t0 + S(5));
        assert!(!t.due(t0 + S(9), &w, false));
        assert!(t.due(t0 + S(10), &w, false));
    }

    #[test]
    fn bytes_records_and_a_full_upsert_window_commit_early() {
        let t0 = Instant::now();
        let t = Trigger::new(
            &opts(|o| {
                o.commit_bytes = Some(1000);
                o.commit_records = Some(10);
            }),
            t0,
        );
        let w = |records, bytes| Window {
            records,
            bytes,
            bad: 0,
        };
        assert!(!t.due(t0, &w(9, 999), false));
        assert!(t.due(t0, &w(9, 1000), false));
        assert!(t.due(t0, &w(10, 0), false));
        assert!(t.due(t0, &w(0, 0), true));
    }

    #[test]
    fn reads_stop_at_the_commit_record_count() {
        let t0 = Instant::now();
        let t = Trigger::new(&opts(|o| o.batch_records = 100), t0);
        assert_eq!(t.max_read(&Window::default()), 100);
        let t = Trigger::new(
            &opts(|o| {
                o.batch_records = 100;
                o.commit_records = Some(30);
            }),
            t0,
        );
        let w = |records| Window {
            records,
            ..Window::default()
        };
        assert_eq!(t.max_read(&w(0)), 30);
        assert_eq!(t.max_read(&w(25)), 5);
        assert_eq!(t.max_read(&w(30)), 1, "always reads something");
    }

    #[test]
    fn idle_counts_from_the_last_record() {
        let t0 = Instant::now();
        let mut t = Trigger::new(&opts(|o| o.stop_when_idle = Some(S(3))), t0);
        assert!(!t.idle(t0 + S(2)));
        t.record_arrived(t0 + S(2));
        assert!(!t.idle(t0 + S(4)));
        assert!(t.idle(t0 + S(5)));
        let never = Trigger::new(&opts(|_| {}), t0);
        assert!(!never.idle(t0 + S(3600)));
    }

    #[test]
    fn backpressure_doubles_to_the_maximum_and_recovers_to_the_base() {
        let (base, max) = (S(5), S(60));
        let mut i = base;
        let mut seen = vec![];
        for over in [
            true, true, true, true, true, false, false, false, false, false,
        ] {
            i = next_interval(i, base, over, max);
            seen.push(i.as_secs());
        }
        assert_eq!(seen, vec![10, 20, 40, 60, 60, 30, 15, 7, 5, 5]);

        let t0 = Instant::now();
        let mut t = Trigger::new(&opts(|_| {}), t0);
        assert_eq!(t.backpressure(true, max), Some(S(10)));
        assert_eq!(t.interval(), S(10));
        assert_eq!(t.throttled_ms(), 5_000);
        assert!(!t.due(t0 + S(9), &Window::default(), false));
        assert_eq!(t.backpressure(false, max), Some(base));
        assert_eq!(t.backpressure(false, max), None, "unchanged at the base");
        assert_eq!(t.throttled_ms(), 0);
    }

    #[test]
    fn the_debt_is_read_at_most_every_two_seconds() {
        let t0 = Instant::now();
        let mut t = Trigger::new(&opts(|_| {}), t0);
        assert!(t.debt_due(t0));
        assert!(!t.debt_due(t0 + S(1)));
        assert!(t.debt_due(t0 + S(2)));
        assert!(!t.debt_due(t0 + MS(3_999)));
    }
}
