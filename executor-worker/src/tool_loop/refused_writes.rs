//! After the self-check refuses `finish`, the text that the refused attempt wrote leaves the
//! conversation. The restart after a refusal (`refusal_restart`) drops the turns before the
//! refused one; in that turn, each `write_file` content and each `edit_file` replacement text of
//! at most [`ELIDE_MAX_BYTES`] is replaced by a marker with its size. The file stays in the
//! workspace, so `read_file` still shows it. Pure.
//!
//! A small model shown its own refused write tends to send it again; one that cannot copy the
//! failed text writes a different one (as a retry's prompt withholds the file its failed round
//! added; see `prompt::previews::withheld_previews`). A bigger write keeps its text, because
//! rewriting a big file whole would cost more than an edit of it. A write whose content is the
//! marker is refused ([`marker_write`]). Which tools write text, and in which argument, comes
//! from the tools' definitions (`ToolEffect::written_text`).

use loopgate_models::{ChatMessage, ToolCall};
use serde_json::Value;

use crate::prompt::template::fill;
use crate::tools::tool::Tool;
use crate::tools::tool_def::ToolEffect;

/// Texts of at most this many bytes are elided (the size of a previewed file).
pub(crate) const ELIDE_MAX_BYTES: usize = 3 * 1024;
const MARKER: &str = "[loopgate: this text was removed after the self-check refused it";

/// The argument of tool `name` that holds the text it writes into a file (see
/// `ToolEffect::written_text`).
pub(crate) fn written_text_field(name: &str) -> Option<&'static str> {
    Tool::effect_of(name).and_then(ToolEffect::written_text)
}

/// Replaces the refused attempt's small written texts in `messages` with the marker. Returns
/// how many it replaced now (0 when there were none, or all were replaced before).
pub(crate) fn elide_refused_writes(messages: &mut [ChatMessage]) -> usize {
    let mut elided = 0;
    for message in messages.iter_mut() {
        let ChatMessage::Assistant { tool_calls, .. } = message else {
            continue;
        };
        for call in tool_calls.iter_mut() {
            let Some(field) = written_text_field(&call.name) else {
                continue;
            };
            let Some(Value::String(text)) = call.arguments.get_mut(field) else {
                continue;
            };
            if text.len() > ELIDE_MAX_BYTES || text.starts_with(MARKER) {
                continue;
            }
            *text = format!(
                "{MARKER} ({} bytes); write the file anew instead of repeating it]",
                text.len()
            );
            call.raw_arguments = None;
            elided += 1;
        }
    }
    elided
}

/// A write whose text is the marker (a small model copying its own history): the tool result
/// that refuses it.
pub(crate) fn marker_write(call: &ToolCall) -> Option<String> {
    let field = written_text_field(&call.name)?;
    let text = call.arguments.get(field)?.as_str()?;
    text.contains(MARKER).then(|| {
        fill(
            include_str!("marker_write.md"),
            &[("tool", &call.name), ("field", field)],
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall::new("c", name, arguments)
    }

    fn assistant(calls: Vec<ToolCall>) -> ChatMessage {
        ChatMessage::Assistant {
            content: None,
            tool_calls: calls,
        }
    }

    fn argument(message: &ChatMessage, index: usize, field: &str) -> String {
        match message {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls[index].arguments[field]
                .as_str()
                .unwrap()
                .to_string(),
            _ => panic!("not an assistant message"),
        }
    }

    #[test]
    fn refused_small_writes_leave_the_conversation_and_big_ones_stay() {
        let big = "x".repeat(ELIDE_MAX_BYTES + 1);
        let mut messages = vec![
            ChatMessage::user("write to_json.py"),
            assistant(vec![
                call(
                    "write_file",
                    json!({"path": "to_json.py", "content": "import json\n"}),
                ),
                call("write_file", json!({"path": "big.py", "content": big})),
                call(
                    "edit_file",
                    json!({"path": "a.py", "old": "x = 1", "new": "x = 2"}),
                ),
                call("read_file", json!({"path": "a.py"})),
                call("finish", json!({"summary": "done"})),
            ]),
            ChatMessage::tool_result("c", "write_file", "wrote 12 bytes to to_json.py"),
        ];
        assert_eq!(elide_refused_writes(&mut messages), 2);
        let written = argument(&messages[1], 0, "content");
        assert!(written.starts_with(MARKER), "{written}");
        assert!(written.contains("(12 bytes)"), "{written}");
        assert_eq!(argument(&messages[1], 1, "content"), big);
        assert_eq!(argument(&messages[1], 2, "old"), "x = 1");
        assert!(argument(&messages[1], 2, "new").starts_with(MARKER));
        assert_eq!(argument(&messages[1], 3, "path"), "a.py");
        // The tool results and the user's words are left alone; a second pass changes nothing.
        assert_eq!(
            messages[2],
            ChatMessage::tool_result("c", "write_file", "wrote 12 bytes to to_json.py")
        );
        assert_eq!(elide_refused_writes(&mut messages), 0);
    }

    #[test]
    fn a_write_of_the_marker_is_refused() {
        let mut messages = vec![assistant(vec![call(
            "write_file",
            json!({"path": "a.py", "content": "print(1)\n"}),
        )])];
        elide_refused_writes(&mut messages);
        let marker = argument(&messages[0], 0, "content");
        // (call, refused)
        let cases = [
            (
                call("write_file", json!({"path": "a.py", "content": marker})),
                true,
            ),
            (
                call(
                    "edit_file",
                    json!({"path": "a.py", "old": "1", "new": marker}),
                ),
                true,
            ),
            (
                call(
                    "write_file",
                    json!({"path": "a.py", "content": "print(2)\n"}),
                ),
                false,
            ),
            (call("read_file", json!({"path": "a.py"})), false),
        ];
        for (call, refused) in cases {
            assert_eq!(marker_write(&call).is_some(), refused, "{call:?}");
        }
    }
}
