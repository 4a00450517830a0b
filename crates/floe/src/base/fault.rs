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

/// Counts of probed events by (point, key): how often a table was scanned or a location
/// listed. Tests read them to prove work is done once (`floe maintain` plans each job once).
static PROBES: std::sync::Mutex<Option<std::collections::HashMap<(String, String), u64>>> =
    std::sync::Mutex::new(None);

/// Counts one `point` event on `key` (a table or directory location).
pub fn probe(point: &str, key: &str) {
    if let Ok(mut m) = PROBES.lock() {
        *m.get_or_insert_with(Default::default)
            .entry((point.to_string(), key.trim_end_matches('/').to_string()))
            .or_default() += 1;
    }
}

/// How many `point` events on `key` were counted so far in this process.
pub fn probed(point: &str, key: &str) -> u64 {
    PROBES
        .lock()
        .ok()
        .and_then(|m| {
            m.as_ref()?
                .get(&(point.to_string(), key.trim_end_matches('/').to_string()))
                .copied()
        })
        .unwrap_or(0)
}
