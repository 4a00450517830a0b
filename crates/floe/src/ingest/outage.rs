//! An unreachable source (a Kafka broker gone) while its reader retries: what is reported when,
//! and when the ingest gives up. Pure: every observation takes the clock value it is made at.
//!
//! - While the source does not answer, a `waiting` status is reported at once and then every
//!   5 s, with how long it has not answered and (with `--source-timeout`) how long is left.
//! - Once it answers again, a `reachable` status closes an outage that was reported.
//! - After `--source-timeout`, one `gave_up` status: the ingest commits what it read and stops
//!   with [`Outage::error`].

use std::time::{Duration, Instant};

use crate::base::error::Error;
use crate::ingest::report::SourceStatus;
use crate::ingest::source::{Positions, Unreachable};

/// How often the wait for an unreachable source is reported.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// The outage tracker of one ingest.
#[derive(Debug, Default)]
pub struct Outage {
    timeout: Option<Duration>,
    /// The current outage.
    current: Option<Unreachable>,
    /// When the current outage was last reported.
    reported: Option<Instant>,
    /// The outage the ingest gave up on, and the timeout it passed.
    gave_up: Option<(Unreachable, Duration)>,
}

/// What one observation of the source found.
#[derive(Debug, Default)]
pub struct Observed {
    /// How long the source has not answered (`None`: it answers).
    pub down: Option<Duration>,
    /// The status to report, if any.
    pub status: Option<SourceStatus>,
    /// The ingest gives up now: it commits what it read and stops.
    pub give_up: bool,
}

impl Outage {
    /// A tracker giving up after `timeout` (`None`: waits forever).
    pub fn new(timeout: Option<Duration>) -> Self {
        Self {
            timeout,
            ..Self::default()
        }
    }

    /// The source's state at `now`: `Some` while it does not answer.
    pub fn observe(&mut self, unreachable: Option<Unreachable>, now: Instant) -> Observed {
        let Some(u) = unreachable else {
            let mut status = None;
            if let Some(u) = self.current.take() {
                // Only a reported outage is announced over.
                if self.reported.is_some() {
                    status = Some(SourceStatus {
                        event: "reachable",
                        unreachable_s: now.saturating_duration_since(u.since).as_secs(),
                        what: u.what,
                        reason: u.reason,
                        position: u.position,
                        gives_up_in_s: None,
                    });
                }
            }
            self.reported = None;
            return Observed {
                down: None,
                status,
                give_up: false,
            };
        };
        let down = now.saturating_duration_since(u.since);
        let status = |event| SourceStatus {
            event,
            what: u.what.clone(),
            reason: u.reason.clone(),
            unreachable_s: down.as_secs(),
            position: u.position,
            gives_up_in_s: self.timeout.map(|t| t.saturating_sub(down).as_secs()),
        };
        let mut out = Observed {
            down: Some(down),
            ..Observed::default()
        };
        match self.timeout {
            Some(limit) if down >= limit && self.gave_up.is_none() => {
                out.status = Some(status("gave_up"));
                out.give_up = true;
                self.gave_up = Some((u.clone(), limit));
            }
            // Given up already: the stop is under way.
            Some(limit) if down >= limit => {}
            _ if self
                .reported
                .is_none_or(|t| now.saturating_duration_since(t) >= REPORT_EVERY) =>
            {
                out.status = Some(status("waiting"));
                self.reported = Some(now);
            }
            _ => {}
        }
        self.current = Some(u);
        out
    }

    /// The error an ingest that gave up stops with (at `now`, reading `uri`, having committed
    /// `committed`); `None` when it did not give up.
    pub fn error(&self, uri: &str, committed: &Positions, now: Instant) -> Option<Error> {
        let (u, limit) = self.gave_up.as_ref()?;
        let at: Vec<String> = committed.iter().map(|(s, p)| format!("{s}={p}")).collect();
        Some(Error::InputFile {
            path: uri.into(),
            reason: format!(
                "{} unreachable for {} s (--source-timeout {} s): {}; the table holds everything read before (positions {}), a restart resumes there",
                u.what,
                now.saturating_duration_since(u.since).as_secs(),
                limit.as_secs_f64(),
                u.reason,
                if at.is_empty() { "none".to_string() } else { at.join(", ") }
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn down_since(since: Instant) -> Option<Unreachable> {
        Some(Unreachable {
            what: "Kafka broker b:9092".into(),
            reason: "connection refused".into(),
            since,
            position: 42,
        })
    }

    fn event(o: &Observed) -> Option<&'static str> {
        o.status.as_ref().map(|s| s.event)
    }

    #[test]
    fn a_wait_is_reported_every_five_seconds_and_its_end_once() {
        let t0 = Instant::now();
        let mut o = Outage::new(None);
        assert!(o.observe(None, t0).status.is_none());
        let first = o.observe(down_since(t0), t0 + S(1));
        assert_eq!(event(&first), Some("waiting"));
        assert_eq!(first.down, Some(S(1)));
        let s = first.status.unwrap();
        assert_eq!(
            (s.unreachable_s, s.position, s.gives_up_in_s),
            (1, 42, None)
        );
        assert_eq!(event(&o.observe(down_since(t0), t0 + S(4))), None);
        assert_eq!(
            event(&o.observe(down_since(t0), t0 + S(6))),
            Some("waiting")
        );
        let back = o.observe(None, t0 + S(8));
        assert_eq!(event(&back), Some("reachable"));
        assert_eq!(back.status.unwrap().unreachable_s, 8);
        assert!(back.down.is_none() && !back.give_up);
        assert!(
            o.observe(None, t0 + S(9)).status.is_none(),
            "announced once"
        );
        assert!(o
            .error("kafka://b/t", &Positions::new(), t0 + S(9))
            .is_none());
    }

    #[test]
    fn the_timeout_gives_up_once_and_names_the_committed_positions() {
        let t0 = Instant::now();
        let mut o = Outage::new(Some(S(10)));
        let w = o.observe(down_since(t0), t0 + S(3));
        assert_eq!(w.status.unwrap().gives_up_in_s, Some(7));
        let g = o.observe(down_since(t0), t0 + S(10));
        assert_eq!(event(&g), Some("gave_up"));
        assert!(g.give_up);
        let again = o.observe(down_since(t0), t0 + S(11));
        assert!(
            again.status.is_none() && !again.give_up,
            "the stop is under way"
        );
        let committed: Positions = [("kafka:t:0".to_string(), 42)].into();
        let e = o.error("kafka://b/t", &committed, t0 + S(12)).unwrap();
        let msg = e.to_string();
        assert!(
            msg.contains("unreachable for 12 s (--source-timeout 10 s)"),
            "{msg}"
        );
        assert!(msg.contains("positions kafka:t:0=42"), "{msg}");
        let none = o
            .error("kafka://b/t", &Positions::new(), t0 + S(12))
            .unwrap();
        assert!(none.to_string().contains("positions none"), "{none}");
    }

    #[test]
    fn an_outage_never_reported_ends_silently() {
        let t0 = Instant::now();
        let mut o = Outage::new(Some(S(0)));
        // Gave up at once: the status is `gave_up`, not a reported wait.
        assert!(o.observe(down_since(t0), t0).give_up);
        assert!(o.observe(None, t0 + S(1)).status.is_none());
    }
}
