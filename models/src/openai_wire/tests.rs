#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::chat_types::{ImagePart, ReplySchema};
use crate::model_error::ModelErrorKind;
use crate::profile_config::{ApiKey, Provider, StructuredOutput};

fn profile(max_tokens: Option<u32>, temperature: Option<f32>) -> ModelProfile {
    ModelProfile {
        name: "executor".into(),
        provider: Provider::OpenAi,
        base_url: "http://127.0.0.1:8080/v1".into(),
        model: "qwen2.5-coder-1.5b".into(),
        api_key: Some(ApiKey::new("sk-test")),
        timeout: Duration::from_secs(5),
        max_tokens,
        temperature,
        context_window: None,
        stream: false,
        price: None,
        structured_output: StructuredOutput::Off,
        vision: false,
        extra_body: serde_json::Map::new(),
    }
}

fn encode(profile: &ModelProfile, req: &ChatRequest) -> Value {
    serde_json::to_value(wire_request(profile, req)).unwrap()
}

#[test]
fn extra_body_fields_go_out_beside_the_request() {
    let mut p = profile(Some(256), None);
    p.extra_body = serde_json::Map::from_iter([
        ("repeat_penalty".to_string(), json!(1.1)),
        (
            "chat_template_kwargs".to_string(),
            json!({"enable_thinking": false}),
        ),
    ]);
    let body = encode(&p, &ChatRequest::new(vec![ChatMessage::user("hi")]));
    assert_eq!(
        body,
        json!({
            "model": "qwen2.5-coder-1.5b",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 256,
            "stream": false,
            "repeat_penalty": 1.1,
            "chat_template_kwargs": {"enable_thinking": false}
        })
    );
}

#[test]
fn request_mapping_table() {
    let shell_tool = ToolSpec {
        name: "shell".into(),
        description: "Run a command".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    };
    let cases: Vec<(&str, ModelProfile, ChatRequest, Value)> = vec![
        (
            "system + user, no tools, no limits",
            profile(None, None),
            ChatRequest::new(vec![
                ChatMessage::system("be brief"),
                ChatMessage::user("hi"),
            ]),
            json!({
                "model": "qwen2.5-coder-1.5b",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"}
                ],
                "stream": false
            }),
        ),
        (
            "profile limits apply",
            profile(Some(512), Some(0.5)),
            ChatRequest::new(vec![ChatMessage::user("hi")]),
            json!({
                "model": "qwen2.5-coder-1.5b",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 512,
                "temperature": 0.5,
                "stream": false
            }),
        ),
        (
            "request overrides profile limits",
            profile(Some(512), Some(0.5)),
            ChatRequest {
                seed: None,
                messages: vec![ChatMessage::user("hi")],
                tools: vec![],
                max_tokens: Some(64),
                temperature: Some(0.0),
                reply_schema: None,
            },
            json!({
                "model": "qwen2.5-coder-1.5b",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 64,
                "temperature": 0.0,
                "stream": false
            }),
        ),
        (
            "tools and a full tool round",
            profile(None, None),
            ChatRequest::new(vec![
                ChatMessage::user("list"),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall::new("call_1", "shell", json!({"command": "ls"}))],
                },
                ChatMessage::tool_result("call_1", "shell", "a.txt\n"),
            ])
            .with_tools(vec![shell_tool.clone()]),
            json!({
                "model": "qwen2.5-coder-1.5b",
                "messages": [
                    {"role": "user", "content": "list"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\n"}
                ],
                "tools": [{"type": "function", "function": {
                    "name": "shell", "description": "Run a command",
                    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}
                }}],
                "stream": false
            }),
        ),
        (
            "invalid arguments go back verbatim; empty assistant gets empty content",
            profile(None, None),
            ChatRequest::new(vec![
                ChatMessage::Assistant {
                    content: Some("trying".into()),
                    tool_calls: vec![ToolCall::new(
                        "call_fallback_0",
                        "shell",
                        Value::String("{command: ls".into()),
                    )],
                },
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![],
                },
            ]),
            json!({
                "model": "qwen2.5-coder-1.5b",
                "messages": [
                    {"role": "assistant", "content": "trying", "tool_calls": [
                        {"id": "call_fallback_0", "type": "function",
                         "function": {"name": "shell", "arguments": "{command: ls"}}
                    ]},
                    {"role": "assistant", "content": ""}
                ],
                "stream": false
            }),
        ),
    ];
    for (label, profile, req, expected) in cases {
        assert_eq!(encode(&profile, &req), expected, "case: {label}");
    }
}

#[test]
fn response_format_table() {
    let schema = json!({"type": "object", "properties": {"next": {"type": "string"}},
                        "required": ["next"], "additionalProperties": false});
    let with_schema = ChatRequest::new(vec![ChatMessage::user("hi")])
        .with_reply_schema("next_step", schema.clone());
    let without_schema = ChatRequest::new(vec![ChatMessage::user("hi")]);
    let off = profile(None, None);
    let structured = ModelProfile {
        structured_output: StructuredOutput::JsonSchema,
        ..off.clone()
    };
    let expected = json!({"type": "json_schema",
                          "json_schema": {"name": "next_step", "strict": true, "schema": schema}});
    let cases: Vec<(&str, &ModelProfile, &ChatRequest, Option<Value>)> = vec![
        (
            "json_schema + schema",
            &structured,
            &with_schema,
            Some(expected),
        ),
        ("json_schema, no schema", &structured, &without_schema, None),
        ("off + schema", &off, &with_schema, None),
        ("off, no schema", &off, &without_schema, None),
    ];
    for (label, profile, req, want) in cases {
        let body = encode(profile, req);
        assert_eq!(body.get("response_format").cloned(), want, "case: {label}");
        // Nothing else changes.
        let mut rest = body.clone();
        if let Some(map) = rest.as_object_mut() {
            map.remove("response_format");
        }
        assert_eq!(
            rest,
            encode(&profile_off(profile), &without_schema),
            "case: {label}"
        );
    }
    assert_eq!(
        with_schema.reply_schema,
        Some(ReplySchema {
            name: "next_step".into(),
            schema
        })
    );
}

fn profile_off(profile: &ModelProfile) -> ModelProfile {
    ModelProfile {
        structured_output: StructuredOutput::Off,
        ..profile.clone()
    }
}

fn completion(message: Value, finish_reason: &str, usage: Option<Value>) -> String {
    let mut body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]
    });
    if let Some(usage) = usage {
        body["usage"] = usage;
    }
    body.to_string()
}

fn usage(prompt: u64, completion: u64) -> Option<Value> {
    Some(
        json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}),
    )
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

#[test]
fn cached_prompt_tokens_table() {
    // (wire format, the body's `usage` and `timings`, input tokens, cached tokens)
    let cases: Vec<(&str, Value, Option<Value>, u64, u64)> = vec![
        (
            "openai: prompt_tokens_details.cached_tokens",
            json!({"prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920}}),
            None,
            2006,
            1920,
        ),
        (
            "deepseek: prompt_cache_hit_tokens",
            json!({"prompt_tokens": 900, "completion_tokens": 5, "prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 260}),
            None,
            900,
            640,
        ),
        (
            "llama-server: details win over timings",
            json!({"prompt_tokens": 500, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 480}}),
            Some(json!({"cache_n": 470, "prompt_n": 30})),
            500,
            480,
        ),
        (
            "llama-server without details: timings.cache_n",
            json!({"prompt_tokens": 500, "completion_tokens": 5}),
            Some(json!({"cache_n": 470, "prompt_n": 30})),
            500,
            470,
        ),
        (
            "nothing cached",
            json!({"prompt_tokens": 500, "completion_tokens": 5, "prompt_tokens_details": {"audio_tokens": 0}}),
            None,
            500,
            0,
        ),
        (
            "more cached than the prompt is clamped",
            json!({"prompt_tokens": 10, "completion_tokens": 5}),
            Some(json!({"cache_n": 99})),
            10,
            10,
        ),
    ];
    for (name, usage, timings, input, cached) in cases {
        let mut body: Value = serde_json::from_str(&completion(
            json!({"role": "assistant", "content": "ok"}),
            "stop",
            Some(usage),
        ))
        .unwrap();
        if let Some(timings) = timings {
            body["timings"] = timings;
        }
        let response = parse_response(&body.to_string(), "asked", 10).unwrap();
        assert_eq!(response.usage.input_tokens, input, "{name}");
        assert_eq!(response.usage.cached_prompt_tokens, cached, "{name}");
    }
}

#[test]
fn response_mapping_table() {
    let cases: Vec<(&str, String, ChatResponse)> = vec![
        (
            "plain content",
            completion(json!({"role": "assistant", "content": "Hello"}), "stop", usage(10, 2)),
            ChatResponse {
                content: Some("Hello".into()),
                tool_calls: vec![],
                tool_calls_from_content: false,
                finish_reason: Some("stop".into()),
                usage: Usage::tokens(10, 2),
                model: "served-model".into(),
            },
        ),
        (
            "structured tool calls: string, object, invalid, empty arguments, missing id",
            completion(
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": {"path": "x"}}},
                    {"id": "call_c", "type": "function", "function": {"name": "shell", "arguments": "{command: ls"}},
                    {"type": "function", "function": {"name": "list_dir", "arguments": ""}}
                ]}),
                "tool_calls",
                usage(100, 20),
            ),
            ChatResponse {
                content: None,
                tool_calls: vec![
                    ToolCall {
                        raw_arguments: Some(r#"{"command": "ls"}"#.into()),
                        ..call("call_a", "shell", json!({"command": "ls"}))
                    },
                    call("call_b", "read_file", json!({"path": "x"})),
                    call("call_c", "shell", Value::String("{command: ls".into())),
                    call("call_3", "list_dir", json!({})),
                ],
                tool_calls_from_content: false,
                finish_reason: Some("tool_calls".into()),
                usage: Usage::tokens(100, 20),
                model: "served-model".into(),
            },
        ),
        (
            "fenced JSON in content becomes tool calls",
            completion(
                json!({"role": "assistant", "content": "Let me look.\n```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n```"}),
                "stop",
                usage(50, 15),
            ),
            ChatResponse {
                content: Some("Let me look.\n```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n```".into()),
                tool_calls: vec![call("call_fallback_0", "list_dir", json!({"path": "."}))],
                tool_calls_from_content: true,
                finish_reason: Some("stop".into()),
                usage: Usage::tokens(50, 15),
                model: "served-model".into(),
            },
        ),
        (
            "structured calls win over content calls",
            completion(
                json!({"role": "assistant",
                       "content": "<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>",
                       "tool_calls": [{"id": "c1", "function": {"name": "finish", "arguments": "{}"}}]}),
                "tool_calls",
                usage(1, 1),
            ),
            ChatResponse {
                content: Some("<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>".into()),
                tool_calls: vec![ToolCall {
                    raw_arguments: Some("{}".into()),
                    ..call("c1", "finish", json!({}))
                }],
                tool_calls_from_content: false,
                finish_reason: Some("tool_calls".into()),
                usage: Usage::tokens(1, 1),
                model: "served-model".into(),
            },
        ),
        (
            "content parts, null tool_calls, usage estimated, model missing",
            json!({"choices": [{"message": {"role": "assistant",
                    "content": [{"type": "text", "text": "abcd"}, {"type": "text", "text": "efgh"}],
                    "tool_calls": null}}]})
            .to_string(),
            ChatResponse {
                content: Some("abcdefgh".into()),
                tool_calls: vec![],
                tool_calls_from_content: false,
                finish_reason: None,
                usage: Usage::tokens(25, 2),
                model: "requested-model".into(),
            },
        ),
    ];
    for (label, body, expected) in cases {
        let parsed = parse_response(&body, "requested-model", 100)
            .unwrap_or_else(|e| panic!("case {label}: {e}"));
        assert_eq!(parsed, expected, "case: {label}");
    }
}

#[test]
fn malformed_responses_table() {
    let cases: Vec<(&str, &str)> = vec![
        ("not JSON", "<html>502 Bad Gateway</html>"),
        ("empty body", ""),
        ("no choices", "{\"id\": \"x\"}"),
        ("empty choices", "{\"choices\": []}"),
        (
            "error object with 200",
            "{\"error\": {\"message\": \"model not loaded\"}}",
        ),
        ("choice without message", "{\"choices\": [{\"index\": 0}]}"),
        (
            "tool_calls not a list",
            "{\"choices\": [{\"message\": {\"content\": \"x\", \"tool_calls\": \"nope\"}}]}",
        ),
        ("JSON array", "[1, 2]"),
    ];
    for (label, body) in cases {
        let error = parse_response(body, "m", 10).expect_err(label);
        assert_eq!(
            error.kind(),
            ModelErrorKind::MalformedResponse,
            "case: {label}"
        );
    }
}

#[test]
fn assistant_message_strips_recovered_calls() {
    let body = completion(
        json!({"role": "assistant", "content": "Checking.\n<tool_call>{\"name\": \"list_dir\", \"arguments\": {}}</tool_call>"}),
        "stop",
        usage(1, 1),
    );
    let response = parse_response(&body, "m", 10).unwrap();
    assert_eq!(
        response.to_assistant_message(),
        ChatMessage::Assistant {
            content: Some("Checking.".into()),
            tool_calls: vec![call("call_fallback_0", "list_dir", json!({}))],
        }
    );
}

#[test]
fn tool_result_images_follow_as_a_user_turn_for_vision_profiles_only() {
    let image = ImagePart {
        media_type: "image/png".into(),
        data_base64: "iVBORw0KGgo=".into(),
    };
    let req = ChatRequest::new(vec![
        ChatMessage::user("look"),
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![
                ToolCall::new("c1", "browser_screenshot", json!({"path": "a.png"})),
                ToolCall::new("c2", "browser_snapshot", json!({})),
            ],
        },
        ChatMessage::tool_result_with_images("c1", "browser_screenshot", "saved", vec![image]),
        ChatMessage::tool_result("c2", "browser_snapshot", "- button \"Go\" [ref=e1]"),
    ]);
    let tool_turns = json!([
        {"role": "tool", "tool_call_id": "c1", "content": "saved"},
        {"role": "tool", "tool_call_id": "c2", "content": "- button \"Go\" [ref=e1]"}
    ]);
    let image_turn = json!({"role": "user", "content": [
        {"type": "text", "text": "The image from browser_screenshot (call c1):"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    ]});
    let text = profile(None, None);
    let vision = ModelProfile {
        vision: true,
        ..text.clone()
    };
    let cases: [(&str, &ModelProfile, usize, Option<&Value>); 2] = [
        ("text-only", &text, 4, None),
        ("vision", &vision, 5, Some(&image_turn)),
    ];
    for (name, profile, count, last) in cases {
        let body = encode(profile, &req);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), count, "{name}: {body}");
        assert_eq!(messages[2], tool_turns[0], "{name}");
        assert_eq!(messages[3], tool_turns[1], "{name}");
        assert_eq!(messages.get(4), last, "{name}");
    }
    // Images after the last tool result are flushed before the next non-tool turn.
    let mut later = req.clone();
    later.messages.push(ChatMessage::user("next"));
    let body = encode(&vision, &later);
    assert_eq!(body["messages"][4], image_turn);
    assert_eq!(
        body["messages"][5],
        json!({"role": "user", "content": "next"})
    );
}
