//! A reply read for a tool loop: the calls it makes (the structured ones, those the adapter
//! recovered from its content, or those its text writes as an offered tool's name and a JSON
//! object of arguments) or, when it makes none, its text with and without the calls written
//! into it. Also the calls an adapter recovers from a reply's content, with their ids. Pure.

use crate::chat_types::{ChatResponse, ToolCall};

use super::content::{strip_tool_calls, tool_calls_from_content};
use super::named::calls_after_tool_names;

/// Prefix of the ids given to tool calls recovered from content.
pub const FALLBACK_CALL_ID_PREFIX: &str = "call_fallback_";

/// The tool calls written into `content` as JSON call objects (tags, fences or bare; see
/// [`tool_calls_from_content`]), with the ids `call_fallback_0`, `call_fallback_1`, ...: what
/// an adapter that recovers calls from the content returns as the reply's calls.
pub fn calls_from_content(content: &str) -> Vec<ToolCall> {
    tool_calls_from_content(content)
        .into_iter()
        .enumerate()
        .map(|(index, parsed)| {
            ToolCall::new(
                format!("{FALLBACK_CALL_ID_PREFIX}{index}"),
                parsed.name,
                parsed.arguments,
            )
        })
        .collect()
}

/// Where a reply's calls came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSource {
    /// The structured `tool_calls` field.
    Structured,
    /// JSON call objects in the content, recovered by the adapter.
    Content,
    /// An offered tool's name followed by its arguments in the text.
    ToolNames,
}

/// A reply that calls no tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TextReply {
    /// The reply's text as the model wrote it.
    pub text: String,
    /// The text without the tool-call blocks written into it (see [`strip_tool_calls`]): what
    /// a summary or a handoff quotes.
    pub without_calls: String,
    /// The text looks like a tool call written as plain text (see [`looks_like_written_call`]).
    pub looks_like_call: bool,
}

/// A reply as a tool loop reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReply {
    /// The reply calls tools. Calls recovered from the text may have an empty id.
    Calls {
        /// The assistant message's text: without the calls when they were written into it.
        content: Option<String>,
        calls: Vec<ToolCall>,
        source: CallSource,
    },
    /// The reply calls nothing.
    Text(TextReply),
}

/// Reads `response` for a tool loop that offered the tools `offered`. A reply without calls
/// whose text writes calls of offered tools as a name and a JSON object of arguments (see
/// [`calls_after_tool_names`]) calls those, with empty ids; the text around them is its
/// content.
pub fn read_reply(mut response: ChatResponse, offered: &[&str]) -> ToolReply {
    let mut source = if response.tool_calls_from_content {
        CallSource::Content
    } else {
        CallSource::Structured
    };
    if response.tool_calls.is_empty() && take_calls_after_names(&mut response, offered) {
        source = CallSource::ToolNames;
    }
    if response.tool_calls.is_empty() {
        let text = response.content.unwrap_or_default();
        return ToolReply::Text(TextReply {
            without_calls: strip_tool_calls(&text),
            looks_like_call: looks_like_written_call(&text),
            text,
        });
    }
    ToolReply::Calls {
        content: response.assistant_content(),
        calls: response.tool_calls,
        source,
    }
}

/// Whether `text` looks like a tool call written as plain text: a JSON object with a `name`,
/// `arguments` or `parameters` key (such text calls nothing).
pub fn looks_like_written_call(text: &str) -> bool {
    text.contains('{')
        && (text.contains("\"name\"")
            || text.contains("\"arguments\"")
            || text.contains("\"parameters\""))
}

/// Moves the calls that `response`'s text writes after offered tool names into its calls, the
/// text around them into its content. True when there were any.
fn take_calls_after_names(response: &mut ChatResponse, offered: &[&str]) -> bool {
    let Some(text) = response.content.as_deref() else {
        return false;
    };
    let found = calls_after_tool_names(text, offered);
    if found.calls.is_empty() {
        return false;
    }
    response.tool_calls = found
        .calls
        .into_iter()
        .map(|call| ToolCall::new(String::new(), call.name, call.arguments))
        .collect();
    response.content = Some(found.rest).filter(|rest| !rest.is_empty());
    response.tool_calls_from_content = true;
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::usage::Usage;
    use serde_json::json;

    fn response(content: Option<&str>, calls: Vec<ToolCall>, from_content: bool) -> ChatResponse {
        ChatResponse {
            content: content.map(str::to_string),
            tool_calls: calls,
            tool_calls_from_content: from_content,
            finish_reason: None,
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall::new(id, name, arguments)
    }

    #[test]
    fn read_reply_table() {
        let offered = ["write_file", "finish"];
        let fenced = "Listing.\n```json\n{\"name\": \"finish\", \"arguments\": {}}\n```";
        // (response, what it reads as)
        let cases = vec![
            (
                response(Some("ok"), vec![call("a", "finish", json!({}))], false),
                ToolReply::Calls {
                    content: Some("ok".into()),
                    calls: vec![call("a", "finish", json!({}))],
                    source: CallSource::Structured,
                },
            ),
            (
                response(Some(fenced), calls_from_content(fenced), true),
                ToolReply::Calls {
                    content: Some("Listing.".into()),
                    calls: vec![call("call_fallback_0", "finish", json!({}))],
                    source: CallSource::Content,
                },
            ),
            (
                response(
                    Some("Now: write_file{\"path\": \"a.py\", \"content\": \"x\"}"),
                    vec![],
                    false,
                ),
                ToolReply::Calls {
                    content: Some("Now:".into()),
                    calls: vec![call(
                        "",
                        "write_file",
                        json!({"path": "a.py", "content": "x"}),
                    )],
                    source: CallSource::ToolNames,
                },
            ),
            (
                response(Some("delete_file{\"path\": \"a\"}"), vec![], false),
                ToolReply::Text(TextReply {
                    text: "delete_file{\"path\": \"a\"}".into(),
                    without_calls: "delete_file{\"path\": \"a\"}".into(),
                    looks_like_call: false,
                }),
            ),
            (
                response(
                    Some("{\"name\": \"Create hello.py\", \"arguments\": {\"path\": \".\"}}"),
                    vec![],
                    false,
                ),
                ToolReply::Text(TextReply {
                    text: "{\"name\": \"Create hello.py\", \"arguments\": {\"path\": \".\"}}"
                        .into(),
                    // Not a call: a tool's name has no spaces.
                    without_calls:
                        "{\"name\": \"Create hello.py\", \"arguments\": {\"path\": \".\"}}".into(),
                    looks_like_call: true,
                }),
            ),
            (
                response(None, vec![], false),
                ToolReply::Text(TextReply::default()),
            ),
        ];
        for (response, want) in cases {
            let shown = format!("{response:?}");
            assert_eq!(read_reply(response, &offered), want, "{shown}");
        }
    }

    #[test]
    fn written_calls_table() {
        // (text, looks like a call written as text)
        let cases = [
            (
                r#"{"name": "Create hello.py", "arguments": {"path": "."}}"#,
                true,
            ),
            (r#"{"parameters": {}}"#, true),
            ("I will create hello.py now.", false),
            ("\"name\" without an object", false),
        ];
        for (text, want) in cases {
            assert_eq!(looks_like_written_call(text), want, "{text}");
        }
    }
}
