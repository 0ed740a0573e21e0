//! What every adapter decodes a reply into (whole or streamed) before it becomes a
//! [`ChatResponse`]: tool-call ids and arguments normalized, calls written into the content
//! recovered (OpenAI-compatible servers only), usage estimated when the server reports none.

use crate::tool_call_recovery::{calls_from_content, parse_json_lenient};
use loopgate_protocol::usage::Usage;
use serde_json::{Map, Value};

use crate::chat_types::{ChatResponse, ToolCall};

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DraftCall {
    pub id: Option<String>,
    pub name: Option<String>,
    /// A JSON string (as OpenAI sends it), an object (Anthropic, some servers), or null.
    pub arguments: Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ResponseDraft {
    pub content: Option<String>,
    pub calls: Vec<DraftCall>,
    pub finish_reason: Option<String>,
    /// `None` when the server reported no usage.
    pub usage: Option<Usage>,
    pub model: Option<String>,
}

impl ResponseDraft {
    /// `request_len` (bytes of the request body) feeds the usage estimate; `recover_calls`
    /// enables the fallback parser for tool calls written into the content.
    pub fn finish(
        self,
        requested_model: &str,
        request_len: usize,
        recover_calls: bool,
    ) -> ChatResponse {
        let content = self.content;
        let mut tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(index, call)| ToolCall {
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{index}")),
                name: call.name.unwrap_or_default(),
                raw_arguments: strict_json_text(&call.arguments),
                arguments: decode_arguments(call.arguments),
            })
            .collect();
        let mut recovered = false;
        if tool_calls.is_empty() && recover_calls {
            if let Some(text) = &content {
                tool_calls = calls_from_content(text);
                recovered = !tool_calls.is_empty();
            }
        }
        let usage = self
            .usage
            .unwrap_or_else(|| estimate_usage(request_len, content.as_deref(), &tool_calls));
        ChatResponse {
            content,
            tool_calls,
            tool_calls_from_content: recovered,
            finish_reason: self.finish_reason,
            usage,
            model: self
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| requested_model.to_string()),
        }
    }
}

/// A JSON string is decoded (leniently); a string that is not JSON stays a `Value::String`;
/// empty or missing arguments are `{}`.
pub(crate) fn decode_arguments(raw: Value) -> Value {
    match raw {
        Value::Null => Value::Object(Map::new()),
        Value::String(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Value::String(text) => parse_json_lenient(&text).unwrap_or(Value::String(text)),
        other => other,
    }
}

/// Arguments sent as a string that is strict JSON: the text to send back verbatim. Text that
/// only the lenient parser reads is not kept (a server that decodes the history would reject
/// it).
fn strict_json_text(raw: &Value) -> Option<String> {
    match raw {
        Value::String(text) if serde_json::from_str::<Value>(text).is_ok() => Some(text.clone()),
        _ => None,
    }
}

/// chars/4, rounded up, for servers that report no usage.
fn estimate_usage(request_len: usize, content: Option<&str>, tool_calls: &[ToolCall]) -> Usage {
    let output_chars = content.map_or(0, |c| c.chars().count())
        + tool_calls
            .iter()
            .map(|call| call.name.len() + call.arguments.to_string().len())
            .sum::<usize>();
    Usage::tokens(
        (request_len as u64).div_ceil(4),
        (output_chars as u64).div_ceil(4),
    )
}

/// An error event inside a streamed response (`{"error": {"type", "code", "message"}}`),
/// mapped to the HTTP status the provider uses for that error type so it classifies as the
/// same [`ModelError`] an unstreamed reply would.
pub(crate) fn stream_error(error: &Value, raw: &str) -> crate::model_error::ModelError {
    let field = |name: &str| error.get(name).and_then(Value::as_str).unwrap_or_default();
    let kind = format!("{} {}", field("type"), field("code")).to_lowercase();
    let code = if kind.contains("overloaded") {
        529
    } else if kind.contains("rate_limit") || kind.contains("insufficient_quota") {
        429
    } else if kind.contains("authentication") || kind.contains("invalid_api_key") {
        401
    } else if kind.contains("permission") {
        403
    } else if kind.contains("not_found") {
        404
    } else if kind.contains("invalid_request") || kind.contains("context_length") {
        400
    } else {
        500
    };
    crate::model_error::ModelError::status(code, raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_error::ModelErrorKind;
    use serde_json::json;

    #[test]
    fn stream_error_kinds() {
        let cases = [
            (json!({"type": "overloaded_error"}), ModelErrorKind::Server),
            (
                json!({"type": "rate_limit_error"}),
                ModelErrorKind::RateLimit,
            ),
            (json!({"code": "insufficient_quota"}), ModelErrorKind::Quota),
            (
                json!({"type": "authentication_error"}),
                ModelErrorKind::Auth,
            ),
            (
                json!({"type": "invalid_request_error"}),
                ModelErrorKind::BadRequest,
            ),
            (
                json!({"code": "context_length_exceeded"}),
                ModelErrorKind::ContextLength,
            ),
            (json!({"message": "?"}), ModelErrorKind::Server),
        ];
        for (error, kind) in cases {
            let raw = json!({ "error": error }).to_string();
            assert_eq!(stream_error(&error, &raw).kind(), kind, "{error}");
        }
    }

    #[test]
    fn finish_normalizes_calls_and_estimates_usage() {
        let draft = ResponseDraft {
            content: Some("abcd".into()),
            calls: vec![
                DraftCall {
                    id: None,
                    name: Some("shell".into()),
                    arguments: json!("{\"command\": \"ls\"}"),
                },
                DraftCall {
                    id: Some("x".into()),
                    name: None,
                    arguments: Value::Null,
                },
            ],
            ..ResponseDraft::default()
        };
        let response = draft.finish("m", 40, true);
        assert_eq!(response.model, "m");
        assert_eq!(response.tool_calls[0].id, "call_0");
        assert_eq!(response.tool_calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(response.tool_calls[1].arguments, json!({}));
        assert_eq!(response.usage.input_tokens, 10);
        assert!(!response.tool_calls_from_content);
        let fenced = "```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n```";
        let recovered = ResponseDraft {
            content: Some(fenced.into()),
            ..ResponseDraft::default()
        };
        assert!(
            recovered
                .clone()
                .finish("m", 1, true)
                .tool_calls_from_content
        );
        assert!(recovered.finish("m", 1, false).tool_calls.is_empty());
    }
}
