//! loopgate's metric instruments (OpenTelemetry; exported over OTLP and rendered for
//! Prometheus by [`crate::otel::Telemetry`]). Create one [`Metrics`] in `main` after telemetry
//! is initialised and pass it down.
//!
//! The GenAI client metrics (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`)
//! are recorded by the model adapters themselves (`loopgate_models::ChatClient::chat`).
//!
//! Prometheus names: `loopgate_runs`, `loopgate_rounds_total`, `loopgate_audit_verdicts_total`,
//! `loopgate_gate_total`, `loopgate_episode_duration_seconds`,
//! `loopgate_snapshot_uploaded_bytes_total`, `loopgate_queue_pending_messages`,
//! `loopgate_queue_outstanding_messages`, `loopgate_queue_oldest_age_seconds`,
//! `loopgate_queue_dead_letters`,
//! `loopgate_worker_up`, `loopgate_workspace_overlay_available`, `loopgate_executor_self_check_refusals_total`,
//! `loopgate_security_refused_messages_total`, `loopgate_security_refused_paths_total`,
//! `loopgate_dead_letters_total`,
//! `loopgate_outbox_republished_total`, `loopgate_outbox_pending_runs`,
//! `loopgate_jetstream_publish_unacked_seconds`,
//! `loopgate_admission_waiting_runs`, `loopgate_admission_oldest_wait_seconds`,
//! `loopgate_queue_waits_total`, `loopgate_queue_wait_seconds`.

use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};
use opentelemetry::KeyValue;

/// Seconds buckets for episodes (up to 30 min).
const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

#[derive(Debug, Clone)]
pub struct Metrics {
    pub runs: Gauge<u64>,
    pub rounds: Counter<u64>,
    pub audit_verdicts: Counter<u64>,
    pub gate: Counter<u64>,
    pub episode_duration: Histogram<f64>,
    pub snapshot_uploaded_bytes: Counter<u64>,
    pub queue_pending: Gauge<u64>,
    /// Waiting plus delivered-but-unacked (in flight): what KEDA's nats-jetstream scaler counts.
    pub queue_outstanding: Gauge<u64>,
    /// Age of the oldest message still in a work-queue stream (0 when empty).
    pub queue_oldest_age: Gauge<f64>,
    /// Messages a work-queue stream holds that no consumer will deliver again.
    pub queue_dead_letters: Gauge<u64>,
    pub worker_up: Gauge<u64>,
    /// 1 when this executor's episodes run on overlays, 0 when they copy their base.
    pub workspace_overlay_available: Gauge<u64>,
    pub self_check_refusals: Counter<u64>,
    /// Results-stream messages the manager refused as a security event (a kind on the wrong
    /// subject, a run or role that disagrees with the subject, an unsigned or badly signed
    /// report); attributes `kind` and `reason`.
    pub refused_messages: Counter<u64>,
    /// Paths in a tree an agent touched that a worker refused to follow (a symlink planted at,
    /// or swapped into, a path a worker writes, reads or gives away); attribute `reason`.
    pub refused_paths: Counter<u64>,
    /// Results and work that exhausted their deliveries and went to the dead-letter stream;
    /// attributes `kind` (the message kind) and `reason`.
    pub dead_letters: Counter<u64>,
    /// Transition effects another pass of the outbox relay published (their first publish
    /// failed, or the replica that stored them stopped before publishing).
    pub outbox_republished: Counter<u64>,
    /// Runs with effects stored but not yet published.
    pub outbox_pending: Gauge<u64>,
    /// How long the manager's JetStream publishes to some subject have gone without a PubAck
    /// (0 while every subject is acknowledged): a store on a full disk, an overloaded server.
    pub jetstream_publish_unacked: Gauge<f64>,
    /// Runs waiting in `queued` for a slot (`[manager] max_active_runs`).
    pub admission_waiting: Gauge<u64>,
    /// How long the oldest run waiting for a slot has waited.
    pub admission_oldest_wait: Gauge<f64>,
    /// Start budgets that ran out while the step waited behind busy executors (not failures).
    pub queue_waits: Counter<u64>,
    /// How long a step had waited in its work queue when a worker picked it up.
    pub queue_wait: Histogram<f64>,
}

impl Metrics {
    /// Instruments on the global meter provider (installed by `init_telemetry`).
    pub fn new() -> Metrics {
        Self::from_meter(&opentelemetry::global::meter("loopgate"))
    }

    pub fn from_meter(meter: &Meter) -> Metrics {
        Metrics {
            runs: meter
                .u64_gauge("loopgate.runs")
                .with_description("Runs by state")
                .build(),
            rounds: meter
                .u64_counter("loopgate.rounds")
                .with_description("Manager decisions by route, and round outcomes")
                .build(),
            audit_verdicts: meter
                .u64_counter("loopgate.audit.verdicts")
                .with_description("Audit reports by status, integrity and contract verdict")
                .build(),
            gate: meter
                .u64_counter("loopgate.gate")
                .with_description("Gate evaluations: passed, closed, or a manager `done` refused")
                .build(),
            episode_duration: meter
                .f64_histogram("loopgate.episode.duration")
                .with_unit("s")
                .with_description("Episode duration per role")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            snapshot_uploaded_bytes: meter
                .u64_counter("loopgate.snapshot.uploaded")
                .with_unit("By")
                .with_description("Bytes uploaded to the snapshot store by freezes")
                .build(),
            queue_pending: meter
                .u64_gauge("loopgate.queue.pending_messages")
                .with_description("Messages waiting in a work queue consumer")
                .build(),
            queue_outstanding: meter
                .u64_gauge("loopgate.queue.outstanding_messages")
                .with_description(
                    "Messages waiting in a work queue consumer plus those delivered and not yet \
                     acked (in flight): the autoscalers' metric",
                )
                .build(),
            queue_oldest_age: meter
                .f64_gauge("loopgate.queue.oldest_age")
                .with_unit("s")
                .with_description("Age of the oldest message still held by a work-queue stream")
                .build(),
            queue_dead_letters: meter
                .u64_gauge("loopgate.queue.dead_letters")
                .with_description(
                    "Messages a work-queue stream still holds that no consumer will deliver \
                     again (max_deliver exhausted or terminated)",
                )
                .build(),
            worker_up: meter
                .u64_gauge("loopgate.worker.up")
                .with_description("1 while this process serves its role")
                .build(),
            workspace_overlay_available: meter
                .u64_gauge("loopgate.workspace.overlay_available")
                .with_description(
                    "1 when this executor's episodes run on overlays (a mount over its cached \
                     base, frozen from the upper layer); 0 when they copy their base (the \
                     readiness output says why)",
                )
                .build(),
            self_check_refusals: meter
                .u64_counter("loopgate.executor.self_check.refusals")
                .with_description(
                    "Executor `finish` calls refused because a blocking check still failed on \
                     the live workspace",
                )
                .build(),
            refused_messages: meter
                .u64_counter("loopgate.security.refused_messages")
                .with_description(
                    "Results-stream messages refused before they reached the run: wrong \
                     subject, run or role mismatch, missing spec hash, unsigned or badly signed",
                )
                .build(),
            refused_paths: meter
                .u64_counter("loopgate.security.refused_paths")
                .with_description(
                    "Paths in an agent's tree a worker refused to follow: a symlink planted at \
                     or swapped into a path the worker writes, reads or chowns",
                )
                .build(),
            dead_letters: meter
                .u64_counter("loopgate.dead_letters")
                .with_description(
                    "Results and work that exhausted their deliveries (max_deliver), moved to \
                     the dead-letter stream",
                )
                .build(),
            outbox_republished: meter
                .u64_counter("loopgate.outbox.republished")
                .with_description(
                    "Transition effects published by the outbox relay after the first publish \
                     failed or its replica stopped",
                )
                .build(),
            outbox_pending: meter
                .u64_gauge("loopgate.outbox.pending_runs")
                .with_description("Runs with transition effects stored but not yet published")
                .build(),
            jetstream_publish_unacked: meter
                .f64_gauge("loopgate.jetstream.publish_unacked")
                .with_unit("s")
                .with_description(
                    "How long JetStream publishes to some subject have gone without a PubAck \
                     (0 while all are acknowledged)",
                )
                .build(),
            admission_waiting: meter
                .u64_gauge("loopgate.admission.waiting_runs")
                .with_description("Runs waiting in `queued` for a slot under max_active_runs")
                .build(),
            admission_oldest_wait: meter
                .f64_gauge("loopgate.admission.oldest_wait")
                .with_unit("s")
                .with_description("How long the oldest run waiting for a slot has waited")
                .build(),
            queue_waits: meter
                .u64_counter("loopgate.queue.waits")
                .with_description(
                    "Exec steps whose start budget ran out while a live executor serves their \
                     capability: queue wait behind busy workers, counted again, not a failed round",
                )
                .build(),
            queue_wait: meter
                .f64_histogram("loopgate.queue.wait")
                .with_unit("s")
                .with_description("Time an exec step waited in its work queue before pickup")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
        }
    }

    pub fn record_episode(&self, role: &str, seconds: f64) {
        self.episode_duration
            .record(seconds, &[KeyValue::new("loopgate.role", role.to_string())]);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
