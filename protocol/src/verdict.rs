//! Audit verdicts and evidence records, and the mechanical rules that derive verdicts.

use serde::{Deserialize, Serialize};

use crate::contract::Contract;
use crate::snapshot::{path_in_scope, PathChange};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditStatus {
    Complete,
    Incomplete,
    Blocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    Clean,
    Suspect,
    Violation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ContractVerdict {
    Aligned,
    Unknown,
    NeedsRevision,
    Invalid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckVerdict {
    Pass,
    Fail,
    Inconclusive,
}

/// Evidence: one check's verdict bound to the exact artifact version it ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The snapshot id the check ran on.
    pub artifact_version: String,
    pub check_id: String,
    pub verdict: CheckVerdict,
    pub produced_at: i64,
    /// sha256 of the full check output, stored as a blob in the object store.
    pub log_digest: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// The tail of the output, capped, for prompts and people.
    pub output_excerpt: String,
    /// Whether the check ran isolated: `Some(true)` under the auditor's bubblewrap sandbox (no
    /// network, private namespaces, read-only host); `Some(false)` without it (the report's
    /// gaps say why; with `sandbox = "required"` such a check is not run and is
    /// inconclusive); `None` when no check ran for it (a rubric score, a candidate that failed
    /// verification) or an older auditor wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<bool>,
    /// The screenshots the check itself took (`loopgate browse --screenshot`), each a blob in
    /// the evidence bucket: what a person sees of a browser check. Never the executor's: only
    /// files `loopgate browse` wrote during this check are collected. Empty for other checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screenshots: Vec<EvidenceScreenshot>,
}

/// One screenshot of a check, by digest. Fields in lexicographic order: it is signed as is
/// (see `report_claims`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceScreenshot {
    /// sha256 of the PNG, a blob in the evidence bucket (`GET /v1/blobs/<digest>`).
    pub digest: String,
    /// `image/png`.
    pub media_type: String,
    /// Where the check wrote it, relative to the check's copy of the workspace.
    pub path: String,
    pub size_bytes: u64,
}

/// The three verdicts of an audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdicts {
    pub status: AuditStatus,
    pub integrity: Integrity,
    pub contract: ContractVerdict,
}

/// Derive verdicts from mechanical facts only. `changes` is base -> candidate;
/// `write_scope` empty means the whole workspace.
pub fn mechanical_verdicts(
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
pub fn merge_opinion(mechanical: Verdicts, opinion: Verdicts) -> Verdicts {
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
    use super::*;
    use crate::task::Criterion;

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
