//! A reply cut off inside a tool call (`ModelErrorKind::CutToolCall`): the server could not
//! parse the call the model wrote, so nothing ran and no reply came back. The same request
//! would sample the same runaway output, so the client does not retry it; the loop tells the
//! model instead, asks again at a wider temperature (see `LoopState::request`), and ends the
//! episode only when it happens more than [`MAX_CUT_CALLS`] times. Such a reply is most often
//! a model repeating the same lines until its output limit cuts the call. Pure.

use loopgate_models::ChatMessage;

use crate::prompt::template::text;

/// Cut-off calls an episode answers with [`CUT_CALL_NOTE`]; the next one ends the episode.
pub(crate) const MAX_CUT_CALLS: u32 = 2;

/// What the model is told after a reply that was cut inside a tool call.
pub(crate) const CUT_CALL_NOTE: &str = text(include_str!("cut_call_note.md"));

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
