//! JSON errors with a stable `code`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::engine::EngineError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} {id} not found"),
        )
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
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
            EngineError::Store(_) | EngineError::Bus(_) => ApiError::unavailable(e.to_string()),
        }
    }
}
