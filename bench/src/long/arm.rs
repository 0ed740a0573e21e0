//! The arms of the long suite and the task file each one submits. Every arm gets the same
//! token budget; an ablation is loopgate as shipped with one part turned off through the task
//! file's own knob. Pure: the task files are built and validated, nothing is sent.

use anyhow::{bail, Context};
use loopgate_common::task::{ProfileChoice, TaskFile};

use crate::long::task::LongTask;
use crate::task_toml::{budget_accepts_bool, with_budget_bool};

/// One arm of the long suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arm {
    /// One executor episode on the goal; the executor's own `finish` is its claim.
    SingleShot,
    /// The loop a user scripts around the same executor: one-episode runs, each on the last
    /// snapshot, with the goal and the public checks' failing output, until they pass or the
    /// budget ends. No manager, no judge, no derived criteria.
    Continuation,
    /// The full loop as shipped (the task's roles: a local-model manager, executor and judge).
    Loopgate,
    /// `budget.rollback_regressions = false`.
    NoRollback,
    /// `budget.self_checks = 0`.
    NoSelfCheck,
    /// `budget.step_retries = 0`.
    NoStepRetry,
    /// `derive_criteria = false`.
    NoDerive,
    /// No `roles.auditor`: no judge (and so no judged criteria).
    NoJudge,
    /// `[budget] manager = false`: the goal as every step, no manager model.
    NoManager,
    /// `[budget] clause_steps = false`: the manager chooses every step.
    NoClauseSteps,
    /// `judge_quotes = false`: a judge's bare `met` stands without a quote of its evidence.
    NoJudgeQuotes,
    /// Not an ablation: loopgate as shipped with `[budget] attempts = 3` (each step as three
    /// sibling episodes, the auditor's evidence picks the winner), on a stack of two executors.
    Attempts3,
    /// Not an ablation: loopgate as shipped with `[budget] goal_first = true` (the whole goal
    /// as the first step, audited; then the clauses still failing, one at a time).
    GoalFirst,
}

/// Every arm, in the order the bench runs them.
pub const ALL_ARMS: [Arm; 13] = [
    Arm::SingleShot,
    Arm::Continuation,
    Arm::Loopgate,
    Arm::NoRollback,
    Arm::NoSelfCheck,
    Arm::NoStepRetry,
    Arm::NoDerive,
    Arm::NoJudge,
    Arm::NoManager,
    Arm::NoClauseSteps,
    Arm::NoJudgeQuotes,
    Arm::Attempts3,
    Arm::GoalFirst,
];

/// Executors on the stack of a task whose arms include these: two when an arm runs parallel
/// attempts (`attempts_3`), else one.
pub fn executors_for(arms: &[Arm]) -> usize {
    if arms.contains(&Arm::Attempts3) {
        2
    } else {
        1
    }
}

/// The budget key the manager ablation needs; not in every build.
pub const MANAGER_KNOB: &str = "manager";

/// The profile names an arm's task file points its roles at.
#[derive(Debug, Clone)]
pub struct ArmProfiles {
    /// The loop's manager (the local model).
    pub manager: String,
    /// Every arm's executor.
    pub executor: String,
    /// The judge of the arms that have one (`roles.auditor`).
    pub judge: String,
    /// The one-episode runs' manager: a stand-in that answers `Next: cli` with the goal.
    pub episode_manager: String,
}

/// The limits of one run, written over the task's own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    pub max_total_tokens: u64,
    pub max_wall_secs: u64,
    pub executor_episode_secs: u64,
}

impl Arm {
    pub fn name(self) -> &'static str {
        match self {
            Arm::SingleShot => "single_shot",
            Arm::Continuation => "continuation",
            Arm::Loopgate => "loopgate",
            Arm::NoRollback => "no_rollback",
            Arm::NoSelfCheck => "no_self_check",
            Arm::NoStepRetry => "no_step_retry",
            Arm::NoDerive => "no_derive",
            Arm::NoJudge => "no_judge",
            Arm::NoManager => "no_manager",
            Arm::NoClauseSteps => "no_clause_steps",
            Arm::NoJudgeQuotes => "no_judge_quotes",
            Arm::Attempts3 => "attempts_3",
            Arm::GoalFirst => "goal_first",
        }
    }

    pub fn from_name(name: &str) -> Option<Arm> {
        ALL_ARMS.into_iter().find(|a| a.name() == name)
    }

    /// What the arm is, in one line (the report's notes).
    pub fn description(self) -> &'static str {
        match self {
            Arm::SingleShot => "one executor episode on the goal (stand-in manager, no self-check, mechanical audit only); claimed done = the executor called finish",
            Arm::Continuation => "the loop a user scripts: one-episode runs like single_shot, each uploading the last episode's snapshot with the goal plus \"These checks fail:\" and the failing public checks' commands and output (the bench runs the public checks between episodes), until they pass or the tokens, rounds (the task's max_rounds) or wall time run out; no manager, no judge, no derived criteria; claimed done = the public checks pass",
            Arm::Loopgate => "loopgate as shipped: the task's roles (a local-model manager, executor and judge) and budget; claimed done = the run completed",
            Arm::NoRollback => "loopgate with budget.rollback_regressions = false (a regressing candidate is kept)",
            Arm::NoSelfCheck => "loopgate with budget.self_checks = 0 (no check inside the episode before finish)",
            Arm::NoStepRetry => "loopgate with budget.step_retries = 0 (every failed round goes back to the manager)",
            Arm::NoDerive => "loopgate with derive_criteria = false (no judged criteria derived from uncovered goal clauses)",
            Arm::NoJudge => "loopgate without roles.auditor (no judge, no judged criteria)",
            Arm::NoManager => "loopgate with [budget] manager = false (the goal as every step, no manager model)",
            Arm::NoClauseSteps => "loopgate with budget.clause_steps = false (the manager chooses every step, the first one too, instead of the first failing goal clause with its checks)",
            Arm::NoJudgeQuotes => "loopgate with judge_quotes = false (a judge's met stands without quoting the evidence it rests on)",
            Arm::Attempts3 => "loopgate with [budget] attempts = 3 (every step as three sibling episodes from the same base, the candidate passing most blocking checks wins; two executors on the stack)",
            Arm::GoalFirst => "loopgate with [budget] goal_first = true (the first step is the whole goal in one episode, self-checked and audited against every criterion; then the clause policy gives the clauses still failing, one at a time, with rollback keeping the best snapshot)",
        }
    }

    /// An arm made of one-episode runs (no manager model).
    pub fn is_episodes(self) -> bool {
        matches!(self, Arm::SingleShot | Arm::Continuation)
    }

    /// Why this build cannot run the arm, if it cannot: the knob it needs does not exist yet.
    pub fn missing_knob(self) -> Option<String> {
        match self {
            Arm::NoManager if !budget_accepts_bool(MANAGER_KNOB, false) => Some(format!(
                "arm {}: needs [budget] {MANAGER_KNOB} = false (not built yet): this build's task \
                 file has no such key",
                self.name()
            )),
            _ => None,
        }
    }
}

/// `--arms a,b,c`: the named arms in that order; an unknown name, a repeat or an arm this build
/// cannot run is an error. `None` (no `--arms`): every arm this build can run, and a note for
/// each one left out.
pub fn select_arms(names: Option<&[String]>) -> anyhow::Result<(Vec<Arm>, Vec<String>)> {
    let Some(names) = names else {
        let mut notes = Vec::new();
        let arms = ALL_ARMS
            .into_iter()
            .filter(|arm| match arm.missing_knob() {
                Some(why) => {
                    notes.push(format!("Not run: {why}."));
                    false
                }
                None => true,
            })
            .collect();
        return Ok((arms, notes));
    };
    let mut arms = Vec::new();
    for name in names {
        let arm = Arm::from_name(name).with_context(|| {
            format!(
                "unknown arm {name} (have: {})",
                ALL_ARMS.map(Arm::name).join(", ")
            )
        })?;
        if arms.contains(&arm) {
            bail!("arm {name} is named twice");
        }
        if let Some(why) = arm.missing_knob() {
            bail!("{why}");
        }
        arms.push(arm);
    }
    if arms.is_empty() {
        bail!("--arms names no arm");
    }
    Ok((arms, Vec::new()))
}

/// The task file of a loop arm (`loopgate` or an ablation): the task as written, its roles on
/// the bench's profiles, the shared limits over its budget, and the arm's one part off.
pub fn loop_arm_toml(
    task: &LongTask,
    arm: Arm,
    profiles: &ArmProfiles,
    limits: RunLimits,
) -> anyhow::Result<String> {
    if arm.is_episodes() {
        bail!("arm {} is not a loop arm", arm.name());
    }
    let mut file = task.file.clone();
    file.roles.manager = Some(profiles.manager.clone());
    file.roles.executor = Some(ProfileChoice::One(profiles.executor.clone()));
    // As shipped, the long tasks name a judge (`auditor = "local"`); keep the task's choice.
    file.roles.auditor = task
        .file
        .roles
        .auditor
        .as_ref()
        .map(|_| profiles.judge.clone());
    set_limits(&mut file, limits);
    match arm {
        Arm::NoRollback => file.budget.rollback_regressions = Some(false),
        Arm::NoSelfCheck => file.budget.self_checks = Some(0),
        Arm::NoStepRetry => file.budget.step_retries = Some(0),
        Arm::NoDerive => file.derive_criteria = Some(false),
        Arm::NoJudge => file.roles.auditor = None,
        Arm::NoClauseSteps => file.budget.clause_steps = Some(false),
        Arm::NoJudgeQuotes => file.judge_quotes = Some(false),
        Arm::Attempts3 => file.budget.attempts = Some(3),
        Arm::GoalFirst => file.budget.goal_first = Some(true),
        _ => {}
    }
    let text = to_toml(task, &file)?;
    if arm == Arm::NoManager {
        if let Some(why) = arm.missing_knob() {
            bail!("{why}");
        }
        return Ok(with_budget_bool(&text, MANAGER_KNOB, false)?);
    }
    Ok(text)
}

/// The task file of one episode of `single_shot` or `continuation`: `goal` (the task's, or the
/// task's with the failing checks), the stand-in manager, one round, no self-check, no step
/// retry, no clause step (the episode's step is the whole goal), no judge and no derived
/// criteria; the public checks stay the criteria, so the
/// mechanical audit runs them (it spends no tokens).
pub fn episode_toml(
    task: &LongTask,
    goal: &str,
    profiles: &ArmProfiles,
    limits: RunLimits,
) -> anyhow::Result<String> {
    let mut file = task.file.clone();
    file.goal = goal.to_string();
    file.roles.manager = Some(profiles.episode_manager.clone());
    file.roles.executor = Some(ProfileChoice::One(profiles.executor.clone()));
    file.roles.auditor = None;
    file.derive_criteria = Some(false);
    set_limits(&mut file, limits);
    file.budget.max_rounds = Some(1);
    file.budget.self_checks = Some(0);
    file.budget.step_retries = Some(0);
    file.budget.clause_steps = Some(false);
    to_toml(task, &file)
}

fn set_limits(file: &mut TaskFile, limits: RunLimits) {
    file.budget.max_total_tokens = Some(limits.max_total_tokens.max(1));
    file.budget.max_wall_secs = Some(limits.max_wall_secs.max(1));
    file.budget.executor_episode_secs = Some(limits.executor_episode_secs.max(1));
}

fn to_toml(task: &LongTask, file: &TaskFile) -> anyhow::Result<String> {
    file.validate()
        .with_context(|| format!("task {} after the bench's overrides", task.name))?;
    Ok(toml::to_string(file)?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::long::task::{load_long_task, long_suite_dir};
    use loopgate_common::task::parse_task_file_toml;

    fn profiles() -> ArmProfiles {
        ArmProfiles {
            manager: "mgr".into(),
            executor: "exec".into(),
            judge: "mgr".into(),
            episode_manager: "single-shot-mgr".into(),
        }
    }

    const LIMITS: RunLimits = RunLimits {
        max_total_tokens: 1000,
        max_wall_secs: 60,
        executor_episode_secs: 30,
    };

    #[test]
    fn only_the_attempts_arm_asks_for_a_second_executor() {
        assert_eq!(executors_for(&[Arm::Continuation, Arm::Loopgate]), 1);
        assert_eq!(executors_for(&[Arm::Loopgate, Arm::Attempts3]), 2);
        assert_eq!(executors_for(&[]), 1);
    }

    #[test]
    fn arm_names_round_trip() {
        for arm in ALL_ARMS {
            assert_eq!(Arm::from_name(arm.name()), Some(arm));
        }
        assert_eq!(Arm::from_name("loop"), None);
    }

    #[test]
    fn each_loop_arm_turns_off_its_part_only() {
        let task = load_long_task(&long_suite_dir().join("ledger-cli")).unwrap();
        let shipped = parse_task_file_toml(
            &loop_arm_toml(&task, Arm::Loopgate, &profiles(), LIMITS).unwrap(),
        )
        .unwrap();
        assert_eq!(shipped.roles.manager.as_deref(), Some("mgr"));
        assert_eq!(
            shipped.roles.auditor.as_deref(),
            Some("mgr"),
            "the task names a judge"
        );
        assert_eq!(shipped.budget.max_total_tokens, Some(1000));
        assert_eq!(shipped.budget.max_rounds, task.file.budget.max_rounds);
        type PartOff = fn(&TaskFile) -> bool;
        let cases: [(Arm, PartOff); 9] = [
            (Arm::NoRollback, |f| {
                f.budget.rollback_regressions == Some(false)
            }),
            (Arm::NoSelfCheck, |f| f.budget.self_checks == Some(0)),
            (Arm::NoStepRetry, |f| f.budget.step_retries == Some(0)),
            (Arm::NoDerive, |f| f.derive_criteria == Some(false)),
            (Arm::NoJudge, |f| f.roles.auditor.is_none()),
            (Arm::NoClauseSteps, |f| f.budget.clause_steps == Some(false)),
            (Arm::NoJudgeQuotes, |f| f.judge_quotes == Some(false)),
            (Arm::Attempts3, |f| f.budget.attempts == Some(3)),
            (Arm::GoalFirst, |f| f.budget.goal_first == Some(true)),
        ];
        for (arm, part_off) in cases {
            let file =
                parse_task_file_toml(&loop_arm_toml(&task, arm, &profiles(), LIMITS).unwrap())
                    .unwrap();
            assert!(part_off(&file), "{}", arm.name());
            assert!(!part_off(&shipped), "{} is on as shipped", arm.name());
        }
        assert!(loop_arm_toml(&task, Arm::Continuation, &profiles(), LIMITS).is_err());
    }

    #[test]
    fn the_manager_ablation_runs_with_its_knob() {
        let task = load_long_task(&long_suite_dir().join("ledger-cli")).unwrap();
        // This build has `[budget] manager`: the arm is runnable and selected by default.
        assert_eq!(Arm::NoManager.missing_knob(), None);
        let text = loop_arm_toml(&task, Arm::NoManager, &profiles(), LIMITS).unwrap();
        let file = parse_task_file_toml(&text).unwrap();
        assert_eq!(file.budget.manager, Some(false), "{text}");
        assert!(file.validate().is_ok());
        let (arms, notes) = select_arms(None).unwrap();
        assert_eq!(arms, ALL_ARMS);
        assert!(notes.is_empty(), "{notes:?}");
        let (arms, _) = select_arms(Some(&["no_manager".to_string()])).unwrap();
        assert_eq!(arms, [Arm::NoManager]);
    }

    #[test]
    fn arms_are_picked_by_name() {
        let names = |s: &[&str]| s.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let (arms, notes) = select_arms(Some(&names(&["continuation", "loopgate"]))).unwrap();
        assert_eq!(arms, [Arm::Continuation, Arm::Loopgate]);
        assert!(notes.is_empty());
        for bad in [&["nope"][..], &["loopgate", "loopgate"], &[]] {
            assert!(select_arms(Some(&names(bad))).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_episode_is_one_round_with_the_given_goal_and_no_loop_parts() {
        let task = load_long_task(&long_suite_dir().join("ledger-cli")).unwrap();
        let goal = format!("{}\n\nThese checks fail:\n- `true`", task.file.goal);
        let file = parse_task_file_toml(&episode_toml(&task, &goal, &profiles(), LIMITS).unwrap())
            .unwrap();
        assert_eq!(file.goal, goal);
        assert_eq!(file.roles.manager.as_deref(), Some("single-shot-mgr"));
        assert_eq!(file.roles.auditor, None);
        assert_eq!(file.derive_criteria, Some(false));
        assert_eq!(file.budget.max_rounds, Some(1));
        assert_eq!(file.budget.self_checks, Some(0));
        assert_eq!(file.budget.step_retries, Some(0));
        assert_eq!(file.budget.clause_steps, Some(false));
        assert_eq!(
            file.acceptance, task.file.acceptance,
            "the public checks stay"
        );
    }

    /// The `no_clause_steps` arm measures something: in every long task each goal clause is
    /// decided by a blocking check, so the clause policy gives every step of the shipped arm
    /// until the manager is due (web-shopping's `[gui]` one after the manager's first step).
    #[test]
    fn every_long_task_clause_has_a_blocking_check() {
        use loopgate_common::goal::criteria::{clause_coverage, contract_for, ClauseCover};
        for name in [
            "ledger-cli",
            "bughunt-shop",
            "pipeline-orders",
            "refactor-report",
            "textkit-lib",
            "web-shopping",
        ] {
            let task = load_long_task(&long_suite_dir().join(name)).unwrap();
            let contract = contract_for(&task.file.validate().unwrap());
            for cover in clause_coverage(
                &contract.goal,
                &contract.criteria,
                &contract.protected_paths,
            ) {
                let checked = match &cover.cover {
                    ClauseCover::Criterion(id) => contract
                        .criteria
                        .iter()
                        .any(|c| &c.id == id && c.blocking && c.check.is_some()),
                    _ => false,
                };
                assert!(checked, "{name}: {}", cover.clause);
            }
            assert_eq!(task.file.gui.is_some(), name == "web-shopping", "{name}");
        }
    }
}
