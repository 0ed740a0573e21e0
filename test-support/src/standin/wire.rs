//! What both provider dialects share: which dialect a request came in, the turn a reply is
//! rendered for, tool-call ids, chunking, the JSON / SSE responses and each provider's error
//! body.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// Which provider's wire format a request came in (and its reply goes out) in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    OpenAi,
    Anthropic,
}

/// What a concrete reply is rendered with.
pub(crate) struct Turn {
    pub id: u64,
    pub model: String,
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    pub prompt_tokens: u64,
    /// Overrides chars/4 of the reply (from [`Reply::WithUsage`]).
    pub completion_tokens: Option<u64>,
}

pub(crate) fn error_response(dialect: Dialect, status: u16, kind: &str, message: &str) -> Response {
    let body = match dialect {
        Dialect::OpenAi => openai_error_body(message, kind),
        Dialect::Anthropic => anthropic_error_body(kind, message),
    };
    json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body.to_string(),
    )
}

/// The wire tool calls with their ids, and the chars they count for usage.
pub(crate) fn wire_calls(
    turn: &Turn,
    calls: Vec<(String, Value)>,
    prefix: &str,
) -> Vec<(String, String, Value)> {
    calls
        .into_iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            (
                format!("{prefix}_standin_{}_{index}", turn.id),
                name,
                arguments,
            )
        })
        .collect()
}

/// `text` in pieces of at most `size` chars (none for empty text).
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

pub(crate) fn sse_response(body: String) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(crate) fn openai_error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

/// `{"type": "error", "error": {"type": kind, "message": message}}`.
pub(crate) fn anthropic_error_body(kind: &str, message: &str) -> Value {
    let kind = if kind == "server_error" {
        "api_error"
    } else {
        kind
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

pub(crate) fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn chars_div4(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// A string content, or the text parts of a content array joined.
pub(crate) fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}
