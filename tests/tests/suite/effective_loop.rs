//! The loop turns what it knows into progress, end to end on the real stack: the next executor
//! reads the failing check's output, a failed step is tried again without a manager decision,
//! a candidate that loses ground is set aside, an unchanged candidate is not audited again, a step that renames the goal's file goes back
//! to the manager before any executor runs, and a run that stops making progress escalates.

use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

/// The check prints what hello.py printed, so a failure has output to show.
const TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "out=$(python3 hello.py 2>&1); echo \"hello.py printed: $out\"; test \"$out\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = EXECUTOR
[budget]
max_rounds = 6
max_failed_rounds = 10
stagnation_rounds = 2
escalate_after = 100
# The scripted executors here call `finish` on wrong work on purpose (self-check is tested in
# self_check.rs).
self_checks = 0
"#;

fn task(executor: &str) -> String {
    TASK.replace("EXECUTOR", executor)
}

/// [`task`] with the manager's reply as the first step (not the goal's one clause).
fn manager_first(executor: &str) -> String {
    task(executor).replace("[budget]\n", "[budget]\nclause_steps = false\n")
}

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
        Profile::new("strong", &model.base_url(), "standin-executor-strong"),
    ]
}

fn manager(task: &str) -> Reply {
    Reply::content(format!(
        "Current task state: working on it\nNext: cli\nTask: {task}"
    ))
}

fn write_hello(content: &str) -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "hello.py", "content": content}),
    )
}

/// The `done.txt` marker [`TWO_CHECKS`] checks for.
fn write_marker() -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "done.txt", "content": "done\n"}),
    )
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "done"}))
}

/// The first user message of each executor episode (the task prompt), in order.
fn episode_prompts(model: &StandInModel, name: &str) -> Vec<String> {
    model
        .requests(name)
        .iter()
        .filter(|r| r["messages"].as_array().is_some_and(|m| m.len() == 2))
        .filter_map(|r| last_message_content(r, "user"))
        .collect()
}

/// A one-executor stack on `model` runs `task` to its end, which must be `completed`.
async fn run_to_completion(
    model: &StandInModel,
    task: &str,
) -> anyhow::Result<(Stack, String, Value)> {
    let stack = Stack::start(StackOptions::new(profiles(model), 1)).await?;
    let run = stack.submit(task, &[]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    anyhow::ensure!(done["state"] == "completed", "{done}\n{}", stack.logs());
    Ok((stack, id, done))
}

/// `(round, type)` of every run log entry, workers' `episode_started` left out.
async fn log_entries(stack: &Stack, id: &str) -> anyhow::Result<Vec<(u64, String)>> {
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    Ok(log["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e: &Value| {
            (
                e["round"].as_u64().unwrap_or(0),
                e["type"].as_str().unwrap_or("").to_string(),
            )
        })
        .filter(|(_, t)| {
            !matches!(
                t.as_str(),
                "episode_started" | "episode_progress" | "audit_progress"
            )
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_output_reaches_the_next_executor_and_unchanged_work_is_not_reaudited(
) -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    manager("create hello.py that prints exactly: hello, loopgate"),
                    manager("make hello.py print exactly: hello, loopgate"),
                    manager("fix hello.py so it prints exactly: hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [
                    // Round 1: the wrong greeting. Round 2: nothing changed. Round 3: fixed.
                    write_hello("print('hello')\n"),
                    finish(),
                    finish(),
                    write_hello("print('hello, loopgate')\n"),
                    finish(),
                ],
            ),
    )
    .await?;
    let (stack, id, done) = run_to_completion(&model, &task("\"exec\"")).await?;
    assert_eq!(done["round"], 3);

    let prompts = episode_prompts(&model, "standin-executor");
    assert_eq!(prompts.len(), 3, "{prompts:#?}");
    assert!(
        !prompts[0].contains("What the last audit found"),
        "{}",
        prompts[0]
    );
    // Round 2 reads round 1's failing check with its output, and the goal's words as its step.
    for needle in [
        "What the last audit found",
        "check `prints-greeting` failed (exit 1)",
        "hello.py printed: hello",
        "Your step: Create hello.py that prints exactly: hello, loopgate",
        // Round 1 added hello.py, which the failing check runs: named, not shown (a small model
        // copies it).
        "- `hello.py` was written in this run, and the checks above fail with it",
    ] {
        assert!(
            prompts[1].contains(needle),
            "missing {needle}:\n{}",
            prompts[1]
        );
    }
    assert!(
        !prompts[1].contains("Current contents of hello.py"),
        "{}",
        prompts[1]
    );

    let entries = log_entries(&stack, &id).await?;
    let round_2: Vec<&str> = entries
        .iter()
        .filter(|(r, _)| *r == 2)
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(round_2.contains(&"audit_reused"), "{round_2:?}");
    assert!(!round_2.contains(&"audit_dispatched"), "{round_2:?}");
    // Only rounds 1 and 3 ran an audit, after the starting workspace's checks (round 0).
    let audits: Vec<u64> = entries
        .iter()
        .filter(|(_, t)| t == "audit_dispatched")
        .map(|(r, _)| *r)
        .collect();
    assert_eq!(audits, vec![0, 1, 3], "{entries:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_renames_the_goals_file_goes_back_to_the_manager() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    manager("create print-hello.py that prints hello, loopgate"),
                    manager("create hello.py that prints exactly: hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [write_hello("print('hello, loopgate')\n"), finish()],
            ),
    )
    .await?;
    let (stack, id, done) = run_to_completion(&model, &manager_first("\"exec\"")).await?;
    assert_eq!(done["round"], 1, "no round was spent on the renamed file");
    let types: Vec<String> = log_entries(&stack, &id)
        .await?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let sent_back = types.iter().position(|t| t == "step_sent_back");
    let dispatched = types.iter().position(|t| t == "exec_dispatched");
    assert!(
        matches!((sent_back, dispatched), (Some(s), Some(d)) if s < d),
        "{types:?}"
    );
    // The manager was told what it changed.
    let asked_again = model.requests("standin-manager");
    let prompt = last_message_content(&asked_again[1], "user").unwrap_or_default();
    assert!(
        prompt.contains("the goal says `hello.py`, the step says `print-hello.py`"),
        "{prompt}"
    );
    // The executor never saw the renamed file.
    let prompts = episode_prompts(&model, "standin-executor");
    assert!(
        prompts.iter().all(|p| !p.contains("print-hello.py")),
        "{prompts:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_progress_escalates_the_executor() -> anyhow::Result<()> {
    let wrong = || [write_hello("print('hello')\n"), finish()];
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    manager("create hello.py that prints exactly: hello, loopgate"),
                    manager("change hello.py to print exactly: hello, loopgate"),
                    manager("rewrite hello.py; it must print exactly: hello, loopgate"),
                    manager("make hello.py print exactly: hello, loopgate, nothing else"),
                ],
            )
            // The cheap executor keeps writing the same wrong file.
            .replies(
                "standin-executor",
                wrong().into_iter().chain(wrong()).chain(wrong()),
            )
            .replies(
                "standin-executor-strong",
                [write_hello("print('hello, loopgate')\n"), finish()],
            ),
    )
    .await?;
    let (stack, id, done) = run_to_completion(&model, &task("[\"exec\", \"strong\"]")).await?;
    assert_eq!(done["round"], 4);
    let entries = log_entries(&stack, &id).await?;
    // Round 1's failure is new; rounds 2 and 3 change nothing: the second of them escalates.
    let stagnation: Vec<u64> = entries
        .iter()
        .filter(|(_, t)| t == "stagnation")
        .map(|(r, _)| *r)
        .collect();
    assert_eq!(stagnation, vec![3], "{entries:?}");
    // The strong executor starts from the attempt ledger.
    let strong = episode_prompts(&model, "standin-executor-strong");
    assert_eq!(strong.len(), 1, "{strong:#?}");
    assert!(
        strong[0].contains("Earlier attempts that did not work"),
        "{}",
        strong[0]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_is_tried_again_with_its_evidence_and_no_manager_decision(
) -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [manager(
                    "create hello.py that prints exactly: hello, loopgate",
                )],
            )
            .replies(
                "standin-executor",
                [
                    write_hello("print('hello')\n"),
                    finish(),
                    write_hello("print('hello, loopgate')\n"),
                    finish(),
                ],
            ),
    )
    .await?;
    // The task's budget with the default retry (the key left out).
    let task = manager_first("\"exec\"").replace("stagnation_rounds = 2\n", "");
    let (stack, id, done) = run_to_completion(&model, &task).await?;
    assert_eq!(done["round"], 2);
    // One manager decision in all: round 2 ran round 1's step.
    assert_eq!(model.requests("standin-manager").len(), 1);
    let prompts = episode_prompts(&model, "standin-executor");
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    for needle in [
        "check `prints-greeting` failed (exit 1)",
        "hello.py printed: hello",
    ] {
        assert!(
            prompts[1].contains(needle),
            "missing {needle}:\n{}",
            prompts[1]
        );
    }
    let entries = log_entries(&stack, &id).await?;
    let kinds = |round: u64| -> Vec<&str> {
        entries
            .iter()
            .filter(|(r, _)| *r == round)
            .map(|(_, t)| t.as_str())
            .collect()
    };
    // Round 1's failed audit dispatches round 2 itself; round 2 has no decision.
    assert!(kinds(1).ends_with(&["gate", "step_retried"]), "{entries:?}");
    assert_eq!(kinds(2).first(), Some(&"exec_dispatched"), "{entries:?}");
    assert!(!kinds(2).contains(&"decision"), "{entries:?}");
    let retried = stack.get(&format!("/v1/runs/{id}/log")).await?["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .find(|e| e["type"] == "step_retried")
        .unwrap_or_default();
    assert_eq!(retried["from_round"], 1, "{retried}");
    Ok(())
}

/// Two checks: the greeting, and a `done.txt` marker.
const TWO_CHECKS: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate, and create done.txt"
[[acceptance]]
id = "prints-greeting"
check = "out=$(python3 hello.py 2>&1); echo \"hello.py printed: $out\"; test \"$out\" = 'hello, loopgate'"
[[acceptance]]
id = "marker"
check = "test -f done.txt"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 6
max_failed_rounds = 10
self_checks = 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_breaks_a_passing_check_is_set_aside_and_the_work_before_it_kept(
) -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    manager("create hello.py that prints exactly: hello, loopgate"),
                    manager("create done.txt"),
                ],
            )
            .replies(
                "standin-executor",
                [
                    // Round 1: the greeting passes, the marker is missing.
                    write_hello("print('hello, loopgate')\n"),
                    finish(),
                    // Round 2 (the retry): breaks the greeting, no marker either.
                    write_hello("print('hello')\n"),
                    finish(),
                    // Round 3: the marker, on top of round 1's hello.py.
                    write_marker(),
                    finish(),
                ],
            ),
    )
    .await?;
    let (stack, id, done) = run_to_completion(&model, TWO_CHECKS).await?;
    assert_eq!(done["round"], 3);
    let entries = log_entries(&stack, &id).await?;
    let rejected: Vec<u64> = entries
        .iter()
        .filter(|(_, t)| t == "candidate_rejected")
        .map(|(r, _)| *r)
        .collect();
    assert_eq!(rejected, vec![2], "{entries:?}");
    // Round 3 started from round 1's candidate, and its executor was told why.
    let rounds = stack.get(&format!("/v1/runs/{id}/rounds")).await?;
    let rounds = rounds["rounds"].as_array().cloned().unwrap_or_default();
    assert_eq!(rounds.len(), 3, "{rounds:?}");
    assert_eq!(rounds[2]["base_snapshot"], rounds[0]["candidate"]);
    let prompts = episode_prompts(&model, "standin-executor");
    assert!(prompts[2].contains("set aside"), "{}", prompts[2]);
    // The completed snapshot holds round 1's hello.py.
    assert_holds_greeting(&stack, &done).await
}

/// The starting workspace passes the greeting check; round 1 breaks it and still lacks the
/// marker. The starting workspace's checks (before round 1) make that a regression: round 1 is
/// set aside, round 2 (its retry) starts from the starting workspace and completes. Without a
/// baseline (`baseline_checks = false`) round 1's broken hello.py became the artifact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_round_that_breaks_what_passed_at_the_start_is_set_aside() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new().replies(
        "standin-executor",
        [
            // Round 1: breaks the greeting, no marker.
            write_hello("print('hello')\n"),
            finish(),
            // Round 2, the retry: only the marker, over the starting hello.py.
            write_marker(),
            finish(),
        ],
    ))
    .await?;
    let task = TWO_CHECKS.replace("[budget]\n", "[budget]\nmanager = false\n");
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let run = stack
        .submit(&task, &[("hello.py", "print('hello, loopgate')\n")])
        .await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 2, "{done}");
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    let baseline = entries
        .iter()
        .find(|e| e["type"] == "baseline_checked")
        .ok_or_else(|| anyhow::anyhow!("no baseline_checked: {entries:?}"))?;
    assert_eq!(
        baseline["passing"],
        json!(["prints-greeting"]),
        "{baseline}"
    );
    assert_eq!(baseline["failing"], json!(["marker"]), "{baseline}");
    assert_eq!(baseline["snapshot"], run["base_snapshot"], "{baseline}");
    let rejected: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "candidate_rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{entries:?}");
    assert_eq!(rejected[0]["round"], 1, "{entries:?}");
    assert_holds_greeting(&stack, &done).await
}

/// The run `done` ended on a snapshot whose hello.py prints the greeting.
async fn assert_holds_greeting(stack: &Stack, done: &Value) -> anyhow::Result<()> {
    let out = tempfile::tempdir()?;
    stack
        .checkout(done["snapshot"].as_str().unwrap_or_default(), out.path())
        .await?;
    assert_eq!(
        std::fs::read_to_string(out.path().join("hello.py"))?,
        "print('hello, loopgate')\n"
    );
    Ok(())
}

/// The token budget runs out with round 1's episode: its candidate still gets a checks-only
/// audit (no model asked) and the run ends holding it, one check passing, not the empty start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_candidate_frozen_as_the_token_budget_runs_out_is_checked_and_kept(
) -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new().replies(
        "standin-executor",
        [write_hello("print('hello, loopgate')\n"), finish()],
    ))
    .await?;
    let task = TWO_CHECKS.replace(
        "[budget]\n",
        "[budget]\nmanager = false\nmax_total_tokens = 1\n",
    );
    let stack = Stack::start(StackOptions::new(profiles(&model), 1)).await?;
    let run = stack.submit(&task, &[]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "budget_exhausted", "{done}");
    assert_eq!(done["checks"]["passing"], 1, "{done}");
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    // The starting workspace's checks (round 0), then round 1's candidate's.
    let dispatched: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "audit_dispatched" && e["round"] != 0)
        .collect();
    assert_eq!(dispatched.len(), 1, "{entries:?}");
    assert_eq!(dispatched[0]["checks_only"], true, "{entries:?}");
    // No model was asked in the audit.
    assert_eq!(done["usage"]["auditor"]["input_tokens"], 0, "{done}");
    assert_holds_greeting(&stack, &done).await
}
