//! End to end: the three daemons as separate processes over real NATS JetStream and Redis,
//! with an OpenAI-wire stand-in model (scripted) or the real local model.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::time::Duration;

use loopgate_test_support::LocalModel;
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::json;

const HELLO_TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 5
"#;

/// [`HELLO_TASK`] with every step the manager's, the first one too (not the goal's one
/// clause: `suite/clause_steps.rs` tests the steps taken without the manager).
fn manager_first() -> String {
    HELLO_TASK.replace("max_rounds = 5", "max_rounds = 5\nclause_steps = false")
}

fn standin_profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

fn write_hello(content: &str) -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "hello.py", "content": content}),
    )
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "wrote hello.py"}))
}

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_attempt_is_audited_replanned_and_then_completes() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Current task state: nothing exists yet\nNext: cli\nTask: create hello.py that prints hello, loopgate"),
                    Reply::content("Current task state: hello.py prints the wrong text\nNext: cli\nTask: make hello.py print exactly: hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [write_hello("print('hello')\n"), finish(), write_hello("print('hello, loopgate')\n"), finish()],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(standin_profiles(&model), 2)).await?;
    // Without self-checks, so the wrong first attempt reaches the auditor (the self-check's own
    // end-to-end test is suite/self_check.rs), and without a retry, so the manager plans round 2
    // (the retry's own is suite/effective_loop.rs).
    let task = manager_first().replace(
        "max_rounds = 5",
        "max_rounds = 5\nself_checks = 0\nstep_retries = 0",
    );
    let run = stack.submit(&task, &[]).await?;
    let id = run["id"].as_str().unwrap().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 2);
    assert_eq!(done["checks"]["passing"], 1);
    let snapshot = done["snapshot"].as_str().unwrap();
    // Evidence is bound to the final snapshot.
    let evidence = done["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 1);
    assert_eq!(evidence[0]["artifact_version"], snapshot);
    assert_eq!(evidence[0]["verdict"], "pass");
    // The evidence history holds the failing first round too, bound to another snapshot.
    let history = stack.get(&format!("/v1/runs/{id}/evidence")).await?;
    let verdicts: Vec<(String, String)> = history["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["artifact_version"].as_str().unwrap().to_string(),
                e["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        verdicts.iter().any(|(s, v)| s != snapshot && v == "fail"),
        "{verdicts:?}"
    );
    // The checked-out files are the second attempt's.
    let out = tempfile::tempdir()?;
    stack.checkout(snapshot, out.path()).await?;
    assert_eq!(
        std::fs::read_to_string(out.path().join("hello.py"))?,
        "print('hello, loopgate')\n"
    );
    // The run log tells the story in order.
    // (the workers' episode_started, episode_progress and audit_progress entries are left out: when and
    // whether they land relative to the manager's own entries is the workers' timing, not the
    // run's story.)
    let types: Vec<String> = stack
        .log_types(&id)
        .await?
        .into_iter()
        .filter(|t| {
            !matches!(
                t.as_str(),
                "episode_started" | "episode_progress" | "audit_progress"
            )
        })
        .collect();
    let round = [
        "decision",
        "exec_dispatched",
        "exec_result",
        "audit_dispatched",
        "audit_report",
        "gate",
    ];
    // The starting workspace's checks first (checks only), then two rounds.
    let mut want = vec!["submitted", "audit_dispatched", "baseline_checked"];
    want.extend(round);
    want.extend(round);
    want.push("terminal");
    assert_eq!(types, want);
    // Rounds: round 2 started from round 1's candidate and produced the final snapshot.
    let rounds = stack.get(&format!("/v1/runs/{id}/rounds")).await?;
    let rounds = rounds["rounds"].as_array().cloned().unwrap_or_default();
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    assert_eq!(rounds[1]["base_snapshot"], rounds[0]["candidate"]);
    assert_eq!(rounds[1]["candidate"], snapshot);
    assert_eq!(rounds[0]["gate_passed"], false);
    assert_eq!(rounds[1]["gate_passed"], true);
    // The manager's second prompt carried the failing audit's evidence.
    let prompts = model.requests("standin-manager");
    assert_eq!(prompts.len(), 2);
    let second = prompts[1].to_string();
    assert!(second.contains("prints-greeting"), "{second}");
    assert!(second.contains("Failing"), "{second}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_before_any_passing_audit_is_refused() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content(
                        "Current task state: I believe it is finished\nNext: done\nTask: all good",
                    ),
                    Reply::content("Next: cli\nTask: create hello.py that prints hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [write_hello("print('hello, loopgate')\n"), finish()],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(standin_profiles(&model), 1)).await?;
    let id = stack.submit(&manager_first(), &[]).await?["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}");
    let types = stack.log_types(&id).await?;
    let refused = types
        .iter()
        .position(|t| t == "done_refused")
        .expect("done_refused logged");
    let first_audit = types.iter().position(|t| t == "audit_report").unwrap();
    assert!(refused < first_audit, "{types:?}");
    let prompts = model.requests("standin-manager");
    assert!(
        prompts[1].to_string().contains("refused"),
        "the refusal is fed back"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_manager_output_is_reasked_and_the_run_goes_on() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Hmm, I would probably start by writing some code."),
                    Reply::content("{\"next\": \"teleport\"}"),
                    Reply::content("Next: cli\nTask: create hello.py that prints hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [write_hello("print('hello, loopgate')\n"), finish()],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(standin_profiles(&model), 1)).await?;
    let id = stack.submit(&manager_first(), &[]).await?["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}");
    let types = stack.log_types(&id).await?;
    assert_eq!(
        types.iter().filter(|t| *t == "invalid_output").count(),
        2,
        "{types:?}"
    );
    let prompts = model.requests("standin-manager");
    assert_eq!(prompts.len(), 3);
    assert!(prompts[1].to_string().contains("could not be used"));
    // Every daemon is still alive.
    assert!(stack.manager_log().contains("http api listening"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_submissions_get_clear_errors() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new()).await?;
    let stack = Stack::start(StackOptions::new(standin_profiles(&model), 1)).await?;
    let cases = [
        (json!({"task": {"goal": "x"}}), 400, "invalid_task"),
        (
            json!({"task": {"goal": "x", "acceptance": [{"id": "a", "check": "true"}], "roles": {"manager": "nope"}}}),
            400,
            "invalid_task",
        ),
        (
            json!({"task": {"goal": "x", "bogus": 1}}),
            400,
            "invalid_request",
        ),
        (
            json!({"task": {"goal": "x", "acceptance": [{"id": "a", "check": "true"}], "roles": {"manager": "mgr"}},
                   "workspace": {"files": [{"path": "../escape", "content_b64": ""}]}}),
            400,
            "invalid_workspace",
        ),
    ];
    for (body, status, code) in cases {
        let (got, v) = stack.post_raw("/v1/runs", &body).await?;
        assert_eq!(got, status, "{body} -> {v}");
        assert_eq!(v["error"]["code"], code, "{body} -> {v}");
    }
    let missing = reqwest::get(format!(
        "{}/v1/runs/00000000-0000-0000-0000-000000000000",
        stack.http
    ))
    .await?;
    assert_eq!(missing.status().as_u16(), 404);
    Ok(())
}

/// The real local model (Qwen2.5-Coder 0.5B on llama-server) drives a one-file task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_local_model_reaches_a_terminal_state() -> anyhow::Result<()> {
    let Some(llm) = LocalModel::start("0.5b").await? else {
        println!(
            "SKIPPED real_local_model_reaches_a_terminal_state: {}",
            LocalModel::unavailable_reason("0.5b")
                .unwrap_or_else(|| "local model unavailable".into())
        );
        return Ok(());
    };
    let mut mgr = Profile::new("mgr", &llm.base_url(), llm.model_name())
        .with_max_tokens(loopgate_tests::LOCAL_MAX_TOKENS);
    mgr.timeout_secs = 300;
    let mut exec = Profile::new("exec", &llm.base_url(), llm.model_name())
        .with_max_tokens(loopgate_tests::LOCAL_MAX_TOKENS);
    exec.timeout_secs = 300;
    let stack = Stack::start(StackOptions::new(vec![mgr, exec], 1)).await?;
    // Generous reply budgets: a 0.5B manager often needs several tries to produce `Next: cli`.
    let task = HELLO_TASK.replace(
        "max_rounds = 5",
        "max_rounds = 3\nmax_steps = 4\nmax_invalid_outputs = 8\nmax_done_refusals = 12",
    );
    let id = stack.submit(&task, &[]).await?["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(1500)).await?;
    let state = done["state"].as_str().unwrap().to_string();
    println!(
        "local model run ended {state} after {} rounds: {}",
        done["round"], done["terminal_reason"]
    );
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let tool_calls: u64 = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "exec_result")
        .map(|e| e["tool_calls"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        tool_calls >= 1,
        "no real tool call went through the adapter: {log}\n{}",
        stack.logs()
    );
    if state == "completed" {
        let out = tempfile::tempdir()?;
        stack
            .checkout(done["snapshot"].as_str().unwrap(), out.path())
            .await?;
        let status = std::process::Command::new("python3")
            .arg("hello.py")
            .current_dir(out.path())
            .output()?;
        assert_eq!(
            String::from_utf8_lossy(&status.stdout).trim(),
            "hello, loopgate"
        );
    }
    Ok(())
}

/// The real CLI against the real stack: submit with a starting workspace, watch the SSE stream
/// to the end, then check out the final snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_submit_watch_and_checkout_against_the_stack() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content("Next: cli\nTask: write hello.py")],
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call("read_file", json!({"path": "notes.txt"})),
                    write_hello("print('hello, loopgate')\n"),
                    finish(),
                ],
            ),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(standin_profiles(&model), 1)).await?;
    let work = tempfile::tempdir()?;
    let task_path = work.path().join("task.toml");
    std::fs::write(&task_path, HELLO_TASK)?;
    let start_ws = work.path().join("ws");
    std::fs::create_dir_all(&start_ws)?;
    std::fs::write(start_ws.join("notes.txt"), "starting notes\n")?;
    let cli = loopgate_test_support::workspace_bin("loopgate")?;
    let out = tokio::process::Command::new(&cli)
        .args(["--server", &stack.http, "submit"])
        .arg(&task_path)
        .arg("--workspace")
        .arg(&start_ws)
        .arg("--watch")
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let id = stdout.lines().next().unwrap().trim().to_string();
    assert!(stdout.contains("completed"), "{stdout}");
    assert!(stdout.contains("1/1"), "{stdout}");
    let dest = work.path().join("out");
    let co = tokio::process::Command::new(&cli)
        .args(["--server", &stack.http, "checkout", &id])
        .arg(&dest)
        .output()
        .await?;
    assert!(
        co.status.success(),
        "{}",
        String::from_utf8_lossy(&co.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("hello.py"))?,
        "print('hello, loopgate')\n"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("notes.txt"))?,
        "starting notes\n"
    );
    // The executor saw the uploaded starting workspace.
    let exec_requests = model.requests("standin-executor");
    assert!(
        exec_requests[1].to_string().contains("starting notes"),
        "read_file result reached the model"
    );
    Ok(())
}

#[path = "suite/mod.rs"]
mod suite;
