//! What a context reset does to the conversation: compacting old tool output, asking the agent
//! for its `progress.md` handoff, writing one for it when it cannot, and the first message of
//! the fresh agent that continues from the handoff. Pure.

use loopgate_models::ChatMessage;

use crate::prompt::template::{fill, text};
use crate::tool_loop::turn_messages::append_to_last_user;

/// The handoff file, in the workspace root. Removed again before the workspace is frozen
/// (restored when the base snapshot had one).
pub(crate) const HANDOFF_FILE: &str = "progress.md";
/// Longest handoff passed to the fresh agent.
pub(crate) const MAX_HANDOFF_CHARS: usize = 8000;
/// Tool results kept whole when compacting.
pub(crate) const KEEP_RECENT_TOOL_RESULTS: usize = 2;
/// Characters of an elided tool result kept as a reminder.
const ELIDED_PREFIX_CHARS: usize = 200;
const ELIDED_MARKER: &str = "[older output elided to save context";

/// What the agent is asked when its context is nearly full: its handoff in [`HANDOFF_FILE`].
pub(crate) fn handoff_request() -> String {
    fill(
        include_str!("handoff_request.md"),
        &[("file", HANDOFF_FILE)],
    )
}

/// Replaces the content of all but the last `keep` tool results with a short prefix and a
/// marker. Returns how many were elided now (0: nothing left to compact).
pub(crate) fn compact_tool_results(messages: &mut [ChatMessage], keep: usize) -> usize {
    let tool_positions: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, ChatMessage::Tool { .. }))
        .map(|(i, _)| i)
        .collect();
    let old = tool_positions.len().saturating_sub(keep);
    let mut elided = 0;
    for &i in &tool_positions[..old] {
        if let ChatMessage::Tool { content, .. } = &mut messages[i] {
            if content.contains(ELIDED_MARKER) || content.chars().count() <= ELIDED_PREFIX_CHARS {
                continue;
            }
            let total = content.chars().count();
            let prefix: String = content.chars().take(ELIDED_PREFIX_CHARS).collect();
            *content = format!(
                "{prefix}\n{ELIDED_MARKER}: {} more chars]",
                total - ELIDED_PREFIX_CHARS
            );
            elided += 1;
        }
    }
    elided
}

/// A handoff written by the harness when the agent could not write one (the model refused or
/// the prompt no longer fit): the tool calls made so far and the agent's last words.
pub(crate) fn mechanical_handoff(messages: &[ChatMessage]) -> String {
    let mut actions = Vec::new();
    let mut last_text = None;
    for message in messages {
        if let ChatMessage::Assistant {
            content,
            tool_calls,
        } = message
        {
            if let Some(text) = content.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                last_text = Some(text.to_string());
            }
            for call in tool_calls {
                let target = ["path", "command", "file_path", "cmd"]
                    .iter()
                    .find_map(|key| call.arguments.get(*key).and_then(|v| v.as_str()))
                    .map(|t| t.chars().take(120).collect::<String>())
                    .unwrap_or_default();
                actions.push(format!("- {} {}", call.name, target).trim_end().to_string());
            }
        }
    }
    let mut text = format!("{}\n", text(include_str!("mechanical_handoff.md")));
    let shown = actions.len().min(40);
    text.push_str(&actions[actions.len() - shown..].join("\n"));
    if actions.len() > shown {
        text.push_str(&format!("\n(and {} earlier calls)", actions.len() - shown));
    }
    if let Some(last) = last_text {
        let last: String = last.chars().take(1000).collect();
        text.push_str(&format!("\n## In progress\nIts last words: {last}\n"));
    }
    text.push_str("\n## Next steps\nInspect the workspace, then finish the step.\n");
    text
}

/// The fresh agent's conversation: the original prompt with the handoff appended to its last
/// user message.
pub(crate) fn fresh_prompt(
    task: &[ChatMessage],
    handoff: &str,
    reset_number: u32,
) -> Vec<ChatMessage> {
    let mut messages = task.to_vec();
    let handoff: String = handoff.trim().chars().take(MAX_HANDOFF_CHARS).collect();
    let note = format!(
        "\n\n{}",
        fill(
            include_str!("context_reset_note.md"),
            &[
                ("reset", &reset_number.to_string()),
                ("file", HANDOFF_FILE),
                ("handoff", &handoff),
            ],
        )
    );
    append_to_last_user(&mut messages, &note);
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopgate_models::ToolCall;
    use serde_json::json;

    fn assistant(text: Option<&str>, calls: Vec<(&str, serde_json::Value)>) -> ChatMessage {
        ChatMessage::Assistant {
            content: text.map(str::to_string),
            tool_calls: calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall::new(format!("c{i}"), name, arguments))
                .collect(),
        }
    }

    #[test]
    fn compaction_keeps_recent_results_and_is_idempotent() {
        let long = "x".repeat(1000);
        let mut messages = vec![
            ChatMessage::system("s"),
            ChatMessage::user("u"),
            ChatMessage::tool_result("c1", "shell", long.clone()),
            ChatMessage::tool_result("c2", "shell", "short"),
            ChatMessage::tool_result("c3", "read_file", long.clone()),
            ChatMessage::tool_result("c4", "read_file", long.clone()),
            ChatMessage::tool_result("c5", "read_file", long.clone()),
        ];
        assert_eq!(compact_tool_results(&mut messages, 2), 2);
        let contents: Vec<usize> = messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content.len()),
                _ => None,
            })
            .collect();
        assert!(contents[0] < 300 && contents[2] < 300, "{contents:?}");
        assert_eq!(contents[1], 5);
        assert_eq!(&contents[3..], &[1000, 1000]);
        assert_eq!(compact_tool_results(&mut messages, 2), 0);
    }

    #[test]
    fn mechanical_handoff_lists_calls_and_last_words() {
        let messages = vec![
            ChatMessage::user("task"),
            assistant(
                None,
                vec![("write_file", json!({"path": "a.py", "content": "x"}))],
            ),
            assistant(
                Some("running tests"),
                vec![("shell", json!({"command": "pytest -q"}))],
            ),
            assistant(None, vec![("list_dir", json!({}))]),
        ];
        let text = mechanical_handoff(&messages);
        assert!(text.contains("- write_file a.py"), "{text}");
        assert!(text.contains("- shell pytest -q"), "{text}");
        assert!(text.contains("- list_dir\n"), "{text}");
        assert!(text.contains("Its last words: running tests"), "{text}");
        assert!(text.contains("## Next steps"));
    }

    #[test]
    fn fresh_prompt_appends_the_handoff_to_the_task() {
        let task = vec![ChatMessage::system("sys"), ChatMessage::user("Goal: x")];
        let fresh = fresh_prompt(&task, &"n".repeat(MAX_HANDOFF_CHARS + 50), 2);
        assert_eq!(fresh.len(), 2);
        assert_eq!(fresh[0], task[0]);
        let ChatMessage::User { content } = &fresh[1] else {
            panic!("user message expected")
        };
        assert!(content.starts_with("Goal: x\n\nContext reset 2:"));
        assert!(content.matches('n').count() >= MAX_HANDOFF_CHARS);
        assert!(!content.contains(&"n".repeat(MAX_HANDOFF_CHARS + 1)));
        let no_user = fresh_prompt(&[ChatMessage::system("s")], "notes", 1);
        assert_eq!(no_user.len(), 2);
    }
}
