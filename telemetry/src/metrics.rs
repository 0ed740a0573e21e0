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
//! `loopgate_worker_up`, `loopgate_executor_self_check_refusals_total`.

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
    pub worker_up: Gauge<u64>,
    pub self_check_refusals: Counter<u64>,
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
            worker_up: meter
                .u64_gauge("loopgate.worker.up")
                .with_description("1 while this process serves its role")
                .build(),
            self_check_refusals: meter
                .u64_counter("loopgate.executor.self_check.refusals")
                .with_description(
                    "Executor `finish` calls refused because a blocking check still failed on \
                     the live workspace",
                )
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
