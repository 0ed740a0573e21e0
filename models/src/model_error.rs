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
    /// The server answered with a non-success status (or a streamed response carried an error
    /// event, mapped to the status the provider uses for it). `body` is an excerpt;
    /// `retry_after` comes from the `Retry-After` / `retry-after-ms` headers.
    #[error("model server answered HTTP {code}: {body}")]
    Status {
        code: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    /// A streamed response stopped before its end marker, or reading it failed midway.
    #[error("model response stream interrupted: {reason}")]
    Interrupted { reason: String },
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
    /// Out of credit or quota (402, or a 429/400 saying so): retrying does not help.
    Quota,
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
    /// The server could not parse the tool call the model itself wrote (llama.cpp's HTTP 500
    /// "Failed to parse tool call arguments as JSON", mostly output cut at `max_tokens` inside
    /// a call). The same request would produce the same output, so it is not retried; the
    /// caller can tell the model and ask again.
    CutToolCall,
}

/// Phrases providers use for "out of money / quota" (OpenAI `insufficient_quota`, Anthropic
/// "credit balance is too low", DeepSeek / OpenRouter "insufficient balance").
const QUOTA_MARKERS: &[&str] = &[
    "insufficient_quota",
    "exceeded your current quota",
    "credit balance is too low",
    "insufficient balance",
    "insufficient credits",
    "billing_hard_limit",
];

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

/// Phrases servers use when the model's own tool call could not be parsed (llama.cpp's
/// server: "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] ...").
const CUT_TOOL_CALL_MARKERS: &[&str] = &["failed to parse tool call arguments"];

impl ModelError {
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            ModelError::Timeout { .. } => ModelErrorKind::Timeout,
            ModelError::Transport { .. } => ModelErrorKind::Transport,
            ModelError::Status { code, body, .. } => classify_status(*code, body),
            ModelError::Interrupted { .. } => ModelErrorKind::Transport,
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

    /// Errors after which more calls in this episode are pointless: the key is refused, the
    /// account is out of quota, or the profile is unusable. The episode ends with the reason.
    pub fn ends_episode(&self) -> bool {
        matches!(
            self.kind(),
            ModelErrorKind::Auth | ModelErrorKind::Quota | ModelErrorKind::Config
        )
    }

    /// How long the server asked us to wait (`Retry-After`), for `Status` errors.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::Status { retry_after, .. } => *retry_after,
            _ => None,
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
        Self::status_after(code, body, None)
    }

    pub(crate) fn status_after(code: u16, body: &str, retry_after: Option<Duration>) -> Self {
        ModelError::Status {
            code,
            body: body_excerpt(body),
            retry_after,
        }
    }

    pub(crate) fn interrupted(reason: impl Into<String>) -> Self {
        ModelError::Interrupted {
            reason: reason.into(),
        }
    }

    pub(crate) fn malformed(reason: impl Into<String>, body: &str) -> Self {
        ModelError::MalformedResponse {
            reason: reason.into(),
            body: body_excerpt(body),
        }
    }
}

impl ModelErrorKind {
    /// A short human reason, for episode summaries and logs.
    pub fn describe(self) -> &'static str {
        match self {
            ModelErrorKind::Timeout => "the model did not answer in time",
            ModelErrorKind::Transport => "the model server could not be reached",
            ModelErrorKind::Auth => "the model provider refused the API key",
            ModelErrorKind::Quota => "the model provider account is out of quota or credit",
            ModelErrorKind::RateLimit => "the model provider kept rate-limiting the calls",
            ModelErrorKind::ContextLength => "the prompt exceeds the model's context window",
            ModelErrorKind::Server => "the model server failed",
            ModelErrorKind::BadRequest => "the model server rejected the request",
            ModelErrorKind::OtherStatus => "the model server answered with an unexpected status",
            ModelErrorKind::MalformedResponse => "the model server sent a malformed response",
            ModelErrorKind::Config => "the model profile is unusable",
            ModelErrorKind::CutToolCall => {
                "the model's reply ended inside a tool call the server could not parse"
            }
        }
    }
}

fn classify_status(code: u16, body: &str) -> ModelErrorKind {
    let lower = body.to_lowercase();
    let says = |markers: &[&str]| markers.iter().any(|m| lower.contains(m));
    match code {
        402 => ModelErrorKind::Quota,
        400 | 403 | 429 if says(QUOTA_MARKERS) => ModelErrorKind::Quota,
        401 | 403 => ModelErrorKind::Auth,
        429 => ModelErrorKind::RateLimit,
        400..=599 if says(CONTEXT_LENGTH_MARKERS) => ModelErrorKind::ContextLength,
        400..=599 if says(CUT_TOOL_CALL_MARKERS) => ModelErrorKind::CutToolCall,
        500..=599 => ModelErrorKind::Server,
        400..=499 => ModelErrorKind::BadRequest,
        _ => ModelErrorKind::OtherStatus,
    }
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
            (402, "Insufficient Balance", ModelErrorKind::Quota, false),
            (
                429,
                "{\"error\":{\"code\":\"insufficient_quota\"}}",
                ModelErrorKind::Quota,
                false,
            ),
            (
                400,
                "Your credit balance is too low to access the Anthropic API",
                ModelErrorKind::Quota,
                false,
            ),
            (529, "overloaded_error", ModelErrorKind::Server, true),
            (
                500,
                "{\"error\":{\"code\":500,\"message\":\"Failed to parse tool call arguments as JSON: \
                 [json.exception.parse_error.101] parse error at line 1, column 1812: syntax \
                 error while parsing value - invalid string: missing closing quote\",\
                 \"type\":\"server_error\"}}",
                ModelErrorKind::CutToolCall,
                false,
            ),
            (
                400,
                "Failed to parse tool call arguments as JSON",
                ModelErrorKind::CutToolCall,
                false,
            ),
            (
                400,
                "prompt is too long: 210000 tokens > 200000 maximum",
                ModelErrorKind::ContextLength,
                false,
            ),
        ];
        for (code, body, kind, transient) in cases {
            let error = ModelError::status(code, body);
            assert_eq!(error.kind(), kind, "HTTP {code} {body}");
            assert_eq!(
                error.ends_episode(),
                matches!(kind, ModelErrorKind::Auth | ModelErrorKind::Quota),
                "HTTP {code} {body}"
            );
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
        assert!(config.ends_episode());
        let cut = ModelError::interrupted("no [DONE]");
        assert_eq!(cut.kind(), ModelErrorKind::Transport);
        assert!(cut.is_transient());
        let limited = ModelError::status_after(429, "slow", Some(Duration::from_secs(3)));
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(ModelError::status(429, "x").retry_after(), None);
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
