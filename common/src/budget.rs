//! Budgets: rounds, episode deadlines, tokens. Exhaustion is a terminal state, never a hang.

use serde::{Deserialize, Serialize};

pub const DEFAULT_MAX_ROUNDS: u32 = 25;
pub const HARD_CAP_ROUNDS: u32 = 1000;
/// Self-checks an executor episode may run before `finish` is accepted unchecked.
pub use loopgate_protocol::wire::DEFAULT_SELF_CHECKS;
/// At most this many self-checks per episode.
pub const MAX_SELF_CHECKS: u32 = 20;
/// Failed steps retried in a row without a manager decision, by default.
pub const DEFAULT_STEP_RETRIES: u32 = 1;
/// At most this many retries in a row.
pub const MAX_STEP_RETRIES: u32 = 20;
/// Sibling episodes per executor step, by default (one: no siblings).
pub const DEFAULT_ATTEMPTS: u32 = 1;
/// At most this many sibling episodes per step.
pub const MAX_ATTEMPTS: u32 = 8;

/// The task file's `[budget]` keys as written (also the body of a resume's budget changes).
/// Each key's range in the OpenAPI schema is the one [`BudgetFile::validate_over`] checks
/// (`loopgate-api`'s tests hold the two together).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BudgetFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub max_rounds: Option<u32>,
    /// Unparseable manager replies in a row before the run ends `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 100))]
    pub max_invalid_outputs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub manager_episode_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub executor_episode_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub auditor_episode_secs: Option<u64>,
    /// Tool-loop steps per executor episode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 18446744073709551615_u64)
    )]
    pub max_total_tokens: Option<u64>,
    /// Total model cost in US dollars (from the daemons' per-profile price tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 1000000))]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock limit for the whole run, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2592000))]
    pub max_wall_secs: Option<u64>,
    /// Consecutive failed rounds before the run stops and asks a human.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub max_failed_rounds: Option<u32>,
    /// How long a dispatched step may wait for a worker to pick it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub start_secs: Option<u64>,
    /// Failed audits in a row before the executor escalates to the next profile of its ladder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub escalate_after: Option<u32>,
    /// Refused `done` replies in a row before the run ends `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub max_done_refusals: Option<u32>,
    /// Audited rounds in a row without progress (no newly passing criterion, no new failure
    /// output) before the harness escalates; 0 never escalates for stagnation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    pub stagnation_rounds: Option<u32>,
    /// Times per executor episode its `finish` runs the step's blocking checks on the live
    /// workspace (and is refused while one fails); 0 disables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 20))]
    pub self_checks: Option<u32>,
    /// How long past a started episode's own time limit the manager waits for its result
    /// before it counts the episode lost (a stalled or partitioned worker) and fails only that
    /// step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub episode_grace_secs: Option<u64>,
    /// After a round whose audit failed, the same step goes straight back to an executor with
    /// that audit's evidence, without a manager decision, at most this many times in a row; 0
    /// asks the manager after every round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 20))]
    pub step_retries: Option<u32>,
    /// A candidate that passes fewer blocking criteria than the current snapshot is set aside,
    /// and the artifact stays at the current snapshot (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_regressions: Option<bool>,
    /// Before the first step, the starting workspace's checks are run (checks only, no model
    /// asked), so a first candidate that breaks what already passed is set aside like any
    /// later regression, and the first clause step skips clauses that pass already (default
    /// true; runs with a planning stage have no baseline: their contract is not final yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_checks: Option<bool>,
    /// When each clause of the goal has a blocking check, the next step is the first clause
    /// whose checks fail, in the goal's own words, without a manager call (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause_steps: Option<bool>,
    /// With `clause_steps`: the first step is the whole goal (one episode checked against
    /// every criterion), and the clause policy then takes the clauses that still fail
    /// (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_first: Option<bool>,
    /// false: no manager model is called; every step is the goal itself and the run ends on
    /// the gate or a budget (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<bool>,
    /// Sibling episodes each `cli`/`gui` step is dispatched as, from the same base snapshot;
    /// the auditor's evidence picks the winner (default 1: one episode, as without the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 8))]
    pub attempts: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub max_rounds: u32,
    pub max_invalid_outputs: u32,
    pub manager_episode_secs: u64,
    pub executor_episode_secs: u64,
    pub auditor_episode_secs: u64,
    pub max_steps: u32,
    pub max_total_tokens: Option<u64>,
    #[serde(default)]
    pub max_cost_micros: Option<u64>,
    #[serde(default)]
    pub max_wall_secs: Option<u64>,
    #[serde(default = "default_max_failed_rounds")]
    pub max_failed_rounds: u32,
    #[serde(default = "default_start_secs")]
    pub start_secs: u64,
    #[serde(default = "default_escalate_after")]
    pub escalate_after: u32,
    #[serde(default = "default_max_done_refusals")]
    pub max_done_refusals: u32,
    #[serde(default = "default_stagnation_rounds")]
    pub stagnation_rounds: u32,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(
        default = "default_self_checks",
        skip_serializing_if = "is_default_self_checks"
    )]
    pub self_checks: u32,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(
        default = "default_episode_grace_secs",
        skip_serializing_if = "is_default_episode_grace_secs"
    )]
    pub episode_grace_secs: u64,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(
        default = "default_step_retries",
        skip_serializing_if = "is_default_step_retries"
    )]
    pub step_retries: u32,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub rollback_regressions: bool,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub baseline_checks: bool,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub clause_steps: bool,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(default, skip_serializing_if = "is_false")]
    pub goal_first: bool,
    /// Stored only when it is not the default, so records keep the keys they had.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub manager: bool,
    /// Sibling episodes per executor step. Stored only when it is not the default, so
    /// records keep the keys they had.
    #[serde(
        default = "default_attempts",
        skip_serializing_if = "is_default_attempts"
    )]
    pub attempts: u32,
}

fn default_attempts() -> u32 {
    DEFAULT_ATTEMPTS
}

fn is_default_attempts(value: &u32) -> bool {
    *value == DEFAULT_ATTEMPTS
}

fn default_true() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn default_step_retries() -> u32 {
    DEFAULT_STEP_RETRIES
}

fn is_default_step_retries(value: &u32) -> bool {
    *value == DEFAULT_STEP_RETRIES
}

/// Default slack on top of a started episode's own time limit (the worker enforces the limit
/// itself; this covers its freeze and result publish).
pub const DEFAULT_EPISODE_GRACE_SECS: u64 = 60;

fn default_episode_grace_secs() -> u64 {
    DEFAULT_EPISODE_GRACE_SECS
}

fn is_default_episode_grace_secs(value: &u64) -> bool {
    *value == DEFAULT_EPISODE_GRACE_SECS
}

pub(crate) fn default_self_checks() -> u32 {
    DEFAULT_SELF_CHECKS
}

fn is_default_self_checks(value: &u32) -> bool {
    *value == DEFAULT_SELF_CHECKS
}

fn default_max_done_refusals() -> u32 {
    10
}

fn default_stagnation_rounds() -> u32 {
    2
}

fn default_escalate_after() -> u32 {
    2
}

fn default_max_failed_rounds() -> u32 {
    5
}

fn default_start_secs() -> u64 {
    120
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_rounds: DEFAULT_MAX_ROUNDS,
            max_invalid_outputs: 3,
            manager_episode_secs: 300,
            executor_episode_secs: 1800,
            auditor_episode_secs: 300,
            max_steps: 16,
            max_total_tokens: None,
            max_cost_micros: None,
            max_wall_secs: None,
            max_failed_rounds: default_max_failed_rounds(),
            start_secs: default_start_secs(),
            escalate_after: default_escalate_after(),
            max_done_refusals: default_max_done_refusals(),
            stagnation_rounds: default_stagnation_rounds(),
            self_checks: DEFAULT_SELF_CHECKS,
            episode_grace_secs: DEFAULT_EPISODE_GRACE_SECS,
            step_retries: DEFAULT_STEP_RETRIES,
            rollback_regressions: true,
            baseline_checks: true,
            clause_steps: true,
            goal_first: false,
            manager: true,
            attempts: DEFAULT_ATTEMPTS,
        }
    }
}

impl BudgetFile {
    /// Resolve against defaults; an error names the offending key (without the `budget.` prefix).
    pub fn validate(&self) -> Result<Budget, (String, String)> {
        self.validate_over(&Budget::default())
    }

    /// Resolve the keys given here over `base` (a resumed run's new budget). Keys are checked
    /// in the order below; the first out of range is the error.
    pub fn validate_over(&self, base: &Budget) -> Result<Budget, (String, String)> {
        let d = base;
        let day = 86_400;
        // A count key (or a duration key in seconds, from 1): the value given here, else
        // `base`'s, within its bounds; the key's name is the field's.
        macro_rules! count {
            ($key:ident, $lo:expr, $hi:expr) => {
                count(stringify!($key), self.$key, d.$key, $lo, $hi)?
            };
        }
        macro_rules! secs {
            ($key:ident, $hi:expr) => {
                in_range(stringify!($key), self.$key.unwrap_or(d.$key), 1, $hi)?
            };
        }
        Ok(Budget {
            max_rounds: count!(max_rounds, 1, HARD_CAP_ROUNDS),
            max_invalid_outputs: count!(max_invalid_outputs, 0, 100),
            manager_episode_secs: secs!(manager_episode_secs, day),
            executor_episode_secs: secs!(executor_episode_secs, day),
            auditor_episode_secs: secs!(auditor_episode_secs, day),
            max_steps: count!(max_steps, 1, 1000),
            max_total_tokens: match self.max_total_tokens {
                Some(0) => return Err(("max_total_tokens".into(), "must be positive".into())),
                None => d.max_total_tokens,
                other => other,
            },
            max_cost_micros: cost_micros(self.max_cost_usd, d.max_cost_micros)?,
            max_wall_secs: match self.max_wall_secs {
                None => d.max_wall_secs,
                Some(v) => Some(in_range("max_wall_secs", v, 1, 30 * day)?),
            },
            max_failed_rounds: count!(max_failed_rounds, 1, 1000),
            start_secs: secs!(start_secs, day),
            escalate_after: count!(escalate_after, 1, 1000),
            max_done_refusals: count!(max_done_refusals, 1, 1000),
            stagnation_rounds: count!(stagnation_rounds, 0, 1000),
            self_checks: count!(self_checks, 0, MAX_SELF_CHECKS),
            episode_grace_secs: secs!(episode_grace_secs, day),
            step_retries: count!(step_retries, 0, MAX_STEP_RETRIES),
            rollback_regressions: self.rollback_regressions.unwrap_or(d.rollback_regressions),
            baseline_checks: self.baseline_checks.unwrap_or(d.baseline_checks),
            clause_steps: self.clause_steps.unwrap_or(d.clause_steps),
            goal_first: self.goal_first.unwrap_or(d.goal_first),
            manager: self.manager.unwrap_or(d.manager),
            attempts: count!(attempts, 1, MAX_ATTEMPTS),
        })
    }
}

/// `v` when it lies in `lo..=hi`; else the key and why.
fn in_range(key: &str, v: u64, lo: u64, hi: u64) -> Result<u64, (String, String)> {
    if v < lo || v > hi {
        Err((
            key.to_string(),
            format!("must be between {lo} and {hi}, got {v}"),
        ))
    } else {
        Ok(v)
    }
}

/// A count key: the given value, else `base`'s, within `lo..=hi`.
fn count(
    key: &str,
    given: Option<u32>,
    base: u32,
    lo: u32,
    hi: u32,
) -> Result<u32, (String, String)> {
    // Within `u32` bounds, so the value fits.
    Ok(in_range(key, given.unwrap_or(base).into(), lo.into(), hi.into())? as u32)
}

/// `max_cost_usd` in micro-dollars: a positive, finite number of dollars up to a million, else
/// `base`'s when not given.
fn cost_micros(usd: Option<f64>, base: Option<u64>) -> Result<Option<u64>, (String, String)> {
    match usd {
        None => Ok(base),
        Some(usd) if usd.is_finite() && usd > 0.0 && usd <= 1_000_000.0 => {
            Ok(Some((usd * 1_000_000.0).round() as u64))
        }
        Some(_) => Err((
            "max_cost_usd".into(),
            "must be a positive number of dollars".into(),
        )),
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
