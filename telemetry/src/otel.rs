//! OpenTelemetry: traces, metrics and logs over OTLP (gRPC or HTTP, from the standard `OTEL_*`
//! env vars, off when no endpoint is set), a Prometheus `/metrics` rendering of the same
//! metrics, and W3C trace-context helpers for NATS headers.
//!
//! The SDK's batch processors export from their own OS threads. The HTTP exporter uses the
//! blocking reqwest client, which needs no async runtime; the gRPC (tonic) exporter does, so
//! its exporters are wrapped to run on a small runtime owned by [`Telemetry`].

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::otel_runtime::{RtLogExporter, RtMetricExporter, RtSpanExporter};

/// W3C trace-context header carried on NATS messages.
pub const TRACEPARENT: &str = "traceparent";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    Grpc,
    HttpProtobuf,
}

/// What to export, resolved once from the environment at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    pub service: String,
    /// `LOOPGATE_LOG`, else `RUST_LOG`, else the binary's default.
    pub log_filter: String,
    /// None: OTLP export is off (no endpoint set, or `OTEL_SDK_DISABLED=true`).
    pub otlp: Option<OtlpProtocol>,
    pub traces: bool,
    pub metrics: bool,
    pub logs: bool,
    /// Record prompt and completion text on spans (`LOOPGATE_OTEL_CAPTURE_CONTENT=true`).
    pub capture_content: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL `{0}` is not supported (use grpc or http/protobuf)")]
    Protocol(String),
    #[error("cannot build the OTLP {signal} exporter: {reason}")]
    Exporter {
        signal: &'static str,
        reason: String,
    },
    #[error("cannot start the OTLP runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot build the Prometheus exporter: {0}")]
    Prometheus(String),
}

fn flag(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<bool> {
    env(key).map(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

fn exporter_on(env: &dyn Fn(&str) -> Option<String>, key: &str) -> bool {
    env(key)
        .map(|v| !v.trim().eq_ignore_ascii_case("none"))
        .unwrap_or(true)
}

impl TelemetrySettings {
    pub fn from_env(
        service: &str,
        default_filter: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, TelemetryError> {
        let log_filter = [env("LOOPGATE_LOG"), env("RUST_LOG")]
            .into_iter()
            .flatten()
            .find(|f| !f.trim().is_empty() && EnvFilter::try_new(f).is_ok())
            .unwrap_or_else(|| default_filter.to_string());
        let any_endpoint = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        ]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()));
        let disabled = flag(env, "OTEL_SDK_DISABLED").unwrap_or(false);
        let otlp = if any_endpoint && !disabled {
            match env("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref().map(str::trim) {
                None | Some("") | Some("http/protobuf") => Some(OtlpProtocol::HttpProtobuf),
                Some("grpc") => Some(OtlpProtocol::Grpc),
                Some(other) => return Err(TelemetryError::Protocol(other.to_string())),
            }
        } else {
            None
        };
        Ok(TelemetrySettings {
            service: env("OTEL_SERVICE_NAME")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| service.to_string()),
            log_filter,
            otlp,
            traces: exporter_on(env, "OTEL_TRACES_EXPORTER"),
            metrics: exporter_on(env, "OTEL_METRICS_EXPORTER"),
            logs: exporter_on(env, "OTEL_LOGS_EXPORTER"),
            capture_content: flag(env, "LOOPGATE_OTEL_CAPTURE_CONTENT").unwrap_or(false),
        })
    }
}

/// The installed providers. Keep it alive for the life of the process; call
/// [`Telemetry::shutdown`] last to flush.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: SdkMeterProvider,
    logger: Option<SdkLoggerProvider>,
    registry: prometheus::Registry,
    runtime: std::sync::Mutex<Option<Arc<tokio::runtime::Runtime>>>,
    pub capture_content: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("traces", &self.tracer.is_some())
            .field("logs", &self.logger.is_some())
            .finish()
    }
}

fn exporter_error(
    signal: &'static str,
) -> impl Fn(opentelemetry_otlp::ExporterBuildError) -> TelemetryError {
    move |e| TelemetryError::Exporter {
        signal,
        reason: e.to_string(),
    }
}

/// A daemon's telemetry from its environment (`OTEL_*`, `LOOPGATE_LOG`, `RUST_LOG`, read once,
/// here), installed. When the configuration is invalid, plain JSON logging is installed
/// instead so that the caller can log the error before it exits.
pub fn start_from_env(
    service: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Telemetry, TelemetryError> {
    let started =
        TelemetrySettings::from_env(service, "info", env).and_then(|s| init_telemetry(&s));
    if started.is_err() {
        crate::init_logging(service, "info");
    }
    started
}

/// Install logging (JSON lines on stderr), tracing and metrics for this process.
pub fn init_telemetry(settings: &TelemetrySettings) -> Result<Telemetry, TelemetryError> {
    let resource = Resource::builder()
        .with_service_name(settings.service.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let runtime = match settings.otlp {
        Some(OtlpProtocol::Grpc) => Some(Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("otlp-export")
                .enable_all()
                .build()
                .map_err(TelemetryError::Runtime)?,
        )),
        _ => None,
    };
    let registry = prometheus::Registry::new();
    let prometheus_reader = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .without_target_info()
        .build()
        .map_err(|e| TelemetryError::Prometheus(e.to_string()))?;
    let mut meter_builder = SdkMeterProvider::builder()
        .with_resource(resource.clone())
        .with_reader(prometheus_reader);
    let mut tracer = None;
    let mut logger = None;
    match (settings.otlp, &runtime) {
        (Some(OtlpProtocol::Grpc), Some(rt)) => {
            let _entered = rt.enter();
            if settings.traces {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .build()
                    .map_err(exporter_error("trace"))?;
                tracer = Some(
                    SdkTracerProvider::builder()
                        .with_resource(resource.clone())
                        .with_batch_exporter(RtSpanExporter::new(exporter, rt.clone()))
                        .build(),
                );
            }
            if settings.metrics {
                let exporter = opentelemetry_otlp::MetricExporter::builder()
                    .with_tonic()
                    .build()
                    .map_err(exporter_error("metrics"))?;
                meter_builder = meter_builder.with_reader(
                    PeriodicReader::builder(RtMetricExporter::new(exporter, rt.clone())).build(),
                );
            }
            if settings.logs {
                let exporter = opentelemetry_otlp::LogExporter::builder()
                    .with_tonic()
                    .build()
                    .map_err(exporter_error("logs"))?;
                logger = Some(
                    SdkLoggerProvider::builder()
                        .with_resource(resource.clone())
                        .with_batch_exporter(RtLogExporter::new(exporter, rt.clone()))
                        .build(),
                );
            }
        }
        (Some(OtlpProtocol::HttpProtobuf), _) => {
            let http = opentelemetry_otlp::Protocol::HttpBinary;
            if settings.traces {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(http)
                    .build()
                    .map_err(exporter_error("trace"))?;
                tracer = Some(
                    SdkTracerProvider::builder()
                        .with_resource(resource.clone())
                        .with_batch_exporter(exporter)
                        .build(),
                );
            }
            if settings.metrics {
                let exporter = opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_protocol(http)
                    .build()
                    .map_err(exporter_error("metrics"))?;
                meter_builder =
                    meter_builder.with_reader(PeriodicReader::builder(exporter).build());
            }
            if settings.logs {
                let exporter = opentelemetry_otlp::LogExporter::builder()
                    .with_http()
                    .with_protocol(http)
                    .build()
                    .map_err(exporter_error("logs"))?;
                logger = Some(
                    SdkLoggerProvider::builder()
                        .with_resource(resource.clone())
                        .with_batch_exporter(exporter)
                        .build(),
                );
            }
        }
        _ => {}
    }
    let meter = meter_builder.build();
    opentelemetry::global::set_meter_provider(meter.clone());
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());

    let filter =
        EnvFilter::try_new(&settings.log_filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt_layer = tracing_subscriber::fmt::layer()
        .json()
        .with_writer(std::io::stderr)
        .with_current_span(true)
        .with_target(true)
        .with_filter(filter);
    // Spans go to OTLP regardless of the log filter's verbosity for our own crates; the
    // exporter's own HTTP/gRPC stack is never traced (it would trace its own exports).
    let quiet_deps = || {
        EnvFilter::new("info,h2=off,hyper=off,hyper_util=off,tonic=off,reqwest=off,opentelemetry=off,opentelemetry_sdk=off,opentelemetry_otlp=off,async_nats=warn")
    };
    let trace_layer = tracer.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("loopgate"))
            .with_filter(quiet_deps())
    });
    let log_layer = logger.as_ref().map(|p| {
        opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(p)
            .with_filter(quiet_deps())
    });
    let installed = tracing_subscriber::registry()
        .with(fmt_layer)
        .with(trace_layer)
        .with(log_layer)
        .try_init()
        .is_ok();
    if installed {
        tracing::info!(
            service = %settings.service,
            version = env!("CARGO_PKG_VERSION"),
            otlp = ?settings.otlp,
            "telemetry initialised"
        );
    }
    Ok(Telemetry {
        tracer,
        meter,
        logger,
        registry,
        runtime: std::sync::Mutex::new(runtime),
        capture_content: settings.capture_content,
    })
}

impl Telemetry {
    /// The Prometheus text exposition of every metric this process records.
    pub fn prometheus_text(&self) -> String {
        let families = self.registry.gather();
        let mut out = Vec::new();
        let encoder = prometheus::TextEncoder::new();
        if prometheus::Encoder::encode(&encoder, &families, &mut out).is_err() {
            return String::new();
        }
        String::from_utf8(out).unwrap_or_default()
    }

    pub fn otlp_enabled(&self) -> bool {
        self.tracer.is_some() || self.logger.is_some()
    }

    /// Flush and stop every provider. Blocking (bounded by the SDK's shutdown timeouts): call
    /// it from `main` after the work is done. It runs on a plain thread, so neither the OTLP
    /// runtime nor the caller's runtime is dropped or blocked in an async context.
    pub fn shutdown(&self) {
        let tracer = self.tracer.clone();
        let meter = self.meter.clone();
        let logger = self.logger.clone();
        let runtime = self.runtime.lock().ok().and_then(|mut r| r.take());
        let joined = std::thread::spawn(move || {
            if let Some(t) = tracer {
                let _ = t.shutdown();
            }
            let _ = meter.shutdown();
            if let Some(l) = logger {
                let _ = l.shutdown();
            }
            if let Some(rt) = runtime.and_then(|rt| Arc::try_unwrap(rt).ok()) {
                rt.shutdown_background();
            }
        })
        .join();
        if joined.is_err() {
            tracing::warn!("telemetry shutdown panicked; some telemetry may be lost");
        }
    }
}

/// The `traceparent` of the current span, to put on an outgoing NATS message.
pub fn current_traceparent() -> Option<String> {
    let cx = tracing::Span::current().context();
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Make `span` a child of the remote span described by `traceparent` (no-op when absent or
/// malformed).
pub fn set_remote_parent(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(tp) = traceparent.filter(|t| !t.is_empty()) else {
        return;
    };
    let mut carrier: HashMap<String, String> = HashMap::new();
    carrier.insert(TRACEPARENT.to_string(), tp.to_string());
    let cx = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(cx);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::type_complexity)]
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn settings_from_env_table() {
        let cases: Vec<(
            &'static [(&'static str, &'static str)],
            Option<OtlpProtocol>,
            bool,
        )> = vec![
            (&[], None, true),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
                Some(OtlpProtocol::HttpProtobuf),
                true,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                Some(OtlpProtocol::Grpc),
                true,
            ),
            (
                &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces")],
                Some(OtlpProtocol::HttpProtobuf),
                true,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_SDK_DISABLED", "true"),
                ],
                None,
                true,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_TRACES_EXPORTER", "none"),
                ],
                Some(OtlpProtocol::HttpProtobuf),
                false,
            ),
        ];
        for (pairs, otlp, traces) in cases {
            let s = TelemetrySettings::from_env("svc", "info", &env_of(pairs)).unwrap();
            assert_eq!(s.otlp, otlp, "{pairs:?}");
            assert_eq!(s.traces, traces, "{pairs:?}");
        }
        let bad = env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"),
        ]);
        assert!(matches!(
            TelemetrySettings::from_env("svc", "info", &bad),
            Err(TelemetryError::Protocol(_))
        ));
        let named = env_of(&[("OTEL_SERVICE_NAME", "custom"), ("LOOPGATE_LOG", "debug")]);
        let s = TelemetrySettings::from_env("svc", "info", &named).unwrap();
        assert_eq!(
            (s.service.as_str(), s.log_filter.as_str()),
            ("custom", "debug")
        );
    }

    #[test]
    fn traceparent_round_trips_through_a_span() {
        let span = tracing::info_span!("x");
        set_remote_parent(
            &span,
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        set_remote_parent(&span, Some("garbage"));
        set_remote_parent(&span, None);
    }
}
