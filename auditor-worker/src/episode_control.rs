//! The auditor's side of episode control: it announces each audit it picks up
//! (`EpisodeStarted` on `result.started.<run>`, so the manager times the audit from its real
//! start), and it obeys `CancelEpisodes` notices on `control.>` (core NATS): an in-flight audit
//! of a cancelled run generation is dropped (its checks killed, no report) and requests of a
//! cancelled generation picked up later are terminated unrun.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use loopgate_common::wire::{AuditRequest, Envelope, EpisodeRole, EpisodeStarted, Message};
use loopgate_transport::Bus;
use tokio_util::sync::CancellationToken;

/// How long a cancelled generation is remembered.
pub const REMEMBER_CANCELLED: Duration = Duration::from_secs(3600);

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    /// (id, run, generation, token) of audits in flight.
    running: Vec<(u64, String, u32, CancellationToken)>,
    /// run -> (highest cancelled generation, when).
    cancelled: HashMap<String, (u32, Instant)>,
}

/// Audits in flight and remembered cancellations. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct AuditCancels {
    inner: Arc<Mutex<Inner>>,
}

/// One registered audit; unregisters on drop.
#[derive(Debug)]
pub struct Registration {
    cancels: AuditCancels,
    id: u64,
    token: CancellationToken,
}

impl Registration {
    /// Cancelled when a notice covers this audit.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cancels
            .lock()
            .running
            .retain(|(id, ..)| *id != self.id);
    }
}

impl AuditCancels {
    pub fn new() -> AuditCancels {
        AuditCancels::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Is generation `generation` of `run_id` cancelled (by a notice remembered now)?
    pub fn is_cancelled(&self, run_id: &str, generation: u32) -> bool {
        self.lock()
            .cancelled
            .get(run_id)
            .is_some_and(|(upto, at)| generation <= *upto && at.elapsed() < REMEMBER_CANCELLED)
    }

    pub fn register(&self, run_id: &str, generation: u32) -> Registration {
        let token = CancellationToken::new();
        if self.is_cancelled(run_id, generation) {
            token.cancel();
        }
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner
            .running
            .push((id, run_id.to_string(), generation, token.clone()));
        Registration {
            cancels: self.clone(),
            id,
            token,
        }
    }

    /// Cancel every audit of `run_id` up to `generation`; returns how many were running.
    pub fn cancel(&self, run_id: &str, generation: u32) -> usize {
        let mut inner = self.lock();
        inner
            .cancelled
            .retain(|_, (_, at)| at.elapsed() < REMEMBER_CANCELLED);
        let entry = inner
            .cancelled
            .entry(run_id.to_string())
            .or_insert((generation, Instant::now()));
        *entry = (entry.0.max(generation), Instant::now());
        let mut stopped = 0;
        for (_, run, gen, token) in &inner.running {
            if run == run_id && *gen <= generation {
                token.cancel();
                stopped += 1;
            }
        }
        stopped
    }
}

/// `{run}:{generation}:{round}:audit-started:{purpose}:{attempt}`
pub fn started_msg_id(req: &AuditRequest, attempt: u64) -> String {
    format!(
        "{}:{}:{}:audit-started:{}:{attempt}",
        req.run_id,
        req.generation,
        req.round,
        crate::audit_rules::purpose_word(req.purpose)
    )
}

/// Tell the manager the audit starts. Best effort: the report is what counts.
pub async fn publish_started(bus: &Bus, worker: &str, req: &AuditRequest, attempt: u64) {
    let message = Message::EpisodeStarted(EpisodeStarted {
        run_id: req.run_id.clone(),
        generation: req.generation,
        round: req.round,
        role: EpisodeRole::Auditor,
        delivery_attempt: attempt,
        worker: worker.to_string(),
    });
    let subject = bus.subjects().started(&req.run_id);
    let msg_id = started_msg_id(req, attempt);
    if let Err(err) = bus
        .publish_json(&subject, &Envelope::new(&message), &msg_id, &[])
        .await
    {
        tracing::warn!(error = %err, %subject, "publishing EpisodeStarted failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_cancel_running_and_later_audits_up_to_their_generation() {
        let cancels = AuditCancels::new();
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
