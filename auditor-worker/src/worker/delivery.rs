//! The worker loop, on the shared runtime (`run_consumer` pulls audit requests, keeps each
//! delivery alive and settles it): decode, then run the audit on the one delivery path of a
//! claimed episode (`loopgate_transport::runtime::run_claimed`: cancelled generations dropped,
//! one audit per dispatch, a finished audit's stored report republished, `EpisodeStarted`, the
//! audit, the report stored and published, the settle). On shutdown the in-flight audit gets a
//! grace period, else its delivery is nak'ed for another worker. This file says what is the
//! auditor's own: binding the `audit` durable, the request, the audit and its report.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_protocol::dispatch_id::{DispatchId, StepKey};
use loopgate_protocol::subjects::Subjects;
use loopgate_protocol::wire::{
    decode, AuditProgress, AuditReport, AuditRequest, AuditStage, EpisodeRole, Message,
};
use loopgate_telemetry::otel::TRACEPARENT;
use loopgate_transport::runtime::{
    report_audit_progress, run_claimed, run_consumer, send_throttled, ClaimedEpisode, Concluded,
    ConsumeOptions, EpisodeCancels, EpisodeClaims, EpisodeWorker, ResultMessage, Settle,
    PROGRESS_EVERY, REDELIVERY_DELAY,
};
use loopgate_transport::{Bus, BusError, ConsumerOptions, Delivery, Work, WorkConsumer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::audit::{report_msg_id, AuditError, AuditNow, AuditProgressTx, Auditor};
use crate::config::MAX_DELIVER;

/// How long one pull waits before checking for shutdown again.
const POLL: Duration = Duration::from_secs(5);
/// After this long without a durable to bind, try creating it again (it may have been lost).
const CONSUMER_CREATE_RETRY: Duration = Duration::from_secs(60);
/// On shutdown the loop waits this much longer than the audit's grace before it gives up.
const DRAIN_MARGIN: Duration = Duration::from_secs(10);

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
}

fn step_key(req: &AuditRequest) -> StepKey<'_> {
    StepKey {
        run_id: &req.run_id,
        generation: req.generation,
        round: req.round,
    }
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
        pull_batch: 1,
        poll: POLL,
        ack_wait: options.ack_wait,
        drain: options.shutdown_grace + DRAIN_MARGIN,
    };
    let worker = Arc::new(AuditWorker {
        worker: EpisodeWorker {
            bus: bus.clone(),
            worker_id: auditor.worker_id().to_string(),
            cancels,
            claims: EpisodeClaims::new(bus.clone(), auditor.worker_id(), options.ack_wait),
            shutdown_grace: options.shutdown_grace,
        },
        auditor: auditor.clone(),
        cancel: cancel.clone(),
    });
    // Audits a killed earlier process of this auditor held come back to it first.
    worker.worker.claims.wait_for_earlier_claims(&cancel).await;
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
    /// The bus, this auditor's id, its in-flight audits, its claims and the shutdown grace.
    worker: EpisodeWorker,
    auditor: Arc<Auditor>,
    /// The daemon's shutdown token.
    cancel: CancellationToken,
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
        let traceparent = delivery.header(TRACEPARENT);
        loopgate_telemetry::otel::set_remote_parent(&span, traceparent.as_deref());
        let audit = AuditStep {
            bus: &self.worker.bus,
            auditor: &self.auditor,
            req: &request,
            attempt: delivery.attempt(),
            traceparent,
            work_done: CancellationToken::new(),
        };
        run_claimed(&self.worker, &delivery, &audit, &self.cancel, lost)
            .instrument(span)
            .await
    }
}

/// One audit request on the claimed-episode path.
struct AuditStep<'a> {
    /// Where its progress notices go.
    bus: &'a Bus,
    auditor: &'a Auditor,
    req: &'a AuditRequest,
    attempt: u64,
    /// The request's trace context, passed on with the report.
    traceparent: Option<String>,
    /// Cancelled once the audit's own work is done and only storing is left.
    work_done: CancellationToken,
}

impl AuditStep<'_> {
    /// The audit, its progress published while it runs (a sibling's checks-only audit tells
    /// none: the run shows the round's own audit).
    async fn observed(&self) -> Result<AuditReport, AuditError> {
        let req = self.req;
        let quiet = AuditProgressTx::default().on_work_done(self.work_done.clone());
        if req.mechanical_only {
            return self.auditor.audit_observed(req, self.attempt, &quiet).await;
        }
        let (tx, rx) = tokio::sync::watch::channel(AuditNow::default());
        let template = AuditProgress {
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            purpose: req.purpose,
            delivery_attempt: self.attempt,
            worker: self.auditor.worker_id().to_string(),
            stage: AuditStage::Checks,
            check: None,
            check_index: 0,
            checks_total: 0,
            elapsed_ms: 0,
        };
        let bus = self.bus.clone();
        let publisher = tokio::spawn(send_throttled(
            rx,
            PROGRESS_EVERY,
            move |now: AuditNow, elapsed, seq| {
                let notice = AuditProgress {
                    stage: now.stage,
                    check: now.check,
                    check_index: now.check_index,
                    checks_total: now.checks_total,
                    elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                    ..template.clone()
                };
                let bus = bus.clone();
                async move { report_audit_progress(&bus, notice, seq).await }
            },
        ));
        let end = self
            .auditor
            .audit_observed(
                req,
                self.attempt,
                &AuditProgressTx::new(tx).on_work_done(self.work_done.clone()),
            )
            .await;
        publisher.abort();
        end
    }
}

impl ClaimedEpisode for AuditStep<'_> {
    type End = Result<AuditReport, AuditError>;
    type Output = AuditReport;

    fn role(&self) -> EpisodeRole {
        EpisodeRole::Auditor
    }

    fn step(&self) -> StepKey<'_> {
        step_key(self.req)
    }

    fn dispatch_without_header(&self) -> DispatchId {
        DispatchId::audit_without_header(step_key(self.req), self.req.purpose)
    }

    /// `{run}:{generation}:{round}:audit-started:{purpose}:{attempt}`.
    fn started_msg_id(&self, attempt: u64) -> String {
        step_key(self.req).audit_started_msg_id(self.req.purpose, attempt)
    }

    fn run(&self) -> impl Future<Output = Self::End> + Send + '_ {
        tracing::info!(candidate = %self.req.candidate_snapshot, "audit started");
        self.observed()
    }

    /// The checks, the judge and the rubric are done; storing the evidence and the report is
    /// left, and holds through a NATS outage.
    fn wrap_up(&self) -> CancellationToken {
        self.work_done.clone()
    }

    fn conclude(&self, end: Option<Self::End>, elapsed: Duration) -> Concluded<AuditReport> {
        loopgate_telemetry::metrics::Metrics::new()
            .record_episode("auditor", elapsed.as_secs_f64());
        match end {
            None => {
                tracing::warn!("shutdown grace over; handing the audit back");
                Concluded::Settle(Settle::Nak(None))
            }
            Some(Err(err)) => {
                tracing::warn!(error = %err, "audit could not run; will be redelivered");
                Concluded::Settle(Settle::Nak(Some(REDELIVERY_DELAY)))
            }
            Some(Ok(report)) => {
                record_verdicts(&report);
                Concluded::Publish(report)
            }
        }
    }

    /// On `result.audit.<run>`, deduplicated by
    /// `{run}:{generation}:{round}:audit-report:{purpose}:{attempt}`.
    fn result(&self, report: &AuditReport, subjects: &Subjects) -> ResultMessage {
        ResultMessage {
            subject: subjects.audit_result(&report.run_id),
            msg_id: report_msg_id(report),
            message: Message::AuditReport(report.clone()),
        }
    }

    fn result_headers(&self) -> Vec<(&'static str, String)> {
        self.traceparent
            .iter()
            .map(|tp| (TRACEPARENT, tp.clone()))
            .collect()
    }

    fn published(&self, report: &AuditReport) {
        tracing::info!(status = ?report.verdicts.status, integrity = ?report.verdicts.integrity,
            contract = ?report.verdicts.contract, duration_ms = report.duration_ms, "audit report published");
    }
}

/// The report's three verdicts on the audit's span.
fn record_verdicts(report: &AuditReport) {
    let span = tracing::Span::current();
    let word = |verdict: &dyn std::fmt::Debug| format!("{verdict:?}").to_lowercase();
    span.record("loopgate.status", word(&report.verdicts.status));
    span.record("loopgate.integrity", word(&report.verdicts.integrity));
    span.record("loopgate.contract", word(&report.verdicts.contract));
}
