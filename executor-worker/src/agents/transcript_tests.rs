#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn read(kind: AgentKind, lines: &[Value]) -> AgentReport {
    let mut reader = TranscriptReader::new(kind);
    for line in lines {
        reader.line(&line.to_string());
    }
    reader.line("not json at all");
    reader.line("");
    reader.finish()
}

#[test]
fn claude_stream_json() {
    let success = read(
        AgentKind::ClaudeCode,
        &[
            json!({"type": "system", "subtype": "init", "session_id": "s", "tools": ["Bash"]}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Writing it."}, {"type": "tool_use", "id": "t", "name": "Write", "input": {}}]}}),
            json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Done: wrote hello.py"}]}}),
            json!({"type": "result", "subtype": "success", "is_error": false, "result": "Done: wrote hello.py",
                   "num_turns": 3, "total_cost_usd": 0.0123,
                   "usage": {"input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": 40}}),
        ],
    );
    assert_eq!(
        success.final_message.as_deref(),
        Some("Done: wrote hello.py")
    );
    assert_eq!(success.success, Some(true));
    assert_eq!(success.error, None);
    assert_eq!(
        success.usage,
        Some(Usage {
            input_tokens: 150,
            output_tokens: 40,
            cost_micros: 12_300,
            cached_prompt_tokens: 50,
        })
    );
    assert_eq!((success.turns, success.tool_calls), (3, 1));
    assert_eq!((success.events, success.other_lines), (5, 1));

    let failure = read(
        AgentKind::ClaudeCode,
        &[
            json!({"type": "result", "subtype": "error_max_turns", "is_error": true, "num_turns": 9}),
        ],
    );
    assert_eq!(failure.success, Some(false));
    assert_eq!(failure.error.as_deref(), Some("error_max_turns"));
    assert_eq!(failure.usage, None);
}

#[test]
fn codex_exec_json() {
    let success = read(
        AgentKind::Codex,
        &[
            json!({"type": "thread.started", "thread_id": "th"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "think"}}),
            json!({"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "command": "ls", "status": "completed"}}),
            json!({"type": "item.completed", "item": {"id": "i2", "item_type": "file_change", "changes": []}}),
            json!({"type": "item.completed", "item": {"id": "i3", "type": "agent_message", "text": "Created hello.py"}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 70}}),
        ],
    );
    assert_eq!(success.final_message.as_deref(), Some("Created hello.py"));
    assert_eq!(success.success, Some(true));
    assert_eq!(success.usage, Some(Usage::tokens(900, 70).with_cached(100)));
    assert_eq!((success.turns, success.tool_calls), (1, 2));

    let failure = read(
        AgentKind::Codex,
        &[
            json!({"type": "turn.started"}),
            json!({"type": "error", "message": "stream disconnected before completion"}),
            json!({"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}}),
        ],
    );
    assert_eq!(failure.success, Some(false));
    assert_eq!(
        failure.error.as_deref(),
        Some("unexpected status 401 Unauthorized")
    );
    assert_eq!(
        failure.warning.as_deref(),
        Some("stream disconnected before completion")
    );

    // Codex reports warnings as `error` items; they do not make a run a failure.
    let warned = read(
        AgentKind::Codex,
        &[
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "Model metadata for `m` not found."}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        ],
    );
    assert_eq!((warned.success, warned.error), (Some(true), None));
    assert_eq!(
        warned.warning.as_deref(),
        Some("Model metadata for `m` not found.")
    );

    let legacy = read(
        AgentKind::Codex,
        &[
            json!({"id": "0", "msg": {"type": "exec_command_begin", "command": ["ls"]}}),
            json!({"id": "0", "msg": {"type": "agent_message", "message": "partial"}}),
            json!({"id": "0", "msg": {"type": "task_complete", "last_agent_message": "All done"}}),
        ],
    );
    assert_eq!(legacy.final_message.as_deref(), Some("All done"));
    assert_eq!((legacy.turns, legacy.tool_calls), (1, 1));
}

#[test]
fn opencode_run_json() {
    let success = read(
        AgentKind::OpenCode,
        &[
            json!({"type": "step_start", "sessionID": "s", "part": {"type": "step-start"}}),
            json!({"type": "tool_use", "part": {"type": "tool", "tool": "write", "callID": "c", "state": {"status": "completed"}}}),
            json!({"type": "step_finish", "part": {"type": "step-finish", "reason": "tool-calls", "cost": 0.001,
                   "tokens": {"input": 500, "output": 20, "reasoning": 5, "cache": {"read": 100, "write": 0}}}}),
            json!({"type": "step_start", "part": {"type": "step-start"}}),
            json!({"type": "text", "part": {"type": "text", "text": "Wrote hello.py."}}),
            json!({"type": "step_finish", "part": {"type": "step-finish", "reason": "stop", "cost": 0.002,
                   "tokens": {"input": 700, "output": 10}}}),
        ],
    );
    assert_eq!(success.final_message.as_deref(), Some("Wrote hello.py."));
    assert_eq!(success.success, Some(true));
    assert_eq!(
        success.usage,
        Some(Usage {
            input_tokens: 1300,
            output_tokens: 35,
            cost_micros: 3000,
            cached_prompt_tokens: 100,
        })
    );
    assert_eq!((success.turns, success.tool_calls), (2, 1));

    let failure = read(
        AgentKind::OpenCode,
        &[
            json!({"type": "error", "error": {"name": "ProviderAuthError", "data": {"message": "invalid key"}}}),
        ],
    );
    assert_eq!(failure.success, Some(false));
    assert_eq!(failure.error.as_deref(), Some("invalid key"));
}
