//! Across the turns of an episode, each request's messages begin with the whole previous
//! request's, and the model's tool calls go back with the arguments text it wrote: the prompt
//! prefix a server cached stays byte-identical.

use super::*;

/// A reply with one call whose arguments the model wrote as `raw` (non-canonical JSON).
fn raw_call_reply(id: &str, name: &str, raw: &str) -> ChatResponse {
    let mut call = ToolCall::new(id, name, serde_json::from_str(raw).unwrap());
    call.raw_arguments = Some(raw.to_string());
    ChatResponse {
        tool_calls: vec![call],
        ..reply(None, vec![])
    }
}

#[tokio::test]
async fn each_request_extends_the_last_and_keeps_the_models_arguments_text() {
    let writes = [
        r#"{"path":  "a.txt", "content": "A"}"#,
        r#"{ "content": "B", "path": "b.txt" }"#,
    ];
    let model = ScriptedModel::new(
        vec![
            Ok(raw_call_reply("c1", "write_file", writes[0])),
            Ok(raw_call_reply("c2", "write_file", writes[1])),
        ],
        raw_call_reply("c3", "finish", r#"{"summary": "wrote a and b"}"#),
    );
    let (_dir, tools) = scratch_tools();
    let report = run_tool_loop(&model, &tools, prompt(), limits(10)).await;
    assert!(matches!(report.end, LoopEnd::Finished { .. }), "{report:?}");
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for pair in seen.windows(2) {
        let (before, after) = (&pair[0].messages, &pair[1].messages);
        assert!(after.len() > before.len());
        assert_eq!(&after[..before.len()], &before[..]);
    }
    let sent: Vec<String> = seen[2]
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .map(|call| call.arguments_text().into_owned())
        .collect();
    assert_eq!(sent, writes);
}
