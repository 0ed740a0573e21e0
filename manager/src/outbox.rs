//! The transactional outbox. A transition's effects (work, audit and decision requests,
//! cancel notices) are stored in the same compare-and-set as the run record
//! (`CasWrite::effects`), published right after it, and forgotten once published. A replica
//! that stops between the two, or a publish that fails, leaves them pending: the relay on any
//! replica claims runs whose effects are older than [`REPUBLISH_AFTER`] and publishes them
//! again. Every effect carries a stable dedup id (its `Nats-Msg-Id`), so a double publish
//! within JetStream's duplicate window stores one message.

use std::time::Duration;

use loopgate_common::state::Outgoing;
use loopgate_transport::runtime::{run_periodically, FirstPass};
use opentelemetry::KeyValue;
use tokio_util::sync::CancellationToken;

use crate::effects::StoredEffect;
use crate::engine::{now_ms, Engine, EngineError};

/// Pending effects older than this are published again by the relay (the default of
/// `[manager] outbox_republish_after_ms`).
pub const REPUBLISH_AFTER: Duration = Duration::from_secs(3);
/// How often each replica's relay looks.
pub const RELAY_EVERY: Duration = Duration::from_secs(1);
/// Runs claimed per relay pass.
const RELAY_BATCH: usize = 100;

pub struct OutboxRelay {
    pub engine: Engine,
    pub every: Duration,
    pub after: Duration,
}

impl OutboxRelay {
    pub async fn run(self, cancel: CancellationToken) {
        run_periodically("outbox relay", self.every, FirstPass::Now, cancel, || {
            self.relay_once()
        })
        .await
    }

    /// One pass: publish the effects of every claimed run; returns how many were published.
    pub async fn relay_once(&self) -> Result<usize, EngineError> {
        let store = self.engine.store();
        let now = now_ms();
        let after_ms = i64::try_from(self.after.as_millis()).unwrap_or(i64::MAX);
        let claimed = store
            .claim_pending(now.saturating_sub(after_ms), now, RELAY_BATCH)
            .await?;
        let mut published = 0;
        for run_id in claimed {
            let pending = store.pending_effects(&run_id).await?;
            if pending.is_empty() {
                store.forget_pending(&run_id).await?;
                continue;
            }
            let mut effects = Vec::new();
            let mut undecodable = Vec::new();
            let mut trace = None;
            for (effect_id, json) in pending {
                match serde_json::from_str::<StoredEffect>(&json) {
                    Ok(stored) => {
                        trace = trace.or(stored.trace_parent);
                        effects.push(stored.effect);
                    }
                    Err(e) => {
                        tracing::error!(run_id, effect_id, error = %e, "undecodable pending effect; dropped");
                        undecodable.push(effect_id);
                    }
                }
            }
            store.mark_published(&run_id, &undecodable).await?;
            // Work for a run that has ended since (or expired) is only cancelled, not started.
            let ended = match self.engine.load(&run_id).await {
                Ok(Some((_, record))) => record.state.is_terminal(),
                Ok(None) => true,
                Err(EngineError::Corrupt { .. }) => true,
                Err(e) => return Err(e),
            };
            if ended {
                let (notices, work): (Vec<Outgoing>, Vec<Outgoing>) = effects
                    .into_iter()
                    .partition(|e| e.target == loopgate_common::state::Target::Control);
                let dropped: Vec<String> = work.into_iter().map(|e| e.msg_id).collect();
                store.mark_published(&run_id, &dropped).await?;
                effects = notices;
            }
            let done = self
                .engine
                .publish_effects(&run_id, trace.as_deref(), &effects)
                .await;
            if !done.is_empty() {
                tracing::info!(
                    run_id,
                    effects = done.len(),
                    "pending effects published by the outbox relay"
                );
                self.engine
                    .metrics()
                    .outbox_republished
                    .add(done.len() as u64, &[KeyValue::new("kind", "effect")]);
            }
            published += done.len();
        }
        if let Ok(n) = store.pending_runs().await {
            self.engine.metrics().outbox_pending.record(n, &[]);
        }
        self.engine
            .metrics()
            .jetstream_publish_unacked
            .record(self.engine.bus().publish_unacked_for().as_secs_f64(), &[]);
        Ok(published)
    }
}
