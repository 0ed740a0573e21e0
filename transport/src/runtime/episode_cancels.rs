//! Which episodes this worker is running, so a `CancelEpisodes` notice (core NATS, on
//! `control.<run>`) can stop them: every in-flight episode (an executor step or an audit)
//! registers its run and generation and gets a token that the notice cancels. Notices are
//! remembered for a while, so a request of a cancelled generation picked up after the notice
//! is dropped too. [`EpisodeCancels::listen`] subscribes to the notices and applies them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use loopgate_protocol::wire::{decode, Message};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, Subscriber};
use crate::bus_error::BusError;

/// The header naming a request's dispatch (its JetStream dedup id), which scoped notices name.
pub const DISPATCH_ID_HEADER: &str = "Nats-Msg-Id";

/// How long a cancellation is remembered.
pub const REMEMBER_CANCELLED: Duration = Duration::from_secs(3600);

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    running: Vec<Running>,
    /// run -> (highest cancelled generation, when).
    cancelled: HashMap<String, (u32, Instant)>,
    /// Dispatch ids (the request's `Nats-Msg-Id`) of single steps cancelled, and when.
    cancelled_dispatches: HashMap<String, Instant>,
}

#[derive(Debug)]
struct Running {
    id: u64,
    run_id: String,
    generation: u32,
    dispatch: Option<String>,
    token: CancellationToken,
}

/// In-flight episodes and remembered cancellations. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct EpisodeCancels {
    inner: Arc<Mutex<Inner>>,
}

/// An episode's registration; unregisters when dropped.
#[derive(Debug)]
pub struct Registration {
    cancels: EpisodeCancels,
    id: u64,
    token: CancellationToken,
}

impl Registration {
    /// Cancelled when a notice covers this episode.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cancels.lock().running.retain(|r| r.id != self.id);
    }
}

impl EpisodeCancels {
    pub fn new() -> Self {
        EpisodeCancels::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing here can panic while holding the lock; stay usable regardless.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers an episode. Its token is already cancelled when a remembered notice covers
    /// it.
    pub fn register(&self, run_id: &str, generation: u32) -> Registration {
        self.register_dispatch(run_id, generation, None)
    }

    /// Registers an episode of one dispatched request (`dispatch`: its `Nats-Msg-Id`), so a
    /// notice scoped to that dispatch stops it and nothing else.
    pub fn register_dispatch(
        &self,
        run_id: &str,
        generation: u32,
        dispatch: Option<&str>,
    ) -> Registration {
        let token = CancellationToken::new();
        let mut inner = self.lock();
        if covered(&inner, run_id, generation, dispatch, Instant::now()) {
            token.cancel();
        }
        inner.next_id += 1;
        let id = inner.next_id;
        inner.running.push(Running {
            id,
            run_id: run_id.to_string(),
            generation,
            dispatch: dispatch.map(str::to_string),
            token: token.clone(),
        });
        Registration {
            cancels: self.clone(),
            id,
            token,
        }
    }

    /// A notice: cancels this run's episodes with generation <= `generation` and remembers
    /// it. Returns how many running episodes it stopped.
    pub fn cancel(&self, run_id: &str, generation: u32) -> usize {
        self.cancel_at(run_id, generation, Instant::now())
    }

    fn cancel_at(&self, run_id: &str, generation: u32, now: Instant) -> usize {
        let mut inner = self.lock();
        inner
            .cancelled
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < REMEMBER_CANCELLED);
        let entry = inner
            .cancelled
            .entry(run_id.to_string())
            .or_insert((generation, now));
        *entry = (entry.0.max(generation), now);
        let mut stopped = 0;
        for running in &inner.running {
            if running.run_id == run_id && running.generation <= generation {
                running.token.cancel();
                stopped += 1;
            }
        }
        stopped
    }

    /// A notice scoped to one dispatched step (a missed deadline): stops that step's episode
    /// and remembers it, so its redelivery is dropped; later steps of the run go on. Returns
    /// how many running episodes it stopped.
    pub fn cancel_dispatch(&self, run_id: &str, dispatch: &str) -> usize {
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .cancelled_dispatches
            .retain(|_, at| now.saturating_duration_since(*at) < REMEMBER_CANCELLED);
        inner.cancelled_dispatches.insert(dispatch.to_string(), now);
        let mut stopped = 0;
        for running in &inner.running {
            if running.run_id == run_id && running.dispatch.as_deref() == Some(dispatch) {
                running.token.cancel();
                stopped += 1;
            }
        }
        stopped
    }

    /// True when a remembered notice covers this run and generation.
    pub fn is_cancelled(&self, run_id: &str, generation: u32) -> bool {
        covered(&self.lock(), run_id, generation, None, Instant::now())
    }

    /// True when a remembered notice covers this run and generation, or this dispatch.
    pub fn is_dispatch_cancelled(
        &self,
        run_id: &str,
        generation: u32,
        dispatch: Option<&str>,
    ) -> bool {
        covered(&self.lock(), run_id, generation, dispatch, Instant::now())
    }

    pub fn running(&self) -> usize {
        self.lock().running.len()
    }

    /// Subscribe to `<prefix>.control.>` and apply every notice until `stop` fires. The
    /// subscription is flushed before this returns, so no notice published after it is missed
    /// once the caller starts taking work.
    pub async fn listen(
        &self,
        bus: &Bus,
        stop: CancellationToken,
    ) -> Result<JoinHandle<()>, BusError> {
        let notices = bus.subscribe_core(&bus.subjects().control_all()).await?;
        bus.flush().await?;
        let cancels = self.clone();
        Ok(tokio::spawn(apply_notices(
            notices,
            stop,
            move |notice| match &notice.dispatch {
                Some(dispatch) => cancels.cancel_dispatch(&notice.run_id, dispatch),
                None => cancels.cancel(&notice.run_id, notice.generation),
            },
        )))
    }
}

fn covered(
    inner: &Inner,
    run_id: &str,
    generation: u32,
    dispatch: Option<&str>,
    now: Instant,
) -> bool {
    let fresh = |at: &Instant| now.saturating_duration_since(*at) < REMEMBER_CANCELLED;
    let generation_cancelled = inner
        .cancelled
        .get(run_id)
        .is_some_and(|(cancelled, at)| generation <= *cancelled && fresh(at));
    let dispatch_cancelled =
        dispatch.is_some_and(|d| inner.cancelled_dispatches.get(d).is_some_and(fresh));
    generation_cancelled || dispatch_cancelled
}

/// Apply every `CancelEpisodes` notice from `notices` with `on_cancel` (which returns how many
/// in-flight episodes it stopped) until `stop` fires or the subscription ends.
async fn apply_notices(
    mut notices: Subscriber,
    stop: CancellationToken,
    on_cancel: impl Fn(&loopgate_protocol::wire::CancelEpisodes) -> usize,
) {
    loop {
        let notice = tokio::select! {
            () = stop.cancelled() => break,
            notice = notices.next() => notice,
        };
        let Some(notice) = notice else {
            tracing::warn!("control subscription ended");
            break;
        };
        match decode(&notice.payload) {
            Ok(Message::CancelEpisodes(notice)) => {
                let stopped = on_cancel(&notice);
                tracing::info!(
                    run_id = %notice.run_id,
                    generation = notice.generation,
                    dispatch = ?notice.dispatch,
                    reason = %notice.reason,
                    stopped,
                    "cancel notice"
                );
            }
            Ok(other) => tracing::debug!(kind = other.kind(), "ignoring control message"),
            Err(err) => tracing::warn!(error = %err, "undecodable control message"),
        }
    }
    let _ = notices.unsubscribe().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_cancel_covered_generations_only() {
        let cancels = EpisodeCancels::new();
        let old = cancels.register("run-a", 1);
        let current = cancels.register("run-a", 2);
        let newer = cancels.register("run-a", 3);
        let other = cancels.register("run-b", 1);
        assert_eq!(cancels.running(), 4);
        assert_eq!(cancels.cancel("run-a", 2), 2);
        assert!(old.token().is_cancelled() && current.token().is_cancelled());
        assert!(!newer.token().is_cancelled() && !other.token().is_cancelled());
        assert!(cancels.is_cancelled("run-a", 1) && cancels.is_cancelled("run-a", 2));
        assert!(!cancels.is_cancelled("run-a", 3) && !cancels.is_cancelled("run-b", 1));
        // A later, lower notice does not lower the remembered generation.
        cancels.cancel("run-a", 1);
        assert!(cancels.is_cancelled("run-a", 2));
        drop(old);
        assert_eq!(cancels.running(), 3);
    }

    #[test]
    fn a_dispatch_notice_stops_that_step_only() {
        let cancels = EpisodeCancels::new();
        let late = cancels.register_dispatch("r1", 1, Some("r1:1:1:exec"));
        let next = cancels.register_dispatch("r1", 1, Some("r1:1:2:exec"));
        let other_run = cancels.register_dispatch("r2", 1, Some("r1:1:1:exec"));
        assert_eq!(cancels.cancel_dispatch("r1", "r1:1:1:exec"), 1);
        assert!(late.token().is_cancelled());
        assert!(!next.token().is_cancelled() && !other_run.token().is_cancelled());
        // Its redelivery is dropped; the run's later steps (same generation) are not.
        assert!(cancels.is_dispatch_cancelled("r1", 1, Some("r1:1:1:exec")));
        assert!(!cancels.is_dispatch_cancelled("r1", 1, Some("r1:1:3:exec")));
        assert!(!cancels.is_cancelled("r1", 1));
        assert!(cancels
            .register_dispatch("r1", 1, Some("r1:1:1:exec"))
            .token()
            .is_cancelled());
        assert!(!cancels
            .register_dispatch("r1", 1, Some("r1:1:3:exec"))
            .token()
            .is_cancelled());
        // A whole-generation notice still covers every step of it.
        cancels.cancel("r1", 1);
        assert!(next.token().is_cancelled());
    }

    #[test]
    fn late_registrations_start_cancelled_and_memory_expires() {
        let cancels = EpisodeCancels::new();
        let start = Instant::now();
        assert_eq!(cancels.cancel_at("run-a", 4, start), 0);
        assert!(cancels.register("run-a", 4).token().is_cancelled());
        assert!(!cancels.register("run-a", 5).token().is_cancelled());
        // An old memory is pruned by the next notice.
        let later = start + REMEMBER_CANCELLED + Duration::from_secs(1);
        cancels.cancel_at("run-z", 1, later);
        assert!(!cancels.lock().cancelled.contains_key("run-a"));
    }

    #[test]
    fn notices_cancel_running_and_later_audits_up_to_their_generation() {
        let cancels = EpisodeCancels::new();
        let old = cancels.register("r1", 1);
        let newer = cancels.register("r1", 2);
        let other = cancels.register("r2", 1);
        assert_eq!(cancels.cancel("r1", 1), 1);
        assert!(old.token().is_cancelled());
        assert!(!newer.token().is_cancelled());
        assert!(!other.token().is_cancelled());
        assert!(cancels.is_cancelled("r1", 1));
        assert!(!cancels.is_cancelled("r1", 2));
        // Picked up after the notice: cancelled from the start.
        assert!(cancels.register("r1", 1).token().is_cancelled());
        drop(old);
        assert_eq!(cancels.cancel("r1", 2), 1);
        assert!(newer.token().is_cancelled());
    }
}
