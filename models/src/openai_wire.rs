//! OpenAI chat-completions wire format: request encoding and (lenient) response decoding.
//! Pure; the HTTP side lives in `openai_client`.

use loopgate_protocol::usage::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

use crate::chat_types::{ChatMessage, ChatRequest, ChatResponse, ToolCall, ToolSpec};
use crate::model_error::ModelError;
use crate::profile_config::{ModelProfile, StructuredOutput};
use crate::response_draft::{DraftCall, ResponseDraft};
pub use crate::tool_call_recovery::FALLBACK_CALL_ID_PREFIX;

#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessageOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    stream: bool,
    /// With `stream`: ask for the usage chunk at the end (OpenAI, vLLM, llama.cpp honour it).
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    /// Only when the profile has `structured_output = "json_schema"` and the request declares
    /// a reply schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
    /// The profile's `extra_body` (none of the fields above: refused when resolved).
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, Value>,
}

/// `{"type": "json_schema", "json_schema": {"name", "strict": true, "schema"}}`.
#[derive(Debug, Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchemaFormat<'a>,
}

#[derive(Debug, Serialize)]
struct JsonSchemaFormat<'a> {
    name: &'a str,
    strict: bool,
    schema: &'a Value,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessageOut<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    /// A user turn of content parts: the images of the tool results just before it (tool
    /// messages carry text only in chat completions).
    #[serde(rename = "user")]
    UserParts {
        content: Vec<WirePart>,
    },
    Assistant {
        /// `null` only when there are tool calls (servers reject an empty assistant turn).
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCallOut<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// `{"type": "text", "text"}` or `{"type": "image_url", "image_url": {"url": "data:..."}}`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart {
    Text { text: String },
    ImageUrl { image_url: WireImageUrl },
}

#[derive(Debug, Serialize)]
struct WireImageUrl {
    url: String,
}

#[derive(Debug, Serialize)]
struct WireToolCallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionOut<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunctionOut<'a> {
    name: &'a str,
    /// A JSON string, as the API wants it (see [`ToolCall::arguments_text`]).
    arguments: Cow<'a, str>,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The request body for `POST {base_url}/chat/completions`. The request's `max_tokens` /
/// `temperature` override the profile's; its reply schema goes out as `response_format` when
/// the profile asks for structured output.
pub(crate) fn wire_request<'a>(profile: &'a ModelProfile, req: &'a ChatRequest) -> WireRequest<'a> {
    WireRequest {
        model: &profile.model,
        messages: wire_messages(&req.messages, profile.vision),
        tools: req.tools.iter().map(wire_tool).collect(),
        max_tokens: req.max_tokens.or(profile.max_tokens),
        temperature: req.temperature.or(profile.temperature),
        seed: req.seed,
        stream: profile.stream,
        stream_options: profile.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        response_format: match (profile.structured_output, &req.reply_schema) {
            (StructuredOutput::JsonSchema, Some(reply)) => Some(ResponseFormat {
                kind: "json_schema",
                json_schema: JsonSchemaFormat {
                    name: &reply.name,
                    strict: true,
                    schema: &reply.schema,
                },
            }),
            (StructuredOutput::JsonSchema | StructuredOutput::Off, _) => None,
        },
        extra: &profile.extra_body,
    }
}

/// The messages in wire form. For a vision profile, the images of a run of tool results follow
/// it as one user turn of `image_url` parts (each after a line naming its call); otherwise
/// images are left out and the model works from the text.
fn wire_messages(messages: &[ChatMessage], vision: bool) -> Vec<WireMessageOut<'_>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut images: Vec<WirePart> = Vec::new();
    for message in messages {
        let is_tool = matches!(message, ChatMessage::Tool { .. });
        if !is_tool && !images.is_empty() {
            out.push(WireMessageOut::UserParts {
                content: std::mem::take(&mut images),
            });
        }
        if let (
            true,
            ChatMessage::Tool {
                tool_call_id,
                name,
                images: attached,
                ..
            },
        ) = (vision, message)
        {
            for image in attached {
                images.push(WirePart::Text {
                    text: format!("The image from {name} (call {tool_call_id}):"),
                });
                images.push(WirePart::ImageUrl {
                    image_url: WireImageUrl {
                        url: image.data_url(),
                    },
                });
            }
        }
        out.push(wire_message(message));
    }
    if !images.is_empty() {
        out.push(WireMessageOut::UserParts { content: images });
    }
    out
}

fn wire_message(message: &ChatMessage) -> WireMessageOut<'_> {
    match message {
        ChatMessage::System { content } => WireMessageOut::System { content },
        ChatMessage::User { content } => WireMessageOut::User { content },
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            let content = match (content.as_deref(), tool_calls.is_empty()) {
                (None, true) => Some(""),
                (content, _) => content,
            };
            WireMessageOut::Assistant {
                content,
                tool_calls: tool_calls.iter().map(wire_tool_call).collect(),
            }
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
            ..
        } => WireMessageOut::Tool {
            tool_call_id,
            content,
        },
    }
}

fn wire_tool_call(call: &ToolCall) -> WireToolCallOut<'_> {
    WireToolCallOut {
        id: &call.id,
        kind: "function",
        function: WireFunctionOut {
            name: &call.name,
            arguments: call.arguments_text(),
        },
    }
}

fn wire_tool(tool: &ToolSpec) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireToolFunction {
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.parameters,
        },
    }
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// llama-server's own counters, sent beside `usage`.
    #[serde(default)]
    timings: Option<WireTimings>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessageIn>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessageIn {
    /// A string, `null`, or an array of `{type: "text", text}` parts.
    #[serde(default)]
    content: Value,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallIn>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCallIn {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionIn>,
}

#[derive(Debug, Deserialize)]
struct WireFunctionIn {
    #[serde(default)]
    name: Option<String>,
    /// Normally a JSON string; some servers send an object.
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// OpenAI (and llama-server since it reports it): `{"cached_tokens": n}`.
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek: the prompt tokens its context cache held.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// llama-server's `timings`: `cache_n` prompt tokens were reused from its KV cache.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct WireTimings {
    #[serde(default)]
    cache_n: Option<u64>,
}

/// Decodes a success response. `request_len` (bytes of the request body) feeds the usage
/// estimate when the server reports none.
pub(crate) fn parse_response(
    body: &str,
    requested_model: &str,
    request_len: usize,
) -> Result<ChatResponse, ModelError> {
    let wire: WireResponse = serde_json::from_str(body)
        .map_err(|e| ModelError::malformed(format!("not a chat completion: {e}"), body))?;
    let Some(choice) = wire.choices.and_then(|choices| choices.into_iter().next()) else {
        let reason = match &wire.error {
            Some(error) => format!("no choices; error in body: {error}"),
            None => "no choices".to_string(),
        };
        return Err(ModelError::malformed(reason, body));
    };
    let message = choice
        .message
        .ok_or_else(|| ModelError::malformed("choice without a message", body))?;
    let draft = ResponseDraft {
        content: content_text(message.content),
        calls: message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| {
                let (name, arguments) = match call.function {
                    Some(function) => (function.name, function.arguments),
                    None => (None, Value::Null),
                };
                DraftCall {
                    id: call.id,
                    name,
                    arguments,
                }
            })
            .collect(),
        finish_reason: choice.finish_reason,
        usage: wire.usage.and_then(|usage| usage.into_usage(wire.timings)),
        model: wire.model,
    };
    Ok(draft.finish(requested_model, request_len, true))
}

impl WireUsage {
    /// `None` without `prompt_tokens` (the caller estimates then). The cached prompt tokens
    /// come from `prompt_tokens_details.cached_tokens`, else DeepSeek's
    /// `prompt_cache_hit_tokens`, else llama-server's `timings.cache_n`.
    pub(crate) fn into_usage(self, timings: Option<WireTimings>) -> Option<Usage> {
        let cached = self
            .prompt_tokens_details
            .and_then(|details| details.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .or(timings.and_then(|t| t.cache_n))
            .unwrap_or(0);
        let input = self.prompt_tokens?;
        Some(
            Usage::tokens(input, self.completion_tokens.unwrap_or(0))
                .with_cached(cached.min(input)),
        )
    }
}

pub(crate) fn content_text(content: Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text),
        Value::Array(parts) => {
            let text: String = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            Some(text)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod prefix_tests;
