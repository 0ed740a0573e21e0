//! Reporting a running executor episode's progress: `EpisodeProgress` on
//! `result.progress.exec.<run>` (only executors may publish there), under a sealed id of the
//! executor's shape. Best effort: a failure is logged and the episode goes on.

use loopgate_protocol::dispatch_id::{sealed, StepKey};
use loopgate_protocol::wire::{Envelope, EpisodeProgress, Message};

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
