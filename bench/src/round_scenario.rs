//! A stand-in loop of rounds for the harness benches: a stand-in model (in-process, OpenAI wire
//! format) whose manager always answers `Next: cli` and whose executor writes `notes.txt` and
//! finishes (2 model calls), and a task whose only check is `true`, with `complete_on_gate =
//! false` so a run keeps going for exactly `max_rounds` rounds and then ends `budget_exhausted`.
//! `harness-bench` runs it with an instant model, `chaos-bench --soak` with a latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, StackOptions};
use serde_json::{json, Value};

pub const MANAGER_MODEL: &str = "standin-manager";
pub const EXECUTOR_MODEL: &str = "standin-executor";

/// A run's end states.
pub const TERMINAL: &[&str] = &[
    "completed",
    "blocked",
    "budget_exhausted",
    "cancelled",
    "failed",
];

fn after(latency: Duration, reply: Reply) -> Reply {
    if latency.is_zero() {
        reply
    } else {
        Reply::delayed(latency, reply)
    }
}

/// Executor: `write_file notes.txt` (a new blob every round), then `finish`. Manager: always
/// `Next: cli` with a fresh task text. Every reply `latency` late.
pub async fn standin(latency: Duration) -> anyhow::Result<StandInModel> {
    let writes = Arc::new(AtomicU64::new(0));
    let executor = Reply::dynamic(move |req: &Value| {
        let last_role = req["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["role"].as_str())
            .unwrap_or("");
        let reply = if last_role == "tool" {
            Reply::tool_call("finish", json!({"summary": "wrote notes.txt"}))
        } else {
            let n = writes.fetch_add(1, Ordering::Relaxed);
            Reply::tool_call(
                "write_file",
                json!({"path": "notes.txt", "content": format!("attempt {n}\n")}),
            )
        };
        after(latency, reply)
    });
    let decisions = Arc::new(AtomicU64::new(0));
    let manager = Reply::dynamic(move |_req: &Value| {
        let n = decisions.fetch_add(1, Ordering::Relaxed);
        after(
            latency,
            Reply::content(format!(
                "Current task state: the check passes; keep iterating (decision {n}).\nNext: cli\nTask: write attempt {n} into notes.txt"
            )),
        )
    });
    StandInModel::start(
        Script::new()
            .fallback(MANAGER_MODEL, manager)
            .fallback(EXECUTOR_MODEL, executor),
    )
    .await
}

/// The stack's profiles for `model`, with `executors` executors.
pub fn stack_options(model: &StandInModel, executors: usize) -> StackOptions {
    StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), MANAGER_MODEL),
            Profile::new("exec", &model.base_url(), EXECUTOR_MODEL),
        ],
        executors,
    )
}

/// The task: `rounds` rounds of writing notes.txt, named `name`.
pub fn task_toml(name: &str, rounds: u32) -> String {
    format!(
        r#"
name = "{name}"
goal = "Measure the harness: every round writes notes.txt; the only check is a no-op"
complete_on_gate = false
[[acceptance]]
id = "noop"
description = "always passes"
check = "true"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = {rounds}
max_failed_rounds = {rounds}
"#
    )
}
