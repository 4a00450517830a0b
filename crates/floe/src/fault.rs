//! Fault injection for crash tests: `FLOE_FAULT_PAUSE_<POINT>_MS=N` makes floe sleep N ms at a
//! named point (for example `BEFORE_COMMIT`, after compaction wrote its files and before it
//! commits), so a test can kill the process exactly there. Unset in production: no effect.

use std::time::Duration;

/// Sleeps if the environment asks for a pause at `point`.
pub async fn pause(point: &str) {
    let key = format!("FLOE_FAULT_PAUSE_{point}_MS");
    if let Some(ms) = std::env::var(&key).ok().and_then(|v| v.parse::<u64>().ok()) {
        tracing::warn!(%key, ms, "fault injection: pausing");
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// `Some(message)` when the environment asks the operation at `point` to fail
/// (`FLOE_FAULT_FAIL_<POINT>=message`), for tests of failure handling. Unset in production.
pub fn fail(point: &str) -> Option<String> {
    let key = format!("FLOE_FAULT_FAIL_{point}");
    std::env::var(&key)
        .ok()
        .map(|m| format!("fault injection ({key}): {m}"))
}
