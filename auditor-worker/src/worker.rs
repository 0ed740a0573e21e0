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

/// How long one pull waits before checking for shutdown again.
const POLL: Duration = Duration::from_secs(5);
/// How long to keep trying to create the durable consumer at start-up.
const CONSUMER_SETUP_BUDGET: Duration = Duration::from_secs(30);
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

async fn consumer_with_retry(
    bus: &Bus,
    options: ConsumerOptions,
    cancel: &CancellationToken,
) -> Result<Option<WorkConsumer>, WorkerError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        match bus.work_consumer(Work::Audit, options).await {
            Ok(consumer) => return Ok(Some(consumer)),
            Err(err) if started.elapsed() < CONSUMER_SETUP_BUDGET => {
                tracing::warn!(error = %err, "creating the audit consumer failed; retrying");
            }
            Err(err) => return Err(WorkerError::Consumer(err)),
        }
        tokio::select! {
            _ = cancel.cancelled() => return Ok(None),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(3));
    }
}

/// Run until `cancel` fires. Returns an error only when the consumer cannot be set up.
pub async fn run_worker(
    bus: &Bus,
    auditor: Arc<Auditor>,
    options: WorkerOptions,
    cancel: CancellationToken,
) -> Result<(), WorkerError> {
    let consumer_options = ConsumerOptions {
        ack_wait: options.ack_wait,
        max_deliver: MAX_DELIVER,
        ..ConsumerOptions::default()
    };
    let Some(mut consumer) = consumer_with_retry(bus, consumer_options, &cancel).await? else {
        return Ok(());
    };
    tracing::info!(worker = %auditor.worker_id, "auditor ready");
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => break,
            next = consumer.next(POLL) => next,
        };
        match next {
            Ok(Some(delivery)) => handle_delivery(bus, &auditor, options, delivery, &cancel).await,
            Ok(None) => {}
            // `next` already backed off; a lost durable is recreated on the next pull.
            Err(err) => tracing::debug!(error = %err, "pull failed"),
        }
    }
    tracing::info!(worker = %auditor.worker_id, "auditor stopped taking work");
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
    let span = tracing::info_span!("invoke_agent auditor", run_id = %request.run_id,
        generation = request.generation, round = request.round, attempt = delivery.attempt());
    audit_and_settle(bus, auditor, options, &delivery, &request, cancel)
        .instrument(span)
        .await;
}

async fn audit_and_settle(
    bus: &Bus,
    auditor: &Auditor,
    options: WorkerOptions,
    delivery: &Delivery,
    request: &AuditRequest,
    cancel: &CancellationToken,
) {
    tracing::info!(candidate = %request.candidate_snapshot, "audit started");
    let stop_heartbeat = CancellationToken::new();
    let heartbeat = spawn_heartbeat(
        delivery.progress_handle(),
        options.progress_interval(),
        stop_heartbeat.clone(),
    );
    let mut audit = Box::pin(auditor.audit(request, delivery.attempt()));
    let result = tokio::select! {
        result = &mut audit => Some(result),
        _ = cancel.cancelled() => {
            tracing::info!(grace_secs = options.shutdown_grace.as_secs(), "shutdown: finishing the in-flight audit");
            tokio::time::timeout(options.shutdown_grace, &mut audit).await.ok()
        }
    };
    // Dropping an unfinished audit kills its check processes and removes its scratch dir.
    drop(audit);
    stop_heartbeat.cancel();
    let _ = heartbeat.await;

    let traceparent = delivery.header(TRACEPARENT);
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
