//! Tool calls that weak models write into the message *content* instead of the structured
//! `tool_calls` field.
//!
//! Recognised shapes, in order of preference:
//! - `<tool_call>{...}</tool_call>` tags (an unclosed tag runs to the next tag or the end);
//! - fenced blocks: ```` ```json ````, ```` ```tool_call ````, plain ```` ``` ```` (also inline,
//!   on one line), one or more JSON values per block;
//! - only when no tag/fence yields a call: JSON objects/arrays standing in the prose (or being the
//!   whole content); those must name their arguments explicitly.
//!
//! Each JSON value may be a call object (`name` + `arguments` | `parameters` | `args` | `input`),
//! an OpenAI-style `{"type": "function", "function": {...}}`, a `{"tool_calls": [...]}` wrapper,
//! or an array of those. `arguments` given as a string holding JSON is decoded; when it is not
//! JSON it is kept as `Value::String` so the caller can report the error to the model. Common
//! damage is repaired: trailing commas, raw newlines/tabs inside strings, missing closing
//! brackets at the end of a block. Prose yields no calls. Never panics.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One tool call recovered from message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedToolCall {
    pub name: String,
    pub arguments: Value,
}

/// All tool calls written into `content`, in order of appearance; `[]` for prose.
pub fn tool_calls_from_content(content: &str) -> Vec<ParsedToolCall> {
    find_call_blocks(content)
        .into_iter()
        .flat_map(|block| block.calls)
        .collect()
}

/// `content` with every block that yielded a tool call removed (for display). Content without
/// calls is returned unchanged; otherwise the remainder is trimmed and runs of blank lines are
/// collapsed.
pub fn strip_tool_calls(content: &str) -> String {
    let blocks = find_call_blocks(content);
    if blocks.is_empty() {
        return content.to_string();
    }
    let mut kept = String::with_capacity(content.len());
    let mut cursor = 0;
    for block in &blocks {
        if let Some(before) = content.get(cursor..block.start) {
            kept.push_str(before);
        }
        cursor = block.end;
    }
    if let Some(rest) = content.get(cursor..) {
        kept.push_str(rest);
    }
    collapse_blank_lines(kept.trim())
}

/// Parses JSON, retrying once after repairing trailing commas and raw control characters inside
/// strings. `None` when it is not JSON even then.
pub fn parse_json_lenient(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Some(value);
    }
    serde_json::from_str::<Value>(&repair_json(trimmed)).ok()
}

/// At most this many JSON start positions are tried per text region, bounding the work on
/// pathological input (e.g. long code full of braces).
const MAX_PARSE_ATTEMPTS: usize = 256;
/// Tool names longer than this are not names.
const MAX_NAME_LEN: usize = 128;
/// Fence info strings whose blocks may hold tool calls.
const CALL_FENCE_LANGS: &[&str] = &[
    "",
    "json",
    "jsonc",
    "json5",
    "jsonl",
    "tool_call",
    "tool_calls",
    "tool",
    "tools",
    "function",
    "function_call",
];
const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";
const FENCE: &str = "```";

#[derive(Debug)]
struct CallBlock {
    start: usize,
    end: usize,
    calls: Vec<ParsedToolCall>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegionKind {
    /// `<tool_call>` tag or a fence that may hold calls.
    CallContainer,
    /// A fence in another language (code): never scanned.
    OtherFence,
    Prose,
}

#[derive(Debug, Clone, Copy)]
struct Region {
    kind: RegionKind,
    /// Whole region, delimiters included.
    start: usize,
    end: usize,
    /// The part between the delimiters.
    body_start: usize,
    body_end: usize,
}

/// How strictly a JSON value must look like a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strictness {
    /// Inside a tag or fence: `{"name": "finish"}` alone counts.
    Container,
    /// Loose in prose: an explicit arguments key is required.
    Prose,
}

fn find_call_blocks(content: &str) -> Vec<CallBlock> {
    let regions = split_regions(content);
    let mut blocks = Vec::new();
    for region in regions
        .iter()
        .filter(|r| r.kind == RegionKind::CallContainer)
    {
        let Some(body) = content.get(region.body_start..region.body_end) else {
            continue;
        };
        let calls: Vec<ParsedToolCall> = json_values_in(body, Strictness::Container)
            .into_iter()
            .flat_map(|found| calls_from_value(&found.value, Strictness::Container))
            .collect();
        if !calls.is_empty() {
            blocks.push(CallBlock {
                start: region.start,
                end: region.end,
                calls,
            });
        }
    }
    if !blocks.is_empty() {
        return blocks;
    }
    for region in regions.iter().filter(|r| r.kind == RegionKind::Prose) {
        let Some(body) = content.get(region.body_start..region.body_end) else {
            continue;
        };
        for found in json_values_in(body, Strictness::Prose) {
            let calls = calls_from_value(&found.value, Strictness::Prose);
            if !calls.is_empty() {
                blocks.push(CallBlock {
                    start: region.body_start + found.start,
                    end: region.body_start + found.end,
                    calls,
                });
            }
        }
    }
    blocks
}

/// Splits content into tag, fence and prose regions, in order, covering all of it.
fn split_regions(content: &str) -> Vec<Region> {
    let mut regions = Vec::new();
    let mut cursor = 0;
    while cursor < content.len() {
        let rest = &content[cursor..];
        let next_tag = rest.find(TAG_OPEN);
        let next_fence = rest.find(FENCE);
        let (offset, is_tag) = match (next_tag, next_fence) {
            (Some(t), Some(f)) if t < f => (t, true),
            (_, Some(f)) => (f, false),
            (Some(t), None) => (t, true),
            (None, None) => break,
        };
        let start = cursor + offset;
        if start > cursor {
            regions.push(prose_region(cursor, start));
        }
        let region = if is_tag {
            tag_region(content, start)
        } else {
            fence_region(content, start)
        };
        cursor = region.end.max(start + 1);
        regions.push(region);
    }
    if cursor < content.len() {
        regions.push(prose_region(cursor, content.len()));
    }
    regions
}

fn prose_region(start: usize, end: usize) -> Region {
    Region {
        kind: RegionKind::Prose,
        start,
        end,
        body_start: start,
        body_end: end,
    }
}

/// `<tool_call>` at `start`: the body runs to `</tool_call>`, or to the next `<tool_call>`, or
/// to the end of the content.
fn tag_region(content: &str, start: usize) -> Region {
    let body_start = start + TAG_OPEN.len();
    let after = &content[body_start..];
    let close = after.find(TAG_CLOSE);
    let next_open = after.find(TAG_OPEN);
    let (body_end, end) = match (close, next_open) {
        (Some(c), Some(o)) if o < c => (body_start + o, body_start + o),
        (Some(c), _) => (body_start + c, body_start + c + TAG_CLOSE.len()),
        (None, Some(o)) => (body_start + o, body_start + o),
        (None, None) => (content.len(), content.len()),
    };
    Region {
        kind: RegionKind::CallContainer,
        start,
        end,
        body_start,
        body_end,
    }
}

/// A fence opening at `start`: info string, then the body up to the next fence (or the end).
fn fence_region(content: &str, start: usize) -> Region {
    let info_start = start + FENCE.len();
    let info_len = content[info_start..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+')))
        .unwrap_or(content.len() - info_start);
    let info = &content[info_start..info_start + info_len];
    let body_start = info_start + info_len;
    let lang = info.to_ascii_lowercase();
    let body_head = content[body_start..].trim_start();
    let json_body = body_head.starts_with('{') || body_head.starts_with('[');
    let may_hold_calls =
        CALL_FENCE_LANGS.contains(&lang.as_str()) || json_body || body_head.starts_with(TAG_OPEN);
    let (body_end, end) = match find_fence_close(&content[body_start..], json_body) {
        Some(close) => (body_start + close, body_start + close + FENCE.len()),
        None => (content.len(), content.len()),
    };
    Region {
        kind: if may_hold_calls {
            RegionKind::CallContainer
        } else {
            RegionKind::OtherFence
        },
        start,
        end,
        body_start,
        body_end,
    }
}

/// The closing fence in `body`. In a JSON body, fences inside strings (a markdown file being
/// written, say) do not close the block unless no other fence does.
fn find_fence_close(body: &str, json_body: bool) -> Option<usize> {
    if !json_body {
        return body.find(FENCE);
    }
    let bytes = body.as_bytes();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if bytes[i..].starts_with(FENCE.as_bytes()) {
            return Some(i);
        }
    }
    body.find(FENCE)
}

#[derive(Debug)]
struct FoundValue {
    start: usize,
    end: usize,
    value: Value,
}

/// Every JSON object/array found in `text`, left to right, non-overlapping.
fn json_values_in(text: &str, strictness: Strictness) -> Vec<FoundValue> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut attempts = 0;
    let mut i = 0;
    while i < bytes.len() && attempts < MAX_PARSE_ATTEMPTS {
        let opens = matches!(bytes[i], b'{' | b'[');
        let plausible = match strictness {
            Strictness::Container => opens,
            Strictness::Prose => opens && looks_like_json_start(bytes, i),
        };
        if plausible {
            attempts += 1;
            if let Some((end, value)) = parse_value_at(text, i) {
                found.push(FoundValue {
                    start: i,
                    end,
                    value,
                });
                i = end;
                continue;
            }
        }
        i += 1;
    }
    found
}

/// In prose, `{` must be followed by a key string and `[` by an object.
fn looks_like_json_start(bytes: &[u8], open: usize) -> bool {
    let next = bytes[open + 1..]
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace());
    matches!((bytes[open], next), (b'{', Some(b'"')) | (b'[', Some(b'{')))
}

/// Parses the value opening at byte `open` (an ASCII bracket). Returns its end and value.
fn parse_value_at(text: &str, open: usize) -> Option<(usize, Value)> {
    match scan_balanced(&text.as_bytes()[open..]) {
        BalancedScan::Closed(len) => {
            let end = open + len;
            parse_json_lenient(text.get(open..end)?).map(|value| (end, value))
        }
        // A value cut inside a string is truncated data, not a missing bracket: never repaired.
        BalancedScan::Unclosed {
            in_string: false,
            closers,
        } => {
            let mut completed = text.get(open..)?.trim_end().to_string();
            completed.extend(closers.iter().rev());
            parse_json_lenient(&completed).map(|value| (text.len(), value))
        }
        BalancedScan::Unclosed {
            in_string: true, ..
        }
        | BalancedScan::Mismatched => None,
    }
}

#[derive(Debug)]
enum BalancedScan {
    /// The value closes after this many bytes.
    Closed(usize),
    /// The text ends inside the value; `closers` would close it (innermost last).
    Unclosed {
        in_string: bool,
        closers: Vec<char>,
    },
    Mismatched,
}

/// Bracket matching that skips over JSON strings. `bytes[0]` is `{` or `[`.
fn scan_balanced(bytes: &[u8]) -> BalancedScan {
    let mut closers: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => closers.push('}'),
            b'[' => closers.push(']'),
            b'}' | b']' => {
                if closers.pop() != Some(char::from(b)) {
                    return BalancedScan::Mismatched;
                }
                if closers.is_empty() {
                    return BalancedScan::Closed(i + 1);
                }
            }
            _ => {}
        }
    }
    BalancedScan::Unclosed { in_string, closers }
}

/// Drops trailing commas before `}`/`]` and escapes raw newlines, carriage returns and tabs
/// inside strings.
fn repair_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
                continue;
            }
            match c {
                '\\' => {
                    escaped = true;
                    out.push(c);
                }
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => out.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            ',' => {
                let mut lookahead = chars.clone();
                let next = lookahead.find(|n| !n.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn calls_from_value(value: &Value, strictness: Strictness) -> Vec<ParsedToolCall> {
    match value {
        Value::Array(items) => items
            .iter()
            .filter_map(|item| item.as_object())
            .flat_map(|map| calls_from_object(map, strictness))
            .collect(),
        Value::Object(map) => calls_from_object(map, strictness),
        _ => Vec::new(),
    }
}

/// A call object, or a `{"tool_calls": [...]}` wrapper around several.
fn calls_from_object(map: &Map<String, Value>, strictness: Strictness) -> Vec<ParsedToolCall> {
    if let Some(Value::Array(list)) = map.get("tool_calls") {
        return list
            .iter()
            .filter_map(|item| item.as_object())
            .filter_map(|item| call_from_object(item, strictness))
            .collect();
    }
    call_from_object(map, strictness).into_iter().collect()
}

fn call_from_object(map: &Map<String, Value>, strictness: Strictness) -> Option<ParsedToolCall> {
    // OpenAI shape: {"type": "function", "function": {"name": .., "arguments": ..}}.
    if let Some(Value::Object(inner)) = map.get("function") {
        return call_from_flat_object(inner, strictness);
    }
    call_from_flat_object(map, strictness)
}

fn call_from_flat_object(
    map: &Map<String, Value>,
    strictness: Strictness,
) -> Option<ParsedToolCall> {
    let raw_name = match (map.get("name"), map.get("function")) {
        (Some(Value::String(name)), _) => name,
        (None, Some(Value::String(name))) => name,
        _ => return None,
    };
    let name = normalize_name(raw_name)?;
    let arguments_key = ["arguments", "parameters", "args", "input"]
        .into_iter()
        .find(|key| map.contains_key(*key));
    let arguments = match arguments_key {
        Some(key) => normalize_arguments(map.get(key)?),
        None => {
            let only_call_keys = map
                .keys()
                .all(|key| matches!(key.as_str(), "name" | "type" | "id"));
            if strictness == Strictness::Prose || !only_call_keys {
                return None;
            }
            Value::Object(Map::new())
        }
    };
    Some(ParsedToolCall { name, arguments })
}

/// Tool names are identifiers: no whitespace, bounded length; a `functions.` prefix (as some
/// models copy it from their chat template) is dropped.
fn normalize_name(raw: &str) -> Option<String> {
    let trimmed = raw.trim();
    let name = trimmed.strip_prefix("functions.").unwrap_or(trimmed);
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'));
    valid.then(|| name.to_string())
}

/// `null`/empty → `{}`; a string holding JSON → that JSON (up to two levels of encoding);
/// a string that is not JSON stays a string.
fn normalize_arguments(raw: &Value) -> Value {
    match raw {
        Value::Null => Value::Object(Map::new()),
        Value::String(text) => decode_argument_string(text, 2),
        other => other.clone(),
    }
}

fn decode_argument_string(text: &str, levels: u8) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match parse_json_lenient(text) {
        Some(Value::String(inner)) if levels > 1 => decode_argument_string(&inner, levels - 1),
        Some(value) => value,
        None => Value::String(text.to_string()),
    }
}

fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line.trim_end());
    }
    out
}

#[cfg(test)]
#[path = "content_tests.rs"]
mod tests;
