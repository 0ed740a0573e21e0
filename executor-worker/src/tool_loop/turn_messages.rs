//! Small, pure edits of one turn's messages: call ids for calls that came without one, the
//! screenshots a vision model keeps, the note a reset or a restart adds to the task, and the
//! summary taken from the model's own words.

use loopgate_models::tool_call_recovery::strip_tool_calls;
use loopgate_models::{ChatMessage, ToolCall};

/// Longest summary kept from the model's own words.
pub(crate) const MAX_SUMMARY_CHARS: usize = 2000;

/// Screenshots a vision model is sent at most (each resent with every request): older tool
/// results keep their text only.
pub(crate) const MAX_IMAGES_KEPT: usize = 2;

/// Drops the images of all but the `keep` most recent tool results that have some.
pub(crate) fn keep_recent_images(messages: &mut [ChatMessage], keep: usize) {
    let mut seen = 0;
    for message in messages.iter_mut().rev() {
        if let ChatMessage::Tool { images, .. } = message {
            if images.is_empty() {
                continue;
            }
            seen += 1;
            if seen > keep {
                images.clear();
            }
        }
    }
}

/// Adds `note` to the last user message of `messages` (a user message of its own when there is
/// none): the task a context reset or a restart after a refusal continues from.
pub(crate) fn append_to_last_user(messages: &mut Vec<ChatMessage>, note: &str) {
    match messages
        .iter_mut()
        .rev()
        .find(|m| matches!(m, ChatMessage::User { .. }))
    {
        Some(ChatMessage::User { content }) => content.push_str(note),
        _ => messages.push(ChatMessage::user(note.trim_start())),
    }
}

/// Tool results must answer a call id; calls recovered from a reply's text may come without
/// one. `seen`: the calls of the episode before these.
pub(crate) fn give_call_ids(calls: &mut [ToolCall], seen: u32) {
    for (i, call) in calls.iter_mut().enumerate() {
        if call.id.trim().is_empty() {
            call.id = format!("call_{}", seen as usize + i + 1);
        }
    }
}

/// The model's text as a summary: tool-call blocks removed, trimmed, bounded.
pub(crate) fn summary_from_text(text: &str) -> String {
    bounded_summary(&strip_tool_calls(text))
}

/// A text without tool calls as a summary: trimmed, bounded.
pub(crate) fn bounded_summary(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let mut summary: String = text.chars().take(MAX_SUMMARY_CHARS).collect();
    if text.chars().count() > MAX_SUMMARY_CHARS {
        summary.push('…');
    }
    summary
}
