//! Capability heartbeats: a worker announces what it serves (routes, model profile names) every
//! third of its TTL and withdraws on shutdown (`announce_capabilities`); a manager listens and
//! keeps what has not expired (`CapabilityBoard`). Executors announce on
//! `heartbeat.capabilities`, auditors on `heartbeat.auditor`; the board takes a beat's role from
//! its subject (which the NATS permissions tie to the role), never from its body.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use loopgate_protocol::capabilities::{CapabilityBeat, LiveCapabilities};
use loopgate_protocol::gui::GuiBackend;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::EpisodeRole;
use tokio_util::sync::CancellationToken;

use crate::bus::Bus;
use crate::bus_error::BusError;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What a worker announces: who it is, its role, the routes it serves (executors only) and
/// the names of its model profiles (names only: never keys or URLs).
#[derive(Debug, Clone)]
pub struct Announcement {
    pub worker_id: String,
    pub role: EpisodeRole,
    pub capabilities: Vec<Capability>,
    pub profiles: Vec<String>,
    /// The gui backends served (with `gui`).
    pub gui_backends: Vec<GuiBackend>,
}

fn heartbeat_subject(bus: &Bus, role: EpisodeRole) -> String {
    match role {
        EpisodeRole::Executor => bus.subjects().capability_heartbeat(),
        EpisodeRole::Auditor => bus.subjects().auditor_heartbeat(),
    }
}

/// Announce `what` every `ttl / 3` until `cancel` fires, then withdraw it.
pub async fn announce_capabilities(
    bus: Bus,
    what: Announcement,
    ttl: Duration,
    cancel: CancellationToken,
) {
    let subject = heartbeat_subject(&bus, what.role);
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let worker_id = what.worker_id;
    let role = what.role;
    let beat = CapabilityBeat {
        worker_id: worker_id.clone(),
        role,
        capabilities: what.capabilities,
        profiles: what.profiles,
        gui_backends: what.gui_backends,
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
        role,
        capabilities: Vec::new(),
        profiles: Vec::new(),
        gui_backends: Vec::new(),
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
        let executors = bus
            .subscribe_core(&heartbeat_subject(bus, EpisodeRole::Executor))
            .await?
            .map(|msg| (EpisodeRole::Executor, msg));
        let auditors = bus
            .subscribe_core(&heartbeat_subject(bus, EpisodeRole::Auditor))
            .await?
            .map(|msg| (EpisodeRole::Auditor, msg));
        let mut sub = futures::stream::select(executors, auditors);
        let board = CapabilityBoard::default();
        let live = board.live.clone();
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    () = cancel.cancelled() => return,
                    msg = sub.next() => msg,
                };
                let Some((role, msg)) = msg else { return };
                match serde_json::from_slice::<CapabilityBeat>(&msg.payload) {
                    Ok(mut beat) => {
                        beat.role = role;
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

    /// Whether the gui route is offered now for a task needing `backend`: `configured` and
    /// served by a live executor announcing that backend.
    pub fn offers_gui(&self, backend: GuiBackend, configured: bool) -> bool {
        self.live
            .lock()
            .map(|mut live| live.offers_gui(backend, configured, now_ms()))
            .unwrap_or(false)
    }

    /// The model profile names live workers of `role` announce now, with how many workers
    /// announce each.
    pub fn profiles(&self, role: EpisodeRole) -> BTreeMap<String, u32> {
        self.live
            .lock()
            .map(|mut live| live.profiles(role, now_ms()))
            .unwrap_or_default()
    }
}
