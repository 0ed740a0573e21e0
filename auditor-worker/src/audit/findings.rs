//! What an audit found, the pieces its report is built from (`report.rs`); and what it finds of
//! a candidate that failed verification: nothing run, nothing accepted.

use loopgate_protocol::rubric::RubricVerdict;
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{Evidence, Verdicts};
use loopgate_protocol::wire::AuditRequest;
use loopgate_snapshot::SnapshotError;

use crate::audit::records::integrity_failure;
use crate::evidence::{unix_millis, Unstored};
use crate::rubric::verdict::{rubric_evidence, unscored};

/// Pieces of a report.
pub(super) struct Findings {
    pub(super) verdicts: Verdicts,
    pub(super) evidence: Vec<Evidence>,
    pub(super) gaps: Vec<String>,
    /// base -> candidate.
    pub(super) changes: Vec<PathChange>,
    /// The judge's reply its opinion was read from.
    pub(super) judgment: Option<String>,
    pub(super) usage: Usage,
    /// A planning episode's proposed contract, as frozen in the candidate.
    pub(super) proposal: Option<String>,
    pub(super) rubric: Option<RubricVerdict>,
}

impl Findings {
    /// Name no evidence the audit could not store: its records keep their excerpts, lose the
    /// digest, and a gap line says what is missing.
    pub(super) fn forget_unstored(&mut self, unstored: Unstored) {
        if unstored.digests.is_empty() {
            return;
        }
        for record in &mut self.evidence {
            if record
                .log_digest
                .as_ref()
                .is_some_and(|d| unstored.digests.contains(d))
            {
                record.log_digest = None;
            }
            record
                .screenshots
                .retain(|shot| !unstored.digests.contains(&shot.digest));
        }
        self.gaps.extend(unstored.gaps);
    }

    /// The candidate failed verification (`err`): every criterion and the rubric are
    /// inconclusive, integrity is violated.
    pub(super) fn untrustworthy(req: &AuditRequest, err: &SnapshotError) -> Findings {
        tracing::warn!(run_id = %req.run_id, snapshot = %req.candidate_snapshot, error = %err,
            "candidate snapshot failed verification");
        let (verdicts, mut evidence, gaps) = integrity_failure(
            &req.contract,
            &req.candidate_snapshot,
            &err.to_string(),
            unix_millis(),
        );
        let rubric = req.contract.rubric.as_ref().map(|rubric| {
            let verdict = unscored(rubric, "the candidate snapshot failed verification");
            evidence.push(rubric_evidence(
                &verdict,
                &req.candidate_snapshot,
                unix_millis(),
                0,
                None,
            ));
            verdict
        });
        Findings {
            verdicts,
            evidence,
            gaps,
            changes: Vec::new(),
            judgment: None,
            usage: Usage::default(),
            proposal: None,
            rubric,
        }
    }
}
