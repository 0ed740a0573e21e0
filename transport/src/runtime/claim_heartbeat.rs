//! The heartbeat task of a held claim: it rewrites the claim every third of `ack_wait`,
//! pauses the episode the moment `ack_wait` has passed since the last write that landed was
//! sent, keeps trying while paused, and resumes it or reports a take-over.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{EpisodeClaims, Record};
use crate::bus_error::BusError;
use crate::runtime::keep_alive::progress_interval;

/// How often a paused holder tries to write its claim again.
pub(super) const PAUSED_RETRY: Duration = Duration::from_millis(250);

/// How long one of a paused holder's tries may take (a request into a connection the server
/// dropped is not answered; the next try goes out on the new one).
pub(super) const PAUSED_TRY_LIMIT: Duration = Duration::from_secs(1);

/// What the heartbeat task of one claim shares with its guard.
pub(super) struct Heartbeat {
    pub(super) claims: EpisodeClaims,
    pub(super) key: String,
    pub(super) holder: String,
    pub(super) revision: Arc<Mutex<u64>>,
    pub(super) pause: watch::Sender<bool>,
    pub(super) taken_over: CancellationToken,
    pub(super) storing: Arc<AtomicBool>,
}

/// When the next heartbeat goes out: while the episode works, never past its deadline; while
/// it is paused, every [`PAUSED_RETRY`]; once it only stores its result
/// (`ClaimGuard::only_storing`) the deadline no longer bounds it.
pub(super) fn next_beat(
    now: Instant,
    every: Duration,
    alive_until: Instant,
    paused: bool,
    storing: bool,
) -> Instant {
    if paused {
        now + PAUSED_RETRY
    } else if storing {
        now + every
    } else {
        (now + every).min(alive_until)
    }
}

/// Pure rule: at `sent`, past `alive_until`, the holder pauses unless it only stores a result.
pub(super) fn must_pause(sent: Instant, alive_until: Instant, storing: bool) -> bool {
    sent >= alive_until && !storing
}

/// How long one heartbeat sent at `sent` may take: within its deadline while the episode
/// works; [`PAUSED_TRY_LIMIT`] past it, so a paused holder tries again soon.
pub(super) fn beat_limit(sent: Instant, every: Duration, alive_until: Instant) -> Duration {
    if sent >= alive_until {
        every.min(PAUSED_TRY_LIMIT)
    } else {
        every.min(alive_until - sent)
    }
}

/// Rewrite the claim every heartbeat interval. The holder works until `ack_wait` after it
/// *sent* its last heartbeat that landed, and pauses the moment that passes (not at the next
/// failed try), so a watcher reading the server's stamps knows when it has paused. A paused
/// holder keeps trying; a write that lands resumes the episode, one that finds the claim
/// another's stops it. An episode that only stores its result does not pause (see
/// `ClaimGuard::only_storing`).
pub(super) async fn heartbeat_loop(beat: Heartbeat, claimed_sent: Instant) {
    let Heartbeat {
        claims,
        key,
        holder,
        revision,
        pause,
        taken_over,
        storing,
    } = beat;
    let every = progress_interval(claims.ack_wait);
    let record = Record::Running {
        holder: holder.clone(),
    };
    let mut alive_until = claimed_sent + claims.ack_wait;
    loop {
        let wake = next_beat(
            Instant::now(),
            every,
            alive_until,
            *pause.borrow(),
            storing.load(Ordering::SeqCst),
        );
        tokio::time::sleep_until(wake).await;
        let sent = Instant::now();
        if !*pause.borrow() && must_pause(sent, alive_until, storing.load(Ordering::SeqCst)) {
            tracing::error!(%key, "no claim heartbeat reached NATS for ack_wait: pausing the episode until one does");
            pause.send_replace(true);
        }
        let current = *revision.lock().await;
        let budget = beat_limit(sent, every, alive_until);
        let written =
            tokio::time::timeout(budget, claims.write_own(&key, &holder, current, &record))
                .await
                .unwrap_or(Err(BusError::Timeout {
                    op: "episode claim heartbeat",
                    after: budget,
                }));
        match written {
            Ok(Some(next)) => {
                *revision.lock().await = next;
                alive_until = sent + claims.ack_wait;
                if pause.send_replace(false) {
                    tracing::warn!(%key, "the claim heartbeat reached NATS again and the step is still this episode's: resuming");
                }
            }
            Ok(None) => {
                tracing::error!(%key, "another episode took this step over: stopping");
                taken_over.cancel();
                return;
            }
            Err(err) => {
                tracing::warn!(%key, error = %err, left = ?alive_until.saturating_duration_since(Instant::now()), "episode claim heartbeat failed");
            }
        }
    }
}
