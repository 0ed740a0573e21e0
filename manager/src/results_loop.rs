//! The owner loop of this replica's share of the results stream, on the shared runtime
//! (`run_consumer` pulls, keeps deliveries alive and settles): executor results, audit reports
//! and decision requests, each admitted first (on its own subject, under an id of its own
//! role's shape, reports signed: see `admission`), then handled by a plain function and acked only after its effects are stored
//! and published.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use loopgate_common::decide::RunEvent;
use loopgate_models::ChatClient;
use loopgate_protocol::report::signing::TrustedKeys;
use loopgate_protocol::subjects::binding::check_msg_id;
use loopgate_protocol::wire::{decode, Message};
use loopgate_transport::runtime::{run_consumer, ConsumeOptions, Settle, DISPATCH_ID_HEADER};
use loopgate_transport::{ConsumerOptions, Delivery, Work};
use tokio_util::sync::CancellationToken;

use crate::admission::{admit, record_refusal, record_undecodable_refusal, Refusal};
use crate::dead_letters::{dead_letter, is_last_delivery, reason_class, retry_delay, Original};
use crate::decision::take_decision;
use crate::engine::{Applied, Engine, EngineError};

pub struct ResultsLoop {
    pub engine: Engine,
    pub models: Arc<BTreeMap<String, ChatClient>>,
    pub char_budget: usize,
    /// Whether `[manager] capabilities` allows the `gui` route (the upper bound).
    pub gui_configured: bool,
    /// The capabilities live executors announce: `gui` is offered only while one serves it.
    pub capabilities: loopgate_transport::runtime::CapabilityBoard,
    pub concurrency: usize,
    pub consumer_options: ConsumerOptions,
    /// Auditor keys a report must be signed by; empty: reports are accepted unsigned.
    pub auditor_keys: TrustedKeys,
}

/// How long an in-flight handler may run after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long one pull waits before the loop looks at the cancel token again.
const POLL: Duration = Duration::from_secs(1);

impl ResultsLoop {
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        let consumer = self
            .engine
            .bus()
            .work_consumer(Work::Results, self.consumer_options)
            .await?;
        let options = ConsumeOptions {
            concurrency: self.concurrency,
            // Results are short to handle: one request for as many as there are free handlers.
            pull_batch: self.concurrency,
            poll: POLL,
            ack_wait: self.consumer_options.ack_wait,
            drain: SHUTDOWN_GRACE,
        };
        let shared = Arc::new(self);
        run_consumer(consumer, options, cancel, move |delivery, _lease| {
            let me = shared.clone();
            async move { me.handle(delivery).await }
        })
        .await;
        Ok(())
    }

    /// Decode, apply, settle: acked only after the effects are stored and published.
    async fn handle(&self, delivery: Delivery) -> Settle {
        let msg_id = delivery.header(DISPATCH_ID_HEADER);
        let subjects = self.engine.bus().subjects();
        let message = match decode(delivery.payload()) {
            Ok(m) => m,
            Err(e) => {
                // Junk under another role's id is a squatting attempt: a security event.
                if let Err(why) = check_msg_id(subjects, delivery.subject(), msg_id.as_deref()) {
                    let why = Refusal::from(why);
                    record_undecodable_refusal(self.engine.metrics(), delivery.subject(), &why);
                    return Settle::Term(format!("refused: {}: {why}", why.reason()));
                }
                tracing::error!(subject = delivery.subject(), error = %e, "undecodable message on the results stream; dropped");
                return Settle::Term(format!("undecodable: {e}"));
            }
        };
        if let Err(why) = admit(
            subjects,
            &self.auditor_keys,
            delivery.subject(),
            msg_id.as_deref(),
            &message,
        ) {
            record_refusal(self.engine.metrics(), delivery.subject(), &message, &why);
            return Settle::Term(format!("refused: {}: {why}", why.reason()));
        }
        let run_id = message.run_id().to_string();
        let kind = message.kind();
        let outcome = match message {
            Message::ExecResult(result) => {
                self.engine
                    .apply(&run_id, &RunEvent::ExecFinished(result))
                    .await
            }
            Message::AuditReport(report) => {
                self.engine
                    .apply(&run_id, &RunEvent::AuditFinished(report))
                    .await
            }
            Message::DecideRequest(req) => {
                take_decision(
                    &self.engine,
                    &self.models,
                    self.char_budget,
                    |backend| self.capabilities.offers_gui(backend, self.gui_configured),
                    &req,
                )
                .await
            }
            Message::EpisodeStarted(started) => {
                self.engine
                    .apply(&run_id, &RunEvent::EpisodeStarted(started))
                    .await
            }
            Message::EpisodeProgress(progress) => {
                self.engine
                    .apply(&run_id, &RunEvent::EpisodeProgress(progress))
                    .await
            }
            Message::AuditProgress(progress) => {
                self.engine
                    .apply(&run_id, &RunEvent::AuditProgress(progress))
                    .await
            }
            other => Ok(Applied::Ignored(format!(
                "unexpected {} on the results stream",
                other.kind()
            ))),
        };
        match outcome {
            Ok(applied) => {
                log_applied(&run_id, kind, msg_id.as_deref(), &applied);
                Settle::Ack
            }
            Err(EngineError::NotFound(_))
            | Err(EngineError::Corrupt { .. })
            | Err(EngineError::Inconsistent { .. }) => {
                // Redelivery would decide the same again: drop it, loudly.
                tracing::error!(run_id, "result for a missing or unreadable run, or one its transition would corrupt; dropped");
                Settle::Term("its run is missing, unreadable or the transition was refused".into())
            }
            // Best effort: a progress notice is not retried (nor dead-lettered); the next one,
            // or the episode's result, follows.
            Err(e) if matches!(kind, "episode_progress" | "audit_progress") => {
                tracing::debug!(run_id, error = %e, "progress notice not applied; dropped");
                Settle::Term(format!("progress notice not applied: {e}"))
            }
            Err(e) => {
                let attempt = delivery.attempt();
                if !is_last_delivery(attempt, self.consumer_options.max_deliver) {
                    tracing::warn!(run_id, attempt, error = %e, "handling failed; will retry");
                    return Settle::Nak(Some(retry_delay(attempt)));
                }
                let reason = format!("{attempt} deliveries failed; last: {e}");
                match dead_letter(
                    &self.engine,
                    &Original::results(&delivery),
                    kind,
                    &run_id,
                    reason_class(&e),
                    &reason,
                )
                .await
                {
                    Ok(()) => Settle::Term(format!("dead-lettered: {reason}")),
                    Err(publish) => {
                        tracing::error!(run_id, kind, error = %e, dead_letter_error = %publish,
                            "message exhausted its deliveries and could not be dead-lettered");
                        Settle::Term(format!("deliveries exhausted: {reason}"))
                    }
                }
            }
        }
    }
}

/// What became of a results message that is acked. An episode's result or an audit's report
/// is logged at info whatever became of it (a few per round), so a run that waits for one can
/// be traced to the manager that took it; notices and decisions at debug.
fn log_applied(run_id: &str, kind: &str, msg_id: Option<&str>, applied: &Applied) {
    let outcome = match applied {
        Applied::Changed(record) => format!("applied (round {})", record.round),
        Applied::Replayed => "a redelivery of one applied before".to_string(),
        Applied::Ignored(reason) => format!("ignored: {reason}"),
    };
    if matches!(kind, "exec_result" | "audit_report") {
        tracing::info!(run_id, kind, msg_id, %outcome, "result taken");
    } else {
        tracing::debug!(run_id, kind, %outcome, "message taken");
    }
}
