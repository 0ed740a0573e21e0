//! Reporting a running episode's progress: an executor's `EpisodeProgress` on
//! `result.progress.exec.<run>`, an auditor's `AuditProgress` on `result.progress.audit.<run>`
//! (only that role may publish there), each under a sealed id of its role's shape. Best
//! effort: a failure is logged and the episode goes on.

use loopgate_protocol::dispatch_id::{sealed, StepKey};
use loopgate_protocol::wire::{AuditProgress, Envelope, EpisodeProgress, Message};

use crate::bus::Bus;

/// Publish `progress`, the `seq`-th notice of its episode.
pub async fn report_progress(bus: &Bus, progress: EpisodeProgress, seq: u64) {
    let subject = bus.subjects().exec_progress(&progress.run_id);
    let step = StepKey {
        run_id: &progress.run_id,
        generation: progress.generation,
        round: progress.round,
    };
    let prefix = step.exec_progress_msg_id(progress.delivery_attempt, progress.attempt, seq);
    let msg_id = sealed(&prefix, &uuid::Uuid::new_v4().simple().to_string());
    let message = Message::EpisodeProgress(progress);
    if let Err(err) = bus
        .publish_json(&subject, &Envelope::new(&message), &msg_id, &[])
        .await
    {
        tracing::warn!(error = %err, %subject, "publishing EpisodeProgress failed");
    }
}

/// Publish `progress`, the `seq`-th notice of its audit.
pub async fn report_audit_progress(bus: &Bus, progress: AuditProgress, seq: u64) {
    let subject = bus.subjects().audit_progress(&progress.run_id);
    let step = StepKey {
        run_id: &progress.run_id,
        generation: progress.generation,
        round: progress.round,
    };
    let prefix = step.audit_progress_msg_id(progress.purpose, progress.delivery_attempt, seq);
    let msg_id = sealed(&prefix, &uuid::Uuid::new_v4().simple().to_string());
    let message = Message::AuditProgress(progress);
    if let Err(err) = bus
        .publish_json(&subject, &Envelope::new(&message), &msg_id, &[])
        .await
    {
        tracing::warn!(error = %err, %subject, "publishing AuditProgress failed");
    }
}
