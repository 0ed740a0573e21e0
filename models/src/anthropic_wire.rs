//! Anthropic Messages API wire format (`POST {base_url}/messages`): request encoding and
//! (lenient) response decoding. Pure; the HTTP side lives in `anthropic_client`.
//!
//! Mapping: system messages join into `system`; tool calls become `tool_use` blocks of the
//! assistant turn; tool results become `tool_result` blocks of a user turn (with `image`
//! blocks beside their text for a vision profile); consecutive turns
//! of one role merge (the API wants them alternating). Two prompt-cache breakpoints
//! (`cache_control: {"type": "ephemeral"}`): on the system prompt (which caches the tools
//! before it too) and on the last block of the last turn, so the next turn of a tool loop
//! reads everything before its new messages from the cache.

use loopgate_protocol::usage::Usage;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::chat_types::{ChatMessage, ChatRequest, ChatResponse, ImagePart, ToolCall};
use crate::model_error::ModelError;
use crate::profile_config::ModelProfile;
use crate::response_draft::{stream_error, DraftCall, ResponseDraft};

/// `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; used when neither the request nor the profile sets it.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The request body. The request's `max_tokens` / `temperature` override the profile's.
pub(crate) fn wire_request(profile: &ModelProfile, req: &ChatRequest) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &req.messages {
        let (role, blocks) = match message {
            ChatMessage::System { content } => {
                system.push(content.as_str());
                continue;
            }
            ChatMessage::User { content } => ("user", vec![text_block(content)]),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks: Vec<Value> = content
                    .as_deref()
                    .filter(|text| !text.trim().is_empty())
                    .map(text_block)
                    .into_iter()
                    .collect();
                blocks.extend(tool_calls.iter().map(tool_use_block));
                ("assistant", blocks)
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
                images,
                ..
            } => {
                let content = if profile.vision && !images.is_empty() {
                    let mut blocks = vec![text_block(content)];
                    blocks.extend(images.iter().map(image_block));
                    Value::Array(blocks)
                } else {
                    Value::String(content.clone())
                };
                (
                    "user",
                    vec![
                        json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content}),
                    ],
                )
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if let Some(last) = turns.last_mut().and_then(|(_, blocks)| blocks.last_mut()) {
        mark_breakpoint(last);
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": profile.model,
        "max_tokens": req.max_tokens.or(profile.max_tokens).unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": profile.stream,
    });
    if !system.is_empty() {
        let mut block = text_block(&system.join("\n\n"));
        mark_breakpoint(&mut block);
        body["system"] = json!([block]);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
    }
    if let Some(t) = req.temperature.or(profile.temperature) {
        body["temperature"] = json!(t);
    }
    if let Some(fields) = body.as_object_mut() {
        // The profile's `extra_body`; a field set above is never replaced (those are refused
        // when the profile is resolved).
        for (key, value) in &profile.extra_body {
            fields.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    body
}

/// A prompt-cache breakpoint on `block`: the prefix up to and including it is cached for the
/// next request. A text block without text gets none (the API refuses one there).
fn mark_breakpoint(block: &mut Value) {
    let empty_text = block.get("type").and_then(Value::as_str) == Some("text")
        && block
            .get("text")
            .and_then(Value::as_str)
            .is_none_or(|text| text.trim().is_empty());
    if let (false, Some(block)) = (empty_text, block.as_object_mut()) {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `{"type": "image", "source": {"type": "base64", "media_type", "data"}}`.
fn image_block(image: &ImagePart) -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data_base64},
    })
}

fn tool_use_block(call: &ToolCall) -> Value {
    // `input` must be an object; arguments that were not one go back wrapped.
    let input = match &call.arguments {
        Value::Object(map) => Value::Object(map.clone()),
        Value::Null => Value::Object(Map::new()),
        other => json!({ "value": other }),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

/// `stop_reason` in OpenAI's terms, so callers see one vocabulary.
pub(crate) fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        other => other,
    }
    .to_string()
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Input counts cached tokens too: they occupy the context all the same.
    pub(crate) fn input(&self) -> Option<u64> {
        let cached = self.cache_creation_input_tokens.unwrap_or(0)
            + self.cache_read_input_tokens.unwrap_or(0);
        self.input_tokens.map(|input| input + cached)
    }
    pub(crate) fn output(&self) -> Option<u64> {
        self.output_tokens
    }
    /// The input tokens read from the prompt cache (`cache_read_input_tokens`).
    pub(crate) fn cached(&self) -> Option<u64> {
        self.cache_read_input_tokens
    }
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// Decodes a success response body.
pub(crate) fn parse_response(
    body: &str,
    requested_model: &str,
    request_len: usize,
) -> Result<ChatResponse, ModelError> {
    let wire: WireResponse = serde_json::from_str(body)
        .map_err(|e| ModelError::malformed(format!("not an Anthropic message: {e}"), body))?;
    if wire.kind.as_deref() == Some("error") {
        return Err(stream_error(
            wire.error.as_ref().unwrap_or(&Value::Null),
            body,
        ));
    }
    let blocks = wire
        .content
        .ok_or_else(|| ModelError::malformed("message without content", body))?;
    let mut content: Option<String> = None;
    let mut calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                content.get_or_insert_with(String::new).push_str(text);
            }
            Some("tool_use") => calls.push(DraftCall {
                id: block.get("id").and_then(Value::as_str).map(str::to_string),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                arguments: block.get("input").cloned().unwrap_or(Value::Null),
            }),
            _ => {} // thinking, redacted_thinking, ...
        }
    }
    let usage = wire.usage.and_then(|u| {
        let cached = u.cached().unwrap_or(0);
        Some(Usage::tokens(u.input()?, u.output().unwrap_or(0)).with_cached(cached))
    });
    let draft = ResponseDraft {
        content,
        calls,
        finish_reason: wire.stop_reason.as_deref().map(finish_reason),
        usage,
        model: wire.model,
    };
    Ok(draft.finish(requested_model, request_len, false))
}

#[cfg(test)]
#[path = "anthropic_wire_tests.rs"]
mod tests;
