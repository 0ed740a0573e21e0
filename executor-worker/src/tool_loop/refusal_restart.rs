//! After the self-check refuses `finish`, the conversation starts again from the episode's
//! prompt. It then holds the task, a line that names the files the agent has written in this
//! episode (the workspace keeps them), and the refused turn with its `finish refused:` answer.
//! Everything between them leaves the conversation: reads, shell runs, earlier writes and
//! earlier refusals. The refused turn's own small written texts are elided as well (see
//! `refused_writes`). The refusal itself stays the answer to the agent's `finish` call. Pure.
//!
//! Every model call re-sends the whole conversation, so the turns before a refusal would be
//! paid for again on every call after it; and a retry that begins from a fresh prompt does
//! better than one that goes on after its own failed attempt.

use loopgate_models::ChatMessage;

use crate::prompt::template::{fill, text};
use crate::tool_loop::refused_writes::{elide_refused_writes, written_text_field};
use crate::tool_loop::turn_messages::append_to_last_user;

/// Paths shown in the restart note.
const PATHS_SHOWN: usize = 20;

/// The paths that `write_file` and `edit_file` calls in `messages` name, in order of first
/// write, each once, added to `into` (which keeps those of earlier restarts).
pub(crate) fn collect_written_paths(messages: &[ChatMessage], into: &mut Vec<String>) {
    for message in messages {
        let ChatMessage::Assistant { tool_calls, .. } = message else {
            continue;
        };
        for call in tool_calls {
            if written_text_field(&call.name).is_none() {
                continue;
            }
            let Some(path) = call.arguments.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let path = path.trim();
            if !path.is_empty() && !into.iter().any(|p| p == path) {
                into.push(path.to_string());
            }
        }
    }
}

/// The conversation after a refusal: `base` (the episode's prompt) with the restart note added
/// to its last user message, then the last turn of `messages` (its last assistant message and
/// all that follows it, the refusal among them). `messages` as it is when it has no assistant
/// message.
pub(crate) fn restart_after_refusal(
    base: &[ChatMessage],
    messages: &[ChatMessage],
    written: &[String],
) -> Vec<ChatMessage> {
    let Some(turn) = messages
        .iter()
        .rposition(|m| matches!(m, ChatMessage::Assistant { .. }))
    else {
        return messages.to_vec();
    };
    let mut restarted = base.to_vec();
    append_to_last_user(&mut restarted, &restart_note(written));
    let mut tail = messages[turn..].to_vec();
    elide_refused_writes(&mut tail);
    restarted.extend(tail);
    restarted
}

fn restart_note(written: &[String]) -> String {
    if written.is_empty() {
        return format!(
            "\n\n{}",
            text(include_str!("restart_note_nothing_written.md"))
        );
    }
    let mut shown: Vec<String> = written
        .iter()
        .take(PATHS_SHOWN)
        .map(|p| format!("`{p}`"))
        .collect();
    if written.len() > PATHS_SHOWN {
        shown.push(format!("and {} more", written.len() - PATHS_SHOWN));
    }
    format!(
        "\n\n{}",
        fill(
            include_str!("restart_note.md"),
            &[("paths", &shown.join(", "))]
        )
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_models::ToolCall;
    use serde_json::json;

    fn turn(calls: &[(&str, serde_json::Value)]) -> ChatMessage {
        ChatMessage::Assistant {
            content: None,
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    ToolCall::new(format!("c{i}"), (*name).to_string(), arguments.clone())
                })
                .collect(),
        }
    }

    fn base() -> Vec<ChatMessage> {
        vec![ChatMessage::system("sys"), ChatMessage::user("Goal: g")]
    }

    #[test]
    fn written_paths_are_collected_once_in_order() {
        let messages = vec![
            turn(&[
                ("write_file", json!({"path": "b.py", "content": "x"})),
                ("read_file", json!({"path": "c.py"})),
            ]),
            turn(&[
                ("edit_file", json!({"path": "a.py", "old": "x", "new": "y"})),
                ("write_file", json!({"path": " b.py ", "content": "z"})),
                ("write_file", json!({"content": "no path"})),
                ("shell", json!({"command": "echo > d.py"})),
            ]),
        ];
        let mut written = vec!["z.py".to_string()];
        collect_written_paths(&messages, &mut written);
        assert_eq!(written, ["z.py", "b.py", "a.py"]);
    }

    #[test]
    fn a_restart_keeps_the_prompt_and_the_refused_turn_only() {
        let refused_turn = turn(&[
            ("write_file", json!({"path": "a.py", "content": "print(2)"})),
            ("finish", json!({"summary": "done"})),
        ]);
        let messages = vec![
            base()[0].clone(),
            base()[1].clone(),
            turn(&[("read_file", json!({"path": "data.csv"}))]),
            ChatMessage::tool_result("c0", "read_file", "a,b\n1,2"),
            refused_turn,
            ChatMessage::tool_result("c0", "write_file", "wrote a.py"),
            ChatMessage::tool_result("c1", "finish", "finish refused: 1 blocking check(s)"),
        ];
        let restarted = restart_after_refusal(&base(), &messages, &["a.py".to_string()]);
        assert_eq!(restarted.len(), 5, "{restarted:?}");
        assert_eq!(restarted[0], base()[0]);
        let ChatMessage::User { content } = &restarted[1] else {
            panic!("the task first")
        };
        assert!(content.starts_with("Goal: g\n\nYou have already tried this step"));
        assert!(content.contains("what you wrote: `a.py`."), "{content}");
        let text = format!("{restarted:?}");
        assert!(!text.contains("data.csv"), "{text}");
        assert!(
            !text.contains("print(2)"),
            "the refused text is elided: {text}"
        );
        assert_eq!(restarted[4], messages[6]);
    }

    #[test]
    fn a_plain_reply_or_step_cap_refusal_keeps_its_user_message() {
        let messages = vec![
            base()[0].clone(),
            base()[1].clone(),
            turn(&[("write_file", json!({"path": "a.py", "content": "x"}))]),
            ChatMessage::tool_result("c0", "write_file", "wrote a.py"),
            ChatMessage::assistant_text("all done"),
            ChatMessage::user("finish refused: 1 blocking check(s)"),
        ];
        let restarted = restart_after_refusal(&base(), &messages, &[]);
        assert_eq!(restarted.len(), 4);
        assert_eq!(&restarted[2..], &messages[4..]);
        let ChatMessage::User { content } = &restarted[1] else {
            panic!("the task first")
        };
        assert!(content.contains("without writing a file"), "{content}");
    }

    #[test]
    fn without_an_assistant_turn_nothing_changes() {
        let messages = base();
        assert_eq!(restart_after_refusal(&base(), &messages, &[]), messages);
    }

    #[test]
    fn many_written_paths_are_cut_short() {
        let written: Vec<String> = (0..25).map(|i| format!("f{i}.py")).collect();
        let note = restart_note(&written);
        assert!(note.contains("`f19.py`, and 5 more."), "{note}");
        assert!(!note.contains("f20.py"));
    }
}
