//! The two arms on one task, over the real stack with the real local model.
//!
//! - single-shot: exactly one executor episode. The run's manager is a stand-in that always
//!   answers `Next: cli` with the goal as the task, and `max_rounds = 1`, so the executor runs
//!   once, with `self_checks = 0` (no self-check either); its own `claimed_done` (it called
//!   `finish`) is the claim.
//! - loopgate: the full loop (local-model manager, local-model executor, mechanical auditor);
//!   the claim is the harness's: the run reached `completed`.
//!
//! In both arms the bench checks the resulting snapshot out and runs every check itself.

use std::time::{Duration, Instant};

use loopgate_bench::run_wait::{wait_for_end, GRACE_SECS};

use anyhow::Context;
use loopgate_test_support::{Reply, StandInModel};
use loopgate_tests::Stack;
use serde_json::{json, Value};

use crate::checks::verify_snapshot;
use crate::report::{ArmResult, RoleTokens};
use crate::suite::{ArmBudget, SuiteTask};

/// Profile names in the daemons' config.
pub const MANAGER_PROFILE: &str = "mgr";
pub const EXECUTOR_PROFILE: &str = "exec";
pub const STANDIN_MANAGER_PROFILE: &str = "single-shot-mgr";
/// The model name the stand-in manager answers for.
pub const STANDIN_MODEL: &str = "single-shot-manager";

/// Caps shared by every task of one bench.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub token_budget: u64,
    pub episode_secs: u64,
    pub single_wall_secs: u64,
    pub loop_wall_secs: u64,
    /// The loopgate arm's task names the manager's model as its judge (`--judge`).
    pub judge: bool,
    /// The loopgate arm's `budget.step_retries` (`--step-retries`); None keeps the task's.
    pub step_retries: Option<u32>,
    /// The loopgate arm's `budget.attempts` (`--attempts`, issue 40); None keeps the task's
    /// (one). With more than one, the stack has two executors.
    pub attempts: Option<u32>,
}

impl Caps {
    /// Executors on the stack: two when the loopgate arm runs parallel attempts, else one.
    pub fn executors(&self) -> usize {
        if self.attempts.is_some_and(|n| n > 1) {
            2
        } else {
            1
        }
    }
}

fn files_of(task: &SuiteTask) -> Vec<(&str, &str)> {
    task.files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect()
}

fn join_notes(parts: &[String]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("; ")
}

fn usage_total(u: &Value) -> u64 {
    u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0)
}

async fn exec_results(stack: &Stack, id: &str) -> anyhow::Result<Vec<Value>> {
    let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
    Ok(log["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["type"] == "exec_result")
        .collect())
}

pub async fn single_shot(
    stack: &Stack,
    standin: &StandInModel,
    task: &SuiteTask,
    caps: Caps,
) -> anyhow::Result<ArmResult> {
    standin.set_fallback(
        STANDIN_MODEL,
        Reply::with_usage(
            0,
            0,
            Reply::content(format!(
                "Current task state: nothing has been done yet\nNext: cli\nTask: {}",
                task.goal_line()
            )),
        ),
    );
    let toml = task.arm_toml(
        STANDIN_MANAGER_PROFILE,
        EXECUTOR_PROFILE,
        &ArmBudget {
            token_budget: caps.token_budget,
            wall_secs: caps.single_wall_secs,
            episode_secs: caps.episode_secs,
            max_rounds: Some(1),
            self_checks: Some(0),
            judge: None,
            step_retries: None,
            clause_steps: Some(false),
            attempts: None,
        },
    )?;
    let started = Instant::now();
    let id = stack.submit(&toml, &files_of(task)).await?["id"]
        .as_str()
        .context("submit answered without an id")?
        .to_string();
    let timeout = Duration::from_secs(caps.single_wall_secs + GRACE_SECS);
    let (done, wait_note) = wait_for_end(stack, &id, timeout).await?;
    let wall_s = started.elapsed().as_secs_f64();
    let execs = exec_results(stack, &id).await?;
    let first = execs.first().cloned().unwrap_or(Value::Null);
    let claimed_done = first["claimed_done"].as_bool().unwrap_or(false);
    // The episode's own candidate; without one (the episode failed) the run's snapshot, which
    // is then the starting workspace.
    let snapshot = first["candidate"]
        .as_str()
        .or_else(|| done["snapshot"].as_str())
        .context("no snapshot to check")?
        .to_string();
    let verdict = verify_snapshot(stack, &snapshot, task).await?;
    let episode = match first["error"].as_str() {
        Some(err) => format!("executor failed: {err}"),
        None => format!(
            "executor: {} ({} tool calls)",
            first["summary"].as_str().unwrap_or(""),
            first["tool_calls"].as_u64().unwrap_or(0)
        ),
    };
    Ok(ArmResult {
        task: task.name.clone(),
        kind: task.kind.clone(),
        arm: "single_shot",
        claimed_done,
        passes: verdict.passes,
        tokens: usage_total(&done["usage"]["executor"]),
        role_tokens: RoleTokens::from_json(&done["usage"]),
        wall_s,
        rounds: execs.len() as u32,
        terminal_state: done["state"].as_str().unwrap_or("?").to_string(),
        run_id: id.clone(),
        snapshot,
        note: join_notes(&[
            episode,
            failing_note(&verdict.failing),
            wait_note,
            format!("run {id}"),
        ]),
    })
}

pub async fn loopgate(stack: &Stack, task: &SuiteTask, caps: Caps) -> anyhow::Result<ArmResult> {
    let toml = task.arm_toml(
        MANAGER_PROFILE,
        EXECUTOR_PROFILE,
        &ArmBudget {
            token_budget: caps.token_budget,
            wall_secs: caps.loop_wall_secs,
            episode_secs: caps.episode_secs,
            max_rounds: None,
            self_checks: None,
            judge: caps.judge.then(|| MANAGER_PROFILE.to_string()),
            step_retries: caps.step_retries,
            clause_steps: None,
            attempts: caps.attempts,
        },
    )?;
    let started = Instant::now();
    let id = stack.submit(&toml, &files_of(task)).await?["id"]
        .as_str()
        .context("submit answered without an id")?
        .to_string();
    let timeout = Duration::from_secs(caps.loop_wall_secs + GRACE_SECS);
    let (done, wait_note) = wait_for_end(stack, &id, timeout).await?;
    let wall_s = started.elapsed().as_secs_f64();
    let state = done["state"].as_str().unwrap_or("?").to_string();
    let snapshot = done["snapshot"]
        .as_str()
        .context("the run has no snapshot")?
        .to_string();
    let verdict = verify_snapshot(stack, &snapshot, task).await?;
    let execs = exec_results(stack, &id).await?;
    let claims = execs
        .iter()
        .filter(|e| e["claimed_done"].as_bool().unwrap_or(false))
        .count();
    Ok(ArmResult {
        task: task.name.clone(),
        kind: task.kind.clone(),
        arm: "loopgate",
        claimed_done: state == "completed",
        passes: verdict.passes,
        tokens: done["total_tokens"].as_u64().unwrap_or(0),
        role_tokens: RoleTokens::from_json(&done["usage"]),
        wall_s,
        rounds: done["round"].as_u64().unwrap_or(0) as u32,
        terminal_state: state,
        run_id: id.clone(),
        snapshot,
        note: join_notes(&[
            done["terminal_reason"].as_str().unwrap_or("").to_string(),
            format!(
                "{} executor episodes, {claims} of them called finish",
                execs.len()
            ),
            failing_note(&verdict.failing),
            wait_note,
            format!("run {id}"),
        ]),
    })
}

/// Keep the run's view and log (and the daemons' log tails) next to the results, for reading
/// what the model did.
pub async fn dump_run(stack: &Stack, dir: &std::path::Path, label: &str, r: &ArmResult) {
    let id = r.run_id.as_str();
    if id.is_empty() {
        return;
    }
    // Task names such as `HumanEval/12` become one file name.
    let label = label.replace('/', "-");
    if !r.snapshot.is_empty() {
        let _ = stack
            .checkout(&r.snapshot, &dir.join(format!("{label}.tree")))
            .await;
    }
    let view = stack.run(id).await.unwrap_or(Value::Null);
    let log = stack
        .get(&format!("/v1/runs/{id}/log"))
        .await
        .unwrap_or(Value::Null);
    let body = json!({"run": view, "log": log});
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(
        dir.join(format!("{label}.json")),
        serde_json::to_string_pretty(&body).unwrap_or_default(),
    );
    let _ = std::fs::write(dir.join(format!("{label}.daemons.txt")), stack.logs());
}

fn failing_note(failing: &[String]) -> String {
    if failing.is_empty() {
        String::new()
    } else {
        format!("failing checks: {}", failing.join(", "))
    }
}
