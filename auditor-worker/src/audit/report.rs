//! The entry point of one audit: a fresh scratch directory, the findings (`pipeline.rs`), the
//! scratch directory gone, the evidence stored, and the report built from the findings and
//! signed.

use std::time::Instant;

use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::wire::{AuditReport, AuditRequest};
use loopgate_transport::runtime::RESULT_PUBLISH_PATIENCE;

use crate::audit::auditor::{AuditError, Auditor};
use crate::audit::findings::Findings;
use crate::audit::progress::AuditProgressTx;
use crate::audit::records::backcheck_lines;

/// The audit's pristine copy of the candidate, under its scratch directory.
pub(super) const SNAPSHOT_DIR: &str = "snapshot";

impl Auditor {
    /// Audit one request. `Err` only when the store or the local disk failed (retry later); an
    /// untrustworthy candidate is a report with an integrity violation, never an error.
    pub async fn audit(&self, req: &AuditRequest, attempt: u64) -> Result<AuditReport, AuditError> {
        self.audit_observed(req, attempt, &AuditProgressTx::default())
            .await
    }

    /// [`Auditor::audit`], telling `progress` its stage and the check running.
    pub(crate) async fn audit_observed(
        &self,
        req: &AuditRequest,
        attempt: u64,
        progress: &AuditProgressTx,
    ) -> Result<AuditReport, AuditError> {
        let started = Instant::now();
        let scratch_err = |source| AuditError::Scratch {
            path: self.work_dir.clone(),
            source,
        };
        tokio::fs::create_dir_all(&self.work_dir)
            .await
            .map_err(scratch_err)?;
        let scratch = tempfile::Builder::new()
            .prefix("audit-")
            .tempdir_in(&self.work_dir)
            .map_err(scratch_err)?;
        // Evidence is named by digest as it is found and stored once the work is done, for as
        // long as a result's publish is retried.
        let writes = self.evidence.writes(RESULT_PUBLISH_PATIENCE);
        let findings = self.findings(req, scratch.path(), progress, &writes).await;
        self.keep_workspace(&scratch.path().join(SNAPSHOT_DIR))
            .await;
        remove_scratch(scratch).await;
        let mut findings = findings?;
        progress.work_done();
        findings.forget_unstored(writes.store_all().await);
        let mut report = self.report(req, attempt, findings, started);
        if let Some(key) = &self.signing_key {
            key.sign(&mut report);
        }
        Ok(report)
    }

    /// The unsigned report of `findings`.
    fn report(
        &self,
        req: &AuditRequest,
        attempt: u64,
        findings: Findings,
        started: Instant,
    ) -> AuditReport {
        let paths = |added_only: bool| {
            findings
                .changes
                .iter()
                .filter(|c| !added_only || matches!(c, PathChange::Added { .. }))
                .map(|c| c.path().to_string())
                .collect()
        };
        AuditReport {
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            purpose: req.purpose,
            delivery_attempt: attempt,
            worker: self.worker_id.clone(),
            snapshot: req.candidate_snapshot.clone(),
            verdicts: findings.verdicts,
            backcheck: backcheck_lines(&req.contract, &findings.evidence),
            changed_paths: paths(false),
            added_paths: paths(true),
            evidence: findings.evidence,
            gaps: findings.gaps,
            judgment: findings.judgment,
            usage: findings.usage,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            proposal: findings.proposal,
            rubric: findings.rubric,
            spec_hash: req.contract.spec_hash.clone(),
            completes_run: req.completes_run && !req.mechanical_only,
            mechanical_only: req.mechanical_only,
            key_id: String::new(),
            signature: String::new(),
        }
    }
}

/// Remove the audit's scratch directory; removing a large tree blocks, so it runs off the async
/// threads. A failure is logged, never the audit's.
async fn remove_scratch(scratch: tempfile::TempDir) {
    let path = scratch.path().to_path_buf();
    match tokio::task::spawn_blocking(move || scratch.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => {
            tracing::warn!(path = %path.display(), error = %err, "removing scratch dir")
        }
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "removing scratch dir")
        }
    }
}
