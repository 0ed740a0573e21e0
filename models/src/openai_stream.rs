//! Assembles a streamed OpenAI chat completion (`stream: true`): content deltas, tool-call
//! deltas keyed by `index` (id and name first, arguments in pieces), `finish_reason`, and the
//! usage chunk sent last when `stream_options.include_usage` was asked. Pure.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::chat_types::ChatResponse;
use crate::model_error::ModelError;
use crate::openai_wire::{WireTimings, WireUsage};
use crate::response_draft::{stream_error, DraftCall, ResponseDraft};
use crate::sse::SseEvent;

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    timings: Option<WireTimings>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallDelta>,
}

#[derive(Debug, Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// Usually a string piece; a server that sends the whole object at once is accepted.
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
    whole: Option<Value>,
}

#[derive(Debug, Default)]
pub(crate) struct OpenAiStream {
    content: Option<String>,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    /// llama-server's, on the last chunk.
    timings: Option<WireTimings>,
    model: Option<String>,
    done: bool,
}

impl OpenAiStream {
    /// Takes one SSE event. An error event ends the stream with the error it carries.
    pub fn push(&mut self, event: &SseEvent) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| ModelError::malformed(format!("stream chunk is not JSON: {e}"), data))?;
        if let Some(error) = &chunk.error {
            return Err(stream_error(error, data));
        }
        if chunk.model.as_deref().is_some_and(|m| !m.is_empty()) {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if chunk.timings.is_some() {
            self.timings = chunk.timings;
        }
        for choice in chunk.choices {
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content {
                self.content.get_or_insert_with(String::new).push_str(&text);
            }
            for (position, call) in delta.tool_calls.into_iter().enumerate() {
                let index = call.index.unwrap_or(position as u64);
                let partial = self.calls.entry(index).or_default();
                if call.id.as_deref().is_some_and(|id| !id.is_empty()) {
                    partial.id = call.id;
                }
                let Some(function) = call.function else {
                    continue;
                };
                if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                    partial.name = Some(name);
                }
                match function.arguments {
                    Value::String(piece) => partial.arguments.push_str(&piece),
                    Value::Null => {}
                    whole => partial.whole = Some(whole),
                }
            }
        }
        Ok(())
    }

    /// True once `[DONE]` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The assembled response. A stream that ended without `[DONE]` and without a
    /// `finish_reason` was cut off: `Interrupted`.
    pub fn finish(
        self,
        requested_model: &str,
        request_len: usize,
    ) -> Result<ChatResponse, ModelError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ModelError::interrupted(
                "the stream ended before [DONE] or a finish_reason",
            ));
        }
        let calls = self
            .calls
            .into_values()
            .map(|call| DraftCall {
                id: call.id,
                name: call.name,
                arguments: call.whole.unwrap_or(Value::String(call.arguments)),
            })
            .collect();
        let draft = ResponseDraft {
            content: self.content,
            calls,
            finish_reason: self.finish_reason,
            usage: self.usage.and_then(|usage| usage.into_usage(self.timings)),
            model: self.model,
        };
        Ok(draft.finish(requested_model, request_len, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_error::ModelErrorKind;
    use crate::sse::SseDecoder;
    use serde_json::json;

    fn run(body: &str) -> Result<ChatResponse, ModelError> {
        let mut decoder = SseDecoder::new();
        let mut stream = OpenAiStream::default();
        for event in decoder
            .push(body.as_bytes())
            .into_iter()
            .chain(decoder.finish())
        {
            stream.push(&event)?;
        }
        stream.finish("asked", 400)
    }

    fn sse(chunks: &[serde_json::Value], done: bool) -> String {
        let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        if done {
            body.push_str("data: [DONE]\n\n");
        }
        body
    }

    #[test]
    fn content_and_usage_chunk() {
        let body = sse(
            &[
                json!({"model": "m1", "choices": [{"delta": {"role": "assistant", "content": "Hel"}}]}),
                json!({"choices": [{"delta": {"content": "lo"}, "finish_reason": null}]}),
                json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}}),
            ],
            true,
        );
        let response = run(&body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.content.as_deref(), Some("Hello"));
        assert_eq!(response.model, "m1");
        assert_eq!(response.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            response.usage,
            loopgate_protocol::usage::Usage::tokens(12, 2)
        );
    }

    #[test]
    fn cached_tokens_from_the_usage_chunk_or_llama_server_timings() {
        let content = json!({"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]});
        let cases = [
            (
                json!({"choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 64}}}),
                64,
            ),
            (
                json!({"choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 2}, "timings": {"cache_n": 80}}),
                80,
            ),
            (
                json!({"choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 2}}),
                0,
            ),
        ];
        for (last, cached) in cases {
            let response =
                run(&sse(&[content.clone(), last.clone()], true)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(response.usage.input_tokens, 90, "{last}");
            assert_eq!(response.usage.cached_prompt_tokens, cached, "{last}");
        }
    }

    #[test]
    fn tool_call_deltas_assemble_by_index() {
        let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
            json!({"choices": [{"delta": {"tool_calls": [{
                "index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": args}
            }]}}]})
        };
        let body = sse(
            &[
                call(0, Some("c0"), Some("shell"), ""),
                call(1, Some("c1"), Some("read_file"), "{\"pa"),
                call(0, None, None, "{\"command\": "),
                call(0, None, None, "\"ls\"}"),
                call(1, None, None, "th\": \"a\"}"),
                json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            ],
            true,
        );
        let response = run(&body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.tool_calls.len(), 2);
        assert_eq!(response.tool_calls[0].id, "c0");
        assert_eq!(response.tool_calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(response.tool_calls[1].name, "read_file");
        assert_eq!(response.tool_calls[1].arguments, json!({"path": "a"}));
        // The pieces joined are the text that goes back in later requests.
        assert_eq!(
            response.tool_calls[0].raw_arguments.as_deref(),
            Some("{\"command\": \"ls\"}")
        );
        // No usage chunk: estimated.
        assert_eq!(response.usage.input_tokens, 100);
    }

    #[test]
    fn failures_table() {
        let cut = sse(
            &[json!({"choices": [{"delta": {"content": "par"}}]})],
            false,
        );
        let garbage = "data: {not json\n\n".to_string();
        let error = sse(
            &[json!({"error": {"message": "too long", "code": "context_length_exceeded"}})],
            false,
        );
        let cases = [
            (cut, ModelErrorKind::Transport),
            (garbage, ModelErrorKind::MalformedResponse),
            (error, ModelErrorKind::ContextLength),
        ];
        for (body, kind) in cases {
            let err = run(&body).err().map(|e| e.kind());
            assert_eq!(err, Some(kind), "{body}");
        }
        // Ended with a finish_reason but no [DONE]: accepted.
        let lenient = sse(
            &[json!({"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]})],
            false,
        );
        assert!(run(&lenient).is_ok());
    }
}
