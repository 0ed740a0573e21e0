//! The long-task suite (`examples/long`, issue 39) on arms that share one stack, model and
//! token budget: `single_shot`; `continuation`, the loop a user scripts around the same
//! executor (one-episode runs on the last snapshot with the goal and the public checks' failing
//! output, until they pass or the budget ends); `loopgate` as shipped; and loopgate with one
//! part off per ablation arm. Each run records its hidden criteria at the end (k of n, from the
//! task's `hidden/check.sh`, run by the bench on the final snapshot), after every round (the
//! curve), whether it ended at the best snapshot it held, false completions, tokens by role
//! and wall time.

mod arm;
mod continuation;
mod curve;
mod hidden;
mod record;
mod runner;
mod task;

pub use arm::{
    episode_toml, executors_for, loop_arm_toml, select_arms, Arm, ArmProfiles, RunLimits, ALL_ARMS,
    MANAGER_KNOB,
};
pub use continuation::{
    continuation_goal, next_episode, EpisodeAllowance, EpisodeBudget, EpisodeStop, FailingCheck,
    FAILING_HEADER,
};
pub use curve::{
    curve, episode_rounds, loop_rounds, manager_rounds_from_json, summarize, CurvePoint,
    CurveSummary, ManagerRound, RoundSnapshots,
};
pub use hidden::{
    parse_hidden_output, run_hidden_check, HiddenOutcome, HiddenTimeouts, DEFAULT_HIDDEN_SECS,
};
pub use record::{LongRecord, BENCH_ERROR};
pub use runner::{LongBench, LongCaps};
pub use task::{
    load_long_suite, load_long_task, long_suite_dir, read_workspace, LongTask, PublicCheck,
    WorkspaceFile,
};
