//! Running a contract's checks for one audit: each in its own copy of the pristine
//! materialized snapshot (so checks cannot affect each other), under the host's sandbox — a
//! layered copy over the pristine tree prepared once for the whole audit where the sandbox
//! allows it and the tree is large enough to be worth it, else a full copy each — with
//! the full output stored in the evidence bucket and only its digest and an excerpt in the
//! report; the screenshots a browser check took (`loopgate browse --screenshot`) are stored
//! the same way and named by digest in its evidence record (signed with it).

use std::path::Path;
use std::time::Duration;

use loopgate_checks::{run_in_scratch_copy, worth_layering, CheckBase, CopySource, ScratchCheck};
use loopgate_protocol::snapshot::Manifest;
use loopgate_protocol::verdict::{Evidence, EvidenceScreenshot};
use loopgate_protocol::wire::AuditRequest;

use crate::audit::auditor::{AuditError, Auditor};
use crate::audit::pipeline::Audited;
use crate::audit::records::evidence_from_run;
use crate::evidence::unix_millis;

impl Auditor {
    /// Run every check of the contract; gaps collects what could not be recorded.
    pub(super) async fn run_checks(
        &self,
        audited: &Audited<'_>,
        gaps: &mut Vec<String>,
    ) -> Result<Vec<Evidence>, AuditError> {
        let Audited {
            req,
            scratch,
            workspace: pristine,
            candidate: manifest,
            progress,
            writes,
            ..
        } = *audited;
        let mut evidence = Vec::new();
        let any_check = req.contract.criteria.iter().any(|c| c.check.is_some());
        let source = match any_check {
            true => self.check_source(pristine, manifest).await,
            false => CopySource::Tree(pristine.to_path_buf()),
        };
        let extra_env = gui_env(req);
        let total = req
            .contract
            .criteria
            .iter()
            .filter(|c| c.check.is_some())
            .count();
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        let mut ordinal: u32 = 0;
        for (index, criterion) in req.contract.criteria.iter().enumerate() {
            let Some(command) = &criterion.check else {
                continue;
            };
            ordinal = ordinal.saturating_add(1);
            progress.check(&criterion.id, ordinal, total);
            let check = ScratchCheck {
                scratch,
                index,
                command,
                timeout: Duration::from_secs(criterion.timeout_secs.max(1)),
                path_var: &self.check_path,
                sandbox: &self.sandbox,
                extra_env: &extra_env,
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
            let log_digest = writes.queue(&format!("check '{}'", criterion.id), &run.output, gaps);
            let mut record = evidence_from_run(
                &criterion.id,
                &run,
                &req.candidate_snapshot,
                log_digest,
                unix_millis(),
                self.sandbox.isolates(),
            );
            for shot in &run.screenshots {
                let what = format!("check '{}' screenshot {}", criterion.id, shot.path);
                if let Some(digest) = writes.queue(&what, &shot.png, gaps) {
                    record.screenshots.push(EvidenceScreenshot {
                        digest,
                        media_type: "image/png".to_string(),
                        path: shot.path.clone(),
                        size_bytes: shot.png.len() as u64,
                    });
                }
            }
            evidence.push(record);
        }
        if !evidence.is_empty() {
            gaps.extend(self.sandbox.limitations.iter().cloned());
        }
        Ok(evidence)
    }

    /// What the audit's checks get their copies from: the pristine tree prepared once as the
    /// base of layered copies when that is possible and worth it, else full copies of it.
    async fn check_source(&self, pristine: &Path, manifest: &Manifest) -> CopySource {
        let tree = CopySource::Tree(pristine.to_path_buf());
        if !self.sandbox.layers() || !worth_layering(manifest.entries.len(), manifest.total_bytes())
        {
            return tree;
        }
        let (dir, sandbox) = (pristine.to_path_buf(), self.sandbox.clone());
        match tokio::task::spawn_blocking(move || CheckBase::prepare(&dir, &sandbox)).await {
            Ok(Ok(Some(base))) => CopySource::Layered(base),
            Ok(Ok(None)) => tree,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "preparing layered check copies; copying instead");
                tree
            }
            Err(err) => {
                tracing::warn!(error = %err, "preparing layered check copies; copying instead");
                tree
            }
        }
    }
}

/// The task's `[gui]` for `loopgate browse` in the checks: it joins `--url /path` to
/// `LOOPGATE_GUI_URL` and starts `LOOPGATE_GUI_SERVE` in the check's copy (inside the check's
/// sandbox), stopping it when the check ends.
fn gui_env(req: &AuditRequest) -> Vec<(String, String)> {
    req.gui.as_ref().map(|g| g.check_env()).unwrap_or_default()
}
