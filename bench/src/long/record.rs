//! What the bench records for one task on one arm (one element of `long-<size>.json`'s
//! `results`), and its one-line form for the console.

use serde::{Deserialize, Serialize};

use crate::long::curve::{CurvePoint, CurveSummary};
use crate::long::hidden::HiddenOutcome;
use crate::role_tokens::RoleTokens;

/// The terminal state of a record whose run the bench itself could not carry out.
pub const BENCH_ERROR: &str = "bench_error";

/// One task on one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongRecord {
    pub task: String,
    pub kind: String,
    pub arm: String,
    /// Hidden criteria of the task (n).
    pub criteria: u32,
    /// Hidden criteria the final snapshot passes (k of n), with the failing ones and why.
    pub hidden_passed: u32,
    pub hidden: HiddenOutcome,
    /// The run's claim: single_shot, the executor called `finish`; continuation, the public
    /// checks passed; a loop arm, the run completed.
    pub claimed_done: bool,
    /// Claimed done with a hidden criterion failing.
    pub false_completion: bool,
    /// Public checks passing on the final snapshot, as the run's last audit counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_passed: Option<u32>,
    /// Hidden criteria after every round (round 0: the start).
    pub curve: Vec<CurvePoint>,
    #[serde(flatten)]
    pub summary: CurveSummary,
    /// Every token the arm spent on the task (the runs' totals, as their budgets count them).
    pub tokens: u64,
    pub tokens_by_role: RoleTokens,
    /// Of `tokens`' prompt tokens, those the model server read from its prompt cache (a
    /// prefix it had seen): counted in `tokens` as every budget counts them, but not
    /// computed again. 0 in files written before it was recorded.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// From the first submit to the last run's end (the bench's hidden checks excluded; the
    /// continuation's public checks between episodes included).
    pub wall_s: f64,
    /// Executor rounds (loop arms: the run's round counter; episode arms: episodes run).
    pub rounds: u32,
    /// The (last) run's terminal state, or `bench_error`.
    pub terminal_state: String,
    /// Why the episode loop stopped (`checks_pass`, `episodes`, `tokens`, `wall`); episode arms
    /// only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    pub run_ids: Vec<String>,
    pub note: String,
}

impl LongRecord {
    /// A record of the bench failing to carry the run out (dropped by `--resume`, so it runs
    /// again).
    pub fn bench_error(task: &str, kind: &str, arm: &str, criteria: u32, err: &str) -> Self {
        LongRecord {
            task: task.to_string(),
            kind: kind.to_string(),
            arm: arm.to_string(),
            criteria,
            hidden_passed: 0,
            hidden: HiddenOutcome::default(),
            claimed_done: false,
            false_completion: false,
            public_passed: None,
            curve: Vec::new(),
            summary: CurveSummary::default(),
            tokens: 0,
            tokens_by_role: RoleTokens::default(),
            cached_prompt_tokens: 0,
            wall_s: 0.0,
            rounds: 0,
            terminal_state: BENCH_ERROR.to_string(),
            stop_reason: None,
            run_ids: Vec::new(),
            note: err.chars().take(2000).collect(),
        }
    }

    /// One line for the console.
    pub fn line(&self) -> String {
        format!(
            "{} / {}: hidden {}/{} at the end (best held {} after round {}{}), claimed {}, \
             {} tokens (m/e/a {}/{}/{}; {} from the prompt cache), {} rounds, {:.0} s, {}{}",
            self.task,
            self.arm,
            self.hidden_passed,
            self.criteria,
            self.summary.best_held,
            self.summary.best_held_round,
            if self.summary.final_is_best {
                ""
            } else {
                "; ended below it"
            },
            if self.claimed_done {
                if self.false_completion {
                    "done (FALSE)"
                } else {
                    "done"
                }
            } else {
                "no"
            },
            self.tokens,
            self.tokens_by_role.manager,
            self.tokens_by_role.executor,
            self.tokens_by_role.auditor,
            self.cached_prompt_tokens,
            self.rounds,
            self.wall_s,
            self.terminal_state,
            self.stop_reason
                .as_deref()
                .map(|s| format!(" (stopped: {s})"))
                .unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let mut r = LongRecord::bench_error("t", "k", "loopgate", 3, "boom");
        r.curve.push(CurvePoint {
            round: 0,
            candidate: None,
            candidate_passed: None,
            kept: "s0".into(),
            kept_passed: 0,
        });
        r.summary.final_is_best = true;
        r.stop_reason = Some("tokens".into());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["best_held"], 0, "the summary is flattened: {v}");
        assert_eq!(v["terminal_state"], BENCH_ERROR);
        let back: LongRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        assert!(
            r.line().contains("t / loopgate: hidden 0/3"),
            "{}",
            r.line()
        );
    }
}
