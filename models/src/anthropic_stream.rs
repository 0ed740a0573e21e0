//! Assembles a streamed Anthropic message (`stream: true`): `message_start` (model, input
//! usage), `content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`) /
//! `content_block_stop`, `message_delta` (stop reason, output usage), `message_stop`; `ping`
//! is ignored and an `error` event ends the stream with its error. Pure.

use std::collections::BTreeMap;

use loopgate_protocol::usage::Usage;
use serde_json::Value;

use crate::anthropic_wire::{finish_reason, WireUsage};
use crate::chat_types::ChatResponse;
use crate::model_error::ModelError;
use crate::response_draft::{stream_error, DraftCall, ResponseDraft};
use crate::sse::SseEvent;

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: Option<String>,
        name: Option<String>,
        start_input: Value,
        json: String,
    },
    Other,
}

#[derive(Debug, Default)]
pub(crate) struct AnthropicStream {
    blocks: BTreeMap<u64, Block>,
    model: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    stop_reason: Option<String>,
    done: bool,
}

fn str_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

impl AnthropicStream {
    pub fn push(&mut self, event: &SseEvent) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ModelError::malformed(format!("stream event is not JSON: {e}"), data))?;
        let kind = str_of(&value, "type").or_else(|| event.event.clone());
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind.as_deref() {
            Some("message_start") => {
                let message = value.get("message").cloned().unwrap_or(Value::Null);
                self.model = str_of(&message, "model");
                self.take_usage(message.get("usage"));
            }
            Some("content_block_start") => {
                let block = value.get("content_block").cloned().unwrap_or(Value::Null);
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(str_of(&block, "text").unwrap_or_default()),
                    Some("tool_use") => Block::ToolUse {
                        id: str_of(&block, "id"),
                        name: str_of(&block, "name"),
                        start_input: block.get("input").cloned().unwrap_or(Value::Null),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, started);
            }
            Some("content_block_delta") => {
                let delta = value.get("delta").cloned().unwrap_or(Value::Null);
                match (
                    self.blocks.get_mut(&index),
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (Some(Block::Text(text)), Some("text_delta")) => {
                        text.push_str(
                            delta
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                        );
                    }
                    (Some(Block::ToolUse { json, .. }), Some("input_json_delta")) => {
                        json.push_str(
                            delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                        );
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(reason) = value.get("delta").and_then(|d| str_of(d, "stop_reason")) {
                    self.stop_reason = Some(reason);
                }
                self.take_usage(value.get("usage"));
            }
            Some("message_stop") => self.done = true,
            Some("error") => {
                return Err(stream_error(
                    value.get("error").unwrap_or(&Value::Null),
                    data,
                ));
            }
            _ => {} // ping, content_block_stop, unknown future events
        }
        Ok(())
    }

    fn take_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage.and_then(|u| serde_json::from_value::<WireUsage>(u.clone()).ok())
        else {
            return;
        };
        if let Some(input) = usage.input() {
            self.input_tokens = Some(input);
        }
        if let Some(cached) = usage.cached() {
            self.cached_tokens = Some(cached);
        }
        if let Some(output) = usage.output() {
            // Cumulative in `message_delta`.
            self.output_tokens = Some(output);
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The assembled response; `Interrupted` without `message_stop`.
    pub fn finish(
        self,
        requested_model: &str,
        request_len: usize,
    ) -> Result<ChatResponse, ModelError> {
        if !self.done {
            return Err(ModelError::interrupted(
                "the stream ended before message_stop",
            ));
        }
        let mut content: Option<String> = None;
        let mut calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => content.get_or_insert_with(String::new).push_str(&text),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => calls.push(DraftCall {
                    id,
                    name,
                    arguments: if json.trim().is_empty() {
                        start_input
                    } else {
                        Value::String(json)
                    },
                }),
                Block::Other => {}
            }
        }
        let cached = self.cached_tokens.unwrap_or(0);
        let usage = self
            .input_tokens
            .map(|input| Usage::tokens(input, self.output_tokens.unwrap_or(0)).with_cached(cached));
        let draft = ResponseDraft {
            content,
            calls,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage,
            model: self.model,
        };
        Ok(draft.finish(requested_model, request_len, false))
    }
}
