//! The mechanical rules that derive an audit's verdicts from its evidence and the candidate's
//! changes, and the rule that lets a judge's opinion only tighten them.

use loopgate_protocol::contract::Contract;
use loopgate_protocol::snapshot::{path_in_scope, PathChange};
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};

/// Derive verdicts from mechanical facts only. `changes` is base -> candidate;
/// `write_scope` empty means the whole workspace.
pub(crate) fn mechanical_verdicts(
    contract: &Contract,
    evidence: &[Evidence],
    changes: &[PathChange],
    write_scope: &[String],
) -> (Verdicts, Vec<String>) {
    let mut gaps = Vec::new();
    let mut integrity = Integrity::Clean;
    for change in changes {
        let path = change.path();
        if contract
            .protected_paths
            .iter()
            .any(|p| path_in_scope(path, std::slice::from_ref(p)))
        {
            integrity = Integrity::Violation;
            gaps.push(format!("protected path changed: {path}"));
        } else if !write_scope.is_empty() && !path_in_scope(path, write_scope) {
            integrity = integrity.max(Integrity::Suspect);
            gaps.push(format!("change outside write scope: {path}"));
        }
    }
    let mut all_blocking_pass = true;
    let mut any_inconclusive = false;
    for criterion in &contract.criteria {
        let verdict = evidence
            .iter()
            .find(|e| e.check_id == criterion.id)
            .map(|e| e.verdict);
        match verdict {
            Some(CheckVerdict::Pass) => {}
            Some(CheckVerdict::Fail) => {
                if criterion.blocking {
                    all_blocking_pass = false;
                }
                gaps.push(format!("check '{}' fails", criterion.id));
            }
            Some(CheckVerdict::Inconclusive) => {
                any_inconclusive = true;
                if criterion.blocking {
                    all_blocking_pass = false;
                }
                gaps.push(format!("check '{}' inconclusive", criterion.id));
            }
            None => {
                if criterion.check.is_some() {
                    any_inconclusive = true;
                }
                if criterion.blocking {
                    all_blocking_pass = false;
                    gaps.push(format!("check '{}' has no evidence", criterion.id));
                }
            }
        }
    }
    let status = if all_blocking_pass {
        AuditStatus::Complete
    } else {
        AuditStatus::Incomplete
    };
    let contract_verdict = if any_inconclusive {
        ContractVerdict::Unknown
    } else {
        ContractVerdict::Aligned
    };
    (
        Verdicts {
            status,
            integrity,
            contract: contract_verdict,
        },
        gaps,
    )
}

/// Combine an LLM judge's opinion with the mechanical verdicts: the judge may only make a
/// verdict stricter, never override a mechanical failure.
pub(crate) fn merge_opinion(mechanical: Verdicts, opinion: Verdicts) -> Verdicts {
    let status = match (mechanical.status, opinion.status) {
        (AuditStatus::Complete, other) => other,
        (m, _) => m,
    };
    let contract = match (mechanical.contract, opinion.contract) {
        (ContractVerdict::Aligned, other) => other,
        (m, _) => m,
    };
    Verdicts {
        status,
        integrity: mechanical.integrity.max(opinion.integrity),
        contract,
    }
}
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;
    use loopgate_protocol::contract::Criterion;

    fn contract(protected: &[&str]) -> Contract {
        let criteria = vec![
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
        ];
        let mut c = Contract {
            goal: "g".into(),
            criteria,
            protected_paths: protected.iter().map(|s| s.to_string()).collect(),
            rubric: None,
            spec_hash: String::new(),
        };
        c.spec_hash = c.compute_hash();
        c
    }

    fn ev(id: &str, v: CheckVerdict) -> Evidence {
        Evidence {
            artifact_version: "s".into(),
            check_id: id.into(),
            verdict: v,
            produced_at: 0,
            log_digest: None,
            exit_code: None,
            duration_ms: 0,
            output_excerpt: String::new(),
            isolated: None,
            screenshots: Vec::new(),
        }
    }

    #[test]
    fn mechanical_table() {
        use AuditStatus::*;
        use CheckVerdict::*;
        let modified = |p: &str| PathChange::Modified { path: p.into() };
        let cases: Vec<(
            Vec<Evidence>,
            Vec<PathChange>,
            Vec<String>,
            &[&str],
            Verdicts,
        )> = vec![
            (
                vec![ev("a", Pass), ev("b", Pass)],
                vec![],
                vec![],
                &[],
                Verdicts {
                    status: Complete,
                    integrity: Integrity::Clean,
                    contract: ContractVerdict::Aligned,
                },
            ),
            (
                vec![ev("a", Fail), ev("b", Pass)],
                vec![],
                vec![],
                &[],
                Verdicts {
                    status: Incomplete,
                    integrity: Integrity::Clean,
                    contract: ContractVerdict::Aligned,
                },
            ),
            (
                vec![ev("a", Pass), ev("b", Fail)],
                vec![],
                vec![],
                &[],
                Verdicts {
                    status: Complete,
                    integrity: Integrity::Clean,
                    contract: ContractVerdict::Aligned,
                },
            ),
            (
                vec![ev("a", Inconclusive), ev("b", Pass)],
                vec![],
                vec![],
                &[],
                Verdicts {
                    status: Incomplete,
                    integrity: Integrity::Clean,
                    contract: ContractVerdict::Unknown,
                },
            ),
            (
                vec![ev("a", Pass), ev("b", Pass)],
                vec![modified("tests/test_x.py")],
                vec![],
                &["tests/"],
                Verdicts {
                    status: Complete,
                    integrity: Integrity::Violation,
                    contract: ContractVerdict::Aligned,
                },
            ),
            (
                vec![ev("a", Pass), ev("b", Pass)],
                vec![modified("other.py")],
                vec!["src/".into()],
                &[],
                Verdicts {
                    status: Complete,
                    integrity: Integrity::Suspect,
                    contract: ContractVerdict::Aligned,
                },
            ),
            (
                vec![ev("b", Pass)],
                vec![],
                vec![],
                &[],
                Verdicts {
                    status: Incomplete,
                    integrity: Integrity::Clean,
                    contract: ContractVerdict::Unknown,
                },
            ),
        ];
        for (i, (evidence, changes, scope, protected, want)) in cases.into_iter().enumerate() {
            let (got, _) = mechanical_verdicts(&contract(protected), &evidence, &changes, &scope);
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn opinion_only_tightens() {
        let good = Verdicts {
            status: AuditStatus::Complete,
            integrity: Integrity::Clean,
            contract: ContractVerdict::Aligned,
        };
        let bad = Verdicts {
            status: AuditStatus::Incomplete,
            integrity: Integrity::Suspect,
            contract: ContractVerdict::NeedsRevision,
        };
        assert_eq!(merge_opinion(good, bad), bad);
        assert_eq!(merge_opinion(bad, good), bad);
    }
}
