//! Which checks a step's self-check runs: the blocking criteria with a check that the
//! increment targets (`acceptance_checks`), or every blocking criterion with a check when the
//! increment names none. Pure.

use std::time::Duration;

use loopgate_protocol::contract::Contract;
use loopgate_protocol::wire::Increment;

/// One check a self-check runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TargetCheck {
    /// The criterion's id.
    pub(crate) id: String,
    pub(crate) command: String,
    /// The criterion's own timeout, as the auditor gives it.
    pub(crate) timeout: Duration,
}

/// The checks `increment` targets in `contract`, in contract order.
pub(crate) fn targeted_checks(contract: &Contract, increment: &Increment) -> Vec<TargetCheck> {
    let named = &increment.acceptance_checks;
    contract
        .criteria
        .iter()
        .filter(|c| c.blocking && (named.is_empty() || named.contains(&c.id)))
        .filter_map(|c| {
            let command = c
                .check
                .as_deref()
                .filter(|check| !check.trim().is_empty())?;
            Some(TargetCheck {
                id: c.id.clone(),
                command: command.to_string(),
                timeout: Duration::from_secs(c.timeout_secs.max(1)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::contract::Criterion;

    fn criterion(id: &str, check: Option<&str>, blocking: bool) -> Criterion {
        Criterion {
            id: id.into(),
            description: String::new(),
            check: check.map(str::to_string),
            blocking,
            timeout_secs: 7,
            source: Default::default(),
            clause: None,
        }
    }

    #[test]
    fn targets_table() {
        let contract = Contract {
            goal: "g".into(),
            criteria: vec![
                criterion("a", Some("test -f a"), true),
                criterion("b", Some("test -f b"), true),
                criterion("soft", Some("test -f c"), false),
                criterion("nocheck", None, true),
                criterion("blank", Some("  "), true),
            ],
            protected_paths: Vec::new(),
            rubric: None,
            writable_paths: Vec::new(),
            spec_hash: String::new(),
        };
        let cases: &[(&[&str], &[&str])] = &[
            (&[], &["a", "b"]),
            (&["b"], &["b"]),
            (&["b", "a"], &["a", "b"]),
            (&["soft"], &[]),
            (&["nocheck", "blank"], &[]),
            (&["unknown"], &[]),
        ];
        for (named, want) in cases {
            // From JSON, so fields other engineers add to `Increment` do not matter here.
            let increment: Increment = serde_json::from_value(
                serde_json::json!({"objective": "o", "acceptance_checks": named}),
            )
            .unwrap();
            let got = targeted_checks(&contract, &increment);
            let ids: Vec<&str> = got.iter().map(|t| t.id.as_str()).collect();
            assert_eq!(&ids, want, "{named:?}");
            assert!(got.iter().all(|t| t.timeout == Duration::from_secs(7)));
        }
    }
}
