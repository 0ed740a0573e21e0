//! The OpenAI chat-completions rendering of a stand-in reply: a whole completion or SSE chunks
//! (content in pieces, tool-call arguments in pieces keyed by index, the usage chunk when
//! `stream_options.include_usage` was asked, `[DONE]`), and faults as OpenAI's error bodies.

use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::standin::script::{Fault, Reply};
use crate::standin::wire::{
    chars_div4, error_response, json_response, pieces, sse_response, wire_calls, Dialect, Turn,
};

/// Arguments as the OpenAI wire string (a `Value::String` verbatim).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn render(reply: Reply, turn: &Turn) -> Response {
    let (content, calls) = match reply {
        Reply::Content(text) => (Some(text), Vec::new()),
        Reply::ToolCalls(calls) => (None, wire_calls(turn, calls, "call")),
        Reply::Fault(fault) => return openai_fault(fault, turn),
        _ => return error_response(Dialect::OpenAi, 500, "server_error", "stand-in: bad reply"),
    };
    let reply_chars = content.as_deref().map_or(0, |t| t.chars().count())
        + calls
            .iter()
            .map(|(_, name, args)| name.chars().count() + arguments_text(args).chars().count())
            .sum::<usize>();
    let completion_tokens = turn.completion_tokens.unwrap_or(chars_div4(reply_chars));
    let finish_reason = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let usage = json!({
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": turn.prompt_tokens + completion_tokens
    });
    if turn.stream {
        let mut chunks = vec![json!({"role": "assistant"})];
        chunks.extend(
            pieces(content.as_deref().unwrap_or_default(), 7)
                .into_iter()
                .map(|p| json!({"content": p})),
        );
        for (index, (id, name, args)) in calls.iter().enumerate() {
            let start = json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
            chunks.push(json!({"tool_calls": [start]}));
            for piece in pieces(&arguments_text(args), 9) {
                chunks.push(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                );
            }
        }
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({"id": format!("chatcmpl-standin-{}", turn.id), "object": "chat.completion.chunk",
                   "model": turn.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut events: Vec<Value> = chunks.into_iter().map(|delta| chunk(delta, None)).collect();
        events.push(chunk(json!({}), Some(finish_reason)));
        if turn.include_usage {
            events.push(json!({"id": format!("chatcmpl-standin-{}", turn.id), "object": "chat.completion.chunk",
                               "model": turn.model, "choices": [], "usage": usage}));
        }
        let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        return sse_response(body);
    }
    let wire: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments_text(args)}}))
        .collect();
    let message = if wire.is_empty() {
        json!({"role": "assistant", "content": content})
    } else {
        json!({"role": "assistant", "content": null, "tool_calls": wire})
    };
    let body = json!({
        "id": format!("chatcmpl-standin-{}", turn.id),
        "object": "chat.completion",
        "created": 0,
        "model": turn.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage
    });
    json_response(StatusCode::OK, body.to_string())
}

fn openai_fault(fault: Fault, turn: &Turn) -> Response {
    let error = |status: u16, message: &str, kind: &str, code: &str| {
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
        json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body.to_string(),
        )
    };
    match fault {
        Fault::RateLimited { retry_after_secs } => {
            let mut response = error(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded");
            if let Ok(value) = header::HeaderValue::from_str(&retry_after_secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Fault::ServerError => error(500, "The server had an error while processing your request.", "server_error", "server_error"),
        Fault::ContextLength => error(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        Fault::AuthFailed => error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
        Fault::QuotaExhausted => error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        Fault::MalformedJson if turn.stream => sse_response("data: {\"choices\": [{\"delta\": \n\n".to_string()),
        Fault::MalformedJson => json_response(StatusCode::OK, "{\"id\": \"chatcmpl-standin\", \"choices\": [".to_string()),
        Fault::StreamCut if turn.stream => {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": "partial ans"}, "finish_reason": null}]});
            sse_response(format!("data: {chunk}\n\n"))
        }
        Fault::StreamCut => json_response(StatusCode::OK, "{\"choices\": [{\"message\": {\"content\": \"partial".to_string()),
    }
}
