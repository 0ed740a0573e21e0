//! What the loop does when the model answers without a tool call, and the guard against a
//! `write_file` whose content is the text of an earlier tool result. Pure: the loop carries
//! the effect out.
//!
//! Small models end episodes early in two ways the harness can see: they write a tool call as
//! plain text (`{"name": "Create hello.py", ...}`), which calls nothing, or they answer in
//! prose before touching the workspace. Either way the episode would freeze an unchanged
//! workspace and cost a whole round. The loop answers the first such reply of an episode with
//! [`no_tool_nudge`] instead; a plain reply after tools ran is treated like `finish` (the
//! self-check runs and may refuse it).

use loopgate_models::{ChatMessage, ToolCall};

use crate::prompt::template::fill;
use crate::tools::tool::Tool;
use crate::tools::tool_def::ToolEffect;

/// Plain replies before any tool call that get a nudge instead of ending the episode.
pub(crate) const MAX_NO_TOOL_NUDGES: u32 = 1;
/// Shortest earlier tool result that counts as echoed (shorter texts can be real content).
const MIN_ECHO_CHARS: usize = 12;

/// What the nudge says of a reply that looks like a tool call written as text.
const WRITTEN_CALL_NOTE: &str =
    "It looks like a tool call written as plain text: that does not run anything. ";

/// The user message that answers a plain reply made before any tool ran; `looks_like_call`:
/// the reply looks like a tool call written as text.
pub(crate) fn no_tool_nudge(looks_like_call: bool, tool_names: &[&str]) -> String {
    let written_call = if looks_like_call {
        WRITTEN_CALL_NOTE
    } else {
        ""
    };
    fill(
        include_str!("no_tool_nudge.md"),
        &[
            ("written_call", written_call),
            ("tools", &tool_names.join(", ")),
        ],
    )
}

/// When `call` writes a whole file (`write_file`) with the text of an earlier tool result of
/// this conversation (a small model copying `wrote 26 bytes to hello.py` into the file), the
/// error the call gets instead of running.
pub(crate) fn echoed_tool_result(messages: &[ChatMessage], call: &ToolCall) -> Option<String> {
    let Some(ToolEffect::WritesFile { text }) = Tool::effect_of(&call.name) else {
        return None;
    };
    let content = call.arguments.get(text)?.as_str()?.trim();
    if content.chars().count() < MIN_ECHO_CHARS {
        return None;
    }
    let echoed = messages.iter().rev().find_map(|message| match message {
        ChatMessage::Tool {
            content: result, ..
        } if result.trim() == content => Some(result),
        _ => None,
    })?;
    let shown: String = echoed.trim().chars().take(120).collect();
    Some(fill(
        include_str!("echoed_result.md"),
        &[("tool", &call.name), ("shown", &shown)],
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn write(content: &str) -> ToolCall {
        ToolCall::new(
            "c",
            "write_file",
            json!({"path": "hello.py", "content": content}),
        )
    }

    #[test]
    fn echo_guard_table() {
        let history = vec![
            ChatMessage::user("write hello.py"),
            ChatMessage::tool_result("c1", "write_file", "wrote 26 bytes to hello.py"),
        ];
        // (call, refused)
        let cases: Vec<(ToolCall, bool)> = vec![
            (write("wrote 26 bytes to hello.py"), true),
            (write("  wrote 26 bytes to hello.py\n"), true),
            (write("print('hello, loopgate')\n"), false),
            (write("short"), false),
            (
                ToolCall::new(
                    "c",
                    "shell",
                    json!({"command": "wrote 26 bytes to hello.py"}),
                ),
                false,
            ),
            (
                ToolCall::new("c", "write_file", json!({"path": "x"})),
                false,
            ),
        ];
        for (call, refused) in cases {
            let got = echoed_tool_result(&history, &call);
            assert_eq!(got.is_some(), refused, "{call:?}: {got:?}");
            if let Some(text) = got {
                assert!(text.starts_with("error: write_file refused"), "{text}");
            }
        }
        // A user message with the same text is not a tool result.
        let only_user = vec![ChatMessage::user("wrote 26 bytes to hello.py")];
        assert!(echoed_tool_result(&only_user, &write("wrote 26 bytes to hello.py")).is_none());
    }

    #[test]
    fn nudge_names_the_tools_and_spots_calls_written_as_text() {
        use loopgate_models::tool_call_recovery::looks_like_written_call;
        let names = ["write_file", "finish"];
        let cases = [
            (
                r#"{"name": "Create hello.py", "arguments": {"path": "."}}"#,
                true,
            ),
            ("I will create hello.py now.", false),
        ];
        for (reply, as_text) in cases {
            let nudge = no_tool_nudge(looks_like_written_call(reply), &names);
            assert!(nudge.contains("write_file, finish"), "{nudge}");
            assert_eq!(nudge.contains("written as plain text"), as_text, "{nudge}");
        }
    }
}
