//! loopgate's metric instruments (OpenTelemetry; exported over OTLP and rendered for
//! Prometheus by [`crate::otel::Telemetry`]). Create one [`Metrics`] in `main` after telemetry
//! is initialised and pass it down.
//!
//! Prometheus names: `gen_ai_client_token_usage`, `gen_ai_client_operation_duration_seconds`,
//! `loopgate_runs`, `loopgate_rounds_total`, `loopgate_audit_verdicts_total`,
//! `loopgate_gate_total`, `loopgate_episode_duration_seconds`,
//! `loopgate_snapshot_uploaded_bytes_total`, `loopgate_queue_pending_messages`,
//! `loopgate_worker_up`.

use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};
use opentelemetry::KeyValue;

/// Seconds buckets for model calls and episodes (up to 30 min).
const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
];

/// One model call, for [`Metrics::record_model_call`].
#[derive(Debug, Clone, Copy)]
pub struct ModelCall<'a> {
    pub role: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub seconds: f64,
    pub error_type: Option<&'a str>,
}

#[derive(Debug, Clone)]
pub struct Metrics {
    pub token_usage: Histogram<u64>,
    pub operation_duration: Histogram<f64>,
    pub runs: Gauge<u64>,
    pub rounds: Counter<u64>,
    pub audit_verdicts: Counter<u64>,
    pub gate: Counter<u64>,
    pub episode_duration: Histogram<f64>,
    pub snapshot_uploaded_bytes: Counter<u64>,
    pub queue_pending: Gauge<u64>,
    pub worker_up: Gauge<u64>,
}

impl Metrics {
    /// Instruments on the global meter provider (installed by `init_telemetry`).
    pub fn new() -> Metrics {
        Self::from_meter(&opentelemetry::global::meter("loopgate"))
    }

    pub fn from_meter(meter: &Meter) -> Metrics {
        Metrics {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used per model call, by token type")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of model calls")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
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
        }
    }

    /// One model call: tokens by type and duration, with GenAI attributes.
    pub fn record_model_call(&self, call: &ModelCall<'_>) {
        let base = [
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", call.provider.to_string()),
            KeyValue::new("gen_ai.request.model", call.model.to_string()),
            KeyValue::new("loopgate.role", call.role.to_string()),
        ];
        let mut with_type = base.to_vec();
        with_type.push(KeyValue::new("gen_ai.token.type", "input"));
        self.token_usage.record(call.input_tokens, &with_type);
        if let Some(last) = with_type.last_mut() {
            *last = KeyValue::new("gen_ai.token.type", "output");
        }
        self.token_usage.record(call.output_tokens, &with_type);
        let mut attrs = base.to_vec();
        if let Some(e) = call.error_type {
            attrs.push(KeyValue::new("error.type", e.to_string()));
        }
        self.operation_duration.record(call.seconds, &attrs);
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
