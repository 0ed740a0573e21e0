//! Errors of a model call, and their classification.

use std::time::Duration;

use crate::profile_config::ModelConfigError;

/// At most this many characters of a response body are kept in an error.
pub const BODY_EXCERPT_CHARS: usize = 2000;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The whole request (connect, send, wait, read) took longer than the profile's timeout.
    #[error("model request timed out after {timeout:?}")]
    Timeout { timeout: Duration },
    /// Connection refused/reset, DNS, TLS, body read failure, client construction.
    #[error("model transport error: {source}")]
    Transport {
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with a non-success status. `body` is an excerpt.
    #[error("model server answered HTTP {code}: {body}")]
    Status { code: u16, body: String },
    /// A success status with a body that is not a chat completion. `body` is an excerpt.
    #[error("malformed model response: {reason}")]
    MalformedResponse { reason: String, body: String },
    /// The request could not be encoded (not expected to happen in practice).
    #[error("cannot encode the model request: {0}")]
    InvalidRequest(String),
    #[error(transparent)]
    Config(#[from] ModelConfigError),
}

/// A coarse classification of [`ModelError`] for callers deciding what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelErrorKind {
    Timeout,
    Transport,
    /// 401 / 403.
    Auth,
    /// 429.
    RateLimit,
    /// The prompt does not fit the model's context (any 4xx/5xx saying so).
    ContextLength,
    /// 5xx.
    Server,
    /// Other 4xx, or a request that could not be encoded.
    BadRequest,
    /// Any other non-success status (1xx/3xx).
    OtherStatus,
    MalformedResponse,
    Config,
}

/// Phrases servers use for "prompt too long" (OpenAI, vLLM, llama.cpp, Ollama, Anthropic).
const CONTEXT_LENGTH_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",
    "maximum context",
    "too many tokens",
    "n_ctx",
    "prompt is too long",
];

impl ModelError {
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            ModelError::Timeout { .. } => ModelErrorKind::Timeout,
            ModelError::Transport { .. } => ModelErrorKind::Transport,
            ModelError::Status { code, body } => classify_status(*code, body),
            ModelError::MalformedResponse { .. } => ModelErrorKind::MalformedResponse,
            ModelError::InvalidRequest(_) => ModelErrorKind::BadRequest,
            ModelError::Config(_) => ModelErrorKind::Config,
        }
    }

    /// Worth retrying later: timeouts, transport failures, 408, 429 and 5xx (but not a 5xx that
    /// says the prompt is too long).
    pub fn is_transient(&self) -> bool {
        match self.kind() {
            ModelErrorKind::Timeout
            | ModelErrorKind::Transport
            | ModelErrorKind::RateLimit
            | ModelErrorKind::Server => true,
            ModelErrorKind::BadRequest => {
                matches!(self, ModelError::Status { code: 408, .. })
            }
            _ => false,
        }
    }

    /// The HTTP status, for `Status` errors.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            ModelError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(crate) fn status(code: u16, body: &str) -> Self {
        ModelError::Status {
            code,
            body: body_excerpt(body),
        }
    }

    pub(crate) fn malformed(reason: impl Into<String>, body: &str) -> Self {
        ModelError::MalformedResponse {
            reason: reason.into(),
            body: body_excerpt(body),
        }
    }
}

fn classify_status(code: u16, body: &str) -> ModelErrorKind {
    match code {
        401 | 403 => ModelErrorKind::Auth,
        429 => ModelErrorKind::RateLimit,
        400..=599 if mentions_context_length(body) => ModelErrorKind::ContextLength,
        500..=599 => ModelErrorKind::Server,
        400..=499 => ModelErrorKind::BadRequest,
        _ => ModelErrorKind::OtherStatus,
    }
}

fn mentions_context_length(body: &str) -> bool {
    let lower = body.to_lowercase();
    CONTEXT_LENGTH_MARKERS
        .iter()
        .any(|marker| lower.contains(marker))
}

/// The first [`BODY_EXCERPT_CHARS`] characters of `body`, marked when cut.
pub(crate) fn body_excerpt(body: &str) -> String {
    match body.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classification_table() {
        let cases: Vec<(u16, &str, ModelErrorKind, bool)> = vec![
            (401, "{\"error\":\"bad key\"}", ModelErrorKind::Auth, false),
            (403, "forbidden", ModelErrorKind::Auth, false),
            (429, "slow down", ModelErrorKind::RateLimit, true),
            (408, "request timeout", ModelErrorKind::BadRequest, true),
            (
                400,
                "{\"error\":{\"code\":\"context_length_exceeded\"}}",
                ModelErrorKind::ContextLength,
                false,
            ),
            (
                400,
                "the request exceeds the available context size, try increasing it",
                ModelErrorKind::ContextLength,
                false,
            ),
            (
                400,
                "This model's maximum context length is 8192 tokens",
                ModelErrorKind::ContextLength,
                false,
            ),
            (
                500,
                "input is larger than n_ctx",
                ModelErrorKind::ContextLength,
                false,
            ),
            (400, "bad field", ModelErrorKind::BadRequest, false),
            (422, "unprocessable", ModelErrorKind::BadRequest, false),
            (500, "oops", ModelErrorKind::Server, true),
            (503, "loading model", ModelErrorKind::Server, true),
            (302, "moved", ModelErrorKind::OtherStatus, false),
        ];
        for (code, body, kind, transient) in cases {
            let error = ModelError::status(code, body);
            assert_eq!(error.kind(), kind, "HTTP {code} {body}");
            assert_eq!(error.is_transient(), transient, "HTTP {code} {body}");
            assert_eq!(error.status_code(), Some(code));
        }
    }

    #[test]
    fn other_kinds() {
        let timeout = ModelError::Timeout {
            timeout: Duration::from_secs(1),
        };
        assert_eq!(timeout.kind(), ModelErrorKind::Timeout);
        assert!(timeout.is_transient());
        let malformed = ModelError::malformed("no choices", "{}");
        assert_eq!(malformed.kind(), ModelErrorKind::MalformedResponse);
        assert!(!malformed.is_transient());
        let config = ModelError::from(ModelConfigError::UnknownProfile("x".into()));
        assert_eq!(config.kind(), ModelErrorKind::Config);
        assert!(!config.is_transient());
    }

    #[test]
    fn body_excerpt_cuts_on_char_boundary() {
        let long = "é".repeat(BODY_EXCERPT_CHARS + 10);
        let excerpt = body_excerpt(&long);
        assert_eq!(excerpt.chars().count(), BODY_EXCERPT_CHARS + 1);
        assert!(excerpt.ends_with('…'));
        assert_eq!(body_excerpt("short"), "short");
    }
}
