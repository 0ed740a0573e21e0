//! Tokens one run (or one arm's runs) spent per role, as the run view's `usage` reports them.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Tokens (input + output) spent per role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleTokens {
    pub manager: u64,
    pub executor: u64,
    pub auditor: u64,
}

impl RoleTokens {
    /// From a run view's `usage` (`{"manager": {"input_tokens": .., "output_tokens": ..}, ..}`)
    /// or from a bench file's own `tokens_by_role` (`{"manager": 123, ..}`).
    pub fn from_json(v: &Value) -> Option<RoleTokens> {
        let role = |name: &str| -> Option<u64> {
            let r = v.get(name)?;
            r.as_u64().or_else(|| {
                Some(
                    r.get("input_tokens")?.as_u64()?
                        + r.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
                )
            })
        };
        Some(RoleTokens {
            manager: role("manager")?,
            executor: role("executor")?,
            auditor: role("auditor")?,
        })
    }

    pub fn to_json(self) -> Value {
        json!({"manager": self.manager, "executor": self.executor, "auditor": self.auditor})
    }

    pub fn add(&mut self, other: RoleTokens) {
        self.manager += other.manager;
        self.executor += other.executor;
        self.auditor += other.auditor;
    }

    pub fn total(self) -> u64 {
        self.manager + self.executor + self.auditor
    }
}

/// Prompt tokens of a run view's `usage` that the providers read from their prompt cache, over
/// every role (`cached_prompt_tokens`; 0 where a role reports none).
pub fn cached_prompt_tokens(usage: &Value) -> u64 {
    ["manager", "executor", "auditor"]
        .iter()
        .filter_map(|role| usage.get(role)?.get("cached_prompt_tokens")?.as_u64())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_tokens_read_both_shapes() {
        let split = RoleTokens {
            manager: 3,
            executor: 30,
            auditor: 7,
        };
        let cases = [
            (
                json!({"manager": {"input_tokens": 2, "output_tokens": 1},
                       "executor": {"input_tokens": 25, "output_tokens": 5, "cost_micros": 0},
                       "auditor": {"input_tokens": 7}}),
                Some(split),
            ),
            (
                json!({"manager": 3, "executor": 30, "auditor": 7}),
                Some(split),
            ),
            (json!({"manager": 3, "executor": 30}), None),
            (Value::Null, None),
        ];
        for (v, want) in cases {
            assert_eq!(RoleTokens::from_json(&v), want, "{v}");
        }
        assert_eq!(
            cached_prompt_tokens(&json!({"manager": {"input_tokens": 2},
                "executor": {"input_tokens": 25, "cached_prompt_tokens": 20},
                "auditor": {"cached_prompt_tokens": 3}})),
            23
        );
        assert_eq!(cached_prompt_tokens(&Value::Null), 0);
        assert_eq!(
            RoleTokens::from_json(&split.to_json()),
            Some(split),
            "written back as it was read"
        );
        let mut sum = split;
        sum.add(split);
        assert_eq!(sum.total(), 80);
    }
}
