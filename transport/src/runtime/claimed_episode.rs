//! The one delivery path of a worker's episode (an executor step, an audit), written once:
//! drop a request of a cancelled generation, claim the step (one episode per dispatch id,
//! whatever JetStream redelivers), publish the stored result again instead of re-running a
//! step that has finished, announce `EpisodeStarted`, run the episode while the delivery and
//! the claim are kept alive, store its result in the claim, then publish it; and settle as the
//! end says:
//! - a control notice cancels the episode: **term**, no result;
//! - the shutdown grace runs out: **nak** at once;
//! - no claim heartbeat reaches NATS for `ack_wait` while the episode still works: the episode
//!   is **paused** (not polled: it starts no model call or tool run) until one lands, then goes
//!   on; a delivery whose keep-alive fails goes on too, since the claim decides who runs the
//!   step (once its work is done and only storing its result is left,
//!   [`ClaimedEpisode::wrap_up`], it is not paused either: the result is stored once NATS
//!   answers). Either way, if another worker took the step over meanwhile, it stops;
//! - another worker took the claim over: leave the delivery **unsettled** (it is theirs);
//! - infrastructure trouble (the worker's own verdict): **nak** after [`REDELIVERY_DELAY`];
//! - a result published (or republished): **ack**; a publish that keeps failing: **nak** after
//!   [`REDELIVERY_DELAY`], and the redelivery republishes the stored copy.
//!
//! What differs between workers is a [`ClaimedEpisode`]: the step, its role, the episode
//! itself, what its end means and the result message (subject and msg id).
//!
//! Every id this path publishes on the results stream is sealed with a random nonce
//! (`loopgate_protocol::dispatch_id::sealed`): JetStream deduplicates that stream across all
//! subjects, so an id another role could predict could be squatted. A result's nonce is made
//! once, when the result is stored in the claim, and every republish uses the stored id.

use std::future::Future;
use std::time::{Duration, Instant};

use loopgate_protocol::dispatch_id::{sealed, DispatchId, StepKey};
use loopgate_protocol::subjects::Subjects;
use loopgate_protocol::wire::{Envelope, EpisodeRole, EpisodeStarted, Message};
use tokio_util::sync::CancellationToken;

use crate::bus::Bus;
use crate::bus_error::BusError;
use crate::runtime::connect::retry_with_patience;
use crate::runtime::consume::Settle;
use crate::runtime::episode_cancels::{EpisodeCancels, DISPATCH_ID_HEADER};
use crate::runtime::episode_claim::{
    claim_key, ClaimGuard, Claimed, EpisodeClaims, Recorded, StoredResult,
};
use crate::runtime::episode_started::announce_started;
use crate::work_consumer::Delivery;

/// Redelivery delay after infrastructure trouble or a failed publish.
pub const REDELIVERY_DELAY: Duration = Duration::from_secs(5);
/// A finished episode's result is stored in its claim and published again and again for this
/// long (a NATS outage, a restart) before its delivery is handed back: the work is done, so
/// only the publish is retried, never the work (the msg id makes a repeat harmless).
pub const RESULT_PUBLISH_PATIENCE: Duration = Duration::from_secs(600);

/// What one worker process's episodes share on the delivery path.
#[derive(Debug, Clone)]
pub struct EpisodeWorker {
    pub bus: Bus,
    pub worker_id: String,
    /// In-flight episodes, for `CancelEpisodes` notices.
    pub cancels: EpisodeCancels,
    /// One episode per dispatched step (`lg-episodes`).
    pub claims: EpisodeClaims,
    /// How long an in-flight episode may run on after shutdown is requested.
    pub shutdown_grace: Duration,
}

/// The result message of a finished episode.
#[derive(Debug, Clone)]
pub struct ResultMessage {
    pub subject: String,
    /// The readable prefix of its `Nats-Msg-Id` (`loopgate_protocol::dispatch_id`); the
    /// runtime seals it with a random nonce once and stores the sealed id with the result.
    pub msg_id: String,
    pub message: Message,
}

/// How an episode's end is settled.
#[derive(Debug)]
pub enum Concluded<Output> {
    /// Without a result: release the claim and settle so.
    Settle(Settle),
    /// With a result: store it in the claim, publish it, ack.
    Publish(Output),
}

/// One delivered request of a worker: what differs between the executor and the auditor.
pub trait ClaimedEpisode: Sync {
    /// What the episode ends with when it runs to its end.
    type End: Send;
    /// The result it publishes.
    type Output: Send;

    /// Whose episode it is: the claim's role (`exec`, `audit`) and the start notice's subject.
    fn role(&self) -> EpisodeRole;
    /// The step it serves.
    fn step(&self) -> StepKey<'_>;
    /// The dispatch id of a delivery that arrived without one in its header.
    fn dispatch_without_header(&self) -> DispatchId;
    /// The readable prefix of its `EpisodeStarted`'s `Nats-Msg-Id` for delivery `attempt` (the
    /// runtime seals it with a random nonce).
    fn started_msg_id(&self, attempt: u64) -> String;
    /// Which sibling of its step it is (an exec request's `attempt`; 1 for every other).
    fn sibling(&self) -> u32 {
        loopgate_protocol::wire::FIRST_ATTEMPT
    }
    /// The episode. Dropping the future stops it (its processes killed, its directory gone).
    fn run(&self) -> impl Future<Output = Self::End> + Send + '_;
    /// Fires once the episode's own work is done (no more model calls or tool runs) and only
    /// storing its outcome over NATS is left (freezing the workspace, the transcript). From
    /// then on a NATS outage longer than `ack_wait` does not stop the episode: it stores its
    /// result once NATS answers, unless another worker took the step over meanwhile. The
    /// default never fires (the episode stops with its claim, whatever it was doing).
    fn wrap_up(&self) -> CancellationToken {
        CancellationToken::new()
    }
    /// What its end means; `None` when the shutdown grace ran out first. `elapsed` runs from
    /// the episode's start.
    fn conclude(&self, end: Option<Self::End>, elapsed: Duration) -> Concluded<Self::Output>;
    /// The result as it is published.
    fn result(&self, output: &Self::Output, subjects: &Subjects) -> ResultMessage;
    /// Headers of the result's first publish (a republished result carries none).
    fn result_headers(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Called once the result is published.
    fn published(&self, _output: &Self::Output) {}
}

/// The claim role of an episode role: claims of different roles never meet.
pub(crate) fn claim_role(role: EpisodeRole) -> &'static str {
    match role {
        EpisodeRole::Executor => "exec",
        EpisodeRole::Auditor => "audit",
    }
}

/// A fresh seal for a results-stream id: 122 random bits from the OS (a v4 UUID), so no other
/// role can guess the id.
fn msg_id_nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Run `episode` for `delivery` under its claim and say how to settle the delivery. `shutdown`
/// is the daemon's token (the episode then gets `shutdown_grace`); `lost` fires when the
/// delivery's keep-alive failed for a whole ack_wait (the server may have given it away).
pub async fn run_claimed<E: ClaimedEpisode>(
    worker: &EpisodeWorker,
    delivery: &Delivery,
    episode: &E,
    shutdown: &CancellationToken,
    lost: &CancellationToken,
) -> Settle {
    let step = episode.step();
    let header = delivery.header(DISPATCH_ID_HEADER);
    if worker
        .cancels
        .is_dispatch_cancelled(step.run_id, step.generation, header.as_deref())
    {
        tracing::info!(run_id = %step.run_id, generation = step.generation,
            "request of a cancelled generation; terminating it");
        return Settle::Term("its run generation was cancelled".into());
    }
    let dispatch = header.unwrap_or_else(|| episode.dispatch_without_header().into_string());
    let key = claim_key(claim_role(episode.role()), &dispatch);
    let claimed = tokio::select! {
        claimed = worker.claims.claim(&key, lost) => claimed,
        () = shutdown.cancelled() => return Settle::Nak(None),
    };
    let guard = match claimed {
        Ok(Some(Claimed::Owned(guard))) => guard,
        Ok(Some(Claimed::Finished(stored))) => {
            tracing::info!(%key, "this step has finished already: publishing its result again instead of redoing it");
            return publish_settle(&worker.bus, &stored, &[]).await;
        }
        Ok(None) => return Settle::Nak(None),
        Err(err) => {
            tracing::warn!(%key, error = %err, "cannot claim the step; nak for redelivery");
            return Settle::Nak(Some(REDELIVERY_DELAY));
        }
    };
    match run_under_claim(worker, delivery, episode, &guard, shutdown, lost).await {
        Ran::Settled(settle) => {
            guard.release().await;
            settle
        }
        Ran::TakenOver => Settle::Abandon,
        Ran::Finished(output) => finish(worker, episode, guard, &output).await,
    }
}

/// How a claimed episode ended.
enum Ran<Output> {
    /// Without a result: settle so (the claim is released).
    Settled(Settle),
    /// Another worker took the step over.
    TakenOver,
    /// With a result to store and publish.
    Finished(Output),
}

/// Announce and run the episode under its claim until it ends, is cancelled by a control
/// notice, loses its delivery or its claim (while it still works; once it only stores its
/// result, only a take-over stops it), or outlives the shutdown grace.
async fn run_under_claim<E: ClaimedEpisode>(
    worker: &EpisodeWorker,
    delivery: &Delivery,
    episode: &E,
    guard: &ClaimGuard,
    shutdown: &CancellationToken,
    lost: &CancellationToken,
) -> Ran<E::Output> {
    let step = episode.step();
    let attempt = delivery.attempt();
    let dispatch = delivery.header(DISPATCH_ID_HEADER);
    let registration =
        worker
            .cancels
            .register_dispatch(step.run_id, step.generation, dispatch.as_deref());
    let started = EpisodeStarted {
        run_id: step.run_id.to_string(),
        generation: step.generation,
        round: step.round,
        role: episode.role(),
        delivery_attempt: attempt,
        worker: worker.worker_id.clone(),
        attempt: episode.sibling(),
    };
    let started_id = sealed(&episode.started_msg_id(attempt), &msg_id_nonce());
    announce_started(&worker.bus, started, &started_id).await;
    let started = Instant::now();
    let aborted = registration.token().clone();
    let wrap_up = episode.wrap_up();
    let mut running = Box::pin(episode.run());
    let watch = Watch {
        worker,
        guard,
        aborted: &aborted,
        wrap_up: &wrap_up,
        shutdown,
        lost,
    };
    let end = match watch.drive(running.as_mut()).await {
        Ok(end) => end,
        Err(stopped) => return stopped,
    };
    // Dropping an unfinished episode kills what it still runs and removes its directory.
    drop(running);
    drop(registration);
    if aborted.is_cancelled() {
        tracing::info!("episode cancelled by a control notice; terminating the request");
        return Ran::Settled(Settle::Term("cancelled by a control notice".into()));
    }
    match episode.conclude(end, started.elapsed()) {
        Concluded::Settle(settle) => Ran::Settled(settle),
        Concluded::Publish(output) => Ran::Finished(output),
    }
}

/// What an episode under its claim is watched for while it runs.
struct Watch<'a> {
    worker: &'a EpisodeWorker,
    guard: &'a ClaimGuard,
    /// A control notice cancelled it.
    aborted: &'a CancellationToken,
    /// Its own work is done; only storing its result is left.
    wrap_up: &'a CancellationToken,
    shutdown: &'a CancellationToken,
    /// The delivery's keep-alive failed for a whole ack_wait.
    lost: &'a CancellationToken,
}

impl Watch<'_> {
    /// Run `running` to its end (`None`: cancelled, or the shutdown grace ran out first), or
    /// `Err` with how the episode stopped without one. While it works, a claim that cannot
    /// be kept alive pauses it (see [`Watch::paused`]); a take-over stops it.
    async fn drive<F: Future, O>(
        &self,
        mut running: std::pin::Pin<&mut F>,
    ) -> Result<Option<F::Output>, Ran<O>> {
        let guard = self.guard;
        let mut paused = guard.paused();
        let mut storing = false;
        let mut delivery_lost = false;
        loop {
            if !storing && *paused.borrow_and_update() {
                if let Some(stopped) = self.paused(&mut paused).await {
                    return stopped;
                }
                continue;
            }
            tokio::select! {
                biased;
                end = &mut running => return Ok(Some(end)),
                () = self.aborted.cancelled() => return Ok(None),
                () = guard.taken_over().cancelled() => {
                    tracing::warn!("another worker took this step over: stopping the episode");
                    return Err(Ran::TakenOver);
                }
                Ok(()) = paused.changed(), if !storing => {}
                () = self.lost.cancelled(), if !delivery_lost => {
                    tracing::warn!("no keep-alive of the delivery reached NATS for ack_wait: the episode goes on under its claim, which decides who runs the step");
                    delivery_lost = true;
                }
                () = self.wrap_up.cancelled(), if !storing => {
                    tracing::debug!("the episode's work is done; only storing its result is left");
                    storing = true;
                    guard.only_storing();
                }
                () = self.shutdown.cancelled() => {
                    let grace = self.worker.shutdown_grace;
                    tracing::info!(?grace, "shutting down: giving the episode its grace period");
                    return Ok(tokio::select! {
                        end = tokio::time::timeout(grace, &mut running) => end.ok(),
                        () = self.aborted.cancelled() => None,
                    });
                }
            }
        }
    }

    /// While the claim is paused, poll nothing of the episode: what it runs now may end, but
    /// it starts nothing new. `None` once a heartbeat has landed again (the episode goes on);
    /// `Some` with how it stopped when the step was taken over, it was cancelled or the
    /// daemon shuts down meanwhile.
    async fn paused<F, O>(
        &self,
        paused: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<Result<Option<F>, Ran<O>>> {
        tracing::warn!(
            "no claim heartbeat reached NATS for ack_wait: the episode is paused until one does"
        );
        let since = Instant::now();
        loop {
            tokio::select! {
                biased;
                () = self.guard.taken_over().cancelled() => {
                    tracing::warn!("another worker took this step over while it was paused: stopping the episode");
                    return Some(Err(Ran::TakenOver));
                }
                () = self.aborted.cancelled() => return Some(Ok(None)),
                () = self.shutdown.cancelled() => {
                    tracing::info!("shutting down while the episode is paused: handing the step back");
                    return Some(Err(Ran::Settled(Settle::Nak(None))));
                }
                changed = paused.changed() => {
                    if changed.is_err() {
                        // The heartbeat task ended without a take-over: nothing will resume it.
                        return Some(Err(Ran::Settled(Settle::Nak(None))));
                    }
                    if !*paused.borrow_and_update() {
                        tracing::warn!(paused = ?since.elapsed(), "the claim is this episode's again: going on");
                        return None;
                    }
                }
            }
        }
    }
}

/// Store the result in the claim, then publish it: a redelivery from here on republishes it.
async fn finish<E: ClaimedEpisode>(
    worker: &EpisodeWorker,
    episode: &E,
    guard: Box<ClaimGuard>,
    output: &E::Output,
) -> Settle {
    let result = episode.result(output, worker.bus.subjects());
    let stored = match serde_json::to_value(Envelope::new(&result.message)) {
        Ok(payload) => StoredResult {
            subject: result.subject,
            // Made once and stored: a republish of this result keeps its id.
            msg_id: sealed(&result.msg_id, &msg_id_nonce()),
            payload,
        },
        Err(err) => {
            tracing::error!(error = %err, "encoding the result failed; terminating the request");
            guard.release().await;
            return Settle::Term(format!("unencodable result: {err}"));
        }
    };
    match guard.finish(&stored, RESULT_PUBLISH_PATIENCE).await {
        Ok(Recorded::Stored) => {}
        Ok(Recorded::TakenOver) => {
            tracing::warn!("another worker took this step over while it finished; its result wins");
            return Settle::Abandon;
        }
        Err(err) => {
            tracing::error!(error = %err, "recording the finished episode failed; publishing its result anyway");
        }
    }
    let headers = episode.result_headers();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let settle = publish_settle(&worker.bus, &stored, &headers).await;
    if settle == Settle::Ack {
        episode.published(output);
    }
    settle
}

/// Publish a stored result with its msg id: ack once published, else nak for redelivery.
async fn publish_settle(bus: &Bus, stored: &StoredResult, headers: &[(&str, &str)]) -> Settle {
    match publish_stored(bus, stored, headers).await {
        Ok(()) => Settle::Ack,
        Err(err) => {
            tracing::error!(error = %err, "publishing the result failed; nak for redelivery");
            Settle::Nak(Some(REDELIVERY_DELAY))
        }
    }
}

/// Publish a result with its dedup id, retrying retryable failures for up to
/// [`RESULT_PUBLISH_PATIENCE`].
pub async fn publish_stored(
    bus: &Bus,
    stored: &StoredResult,
    headers: &[(&str, &str)],
) -> Result<(), BusError> {
    // Not the shutdown token: an episode finished within its shutdown grace still publishes
    // (the consume loop's drain bounds how long).
    let published = retry_with_patience(
        "result publish",
        RESULT_PUBLISH_PATIENCE,
        &CancellationToken::new(),
        BusError::is_retryable,
        || bus.publish_json(&stored.subject, &stored.payload, &stored.msg_id, headers),
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
    use crate::runtime::EpisodeClaims;
    use crate::{BusOptions, ConsumerOptions, Work};
    use loopgate_protocol::subjects::Capability;
    use loopgate_protocol::usage::Usage;
    use loopgate_protocol::wire::{ExecOutcome, ExecResult};
    use loopgate_test_support::NatsServer;

    const STEP: StepKey<'static> = StepKey {
        run_id: "r1",
        generation: 1,
        round: 1,
    };

    /// An executor episode that ends at once with a failed result.
    struct Instant;

    impl ClaimedEpisode for Instant {
        type End = ();
        type Output = ();
        fn role(&self) -> EpisodeRole {
            EpisodeRole::Executor
        }
        fn step(&self) -> StepKey<'_> {
            STEP
        }
        fn dispatch_without_header(&self) -> DispatchId {
            DispatchId::exec(STEP)
        }
        fn started_msg_id(&self, attempt: u64) -> String {
            STEP.exec_started_msg_id(attempt)
        }
        fn run(&self) -> impl Future<Output = ()> + Send + '_ {
            std::future::ready(())
        }
        fn conclude(&self, _end: Option<()>, _elapsed: Duration) -> Concluded<()> {
            Concluded::Publish(())
        }
        fn result(&self, _output: &(), subjects: &Subjects) -> ResultMessage {
            ResultMessage {
                subject: subjects.exec_result(STEP.run_id),
                msg_id: STEP.exec_result_msg_id(1),
                message: Message::ExecResult(ExecResult {
                    transcript: None,
                    attempt: 1,
                    run_id: STEP.run_id.into(),
                    generation: 1,
                    round: 1,
                    delivery_attempt: 1,
                    worker: "w1".into(),
                    outcome: ExecOutcome::Failed { error: "x".into() },
                    usage: Usage::default(),
                    duration_ms: 1,
                    agent_isolation: None,
                }),
            }
        }
    }

    fn msg_id(message: &async_nats::jetstream::message::StreamMessage) -> String {
        message
            .headers
            .get(DISPATCH_ID_HEADER)
            .map(|v| v.as_str().to_string())
            .unwrap_or_default()
    }

    /// The result and the start notice go out under ids sealed with a fresh nonce; the
    /// republish of a finished step's stored result reuses its id, so JetStream drops it as a
    /// duplicate instead of storing a second result.
    #[tokio::test]
    async fn results_are_sealed_once_and_republished_under_the_same_id() {
        let server = NatsServer::start().await.unwrap();
        let options = BusOptions {
            request_timeout: Duration::from_secs(5),
            ..BusOptions::default()
        };
        let bus = Bus::connect(&server.url(), "loopgate", options)
            .await
            .unwrap();
        bus.ensure_topology().await.unwrap();
        let subjects = bus.subjects().clone();
        let dispatch = DispatchId::exec(STEP).into_string();
        bus.publish_json(&subjects.exec(Capability::Cli), &"{}", &dispatch, &[])
            .await
            .unwrap();
        let ack_wait = Duration::from_secs(5);
        let mut consumer = bus
            .work_consumer(
                Work::Exec(Capability::Cli),
                ConsumerOptions {
                    ack_wait,
                    ..ConsumerOptions::default()
                },
            )
            .await
            .unwrap();
        let delivery = consumer.next(ack_wait).await.unwrap().expect("the request");
        let worker = EpisodeWorker {
            bus: bus.clone(),
            worker_id: "w1".into(),
            cancels: EpisodeCancels::new(),
            claims: EpisodeClaims::new(bus.clone(), "w1", ack_wait),
            shutdown_grace: Duration::from_secs(1),
        };
        let never = CancellationToken::new();
        for _ in 0..2 {
            // The second time the step has finished: its stored result is published again.
            let settle = run_claimed(&worker, &delivery, &Instant, &never, &never).await;
            assert_eq!(settle, Settle::Ack);
        }
        let stream = bus.jetstream().get_stream("LG_RESULTS").await.unwrap();
        let result = stream
            .get_last_raw_message_by_subject(&subjects.exec_result(STEP.run_id))
            .await
            .unwrap();
        let started = stream
            .get_last_raw_message_by_subject(&subjects.exec_started(STEP.run_id))
            .await
            .unwrap();
        for (message, prefix) in [
            (&result, STEP.exec_result_msg_id(1)),
            (&started, STEP.exec_started_msg_id(1)),
        ] {
            let id = msg_id(message);
            let nonce = id.strip_prefix(&format!("{prefix}:")).unwrap_or_default();
            assert_eq!(nonce.len(), 32, "{id}");
            assert!(nonce.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        // One start (the second delivery found the step finished) and one result: the
        // republish carried the stored id and was dropped as a duplicate.
        let info = stream.get_info().await.unwrap();
        assert_eq!(info.state.messages, 2, "{info:?}");
        assert_eq!(result.sequence, 2);
    }
}
