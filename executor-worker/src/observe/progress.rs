//! Publishing a running episode's progress: each change of [`ProgressNow`] becomes an
//! `EpisodeProgress` notice, at most one per [`PROGRESS_EVERY`] (the latest state wins), until
//! the episode's observer is dropped or the task is aborted.

use loopgate_protocol::wire::EpisodeProgress;
use loopgate_transport::runtime::{report_progress, send_throttled, PROGRESS_EVERY};
use loopgate_transport::Bus;
use tokio::sync::watch;

use crate::observe::ProgressNow;

/// Publish `template` with each new state from `rx`, throttled.
pub(crate) async fn publish_progress(
    bus: Bus,
    template: EpisodeProgress,
    rx: watch::Receiver<ProgressNow>,
) {
    send_throttled(rx, PROGRESS_EVERY, |now, elapsed, seq| {
        let notice = EpisodeProgress {
            turn: now.turn,
            tool: now.tool,
            tool_calls: now.tool_calls,
            tokens: now.tokens,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            ..template.clone()
        };
        let bus = bus.clone();
        async move { report_progress(&bus, notice, seq).await }
    })
    .await;
}
