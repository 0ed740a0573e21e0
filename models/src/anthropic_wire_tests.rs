#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::chat_types::{ImagePart, ToolSpec};
use crate::model_error::ModelErrorKind;
use crate::profile_config::{Provider, StructuredOutput};

fn profile(max_tokens: Option<u32>, stream: bool) -> ModelProfile {
    ModelProfile {
        name: "claude".into(),
        provider: Provider::Anthropic,
        base_url: "https://api.anthropic.com/v1".into(),
        model: "claude-sonnet".into(),
        api_key: None,
        timeout: Duration::from_secs(5),
        max_tokens,
        temperature: None,
        context_window: None,
        stream,
        price: None,
        structured_output: StructuredOutput::Off,
        vision: false,
        extra_body: serde_json::Map::new(),
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

#[test]
fn extra_body_fields_go_out_beside_the_request() {
    let mut p = profile(Some(100), false);
    p.extra_body = serde_json::Map::from_iter([("top_k".to_string(), json!(5))]);
    let body = wire_request(&p, &ChatRequest::new(vec![ChatMessage::user("hi")]));
    assert_eq!(body["top_k"], json!(5));
    assert_eq!(body["max_tokens"], json!(100));
    assert_eq!(body["model"], json!(p.model));
}

#[test]
fn request_mapping() {
    let req = ChatRequest::new(vec![
        ChatMessage::system("sys one"),
        ChatMessage::system("sys two"),
        ChatMessage::user("do it"),
        ChatMessage::Assistant {
            content: Some("running".into()),
            tool_calls: vec![
                call("t1", "shell", json!({"command": "ls"})),
                call("t2", "shell", Value::String("{not json".into())),
            ],
        },
        ChatMessage::tool_result("t1", "shell", "a.txt"),
        ChatMessage::tool_result("t2", "shell", "error: bad args"),
        ChatMessage::user("go on"),
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![],
        },
    ])
    .with_tools(vec![ToolSpec {
        name: "shell".into(),
        description: "run".into(),
        parameters: json!({"type": "object"}),
    }]);
    let body = wire_request(&profile(None, true), &req);
    assert_eq!(
        body,
        json!({
            "model": "claude-sonnet",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "stream": true,
            "system": [{"type": "text", "text": "sys one\n\nsys two", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "shell", "description": "run", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "do it"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "running"},
                    {"type": "tool_use", "id": "t1", "name": "shell", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "t2", "name": "shell", "input": {"value": "{not json"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "error: bad args"},
                    {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}
                ]}
            ]
        })
    );
    let mut req = ChatRequest::new(vec![ChatMessage::user("x")]);
    req.temperature = Some(0.5);
    let body = wire_request(&profile(Some(100), false), &req);
    assert_eq!(body["max_tokens"], 100);
    assert_eq!(body["temperature"], 0.5);
    assert!(body.get("system").is_none() && body.get("tools").is_none());
}

#[test]
fn cache_breakpoints_table() {
    let breakpoint = json!({"type": "ephemeral"});
    // (messages, the system prompt's breakpoint, the last block's breakpoint)
    let cases: Vec<(&str, Vec<ChatMessage>, bool, bool)> = vec![
        (
            "system and a user turn",
            vec![ChatMessage::system("sys"), ChatMessage::user("go")],
            true,
            true,
        ),
        (
            "no system: the last turn only",
            vec![ChatMessage::user("go")],
            false,
            true,
        ),
        (
            "the last block is a tool result",
            vec![
                ChatMessage::system("sys"),
                ChatMessage::user("go"),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![call("t1", "shell", json!({"command": "ls"}))],
                },
                ChatMessage::tool_result("t1", "shell", "a.txt"),
            ],
            true,
            true,
        ),
        (
            "an empty text block gets none",
            vec![ChatMessage::system(" "), ChatMessage::user("")],
            false,
            false,
        ),
    ];
    for (name, messages, system, last) in cases {
        let body = wire_request(&profile(None, false), &ChatRequest::new(messages));
        assert_eq!(
            body.pointer("/system/0/cache_control").cloned(),
            system.then(|| breakpoint.clone()),
            "{name}"
        );
        let turns = body["messages"].as_array().unwrap();
        let last_block = turns
            .last()
            .and_then(|t| t["content"].as_array()?.last().cloned());
        assert_eq!(
            last_block.and_then(|b| b.get("cache_control").cloned()),
            last.then(|| breakpoint.clone()),
            "{name}"
        );
        // Only the last block of the last turn has one.
        let marked = turns
            .iter()
            .flat_map(|t| t["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b.get("cache_control").is_some())
            .count();
        assert!(marked <= 1, "{name}: {body}");
    }
}

#[test]
fn response_mapping() {
    let body = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-served",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "ls"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50}
    })
    .to_string();
    let response = parse_response(&body, "asked", 10).unwrap();
    assert_eq!(response.content.as_deref(), Some("Listing."));
    assert_eq!(response.model, "claude-served");
    assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(response.usage, Usage::tokens(150, 20).with_cached(50));
    assert_eq!(
        response.tool_calls,
        vec![call("toolu_1", "shell", json!({"command": "ls"}))]
    );
    assert!(!response.tool_calls_from_content);

    // A fenced call in the text is NOT recovered for Anthropic (it uses real tool_use).
    let fenced = json!({
        "type": "message", "content": [{"type": "text", "text": "```json\n{\"name\": \"shell\", \"arguments\": {}}\n```"}],
        "stop_reason": "end_turn"
    })
    .to_string();
    let response = parse_response(&fenced, "asked", 40).unwrap();
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(response.model, "asked");
    assert_eq!(response.usage.input_tokens, 10); // estimated: 40 bytes / 4
}

#[test]
fn malformed_and_error_bodies() {
    let cases = [
        ("not json", ModelErrorKind::MalformedResponse),
        ("{\"type\": \"message\"}", ModelErrorKind::MalformedResponse),
        (
            "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}",
            ModelErrorKind::Server,
        ),
    ];
    for (body, kind) in cases {
        let err = parse_response(body, "m", 1).unwrap_err();
        assert_eq!(err.kind(), kind, "{body}");
    }
}

#[test]
fn streamed_message_assembles() {
    use crate::anthropic_stream::AnthropicStream;
    use crate::sse::SseDecoder;
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 30, "cache_read_input_tokens": 12, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Work"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ing"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "write_file", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a\","}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " \"content\": \"A\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let body: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    let run = |body: &str| {
        let mut decoder = SseDecoder::new();
        let mut stream = AnthropicStream::default();
        for event in decoder.push(body.as_bytes()) {
            stream.push(&event)?;
        }
        stream.finish("asked", 8)
    };
    let response = run(&body).unwrap();
    assert_eq!(response.content.as_deref(), Some("Working"));
    assert_eq!(response.model, "claude-x");
    assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(response.usage, Usage::tokens(42, 42).with_cached(12));
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            raw_arguments: Some(r#"{"path": "a", "content": "A"}"#.into()),
            ..call(
                "toolu_9",
                "write_file",
                json!({"path": "a", "content": "A"})
            )
        }]
    );
    // Cut before message_stop.
    let cut: String = body
        .split("event: message_delta")
        .next()
        .unwrap()
        .to_string();
    assert_eq!(run(&cut).unwrap_err().kind(), ModelErrorKind::Transport);
    // An error event mid-stream.
    let overloaded = format!(
        "{}event: error\ndata: {}\n\n",
        cut,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    assert_eq!(run(&overloaded).unwrap_err().kind(), ModelErrorKind::Server);
}

#[test]
fn tool_result_images_become_image_blocks_for_vision_profiles_only() {
    let image = ImagePart {
        media_type: "image/png".into(),
        data_base64: "iVBORw0KGgo=".into(),
    };
    let req = ChatRequest::new(vec![
        ChatMessage::user("look"),
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![call("t1", "browser_screenshot", json!({"path": "a.png"}))],
        },
        ChatMessage::tool_result_with_images("t1", "browser_screenshot", "saved", vec![image]),
    ]);
    let text = profile(None, false);
    let vision = ModelProfile {
        vision: true,
        ..text.clone()
    };
    let cases = [
        ("text-only", &text, json!("saved")),
        (
            "vision",
            &vision,
            json!([
                {"type": "text", "text": "saved"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
            ]),
        ),
    ];
    for (name, profile, content) in cases {
        let body = wire_request(profile, &req);
        assert_eq!(
            body["messages"][2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": content,
                 "cache_control": {"type": "ephemeral"}}
            ]}),
            "{name}: {body}"
        );
    }
}
