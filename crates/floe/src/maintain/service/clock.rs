//! The service's clocks: this machine's (with an injected skew, for tests), and the lease
//! store's, which leases, run records and triggers read; a warning when the two disagree.

use std::time::Instant;

use super::Maintainer;
use crate::base::error::Result;
use crate::base::properties::human_ms;

impl Maintainer {
    /// The store's clock as of the last pass, without asking it (for the times shown on the
    /// dashboard).
    pub(super) fn shown_now_ms(&self) -> i64 {
        self.local_now_ms().saturating_add(self.store_offset_ms)
    }

    /// This machine's clock (with the injected skew).
    pub(super) fn local_now_ms(&self) -> i64 {
        now_ms().saturating_add(self.clock_skew_ms)
    }

    /// The store's clock, and a warning (a tracing warning and a log line, once per interval)
    /// when this machine's clock disagrees with it by more than a quarter of the lease TTL.
    pub(super) async fn store_now_ms(&mut self) -> Result<i64> {
        let before = self.local_now_ms();
        let store = self.store.now_ms().await?;
        let after = self.local_now_ms();
        // The store read its clock between `before` and `after`.
        let local = before + (after - before) / 2;
        let skew = local - store;
        self.store_offset_ms = -skew;
        let limit = i64::try_from(self.opts.lease_ttl.as_millis() / 4).unwrap_or(i64::MAX);
        let due = self
            .skew_warned
            .is_none_or(|t| t.elapsed() >= self.opts.interval);
        if skew.unsigned_abs() > limit.unsigned_abs() && due {
            self.skew_warned = Some(Instant::now());
            let line = format!(
                "clock skew: this machine's clock reads {} and the lease store's {} ({} {} it, \
                 over a quarter of the {} lease TTL); leases and run times follow the store's clock",
                fmt_ms(local),
                fmt_ms(store),
                human_ms(round_to_seconds(skew.unsigned_abs())),
                if skew > 0 { "ahead of" } else { "behind" },
                human_ms(self.opts.lease_ttl.as_millis() as u64),
            );
            tracing::warn!(local_ms = local, store_ms = store, skew_ms = skew, "{line}");
            (self.log)(&line);
        }
        Ok(store)
    }
}

pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `ms` to the nearest second, from one second up (a skew reads `30s`, not `29s998ms`).
fn round_to_seconds(ms: u64) -> u64 {
    if ms < 1000 {
        ms
    } else {
        ms.saturating_add(500) / 1000 * 1000
    }
}

/// A time for messages: `2026-12-02T03:25:07.123Z`.
fn fmt_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}
