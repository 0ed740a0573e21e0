//! Small, pure edits of one turn's messages: call ids for calls that came without one, the
//! screenshots a vision model keeps, the summary taken from the model's own words, and the
//! calls a reply wrote as a tool's name and its arguments.

use loopgate_models::tool_call_recovery::calls_after_tool_names;
use loopgate_models::tool_call_recovery::strip_tool_calls;
use loopgate_models::{ChatMessage, ChatResponse, ToolCall, ToolSpec};

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

/// Tool results must answer a call id; fallback-parsed calls may come without one.
pub(crate) fn give_call_ids(message: &mut ChatMessage, seen: u32) {
    if let ChatMessage::Assistant { tool_calls, .. } = message {
        for (i, call) in tool_calls.iter_mut().enumerate() {
            if call.id.trim().is_empty() {
                call.id = format!("call_{}", seen as usize + i + 1);
            }
        }
    }
}

/// A reply without calls whose text writes calls of the offered tools as a name and a JSON
/// object of arguments (see `named_tool_calls`): those become its calls, and the text around
/// them its content. True when there were any.
pub(crate) fn recover_named_calls(response: &mut ChatResponse, specs: &[ToolSpec]) -> bool {
    if !response.tool_calls.is_empty() {
        return false;
    }
    let Some(text) = response.content.as_deref() else {
        return false;
    };
    let names: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
    let found = calls_after_tool_names(text, &names);
    if found.calls.is_empty() {
        return false;
    }
    response.tool_calls = found
        .calls
        .into_iter()
        .map(|call| ToolCall {
            id: String::new(),
            name: call.name,
            arguments: call.arguments,
        })
        .collect();
    response.content = Some(found.rest).filter(|rest| !rest.is_empty());
    response.tool_calls_from_content = true;
    true
}

/// The model's text as a summary: tool-call blocks removed, trimmed, bounded.
pub(crate) fn summary_from_text(text: &str) -> String {
    let text = strip_tool_calls(text);
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
