//! Any start order: a worker waits for whoever owns the JetStream topology (the manager)
//! instead of failing or creating it itself. In Kubernetes pods start in any order, so the
//! wait has no deadline of its own: it ends when the topology is complete or the worker is told
//! to stop, and it says what it still waits for.
//!
//! A worker never creates the topology, even where its credentials would let it (development,
//! one user for everything): a worker's default sizing would create streams and buckets with
//! one replica for the manager to scale up later, and a scale-up racing a worker's durable
//! creation on the same stream can leave the consumer broken or the stream on its first node
//! only. A worker gains nothing from creating: no work comes until a manager runs, and the
//! manager makes the topology at its own sizing on its first start.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bus::Bus;
use crate::topology::TopologyRole;

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A still-waiting worker repeats its warning at most this often.
const REPEAT_WARNING: Duration = Duration::from_secs(30);

/// How the wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyWait {
    /// Every stream, bucket and the `audit` durable exist.
    Ready,
    /// `cancel` fired first.
    Cancelled,
}

/// Wait until the topology `role` needs exists, re-checking with backoff. `on_missing` hears
/// the missing parts each time they are looked up and found incomplete (for readiness probes).
pub async fn await_topology(
    bus: &Bus,
    role: TopologyRole,
    cancel: &CancellationToken,
    mut on_missing: impl FnMut(&[String]),
) -> TopologyWait {
    let mut backoff = FIRST_BACKOFF;
    // When the worker last said what it waits for: at once, then every `REPEAT_WARNING`.
    let mut warned_at: Option<Instant> = None;
    loop {
        if cancel.is_cancelled() {
            return TopologyWait::Cancelled;
        }
        let missing = tokio::select! {
            () = cancel.cancelled() => return TopologyWait::Cancelled,
            missing = bus.missing_topology(role) => missing,
        };
        if missing.is_empty() {
            if warned_at.is_some() {
                tracing::info!("JetStream topology is complete; starting");
            }
            return TopologyWait::Ready;
        }
        on_missing(&missing);
        if warned_at.is_none_or(|at| at.elapsed() >= REPEAT_WARNING) {
            warned_at = Some(Instant::now());
            tracing::warn!(
                ?missing,
                "waiting for the JetStream topology (the manager creates it)"
            );
        }
        tokio::select! {
            () = cancel.cancelled() => return TopologyWait::Cancelled,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
