//! Publishing a running episode's progress: each change of [`ProgressNow`] becomes an
//! `EpisodeProgress` notice, at most one per [`PROGRESS_EVERY`] (the latest state wins), until
//! the episode's observer is dropped or the task is aborted.

use std::time::{Duration, Instant};

use loopgate_protocol::wire::EpisodeProgress;
use loopgate_transport::runtime::report_progress;
use loopgate_transport::Bus;
use tokio::sync::watch;

use crate::observe::throttle::Throttle;
use crate::observe::ProgressNow;

/// The least time between two progress notices of an episode.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Publish `template` with each new state from `rx`, throttled.
pub(crate) async fn publish_progress(
    bus: Bus,
    template: EpisodeProgress,
    mut rx: watch::Receiver<ProgressNow>,
) {
    let started = Instant::now();
    let mut throttle = Throttle::new(PROGRESS_EVERY);
    let mut seq: u64 = 0;
    while rx.changed().await.is_ok() {
        let wait = throttle.wait(started.elapsed());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let now = rx.borrow_and_update().clone();
        let elapsed = started.elapsed();
        throttle.sent(elapsed);
        seq += 1;
        let notice = EpisodeProgress {
            turn: now.turn,
            tool: now.tool,
            tool_calls: now.tool_calls,
            tokens: now.tokens,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            ..template.clone()
        };
        report_progress(&bus, notice, seq).await;
    }
}
