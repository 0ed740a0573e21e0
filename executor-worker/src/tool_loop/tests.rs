#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use loopgate_models::{ChatRequest, ChatResponse, ToolCall};
use loopgate_protocol::usage::Usage;
use serde_json::json;

use super::*;
use crate::config::ToolLimits;
use crate::tool_loop::turn_messages::MAX_SUMMARY_CHARS;
use crate::tools::workspace::Workspace;

mod cache_prefix;
mod prompt_fit;

/// Replies from a fixed script (then keeps repeating the last reply), recording requests.
struct ScriptedModel {
    replies: Mutex<Vec<Result<ChatResponse, ModelError>>>,
    last: ChatResponse,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    fn new(replies: Vec<Result<ChatResponse, ModelError>>, last: ChatResponse) -> Self {
        let mut replies = replies;
        replies.reverse();
        ScriptedModel {
            replies: Mutex::new(replies),
            last,
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl ChatModel for ScriptedModel {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send {
        self.seen.lock().unwrap().push(req.clone());
        let next = self
            .replies
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| Ok(self.last.clone()));
        async move { next }
    }
}

fn reply(content: Option<&str>, calls: Vec<(&str, serde_json::Value)>) -> ChatResponse {
    ChatResponse {
        content: content.map(str::to_string),
        tool_calls: calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                let id = if i == 0 {
                    String::new()
                } else {
                    format!("id{i}")
                };
                ToolCall::new(id, name, arguments)
            })
            .collect(),
        tool_calls_from_content: false,
        finish_reason: None,
        usage: Usage::tokens(10, 2),
        model: "scripted".into(),
    }
}

/// A model call the server answered with HTTP `code` and `body`.
fn http_error(code: u16, body: &str) -> Result<ChatResponse, ModelError> {
    Err(ModelError::Status {
        code,
        body: body.into(),
        retry_after: None,
    })
}

fn limits(max_steps: u32) -> LoopLimits {
    LoopLimits {
        attempt: 1,
        max_steps,
        episode: Duration::from_secs(30),
        health: HealthPolicy::default(),
        retrying: false,
        max_tokens: None,
    }
}

/// Tools on an empty scratch workspace (kept while the dir lives).
fn scratch_tools() -> (tempfile::TempDir, EpisodeTools) {
    let dir = tempfile::tempdir().unwrap();
    let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
    (dir, tools)
}

fn prompt() -> Vec<ChatMessage> {
    vec![ChatMessage::system("sys"), ChatMessage::user("do it")]
}

#[tokio::test]
async fn loop_endings_table() {
    let write = || ("write_file", json!({"path": "a.txt", "content": "A"}));
    let marker = || {
        let text = "[loopgate: this text was removed after the self-check refused it (9 bytes); \
                    write the file anew instead of repeating it]";
        ("write_file", json!({"path": "a.txt", "content": text}))
    };
    let timeout_err = || {
        Err(ModelError::Timeout {
            timeout: Duration::from_secs(1),
        })
    };
    type Check = fn(&LoopReport) -> bool;
    type Script = Vec<Result<ChatResponse, ModelError>>;
    let cases: Vec<(&str, Script, u32, Check)> = vec![
        (
            "write then finish",
            vec![
                Ok(reply(None, vec![write()])),
                Ok(reply(None, vec![("finish", json!({"summary": "wrote a"}))])),
            ],
            10,
            |r| {
                matches!(&r.end, LoopEnd::Finished { summary } if summary == "wrote a")
                    && r.steps == 2
                    && r.tool_calls == 2
            },
        ),
        (
            "a second plain reply before any tool ends it (the first is nudged)",
            vec![
                Ok(reply(Some("  all done  "), vec![])),
                Ok(reply(Some("  all done  "), vec![])),
            ],
            10,
            |r| {
                matches!(&r.end, LoopEnd::Replied { summary } if summary == "all done")
                    && r.tool_calls == 0
                    && r.steps == 2
            },
        ),
        (
            "a nudged plain reply, then tools",
            vec![
                Ok(reply(Some(r#"{"name": "Create a.txt"}"#), vec![])),
                Ok(reply(None, vec![write()])),
                Ok(reply(None, vec![("finish", json!({"summary": "ok"}))])),
            ],
            10,
            |r| matches!(&r.end, LoopEnd::Finished { .. }) && r.steps == 3 && r.tool_calls == 2,
        ),
        (
            "a plain reply after a tool ends it",
            vec![
                Ok(reply(None, vec![write()])),
                Ok(reply(Some("wrote it"), vec![])),
            ],
            10,
            |r| {
                matches!(&r.end, LoopEnd::Replied { summary } if summary == "wrote it")
                    && r.steps == 2
            },
        ),
        ("never stops: step cap", vec![], 3, |r| {
            matches!(r.end, LoopEnd::StepCap) && r.steps == 3 && r.tool_calls == 3
        }),
        ("model fails first", vec![timeout_err()], 10, |r| {
            matches!(r.end, LoopEnd::ModelFailed(_)) && r.steps == 0 && r.tool_calls == 0
        }),
        (
            "model fails after a tool",
            vec![Ok(reply(None, vec![write()])), timeout_err()],
            10,
            |r| matches!(r.end, LoopEnd::ModelFailed(_)) && r.steps == 1 && r.tool_calls == 1,
        ),
        (
            "the removed-text marker written three times in a row ends it",
            vec![Ok(reply(None, vec![marker(), marker(), marker(), write()]))],
            10,
            |r| matches!(r.end, LoopEnd::Stuck) && r.steps == 1 && r.tool_calls == 3,
        ),
        (
            "another call between the marker writes starts the count again",
            vec![Ok(reply(
                None,
                vec![marker(), marker(), write(), marker(), marker()],
            ))],
            2,
            |r| matches!(r.end, LoopEnd::StepCap) && r.tool_calls == 6,
        ),
        (
            "finish among several calls stops at finish",
            vec![Ok(reply(
                None,
                vec![write(), ("finish", json!({})), write()],
            ))],
            10,
            |r| matches!(&r.end, LoopEnd::Finished { .. }) && r.tool_calls == 2,
        ),
    ];
    for (name, replies, max_steps, check) in cases {
        let (_dir, tools) = scratch_tools();
        let model = ScriptedModel::new(replies, reply(None, vec![write()]));
        let report = run_tool_loop(&model, &tools, prompt(), limits(max_steps)).await;
        assert!(check(&report), "{name}: {report:?}");
        assert_eq!(
            report.usage.input_tokens,
            10 * u64::from(report.steps),
            "{name}"
        );
    }
}

/// An episode given what is left of the run's token budget (`max_tokens`) makes no model call
/// once its usage reaches it: the last turn's write is carried out, then the loop ends.
#[tokio::test]
async fn the_token_budget_ends_the_loop_after_the_turn_that_reached_it() {
    let write = || ("write_file", json!({"path": "a.txt", "content": "A"}));
    // (max_tokens, model calls made); each call spends 12 tokens
    let cases = [(Some(30), 3), (Some(24), 2), (Some(1), 1), (None, 10)];
    for (max_tokens, steps) in cases {
        let (dir, tools) = scratch_tools();
        let model = ScriptedModel::new(vec![], reply(None, vec![write()]));
        let limits = LoopLimits {
            max_tokens,
            ..limits(10)
        };
        let report = run_tool_loop(&model, &tools, prompt(), limits).await;
        assert_eq!(report.steps, steps, "{max_tokens:?}: {report:?}");
        match max_tokens {
            Some(max) => assert!(
                matches!(report.end, LoopEnd::TokenBudget(m) if m == max),
                "{report:?}"
            ),
            None => assert!(matches!(report.end, LoopEnd::StepCap), "{report:?}"),
        }
        assert!(
            dir.path().join("a.txt").exists(),
            "the last turn's write is kept"
        );
    }
}

#[tokio::test]
async fn calls_written_as_a_tool_name_and_its_arguments_run() {
    // As small models write them: the name on its own line above the object, and two calls
    // run together, each the name and then the object.
    let (dir, tools) = scratch_tools();
    let model = ScriptedModel::new(
        vec![
            Ok(reply(
                Some("write_file\n{\n  \"content\": \"print(1)\\n\",\n  \"path\": \"a.py\"\n}"),
                vec![],
            )),
            Ok(reply(
                Some(
                    r#"write_file{"path": "b.txt", "content": "B"}finish{"summary": "wrote both"}"#,
                ),
                vec![],
            )),
        ],
        reply(Some("x"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), limits(10)).await;
    assert!(
        matches!(&report.end, LoopEnd::Finished { summary } if summary == "wrote both"),
        "{report:?}"
    );
    assert_eq!((report.steps, report.tool_calls), (2, 3));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.py")).unwrap(),
        "print(1)\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "B"
    );
    // The history carries the call once, in the structured form.
    let seen = model.seen.lock().unwrap();
    let ChatMessage::Assistant {
        content,
        tool_calls,
    } = &seen[1].messages[2]
    else {
        panic!("{:?}", seen[1].messages)
    };
    assert_eq!((content.as_deref(), tool_calls.len()), (None, 1));
}

#[tokio::test]
async fn a_plain_reply_is_nudged_and_an_echoed_tool_result_is_not_written() {
    let (dir, tools) = scratch_tools();
    let model = ScriptedModel::new(
        vec![
            Ok(reply(
                Some(r#"{"name": "Create hello.py", "arguments": {"path": "."}}"#),
                vec![],
            )),
            Ok(reply(
                None,
                vec![(
                    "write_file",
                    json!({"path": "hello.py", "content": "print(1)"}),
                )],
            )),
            Ok(reply(
                None,
                vec![(
                    "write_file",
                    json!({"path": "hello.py", "content": "wrote 8 bytes to hello.py"}),
                )],
            )),
            Ok(reply(None, vec![("finish", json!({}))])),
        ],
        reply(Some("x"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), limits(10)).await;
    assert!(matches!(report.end, LoopEnd::Finished { .. }), "{report:?}");
    let seen = model.seen.lock().unwrap();
    let nudge = user_text(&seen[1]);
    assert!(nudge.contains("written as plain text"), "{nudge}");
    assert!(nudge.contains("write_file"), "{nudge}");
    let last = seen[3].messages.last().unwrap();
    let ChatMessage::Tool { content, .. } = last else {
        panic!("{last:?}")
    };
    assert!(
        content.starts_with("error: write_file refused"),
        "{content}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.py")).unwrap(),
        "print(1)",
        "the echoed text never reached the file"
    );
}

#[tokio::test]
async fn tool_results_go_back_with_call_ids() {
    let (_dir, tools) = scratch_tools();
    let model = ScriptedModel::new(
        vec![
            Ok(reply(
                None,
                vec![("write_file", json!({"path": "../../etc/x", "content": "x"}))],
            )),
            Ok(reply(Some("gave up"), vec![])),
        ],
        reply(Some("x"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), limits(5)).await;
    assert!(matches!(report.end, LoopEnd::Replied { .. }));
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].tools.len(), 6);
    let second = &seen[1].messages;
    let ChatMessage::Assistant { tool_calls, .. } = &second[2] else {
        panic!("{second:?}")
    };
    assert_eq!(tool_calls[0].id, "call_1");
    let ChatMessage::Tool {
        tool_call_id,
        content,
        ..
    } = &second[3]
    else {
        panic!("{second:?}")
    };
    assert_eq!(tool_call_id, "call_1");
    assert!(content.starts_with("error: "), "{content}");
}

#[tokio::test]
async fn deadline_ends_the_loop() {
    struct Slow;
    impl ChatModel for Slow {
        async fn chat(&self, _req: &ChatRequest) -> Result<ChatResponse, ModelError> {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Err(ModelError::Timeout {
                timeout: Duration::from_secs(60),
            })
        }
    }
    let (_dir, tools) = scratch_tools();
    let limits = LoopLimits {
        attempt: 1,
        max_steps: 5,
        episode: Duration::from_millis(100),
        health: HealthPolicy::default(),
        retrying: false,
        max_tokens: None,
    };
    let report = run_tool_loop(&Slow, &tools, prompt(), limits).await;
    assert!(matches!(report.end, LoopEnd::TimedOut(_)));
}

#[test]
fn summary_from_text_table() {
    let long = "x".repeat(MAX_SUMMARY_CHARS + 10);
    let cases = [
        ("  done \n", "done".to_string()),
        ("", String::new()),
        (long.as_str(), format!("{}…", "x".repeat(MAX_SUMMARY_CHARS))),
    ];
    for (text, expected) in cases {
        assert_eq!(summary_from_text(text), expected);
    }
}

fn with_input(mut response: ChatResponse, input_tokens: u64) -> ChatResponse {
    response.usage = Usage::tokens(input_tokens, 10);
    response
}

fn small_window(max_resets: u32) -> LoopLimits {
    LoopLimits {
        attempt: 1,
        max_steps: 20,
        episode: Duration::from_secs(30),
        health: HealthPolicy {
            max_resets,
            ..HealthPolicy::for_window(Some(1000))
        },
        retrying: false,
        max_tokens: None,
    }
}

fn user_text(req: &ChatRequest) -> String {
    req.messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(content.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn inflating_context_hands_off_to_a_fresh_agent() {
    let (dir, tools) = scratch_tools();
    let write =
        |path: &str, content: &str| ("write_file", json!({"path": path, "content": content}));
    let model = ScriptedModel::new(
        vec![
            Ok(with_input(reply(None, vec![write("a.txt", "A")]), 300)),
            // 850 of 1000 tokens: critical, below the reset threshold.
            Ok(with_input(reply(None, vec![write("b.txt", "B")]), 850)),
            Ok(with_input(
                reply(
                    None,
                    vec![write(
                        "progress.md",
                        "## Done\na.txt, b.txt\n## Next steps\nc.txt",
                    )],
                ),
                900,
            )),
            Ok(with_input(reply(None, vec![write("c.txt", "C")]), 200)),
            Ok(reply(None, vec![("finish", json!({"summary": "a, b, c"}))])),
        ],
        reply(Some("unexpected"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), small_window(3)).await;
    assert!(
        matches!(&report.end, LoopEnd::Finished { summary } if summary == "a, b, c"),
        "{report:?}"
    );
    assert_eq!((report.resets, report.steps, report.tool_calls), (1, 5, 5));
    let seen = model.seen.lock().unwrap();
    assert!(user_text(&seen[2]).contains("write the file progress.md"));
    // The fresh agent starts from system + task-with-handoff only.
    assert_eq!(seen[3].messages.len(), 2);
    let fresh = user_text(&seen[3]);
    assert!(fresh.starts_with("do it\n\nContext reset 1"), "{fresh}");
    assert!(fresh.contains("a.txt, b.txt"), "{fresh}");
    for file in ["a.txt", "b.txt", "c.txt", "progress.md"] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
}

#[tokio::test]
async fn resets_are_capped_per_episode() {
    let (_dir, tools) = scratch_tools();
    // Every reply reports a nearly full window; the agent never writes a handoff.
    let model = ScriptedModel::new(
        vec![],
        with_input(reply(None, vec![("list_dir", json!({}))]), 950),
    );
    let mut limits = small_window(3);
    limits.max_steps = 12;
    let report = run_tool_loop(&model, &tools, prompt(), limits).await;
    assert!(matches!(report.end, LoopEnd::StepCap), "{report:?}");
    assert_eq!(report.resets, 3);
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 12);
    // A harness-written handoff stands in for the missing progress.md.
    let last = user_text(seen.last().unwrap());
    assert!(
        last.contains("Context reset 3") && last.contains("- list_dir"),
        "{last}"
    );
}

#[tokio::test]
async fn context_length_error_resets_with_a_mechanical_handoff() {
    let (_dir, tools) = scratch_tools();
    let too_long = || http_error(400, "context_length_exceeded");
    let model = ScriptedModel::new(
        vec![
            Ok(reply(
                None,
                vec![("write_file", json!({"path": "a.txt", "content": "A"}))],
            )),
            too_long(),
            Ok(reply(None, vec![("finish", json!({"summary": "done"}))])),
        ],
        reply(Some("x"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), small_window(1)).await;
    assert!(matches!(report.end, LoopEnd::Finished { .. }), "{report:?}");
    assert_eq!((report.resets, report.steps), (1, 2));
    let fresh = user_text(&model.seen.lock().unwrap()[2]);
    assert!(fresh.contains("- write_file a.txt"), "{fresh}");

    // Out of resets: the error ends the loop.
    let model = ScriptedModel::new(vec![too_long()], reply(Some("x"), vec![]));
    let report = run_tool_loop(&model, &tools, prompt(), small_window(0)).await;
    assert!(
        matches!(&report.end, LoopEnd::ModelFailed(e) if e.kind() == ModelErrorKind::ContextLength)
    );
}

#[tokio::test]
async fn warn_level_compacts_old_tool_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), "y".repeat(1000)).unwrap();
    let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
    let read = || {
        with_input(
            reply(None, vec![("read_file", json!({"path": "big.txt"}))]),
            650,
        )
    };
    let model = ScriptedModel::new(
        vec![
            Ok(read()),
            Ok(read()),
            Ok(read()),
            Ok(reply(None, vec![("finish", json!({"summary": "read"}))])),
        ],
        reply(Some("x"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), small_window(3)).await;
    assert!(matches!(report.end, LoopEnd::Finished { .. }), "{report:?}");
    assert_eq!((report.compactions, report.resets), (1, 0));
    let seen = model.seen.lock().unwrap();
    let results: Vec<&str> = seen[3]
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3);
    assert!(results[0].contains("elided"), "{}", results[0]);
    assert!(!results[1].contains("elided") && !results[2].contains("elided"));
}

#[tokio::test]
async fn a_reply_cut_inside_a_tool_call_is_answered_and_asked_again() {
    let (dir, tools) = scratch_tools();
    // llama.cpp's server, when the model's output ends inside a call's arguments.
    let cut = || {
        http_error(
            500,
            "{\"error\":{\"code\":500,\"message\":\"Failed to parse tool call arguments as \
             JSON: [json.exception.parse_error.101] parse error at line 1, column 1812\"}}",
        )
    };
    let model = ScriptedModel::new(
        vec![
            cut(),
            Ok(reply(
                None,
                vec![("write_file", json!({"path": "a.txt", "content": "A"}))],
            )),
            cut(),
            Ok(reply(None, vec![("finish", json!({"summary": "done"}))])),
        ],
        reply(Some("x"), vec![]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), limits(8)).await;
    assert!(matches!(report.end, LoopEnd::Finished { .. }), "{report:?}");
    assert_eq!((report.cut_calls, report.steps), (2, 4));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "A"
    );
    {
        let seen = model.seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        // The first cut: the note joins the task (no two user messages in a row).
        let second = &seen[1].messages;
        assert_eq!(second.len(), 2);
        assert!(user_text(&seen[1]).ends_with(cut_call::CUT_CALL_NOTE));
        // The second, after a tool result: a user message of its own.
        let fourth = &seen[3].messages;
        assert!(
            matches!(fourth.last(), Some(ChatMessage::User { content }) if content == cut_call::CUT_CALL_NOTE),
            "{fourth:?}"
        );
    }

    // Past MAX_CUT_CALLS the cut ends the episode, with its kind.
    let model = ScriptedModel::new(
        vec![cut(), cut(), cut()],
        reply(None, vec![("finish", json!({"summary": "never"}))]),
    );
    let report = run_tool_loop(&model, &tools, prompt(), limits(8)).await;
    assert!(
        matches!(&report.end, LoopEnd::ModelFailed(e) if e.kind() == ModelErrorKind::CutToolCall),
        "{report:?}"
    );
    assert_eq!(report.cut_calls, cut_call::MAX_CUT_CALLS);
    assert_eq!(model.seen.lock().unwrap().len(), 3);
}
