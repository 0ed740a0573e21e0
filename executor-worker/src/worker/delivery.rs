//! One worker loop per capability, on the shared runtime (`run_consumer` pulls, keeps the
//! delivery alive and settles): decode an exec request, drop it when stale (a first delivery
//! past its `start_by_ms`) or cancelled, announce `EpisodeStarted`, run the episode, publish
//! the result, settle. On shutdown it stops pulling; an
//! in-flight episode gets a grace period, after which it is dropped and the request nak'd for
//! redelivery. A `CancelEpisodes` notice for its run aborts the episode (process groups killed,
//! workspace dropped) and terminates the request without a result.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_protocol::dispatch_id::{DispatchId, StepKey};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{
    decode, Envelope, EpisodeRole, EpisodeStarted, ExecRequest, ExecResult, Message,
};
use loopgate_transport::runtime::{
    announce_started, claim_key, retry_with_patience, run_consumer, ClaimGuard, Claimed,
    ConsumeOptions, EpisodeCancels, EpisodeClaims, Recorded, Settle, StoredResult,
    DISPATCH_ID_HEADER,
};
use loopgate_transport::{Bus, BusError, ConsumerOptions, Delivery, Work, WorkConsumer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::episode::{run_episode, EpisodeEnd, EpisodeEnv};

/// How long one pull waits before the loop looks at the cancel token again.
const POLL: Duration = Duration::from_secs(5);
/// Redelivery delay after infrastructure trouble.
const RETRY_DELAY: Duration = Duration::from_secs(5);
/// A finished episode's result is published again and again for this long (a NATS outage,
/// a restart) before its work is handed back: the frozen snapshot is already stored, so only
/// the publish is retried, never the work.
const RESULT_PUBLISH_PATIENCE: Duration = Duration::from_secs(600);
/// On shutdown the loop waits this much longer than the episode's grace before it gives up.
const DRAIN_MARGIN: Duration = Duration::from_secs(10);

/// What every worker loop of this process shares.
#[derive(Debug, Clone)]
pub struct WorkerContext {
    pub bus: Bus,
    pub episode: EpisodeEnv,
    pub worker_id: String,
    pub consumer: ConsumerOptions,
    pub shutdown_grace: Duration,
    /// In-flight episodes, for `CancelEpisodes` notices.
    pub cancels: EpisodeCancels,
    /// One episode per dispatched step (`lg-episodes`), whatever JetStream redelivers.
    pub claims: EpisodeClaims,
    /// Episodes at once per capability loop (`[executor] concurrency`).
    pub concurrency: usize,
}

/// `{run}:{generation}:{round}:exec-result:{attempt}`: JetStream drops a republished duplicate.
pub(crate) fn result_msg_id(req: &ExecRequest, attempt: u64) -> String {
    step_key(req).exec_result_msg_id(attempt)
}

/// `{run}:{generation}:{round}:exec-started:{attempt}`.
pub(crate) fn started_msg_id(req: &ExecRequest, attempt: u64) -> String {
    step_key(req).exec_started_msg_id(attempt)
}

fn step_key(req: &ExecRequest) -> StepKey<'_> {
    StepKey {
        run_id: &req.run_id,
        generation: req.generation,
        round: req.round,
    }
}

/// A first delivery picked up after its `start_by_ms` is stale: the manager has given up on
/// it. Redeliveries are always served (the first attempt may have started in time).
pub(crate) fn is_stale(start_by_ms: Option<i64>, attempt: u64, now_ms: i64) -> bool {
    attempt <= 1 && start_by_ms.is_some_and(|deadline| now_ms > deadline)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Pull and run exec requests for `capability` until `cancel` fires.
pub(crate) async fn run_worker_loop(
    ctx: Arc<WorkerContext>,
    capability: Capability,
    cancel: CancellationToken,
) {
    let span = tracing::info_span!("worker_loop", capability = capability.as_str(), worker = %ctx.worker_id);
    async {
        let Some(consumer) = bind_consumer(&ctx, capability, &cancel).await else {
            return;
        };
        tracing::info!("taking work");
        let options = ConsumeOptions {
            concurrency: ctx.concurrency,
            poll: POLL,
            ack_wait: ctx.consumer.ack_wait,
            drain: ctx.shutdown_grace + DRAIN_MARGIN,
        };
        let (handler_ctx, handler_cancel) = (ctx.clone(), cancel.clone());
        run_consumer(consumer, options, cancel, move |delivery, lease| {
            let (ctx, cancel) = (handler_ctx.clone(), handler_cancel.clone());
            let lost = lease.lost().clone();
            async move { handle_delivery(&ctx, delivery, &cancel, &lost).await }
        })
        .await;
        tracing::info!("stopped taking work");
    }
    .instrument(span)
    .await
}

/// Create-or-bind the capability's durable, retrying until `cancel` fires.
async fn bind_consumer(
    ctx: &WorkerContext,
    capability: Capability,
    cancel: &CancellationToken,
) -> Option<WorkConsumer> {
    let bound = retry_with_patience(
        "exec consumer",
        Duration::MAX,
        cancel,
        |_| true,
        || ctx.bus.work_consumer(Work::Exec(capability), ctx.consumer),
    )
    .await;
    bound.ok().flatten()
}

/// Decode and dispatch one delivery. Never panics; anything but an exec request is terminated.
/// `lost` fires when the delivery's keep-alive has failed for a whole ack_wait: the episode
/// stops, since the server may have given the step to another worker.
pub(crate) async fn handle_delivery(
    ctx: &WorkerContext,
    delivery: Delivery,
    cancel: &CancellationToken,
    lost: &CancellationToken,
) -> Settle {
    let req = match decode(delivery.payload()) {
        Ok(Message::ExecRequest(req)) => req,
        Ok(other) => {
            tracing::error!(
                kind = other.kind(),
                run_id = other.run_id(),
                "not an exec request; terminating it"
            );
            return Settle::Term(format!("not an exec request: {}", other.kind()));
        }
        Err(err) => {
            tracing::error!(error = %err, subject = delivery.subject(), "undecodable message; terminating it");
            return Settle::Term(format!("undecodable: {err}"));
        }
    };
    let attempt = delivery.attempt();
    if is_stale(req.start_by_ms, attempt, now_ms()) {
        tracing::warn!(
            run_id = %req.run_id,
            round = req.round,
            start_by_ms = req.start_by_ms,
            "first delivery picked up after its start-by time; dropping it"
        );
        return Settle::Term("stale: picked up after its start-by time".into());
    }
    let dispatch = delivery.header(DISPATCH_ID_HEADER);
    if ctx
        .cancels
        .is_dispatch_cancelled(&req.run_id, req.generation, dispatch.as_deref())
    {
        tracing::info!(run_id = %req.run_id, generation = req.generation, "request of a cancelled generation; dropping it");
        return Settle::Term("its run generation was cancelled".into());
    }
    let span = tracing::info_span!(
        "invoke_agent executor",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = "executor",
        "loopgate.run_id" = %req.run_id,
        "loopgate.generation" = req.generation,
        "loopgate.round" = req.round,
        "loopgate.worker" = %ctx.worker_id,
        run_id = %req.run_id,
        generation = req.generation,
        round = req.round,
        attempt = delivery.attempt(),
        profile = %req.executor_profile,
    );
    // Join the run's trace: the manager put its span context on the request.
    loopgate_telemetry::otel::set_remote_parent(
        &span,
        delivery
            .header(loopgate_telemetry::otel::TRACEPARENT)
            .as_deref(),
    );
    run_request(ctx, &delivery, req, cancel, lost)
        .instrument(span)
        .await
}

/// The dispatch id of a request without one on its delivery (`run:gen:round:exec`, as the
/// manager names it).
fn dispatch_of(req: &ExecRequest, header: Option<&str>) -> String {
    header.map_or_else(
        || DispatchId::exec(step_key(req)).into_string(),
        str::to_string,
    )
}

/// Claim the step (one episode per dispatch, whatever is redelivered), then run it; a step
/// that has finished already gets its stored result published again instead.
async fn run_request(
    ctx: &WorkerContext,
    delivery: &Delivery,
    req: ExecRequest,
    cancel: &CancellationToken,
    lost: &CancellationToken,
) -> Settle {
    let dispatch = dispatch_of(&req, delivery.header(DISPATCH_ID_HEADER).as_deref());
    let key = claim_key("exec", &dispatch);
    let claimed = tokio::select! {
        claimed = ctx.claims.claim(&key, lost) => claimed,
        () = cancel.cancelled() => return Settle::Nak(None),
    };
    let guard = match claimed {
        Ok(Some(Claimed::Owned(guard))) => guard,
        Ok(Some(Claimed::Finished(stored))) => {
            tracing::info!(%key, "this step has finished already: publishing its result again instead of redoing it");
            return match publish_stored(&ctx.bus, &stored).await {
                Ok(()) => Settle::Ack,
                Err(err) => {
                    tracing::error!(error = %err, "republishing the stored result failed; nak for redelivery");
                    Settle::Nak(Some(RETRY_DELAY))
                }
            };
        }
        Ok(None) => return Settle::Nak(None),
        Err(err) => {
            tracing::warn!(%key, error = %err, "cannot claim the step; nak for redelivery");
            return Settle::Nak(Some(RETRY_DELAY));
        }
    };
    match run_claimed(ctx, delivery, &req, cancel, lost, &guard).await {
        Ran::Settled(settle) => {
            guard.release().await;
            settle
        }
        Ran::TakenOver => Settle::Abandon,
        Ran::Finished(stored) => finish(ctx, guard, &stored).await,
    }
}

/// How a claimed episode ended.
enum Ran {
    /// Without a result: settle so (the claim is released).
    Settled(Settle),
    /// Another worker took the step over.
    TakenOver,
    /// With a result to store and publish.
    Finished(StoredResult),
}

/// Store the result in the claim, then publish it: a redelivery from here on republishes it.
async fn finish(ctx: &WorkerContext, guard: Box<ClaimGuard>, stored: &StoredResult) -> Settle {
    match guard.finish(stored, RESULT_PUBLISH_PATIENCE).await {
        Ok(Recorded::Stored) => {}
        Ok(Recorded::TakenOver) => {
            tracing::warn!("another worker took this step over while it finished; its result wins");
            return Settle::Abandon;
        }
        Err(err) => {
            tracing::error!(error = %err, "recording the finished episode failed; publishing its result anyway");
        }
    }
    match publish_stored(&ctx.bus, stored).await {
        Ok(()) => Settle::Ack,
        Err(err) => {
            tracing::error!(error = %err, "publishing the result failed; nak for redelivery");
            Settle::Nak(Some(RETRY_DELAY))
        }
    }
}

/// Announce and run the episode under its claim.
async fn run_claimed(
    ctx: &WorkerContext,
    delivery: &Delivery,
    req: &ExecRequest,
    cancel: &CancellationToken,
    lost: &CancellationToken,
    guard: &ClaimGuard,
) -> Ran {
    let attempt = delivery.attempt();
    let dispatch = delivery.header(DISPATCH_ID_HEADER);
    let registration =
        ctx.cancels
            .register_dispatch(&req.run_id, req.generation, dispatch.as_deref());
    let started = EpisodeStarted {
        run_id: req.run_id.clone(),
        generation: req.generation,
        round: req.round,
        role: EpisodeRole::Executor,
        delivery_attempt: attempt,
        worker: ctx.worker_id.clone(),
    };
    announce_started(&ctx.bus, started, &started_msg_id(req, attempt)).await;
    let started = Instant::now();
    tracing::info!(objective = %req.increment.objective, "episode started");

    let aborted = registration.token();
    let mut episode = Box::pin(run_episode(req, attempt, &ctx.episode));
    let end = tokio::select! {
        end = &mut episode => Some(end),
        () = aborted.cancelled() => None,
        () = lost.cancelled() => {
            tracing::warn!("the delivery was lost (no keep-alive reached NATS for ack_wait): stopping the episode");
            drop(episode);
            return Ran::Settled(Settle::Nak(None));
        }
        () = guard.lost().cancelled() => {
            drop(episode);
            if guard.is_taken_over() {
                tracing::warn!("another worker took this step over: stopping the episode");
                return Ran::TakenOver;
            }
            tracing::warn!("the episode claim could not be kept alive for ack_wait: stopping the episode");
            return Ran::Settled(Settle::Nak(None));
        }
        () = cancel.cancelled() => {
            tracing::info!(grace = ?ctx.shutdown_grace, "shutting down: giving the episode its grace period");
            tokio::select! {
                end = tokio::time::timeout(ctx.shutdown_grace, &mut episode) => end.ok(),
                () = aborted.cancelled() => None,
            }
        }
    };
    // Dropping the episode removes its directory and kills any shell or agent it still runs.
    drop(episode);
    if aborted.is_cancelled() {
        tracing::info!("episode cancelled by a control notice; terminating the request");
        return Ran::Settled(Settle::Term("cancelled by a control notice".into()));
    }

    let (outcome, usage) = match end {
        None => {
            tracing::warn!("episode did not finish within the grace period; nak for redelivery");
            return Ran::Settled(Settle::Nak(None));
        }
        Some(EpisodeEnd::Retry { reason }) => {
            tracing::warn!(%reason, "infrastructure trouble; nak for redelivery");
            return Ran::Settled(Settle::Nak(Some(RETRY_DELAY)));
        }
        Some(EpisodeEnd::Outcome { outcome, usage }) => (outcome, usage),
    };
    loopgate_telemetry::metrics::Metrics::new()
        .record_episode("executor", started.elapsed().as_secs_f64());
    let result = ExecResult {
        run_id: req.run_id.clone(),
        generation: req.generation,
        round: req.round,
        delivery_attempt: attempt,
        worker: ctx.worker_id.clone(),
        outcome,
        usage,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        agent_isolation: Some(ctx.episode.agent_isolation_for(&req.executor_profile)),
    };
    match stored_result(&ctx.bus, req, attempt, result) {
        Ok(stored) => Ran::Finished(stored),
        Err(err) => {
            tracing::error!(error = %err, "encoding the result failed; terminating the request");
            Ran::Settled(Settle::Term(format!("unencodable result: {err}")))
        }
    }
}

/// The result as published: subject, dedup id and wire envelope.
pub(crate) fn stored_result(
    bus: &Bus,
    req: &ExecRequest,
    attempt: u64,
    result: ExecResult,
) -> Result<StoredResult, BusError> {
    let message = Message::ExecResult(result);
    Ok(StoredResult {
        subject: bus.subjects().exec_result(&req.run_id),
        msg_id: result_msg_id(req, attempt),
        payload: serde_json::to_value(Envelope::new(&message))?,
    })
}

/// Publish a result with its dedup id, retrying retryable failures for up to
/// `RESULT_PUBLISH_PATIENCE` (the dedup id makes a repeated publish harmless).
pub(crate) async fn publish_stored(bus: &Bus, stored: &StoredResult) -> Result<(), BusError> {
    // Not the shutdown token: an episode finished within its shutdown grace still publishes
    // (the consume loop's drain bounds how long).
    let published = retry_with_patience(
        "result publish",
        RESULT_PUBLISH_PATIENCE,
        &CancellationToken::new(),
        BusError::is_retryable,
        || bus.publish_json(&stored.subject, &stored.payload, &stored.msg_id, &[]),
    )
    .await?;
    match published {
        Some(()) => {
            tracing::info!(subject = %stored.subject, msg_id = %stored.msg_id, "result published");
            Ok(())
        }
        None => Err(BusError::Protocol("result publish abandoned".into())),
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
        assert_eq!(started_msg_id(&req, 1), "run1:2:3:exec-started:1");
    }

    #[test]
    fn staleness_table() {
        let cases = [
            (None, 1, 1_000, false),
            (Some(2_000), 1, 1_000, false),
            (Some(2_000), 1, 2_000, false),
            (Some(2_000), 1, 2_001, true),
            (Some(2_000), 2, 9_999, false),
            (Some(2_000), 0, 9_999, true),
        ];
        for (start_by, attempt, now, stale) in cases {
            assert_eq!(
                is_stale(start_by, attempt, now),
                stale,
                "{start_by:?} {attempt} {now}"
            );
        }
    }
}
