//! Recovering tool calls that a model wrote as text instead of the structured `tool_calls`
//! field: tagged, fenced or bare JSON call objects (`content`), and a tool's name followed by
//! its arguments (`named`). The OpenAI adapter applies `content` to every reply; the executor's
//! tool loop applies `named` with the names of the tools it offered. Pure; never panics.

mod content;
mod named;

pub use content::{parse_json_lenient, strip_tool_calls, tool_calls_from_content, ParsedToolCall};
pub use named::{calls_after_tool_names, NamedCalls};
