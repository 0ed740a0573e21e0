//! The messages of turn N's request body are a byte prefix of turn N+1's: the assistant turns
//! go back with the arguments text the model wrote, so a server's prompt cache (llama-server's
//! `cache_prompt`, OpenAI's prefix cache) reuses everything before the new messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::profile_config::{Provider, StructuredOutput};

fn profile() -> ModelProfile {
    ModelProfile {
        name: "executor".into(),
        provider: Provider::OpenAi,
        base_url: "http://127.0.0.1:8080/v1".into(),
        model: "m".into(),
        api_key: None,
        timeout: Duration::from_secs(5),
        max_tokens: None,
        temperature: Some(0.2),
        context_window: None,
        stream: false,
        price: None,
        structured_output: StructuredOutput::Off,
        vision: false,
        extra_body: serde_json::Map::new(),
    }
}

/// The request's `messages` array as sent.
fn messages_json(messages: &[ChatMessage]) -> String {
    let body = serde_json::to_string(&wire_request(
        &profile(),
        &ChatRequest::new(messages.to_vec()),
    ))
    .unwrap();
    let start = body.find("\"messages\":").unwrap() + "\"messages\":".len();
    let value: Value = serde_json::from_str(&body).unwrap();
    let len = serde_json::to_string(&value["messages"]).unwrap().len();
    body[start..start + len].to_string()
}

/// A chat completion whose one tool call's arguments are `arguments`, verbatim.
fn completion_with_call(id: &str, arguments: &str) -> String {
    json!({
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "write_file", "arguments": arguments}}]
        }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })
    .to_string()
}

#[test]
fn each_turns_messages_are_a_byte_prefix_of_the_next() {
    // (arguments as the model wrote them, whether they go back verbatim)
    let cases = [
        (r#"{"path":  "b.py", "content": "print(1)\n"}"#, true),
        (r#"{ "content" : "x", "path" : "a" }"#, true),
        (r#"{"z": {"y": [1, 2], "x": null}, "a": 1.50}"#, true),
        (r#"{"path": "a",}"#, false), // read leniently: goes back re-serialized
        ("{path: a", true),           // not JSON: verbatim as ever
    ];
    for (arguments, verbatim) in cases {
        let mut messages = vec![
            ChatMessage::system("You write files."),
            ChatMessage::user("write a.py"),
        ];
        let mut sent = vec![messages_json(&messages)];
        for turn in 0..3 {
            let id = format!("call_{turn}");
            let response = parse_response(&completion_with_call(&id, arguments), "m", 1).unwrap();
            messages.push(response.to_assistant_message());
            messages.push(ChatMessage::tool_result(&id, "write_file", "wrote 9 bytes"));
            sent.push(messages_json(&messages));
        }
        for pair in sent.windows(2) {
            let before = pair[0].strip_suffix(']').unwrap();
            assert!(
                pair[1].starts_with(before),
                "{arguments}: turn bodies diverge:\n{}\n{}",
                pair[0],
                pair[1]
            );
        }
        let last = sent.last().unwrap();
        let escaped = serde_json::to_string(arguments).unwrap();
        assert_eq!(last.contains(&escaped), verbatim, "{arguments}: {last}");
    }
}

#[test]
fn changed_arguments_go_back_serialized_not_as_the_stale_text() {
    let response = parse_response(&completion_with_call("c", r#"{"path": "a"}"#), "m", 1).unwrap();
    let mut call = response.tool_calls[0].clone();
    assert_eq!(call.arguments_text(), r#"{"path": "a"}"#);
    call.arguments["path"] = json!("b");
    assert_eq!(call.arguments_text(), r#"{"path":"b"}"#);
}
