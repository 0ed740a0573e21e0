//! When the audit asks no model at all: while one of the task's own blocking checks does not
//! pass on the candidate, the gate stays closed whatever a judge says (a judge may only
//! tighten), so neither the goal clauses nor the holistic verdict are put to the auditor's
//! model. The clauses are judged on the first candidate whose checks all pass, before the gate
//! can open; until then they have no evidence on the snapshot (which keeps the gate closed) and
//! the report says in one gap line why they were not judged. The executor then sees the failing
//! checks only, not a list of clauses nobody judged.
//!
//! Why: on a small local model the judge's calls take most of a round's audit, and while a
//! blocking check fails the report can only say "incomplete" whatever they answer. Pure.

use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::CriterionSource;
use loopgate_protocol::verdict::{CheckVerdict, Evidence};

/// The task's own blocking criteria with a check whose evidence on the candidate is not a pass
/// (failed, or inconclusive: timed out, not run in a required sandbox), in contract order.
/// Derived checks (`source = "goal"`) do not count here (one set aside by its own text is judged
/// instead); a failing one still keeps the gate closed through its own evidence.
pub(crate) fn failing_task_checks(contract: &Contract, evidence: &[Evidence]) -> Vec<String> {
    contract
        .criteria
        .iter()
        .filter(|c| c.blocking && c.check.is_some() && c.source == CriterionSource::Task)
        .filter(|c| {
            evidence
                .iter()
                .any(|e| e.check_id == c.id && e.verdict != CheckVerdict::Pass)
        })
        .map(|c| c.id.clone())
        .collect()
}

/// The report's gap line for an audit that asked no model, naming the failing checks.
pub(crate) fn deferral_gap(failing: &[String]) -> String {
    let names: Vec<String> = failing.iter().map(|id| format!("'{id}'")).collect();
    format!(
        "judge not asked: blocking check(s) {} do not pass, so the gate stays closed whatever it \
         says; the goal's clauses are judged once every blocking check passes",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use loopgate_protocol::contract::Criterion;

    use super::*;

    fn criterion(id: &str, check: bool, blocking: bool, source: CriterionSource) -> Criterion {
        Criterion {
            id: id.into(),
            description: id.into(),
            check: check.then(|| "true".to_string()),
            blocking,
            timeout_secs: 30,
            source,
            clause: None,
        }
    }

    fn evidence(id: &str, verdict: CheckVerdict) -> Evidence {
        Evidence {
            artifact_version: "snap".into(),
            check_id: id.into(),
            verdict,
            produced_at: 0,
            log_digest: None,
            exit_code: None,
            duration_ms: 0,
            output_excerpt: String::new(),
            isolated: Some(true),
            screenshots: Vec::new(),
        }
    }

    #[test]
    fn only_the_tasks_own_blocking_checks_that_do_not_pass_defer_the_judge() {
        use CheckVerdict::{Fail, Inconclusive, Pass};
        use CriterionSource::{Goal, Task};
        let criteria = vec![
            criterion("a", true, true, Task),
            criterion("b", true, true, Task),
            criterion("advisory", true, false, Task),
            criterion("derived", true, true, Goal),
            criterion("clause", false, true, Goal),
        ];
        let contract = Contract {
            goal: "g".into(),
            criteria,
            protected_paths: Vec::new(),
            rubric: None,
            writable_paths: Vec::new(),
            spec_hash: String::new(),
        };
        // (evidence on the candidate, the failing task checks)
        type Case = (Vec<(&'static str, CheckVerdict)>, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (vec![("a", Pass), ("b", Pass)], vec![]),
            (vec![("a", Fail), ("b", Pass)], vec!["a"]),
            (vec![("a", Fail), ("b", Inconclusive)], vec!["a", "b"]),
            // An advisory check or a derived one failing does not defer the judge.
            (
                vec![
                    ("a", Pass),
                    ("b", Pass),
                    ("advisory", Fail),
                    ("derived", Fail),
                ],
                vec![],
            ),
            // A check with no evidence (it did not run) decides nothing here.
            (vec![("b", Pass)], vec![]),
            (vec![("clause", Fail), ("a", Pass), ("b", Pass)], vec![]),
        ];
        for (given, want) in cases {
            let evidence: Vec<Evidence> = given.iter().map(|(id, v)| evidence(id, *v)).collect();
            assert_eq!(failing_task_checks(&contract, &evidence), want, "{given:?}");
        }
    }

    #[test]
    fn the_gap_names_each_failing_check() {
        let gap = deferral_gap(&["adult".to_string(), "minor".to_string()]);
        assert!(gap.starts_with("judge not asked"), "{gap}");
        assert!(gap.contains("'adult', 'minor'"), "{gap}");
    }
}
