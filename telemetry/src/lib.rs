//! loopgate-telemetry: OpenTelemetry traces, metrics and logs over OTLP, the Prometheus
//! `/metrics` endpoint every daemon serves, loopgate's own metric instruments, W3C trace
//! context for NATS headers, and plain JSON logging for when telemetry cannot start.

pub mod health;
mod logging;
pub mod metrics;
pub mod metrics_server;
pub mod otel;
mod otel_runtime;

pub use logging::init_logging;
