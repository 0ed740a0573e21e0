//! Announcing an episode: a worker that picks a step or an audit up publishes
//! `EpisodeStarted` on `result.started.exec.<run>` (executors) or `result.started.audit.<run>`
//! (auditors), so the manager times the episode from its real start (queue wait is not the
//! worker's fault). The subject fixes the role: each role's NATS user may publish only on its
//! own, and the manager refuses a role that disagrees with the subject. Best effort: a failure
//! is logged and the episode runs anyway; its result is what counts.

use loopgate_protocol::wire::{Envelope, EpisodeRole, EpisodeStarted, Message};

use crate::bus::Bus;

/// Publish `started` with the dedup id `msg_id`.
pub async fn announce_started(bus: &Bus, started: EpisodeStarted, msg_id: &str) {
    let subjects = bus.subjects();
    let subject = match started.role {
        EpisodeRole::Executor => subjects.exec_started(&started.run_id),
        EpisodeRole::Auditor => subjects.audit_started(&started.run_id),
    };
    let message = Message::EpisodeStarted(started);
    if let Err(err) = bus
        .publish_json(&subject, &Envelope::new(&message), msg_id, &[])
        .await
    {
        tracing::warn!(error = %err, %subject, "publishing EpisodeStarted failed");
    }
}
