//! A candidate that lost ground is set aside: when it passes fewer blocking criteria than the
//! current snapshot (it broke more than it fixed), the artifact stays at the current snapshot, as for a rejected candidate, and the next step starts from
//! there, so the best work so far is never lost to a worse attempt. With `budget.
//! rollback_regressions = false` every candidate that is not an integrity violation becomes the
//! artifact.

use std::collections::BTreeSet;

use super::tx::Tx;
use crate::state::{LogEvent, RunRecord};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::verdict::{CheckVerdict, Evidence};

/// A candidate that passes less than the current snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Regression {
    /// The snapshot the artifact stays at.
    pub kept: String,
    /// Blocking criteria passing on `kept` that fail (or have no evidence) on the candidate.
    pub lost: Vec<String>,
    pub kept_passing: usize,
    pub candidate_passing: usize,
    pub blocking: usize,
}

impl Regression {
    /// One line for the log, the manager's feedback and the ledger.
    pub fn reason(&self) -> String {
        format!(
            "a regression: it passes {} of {} blocking criteria where snapshot {} passes {} (it \
             broke {}); the artifact stays at that snapshot",
            self.candidate_passing,
            self.blocking,
            self.kept.get(..12).unwrap_or(&self.kept),
            self.kept_passing,
            self.lost
                .iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Whether the candidate whose evidence is `candidate_evidence` regresses from the run's
/// current snapshot (audited, with its evidence in the record); `None` when it does not, when
/// the current snapshot has no audit to compare with, or when the task turned this off.
pub(super) fn regression(
    record: &RunRecord,
    candidate_evidence: &[Evidence],
) -> Option<Regression> {
    if !record.task.budget.rollback_regressions {
        return None;
    }
    let kept = &record.snapshot;
    let standing: Vec<&Evidence> = record
        .audit
        .evidence
        .iter()
        .filter(|e| &e.artifact_version == kept)
        .collect();
    if standing.is_empty() {
        return None;
    }
    let blocking = record.contract.blocking().count();
    let before = blocking_passing(&record.contract, &standing);
    let after = blocking_passing(
        &record.contract,
        &candidate_evidence.iter().collect::<Vec<_>>(),
    );
    if after.len() >= before.len() {
        return None;
    }
    Some(Regression {
        kept: kept.clone(),
        lost: before.difference(&after).cloned().collect(),
        kept_passing: before.len(),
        candidate_passing: after.len(),
        blocking,
    })
}

/// The blocking criteria of `contract` whose latest record in `evidence` is a pass.
pub(super) fn blocking_passing(contract: &Contract, evidence: &[&Evidence]) -> BTreeSet<String> {
    contract
        .blocking()
        .filter(|c| {
            evidence
                .iter()
                .rev()
                .find(|e| e.check_id == c.id)
                .is_some_and(|e| e.verdict == CheckVerdict::Pass)
        })
        .map(|c| c.id.clone())
        .collect()
}

/// Set `candidate` aside as `regressed`: the artifact stays where it is, the log and the
/// manager are told why.
pub(super) fn set_aside(tx: &mut Tx, round: u32, candidate: &str, regressed: &Regression) {
    let reason = regressed.reason();
    tx.log(LogEvent::CandidateRejected {
        candidate: candidate.to_string(),
        reason: reason.clone(),
    });
    tx.feedback(format!(
        "Round {round}: the candidate was set aside as {reason}."
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::start_run;
    use crate::decide::tests::evidence;
    use crate::task::parse_task_toml;

    /// A run whose current snapshot `s1` passes `passing` of the blocking criteria a, b, c
    /// (`d` is advisory).
    fn standing(passing: &[&str], budget: &str) -> RunRecord {
        let mut toml = String::from("goal = \"g\"\n");
        for id in ["a", "b", "c"] {
            toml.push_str(&format!(
                "[[acceptance]]\nid = \"{id}\"\ncheck = \"true\"\n"
            ));
        }
        toml.push_str("[[acceptance]]\nid = \"d\"\ncheck = \"true\"\nblocking = false\n");
        toml.push_str(&format!("[budget]\n{budget}\n"));
        let mut r = start_run("r", parse_task_toml(&toml).unwrap(), "base", 0).record;
        r.snapshot = "s1".into();
        r.audit.evidence = ["a", "b", "c", "d"]
            .iter()
            .map(|id| evidence("s1", id, passing.contains(id)))
            .collect();
        r
    }

    fn candidate(passing: &[&str]) -> Vec<Evidence> {
        ["a", "b", "c", "d"]
            .iter()
            .map(|id| evidence("s2", id, passing.contains(id)))
            .collect()
    }

    #[test]
    fn a_candidate_regresses_when_it_passes_fewer_than_the_current_snapshot() {
        // (name, passing on s1, passing on s2, budget, lost)
        let cases: [(&str, &[&str], &[&str], &str, Option<&[&str]>); 9] = [
            (
                "lost one, gained none",
                &["a", "b"],
                &["a"],
                "",
                Some(&["b"]),
            ),
            (
                "lost all",
                &["a", "b", "c"],
                &[],
                "",
                Some(&["a", "b", "c"]),
            ),
            ("the same", &["a", "b"], &["a", "b"], "", None),
            ("better", &["a"], &["a", "b"], "", None),
            ("traded one for another", &["a", "b"], &["a", "c"], "", None),
            // Fixed one, broke two: fewer pass, so the ground held is kept.
            (
                "gained one, lost two",
                &["a", "b"],
                &["c"],
                "",
                Some(&["a", "b"]),
            ),
            ("nothing passed before", &[], &[], "", None),
            // The advisory criterion does not count.
            ("an advisory loss", &["a", "d"], &["a"], "", None),
            (
                "turned off",
                &["a", "b"],
                &["a"],
                "rollback_regressions = false",
                None,
            ),
        ];
        for (name, before, after, budget, lost) in cases {
            let r = standing(before, budget);
            let got = regression(&r, &candidate(after));
            let want: Option<Vec<String>> = lost.map(|l| l.iter().map(|s| s.to_string()).collect());
            assert_eq!(got.map(|g| g.lost), want, "{name}");
        }
    }

    #[test]
    fn an_unaudited_current_snapshot_has_nothing_to_lose() {
        let mut r = standing(&["a", "b"], "");
        // The evidence is about another snapshot (the current one was never audited).
        r.snapshot = "base".into();
        assert_eq!(regression(&r, &candidate(&[])), None);
    }

    #[test]
    fn the_reason_names_the_counts_and_what_broke() {
        let r = standing(&["a", "b"], "");
        let reason = regression(&r, &candidate(&["a"])).unwrap().reason();
        assert!(
            reason.contains("passes 1 of 3 blocking criteria where snapshot s1 passes 2"),
            "{reason}"
        );
        assert!(reason.contains("broke `b`"), "{reason}");
    }
}
