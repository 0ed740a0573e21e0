//! The public routes a platform probes: liveness, readiness and Prometheus metrics.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use loopgate_api::ErrorBody;

use crate::http::error::ApiError;
use crate::http::state::Shared;

/// Liveness: the process answers.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    responses((status = 200, description = "`ok`", body = String, content_type = "text/plain"))
)]
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: Redis and NATS are reachable, and JetStream acknowledges the manager's
/// publishes (none has gone unacknowledged for two request timeouts).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "service",
    responses(
        (status = 200, description = "`ready`", body = String, content_type = "text/plain"),
        (status = 503, description = "`unavailable`: Redis or NATS cannot be reached, or JetStream does not acknowledge publishes (the message says why)", body = ErrorBody),
    )
)]
pub(crate) async fn readyz(State(s): State<Shared>) -> Result<&'static str, ApiError> {
    s.engine
        .store()
        .ping()
        .await
        .map_err(|e| ApiError::unavailable(format!("redis: {e}")))?;
    if s.engine.bus().client().connection_state() != async_nats::connection::State::Connected {
        return Err(ApiError::unavailable("nats: not connected"));
    }
    s.engine
        .bus()
        .publish_stall()
        .map_err(|why| ApiError::unavailable(format!("jetstream publish: {why}")))?;
    Ok("ready")
}

/// Prometheus metrics (text exposition format 0.0.4).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    responses((status = 200, description = "the metrics", body = String, content_type = "text/plain"))
)]
pub(crate) async fn metrics(State(s): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.telemetry.prometheus_text(),
    )
        .into_response()
}
