//! The worker loop: pull audit requests one at a time, keep the delivery alive with progress
//! acks while the audit runs, publish the report, then ack. On shutdown the in-flight audit
//! gets a grace period, else its delivery is nak'ed for another worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_common::wire::{decode, AuditReport, AuditRequest, Envelope, Message};
use loopgate_transport::{
    Bus, BusError, ConsumerOptions, Delivery, ProgressHandle, Work, WorkConsumer,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::audit::{report_msg_id, Auditor};
use crate::config::MAX_DELIVER;
use crate::episode_control::{publish_started, AuditCancels};
use loopgate_transport::control_listener::listen_for_cancels;

/// How long one pull waits before checking for shutdown again.
const POLL: Duration = Duration::from_secs(5);
/// After this long without a durable to bind, try creating it again (it may have been lost).
const CONSUMER_CREATE_RETRY: Duration = Duration::from_secs(60);
/// Redelivery delay after a failed audit (store unreachable) or a failed publish.
const RETRY_DELAY: Duration = Duration::from_secs(5);
/// W3C trace context header carried from request to report.
const TRACEPARENT: &str = "traceparent";

#[derive(Debug, Clone, Copy)]
pub struct WorkerOptions {
    /// JetStream redelivers a request after this long without an ack or progress ack.
    pub ack_wait: Duration,
    /// How long an in-flight audit may run on after shutdown is requested.
    pub shutdown_grace: Duration,
}

impl WorkerOptions {
    /// Progress acks go out three times per ack_wait.
    pub fn progress_interval(&self) -> Duration {
        (self.ack_wait / 3).max(Duration::from_secs(1))
    }
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
pub async fn publish_report(
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
pub fn audit_consumer_options(ack_wait: Duration) -> ConsumerOptions {
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
    let Some(mut consumer) = consumer_with_retry(bus, consumer_options, &cancel).await? else {
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
    let cancels = AuditCancels::new();
    let stop_listening = cancel.child_token();
    let control = bus.subjects().control_all();
    let listener = match bus.subscribe_core(&control).await {
        Ok(notices) => {
            let audits = cancels.clone();
            Some(tokio::spawn(listen_for_cancels(
                notices,
                stop_listening.clone(),
                move |n| audits.cancel(&n.run_id, n.generation),
            )))
        }
        Err(err) => {
            tracing::error!(error = %err, %control, "cannot subscribe to control notices; audits cannot be cancelled");
            None
        }
    };
    tracing::info!(worker = %auditor.worker_id, "auditor ready");
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => break,
            next = consumer.next(POLL) => next,
        };
        match next {
            Ok(Some(delivery)) => {
                handle_delivery(bus, &auditor, options, delivery, &cancels, &cancel).await
            }
            Ok(None) => {}
            // `next` already backed off; a lost durable is recreated on the next pull.
            Err(err) => tracing::debug!(error = %err, "pull failed"),
        }
    }
    tracing::info!(worker = %auditor.worker_id, "auditor stopped taking work");
    stop_listening.cancel();
    if let Some(listener) = listener {
        let _ = listener.await;
    }
    Ok(())
}

fn spawn_heartbeat(
    handle: ProgressHandle,
    every: Duration,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => {
                    if let Err(err) = handle.progress().await {
                        tracing::warn!(error = %err, "progress ack failed");
                    }
                }
            }
        }
    })
}

async fn settle(result: Result<(), BusError>, what: &'static str) {
    if let Err(err) = result {
        tracing::warn!(error = %err, "{what} failed");
    }
}

/// Handle one delivery to the end: report published and acked, or nak'ed, or terminated.
pub async fn handle_delivery(
    bus: &Bus,
    auditor: &Auditor,
    options: WorkerOptions,
    delivery: Delivery,
    cancels: &AuditCancels,
    cancel: &CancellationToken,
) {
    let request = match decode(delivery.payload()) {
        Ok(Message::AuditRequest(request)) => request,
        Ok(other) => {
            tracing::error!(
                kind = other.kind(),
                run_id = other.run_id(),
                subject = delivery.subject(),
                "not an audit request; terminating the message"
            );
            return settle(delivery.term().await, "term").await;
        }
        Err(err) => {
            tracing::error!(error = %err, subject = delivery.subject(),
                "undecodable audit request; terminating the message");
            return settle(delivery.term().await, "term").await;
        }
    };
    if cancels.is_cancelled(&request.run_id, request.generation) {
        tracing::info!(run_id = %request.run_id, generation = request.generation,
            "audit request of a cancelled generation; terminating it");
        return settle(delivery.term().await, "term").await;
    }
    let span = tracing::info_span!("invoke_agent auditor",
        "gen_ai.operation.name" = "invoke_agent", "gen_ai.agent.name" = "auditor",
        "loopgate.run_id" = %request.run_id, "loopgate.generation" = request.generation,
        "loopgate.round" = request.round, "loopgate.worker" = %auditor.worker_id,
        "loopgate.snapshot" = %request.candidate_snapshot,
        "loopgate.status" = tracing::field::Empty, "loopgate.integrity" = tracing::field::Empty,
        "loopgate.contract" = tracing::field::Empty,
        run_id = %request.run_id,
        generation = request.generation, round = request.round, attempt = delivery.attempt());
    // Join the run's trace: the manager put its span context on the request.
    loopgate_telemetry::otel::set_remote_parent(&span, delivery.header(TRACEPARENT).as_deref());
    audit_and_settle(bus, auditor, options, &delivery, &request, cancels, cancel)
        .instrument(span)
        .await;
}

async fn audit_and_settle(
    bus: &Bus,
    auditor: &Auditor,
    options: WorkerOptions,
    delivery: &Delivery,
    request: &AuditRequest,
    cancels: &AuditCancels,
    cancel: &CancellationToken,
) {
    tracing::info!(candidate = %request.candidate_snapshot, "audit started");
    publish_started(bus, &auditor.worker_id, request, delivery.attempt()).await;
    let registration = cancels.register(&request.run_id, request.generation);
    let aborted = registration.token().clone();
    let stop_heartbeat = CancellationToken::new();
    let heartbeat = spawn_heartbeat(
        delivery.progress_handle(),
        options.progress_interval(),
        stop_heartbeat.clone(),
    );
    let started = std::time::Instant::now();
    let mut audit = Box::pin(auditor.audit(request, delivery.attempt()));
    let result = tokio::select! {
        result = &mut audit => Some(result),
        () = aborted.cancelled() => None,
        _ = cancel.cancelled() => {
            tracing::info!(grace_secs = options.shutdown_grace.as_secs(), "shutdown: finishing the in-flight audit");
            tokio::select! {
                result = tokio::time::timeout(options.shutdown_grace, &mut audit) => result.ok(),
                () = aborted.cancelled() => None,
            }
        }
    };
    // Dropping an unfinished audit kills its check processes and removes its scratch dir.
    drop(audit);
    stop_heartbeat.cancel();
    let _ = heartbeat.await;

    drop(registration);
    if aborted.is_cancelled() {
        tracing::info!("audit cancelled by a control notice; terminating the request");
        return settle(delivery.term().await, "term").await;
    }
    let traceparent = delivery.header(TRACEPARENT);
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
            settle(delivery.nak(None).await, "nak").await;
        }
        Some(Err(err)) => {
            tracing::warn!(error = %err, "audit could not run; will be redelivered");
            settle(delivery.nak(Some(RETRY_DELAY)).await, "nak").await;
        }
        Some(Ok(report)) => match publish_report(bus, &report, traceparent.as_deref()).await {
            Ok(()) => {
                tracing::info!(status = ?report.verdicts.status, integrity = ?report.verdicts.integrity,
                    contract = ?report.verdicts.contract, duration_ms = report.duration_ms, "audit report published");
                settle(delivery.ack().await, "ack").await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "publishing the audit report failed; will be redelivered");
                settle(delivery.nak(Some(RETRY_DELAY)).await, "nak").await;
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_interval_table() {
        let cases = [(30, 10), (3, 1), (2, 1), (90, 30)];
        for (ack_wait, every) in cases {
            let options = WorkerOptions {
                ack_wait: Duration::from_secs(ack_wait),
                shutdown_grace: Duration::ZERO,
            };
            assert_eq!(
                options.progress_interval(),
                Duration::from_secs(every),
                "{ack_wait}"
            );
        }
    }
}
