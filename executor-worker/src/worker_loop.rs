//! One worker loop per capability: pull an exec request, run the episode with progress acks
//! going out, publish the result, then ack. On shutdown it stops pulling; an in-flight episode
//! gets a grace period, after which it is dropped and the request nak'd for redelivery.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_common::subjects::Capability;
use loopgate_common::wire::{decode, Envelope, ExecRequest, ExecResult, Message};
use loopgate_transport::{
    Bus, BusError, ConsumerOptions, Delivery, ProgressHandle, Work, WorkConsumer,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::episode::{run_episode, EpisodeEnd, EpisodeEnv};

/// How long one pull waits before the loop looks at the cancel token again.
const POLL: Duration = Duration::from_secs(5);
/// Redelivery delay after infrastructure trouble.
const RETRY_DELAY: Duration = Duration::from_secs(5);
const PUBLISH_ATTEMPTS: u32 = 3;

/// What every worker loop of this process shares.
#[derive(Debug, Clone)]
pub struct WorkerContext {
    pub bus: Bus,
    pub episode: EpisodeEnv,
    pub worker_id: String,
    pub consumer: ConsumerOptions,
    pub shutdown_grace: Duration,
}

impl WorkerContext {
    fn progress_interval(&self) -> Duration {
        (self.consumer.ack_wait / 3).max(Duration::from_secs(1))
    }
}

/// `{run}:{generation}:{round}:exec-result:{attempt}`: JetStream drops a republished duplicate.
pub fn result_msg_id(req: &ExecRequest, attempt: u64) -> String {
    format!(
        "{}:{}:{}:exec-result:{attempt}",
        req.run_id, req.generation, req.round
    )
}

/// Pull and run exec requests for `capability` until `cancel` fires.
pub async fn run_worker_loop(
    ctx: Arc<WorkerContext>,
    capability: Capability,
    cancel: CancellationToken,
) {
    let span = tracing::info_span!("worker_loop", capability = capability.as_str(), worker = %ctx.worker_id);
    async {
        let Some(mut consumer) = bind_consumer(&ctx, capability, &cancel).await else {
            return;
        };
        tracing::info!("taking work");
        loop {
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                next = consumer.next(POLL) => next,
            };
            match next {
                Ok(Some(delivery)) => handle_delivery(&ctx, delivery, &cancel).await,
                Ok(None) => {}
                // `next` has already backed off.
                Err(err) => tracing::debug!(error = %err, "pull failed"),
            }
        }
        tracing::info!("stopped taking work");
    }
    .instrument(span)
    .await
}

async fn bind_consumer(
    ctx: &WorkerContext,
    capability: Capability,
    cancel: &CancellationToken,
) -> Option<WorkConsumer> {
    let mut backoff = Duration::from_millis(200);
    loop {
        match ctx
            .bus
            .work_consumer(Work::Exec(capability), ctx.consumer)
            .await
        {
            Ok(consumer) => return Some(consumer),
            Err(err) => {
                tracing::warn!(error = %err, ?backoff, "creating the exec consumer failed; retrying")
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return None,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Decode and dispatch one delivery. Never panics; anything but an exec request is terminated.
pub async fn handle_delivery(ctx: &WorkerContext, delivery: Delivery, cancel: &CancellationToken) {
    let req = match decode(delivery.payload()) {
        Ok(Message::ExecRequest(req)) => req,
        Ok(other) => {
            tracing::error!(
                kind = other.kind(),
                run_id = other.run_id(),
                "not an exec request; terminating it"
            );
            log_ack_error("term", delivery.term().await);
            return;
        }
        Err(err) => {
            tracing::error!(error = %err, subject = delivery.subject(), "undecodable message; terminating it");
            log_ack_error("term", delivery.term().await);
            return;
        }
    };
    let span = tracing::info_span!(
        "invoke_agent executor",
        run_id = %req.run_id,
        generation = req.generation,
        round = req.round,
        attempt = delivery.attempt(),
        profile = %req.executor_profile,
    );
    run_request(ctx, &delivery, req, cancel)
        .instrument(span)
        .await;
}

async fn run_request(
    ctx: &WorkerContext,
    delivery: &Delivery,
    req: ExecRequest,
    cancel: &CancellationToken,
) {
    let attempt = delivery.attempt();
    let _heartbeat = Heartbeat::start(delivery.progress_handle(), ctx.progress_interval());
    let started = Instant::now();
    tracing::info!(objective = %req.increment.objective, "episode started");

    let mut episode = Box::pin(run_episode(&req, attempt, &ctx.episode));
    let end = tokio::select! {
        end = &mut episode => Some(end),
        () = cancel.cancelled() => {
            tracing::info!(grace = ?ctx.shutdown_grace, "shutting down: giving the episode its grace period");
            tokio::time::timeout(ctx.shutdown_grace, &mut episode).await.ok()
        }
    };
    // Dropping the episode removes its directory and kills any shell it still runs.
    drop(episode);

    let (outcome, usage) = match end {
        None => {
            tracing::warn!("episode did not finish within the grace period; nak for redelivery");
            log_ack_error("nak", delivery.nak(None).await);
            return;
        }
        Some(EpisodeEnd::Retry { reason }) => {
            tracing::warn!(%reason, "infrastructure trouble; nak for redelivery");
            log_ack_error("nak", delivery.nak(Some(RETRY_DELAY)).await);
            return;
        }
        Some(EpisodeEnd::Outcome { outcome, usage }) => (outcome, usage),
    };
    let result = ExecResult {
        run_id: req.run_id.clone(),
        generation: req.generation,
        round: req.round,
        delivery_attempt: attempt,
        worker: ctx.worker_id.clone(),
        outcome,
        usage,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    match publish_result(&ctx.bus, &req, attempt, result).await {
        Ok(()) => log_ack_error("ack", delivery.ack().await),
        Err(err) => {
            tracing::error!(error = %err, "publishing the result failed; nak for redelivery");
            log_ack_error("nak", delivery.nak(Some(RETRY_DELAY)).await);
        }
    }
}

/// Publish the result (as the wire envelope) with its dedup id, retrying a few times.
pub async fn publish_result(
    bus: &Bus,
    req: &ExecRequest,
    attempt: u64,
    result: ExecResult,
) -> Result<(), BusError> {
    let frozen = match &result.outcome {
        loopgate_common::wire::ExecOutcome::Frozen { candidate, .. } => Some(candidate.clone()),
        loopgate_common::wire::ExecOutcome::Failed { .. } => None,
    };
    let message = Message::ExecResult(result);
    let envelope = Envelope::new(&message);
    let subject = bus.subjects().exec_result(&req.run_id);
    let msg_id = result_msg_id(req, attempt);
    let mut last = None;
    for try_no in 1..=PUBLISH_ATTEMPTS {
        match bus.publish_json(&subject, &envelope, &msg_id, &[]).await {
            Ok(()) => {
                tracing::info!(%subject, %msg_id, candidate = ?frozen, "result published");
                return Ok(());
            }
            Err(err) => {
                tracing::warn!(error = %err, try_no, "result publish failed");
                last = Some(err);
                if try_no < PUBLISH_ATTEMPTS {
                    tokio::time::sleep(Duration::from_secs(u64::from(try_no))).await;
                }
            }
        }
    }
    Err(last.unwrap_or_else(|| BusError::Protocol("no publish attempted".into())))
}

fn log_ack_error(op: &'static str, result: Result<(), BusError>) {
    if let Err(err) = result {
        tracing::warn!(op, error = %err, "acknowledgement failed");
    }
}

/// Sends progress acks every `interval` until dropped.
struct Heartbeat {
    task: JoinHandle<()>,
}

impl Heartbeat {
    fn start(handle: ProgressHandle, interval: Duration) -> Heartbeat {
        let task = tokio::spawn(
            async move {
                let mut ticker = tokio::time::interval(interval);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticker.tick().await;
                loop {
                    ticker.tick().await;
                    if let Err(err) = handle.progress().await {
                        tracing::warn!(error = %err, "progress ack failed");
                    }
                }
            }
            .in_current_span(),
        );
        Heartbeat { task }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn msg_id_shape() {
        let req: ExecRequest = serde_json::from_value(serde_json::json!({
            "run_id": "run1", "generation": 2, "round": 3, "capability": "cli",
            "contract": {"goal": "g", "criteria": [], "protected_paths": [], "spec_hash": "h"},
            "increment": {"objective": "o"}, "base_snapshot": "b", "executor_profile": "p",
            "episode_secs": 5, "max_steps": 3
        }))
        .unwrap();
        assert_eq!(result_msg_id(&req, 4), "run1:2:3:exec-result:4");
    }
}
