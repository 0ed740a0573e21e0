//! Budgets: rounds, episode deadlines, tokens. Exhaustion is a terminal state, never a hang.

use serde::{Deserialize, Serialize};

pub const DEFAULT_MAX_ROUNDS: u32 = 25;
pub const HARD_CAP_ROUNDS: u32 = 1000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Unparseable manager replies in a row before the run ends `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_invalid_outputs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager_episode_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_episode_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auditor_episode_secs: Option<u64>,
    /// Tool-loop steps per executor episode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
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
        }
    }
}

impl BudgetFile {
    /// Resolve against defaults; an error names the offending key (without the `budget.` prefix).
    pub fn validate(&self) -> Result<Budget, (String, String)> {
        let d = Budget::default();
        let in_range = |key: &str, v: u64, lo: u64, hi: u64| -> Result<u64, (String, String)> {
            if v < lo || v > hi {
                Err((key.to_string(), format!("must be between {lo} and {hi}, got {v}")))
            } else {
                Ok(v)
            }
        };
        let rounds = self.max_rounds.unwrap_or(d.max_rounds);
        Ok(Budget {
            max_rounds: in_range("max_rounds", rounds.into(), 1, HARD_CAP_ROUNDS.into())? as u32,
            max_invalid_outputs: in_range(
                "max_invalid_outputs",
                self.max_invalid_outputs.unwrap_or(d.max_invalid_outputs).into(),
                0,
                100,
            )? as u32,
            manager_episode_secs: in_range(
                "manager_episode_secs",
                self.manager_episode_secs.unwrap_or(d.manager_episode_secs),
                1,
                86_400,
            )?,
            executor_episode_secs: in_range(
                "executor_episode_secs",
                self.executor_episode_secs.unwrap_or(d.executor_episode_secs),
                1,
                86_400,
            )?,
            auditor_episode_secs: in_range(
                "auditor_episode_secs",
                self.auditor_episode_secs.unwrap_or(d.auditor_episode_secs),
                1,
                86_400,
            )?,
            max_steps: in_range("max_steps", self.max_steps.unwrap_or(d.max_steps).into(), 1, 1000)?
                as u32,
            max_total_tokens: match self.max_total_tokens {
                Some(0) => return Err(("max_total_tokens".into(), "must be positive".into())),
                other => other,
            },
        })
    }
}
