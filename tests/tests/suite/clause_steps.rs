//! The clause policy (`budget.clause_steps`) end to end on the real stack: a goal whose
//! clauses each have a check is worked clause by clause with no manager call, a clause that
//! fails twice as the step is set aside for the next one, and the manager decides once every
//! failing clause is set aside. And a run without a manager
//! (`budget.manager = false`): no manager profile, the goal as every step.

use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

/// Two clauses, one public check each.
const TASK: &str = r#"
goal = "Create a.txt. Create b.txt."
[[acceptance]]
id = "a"
check = "test -f a.txt"
[[acceptance]]
id = "b"
check = "test -f b.txt"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 6
max_failed_rounds = 10
# The scripted executor calls `finish` on wrong work on purpose.
self_checks = 0
"#;

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

fn write(path: &str) -> Reply {
    Reply::tool_call("write_file", json!({"path": path, "content": "x\n"}))
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "done"}))
}

/// Run `TASK` on `model` to its end, which must be `completed`; its log entries.
async fn completed_log(model: &StandInModel) -> anyhow::Result<Vec<Value>> {
    completed_log_of(model, TASK).await
}

/// Run `task` on `model` to its end, which must be `completed`; its log entries.
async fn completed_log_of(model: &StandInModel, task: &str) -> anyhow::Result<Vec<Value>> {
    let stack = Stack::start(StackOptions::new(profiles(model), 1)).await?;
    let run = stack.submit(task, &[]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    anyhow::ensure!(done["state"] == "completed", "{done}\n{}", stack.logs());
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    Ok(log["entries"].as_array().cloned().unwrap_or_default())
}

/// `(round, type)` of the entries, workers' `episode_started`, `episode_progress` and `audit_progress` left out.
fn kinds(entries: &[Value]) -> Vec<(u64, String)> {
    entries
        .iter()
        .map(|e| {
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
        .collect()
}

fn count(entries: &[Value], kind: &str) -> usize {
    entries.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_clause_is_a_step_without_a_manager_call() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new().replies(
        "standin-executor",
        [write("a.txt"), finish(), write("b.txt"), finish()],
    ))
    .await?;
    let entries = completed_log(&model).await?;
    assert_eq!(model.request_count("standin-manager"), 0);
    assert_eq!(count(&entries, "decision"), 0, "{:?}", kinds(&entries));
    let steps: Vec<(u64, u64, String)> = entries
        .iter()
        .filter(|e| e["type"] == "clause_step")
        .map(|e| {
            (
                e["round"].as_u64().unwrap_or(0),
                e["clause"].as_u64().unwrap_or(0),
                e["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (1, 1, "Create a.txt.".to_string()),
            (2, 2, "Create b.txt.".to_string())
        ],
        "{:?}",
        kinds(&entries)
    );
    // Every clause step has its headline.
    assert!(entries
        .iter()
        .filter(|e| e["type"] == "clause_step")
        .all(|e| e["headline"]
            .as_str()
            .is_some_and(|h| h.contains("goal clause"))));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clause_step_is_shown_and_self_checked_against_its_own_clause_only() -> anyhow::Result<()>
{
    // With the self-check on, clause 1's episode finishes on clause 1's check: clause 2's
    // failing check neither refuses its finish nor shows in its prompt.
    let model = StandInModel::start(Script::new().replies(
        "standin-executor",
        [write("a.txt"), finish(), write("b.txt"), finish()],
    ))
    .await?;
    let task = TASK.replace("self_checks = 0", "self_checks = 2");
    let entries = completed_log_of(&model, &task).await?;
    let kinds = kinds(&entries);
    let results: Vec<(u64, String)> = entries
        .iter()
        .filter(|e| e["type"] == "exec_result")
        .map(|e| {
            (
                e["round"].as_u64().unwrap_or(0),
                e["headline"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(results.len(), 2, "{kinds:?}");
    assert!(
        results.iter().all(|(_, h)| !h.contains("refused")),
        "{results:?}"
    );
    let requests = model.requests("standin-executor");
    let first = requests
        .first()
        .and_then(|r| r["messages"].as_array())
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(first.starts_with("Goal: Create a.txt.\n"), "{first}");
    assert!(first.contains("test -f a.txt"), "{first}");
    assert!(!first.contains("test -f b.txt"), "{first}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clause_failing_twice_is_set_aside_and_then_the_manager_decides() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content(
                    "Current task state: a.txt is missing\nNext: cli\nTask: create a.txt",
                )],
            )
            .replies(
                "standin-executor",
                [
                    // Clause 1's two tries write the wrong file.
                    write("x1.txt"),
                    finish(),
                    write("x2.txt"),
                    finish(),
                    // Clause 1 set aside: clause 2 is the step.
                    write("b.txt"),
                    finish(),
                    // Every failing clause set aside: the manager's step.
                    write("a.txt"),
                    finish(),
                ],
            ),
    )
    .await?;
    let entries = completed_log(&model).await?;
    let kinds = kinds(&entries);
    assert_eq!(model.request_count("standin-manager"), 1, "{kinds:?}");
    // Round 1 is clause 1; round 2 tries it again (a step retry, the default); round 3 is
    // clause 2 with clause 1 set aside; the manager's decision comes after round 3's gate.
    assert!(kinds.contains(&(1, "clause_step".into())), "{kinds:?}");
    assert!(kinds.contains(&(1, "step_retried".into())), "{kinds:?}");
    let set_aside = entries
        .iter()
        .find(|e| e["type"] == "clause_step" && e["round"] == 3)
        .map(|e| e["set_aside"].clone());
    assert_eq!(set_aside, Some(json!([1])), "{kinds:?}");
    let decision = kinds.iter().position(|(_, t)| t == "decision");
    let clause_2 = kinds.iter().rposition(|(r, t)| *r == 3 && t == "gate");
    assert!(decision.is_some() && decision > clause_2, "{kinds:?}");
    assert_eq!(count(&entries, "decision"), 1, "{kinds:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_manager_the_goal_is_every_step_and_no_profile_is_needed() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new().replies(
        "standin-executor",
        [
            // Round 1 does half the goal; round 2 (the goal again) the rest.
            write("a.txt"),
            finish(),
            write("b.txt"),
            finish(),
        ],
    ))
    .await?;
    // A manager profile no daemon has: nothing uses it.
    let task = TASK
        .replace("manager = \"mgr\"", "manager = \"nobody\"")
        .replace("[budget]\n", "[budget]\nmanager = false\n");
    let entries = completed_log_of(&model, &task).await?;
    let kinds = kinds(&entries);
    assert_eq!(model.request_count("standin-manager"), 0, "{kinds:?}");
    for kind in ["decision", "clause_step"] {
        assert_eq!(count(&entries, kind), 0, "{kind}: {kinds:?}");
    }
    let objectives: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "exec_dispatched")
        .filter_map(|e| e["objective"].as_str())
        .collect();
    assert_eq!(
        objectives,
        ["Create a.txt. Create b.txt.", "Create a.txt. Create b.txt."],
        "{kinds:?}"
    );
    Ok(())
}
