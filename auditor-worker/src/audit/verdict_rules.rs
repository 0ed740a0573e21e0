//! The rules that decide an audit's verdicts: derived mechanically from its evidence and the
//! candidate's changes (`mechanical_verdicts`: protected paths and test plumbing, see
//! `test_plumbing`, the write scope; with the strict write scope, an unverified base
//! and a tampered contract: `mechanical_findings`), and tightened, never loosened, by the
//! judge's opinion (`merge_opinion`) and its own backcheck (`apply_backcheck`). Pure.

use loopgate_protocol::contract::Contract;
use loopgate_protocol::snapshot::{path_in_scope, PathChange};
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};
use loopgate_protocol::wire::AuditRequest;

use crate::audit::test_plumbing::test_plumbing;

/// Derive verdicts from mechanical facts only. `changes` is base -> candidate;
/// `write_scope` empty means the whole workspace.
pub(super) fn mechanical_verdicts(
    contract: &Contract,
    evidence: &[Evidence],
    changes: &[PathChange],
    write_scope: &[String],
) -> (Verdicts, Vec<String>) {
    let mut gaps = Vec::new();
    let integrity = scope_integrity(contract, changes, write_scope, &mut gaps);
    let (all_blocking_pass, any_inconclusive) = checked_criteria(contract, evidence, &mut gaps);
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

/// What protects a changed path, if anything does: the contract's protected paths, else the
/// test-plumbing rule; nothing for a path the task's author names writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protection {
    Protected,
    /// Test plumbing, and why (the runner that reads it).
    TestPlumbing(&'static str),
}

/// What protects `path` under `contract`.
fn protection(contract: &Contract, path: &str) -> Option<Protection> {
    if contract.names_writable(path) {
        return None;
    }
    if contract
        .protected_paths
        .iter()
        .any(|p| path_in_scope(path, std::slice::from_ref(p)))
    {
        return Some(Protection::Protected);
    }
    test_plumbing(path).map(Protection::TestPlumbing)
}

/// The changes to test plumbing no writable path covers (added, changed or deleted alike), with
/// why each is plumbing: what the audit logs as a security event.
pub(super) fn plumbing_changes<'a>(
    contract: &Contract,
    changes: &'a [PathChange],
) -> Vec<(&'a str, &'static str)> {
    changes
        .iter()
        .filter_map(|c| match protection(contract, c.path()) {
            Some(Protection::TestPlumbing(why)) => Some((c.path(), why)),
            _ => None,
        })
        .collect()
}

/// Integrity from where the changes are: a protected path or test plumbing changed (added,
/// modified or removed) is a violation, unless the task's author names the path writable; a
/// change outside a non-empty write scope makes the candidate suspect.
fn scope_integrity(
    contract: &Contract,
    changes: &[PathChange],
    write_scope: &[String],
    gaps: &mut Vec<String>,
) -> Integrity {
    let mut integrity = Integrity::Clean;
    for change in changes {
        let path = change.path();
        if let Some(protection) = protection(contract, path) {
            integrity = Integrity::Violation;
            gaps.push(match protection {
                Protection::Protected => format!("protected path changed: {path}"),
                Protection::TestPlumbing(why) => format!(
                    "test plumbing changed: {path} ({why}; it can decide what the tests report, \
                     so only the task's writable_paths may let the work change it)"
                ),
            });
        } else if !write_scope.is_empty() && !path_in_scope(path, write_scope) {
            integrity = integrity.max(Integrity::Suspect);
            gaps.push(format!("change outside write scope: {path}"));
        }
    }
    integrity
}

/// Whether every blocking criterion passes, and whether any check is inconclusive (or has no
/// evidence), from the criteria's evidence.
fn checked_criteria(
    contract: &Contract,
    evidence: &[Evidence],
    gaps: &mut Vec<String>,
) -> (bool, bool) {
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
    (all_blocking_pass, any_inconclusive)
}

/// A work audit's verdicts from mechanical facts: `mechanical_verdicts`' gap lines, then
/// `found_gaps` (what the audit found missing so far), then the strict write scope's and the
/// contract's; an unverified base makes the candidate suspect at least.
pub(super) fn mechanical_findings(
    req: &AuditRequest,
    evidence: &[Evidence],
    changes: &[PathChange],
    found_gaps: Vec<String>,
    base_unverified: bool,
    strict_scope: bool,
) -> (Verdicts, Vec<String>) {
    let (mut verdicts, mut gaps) =
        mechanical_verdicts(&req.contract, evidence, changes, &req.write_scope);
    gaps.extend(found_gaps);
    if base_unverified {
        verdicts.integrity = verdicts.integrity.max(Integrity::Suspect);
    }
    if let Some(gap) = strict_scope_violation(strict_scope, changes, &req.write_scope) {
        verdicts.integrity = Integrity::Violation;
        gaps.push(gap);
    }
    if !req.contract.is_intact() {
        verdicts.contract = ContractVerdict::Invalid;
        gaps.push("contract spec hash does not match its content".to_string());
    }
    (verdicts, gaps)
}

/// Combine an LLM judge's opinion with the mechanical verdicts: the judge may only make a
/// verdict stricter, never override a mechanical failure.
pub(super) fn merge_opinion(mechanical: Verdicts, opinion: Verdicts) -> Verdicts {
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

/// In strict mode any change outside a non-empty write scope is a violation.
pub(super) fn strict_scope_violation(
    strict: bool,
    changes: &[PathChange],
    write_scope: &[String],
) -> Option<String> {
    if !strict || write_scope.is_empty() {
        return None;
    }
    let outside: Vec<&str> = changes
        .iter()
        .map(PathChange::path)
        .filter(|path| !path_in_scope(path, write_scope))
        .collect();
    (!outside.is_empty()).then(|| {
        format!(
            "strict write scope: {} change(s) outside the increment's write_scope ({})",
            outside.len(),
            outside.join(", ")
        )
    })
}

/// The judge's own acceptance-constraint backcheck can tighten its verdicts: a `complete` that
/// lists a blocking criterion as unmet becomes incomplete/unknown (the judge contradicting
/// itself is not a pass). Returns the verdicts to merge and a gap line when it applied.
pub(super) fn apply_backcheck(
    contract: &Contract,
    opinion: Verdicts,
    backcheck: &[String],
) -> (Verdicts, Option<String>) {
    if opinion.status != AuditStatus::Complete {
        return (opinion, None);
    }
    let unmet: Vec<&str> = contract
        .blocking()
        .map(|c| c.id.as_str())
        .filter(|id| {
            backcheck.iter().any(|line| {
                let line = line.trim().trim_start_matches(['-', '*', ' ']);
                line.strip_prefix(id)
                    .and_then(|rest| rest.trim_start().strip_prefix(':'))
                    .and_then(|rest| rest.split_whitespace().next())
                    .is_some_and(|word| {
                        word.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                            .eq_ignore_ascii_case("unmet")
                    })
            })
        })
        .collect();
    if unmet.is_empty() {
        return (opinion, None);
    }
    let tightened = Verdicts {
        status: AuditStatus::Incomplete,
        contract: ContractVerdict::Unknown,
        ..opinion
    };
    let gap = format!(
        "auditor model said complete but its backcheck lists blocking criteria as unmet: {}",
        unmet.join(", ")
    );
    (tightened, Some(gap))
}

/// A gap line describing how the judge tightened the mechanical verdicts, if it did.
pub(super) fn tightening_gap(mechanical: Verdicts, merged: Verdicts) -> Option<String> {
    (mechanical != merged).then(|| {
        format!(
            "auditor model tightened the verdicts to status={}, integrity={}, contract={}",
            wire_word(&merged.status),
            wire_word(&merged.integrity),
            wire_word(&merged.contract)
        )
    })
}

/// The snake_case wire name of a verdict enum value.
fn wire_word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(word)) => word,
        _ => "?".to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;
    use crate::audit::test_contracts::checked_contract;
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
            writable_paths: Vec::new(),
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

    #[test]
    fn tightening_gap_only_when_changed() {
        let good = Verdicts {
            status: AuditStatus::Complete,
            integrity: Integrity::Clean,
            contract: ContractVerdict::Aligned,
        };
        assert_eq!(tightening_gap(good, good), None);
        let worse = merge_opinion(
            good,
            Verdicts {
                status: AuditStatus::Incomplete,
                ..good
            },
        );
        assert!(tightening_gap(good, worse)
            .unwrap()
            .contains("status=incomplete"));
    }

    #[test]
    fn strict_scope_table() {
        let changes = vec![
            PathChange::Modified {
                path: "src/a.rs".into(),
            },
            PathChange::Added {
                path: "tests/t.rs".into(),
            },
        ];
        let scope = vec!["src/".to_string()];
        assert_eq!(strict_scope_violation(false, &changes, &scope), None);
        assert_eq!(strict_scope_violation(true, &changes, &[]), None);
        assert!(strict_scope_violation(true, &changes, &scope)
            .unwrap()
            .contains("tests/t.rs"));
        assert_eq!(strict_scope_violation(true, &changes[..1], &scope), None);
    }

    #[test]
    fn judge_backcheck_table() {
        let good = Verdicts {
            status: AuditStatus::Complete,
            integrity: Integrity::Clean,
            contract: ContractVerdict::Aligned,
        };
        let cases: &[(&[&str], bool)] = &[
            (&["a: met - ok", "b: met"], false),
            (&["a: unmet - prints the wrong thing"], true),
            (&["- **a**: unmet"], false), // decorated id: not ours to guess
            (&["* a: UNMET."], true),
            (&["c: unmet - a blocking criterion without a check"], true),
            (&["ab: unmet"], false),
        ];
        for (lines, tightened) in cases {
            let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            let (verdicts, gap) = apply_backcheck(&checked_contract(), good, &lines);
            assert_eq!(
                verdicts.status == AuditStatus::Incomplete,
                *tightened,
                "{lines:?}"
            );
            assert_eq!(gap.is_some(), *tightened, "{lines:?}");
        }
        let incomplete = Verdicts {
            status: AuditStatus::Incomplete,
            ..good
        };
        assert_eq!(
            apply_backcheck(&checked_contract(), incomplete, &["a: unmet".to_string()]).0,
            incomplete
        );
    }
}
