//! The completion gate: done only when status=complete, integrity=clean, contract=aligned and
//! every blocking acceptance criterion has `pass` evidence bound to the current snapshot.

use serde::{Deserialize, Serialize};

use loopgate_protocol::contract::Contract;
use loopgate_protocol::contract::RUBRIC_EVIDENCE_ID;
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateVerdict {
    pub passed: bool,
    /// The snapshot the gate was evaluated against.
    pub snapshot: String,
    /// Criteria with a check that pass on `snapshot`.
    pub passing: u32,
    /// Criteria with a check.
    pub checked: u32,
    /// Why the gate is closed (empty when it passed).
    pub reasons: Vec<String>,
}

/// Evaluate the gate for `current_snapshot`, given the latest audit verdicts (and the snapshot
/// they were about) and every evidence record known for the run.
pub fn evaluate_gate(
    contract: &Contract,
    verdicts: Option<(&Verdicts, &str)>,
    evidence: &[Evidence],
    current_snapshot: &str,
) -> GateVerdict {
    let mut reasons = Vec::new();
    match verdicts {
        None => reasons.push("no audit of the current snapshot yet".to_string()),
        Some((_, about)) if about != current_snapshot => {
            reasons.push("the latest audit is not about the current snapshot".to_string())
        }
        Some((v, _)) => {
            if v.status != AuditStatus::Complete {
                reasons
                    .push(format!("audit status is {:?}, not complete", v.status).to_lowercase());
            }
            if v.integrity != Integrity::Clean {
                reasons.push(format!("integrity is {:?}, not clean", v.integrity).to_lowercase());
            }
            if v.contract != ContractVerdict::Aligned {
                reasons.push(
                    format!("contract audit is {:?}, not aligned", v.contract).to_lowercase(),
                );
            }
        }
    }
    if !contract.is_intact() {
        reasons.push("the contract no longer matches its spec hash".to_string());
    }
    let verdict_on_current = |id: &str| {
        evidence
            .iter()
            .rev()
            .find(|e| e.check_id == id && e.artifact_version == current_snapshot)
            .map(|e| e.verdict)
    };
    let (mut passing, mut checked) = (0u32, 0u32);
    for criterion in &contract.criteria {
        let verdict = verdict_on_current(&criterion.id);
        if criterion.check.is_some() {
            checked += 1;
            if verdict == Some(CheckVerdict::Pass) {
                passing += 1;
            }
        }
        if criterion.blocking && verdict != Some(CheckVerdict::Pass) {
            let what = match verdict {
                None => "has no evidence on the current snapshot",
                Some(CheckVerdict::Fail) => "fails on the current snapshot",
                Some(CheckVerdict::Inconclusive) => "is inconclusive on the current snapshot",
                Some(CheckVerdict::Pass) => "passes",
            };
            reasons.push(format!("blocking criterion '{}' {what}", criterion.id));
        }
    }
    if let Some(rubric) = &contract.rubric {
        match verdict_on_current(RUBRIC_EVIDENCE_ID) {
            Some(CheckVerdict::Pass) => {}
            Some(_) => reasons.push(format!(
                "the rubric does not pass on the current snapshot (threshold {}, no PIVOT)",
                rubric.threshold
            )),
            None => reasons.push("the rubric has no score on the current snapshot".to_string()),
        }
    }
    GateVerdict {
        passed: reasons.is_empty(),
        snapshot: current_snapshot.to_string(),
        passing,
        checked,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopgate_protocol::contract::Criterion;

    fn contract() -> Contract {
        let mut c = Contract {
            goal: "g".into(),
            criteria: vec![
                Criterion {
                    id: "a".into(),
                    description: String::new(),
                    check: Some("true".into()),
                    blocking: true,
                    timeout_secs: 5,
                    source: Default::default(),
                    clause: None,
                },
                Criterion {
                    id: "b".into(),
                    description: String::new(),
                    check: Some("true".into()),
                    blocking: false,
                    timeout_secs: 5,
                    source: Default::default(),
                    clause: None,
                },
            ],
            protected_paths: vec![],
            rubric: None,
            writable_paths: Vec::new(),
            spec_hash: String::new(),
        };
        c.spec_hash = c.compute_hash();
        c
    }

    fn ev(id: &str, snap: &str, v: CheckVerdict) -> Evidence {
        Evidence {
            artifact_version: snap.into(),
            check_id: id.into(),
            verdict: v,
            produced_at: 0,
            log_digest: None,
            exit_code: Some(0),
            duration_ms: 1,
            output_excerpt: String::new(),
            isolated: None,
            screenshots: Vec::new(),
        }
    }

    const GOOD: Verdicts = Verdicts {
        status: AuditStatus::Complete,
        integrity: Integrity::Clean,
        contract: ContractVerdict::Aligned,
    };

    #[test]
    fn gate_table() {
        use CheckVerdict::*;
        let bad_status = Verdicts {
            status: AuditStatus::Incomplete,
            ..GOOD
        };
        let suspect = Verdicts {
            integrity: Integrity::Suspect,
            ..GOOD
        };
        let unknown = Verdicts {
            contract: ContractVerdict::Unknown,
            ..GOOD
        };
        let cases: Vec<(&str, Option<(&Verdicts, &str)>, Vec<Evidence>, bool, u32)> = vec![
            (
                "all good",
                Some((&GOOD, "s2")),
                vec![ev("a", "s2", Pass), ev("b", "s2", Fail)],
                true,
                1,
            ),
            ("no audit", None, vec![ev("a", "s2", Pass)], false, 1),
            (
                "audit of old snapshot",
                Some((&GOOD, "s1")),
                vec![ev("a", "s2", Pass)],
                false,
                1,
            ),
            (
                "evidence on old snapshot only",
                Some((&GOOD, "s2")),
                vec![ev("a", "s1", Pass)],
                false,
                0,
            ),
            (
                "blocking fails",
                Some((&GOOD, "s2")),
                vec![ev("a", "s2", Fail)],
                false,
                0,
            ),
            (
                "inconclusive",
                Some((&GOOD, "s2")),
                vec![ev("a", "s2", Inconclusive)],
                false,
                0,
            ),
            (
                "incomplete status",
                Some((&bad_status, "s2")),
                vec![ev("a", "s2", Pass)],
                false,
                1,
            ),
            (
                "suspect integrity",
                Some((&suspect, "s2")),
                vec![ev("a", "s2", Pass)],
                false,
                1,
            ),
            (
                "unknown contract",
                Some((&unknown, "s2")),
                vec![ev("a", "s2", Pass)],
                false,
                1,
            ),
            (
                "latest evidence wins",
                Some((&GOOD, "s2")),
                vec![ev("a", "s2", Fail), ev("a", "s2", Pass)],
                true,
                1,
            ),
        ];
        for (name, verdicts, evidence, passed, passing) in cases {
            let g = evaluate_gate(&contract(), verdicts, &evidence, "s2");
            assert_eq!(g.passed, passed, "{name}: {:?}", g.reasons);
            assert_eq!(g.passing, passing, "{name}");
            assert_eq!(g.checked, 2, "{name}");
            assert_eq!(g.reasons.is_empty(), passed, "{name}");
        }
    }

    #[test]
    fn tampered_contract_closes_gate() {
        let mut c = contract();
        c.criteria.pop();
        let g = evaluate_gate(
            &c,
            Some((&GOOD, "s")),
            &[ev("a", "s", CheckVerdict::Pass)],
            "s",
        );
        assert!(!g.passed);
    }
}
