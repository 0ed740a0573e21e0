//! Tool calls that a weak model wrote as plain text: a tool's name and then its arguments as a
//! JSON object, e.g. `write_file{"path": "a.py", "content": "..."}`, the name on a line of its
//! own above the object, or several such calls run together. The object has no `name` or
//! `arguments` keys, so `content` does not take it for a call. Here, only the names of the
//! tools that the request offered count. Pure; never panics.

use super::content::{parse_json_lenient, ParsedToolCall};
use loopgate_common::json_span::balanced_end;
use serde_json::Value;

/// At most this many calls are taken from one reply.
const MAX_CALLS: usize = 16;

/// The calls in `content`, and the text around them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamedCalls {
    pub calls: Vec<ParsedToolCall>,
    /// `content` without the calls, trimmed.
    pub rest: String,
}

/// Each offered tool name in `content` that stands as a word and is followed (after spaces,
/// newlines, a `:` or a `(`) by a JSON object: one call with that object as its arguments (an
/// object holding only `arguments` or `parameters` is unwrapped). In order of appearance.
pub fn calls_after_tool_names(content: &str, names: &[&str]) -> NamedCalls {
    let mut calls = Vec::new();
    let mut rest = String::new();
    let mut cursor = 0;
    let mut at = 0;
    while calls.len() < MAX_CALLS {
        let Some((start, name)) = next_name(content, at, names) else {
            break;
        };
        let Some(open) = object_start(content, start + name.len()) else {
            at = start + name.len();
            continue;
        };
        let Some(end) = balanced_end(content, open) else {
            at = start + name.len();
            continue;
        };
        let Some(arguments) = content.get(open..end).and_then(arguments_of) else {
            at = start + name.len();
            continue;
        };
        rest.push_str(content.get(cursor..start).unwrap_or_default());
        calls.push(ParsedToolCall {
            name: name.to_string(),
            arguments,
        });
        cursor = end;
        at = end;
    }
    rest.push_str(content.get(cursor..).unwrap_or_default());
    NamedCalls {
        calls,
        rest: rest.trim().to_string(),
    }
}

/// The first offered name at or after byte `from` that is a whole word (not part of a longer
/// identifier).
fn next_name<'a>(content: &str, from: usize, names: &[&'a str]) -> Option<(usize, &'a str)> {
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    names
        .iter()
        .filter(|name| !name.is_empty())
        .filter_map(|name| {
            let tail = content.get(from..)?;
            tail.match_indices(*name)
                .map(|(i, _)| from + i)
                .find(|&i| {
                    let before = content[..i].chars().next_back();
                    let after = content[i + name.len()..].chars().next();
                    !before.is_some_and(word_char) && !after.is_some_and(word_char)
                })
                .map(|i| (i, *name))
        })
        .min_by_key(|(i, _)| *i)
}

/// Where the object after a name opens: only spaces, newlines, one `:` or one `(` between.
fn object_start(content: &str, from: usize) -> Option<usize> {
    let mut separators = 0;
    for (i, c) in content.get(from..)?.char_indices() {
        match c {
            '{' => return Some(from + i),
            ' ' | '\t' | '\n' | '\r' => {}
            ':' | '(' if separators == 0 => separators += 1,
            _ => return None,
        }
    }
    None
}

fn arguments_of(text: &str) -> Option<Value> {
    let Value::Object(object) = parse_json_lenient(text)? else {
        return None;
    };
    if object.len() == 1 {
        if let Some(inner @ Value::Object(_)) =
            object.get("arguments").or_else(|| object.get("parameters"))
        {
            return Some(inner.clone());
        }
    }
    Some(Value::Object(object))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;
    use serde_json::json;

    const NAMES: &[&str] = &["write_file", "read_file", "finish", "shell"];

    #[test]
    fn calls_after_tool_names_table() {
        // (content, calls as (name, arguments), rest)
        type Case = (&'static str, Vec<(&'static str, Value)>, &'static str);
        let cases: Vec<Case> = vec![
            (
                "write_file\n{\n  \"content\": \"print(1)\\n\",\n  \"path\": \"to_json.py\"\n}",
                vec![(
                    "write_file",
                    json!({"content": "print(1)\n", "path": "to_json.py"}),
                )],
                "",
            ),
            (
                "write_file{\"path\": \"a.log\", \"content\": \"x\"}write_file{\"path\": \"b.log\", \"content\": \"y\"}finish (done)",
                vec![
                    ("write_file", json!({"path": "a.log", "content": "x"})),
                    ("write_file", json!({"path": "b.log", "content": "y"})),
                ],
                "finish (done)",
            ),
            (
                "I will read it. read_file: {\"path\": \"a.py\"}",
                vec![("read_file", json!({"path": "a.py"}))],
                "I will read it.",
            ),
            (
                "shell({\"arguments\": {\"command\": \"ls\"}})",
                vec![("shell", json!({"command": "ls"}))],
                ")",
            ),
            // Not calls: prose, a name inside a longer word, an unknown name, a name far from
            // its object, an object that is not JSON, an array.
            ("finish", vec![], "finish"),
            ("my_write_file{\"path\": \"a\"}", vec![], "my_write_file{\"path\": \"a\"}"),
            ("delete_file{\"path\": \"a\"}", vec![], "delete_file{\"path\": \"a\"}"),
            ("shell is {\"x\": 1}", vec![], "shell is {\"x\": 1}"),
            ("write_file{path: a}", vec![], "write_file{path: a}"),
            ("write_file [1, 2]", vec![], "write_file [1, 2]"),
            ("write_file{\"path\": \"a\"", vec![], "write_file{\"path\": \"a\""),
        ];
        for (content, want, rest) in cases {
            let got = calls_after_tool_names(content, NAMES);
            let calls: Vec<(&str, Value)> = got
                .calls
                .iter()
                .map(|c| (c.name.as_str(), c.arguments.clone()))
                .collect();
            assert_eq!(calls, want, "{content:?}");
            assert_eq!(got.rest, rest, "{content:?}");
        }
    }

    #[test]
    fn calls_are_bounded_and_odd_text_does_not_panic() {
        let many = "finish{}".repeat(40);
        assert_eq!(calls_after_tool_names(&many, NAMES).calls.len(), MAX_CALLS);
        for text in [
            "",
            "{",
            "write_file{",
            "é write_file é{",
            "finish:(",
            "finish{\"a\": \"é",
        ] {
            let _ = calls_after_tool_names(text, NAMES);
        }
        assert!(calls_after_tool_names("finish{}", &[""]).calls.is_empty());
    }
}
