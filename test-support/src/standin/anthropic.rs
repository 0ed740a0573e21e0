//! The Anthropic Messages side of [`StandInModel`](crate::StandInModel):
//! `POST /v1/messages` on the same server, replies from the same [`Script`] (keyed by the
//! request's `model`), rendered as a whole `message` or as the real event stream
//! (`message_start`, `content_block_*` with `text_delta` / `input_json_delta`, `message_delta`
//! with the stop reason and output usage, `message_stop`), and [`Fault`]s as Anthropic's error
//! responses (`{"type": "error", "error": {"type", "message"}}`).
//!
//! [`Script`]: crate::Script
//! [`Fault`]: crate::Fault

use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::standin::script::{Fault, Reply};
use crate::standin::wire::{
    anthropic_error_body, chars_div4, content_text, json_response, pieces, sse_response,
    wire_calls, Turn,
};

/// The content of the last `tool_result` block in an Anthropic request (for
/// [`Reply::Dynamic`] closures).
pub fn last_tool_result(request: &Value) -> Option<String> {
    request
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .filter_map(|m| m.get("content")?.as_array())
        .flat_map(|blocks| blocks.iter().rev())
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))?
        .get("content")
        .and_then(content_text)
}

pub(crate) fn render(reply: Reply, turn: &Turn) -> Response {
    let (text, calls) = match reply {
        Reply::Content(text) => (Some(text), Vec::new()),
        Reply::ToolCalls(calls) => (None, wire_calls(turn, calls, "toolu")),
        Reply::Fault(fault) => return fault_response(fault, turn),
        _ => return error(500, "api_error", "stand-in: bad reply"),
    };
    // Anthropic tool inputs are objects; a raw string is wrapped as the adapter does.
    let input = |args: &Value| match args {
        Value::Object(_) => args.clone(),
        other => json!({ "value": other }),
    };
    let reply_chars = text.as_deref().map_or(0, |t| t.chars().count())
        + calls
            .iter()
            .map(|(_, name, args)| name.chars().count() + input(args).to_string().chars().count())
            .sum::<usize>();
    let output_tokens = turn.completion_tokens.unwrap_or(chars_div4(reply_chars));
    let stop_reason = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let message_id = format!("msg_standin_{}", turn.id);
    if !turn.stream {
        let mut content: Vec<Value> = text
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        content.extend(calls.iter().map(|(id, name, args)| {
            json!({"type": "tool_use", "id": id, "name": name, "input": input(args)})
        }));
        let body = json!({
            "id": message_id, "type": "message", "role": "assistant", "model": turn.model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": turn.prompt_tokens, "output_tokens": output_tokens}
        });
        return json_response(StatusCode::OK, body.to_string());
    }
    let mut events = vec![json!({
        "type": "message_start",
        "message": {"id": message_id, "type": "message", "role": "assistant", "model": turn.model,
                    "content": [], "stop_reason": null,
                    "usage": {"input_tokens": turn.prompt_tokens, "output_tokens": 1}}
    })];
    let mut index = 0;
    if let Some(text) = &text {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "ping"}));
        for piece in pieces(text, 7) {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for (id, name, args) in &calls {
        events.push(json!({"type": "content_block_start", "index": index,
                           "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        for piece in pieces(&input(args).to_string(), 9) {
            events.push(json!({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                       "usage": {"output_tokens": output_tokens}}));
    events.push(json!({"type": "message_stop"}));
    sse_response(sse_body(&events))
}

fn sse_body(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            let name = e.get("type").and_then(Value::as_str).unwrap_or("message");
            format!("event: {name}\ndata: {e}\n\n")
        })
        .collect()
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        anthropic_error_body(kind, message).to_string(),
    )
}

fn fault_response(fault: Fault, turn: &Turn) -> Response {
    match fault {
        Fault::RateLimited { retry_after_secs } => {
            let mut response = error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.");
            if let Ok(value) = header::HeaderValue::from_str(&retry_after_secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Fault::ServerError => error(529, "overloaded_error", "Overloaded"),
        Fault::ContextLength => error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
        Fault::AuthFailed => error(401, "authentication_error", "invalid x-api-key"),
        Fault::QuotaExhausted => error(
            400,
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
        ),
        Fault::MalformedJson if turn.stream => sse_response("event: message_start\ndata: {\"type\": \"mess\n\n".into()),
        Fault::MalformedJson => json_response(StatusCode::OK, "{\"type\": \"message\", \"content\": [".into()),
        Fault::StreamCut if turn.stream => {
            let events = [
                json!({"type": "message_start", "message": {"model": turn.model, "usage": {"input_tokens": turn.prompt_tokens, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial ans"}}),
            ];
            sse_response(sse_body(&events))
        }
        Fault::StreamCut => json_response(StatusCode::OK, "{\"type\": \"message\", \"content\": [{\"type\": \"text\", \"text\": \"partial".into()),
    }
}
