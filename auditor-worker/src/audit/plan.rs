//! A planning episode's audit: which paths changed and whether they stay in the write scope
//! (strictly: anything outside it is a violation), and the proposal file as frozen in the
//! snapshot. No judge is asked: there is no contract to judge yet. The proposed contract's
//! checks run once, before any work, with the value checks the run will derive for the goal
//! clauses it leaves uncovered: a contract that already passes tests nothing, and a derived
//! check that errors out on its own there is broken (the manager refuses either).

use std::path::Path;

use loopgate_common::contract_proposal::{proposal_criteria, MAX_PROPOSAL_BYTES, PROPOSAL_FILE};
use loopgate_common::goal::derived_checks::proposal_value_checks;
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Integrity;
use loopgate_protocol::wire::AuditRequest;

use crate::audit::auditor::{AuditError, Auditor};
use crate::audit::findings::Findings;
use crate::audit::pipeline::Audited;
use crate::audit::verdict_rules::{mechanical_verdicts, strict_scope_violation};

impl Auditor {
    /// The findings of a planning episode's candidate, with the proposed contract's checks run
    /// on it; `gaps`: what the audit found missing so far.
    pub(super) async fn plan_audit(
        &self,
        audited: &Audited<'_>,
        changes: Vec<PathChange>,
        gaps: Vec<String>,
    ) -> Result<Findings, AuditError> {
        let req = audited.req;
        let mut findings = plan_findings(req, audited.workspace, changes, gaps).await;
        if let Some(criteria) = findings
            .proposal
            .as_deref()
            .and_then(|text| proposal_criteria(text).ok())
        {
            let mut pre = req.clone();
            let value_checks = proposal_value_checks(&req.contract, &criteria);
            pre.contract.criteria = criteria;
            pre.contract.criteria.extend(value_checks);
            let proposed = Audited {
                req: &pre,
                ..*audited
            };
            findings.evidence = self.run_checks(&proposed, &mut findings.gaps).await?;
        }
        Ok(findings)
    }
}

/// The scope verdicts and the proposal of a planning episode's candidate.
async fn plan_findings(
    req: &AuditRequest,
    workspace: &Path,
    changes: Vec<PathChange>,
    mut gaps: Vec<String>,
) -> Findings {
    let (mut verdicts, mut scope_gaps) =
        mechanical_verdicts(&req.contract, &[], &changes, &req.write_scope);
    gaps.append(&mut scope_gaps);
    if let Some(gap) = strict_scope_violation(true, &changes, &req.write_scope) {
        verdicts.integrity = Integrity::Violation;
        gaps.push(gap);
    }
    let proposal = read_proposal(&workspace.join(PROPOSAL_FILE), &mut gaps).await;
    Findings {
        verdicts,
        evidence: Vec::new(),
        gaps,
        changes,
        judgment: None,
        usage: Usage::default(),
        proposal,
        rubric: None,
    }
}

/// The proposal file's text when it is a regular file; a larger one is cut just past the
/// limit so the manager's parser refuses it with the size.
async fn read_proposal(path: &Path, gaps: &mut Vec<String>) -> Option<String> {
    match tokio::fs::symlink_metadata(path).await {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => {
            gaps.push(format!("{PROPOSAL_FILE} is not a regular file"));
            return None;
        }
        Err(_) => return None,
    }
    match tokio::fs::read(path).await {
        Ok(mut bytes) => {
            bytes.truncate(MAX_PROPOSAL_BYTES + 1);
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        Err(err) => {
            gaps.push(format!("{PROPOSAL_FILE} could not be read: {err}"));
            None
        }
    }
}
