//! One audit of a frozen candidate: materialize it into a fresh scratch directory (every blob
//! re-hashed), diff it against the base, run every contract check in its own scratch copy
//! under the host's sandbox, derive the verdicts mechanically, optionally ask the judge model
//! (which may only tighten them) and build the report. I/O stays here and in
//! `audit_checks.rs`; the decisions are `audit_rules.rs` and `loopgate_common::verdict`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loopgate_common::snapshot::{diff_manifests, PathChange};
use loopgate_common::usage::Usage;
use loopgate_common::verdict::{
    mechanical_verdicts, merge_opinion, ContractVerdict, Evidence, Integrity, Verdicts,
};
use loopgate_common::wire::{AuditReport, AuditRequest};
use loopgate_models::ChatClient;
use loopgate_transport::{SnapshotError, SnapshotStore};

pub use crate::audit_rules::*;
use crate::judge::judge;
use crate::judge_prompt::JudgeInput;
use crate::sandbox::Sandbox;

/// Errors that leave no report: the request should be retried (nak) on this or another worker.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("snapshot store unavailable: {0}")]
    Store(#[from] SnapshotError),
    #[error("scratch directory under {path:?}: {source}")]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the auditor needs to run audits. Cheap to share behind an `Arc`.
pub struct Auditor {
    /// The snapshot bucket, read only.
    pub store: SnapshotStore,
    /// Where full check outputs go (`lg-evidence`); `None`: only digests and excerpts.
    pub evidence: Option<SnapshotStore>,
    /// Each audit materializes into a fresh directory under this one.
    pub work_dir: PathBuf,
    pub worker_id: String,
    /// `PATH` for acceptance checks.
    pub check_path: String,
    /// How checks are isolated here.
    pub sandbox: Sandbox,
    /// A change outside the increment's write_scope is a violation, not just suspect.
    pub strict_scope: bool,
    /// Judge clients by model profile name.
    pub judges: BTreeMap<String, ChatClient>,
}

/// Pieces of a report, assembled by `Auditor::audit`.
struct Findings {
    verdicts: Verdicts,
    evidence: Vec<Evidence>,
    gaps: Vec<String>,
    changes: Vec<PathChange>,
    judgment: Option<String>,
    usage: Usage,
}

impl Auditor {
    /// Audit one request. `Err` only when the store or the local disk failed (retry later); an
    /// untrustworthy candidate is a report with an integrity violation, never an error.
    pub async fn audit(&self, req: &AuditRequest, attempt: u64) -> Result<AuditReport, AuditError> {
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
        let findings = self.findings(req, scratch.path()).await;
        let path = scratch.path().to_path_buf();
        // Removing a large tree blocks; keep it off the async threads.
        match tokio::task::spawn_blocking(move || scratch.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(path = %path.display(), error = %err, "removing scratch dir")
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "removing scratch dir")
            }
        }
        let findings = findings?;
        Ok(AuditReport {
            run_id: req.run_id.clone(),
            generation: req.generation,
            round: req.round,
            purpose: req.purpose,
            delivery_attempt: attempt,
            worker: self.worker_id.clone(),
            snapshot: req.candidate_snapshot.clone(),
            verdicts: findings.verdicts,
            backcheck: backcheck_lines(&req.contract, &findings.evidence),
            evidence: findings.evidence,
            gaps: findings.gaps,
            changed_paths: findings
                .changes
                .iter()
                .map(|c| c.path().to_string())
                .collect(),
            judgment: findings.judgment,
            usage: findings.usage,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    async fn findings(&self, req: &AuditRequest, scratch: &Path) -> Result<Findings, AuditError> {
        let workspace = scratch.join("snapshot");
        let candidate = match self
            .store
            .materialize(&req.candidate_snapshot, &workspace)
            .await
        {
            Ok(manifest) => manifest,
            Err(err) if is_untrustworthy(&err) => {
                tracing::warn!(run_id = %req.run_id, snapshot = %req.candidate_snapshot, error = %err,
                    "candidate snapshot failed verification");
                let (verdicts, evidence, gaps) = integrity_failure(
                    &req.contract,
                    &req.candidate_snapshot,
                    &err.to_string(),
                    unix_millis(),
                );
                return Ok(Findings {
                    verdicts,
                    evidence,
                    gaps,
                    changes: Vec::new(),
                    judgment: None,
                    usage: Usage::default(),
                });
            }
            Err(err) => return Err(err.into()),
        };
        let mut extra_gaps = Vec::new();
        let mut base_unverified = false;
        let changes = match self.store.manifest(&req.base_snapshot).await {
            Ok(base) => diff_manifests(&base, &candidate),
            Err(err) if is_untrustworthy(&err) => {
                base_unverified = true;
                extra_gaps.push(format!(
                    "base snapshot unusable, changes not verified: {err}"
                ));
                Vec::new()
            }
            Err(err) => return Err(err.into()),
        };

        let evidence = self
            .run_checks(req, scratch, &workspace, &mut extra_gaps)
            .await?;
        let (mut verdicts, mut gaps) =
            mechanical_verdicts(&req.contract, &evidence, &changes, &req.write_scope);
        gaps.append(&mut extra_gaps);
        if base_unverified {
            verdicts.integrity = verdicts.integrity.max(Integrity::Suspect);
        }
        if let Some(gap) = strict_scope_violation(self.strict_scope, &changes, &req.write_scope) {
            verdicts.integrity = Integrity::Violation;
            gaps.push(gap);
        }
        if !req.contract.is_intact() {
            verdicts.contract = ContractVerdict::Invalid;
            gaps.push("contract spec hash does not match its content".to_string());
        }

        let mut judgment = None;
        let mut usage = Usage::default();
        if let Some(name) = &req.auditor_profile {
            match self.judges.get(name) {
                None => gaps.push(format!(
                    "auditor model '{name}' not configured here; mechanical audit only"
                )),
                Some(client) => {
                    let input = JudgeInput {
                        contract: &req.contract,
                        objective: &req.objective,
                        changes: &changes,
                        evidence: &evidence,
                    };
                    let outcome =
                        judge(client, &input, Duration::from_secs(req.episode_secs.max(1))).await;
                    usage.add(outcome.usage);
                    gaps.extend(outcome.gaps);
                    judgment = outcome.judgment;
                    if let Some(opinion) = outcome.opinion {
                        let tightened =
                            apply_backcheck(&req.contract, opinion.verdicts, &opinion.backcheck);
                        let merged = merge_opinion(verdicts, tightened.0);
                        gaps.extend(tightened.1);
                        gaps.extend(tightening_gap(verdicts, merged));
                        verdicts = merged;
                    }
                }
            }
        }
        Ok(Findings {
            verdicts,
            evidence,
            gaps,
            changes,
            judgment,
            usage,
        })
    }
}
