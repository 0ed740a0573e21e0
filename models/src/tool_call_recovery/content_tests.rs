#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

use super::*;
use serde_json::json;

fn call(name: &str, arguments: Value) -> ParsedToolCall {
    ParsedToolCall {
        name: name.to_string(),
        arguments,
    }
}

#[test]
fn tool_calls_from_content_table() {
    let cases: Vec<(&str, String, Vec<ParsedToolCall>)> = vec![
        (
            "fenced json block",
            "I'll list the files.\n```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n```".into(),
            vec![call("list_dir", json!({"path": "."}))],
        ),
        (
            "tool_call fence",
            "```tool_call\n{\"name\": \"shell\", \"arguments\": {\"command\": \"cargo test\"}}\n```".into(),
            vec![call("shell", json!({"command": "cargo test"}))],
        ),
        (
            "plain fence",
            "```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}\n```".into(),
            vec![call("read_file", json!({"path": "src/main.rs"}))],
        ),
        (
            "inline fence on one line",
            "```json {\"name\": \"finish\", \"arguments\": {\"summary\": \"done\"}}```".into(),
            vec![call("finish", json!({"summary": "done"}))],
        ),
        (
            "qwen tool_call tag",
            "<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls -la\"}}\n</tool_call>".into(),
            vec![call("shell", json!({"command": "ls -la"}))],
        ),
        (
            "two tags in one message",
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b.txt\"}}\n</tool_call>".into(),
            vec![
                call("read_file", json!({"path": "a.txt"})),
                call("read_file", json!({"path": "b.txt"})),
            ],
        ),
        (
            "two fenced blocks with prose between",
            "First:\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"make\"}}\n```\nThen:\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"make test\"}}\n```\n".into(),
            vec![
                call("shell", json!({"command": "make"})),
                call("shell", json!({"command": "make test"})),
            ],
        ),
        (
            "array of calls",
            "```json\n[{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}, {\"name\": \"list_dir\", \"arguments\": {}}]\n```".into(),
            vec![
                call("read_file", json!({"path": "x"})),
                call("list_dir", json!({})),
            ],
        ),
        (
            "arguments as a JSON string",
            "```json\n{\"name\": \"write_file\", \"arguments\": \"{\\\"path\\\": \\\"a.py\\\", \\\"content\\\": \\\"print(1)\\\\n\\\"}\"}\n```".into(),
            vec![call("write_file", json!({"path": "a.py", "content": "print(1)\n"}))],
        ),
        (
            "parameters instead of arguments",
            "<tool_call>{\"name\": \"shell\", \"parameters\": {\"command\": \"pwd\"}}</tool_call>".into(),
            vec![call("shell", json!({"command": "pwd"}))],
        ),
        (
            "openai function wrapper with string arguments",
            "```json\n{\"type\": \"function\", \"function\": {\"name\": \"list_dir\", \"arguments\": \"{\\\"path\\\": \\\"src\\\"}\"}}\n```".into(),
            vec![call("list_dir", json!({"path": "src"}))],
        ),
        (
            "tool_calls wrapper object",
            "{\"tool_calls\": [{\"function\": {\"name\": \"finish\", \"arguments\": {\"summary\": \"ok\"}}}]}".into(),
            vec![call("finish", json!({"summary": "ok"}))],
        ),
        (
            "trailing commas",
            "```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\", \"timeout_secs\": 10,},}\n```".into(),
            vec![call("shell", json!({"command": "ls", "timeout_secs": 10}))],
        ),
        (
            "bare object in prose",
            "Sure! Let me check: {\"name\": \"read_file\", \"arguments\": {\"path\": \"Cargo.toml\"}} and then continue.".into(),
            vec![call("read_file", json!({"path": "Cargo.toml"}))],
        ),
        (
            "bare object is the whole content",
            "  {\"name\": \"finish\", \"arguments\": {\"summary\": \"all tests pass\"}}\n".into(),
            vec![call("finish", json!({"summary": "all tests pass"}))],
        ),
        (
            "raw newlines inside a string",
            "```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.py\", \"content\": \"def main():\n\tprint('hi')\n\"}}\n```".into(),
            vec![call("write_file", json!({"path": "hello.py", "content": "def main():\n\tprint('hi')\n"}))],
        ),
        (
            "missing closing brace at end of block",
            "<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"cargo build\"}\n</tool_call>".into(),
            vec![call("shell", json!({"command": "cargo build"}))],
        ),
        (
            "unclosed tag runs to the end",
            "<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \"tests\"}}".into(),
            vec![call("list_dir", json!({"path": "tests"}))],
        ),
        (
            "arguments string that is not JSON stays a string",
            "```json\n{\"name\": \"shell\", \"arguments\": \"ls -la /tmp\"}\n```".into(),
            vec![call("shell", Value::String("ls -la /tmp".into()))],
        ),
        (
            "functions. prefix dropped, null arguments become {}",
            "```json\n{\"name\": \"functions.list_dir\", \"arguments\": null}\n```".into(),
            vec![call("list_dir", json!({}))],
        ),
        (
            "name-only call inside a tag",
            "<tool_call>{\"name\": \"finish\"}</tool_call>".into(),
            vec![call("finish", json!({}))],
        ),
        (
            "several JSON lines in one fence",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}\n```".into(),
            vec![
                call("read_file", json!({"path": "a"})),
                call("read_file", json!({"path": "b"})),
            ],
        ),
        (
            "markdown fence inside a JSON string does not end the block",
            "```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"README.md\", \"content\": \"# Demo\\n```sh\\nmake\\n```\\n\"}}\n```".into(),
            vec![call("write_file", json!({"path": "README.md", "content": "# Demo\n```sh\nmake\n```\n"}))],
        ),
        (
            "tag inside an xml fence",
            "```xml\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n```".into(),
            vec![call("shell", json!({"command": "ls"}))],
        ),
        (
            "unicode prose around a fence",
            "Voilà — j'exécute ça 🚀\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"echo é\"}}\n```\nFini ✅".into(),
            vec![call("shell", json!({"command": "echo é"}))],
        ),
        (
            "fenced call wins over an example object in prose",
            "An example looks like {\"name\": \"x\", \"arguments\": {}}.\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n```".into(),
            vec![call("shell", json!({"command": "ls"}))],
        ),
        // Malformed or non-call content: nothing.
        ("empty content", String::new(), vec![]),
        (
            "plain prose",
            "I have finished the task. All tests pass and the README is updated.".into(),
            vec![],
        ),
        (
            "JSON that is not a call (package.json)",
            "```json\n{\"name\": \"my-app\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"jest\"}}\n```".into(),
            vec![],
        ),
        (
            "truncated mid-string",
            "```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hel".into(),
            vec![],
        ),
        (
            "value missing after a key",
            "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": }}</tool_call>".into(),
            vec![],
        ),
        (
            "name with spaces is not a tool name",
            "```json\n{\"name\": \"run the shell\", \"arguments\": {\"command\": \"ls\"}}\n```".into(),
            vec![],
        ),
        (
            "name is not a string",
            "```json\n{\"name\": 42, \"arguments\": {}}\n```".into(),
            vec![],
        ),
        (
            "rust code fence with braces",
            "```rust\nfn main() { let v = vec![1, 2]; println!(\"{:?}\", v); }\n```".into(),
            vec![],
        ),
        (
            "name-only object in prose is not a call",
            "The config is {\"name\": \"Bob\"} for now.".into(),
            vec![],
        ),
        (
            "mismatched brackets",
            "```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"]}\n```".into(),
            vec![],
        ),
        ("pathological nesting", "{".repeat(5000), vec![]),
        (
            "pathological nesting in a fence",
            format!("```json\n{}", "[".repeat(5000)),
            vec![],
        ),
        ("only closers", "}}]]```".into(), vec![]),
    ];
    for (label, content, expected) in cases {
        assert_eq!(tool_calls_from_content(&content), expected, "case: {label}");
    }
}

#[test]
fn strip_tool_calls_table() {
    let cases: Vec<(&str, &str, &str)> = vec![
        ("prose is unchanged", "  Just text.\n", "  Just text.\n"),
        (
            "fence removed, prose kept",
            "I'll run it.\n\n```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n```\n\nThen report.",
            "I'll run it.\n\nThen report.",
        ),
        (
            "tags removed",
            "<tool_call>\n{\"name\": \"finish\", \"arguments\": {}}\n</tool_call>",
            "",
        ),
        (
            "code fences that are not calls stay",
            "Code:\n```rust\nfn main() {}\n```\n```json\n{\"name\": \"finish\", \"arguments\": {}}\n```",
            "Code:\n```rust\nfn main() {}\n```",
        ),
        (
            "bare object in prose removed",
            "Checking: {\"name\": \"list_dir\", \"arguments\": {}} now",
            "Checking:  now",
        ),
    ];
    for (label, content, expected) in cases {
        assert_eq!(strip_tool_calls(content), expected, "case: {label}");
    }
}

#[test]
fn parse_json_lenient_table() {
    let cases: Vec<(&str, Option<Value>)> = vec![
        ("{\"a\": 1}", Some(json!({"a": 1}))),
        ("[1, 2,]", Some(json!([1, 2]))),
        ("{\"a\": \"x,}\",}", Some(json!({"a": "x,}"}))),
        (
            "{\"a\": \"line1\nline2\"}",
            Some(json!({"a": "line1\nline2"})),
        ),
        ("", None),
        ("not json", None),
        ("{\"a\": }", None),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_json_lenient(input), expected, "input: {input:?}");
    }
}
