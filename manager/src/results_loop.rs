//! The owner loop of this replica's share of the results stream: executor results, audit
//! reports and decision requests, each handled by a plain function and acked only after its
//! effects are stored and published.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use loopgate_common::decide::RunEvent;
use loopgate_common::wire::{decode, Message};
use loopgate_models::ChatClient;
use loopgate_transport::{ConsumerOptions, Delivery, Work};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::decision::take_decision;
use crate::engine::{Applied, Engine, EngineError};

pub struct ResultsLoop {
    pub engine: Engine,
    pub models: Arc<BTreeMap<String, ChatClient>>,
    pub char_budget: usize,
    /// Whether any executor serves the `gui` route in this deployment.
    pub gui_offered: bool,
    pub concurrency: usize,
    pub consumer_options: ConsumerOptions,
}

/// How long an in-flight handler may run after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl ResultsLoop {
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        let bus_consumer = self.engine_bus_consumer().await?;
        let mut consumer = bus_consumer;
        let limit = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        let shared = Arc::new(self);
        let mut tasks = JoinSet::new();
        loop {
            let permit = tokio::select! {
                _ = cancel.cancelled() => break,
                permit = limit.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let next = tokio::select! {
                _ = cancel.cancelled() => break,
                next = consumer.next(Duration::from_secs(1)) => next,
            };
            while tasks.try_join_next().is_some() {}
            match next {
                Ok(Some(delivery)) => {
                    let me = shared.clone();
                    tasks.spawn(async move {
                        me.handle(delivery).await;
                        drop(permit);
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "results consumer error; retrying");
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                }
            }
        }
        // Stop taking work; give in-flight handlers a grace period (unacked ones are redelivered).
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
        Ok(())
    }

    async fn engine_bus_consumer(&self) -> Result<loopgate_transport::WorkConsumer, EngineError> {
        Ok(self
            .engine
            .bus()
            .work_consumer(Work::Results, self.consumer_options)
            .await?)
    }

    async fn handle(&self, delivery: Delivery) {
        let message = match decode(delivery.payload()) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(subject = delivery.subject(), error = %e, "undecodable message on the results stream; dropped");
                let _ = delivery.term().await;
                return;
            }
        };
        let run_id = message.run_id().to_string();
        let progress = delivery.progress_handle();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROGRESS_EVERY).await;
                if progress.progress().await.is_err() {
                    break;
                }
            }
        });
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
                    self.gui_offered,
                    &req,
                )
                .await
            }
            Message::EpisodeStarted(started) => {
                self.engine
                    .apply(&run_id, &RunEvent::EpisodeStarted(started))
                    .await
            }
            other => Ok(Applied::Ignored(format!(
                "unexpected {} on the results stream",
                other.kind()
            ))),
        };
        ticker.abort();
        match outcome {
            Ok(applied) => {
                if let Applied::Ignored(reason) = &applied {
                    tracing::debug!(run_id, %reason, "message ignored");
                }
                if let Err(e) = delivery.ack().await {
                    tracing::warn!(run_id, error = %e, "ack failed; the message will be redelivered");
                }
            }
            Err(EngineError::NotFound(_)) | Err(EngineError::Corrupt { .. }) => {
                tracing::error!(run_id, "result for a missing or unreadable run; dropped");
                let _ = delivery.term().await;
            }
            Err(e) => {
                tracing::warn!(run_id, error = %e, "handling failed; will retry");
                let _ = delivery.nak(Some(Duration::from_secs(1))).await;
            }
        }
    }
}
