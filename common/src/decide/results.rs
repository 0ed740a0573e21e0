//! Executor results and audit reports.

use super::planning::on_plan_audit;
use super::progress::{escalate_when_stagnant, note_progress, remember_audit, remembered_audit};
use super::regression::{regression, Regression};
use super::step_retry::{retry_step, step_to_retry};
use super::transition::{Decision, HISTORY_KEEP};
use super::tx::Tx;
use crate::gate::evaluate_gate;
use crate::state::{AuditedSnapshot, LogEvent, Phase, RoundSummary, RunRecord, RunState};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::{RubricOutcome, RubricStanding, RubricVerdict};
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};
use loopgate_protocol::wire::{AuditPurpose, AuditReport, ExecOutcome, ExecResult};

/// Keep the rubric's standing, log the score and tell the manager when it did not pass.
fn record_rubric(tx: &mut Tx, round: u32, candidate: &str, r: &RubricVerdict) {
    tx.record.audit.rubric = Some(RubricStanding {
        snapshot: candidate.to_string(),
        average: r.average(),
        threshold: r.threshold,
        strategy: r.strategy(),
        passed: r.passed(),
    });
    tx.log(LogEvent::RubricScored {
        snapshot: candidate.to_string(),
        average: r.average(),
        threshold: r.threshold,
        strategy: r.strategy(),
        layer: r.score.as_ref().map(|s| s.layer),
        passed: r.passed(),
        summary: r.summary(),
    });
    if !r.passed() && r.outcome != Some(RubricOutcome::Pivot) {
        tx.feedback(format!(
            "Round {round}: {}. Judge: {}",
            r.summary(),
            r.reason
        ));
    }
}

fn push_history(tx: &mut Tx, summary: RoundSummary) {
    tx.record.history.push(summary);
    let excess = tx.record.history.len().saturating_sub(HISTORY_KEEP);
    tx.record.history.drain(..excess);
}

pub(super) fn on_exec(record: &RunRecord, result: &ExecResult, now: i64) -> Decision {
    if result.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", result.generation));
    }
    let (increment, capability) = match &record.phase {
        Phase::Executing {
            round,
            increment,
            capability,
        } if *round == result.round => (increment.clone(), *capability),
        _ => {
            return Decision::Ignore(format!(
                "no executor result for round {} is pending",
                result.round
            ))
        }
    };
    let mut tx = Tx::new(record, now);
    tx.episode_in_flight = false;
    tx.record.accounting.usage.executor.add(result.usage);
    let (candidate, summary, claimed_done, tool_calls, error) = match &result.outcome {
        ExecOutcome::Frozen {
            candidate,
            summary,
            claimed_done,
            tool_calls,
            ..
        } => (
            Some(candidate.clone()),
            summary.clone(),
            *claimed_done,
            *tool_calls,
            None,
        ),
        ExecOutcome::Failed { error } => (None, String::new(), false, 0, Some(error.clone())),
    };
    let self_check_refusals = match &result.outcome {
        ExecOutcome::Frozen {
            self_check_refusals,
            ..
        } => *self_check_refusals,
        ExecOutcome::Failed { .. } => 0,
    };
    tx.log(LogEvent::ExecResult {
        worker: result.worker.clone(),
        candidate: candidate.clone(),
        summary: summary.clone(),
        claimed_done,
        tool_calls,
        error: error.clone(),
        self_check_refusals,
        agent_isolation: result.agent_isolation.clone(),
        tokens: Some(
            result
                .usage
                .input_tokens
                .saturating_add(result.usage.output_tokens),
        ),
    });
    push_history(
        &mut tx,
        RoundSummary {
            round: result.round,
            objective: increment.objective.clone(),
            exec_summary: error
                .clone()
                .map(|e| format!("executor failed: {e}"))
                .unwrap_or(summary),
            candidate: candidate.clone(),
            verdicts: None,
            gaps: Vec::new(),
            failing: Vec::new(),
            passing: Vec::new(),
            base: Some(record.snapshot.clone()),
            changed_paths: Vec::new(),
            added_paths: Vec::new(),
            checked: 0,
            reused_from: None,
            capability: Some(capability),
            retried: record.streaks.step_retries > 0,
            set_aside: None,
        },
    );
    if tx.check_spend_budget() {
        return tx.finish();
    }
    let purpose = if tx.record.planning.stage.is_some() {
        AuditPurpose::Plan
    } else {
        AuditPurpose::Round
    };
    // An identical candidate is not audited again: the earlier report is bound to this very
    // snapshot id under the same contract.
    let reusable = candidate
        .as_deref()
        .filter(|_| purpose == AuditPurpose::Round)
        .and_then(|c| remembered_audit(record, c))
        .cloned();
    if let Some(earlier) = reusable {
        tx.log(LogEvent::AuditReused {
            snapshot: earlier.snapshot.clone(),
            from_round: earlier.round,
        });
        if let Some(last) = tx.record.history.last_mut() {
            last.reused_from = Some(earlier.round);
        }
        let outcome = AuditOutcome {
            round: result.round,
            purpose,
            candidate: earlier.snapshot.clone(),
            verdicts: earlier.verdicts,
            downgraded: earlier.downgraded,
            evidence: earlier.evidence.clone(),
            gaps: earlier.gaps.clone(),
            changed_paths: earlier.changed_paths.clone(),
            added_paths: earlier.added_paths.clone(),
            rubric: earlier.rubric.clone(),
            worker: format!("reused from round {}", earlier.round),
            reused: true,
        };
        return apply_audit(tx, outcome);
    }
    match candidate {
        Some(candidate) => tx.dispatch_audit(
            purpose,
            candidate,
            increment.objective,
            increment.write_scope,
        ),
        None => {
            let error = error.unwrap_or_default();
            tx.feedback(format!(
                "Round {}: the executor could not finish the step: {error}",
                result.round
            ));
            tx.continue_after_failure(&format!("the executor failed: {error}"));
        }
    }
    tx.finish()
}

/// The acceptance-constraint guard: a report that says complete while a blocking criterion has
/// no passing evidence on its snapshot is downgraded to incomplete/unknown.
pub fn guard_report(contract: &Contract, report: &AuditReport) -> (Verdicts, bool) {
    let mut verdicts = report.verdicts;
    if verdicts.status != AuditStatus::Complete {
        return (verdicts, false);
    }
    let unmet = contract.blocking().any(|c| {
        !report.evidence.iter().any(|e| {
            e.check_id == c.id
                && e.artifact_version == report.snapshot
                && e.verdict == CheckVerdict::Pass
        })
    });
    if unmet {
        verdicts.status = AuditStatus::Incomplete;
        verdicts.contract = ContractVerdict::Unknown;
    }
    (verdicts, unmet)
}

pub(super) fn on_audit(record: &RunRecord, report: &AuditReport, now: i64) -> Decision {
    if report.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", report.generation));
    }
    let (purpose, candidate) = match &record.phase {
        Phase::Auditing {
            round,
            purpose,
            candidate,
            ..
        } if *round == report.round
            && *purpose == report.purpose
            && *candidate == report.snapshot =>
        {
            (*purpose, candidate.clone())
        }
        _ => return Decision::Ignore(format!("no audit of round {} is pending", report.round)),
    };
    if report.spec_hash.is_empty() {
        // A report that names no contract cannot be checked against the run's (the results
        // loop already refuses it as a security event; this is the state machine's own guard).
        return Decision::Ignore("the audit report names no spec hash".to_string());
    }
    if report.spec_hash != record.contract.spec_hash {
        return Decision::Ignore(format!(
            "the audit was made against contract {}, not the run's frozen contract {}",
            report.spec_hash.get(..12).unwrap_or(&report.spec_hash),
            record.contract.short_hash()
        ));
    }
    let mut tx = Tx::new(record, now);
    tx.episode_in_flight = false;
    tx.record.accounting.usage.auditor.add(report.usage);
    if purpose == AuditPurpose::Plan {
        tx.log(LogEvent::AuditReport {
            purpose,
            worker: report.worker.clone(),
            snapshot: candidate.clone(),
            verdicts: report.verdicts,
            passing: 0,
            checked: 0,
            gaps: report.gaps.clone(),
            downgraded: false,
        });
        if !tx.check_spend_budget() {
            on_plan_audit(&mut tx, report);
        }
        return tx.finish();
    }
    tx.audit_report = Some(report.clone());
    let (verdicts, downgraded) = guard_report(&record.contract, report);
    // Only evidence bound to the audited snapshot counts.
    let evidence: Vec<Evidence> = report
        .evidence
        .iter()
        .filter(|e| e.artifact_version == candidate)
        .cloned()
        .collect();
    let outcome = AuditOutcome {
        round: report.round,
        purpose,
        candidate,
        verdicts,
        downgraded,
        evidence,
        gaps: report.gaps.clone(),
        changed_paths: report.changed_paths.clone(),
        added_paths: report.added_paths.clone(),
        rubric: record
            .contract
            .rubric
            .as_ref()
            .and(report.rubric.as_ref())
            .cloned(),
        worker: report.worker.clone(),
        reused: false,
    };
    apply_audit(tx, outcome)
}

/// An audit's outcome as the gate reads it: from a report, or reused from an earlier audit of
/// the same snapshot.
struct AuditOutcome {
    round: u32,
    purpose: AuditPurpose,
    candidate: String,
    /// After the acceptance-constraint guard.
    verdicts: Verdicts,
    downgraded: bool,
    /// Bound to `candidate`.
    evidence: Vec<Evidence>,
    gaps: Vec<String>,
    changed_paths: Vec<String>,
    /// Of `changed_paths`, those the candidate added.
    added_paths: Vec<String>,
    rubric: Option<RubricVerdict>,
    worker: String,
    reused: bool,
}

/// What an audited round does to the run: the artifact moves (or the candidate is rejected or
/// rolled back), the gate is evaluated, progress is noted, and the run completes or goes on.
fn apply_audit(mut tx: Tx, outcome: AuditOutcome) -> Decision {
    let AuditOutcome {
        round,
        purpose,
        candidate,
        verdicts,
        downgraded,
        evidence,
        gaps,
        changed_paths,
        added_paths,
        rubric,
        worker,
        reused,
    } = outcome;
    tx.evidence = if reused { Vec::new() } else { evidence.clone() };
    if !reused {
        let spec_hash = tx.record.contract.spec_hash.clone();
        remember_audit(
            &mut tx,
            AuditedSnapshot {
                snapshot: candidate.clone(),
                spec_hash,
                round,
                verdicts,
                downgraded,
                evidence: evidence.clone(),
                gaps: gaps.clone(),
                changed_paths: changed_paths.clone(),
                added_paths: added_paths.clone(),
                rubric: rubric.clone(),
            },
        );
    }
    let rubric = rubric.as_ref();
    let pivot = rubric.is_some_and(|r| r.outcome == Some(RubricOutcome::Pivot));
    if let Some(r) = rubric {
        record_rubric(&mut tx, round, &candidate, r);
    }
    let regressed =
        (purpose == AuditPurpose::Round && verdicts.integrity != Integrity::Violation && !pivot)
            .then(|| regression(&tx.record, &evidence))
            .flatten();
    if verdicts.integrity == Integrity::Violation {
        let reason = format!("integrity violation: {}", gaps.join("; "));
        tx.log(LogEvent::CandidateRejected {
            candidate: candidate.clone(),
            reason: reason.clone(),
        });
        tx.feedback(format!(
            "Round {round}: the candidate was rejected ({reason}); the workspace stays at the previous snapshot."
        ));
    } else if pivot {
        let to = tx
            .record
            .audit
            .last_good_snapshot
            .clone()
            .unwrap_or_else(|| tx.record.base_snapshot.clone());
        let reason = rubric.map(|r| r.reason.clone()).unwrap_or_default();
        tx.log(LogEvent::Pivot {
            from: candidate.clone(),
            to: to.clone(),
            reason: reason.clone(),
        });
        tx.feedback(format!(
            "Round {}: the judge said PIVOT ({}); the artifact was rolled back to snapshot {} \
             (the last one whose audit passed, or the starting workspace). Take a different \
             approach. Judge: {}",
            round,
            rubric.map(|r| r.summary()).unwrap_or_default(),
            to.get(..12).unwrap_or(&to),
            reason
        ));
        tx.record.audit.evidence = Vec::new();
        tx.record.snapshot = to;
    } else if let Some(regressed) = &regressed {
        let reason = regressed.reason();
        tx.log(LogEvent::CandidateRejected {
            candidate: candidate.clone(),
            reason: reason.clone(),
        });
        tx.feedback(format!(
            "Round {round}: the candidate was set aside as {reason}."
        ));
    } else {
        tx.record.snapshot = candidate.clone();
        tx.record.audit.evidence = evidence.clone();
        if verdicts.status == AuditStatus::Complete
            && verdicts.integrity == Integrity::Clean
            && verdicts.contract == ContractVerdict::Aligned
        {
            tx.record.audit.last_good_snapshot = Some(candidate.clone());
        }
    }
    // A candidate set aside leaves the verdicts of the snapshot it regressed from standing: the
    // gate stays about the artifact (which may have passed it already, with
    // `complete_on_gate = false`), and a later `done` is judged on it.
    if regressed.is_none() {
        tx.record.audit.last_verdicts = Some((verdicts, candidate.clone()));
    }
    let r = &tx.record;
    let gate = evaluate_gate(
        &r.contract,
        r.audit.last_verdicts.as_ref().map(|(v, s)| (v, s.as_str())),
        &r.audit.evidence,
        &r.snapshot,
    );
    // What the audit found on the candidate itself: the gate's count when the candidate is the
    // artifact now, its own when it was rejected or set aside.
    let (passing, checked) = if candidate == r.snapshot {
        (gate.passing, gate.checked)
    } else {
        let own = evaluate_gate(&r.contract, None, &evidence, &candidate);
        (own.passing, own.checked)
    };
    tx.log(LogEvent::AuditReport {
        purpose,
        worker,
        snapshot: candidate.clone(),
        verdicts,
        passing,
        checked,
        gaps: gaps.clone(),
        downgraded,
    });
    tx.log(LogEvent::Gate {
        passed: gate.passed,
        snapshot: gate.snapshot.clone(),
        reasons: gate.reasons.clone(),
    });
    if let Some(last) = tx.record.history.last_mut().filter(|h| h.round == round) {
        last.verdicts = Some(verdicts);
        last.gaps = gaps.clone();
        last.changed_paths = changed_paths;
        last.added_paths = added_paths;
        last.checked = checked;
        last.failing = evidence
            .iter()
            .filter(|e| e.verdict != CheckVerdict::Pass)
            .map(|e| (e.check_id.clone(), e.output_excerpt.clone()))
            .collect();
        last.passing = evidence
            .iter()
            .filter(|e| e.verdict == CheckVerdict::Pass)
            .map(|e| e.check_id.clone())
            .collect();
        last.set_aside = regressed.as_ref().map(Regression::reason);
    }
    let passed = gate.passed;
    let reasons = gate.reasons.join("; ");
    tx.record.audit.last_gate = Some(gate);
    if purpose == AuditPurpose::Round {
        if regressed.is_some() {
            // Losing ground is not progress, however new its failure output.
            tx.record.streaks.stagnant_rounds += 1;
        } else {
            note_progress(&mut tx, &evidence);
        }
    }
    if tx.check_spend_budget() {
        return tx.finish();
    }
    if passed {
        tx.record.streaks.failed_rounds = 0;
    }
    if pivot {
        tx.continue_after_failure("the judge said PIVOT");
        return tx.finish();
    }
    match (purpose, passed) {
        (AuditPurpose::Final, true) => tx.terminal(
            RunState::Completed,
            "the final audit passed the gate".to_string(),
        ),
        (AuditPurpose::Round, true) if tx.record.task.complete_on_gate => tx.terminal(
            RunState::Completed,
            "an audit of the current snapshot passed the gate on every criterion".to_string(),
        ),
        (AuditPurpose::Final, false) => {
            tx.feedback(format!("The final audit did not pass the gate: {reasons}"));
            tx.continue_after_failure(&reasons);
        }
        (AuditPurpose::Round, true) => tx.request_decision(),
        (AuditPurpose::Round, false) => {
            let level = tx.record.escalation_level;
            let retry = step_to_retry(&tx.record);
            if tx.count_failure(&reasons) {
                match retry {
                    Some(retry) => retry_step(&mut tx, retry),
                    None => tx.continue_work(),
                }
            }
            let ladder_stepped = tx.record.escalation_level != level;
            escalate_when_stagnant(&mut tx, ladder_stepped);
        }
        // Plan audits returned above.
        (AuditPurpose::Plan, _) => {}
    }
    tx.finish()
}
