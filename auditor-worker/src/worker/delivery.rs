//! The worker loop, on the shared runtime (`run_consumer` pulls one audit request at a time,
//! keeps the delivery alive and settles it): decode, audit, publish the report, settle. On
//! shutdown the in-flight audit gets a grace period, else its delivery is nak'ed for another
//! worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_protocol::dispatch_id::{DispatchId, StepKey};
use loopgate_protocol::wire::{
    decode, AuditReport, AuditRequest, Envelope, EpisodeRole, EpisodeStarted, Message,
};
use loopgate_telemetry::otel::TRACEPARENT;
use loopgate_transport::runtime::{
    announce_started, claim_key, retry_with_patience, run_consumer, ClaimGuard, Claimed,
    ConsumeOptions, EpisodeCancels, EpisodeClaims, Recorded, Settle, StoredResult,
    DISPATCH_ID_HEADER,
};
use loopgate_transport::{Bus, BusError, ConsumerOptions, Delivery, Work, WorkConsumer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::audit::{report_msg_id, Auditor};
use crate::config::MAX_DELIVER;

/// How long one pull waits before checking for shutdown again.
const POLL: Duration = Duration::from_secs(5);
/// After this long without a durable to bind, try creating it again (it may have been lost).
const CONSUMER_CREATE_RETRY: Duration = Duration::from_secs(60);
/// Redelivery delay after a failed audit (store unreachable) or a failed publish.
const RETRY_DELAY: Duration = Duration::from_secs(5);
/// On shutdown the loop waits this much longer than the audit's grace before it gives up.
const DRAIN_MARGIN: Duration = Duration::from_secs(10);
/// A finished audit's report is stored in its claim and published for this long (NATS away)
/// before the audit is handed back.
const REPORT_PUBLISH_PATIENCE: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
pub struct WorkerOptions {
    /// JetStream redelivers a request after this long without an ack or progress ack.
    pub ack_wait: Duration,
    /// How long an in-flight audit may run on after shutdown is requested.
    pub shutdown_grace: Duration,
    /// Audits at once (`[auditor] concurrency`); each has its own scratch directory.
    pub concurrency: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("creating the audit consumer: {0}")]
    Consumer(#[source] BusError),
    #[error("encoding the audit report: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Publish(BusError),
}

/// Publish a report as a versioned wire envelope on `result.audit.<run>`, deduplicated by
/// `{run}:{generation}:{round}:audit-report:{purpose}:{attempt}`.
pub(crate) async fn publish_report(
    bus: &Bus,
    report: &AuditReport,
    traceparent: Option<&str>,
) -> Result<(), WorkerError> {
    let message = Message::AuditReport(report.clone());
    let headers: Vec<(&str, &str)> = traceparent
        .map(|tp| vec![(TRACEPARENT, tp)])
        .unwrap_or_default();
    bus.publish_json(
        &bus.subjects().audit_result(&report.run_id),
        &Envelope::new(&message),
        &report_msg_id(report),
        &headers,
    )
    .await
    .map_err(WorkerError::Publish)
}

/// `{run}:{generation}:{round}:audit-started:{purpose}:{attempt}`
pub(crate) fn started_msg_id(req: &AuditRequest, attempt: u64) -> String {
    step_key(req).audit_started_msg_id(req.purpose, attempt)
}

fn step_key(req: &AuditRequest) -> StepKey<'_> {
    StepKey {
        run_id: &req.run_id,
        generation: req.generation,
        round: req.round,
    }
}

/// Tell the manager the audit starts. Best effort: the report is what counts.
pub(crate) async fn publish_started(bus: &Bus, worker: &str, req: &AuditRequest, attempt: u64) {
    let started = EpisodeStarted {
        run_id: req.run_id.clone(),
        generation: req.generation,
        round: req.round,
        role: EpisodeRole::Auditor,
        delivery_attempt: attempt,
        worker: worker.to_string(),
    };
    announce_started(bus, started, &started_msg_id(req, attempt)).await;
}

/// Bind the `audit` durable, waiting (until cancelled) for it to exist. Restricted auditor
/// credentials can only bind it; with broader ones a missing durable is created here.
async fn consumer_with_retry(
    bus: &Bus,
    options: ConsumerOptions,
    cancel: &CancellationToken,
) -> Result<Option<WorkConsumer>, WorkerError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(200);
    let mut tried_create = false;
    loop {
        match bus.bind_work_consumer(Work::Audit).await {
            Ok(consumer) => return Ok(Some(consumer)),
            Err(err) if !tried_create || started.elapsed() > CONSUMER_CREATE_RETRY => {
                tried_create = true;
                tracing::info!(error = %err, "no audit consumer to bind; trying to create it");
                match bus.work_consumer(Work::Audit, options).await {
                    Ok(consumer) => return Ok(Some(consumer)),
                    Err(err) => tracing::warn!(error = %err,
                        "cannot create the audit consumer (restricted credentials?); waiting for the manager to create it"),
                }
            }
            Err(err) => tracing::debug!(error = %err, "audit consumer not there yet"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return Ok(None),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(3));
    }
}

/// The `audit` durable's settings; whoever creates it (the manager, or an auditor with broad
/// credentials) should use these.
pub(crate) fn audit_consumer_options(ack_wait: Duration) -> ConsumerOptions {
    ConsumerOptions {
        ack_wait,
        max_deliver: MAX_DELIVER,
        ..ConsumerOptions::default()
    }
}

/// The `ack_wait` of the `audit` durable on the server, when it can be looked up.
async fn bound_ack_wait(bus: &Bus) -> Option<Duration> {
    let lookup = bus
        .jetstream()
        .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
            Work::Audit.durable_name(),
            Work::Audit.stream_name(),
        );
    match tokio::time::timeout(bus.request_timeout(), lookup).await {
        Ok(Ok(consumer)) => Some(consumer.cached_info().config.ack_wait),
        _ => None,
    }
}

/// Run until `cancel` fires.
pub async fn run_worker(
    bus: &Bus,
    auditor: Arc<Auditor>,
    options: WorkerOptions,
    cancel: CancellationToken,
) -> Result<(), WorkerError> {
    let consumer_options = audit_consumer_options(options.ack_wait);
    let Some(consumer) = consumer_with_retry(bus, consumer_options, &cancel).await? else {
        return Ok(());
    };
    // The durable may have been created by the manager with another ack_wait: the progress
    // heartbeat must follow the one the server enforces.
    let mut options = options;
    if let Some(ack_wait) = bound_ack_wait(bus).await {
        if ack_wait != options.ack_wait {
            tracing::info!(configured = ?options.ack_wait, server = ?ack_wait,
                "using the audit consumer's ack_wait");
            options.ack_wait = ack_wait;
        }
    }
    // Control notices first, so none is missed once work is taken.
    let cancels = EpisodeCancels::new();
    let stop_listening = cancel.child_token();
    let listener = match cancels.listen(bus, stop_listening.clone()).await {
        Ok(listener) => Some(listener),
        Err(err) => {
            tracing::error!(error = %err, "cannot subscribe to control notices; audits cannot be cancelled");
            None
        }
    };
    tracing::info!(worker = %auditor.worker_id(), "auditor ready");
    let consume = ConsumeOptions {
        concurrency: options.concurrency.max(1),
        poll: POLL,
        ack_wait: options.ack_wait,
        drain: options.shutdown_grace + DRAIN_MARGIN,
    };
    let worker = Arc::new(AuditWorker {
        bus: bus.clone(),
        auditor: auditor.clone(),
        options,
        cancels,
        claims: EpisodeClaims::new(bus.clone(), auditor.worker_id(), options.ack_wait),
        cancel: cancel.clone(),
    });
    run_consumer(consumer, consume, cancel, move |delivery, lease| {
        let worker = worker.clone();
        let lost = lease.lost().clone();
        async move { worker.handle_delivery(delivery, &lost).await }
    })
    .await;
    tracing::info!(worker = %auditor.worker_id(), "auditor stopped taking work");
    stop_listening.cancel();
    if let Some(listener) = listener {
        let _ = listener.await;
    }
    Ok(())
}

/// What every audit of this worker shares.
struct AuditWorker {
    bus: Bus,
    auditor: Arc<Auditor>,
    options: WorkerOptions,
    cancels: EpisodeCancels,
    /// One audit per dispatched step (`lg-episodes`), whatever JetStream redelivers.
    claims: EpisodeClaims,
    /// The daemon's shutdown token.
    cancel: CancellationToken,
}

/// How a claimed audit ended.
enum Audited {
    /// Without a report: settle so (the claim is released).
    Settled(Settle),
    /// Another auditor took the step over.
    TakenOver,
    /// With a report to store and publish.
    Finished(Box<AuditReport>),
}

impl AuditWorker {
    /// Decode, audit, publish the report: the settle says how the delivery ended. `lost`
    /// fires when the delivery's keep-alive failed for a whole ack_wait.
    async fn handle_delivery(&self, delivery: Delivery, lost: &CancellationToken) -> Settle {
        let request = match decode(delivery.payload()) {
            Ok(Message::AuditRequest(request)) => request,
            Ok(other) => {
                tracing::error!(
                    kind = other.kind(),
                    run_id = other.run_id(),
                    subject = delivery.subject(),
                    "not an audit request; terminating the message"
                );
                return Settle::Term(format!("not an audit request: {}", other.kind()));
            }
            Err(err) => {
                tracing::error!(error = %err, subject = delivery.subject(),
                    "undecodable audit request; terminating the message");
                return Settle::Term(format!("undecodable: {err}"));
            }
        };
        if self.cancels.is_dispatch_cancelled(
            &request.run_id,
            request.generation,
            delivery.header(DISPATCH_ID_HEADER).as_deref(),
        ) {
            tracing::info!(run_id = %request.run_id, generation = request.generation,
                "audit request of a cancelled generation; terminating it");
            return Settle::Term("its run generation was cancelled".into());
        }
        let span = tracing::info_span!("invoke_agent auditor",
            "gen_ai.operation.name" = "invoke_agent", "gen_ai.agent.name" = "auditor",
            "loopgate.run_id" = %request.run_id, "loopgate.generation" = request.generation,
            "loopgate.round" = request.round, "loopgate.worker" = %self.auditor.worker_id(),
            "loopgate.snapshot" = %request.candidate_snapshot,
            "loopgate.status" = tracing::field::Empty, "loopgate.integrity" = tracing::field::Empty,
            "loopgate.contract" = tracing::field::Empty,
            run_id = %request.run_id,
            generation = request.generation, round = request.round, attempt = delivery.attempt());
        // Join the run's trace: the manager put its span context on the request.
        loopgate_telemetry::otel::set_remote_parent(&span, delivery.header(TRACEPARENT).as_deref());
        self.claimed_audit(&delivery, &request, lost)
            .instrument(span)
            .await
    }

    /// Claim the step (one audit per dispatch), audit, store and publish the report; a step
    /// audited already gets its stored report published again instead.
    async fn claimed_audit(
        &self,
        delivery: &Delivery,
        request: &AuditRequest,
        lost: &CancellationToken,
    ) -> Settle {
        let dispatch = delivery.header(DISPATCH_ID_HEADER).unwrap_or_else(|| {
            DispatchId::audit_without_header(step_key(request), request.purpose).into_string()
        });
        let key = claim_key("audit", &dispatch);
        let claimed = tokio::select! {
            claimed = self.claims.claim(&key, lost) => claimed,
            () = self.cancel.cancelled() => return Settle::Nak(None),
        };
        let guard = match claimed {
            Ok(Some(Claimed::Owned(guard))) => guard,
            Ok(Some(Claimed::Finished(stored))) => {
                tracing::info!(%key, "this audit has finished already: publishing its report again");
                return self.publish_stored(&stored).await;
            }
            Ok(None) => return Settle::Nak(None),
            Err(err) => {
                tracing::warn!(%key, error = %err, "cannot claim the audit; nak for redelivery");
                return Settle::Nak(Some(RETRY_DELAY));
            }
        };
        let report = match self.audit(delivery, request, lost, &guard).await {
            Audited::Settled(settle) => {
                guard.release().await;
                return settle;
            }
            Audited::TakenOver => return Settle::Abandon,
            Audited::Finished(report) => report,
        };
        let message = Message::AuditReport((*report).clone());
        let stored = match serde_json::to_value(Envelope::new(&message)) {
            Ok(payload) => StoredResult {
                subject: self.bus.subjects().audit_result(&report.run_id),
                msg_id: report_msg_id(&report),
                payload,
            },
            Err(err) => return Settle::Term(format!("unencodable report: {err}")),
        };
        match guard.finish(&stored, REPORT_PUBLISH_PATIENCE).await {
            Ok(Recorded::Stored) => {}
            Ok(Recorded::TakenOver) => {
                tracing::warn!(
                    "another auditor took this step over while it finished; its report wins"
                );
                return Settle::Abandon;
            }
            Err(err) => {
                tracing::error!(error = %err, "recording the finished audit failed; publishing its report anyway")
            }
        }
        let traceparent = delivery.header(TRACEPARENT);
        match publish_report(&self.bus, &report, traceparent.as_deref()).await {
            Ok(()) => {
                tracing::info!(status = ?report.verdicts.status, integrity = ?report.verdicts.integrity,
                    contract = ?report.verdicts.contract, duration_ms = report.duration_ms, "audit report published");
                Settle::Ack
            }
            Err(err) => {
                tracing::warn!(error = %err, "publishing the audit report failed; its stored copy is republished on redelivery");
                Settle::Nak(Some(RETRY_DELAY))
            }
        }
    }

    /// Publish a stored report again (same dedup id), with patience.
    async fn publish_stored(&self, stored: &StoredResult) -> Settle {
        let published = retry_with_patience(
            "report republish",
            REPORT_PUBLISH_PATIENCE,
            &CancellationToken::new(),
            BusError::is_retryable,
            || {
                self.bus
                    .publish_json(&stored.subject, &stored.payload, &stored.msg_id, &[])
            },
        )
        .await;
        match published {
            Ok(Some(())) => Settle::Ack,
            Ok(None) | Err(_) => Settle::Nak(Some(RETRY_DELAY)),
        }
    }

    async fn audit(
        &self,
        delivery: &Delivery,
        request: &AuditRequest,
        lost: &CancellationToken,
        guard: &ClaimGuard,
    ) -> Audited {
        let auditor = &self.auditor;
        tracing::info!(candidate = %request.candidate_snapshot, "audit started");
        publish_started(&self.bus, auditor.worker_id(), request, delivery.attempt()).await;
        let dispatch = delivery.header(DISPATCH_ID_HEADER);
        let registration = self.cancels.register_dispatch(
            &request.run_id,
            request.generation,
            dispatch.as_deref(),
        );
        let aborted = registration.token().clone();
        let started = std::time::Instant::now();
        let mut audit = Box::pin(auditor.audit(request, delivery.attempt()));
        let grace = self.options.shutdown_grace;
        let result = tokio::select! {
            result = &mut audit => Some(result),
            () = aborted.cancelled() => None,
            () = lost.cancelled() => {
                tracing::warn!("the delivery was lost (no keep-alive reached NATS for ack_wait): stopping the audit");
                return Audited::Settled(Settle::Nak(None));
            }
            () = guard.lost().cancelled() => {
                if guard.is_taken_over() {
                    tracing::warn!("another auditor took this step over: stopping the audit");
                    return Audited::TakenOver;
                }
                tracing::warn!("the audit claim could not be kept alive for ack_wait: stopping the audit");
                return Audited::Settled(Settle::Nak(None));
            }
            _ = self.cancel.cancelled() => {
                tracing::info!(grace_secs = grace.as_secs(), "shutdown: finishing the in-flight audit");
                tokio::select! {
                    result = tokio::time::timeout(grace, &mut audit) => result.ok(),
                    () = aborted.cancelled() => None,
                }
            }
        };
        // Dropping an unfinished audit kills its check processes and removes its scratch dir.
        drop(audit);
        drop(registration);
        if aborted.is_cancelled() {
            tracing::info!("audit cancelled by a control notice; terminating the request");
            return Audited::Settled(Settle::Term("cancelled by a control notice".into()));
        }
        loopgate_telemetry::metrics::Metrics::new()
            .record_episode("auditor", started.elapsed().as_secs_f64());
        if let Some(Ok(report)) = &result {
            let span = tracing::Span::current();
            span.record(
                "loopgate.status",
                format!("{:?}", report.verdicts.status).to_lowercase(),
            );
            span.record(
                "loopgate.integrity",
                format!("{:?}", report.verdicts.integrity).to_lowercase(),
            );
            span.record(
                "loopgate.contract",
                format!("{:?}", report.verdicts.contract).to_lowercase(),
            );
        }
        match result {
            None => {
                tracing::warn!("shutdown grace over; handing the audit back");
                Audited::Settled(Settle::Nak(None))
            }
            Some(Err(err)) => {
                tracing::warn!(error = %err, "audit could not run; will be redelivered");
                Audited::Settled(Settle::Nak(Some(RETRY_DELAY)))
            }
            Some(Ok(report)) => Audited::Finished(Box::new(report)),
        }
    }
}
