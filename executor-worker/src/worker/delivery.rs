//! One worker loop per capability, on the shared runtime (`run_gated_consumer` pulls, keeps the
//! delivery alive and settles): decode an exec request, drop it when stale (a first delivery
//! past its `start_by_ms`), then run it on the one delivery path of a claimed episode
//! (`loopgate_transport::runtime::run_claimed`: cancelled generations dropped, one episode per
//! dispatch, a finished step's stored result republished, `EpisodeStarted`, the episode, the
//! result stored and published, the settle). This file says what is the executor's own: the
//! request, the episode, and the `ExecResult` it ends with.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use loopgate_protocol::dispatch_id::{DispatchId, StepKey};
use loopgate_protocol::subjects::{Capability, Subjects};
use loopgate_protocol::wire::{decode, EpisodeRole, ExecRequest, ExecResult, Message};
use loopgate_transport::runtime::{
    retry_with_patience, run_claimed, run_gated_consumer, ClaimedEpisode, Concluded,
    ConsumeOptions, EpisodeWorker, ResultMessage, Settle, REDELIVERY_DELAY,
};
use loopgate_transport::{ConsumerOptions, Delivery, Work, WorkConsumer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::episode::{run_episode_observed, EpisodeEnd, EpisodeEnv};
use crate::observe::progress::publish_progress;
use crate::observe::{Observer, ProgressNow};
use crate::worker::work_dir_space::WorkDirSpace;
use loopgate_protocol::transcript::Transcript;
use loopgate_protocol::wire::EpisodeProgress;
use loopgate_snapshot::SnapshotStore;

/// How long storing an episode's transcript may take.
const TRANSCRIPT_STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one pull waits before the loop looks at the cancel token again.
const POLL: Duration = Duration::from_secs(5);
/// On shutdown the loop waits this much longer than the episode's grace before it gives up.
const DRAIN_MARGIN: Duration = Duration::from_secs(10);

/// What every worker loop of this process shares.
#[derive(Debug, Clone)]
pub struct WorkerContext {
    /// The bus, this worker's id, its in-flight episodes (for `CancelEpisodes` notices), its
    /// episode claims and the shutdown grace.
    pub worker: EpisodeWorker,
    pub episode: EpisodeEnv,
    pub consumer: ConsumerOptions,
    /// Episodes at once per capability loop (`[executor] concurrency`).
    pub concurrency: usize,
    /// The evidence bucket, where episode transcripts go (`None`: none is stored).
    pub evidence: Option<SnapshotStore>,
    /// The secret values this worker knows (model API keys, its NATS password): redacted
    /// from transcripts.
    pub secrets: Arc<Vec<String>>,
    /// Room in the work dir: no work is taken below its floor.
    pub(crate) space: WorkDirSpace,
    /// Facts about this worker `/readyz` lists after `ok` (whether episodes run on overlays).
    pub readiness_notes: Vec<String>,
}

impl WorkerContext {
    /// `Err(why)` while the work dir has less free space than it must keep (for `/readyz`).
    pub fn work_dir_space(&self) -> Result<(), String> {
        self.space.check()
    }
}

/// `{run}:{generation}:{round}:exec-result:{attempt}`: the prefix of the result's id, which the
/// runtime seals with a nonce stored with the result (a republish keeps it; JetStream drops
/// the duplicate).
pub(crate) fn result_msg_id(req: &ExecRequest, attempt: u64) -> String {
    step_key(req).exec_result_msg_id(attempt)
}

/// `{run}:{generation}:{round}:exec-started:{attempt}` (a prefix the runtime seals).
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
    let span = tracing::info_span!("worker_loop", capability = capability.as_str(), worker = %ctx.worker.worker_id);
    async {
        let Some(consumer) = bind_consumer(&ctx, capability, &cancel).await else {
            return;
        };
        tracing::info!("taking work");
        let options = ConsumeOptions {
            concurrency: ctx.concurrency,
            pull_batch: 1,
            poll: POLL,
            ack_wait: ctx.consumer.ack_wait,
            drain: ctx.worker.shutdown_grace + DRAIN_MARGIN,
        };
        let (handler_ctx, handler_cancel) = (ctx.clone(), cancel.clone());
        let gate = ctx.space.gate();
        run_gated_consumer(consumer, options, gate, cancel, move |delivery, lease| {
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
        || {
            ctx.worker
                .bus
                .work_consumer(Work::Exec(capability), ctx.consumer)
        },
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
    let span = tracing::info_span!(
        "invoke_agent executor",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = "executor",
        "loopgate.run_id" = %req.run_id,
        "loopgate.generation" = req.generation,
        "loopgate.round" = req.round,
        "loopgate.worker" = %ctx.worker.worker_id,
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
    let step = ExecStep {
        ctx,
        req: &req,
        attempt,
        transcript: std::sync::Mutex::new(None),
        agent_done: CancellationToken::new(),
    };
    run_claimed(&ctx.worker, &delivery, &step, cancel, lost)
        .instrument(span)
        .await
}

/// One exec request on the claimed-episode path.
struct ExecStep<'a> {
    ctx: &'a WorkerContext,
    req: &'a ExecRequest,
    attempt: u64,
    /// The episode's stored transcript, by digest, once it ran.
    transcript: std::sync::Mutex<Option<String>>,
    /// Cancelled once the agent has stopped: only the freeze and the transcript are left.
    agent_done: CancellationToken,
}

impl ExecStep<'_> {
    /// The episode, observed: its progress published while it runs, its transcript stored
    /// in the evidence bucket when it ends.
    async fn observed(&self) -> EpisodeEnd {
        let req = self.req;
        let (tx, rx) = tokio::sync::watch::channel(ProgressNow::default());
        let template = EpisodeProgress {
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            delivery_attempt: self.attempt,
            worker: self.ctx.worker.worker_id.clone(),
            attempt: req.attempt,
            turn: 0,
            tool: None,
            tool_calls: 0,
            tokens: 0,
            elapsed_ms: 0,
        };
        let publisher = tokio::spawn(publish_progress(self.ctx.worker.bus.clone(), template, rx));
        let header = Transcript {
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            attempt: req.attempt.max(1),
            worker: self.ctx.worker.worker_id.clone(),
            profile: req.executor_profile.clone(),
            ..Transcript::default()
        };
        let observer = Observer::new(header, self.ctx.secrets.clone(), Some(tx))
            .on_agent_done(self.agent_done.clone());
        let end =
            run_episode_observed(req, self.attempt, &self.ctx.episode, observer.clone()).await;
        publisher.abort();
        if let (Some(bucket), Some(transcript)) = (&self.ctx.evidence, observer.transcript()) {
            let digest = store_transcript(bucket, &transcript).await;
            if let Ok(mut slot) = self.transcript.lock() {
                *slot = digest;
            }
        }
        end
    }
}

/// Put `transcript` into the evidence bucket: its digest, or `None` (logged).
async fn store_transcript(bucket: &SnapshotStore, transcript: &Transcript) -> Option<String> {
    let bytes = match serde_json::to_vec(transcript) {
        Ok(bytes) => bytes,
        Err(err) => {
            tracing::warn!(error = %err, "encoding the episode transcript failed");
            return None;
        }
    };
    match tokio::time::timeout(TRANSCRIPT_STORE_TIMEOUT, bucket.put_bytes(&bytes)).await {
        Ok(Ok(digest)) => Some(digest),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "storing the episode transcript failed");
            None
        }
        Err(_) => {
            tracing::warn!("storing the episode transcript timed out");
            None
        }
    }
}

impl ClaimedEpisode for ExecStep<'_> {
    type End = EpisodeEnd;
    type Output = ExecResult;

    fn role(&self) -> EpisodeRole {
        EpisodeRole::Executor
    }

    fn step(&self) -> StepKey<'_> {
        step_key(self.req)
    }

    /// `run:gen:round:exec` (`...:exec:attempt-K` for sibling K), as the manager names it.
    fn dispatch_without_header(&self) -> DispatchId {
        DispatchId::exec_attempt(step_key(self.req), self.req.attempt)
    }

    fn sibling(&self) -> u32 {
        self.req.attempt
    }

    fn started_msg_id(&self, attempt: u64) -> String {
        started_msg_id(self.req, attempt)
    }

    fn run(&self) -> impl Future<Output = EpisodeEnd> + Send + '_ {
        tracing::info!(objective = %self.req.increment.objective, "episode started");
        self.observed()
    }

    fn wrap_up(&self) -> CancellationToken {
        self.agent_done.clone()
    }

    fn conclude(&self, end: Option<EpisodeEnd>, elapsed: Duration) -> Concluded<ExecResult> {
        let (outcome, usage) = match end {
            None => {
                tracing::warn!(
                    "episode did not finish within the grace period; nak for redelivery"
                );
                return Concluded::Settle(Settle::Nak(None));
            }
            Some(EpisodeEnd::Retry { reason }) => {
                tracing::warn!(%reason, "infrastructure trouble; nak for redelivery");
                return Concluded::Settle(Settle::Nak(Some(REDELIVERY_DELAY)));
            }
            Some(EpisodeEnd::Outcome { outcome, usage }) => (outcome, usage),
        };
        loopgate_telemetry::metrics::Metrics::new()
            .record_episode("executor", elapsed.as_secs_f64());
        let req = self.req;
        Concluded::Publish(ExecResult {
            transcript: self.transcript.lock().ok().and_then(|t| t.clone()),
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            delivery_attempt: self.attempt,
            worker: self.ctx.worker.worker_id.clone(),
            outcome,
            usage,
            duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            agent_isolation: Some(self.ctx.episode.agent_isolation_for(&req.executor_profile)),
            attempt: req.attempt,
        })
    }

    fn result(&self, result: &ExecResult, subjects: &Subjects) -> ResultMessage {
        ResultMessage {
            subject: subjects.exec_result(&self.req.run_id),
            msg_id: result_msg_id(self.req, self.attempt),
            message: Message::ExecResult(result.clone()),
        }
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
