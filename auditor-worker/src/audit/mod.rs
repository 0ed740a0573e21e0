//! One audit of a frozen candidate: materialize it into a fresh scratch directory (every blob
//! re-hashed), diff it against the base, run every contract check in its own scratch copy
//! under the host's sandbox, derive the verdicts mechanically, optionally ask the judge model
//! (which may only tighten them), score the contract's rubric (`rubric_judge.rs`) and build the
//! report, signed with the pool's key when one is configured. I/O stays here, in `audit_checks.rs` and `rubric_judge.rs`; the decisions are
//! `audit_rules.rs`, `rubric_verdict.rs` and `loopgate_common::{verdict, rubric}`.

pub(crate) mod rules;
mod run_checks;
pub(crate) mod verdict_rules;
mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::audit::verdict_rules::{mechanical_verdicts, merge_opinion};
use loopgate_common::contract_proposal::{proposal_criteria, MAX_PROPOSAL_BYTES, PROPOSAL_FILE};
use loopgate_models::ChatClient;
use loopgate_protocol::report::signing::ReportSigningKey;
use loopgate_protocol::rubric::RubricVerdict;
use loopgate_protocol::snapshot::{diff_manifests, PathChange};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{ContractVerdict, Evidence, Integrity, Verdicts};
use loopgate_protocol::wire::{AuditPurpose, AuditReport, AuditRequest};
use loopgate_snapshot::{SnapshotError, SnapshotStore, WorkspaceCache};

pub(crate) use crate::audit::rules::*;
use crate::judge::deferral::{deferral_gap, failing_task_checks};
use crate::judge::judge;
use crate::judge::prompt::JudgeInput;
use crate::rubric::verdict::{rubric_evidence, unscored};
use loopgate_checks::Sandbox;

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
    /// The pool's key: every report is signed with it (`None`: reports go out unsigned).
    pub signing_key: Option<Arc<ReportSigningKey>>,
    /// Warm workspaces (`[auditor] cache_bytes`); `None`: every audit materializes afresh.
    pub workspaces: Option<WorkspaceCache>,
}

/// Pieces of a report, assembled by `Auditor::audit`.
struct Findings {
    verdicts: Verdicts,
    evidence: Vec<Evidence>,
    gaps: Vec<String>,
    changes: Vec<PathChange>,
    judgment: Option<String>,
    usage: Usage,
    proposal: Option<String>,
    rubric: Option<RubricVerdict>,
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
        self.keep_workspace(&scratch.path().join("snapshot")).await;
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
        let mut report = AuditReport {
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
            added_paths: findings
                .changes
                .iter()
                .filter(|c| matches!(c, PathChange::Added { .. }))
                .map(|c| c.path().to_string())
                .collect(),
            judgment: findings.judgment,
            usage: findings.usage,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            proposal: findings.proposal,
            rubric: findings.rubric,
            spec_hash: req.contract.spec_hash.clone(),
            key_id: String::new(),
            signature: String::new(),
        };
        if let Some(key) = &self.signing_key {
            key.sign(&mut report);
        }
        Ok(report)
    }

    async fn findings(&self, req: &AuditRequest, scratch: &Path) -> Result<Findings, AuditError> {
        // The manager allows the whole audit this long; the model calls get what is left.
        let deadline = Instant::now() + Duration::from_secs(req.episode_secs.max(1));
        let workspace = scratch.join("snapshot");
        let candidate = match self
            .materialize_candidate(&req.candidate_snapshot, &workspace)
            .await
        {
            Ok(manifest) => manifest,
            Err(err) if is_untrustworthy(&err) => {
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
                return Ok(Findings {
                    verdicts,
                    evidence,
                    gaps,
                    changes: Vec::new(),
                    judgment: None,
                    usage: Usage::default(),
                    proposal: None,
                    rubric,
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

        if req.purpose == AuditPurpose::Plan {
            let mut findings = plan_findings(req, &workspace, changes, extra_gaps).await;
            // A proposed contract's checks run once before any work: a contract that already
            // passes tests nothing (the manager refuses it).
            if let Some(criteria) = findings
                .proposal
                .as_deref()
                .and_then(|text| proposal_criteria(text).ok())
            {
                let mut pre = req.clone();
                pre.contract.criteria = criteria;
                findings.evidence = self
                    .run_checks(&pre, scratch, &workspace, &candidate, &mut findings.gaps)
                    .await?;
            }
            return Ok(findings);
        }
        let mut evidence = self
            .run_checks(req, scratch, &workspace, &candidate, &mut extra_gaps)
            .await?;
        // While one of the task's blocking checks fails, no model is asked (see `deferral`).
        let failing = failing_task_checks(&req.contract, &evidence);
        let ask_judge = failing.is_empty() || req.auditor_profile.is_none();
        let mut clause_usage = Usage::default();
        if ask_judge {
            // Goal clauses without a working check: one judged question each, as evidence,
            // with what the commands they quote print on the candidate.
            let commands = self
                .run_clause_commands(req, scratch, &workspace, &candidate, &evidence)
                .await;
            let (clause_gaps, used) = self
                .judge_clauses(
                    req,
                    &workspace,
                    &changes,
                    &mut evidence,
                    &commands,
                    deadline,
                )
                .await;
            extra_gaps.extend(clause_gaps);
            clause_usage = used;
        } else {
            tracing::info!(run_id = %req.run_id, failing = ?failing, "blocking checks fail: the judge is not asked");
            extra_gaps.push(deferral_gap(&failing));
        }
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
        let mut usage = clause_usage;
        if let Some(name) = &req.auditor_profile {
            match self.judges.get(name) {
                None => gaps.push(format!(
                    "auditor model '{name}' not configured here; mechanical audit only"
                )),
                // Deferred (see above): the gate is closed whatever it says.
                Some(_) if !ask_judge => {}
                Some(client) => {
                    let input = JudgeInput {
                        contract: &req.contract,
                        objective: &req.objective,
                        changes: &changes,
                        evidence: &evidence,
                    };
                    let budget = deadline.saturating_duration_since(Instant::now());
                    let outcome = judge(client, &input, budget).await;
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
        // Scored after the judge's opinion, which never sees the rubric's evidence.
        let mut rubric = None;
        if let Some(contract_rubric) = &req.contract.rubric {
            let scored = self
                .rubric_findings(
                    req,
                    contract_rubric,
                    &workspace,
                    &changes,
                    &evidence,
                    deadline,
                )
                .await;
            usage.add(scored.usage);
            gaps.extend(scored.gaps);
            evidence.push(scored.evidence);
            rubric = Some(scored.verdict);
        }
        Ok(Findings {
            verdicts,
            evidence,
            gaps,
            changes,
            judgment,
            usage,
            proposal: None,
            rubric,
        })
    }
}

/// A planning episode's audit: which paths changed and whether they stay in the write scope
/// (strictly: anything outside it is a violation), and the proposal file as frozen in the
/// snapshot. No checks run and no judge is asked: there is no contract to check yet.
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
