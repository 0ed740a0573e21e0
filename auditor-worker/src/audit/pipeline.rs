//! The phases of one audit: the candidate verified as it is materialized, its changes from the
//! base, then a planning episode's audit (`plan.rs`) or a work episode's: the checks, the goal's
//! clauses judged (unless a blocking check fails), the mechanical verdicts, the judge's opinion
//! (which may only tighten them) and the rubric scored.

use std::path::Path;
use std::time::{Duration, Instant};

use loopgate_protocol::snapshot::{diff_manifests, Manifest, PathChange};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{Evidence, Verdicts};
use loopgate_protocol::wire::{AuditPurpose, AuditRequest, AuditStage};

use crate::audit::auditor::{AuditError, Auditor};
use crate::audit::findings::Findings;
use crate::audit::progress::AuditProgressTx;
use crate::audit::records::{count_over_limit, is_untrustworthy};
use crate::audit::report::SNAPSHOT_DIR;
use crate::audit::verdict_rules::{
    apply_backcheck, mechanical_findings, merge_opinion, plumbing_changes, tightening_gap,
};
use crate::evidence::EvidenceWrites;
use crate::judge::check_text::set_aside;
use crate::judge::clauses::judge_clauses;
use crate::judge::deferral::{deferral_gap, failing_task_checks};
use crate::judge::judge;
use crate::judge::prompt::JudgeInput;
use crate::judge_context::{JudgeContext, JudgeModel};
use crate::rubric::score::rubric_findings;

/// One audit's request and candidate, as its phases share them.
#[derive(Clone, Copy)]
pub(super) struct Audited<'a> {
    pub(super) req: &'a AuditRequest,
    /// The audit's own directory: the candidate and the checks' copies live under it.
    pub(super) scratch: &'a Path,
    /// The pristine, verified candidate.
    pub(super) workspace: &'a Path,
    pub(super) candidate: &'a Manifest,
    /// The manager allows the whole audit until then.
    pub(super) deadline: Instant,
    /// Told the stage and the check running.
    pub(super) progress: &'a AuditProgressTx,
    /// Where its evidence is queued until the work is done.
    pub(super) writes: &'a EvidenceWrites,
}

impl Auditor {
    /// What the audit of `req` finds, working in `scratch`.
    pub(super) async fn findings(
        &self,
        req: &AuditRequest,
        scratch: &Path,
        progress: &AuditProgressTx,
        writes: &EvidenceWrites,
    ) -> Result<Findings, AuditError> {
        let deadline = Instant::now() + Duration::from_secs(req.episode_secs.max(1));
        let workspace = scratch.join(SNAPSHOT_DIR);
        let candidate = match self
            .materialize_candidate(&req.candidate_snapshot, &workspace)
            .await
        {
            Ok(manifest) => manifest,
            Err(err) if is_untrustworthy(&err) => {
                count_over_limit(&err);
                return Ok(Findings::untrustworthy(req, &err));
            }
            Err(err) => return Err(err.into()),
        };
        let (changes, base_gap) = self.changes_from_base(req, &candidate).await?;
        let audited = Audited {
            req,
            scratch,
            workspace: &workspace,
            candidate: &candidate,
            deadline,
            progress,
            writes,
        };
        if req.purpose == AuditPurpose::Plan {
            let gaps = base_gap.into_iter().collect();
            return self.plan_audit(&audited, changes, gaps).await;
        }
        self.work_audit(&audited, changes, base_gap).await
    }

    /// The candidate's changes from the request's base; none, with a gap line, when the base
    /// itself cannot be trusted.
    async fn changes_from_base(
        &self,
        req: &AuditRequest,
        candidate: &Manifest,
    ) -> Result<(Vec<PathChange>, Option<String>), AuditError> {
        match self.store.manifest(&req.base_snapshot).await {
            Ok(base) => Ok((diff_manifests(&base, candidate), None)),
            Err(err) if is_untrustworthy(&err) => {
                count_over_limit(&err);
                Ok((
                    Vec::new(),
                    Some(format!(
                        "base snapshot unusable, changes not verified: {err}"
                    )),
                ))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// A work episode's findings; `base_gap`: the base could not be trusted, so the changes
    /// are not verified.
    async fn work_audit(
        &self,
        audited: &Audited<'_>,
        changes: Vec<PathChange>,
        base_gap: Option<String>,
    ) -> Result<Findings, AuditError> {
        let req = audited.req;
        let base_unverified = base_gap.is_some();
        let mut found_gaps: Vec<String> = base_gap.into_iter().collect();
        let mut evidence = self.run_checks(audited, &mut found_gaps).await?;
        let cx = JudgeContext {
            req,
            changes: &changes,
            workspace: audited.workspace,
            model: self.judge_model(req),
            deadline: audited.deadline,
        };
        // A sibling's checks-only audit asks no model: the winner's full audit does.
        let (judge_asked, mut usage) = match req.mechanical_only {
            true => (false, Usage::default()),
            false => {
                self.judge_clauses_unless_deferred(&cx, audited, &mut evidence, &mut found_gaps)
                    .await
            }
        };
        let (mut verdicts, mut gaps) = mechanical_findings(
            req,
            &evidence,
            &changes,
            found_gaps,
            base_unverified,
            self.strict_scope,
        );
        // A security event: the candidate touched what decides how its tests report (counted
        // with the report's integrity in `loopgate.audit.verdicts`).
        for (path, why) in plumbing_changes(&req.contract, &changes) {
            tracing::warn!(run_id = %req.run_id, round = req.round, path, why,
                reason = "test_plumbing_changed", "candidate changed test plumbing: integrity violation");
        }
        if judge_asked && matches!(cx.model, JudgeModel::Ready(_)) {
            audited.progress.stage(AuditStage::Judge);
        }
        let judgment = match (judge_asked, req.mechanical_only) {
            (_, true) => None,
            (true, false) => opinion(&cx, &evidence, &mut verdicts, &mut gaps, &mut usage).await,
            (false, false) => not_asked(&cx, &mut gaps),
        };
        // Scored after the judge's opinion, which never sees the rubric's evidence.
        let mut rubric = None;
        let contract_rubric = req
            .contract
            .rubric
            .as_ref()
            .filter(|_| !req.mechanical_only);
        if let Some(contract_rubric) = contract_rubric {
            audited.progress.stage(AuditStage::Rubric);
            let scored = rubric_findings(&cx, contract_rubric, &evidence, audited.writes).await;
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

    /// Goal clauses without a working check (none, or a derived check set aside by its own
    /// text): one judged question each, as evidence, with what
    /// the commands they quote print on the candidate. While one of the task's blocking checks
    /// fails no model is asked (see `deferral`) and a gap line says so. Returns whether the
    /// judge is asked at all, and the tokens.
    async fn judge_clauses_unless_deferred(
        &self,
        cx: &JudgeContext<'_>,
        audited: &Audited<'_>,
        evidence: &mut Vec<Evidence>,
        gaps: &mut Vec<String>,
    ) -> (bool, Usage) {
        let req = cx.req;
        let failing = failing_task_checks(&req.contract, evidence);
        if !failing.is_empty() && req.auditor_profile.is_some() {
            tracing::info!(run_id = %req.run_id, failing = ?failing, "blocking checks fail: the judge is not asked");
            gaps.push(deferral_gap(&failing));
            return (false, Usage::default());
        }
        if matches!(cx.model, JudgeModel::Ready(_)) {
            audited.progress.stage(AuditStage::Judge);
        }
        // Decided from the checks' text on this auditor's shell, never from their runs.
        let set_aside = set_aside(&req.contract.criteria, &self.check_path).await;
        let commands = self.run_clause_commands(cx, audited, &set_aside).await;
        let (clause_gaps, usage) = judge_clauses(cx, evidence, &commands, &set_aside).await;
        gaps.extend(clause_gaps);
        (true, usage)
    }
}

/// The judge's holistic opinion, which may only tighten `verdicts`; the reply it was read from
/// is the report's judgment.
async fn opinion(
    cx: &JudgeContext<'_>,
    evidence: &[Evidence],
    verdicts: &mut Verdicts,
    gaps: &mut Vec<String>,
    usage: &mut Usage,
) -> Option<String> {
    let client = match cx.model {
        JudgeModel::NoneNamed => return None,
        JudgeModel::NotConfigured(_) => return not_asked(cx, gaps),
        JudgeModel::Ready(client) => client,
    };
    let input = JudgeInput {
        contract: &cx.req.contract,
        objective: &cx.req.objective,
        changes: cx.changes,
        evidence,
    };
    let budget = cx.deadline.saturating_duration_since(Instant::now());
    let outcome = judge(client, &input, budget).await;
    usage.add(outcome.usage);
    gaps.extend(outcome.gaps);
    if let Some(opinion) = outcome.opinion {
        let (tightened, backcheck_gap) =
            apply_backcheck(&cx.req.contract, opinion.verdicts, &opinion.backcheck);
        let merged = merge_opinion(*verdicts, tightened);
        gaps.extend(backcheck_gap);
        gaps.extend(tightening_gap(*verdicts, merged));
        *verdicts = merged;
    }
    outcome.judgment
}

/// No opinion: the request names a model this auditor does not serve (a gap line says so), or
/// the judge was deferred (the gate is closed whatever it says).
fn not_asked(cx: &JudgeContext<'_>, gaps: &mut Vec<String>) -> Option<String> {
    if let JudgeModel::NotConfigured(name) = cx.model {
        gaps.push(format!(
            "auditor model '{name}' not configured here; mechanical audit only"
        ));
    }
    None
}
