//! Capability heartbeats: a worker announces what it serves every third of its TTL and
//! withdraws on shutdown (`announce_capabilities`); a manager listens and keeps what has not
//! expired (`CapabilityBoard`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use loopgate_common::capabilities::{CapabilityBeat, LiveCapabilities};
use loopgate_common::subjects::Capability;
use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, BusError};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Announce `capabilities` every `ttl / 3` until `cancel` fires, then withdraw them.
pub async fn announce_capabilities(
    bus: Bus,
    worker_id: String,
    capabilities: Vec<Capability>,
    ttl: Duration,
    cancel: CancellationToken,
) {
    let subject = bus.subjects().capability_heartbeat();
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let beat = CapabilityBeat {
        worker_id: worker_id.clone(),
        capabilities,
        ttl_ms,
    };
    let period = (ttl / 3).max(Duration::from_millis(200));
    loop {
        if let Err(e) = bus.publish_core_json(&subject, &beat).await {
            tracing::warn!(error = %e, "capability heartbeat not sent");
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(period) => {}
        }
    }
    let withdraw = CapabilityBeat {
        worker_id,
        capabilities: Vec::new(),
        ttl_ms,
    };
    if bus.publish_core_json(&subject, &withdraw).await.is_ok() {
        let _ = bus.flush().await;
    }
}

/// The capabilities live workers announce, as one manager heard them.
#[derive(Debug, Clone, Default)]
pub struct CapabilityBoard {
    live: Arc<Mutex<LiveCapabilities>>,
}

impl CapabilityBoard {
    /// Subscribe to the heartbeats and keep the board current until `cancel` fires.
    pub async fn listen(bus: &Bus, cancel: CancellationToken) -> Result<CapabilityBoard, BusError> {
        let mut sub = bus
            .subscribe_core(&bus.subjects().capability_heartbeat())
            .await?;
        let board = CapabilityBoard::default();
        let live = board.live.clone();
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    () = cancel.cancelled() => return,
                    msg = sub.next() => msg,
                };
                let Some(msg) = msg else { return };
                match serde_json::from_slice::<CapabilityBeat>(&msg.payload) {
                    Ok(beat) => {
                        if let Ok(mut live) = live.lock() {
                            live.observe(&beat, now_ms());
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "undecodable capability heartbeat"),
                }
            }
        });
        Ok(board)
    }

    /// Whether `capability` is offered now: `configured` (the upper bound) and served by a
    /// worker whose announcement has not expired.
    pub fn offers(&self, capability: Capability, configured: bool) -> bool {
        self.live
            .lock()
            .map(|mut live| live.offers(capability, configured, now_ms()))
            .unwrap_or(false)
    }
}
