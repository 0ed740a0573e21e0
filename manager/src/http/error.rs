//! JSON errors with a stable `code` (`{"error": {"code", "message"}}`, [`ErrorBody`]), and the
//! error answers each kind of route documents.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use loopgate_api::ErrorBody;

use crate::engine::EngineError;

#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub(crate) fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} {id} not found"),
        )
    }
    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody::new(self.code, self.message))).into_response()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::NotFound(id) => ApiError::not_found("run", &id),
            EngineError::Exists(id) => ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("run {id} already exists"),
            ),
            EngineError::Contention { .. } => {
                ApiError::new(StatusCode::CONFLICT, "contention", e.to_string())
            }
            EngineError::Corrupt { .. } => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "corrupt_record",
                e.to_string(),
            ),
            EngineError::Inconsistent { .. } => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "inconsistent_record",
                e.to_string(),
            ),
            EngineError::Store(_) | EngineError::Bus(_) | EngineError::MaybeStored { .. } => {
                ApiError::unavailable(e.to_string())
            }
        }
    }
}

/// The error answers of a route that reads one run (or a snapshot or blob) by id.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ReadErrors {
    /// `invalid_request`: a path or query parameter could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `not_found`: no such run (an id that is not a UUID is never found), snapshot or blob.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// `corrupt_record` or `integrity`: a stored record or blob is damaged; `too_large`: the
    /// snapshot is over the `[snapshot]` caps or an object is recorded as too large to read.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis or NATS cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of `GET /v1/runs/{id}/screenshots/{sha256}`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ScreenshotErrors {
    /// `invalid_request`: the path could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `not_found`: no such run, no PNG screenshot of that digest in the run's evidence, or
    /// its blob is gone from the evidence bucket.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// `integrity` (the stored bytes do not hash to the digest, or are not the PNG of the
    /// recorded size), `too_large` (recorded over the 8 MiB cap) or `corrupt_record`.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis or NATS cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of `GET /v1/runs/{id}/certificate`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum CertificateErrors {
    /// `invalid_request`: the path could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `not_found`: no such run, or a completed run without a stored final report (completed
    /// before reports were kept).
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// `not_completed`: the run has not completed (yet), so nothing is certified.
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// `corrupt_record` or `integrity`: a stored record, report or manifest is damaged;
    /// `too_large`: the manifest is over the `[snapshot]` caps.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis or NATS cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of a route that changes one run.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ChangeErrors {
    /// `invalid_request` (the body or a parameter could not be read) or the route's own
    /// validation code (`invalid_budget`, `invalid_contract`, `invalid_instruction`,
    /// `invalid_task`).
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `not_found`: no such run.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The run is not in a state this change applies to (`not_cancellable`,
    /// `not_waiting_for_input`, `not_awaiting_approval`, `contract_frozen`, `not_resumable`,
    /// `not_instructable`, `not_pausable`, `not_paused`, `not_continuable`), or `contention`
    /// with concurrent changes.
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// `payload_too_large`: the body exceeds `[http] max_body_bytes`.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// `corrupt_record`: the stored run is damaged.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis or NATS cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of `POST /v1/runs/{id}/pause` and `.../unpause` (no body).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum PauseErrors {
    /// `invalid_request`: the path could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `not_found`: no such run.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// `not_pausable` (the run has ended, is waiting for input, or is paused already),
    /// `not_paused` (unpause of a run that is not paused) or `contention`.
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// `corrupt_record`: the stored run is damaged.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis or NATS cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of `POST /v1/runs/{id}/cancel` (no body).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum CancelErrors {
    /// `invalid_request`: the path could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `not_found`: no such run.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// `not_cancellable` (the run has ended) or `contention` with concurrent changes.
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// `corrupt_record`: the stored run is damaged.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis or NATS cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of `POST /v1/runs`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum SubmitErrors {
    /// `invalid_request` (not a submit body), `invalid_task` (the task fails validation or
    /// names a model profile this manager lacks), `invalid_workspace` or `invalid_origin` (a
    /// malformed `origin`).
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `conflict`: a run with the new id exists already.
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// `payload_too_large`: the body exceeds `[http] max_body_bytes`.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// `integrity`: a stored blob does not match its digest.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis, NATS or the object store cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The error answers of `GET /v1/runs`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ListErrors {
    /// `invalid_state` (an unknown `state`) or `invalid_request` (a malformed parameter).
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// `corrupt_record`: a stored run is damaged.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// `unavailable`: Redis cannot be reached.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
