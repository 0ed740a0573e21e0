//! Any start order: a worker whose credentials may not create the JetStream topology waits
//! for whoever may (the manager) instead of failing or retrying a creation it is refused. In
//! Kubernetes pods start in any order, so the wait has no deadline of its own: it ends when the
//! topology is complete or the worker is told to stop, and it says what it still waits for.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bus::Bus;
use crate::topology::TopologyRole;

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A still-waiting worker tries to create the topology and repeats its warning at most this often.
const REPEAT_WARNING: Duration = Duration::from_secs(30);

/// How the wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyWait {
    /// Every stream, bucket and the `audit` durable exist.
    Ready,
    /// `cancel` fired first.
    Cancelled,
}

/// Make sure the topology `role` needs exists: create it where these credentials may (development, the
/// manager), else wait until it appears, re-checking with backoff. `on_missing` hears the
/// missing parts each time they are looked up and found incomplete (for readiness probes).
pub async fn await_topology(
    bus: &Bus,
    role: TopologyRole,
    cancel: &CancellationToken,
    mut on_missing: impl FnMut(&[String]),
) -> TopologyWait {
    let mut backoff = FIRST_BACKOFF;
    // When these credentials last tried to create the topology. A restricted user's creation
    // request is refused only by a timeout (NATS reports the permission violation out of band),
    // so it is tried once, then again only every `REPEAT_WARNING`; looking up is cheap.
    let mut tried_at: Option<Instant> = None;
    let mut waited = false;
    loop {
        if cancel.is_cancelled() {
            return TopologyWait::Cancelled;
        }
        let missing = tokio::select! {
            () = cancel.cancelled() => return TopologyWait::Cancelled,
            missing = bus.missing_topology(role) => missing,
        };
        if missing.is_empty() {
            if waited {
                tracing::info!("JetStream topology is complete; starting");
            }
            return TopologyWait::Ready;
        }
        on_missing(&missing);
        if tried_at.is_none_or(|at| at.elapsed() >= REPEAT_WARNING) {
            tried_at = Some(Instant::now());
            let created = tokio::select! {
                () = cancel.cancelled() => return TopologyWait::Cancelled,
                created = tokio::time::timeout(bus.request_timeout(), bus.ensure_topology()) => created,
            };
            match created {
                Ok(Ok(())) => continue,
                Ok(Err(err)) => tracing::warn!(?missing, error = %err,
                    "waiting for the JetStream topology (the manager creates it)"),
                Err(_) => tracing::warn!(?missing,
                    "waiting for the JetStream topology (the manager creates it; these credentials may not)"),
            }
            waited = true;
        }
        tokio::select! {
            () = cancel.cancelled() => return TopologyWait::Cancelled,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
