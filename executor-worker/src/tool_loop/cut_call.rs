//! A reply cut off inside a tool call (`ModelErrorKind::CutToolCall`): the server could not
//! parse the call the model wrote, so nothing ran and no reply came back. The same request
//! would sample the same runaway output, so the client does not retry it; the loop tells the
//! model instead, asks again at a wider temperature (see `LoopState::request`), and ends the
//! episode only when it happens more than [`MAX_CUT_CALLS`] times.
//!
//! Why: in the suite's sitting n the 1.5B repeated one `def main()` until its 2048-token
//! output limit cut the `write_file` call; llama.cpp's server answered HTTP 500 "Failed to parse
//! tool call arguments as JSON", the client retried that three times (four runaway
//! generations, most of the run's 340 s) and then the episode ended. Pure.

use loopgate_models::ChatMessage;

/// Cut-off calls an episode answers with [`CUT_CALL_NOTE`]; the next one ends the episode.
pub(crate) const MAX_CUT_CALLS: u32 = 2;

/// What the model is told after a reply that was cut inside a tool call.
pub(crate) const CUT_CALL_NOTE: &str = "Your last reply was cut off inside a tool call, so its \
arguments could not be read and nothing ran (most often the reply repeated the same lines until \
the output limit). Call the tool again with complete, short arguments: write each file's whole \
content once, without repeating lines.";

/// Adds [`CUT_CALL_NOTE`] for the next turn: to the last message when it is the user's (no
/// two user messages in a row), as a user message of its own after a tool result.
pub(crate) fn ask_again_after_cut_call(messages: &mut Vec<ChatMessage>) {
    match messages.last_mut() {
        Some(ChatMessage::User { content }) => {
            content.push_str("\n\n");
            content.push_str(CUT_CALL_NOTE);
        }
        _ => messages.push(ChatMessage::user(CUT_CALL_NOTE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(messages: &[ChatMessage]) -> Vec<&'static str> {
        messages
            .iter()
            .map(|m| match m {
                ChatMessage::System { .. } => "system",
                ChatMessage::User { .. } => "user",
                ChatMessage::Assistant { .. } => "assistant",
                ChatMessage::Tool { .. } => "tool",
            })
            .collect()
    }

    #[test]
    fn the_note_joins_a_user_message_or_follows_a_tool_result() {
        // (messages before, roles after, the last message is the note alone)
        let cases = vec![
            (
                vec![ChatMessage::system("s"), ChatMessage::user("task")],
                vec!["system", "user"],
                false,
            ),
            (
                vec![
                    ChatMessage::system("s"),
                    ChatMessage::user("task"),
                    ChatMessage::assistant_text("ok"),
                    ChatMessage::tool_result("c1", "list_dir", "a.txt"),
                ],
                vec!["system", "user", "assistant", "tool", "user"],
                true,
            ),
            (Vec::new(), vec!["user"], true),
        ];
        for (mut messages, want, alone) in cases {
            ask_again_after_cut_call(&mut messages);
            assert_eq!(roles(&messages), want);
            match messages.last() {
                Some(ChatMessage::User { content }) => {
                    assert!(content.ends_with(CUT_CALL_NOTE), "{content}");
                    assert_eq!(content == CUT_CALL_NOTE, alone, "{content}");
                }
                other => panic!("last message {other:?}"),
            }
        }
    }
}
