//! Running a contract's checks for one audit: each in its own copy of the pristine
//! materialized snapshot (so checks cannot affect each other), under the host's sandbox, with
//! the full output stored in the evidence bucket and only its digest and an excerpt in the
//! report.

use std::path::Path;
use std::time::Duration;

use loopgate_checks::{run_in_scratch_copy, CopySource, ScratchCheck};
use loopgate_common::verdict::Evidence;
use loopgate_common::wire::AuditRequest;

use crate::audit::rules::{evidence_from_run, unix_millis};
use crate::audit::{AuditError, Auditor};

impl Auditor {
    /// Run every check of the contract; gaps collects what could not be recorded.
    pub(crate) async fn run_checks(
        &self,
        req: &AuditRequest,
        scratch: &Path,
        pristine: &Path,
        gaps: &mut Vec<String>,
    ) -> Result<Vec<Evidence>, AuditError> {
        let mut evidence = Vec::new();
        let source = CopySource::Tree(pristine.to_path_buf());
        for (index, criterion) in req.contract.criteria.iter().enumerate() {
            let Some(command) = &criterion.check else {
                continue;
            };
            let check = ScratchCheck {
                scratch,
                index,
                command,
                timeout: Duration::from_secs(criterion.timeout_secs.max(1)),
                path_var: &self.check_path,
                sandbox: &self.sandbox,
            };
            let run =
                run_in_scratch_copy(&check, &source)
                    .await
                    .map_err(|err| AuditError::Scratch {
                        path: err.path,
                        source: err.source,
                    })?;
            tracing::info!(run_id = %req.run_id, check = %criterion.id, verdict = ?run.verdict(),
                end = ?run.end, duration_ms = run.duration.as_millis() as u64, "check finished");
            let log_digest = self.store_output(&criterion.id, &run.output, gaps).await;
            evidence.push(evidence_from_run(
                &criterion.id,
                &run,
                &req.candidate_snapshot,
                log_digest,
                unix_millis(),
            ));
        }
        if !evidence.is_empty() {
            gaps.extend(self.sandbox.limitations.iter().cloned());
        }
        Ok(evidence)
    }

    /// Put a check's output into the evidence bucket; its digest, or None (with a gap).
    pub(crate) async fn store_output(
        &self,
        check_id: &str,
        output: &[u8],
        gaps: &mut Vec<String>,
    ) -> Option<String> {
        let Some(evidence) = &self.evidence else {
            gaps.push(format!(
                "output of check '{check_id}' not stored: no evidence bucket"
            ));
            return None;
        };
        match evidence.put_bytes(output).await {
            Ok(digest) => Some(digest),
            Err(err) => {
                tracing::warn!(check = %check_id, error = %err, "storing check output");
                gaps.push(format!("output of check '{check_id}' could not be stored"));
                None
            }
        }
    }
}
