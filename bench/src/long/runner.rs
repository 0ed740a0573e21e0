//! Running one arm of the long suite on one task over a live stack, and recording it: submit
//! (the task's `workspace/` as the starting workspace), wait for the end, fetch every round's
//! snapshots through the manager's API, run the hidden checks on each, and sum tokens by role.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::Engine as _;
use loopgate_common::task::parse_task_file_toml;
use loopgate_test_support::{Reply, StandInModel};
use loopgate_tests::Stack;
use serde_json::{json, Value};

use crate::long::arm::{episode_toml, loop_arm_toml, Arm, ArmProfiles, RunLimits};
use crate::long::continuation::{
    continuation_goal, next_episode, EpisodeAllowance, EpisodeBudget, EpisodeStop, FailingCheck,
};
use crate::long::curve::{
    curve, distinct_snapshots, episode_rounds, loop_rounds, manager_rounds_from_json, summarize,
    RoundSnapshots,
};
use crate::long::hidden::{run_hidden_check, HiddenOutcome, HiddenTimeouts};
use crate::long::record::LongRecord;
use crate::long::task::{read_workspace, LongTask, WorkspaceFile};
use crate::role_tokens::{cached_prompt_tokens, RoleTokens};
use crate::run_wait::{wait_for_end, GRACE_SECS};
use crate::scratch_check::{run_in_scratch_copy, ScratchCommand};

/// The caps every arm of one bench shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongCaps {
    /// Tokens per task and arm (all of a continuation's episodes together).
    pub token_budget: u64,
    /// Each executor episode's time limit.
    pub episode_secs: u64,
    /// The single_shot run's wall cap.
    pub single_wall_secs: u64,
    /// A loop run's (and the whole continuation's) wall cap.
    pub loop_wall_secs: u64,
}

/// The rounds a continuation may run when its task names no `max_rounds`.
const DEFAULT_EPISODES: u32 = 16;

/// The bench's side of a stack: what it runs the arms with.
pub struct LongBench<'a> {
    pub stack: &'a Stack,
    /// The stand-in that plays the one-episode runs' manager.
    pub standin: &'a StandInModel,
    /// The model name `profiles.episode_manager` asks the stand-in for.
    pub episode_manager_model: String,
    pub profiles: ArmProfiles,
    pub caps: LongCaps,
    /// Environment of the bench's own checks (PATH with `loopgate` first, `LOOPGATE_BIN`).
    pub check_env: Vec<(String, String)>,
    pub hidden_timeouts: HiddenTimeouts,
    /// Hidden outcomes by (task, snapshot): a snapshot is judged once.
    hidden_cache: Mutex<HashMap<(String, String), HiddenOutcome>>,
}

/// One one-episode run.
struct Episode {
    run_id: String,
    view: Value,
    /// The snapshot the run started from.
    base: String,
    candidate: Option<String>,
    /// The executor called `finish`.
    claimed_done: bool,
    note: String,
}

/// How a run (or a continuation's runs) ended, before the hidden checks.
struct Ended {
    rounds: Vec<RoundSnapshots>,
    claimed_done: bool,
    public_passed: Option<u32>,
    tokens: u64,
    tokens_by_role: RoleTokens,
    /// Of `tokens`, the prompt tokens read from the model server's prompt cache.
    cached_prompt_tokens: u64,
    wall: Duration,
    rounds_run: u32,
    terminal_state: String,
    stop_reason: Option<EpisodeStop>,
    run_ids: Vec<String>,
    notes: Vec<String>,
}

impl<'a> LongBench<'a> {
    pub fn new(
        stack: &'a Stack,
        standin: &'a StandInModel,
        episode_manager_model: &str,
        profiles: ArmProfiles,
        caps: LongCaps,
        check_env: Vec<(String, String)>,
        hidden_timeouts: HiddenTimeouts,
    ) -> Self {
        LongBench {
            stack,
            standin,
            episode_manager_model: episode_manager_model.to_string(),
            profiles,
            caps,
            check_env,
            hidden_timeouts,
            hidden_cache: Mutex::new(HashMap::new()),
        }
    }

    /// Run `arm` on `task` and record it.
    pub async fn run_arm(&self, task: &LongTask, arm: Arm) -> anyhow::Result<LongRecord> {
        let ended = if arm.is_episodes() {
            self.run_episodes(task, arm).await?
        } else {
            self.run_loop(task, arm).await?
        };
        self.record(task, arm, ended).await
    }

    async fn run_loop(&self, task: &LongTask, arm: Arm) -> anyhow::Result<Ended> {
        let limits = RunLimits {
            max_total_tokens: self.caps.token_budget,
            max_wall_secs: self.caps.loop_wall_secs,
            executor_episode_secs: self.caps.episode_secs,
        };
        let toml = loop_arm_toml(task, arm, &self.profiles, limits)?;
        let started = Instant::now();
        let id = self.submit(&toml, &task.workspace).await?;
        let timeout = Duration::from_secs(self.caps.loop_wall_secs + GRACE_SECS);
        let (done, wait_note) = wait_for_end(self.stack, &id, timeout).await?;
        let wall = started.elapsed();
        let final_snapshot = done["snapshot"]
            .as_str()
            .context("the run has no snapshot")?;
        let manager_rounds =
            manager_rounds_from_json(&self.stack.get(&format!("/v1/runs/{id}/rounds")).await?);
        let execs = self.stack.log_entries(&id, "exec_result").await?;
        let finishes = execs
            .iter()
            .filter(|e| e["claimed_done"].as_bool().unwrap_or(false))
            .count();
        let state = done["state"].as_str().unwrap_or("?").to_string();
        Ok(Ended {
            rounds: loop_rounds(&manager_rounds, final_snapshot),
            claimed_done: state == "completed",
            public_passed: passing_checks(&done),
            tokens: done["total_tokens"].as_u64().unwrap_or(0),
            tokens_by_role: RoleTokens::from_json(&done["usage"]).unwrap_or_default(),
            cached_prompt_tokens: cached_prompt_tokens(&done["usage"]),
            wall,
            rounds_run: u32::try_from(done["round"].as_u64().unwrap_or(0)).unwrap_or(0),
            terminal_state: state,
            stop_reason: None,
            run_ids: vec![id],
            notes: vec![
                done["terminal_reason"].as_str().unwrap_or("").to_string(),
                format!(
                    "{} executor episodes, {finishes} of them called finish",
                    execs.len()
                ),
                wait_note,
            ],
        })
    }

    /// `single_shot` (one episode) or `continuation` (episodes until the public checks pass or
    /// the budget ends), each episode a one-round run on the last snapshot.
    async fn run_episodes(&self, task: &LongTask, arm: Arm) -> anyhow::Result<Ended> {
        let continuation = arm == Arm::Continuation;
        let budget = EpisodeBudget {
            max_episodes: if continuation {
                task.file.budget.max_rounds.unwrap_or(DEFAULT_EPISODES)
            } else {
                1
            },
            max_tokens: self.caps.token_budget,
            max_wall: Duration::from_secs(if continuation {
                self.caps.loop_wall_secs
            } else {
                self.caps.single_wall_secs
            }),
        };
        let started = Instant::now();
        let mut workspace = task.workspace.clone();
        let mut failing: Vec<FailingCheck> = Vec::new();
        let mut episodes: Vec<Episode> = Vec::new();
        let mut tokens = 0u64;
        let mut by_role = RoleTokens::default();
        let mut cached = 0u64;
        let stop = loop {
            let done = u32::try_from(episodes.len()).unwrap_or(u32::MAX);
            let allowance =
                match next_episode(budget, done, tokens, started.elapsed(), failing.len()) {
                    Ok(allowance) => allowance,
                    Err(stop) => break stop,
                };
            let goal = continuation_goal(&task.file.goal, &failing);
            let episode = self.run_episode(task, &goal, &workspace, allowance).await?;
            tokens += episode.view["total_tokens"].as_u64().unwrap_or(0);
            by_role.add(RoleTokens::from_json(&episode.view["usage"]).unwrap_or_default());
            cached += cached_prompt_tokens(&episode.view["usage"]);
            // An episode that froze nothing leaves what it started from.
            let held = episode
                .candidate
                .clone()
                .unwrap_or_else(|| episode.base.clone());
            episodes.push(episode);
            if continuation {
                // The next episode starts from what this one left, as `loopgate checkout` and
                // `loopgate submit --workspace` would carry it.
                let tree = tempfile::tempdir()?;
                self.stack.checkout(&held, tree.path()).await?;
                workspace = read_workspace(tree.path())?;
                failing = self.failing_public_checks(task, tree.path()).await?;
            }
        };
        let wall = started.elapsed();
        let first = episodes.first().context("no episode ran")?;
        let last = episodes.last().context("no episode ran")?;
        let candidates: Vec<Option<String>> =
            episodes.iter().map(|e| e.candidate.clone()).collect();
        let mut notes: Vec<String> = Vec::new();
        for (i, e) in episodes.iter().enumerate() {
            notes.push(format!("episode {}: {}", i + 1, e.note));
        }
        if continuation {
            notes.push(format!(
                "stopped: {} after {} episode(s)",
                stop.as_str(),
                episodes.len()
            ));
        }
        Ok(Ended {
            rounds: episode_rounds(&first.base, &candidates),
            claimed_done: if continuation {
                stop == EpisodeStop::ChecksPass
            } else {
                first.claimed_done
            },
            public_passed: passing_checks(&last.view),
            tokens,
            tokens_by_role: by_role,
            cached_prompt_tokens: cached,
            wall,
            rounds_run: u32::try_from(episodes.len()).unwrap_or(u32::MAX),
            terminal_state: last.view["state"].as_str().unwrap_or("?").to_string(),
            stop_reason: continuation.then_some(stop),
            run_ids: episodes.iter().map(|e| e.run_id.clone()).collect(),
            notes,
        })
    }

    /// One one-round run of `goal` on `workspace`: the stand-in manager hands the executor the
    /// goal as its step, the executor runs once, the mechanical audit runs the public checks.
    async fn run_episode(
        &self,
        task: &LongTask,
        goal: &str,
        workspace: &[WorkspaceFile],
        allowance: EpisodeAllowance,
    ) -> anyhow::Result<Episode> {
        self.standin.set_fallback(
            &self.episode_manager_model,
            Reply::with_usage(
                0,
                0,
                Reply::content(format!(
                    "Current task state: the workspace as the last episode left it\nNext: cli\nTask: {}",
                    task.goal_line()
                )),
            ),
        );
        let wall_secs = allowance.wall.as_secs().max(1);
        let limits = RunLimits {
            max_total_tokens: allowance.tokens,
            max_wall_secs: wall_secs,
            executor_episode_secs: self.caps.episode_secs,
        };
        let toml = episode_toml(task, goal, &self.profiles, limits)?;
        let id = self.submit(&toml, workspace).await?;
        let (view, wait_note) =
            wait_for_end(self.stack, &id, Duration::from_secs(wall_secs + GRACE_SECS)).await?;
        let rounds =
            manager_rounds_from_json(&self.stack.get(&format!("/v1/runs/{id}/rounds")).await?);
        let base = rounds
            .first()
            .map(|r| r.base.clone())
            .or_else(|| view["snapshot"].as_str().map(str::to_string))
            .context("the run has no snapshot")?;
        let execs = self.stack.log_entries(&id, "exec_result").await?;
        let first = execs.first().cloned().unwrap_or(Value::Null);
        let executor = match first["error"].as_str() {
            Some(err) => format!("executor failed: {err}"),
            None if first.is_null() => "no executor result".to_string(),
            None => format!(
                "executor: {} ({} tool calls)",
                first["summary"].as_str().unwrap_or(""),
                first["tool_calls"].as_u64().unwrap_or(0)
            ),
        };
        Ok(Episode {
            base,
            candidate: first["candidate"].as_str().map(str::to_string),
            claimed_done: first["claimed_done"].as_bool().unwrap_or(false),
            note: join_notes(&[
                executor,
                wait_note,
                view["state"].as_str().unwrap_or("?").to_string(),
            ]),
            run_id: id,
            view,
        })
    }

    /// The task's public checks that fail on `tree`, each run by the bench in its own scratch
    /// copy as the auditor runs it.
    async fn failing_public_checks(
        &self,
        task: &LongTask,
        tree: &Path,
    ) -> anyhow::Result<Vec<FailingCheck>> {
        let env = self.env_for(task);
        let mut failing = Vec::new();
        for check in task.public_checks() {
            let run = run_in_scratch_copy(
                tree,
                &ScratchCommand::shell(&check.command, &env, check.timeout),
            )
            .await?;
            if !run.passed() {
                failing.push(FailingCheck {
                    id: check.id,
                    command: check.command,
                    exit_code: run.exit_code,
                    timed_out: run.timed_out,
                    output: run.output(),
                });
            }
        }
        Ok(failing)
    }

    fn env_for(&self, task: &LongTask) -> Vec<(String, String)> {
        let mut env = self.check_env.clone();
        env.extend(task.check_env());
        env
    }

    /// The hidden criteria `snapshot` passes (checked out and judged once per task).
    async fn hidden_of(&self, task: &LongTask, snapshot: &str) -> anyhow::Result<HiddenOutcome> {
        let key = (task.name.clone(), snapshot.to_string());
        if let Some(known) = self.cached(&key) {
            return Ok(known);
        }
        let tree = tempfile::tempdir()?;
        self.stack.checkout(snapshot, tree.path()).await?;
        let outcome = run_hidden_check(
            &task.hidden_check,
            tree.path(),
            &task.criterion_ids(),
            &self.env_for(task),
            self.hidden_timeouts.for_task(&task.name),
        )
        .await?;
        if let Ok(mut cache) = self.hidden_cache.lock() {
            cache.insert(key, outcome.clone());
        }
        Ok(outcome)
    }

    fn cached(&self, key: &(String, String)) -> Option<HiddenOutcome> {
        self.hidden_cache
            .lock()
            .ok()
            .and_then(|cache| cache.get(key).cloned())
    }

    async fn record(&self, task: &LongTask, arm: Arm, ended: Ended) -> anyhow::Result<LongRecord> {
        let mut judged: HashMap<String, HiddenOutcome> = HashMap::new();
        for snapshot in distinct_snapshots(&ended.rounds) {
            let outcome = self.hidden_of(task, &snapshot).await?;
            judged.insert(snapshot, outcome);
        }
        let points = curve(&ended.rounds, |s| {
            judged.get(s).map_or(0, HiddenOutcome::passed_count)
        });
        let summary = summarize(&points);
        let final_snapshot = ended
            .rounds
            .last()
            .map(|r| r.kept.clone())
            .unwrap_or_default();
        let hidden = judged.get(&final_snapshot).cloned().unwrap_or_default();
        let criteria = u32::try_from(task.criterion_ids().len()).unwrap_or(u32::MAX);
        let hidden_passed = hidden.passed_count();
        let mut notes = ended.notes;
        notes.push(format!("runs {}", ended.run_ids.join(", ")));
        Ok(LongRecord {
            task: task.name.clone(),
            kind: task.kind.clone(),
            arm: arm.name().to_string(),
            criteria,
            hidden_passed,
            hidden,
            claimed_done: ended.claimed_done,
            false_completion: ended.claimed_done && hidden_passed < criteria,
            public_passed: ended.public_passed,
            curve: points,
            summary,
            tokens: ended.tokens,
            tokens_by_role: ended.tokens_by_role,
            cached_prompt_tokens: ended.cached_prompt_tokens,
            wall_s: (ended.wall.as_secs_f64() * 10.0).round() / 10.0,
            rounds: ended.rounds_run,
            terminal_state: ended.terminal_state,
            stop_reason: ended.stop_reason.map(|s| s.as_str().to_string()),
            run_ids: ended.run_ids,
            note: join_notes(&notes),
        })
    }

    /// Submit `toml` with `workspace` as the starting workspace (`POST /v1/runs`, as `loopgate
    /// submit --workspace` does); the run's id.
    async fn submit(&self, toml: &str, workspace: &[WorkspaceFile]) -> anyhow::Result<String> {
        let task = parse_task_file_toml(toml)?;
        let mut body = json!({ "task": task });
        if !workspace.is_empty() {
            let files: Vec<Value> = workspace
                .iter()
                .map(|f| {
                    json!({
                        "path": f.path,
                        "mode": f.mode,
                        "content_b64": base64::engine::general_purpose::STANDARD.encode(&f.bytes),
                    })
                })
                .collect();
            body["workspace"] = json!({ "files": files });
        }
        let (status, answer) = self.stack.post_raw("/v1/runs", &body).await?;
        if !(200..300).contains(&status) {
            bail!("submit failed: {status} {answer}");
        }
        Ok(answer["id"]
            .as_str()
            .context("submit answered without an id")?
            .to_string())
    }
}

/// The public checks passing on the run's last audit (`checks.passing`).
fn passing_checks(view: &Value) -> Option<u32> {
    view["checks"]["passing"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

fn join_notes(parts: &[String]) -> String {
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
