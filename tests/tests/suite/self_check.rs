//! Self-check inside the episode, end to end over the real stack: a scripted executor writes a
//! wrong file and calls `finish`; the executor runs the blocking check on a copy of its
//! workspace and refuses; the agent reads the refusal, fixes the file, and the run completes in
//! one round. The refusal count reaches the run log, `loopgate watch` and the executor's
//! metrics; the evidence the gate counted is still the auditor's, on the frozen snapshot.

use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

/// The demo's own task (`examples/hello`), on the stand-in profiles.
fn hello_task() -> String {
    include_str!("../../../examples/hello/task.toml")
        .replace("manager = \"local\"", "manager = \"mgr\"")
        .replace("executor = \"local\"", "executor = \"exec\"")
}

const REFUSED: &str = "finish refused:";

fn write_hello(content: &str) -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "hello.py", "content": content}),
    )
}

/// The metric's value summed over its series in a Prometheus text page.
fn metric_value(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_file_refused_at_finish_is_fixed_in_one_round() -> anyhow::Result<()> {
    // The executor: a wrong greeting, `finish`; once refused, the fix and `finish` again.
    let executor = Reply::dynamic(|req: &Value| {
        let last = last_message_content(req, "tool").unwrap_or_default();
        let assistant_turns = req["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        match assistant_turns {
            0 => write_hello("print('hello')\n"),
            _ if last.starts_with(REFUSED) => write_hello("print('hello, loopgate')\n"),
            _ => Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
        }
    });
    let manager = Reply::content("Next: cli\nTask: create hello.py that prints hello, loopgate");
    let script = Script::new()
        .fallback("standin-manager", manager)
        .fallback("standin-executor", executor);
    let model = StandInModel::start(script).await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.worker_metrics = true;
    let stack = Stack::start(opts).await?;
    let id = stack.submit(&hello_task(), &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");

    // The agent saw the refusal, naming the criterion and its exit code.
    let requests = model.requests("standin-executor");
    assert_eq!(requests.len(), 4, "write, finish (refused), fix, finish");
    let refusal = last_message_content(&requests[2], "tool").unwrap_or_default();
    assert!(refusal.starts_with(REFUSED), "{refusal}");
    assert!(
        refusal
            .lines()
            .any(|l| l.starts_with("- prints-greeting (exit 1)")),
        "{refusal}"
    );

    // The episode summary: the run log's exec_result entry counts the refusal.
    let execs = stack.log_entries(&id, "exec_result").await?;
    assert_eq!(execs.len(), 1, "{execs:?}");
    let exec = &execs[0];
    assert_eq!(exec["self_check_refusals"], 1, "{exec}");
    assert_eq!(exec["claimed_done"], true, "{exec}");

    // Feedback, never evidence: the only evidence is the auditor's, bound to the snapshot
    // (besides its checks of the starting workspace before round 1).
    let snapshot = done["snapshot"].as_str().unwrap_or_default();
    let history = stack.get(&format!("/v1/runs/{id}/evidence")).await?;
    let evidence: Vec<Value> = history["evidence"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["artifact_version"] != done["base_snapshot"])
        .collect();
    assert!(!evidence.is_empty(), "{history}");
    assert!(
        evidence
            .iter()
            .all(|e| e["artifact_version"] == snapshot && e["verdict"] == "pass"),
        "{history}"
    );

    // `loopgate watch` shows the refusals.
    let cli = loopgate_test_support::workspace_bin("loopgate")?;
    let watched = tokio::process::Command::new(&cli)
        .args(["--server", &stack.http, "watch", &id])
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&watched.stdout).to_string();
    assert!(watched.status.success(), "{stdout}");
    assert!(
        stdout.contains("[finish refused 1x by self-check]"),
        "{stdout}"
    );

    // And the executor's metrics count it.
    let page = reqwest::get(format!("{}/metrics", stack.worker_metrics[0]))
        .await?
        .text()
        .await?;
    assert_eq!(
        metric_value(&page, "loopgate_executor_self_check_refusals_total"),
        1.0,
        "{page}"
    );
    Ok(())
}
