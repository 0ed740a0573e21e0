//! Recovering tool calls that a model wrote as text instead of the structured `tool_calls`
//! field: tagged, fenced or bare JSON call objects (`content`), and a tool's name followed by
//! its arguments (`named`). The OpenAI adapter takes the JSON call objects of every reply
//! ([`calls_from_content`]); a tool loop reads each reply with [`read_reply`], which adds the
//! calls written after the names of the tools it offered and says what text is left. Pure;
//! never panics.

mod content;
mod named;
mod reply;

pub use content::{parse_json_lenient, strip_tool_calls, tool_calls_from_content, ParsedToolCall};
pub use named::{calls_after_tool_names, NamedCalls};
pub use reply::{
    calls_from_content, looks_like_written_call, read_reply, CallSource, TextReply, ToolReply,
    FALLBACK_CALL_ID_PREFIX,
};
