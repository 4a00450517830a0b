//! Wake-ups of the task queue on PostgreSQL, through `LISTEN`/`NOTIFY`: a worker waiting for
//! tasks wakes when a coordinator queues some, and a coordinator waiting for its run wakes
//! when a worker reports a task, instead of at their next poll (the 500 ms polls were most of
//! the wall-time gap between a distributed run and a local one, see BENCHMARKS.md).
//!
//! Notifications only shorten waits: every waiter still polls at its interval, so a lost
//! notification, a listener connection that dropped, or SQLite (which has no notifications)
//! only costs latency, never a task. A notification is sent after the statement it announces
//! committed, so a woken waiter always finds what it was woken for.

use std::time::Duration;

use super::Store;

/// The channel coordinators notify when they queue tasks (and workers when a failed task is
/// queued again): idle workers listen on it.
pub const NEW_TASKS: &str = "floe_compact_tasks";

/// The channel of one run: its workers notify it when they report a task.
pub fn run_channel(run_id: &str) -> String {
    // Identifiers are at most 63 bytes: "floe_run_" and the 32 hex digits of a UUID.
    let id: String = run_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(40)
        .collect();
    format!("floe_run_{}", id.to_ascii_lowercase())
}

/// A waiter's listener: a PostgreSQL connection listening on one channel, or nothing (SQLite,
/// or the listener could not connect) and then waits are plain sleeps.
pub struct Wakeups {
    listener: Option<sqlx::postgres::PgListener>,
}

impl Store {
    /// Notifies `channel` (PostgreSQL; a no-op on SQLite). A failure is only logged: waiters
    /// poll anyway.
    pub async fn notify(&self, channel: &str) {
        if !self.is_postgres() {
            return;
        }
        if let Err(e) = sqlx::query("SELECT pg_notify($1, '')")
            .bind(channel)
            .execute(&self.pool)
            .await
        {
            tracing::debug!("notify {channel}: {e}");
        }
    }

    /// A listener on `channel` (PostgreSQL), else plain sleeps.
    pub async fn wakeups(&self, channel: &str) -> Wakeups {
        if !self.is_postgres() {
            return Wakeups { listener: None };
        }
        let listener = async {
            let mut l = sqlx::postgres::PgListener::connect(&self.uri).await?;
            l.listen(channel).await?;
            Ok::<_, sqlx::Error>(l)
        }
        .await;
        match listener {
            Ok(l) => Wakeups { listener: Some(l) },
            Err(e) => {
                tracing::warn!(
                    "listening on {} for queue notifications: {}; polling only",
                    self.display_uri,
                    super::describe_sqlx(&e)
                );
                Wakeups { listener: None }
            }
        }
    }
}

impl Wakeups {
    /// Returns after a notification, or after `max`.
    pub async fn wait(&mut self, max: Duration) {
        let Some(l) = self.listener.as_mut() else {
            tokio::time::sleep(max).await;
            return;
        };
        match tokio::time::timeout(max, l.recv()).await {
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => {
                // The connection dropped and could not be made again: poll from now on.
                tracing::warn!("queue notifications stopped: {e}; polling only");
                self.listener = None;
                tokio::time::sleep(max).await;
            }
        }
    }
}
