//! What an executor is told about the snapshot it starts from: the last audit's failing and
//! inconclusive evidence, why the gate stayed closed, what the last round changed, and, when the
//! run stagnates, the attempts that did not work. Audit facts only: the manager's reasoning
//! never reaches an executor.

use serde::{Deserialize, Serialize};

use crate::verdict::CheckVerdict;

/// Bytes of check output an executor is shown per criterion.
pub const FEEDBACK_EXCERPT_BYTES: usize = 2048;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecFeedback {
    /// The snapshot these facts are about (the last audited candidate).
    #[serde(default)]
    pub audited_snapshot: Option<String>,
    /// Failing and inconclusive acceptance checks of that audit.
    #[serde(default)]
    pub failing: Vec<FailingCheck>,
    /// Why the completion gate stayed closed.
    #[serde(default)]
    pub gate_reasons: Vec<String>,
    /// Paths the last round changed (its base -> its candidate).
    #[serde(default)]
    pub changed_paths: Vec<String>,
    /// The paths the run's rounds added (files the task did not start with). One that a failing
    /// check names is not previewed (`prompts::executor::withheld_previews`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_paths: Vec<String>,
    /// The last candidate was not kept (an integrity violation, a rollback): why. The step starts
    /// from the snapshot before it.
    #[serde(default)]
    pub rejected: Option<String>,
    /// When the run stagnates: the recent attempts that did not work, oldest first, one line
    /// each. The episode should take a different approach.
    #[serde(default)]
    pub attempts: Vec<String>,
}

impl ExecFeedback {
    pub fn is_empty(&self) -> bool {
        self.failing.is_empty()
            && self.gate_reasons.is_empty()
            && self.changed_paths.is_empty()
            && self.rejected.is_none()
            && self.attempts.is_empty()
    }

    /// Whether a step targeting `targets` (criterion ids; empty: every criterion) retries
    /// something that already failed: the last audit failed one of its criteria, the last
    /// candidate was rejected, or the run is stagnating.
    pub fn retries_failure(&self, targets: &[String]) -> bool {
        self.rejected.is_some()
            || !self.attempts.is_empty()
            || self
                .failing
                .iter()
                .any(|f| targets.is_empty() || targets.contains(&f.criterion))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_failure_table() {
        let failing = |id: &str| FailingCheck {
            criterion: id.into(),
            check: None,
            verdict: CheckVerdict::Fail,
            exit_code: Some(1),
            output_excerpt: String::new(),
        };
        let of = |ids: &[&str]| ExecFeedback {
            failing: ids.iter().map(|id| failing(id)).collect(),
            ..ExecFeedback::default()
        };
        let targets = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // (feedback, the step's targets, retries a failure)
        let cases = [
            (ExecFeedback::default(), targets(&[]), false),
            (of(&["a"]), targets(&[]), true),
            (of(&["a"]), targets(&["a", "b"]), true),
            (of(&["a"]), targets(&["b"]), false),
            (
                ExecFeedback {
                    attempts: vec!["round 1: nothing changed".into()],
                    ..ExecFeedback::default()
                },
                targets(&["b"]),
                true,
            ),
            (
                ExecFeedback {
                    rejected: Some("integrity".into()),
                    ..ExecFeedback::default()
                },
                targets(&[]),
                true,
            ),
        ];
        for (feedback, step_targets, want) in cases {
            assert_eq!(
                feedback.retries_failure(&step_targets),
                want,
                "{feedback:?} {step_targets:?}"
            );
        }
    }
}

/// One acceptance check that did not pass, as the auditor saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingCheck {
    pub criterion: String,
    /// The check command, from the contract.
    #[serde(default)]
    pub check: Option<String>,
    pub verdict: CheckVerdict,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The tail of its output, at most [`FEEDBACK_EXCERPT_BYTES`].
    #[serde(default)]
    pub output_excerpt: String,
}
