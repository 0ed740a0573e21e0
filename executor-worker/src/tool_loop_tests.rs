#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;

use loopgate_models::ToolCall;
use serde_json::json;

use super::*;
use crate::settings::ToolLimits;
use crate::workspace_tools::Workspace;

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
            .map(|(i, (name, arguments))| ToolCall {
                id: if i == 0 {
                    String::new()
                } else {
                    format!("id{i}")
                },
                name: name.to_string(),
                arguments,
            })
            .collect(),
        tool_calls_from_content: false,
        finish_reason: None,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
        },
        model: "scripted".into(),
    }
}

fn limits(max_steps: u32) -> LoopLimits {
    LoopLimits {
        max_steps,
        episode: Duration::from_secs(30),
    }
}

fn prompt() -> Vec<ChatMessage> {
    vec![ChatMessage::system("sys"), ChatMessage::user("do it")]
}

#[tokio::test]
async fn loop_endings_table() {
    let write = || ("write_file", json!({"path": "a.txt", "content": "A"}));
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
            "plain reply ends it",
            vec![Ok(reply(Some("  all done  "), vec![]))],
            10,
            |r| {
                matches!(&r.end, LoopEnd::Replied { summary } if summary == "all done")
                    && r.tool_calls == 0
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
        let dir = tempfile::tempdir().unwrap();
        let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
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

#[tokio::test]
async fn tool_results_go_back_with_call_ids() {
    let dir = tempfile::tempdir().unwrap();
    let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
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
    let dir = tempfile::tempdir().unwrap();
    let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
    let limits = LoopLimits {
        max_steps: 5,
        episode: Duration::from_millis(100),
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
