//! Executor results and audit reports: each is checked against what its episode could have
//! spent (`episode_bounds`) and the pending step, recorded, and handed on (an executor's
//! candidate to its audit, an audit's outcome to [`apply_audit`]).

use super::attempts::{is_sibling_step, on_sibling_audit, on_sibling_exec};
use super::audit_outcome::{apply_audit, AuditOutcome};
use super::episode_bounds::check_usage;
use super::planning::on_plan_audit;
use super::round_parts::{
    log_exec_result, reuse_earlier_audit, round_summary, same_contract, Produced,
};
use super::transition::Decision;
use super::tx::Tx;
use crate::state::{LogEvent, Phase, RunRecord};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Evidence, Verdicts};
use loopgate_protocol::wire::{AuditPurpose, AuditReport, EpisodeRole, ExecResult, Increment};

pub(super) fn on_exec(record: &RunRecord, result: &ExecResult, now: i64) -> Decision {
    let budget = &record.task.budget;
    if let Err(lie) = check_usage(
        budget,
        EpisodeRole::Executor,
        "exec_result",
        result.round,
        result.usage,
    ) {
        return Decision::Distrusted(lie);
    }
    let (increment, capability) = match pending_step(record, result) {
        Ok(pending) => pending,
        Err(why) => return Decision::Ignore(why),
    };
    if is_sibling_step(record) {
        return on_sibling_exec(record, result, now);
    }
    let mut tx = Tx::new(record, now);
    tx.episode_in_flight = false;
    tx.record.accounting.usage.executor.add(result.usage);
    let produced = Produced::of(&result.outcome);
    log_exec_result(&mut tx, result, &produced, None);
    let summary = round_summary(record, result.round, &increment, capability, &produced);
    tx.push_history(summary);
    let purpose = if tx.record.planning.stage.is_some() {
        AuditPurpose::Plan
    } else {
        AuditPurpose::Round
    };
    // With the spend budget gone, a round's candidate still gets its checks (no model asked),
    // so the run ends holding the better of it and the artifact before; nothing else is spent.
    let spent = tx.spend_budget_spent().is_some();
    if spent && (purpose != AuditPurpose::Round || produced.candidate.is_none()) {
        tx.check_spend_budget();
        return tx.finish();
    }
    if let Some(outcome) = reuse_earlier_audit(&mut tx, record, result.round, purpose, &produced) {
        return apply_audit(tx, outcome);
    }
    match produced.candidate {
        Some(candidate) if spent => {
            tx.dispatch_closing_audit(candidate, increment.objective, increment.write_scope)
        }
        _ => audit_or_report_failure(&mut tx, result.round, purpose, produced, increment),
    }
    tx.finish()
}

/// The step `result` answers, when the run waits for it: its increment and capability; else
/// why the result is ignored.
fn pending_step(
    record: &RunRecord,
    result: &ExecResult,
) -> Result<(Increment, Capability), String> {
    if result.generation != record.generation {
        return Err(format!("stale generation {}", result.generation));
    }
    match &record.phase {
        Phase::Executing {
            round,
            increment,
            capability,
            ..
        } if *round == result.round => Ok((increment.clone(), *capability)),
        _ => Err(format!(
            "no executor result for round {} is pending",
            result.round
        )),
    }
}

/// A frozen candidate goes to its audit; a failed episode is a failed round the manager hears
/// about.
fn audit_or_report_failure(
    tx: &mut Tx,
    round: u32,
    purpose: AuditPurpose,
    p: Produced,
    increment: Increment,
) {
    match p.candidate {
        Some(candidate) => tx.dispatch_audit(
            purpose,
            candidate,
            increment.objective,
            increment.write_scope,
        ),
        None => {
            let error = p.error.unwrap_or_default();
            tx.feedback(format!(
                "Round {round}: the executor could not finish the step: {error}"
            ));
            tx.continue_after_failure(&format!("the executor failed: {error}"));
        }
    }
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
    let budget = &record.task.budget;
    if let Err(lie) = check_usage(
        budget,
        EpisodeRole::Auditor,
        "audit_report",
        report.round,
        report.usage,
    ) {
        return Decision::Distrusted(lie);
    }
    if report.mechanical_only && !awaits_checks_only(record) {
        return on_sibling_audit(record, report, now);
    }
    let (purpose, candidate) = match pending_audit(record, report) {
        Ok(pending) => pending,
        Err(why) => return Decision::Ignore(why),
    };
    let mut tx = Tx::new(record, now);
    tx.episode_in_flight = false;
    tx.record.accounting.usage.auditor.add(report.usage);
    if purpose == AuditPurpose::Plan {
        apply_plan_audit(&mut tx, report, candidate);
        return tx.finish();
    }
    tx.audit_report = Some(report.clone());
    let outcome = outcome_of_report(record, report, purpose, candidate);
    if super::baseline::is_pending(record) {
        return super::baseline::on_baseline(tx, outcome);
    }
    apply_audit(tx, outcome)
}

/// Does the run wait for the checks-only audit of its last round's candidate (the spend
/// budget ran out with its episode)? Else a checks-only report is a sibling's.
fn awaits_checks_only(record: &RunRecord) -> bool {
    matches!(
        record.phase,
        Phase::Auditing {
            checks_only: true,
            ..
        }
    )
}

/// The audit `report` answers, when the run waits for it under its frozen contract: its
/// purpose and candidate; else why the report is ignored.
fn pending_audit(
    record: &RunRecord,
    report: &AuditReport,
) -> Result<(AuditPurpose, String), String> {
    if report.generation != record.generation {
        return Err(format!("stale generation {}", report.generation));
    }
    let (purpose, candidate) = match &record.phase {
        Phase::Auditing {
            round,
            purpose,
            candidate,
            checks_only,
            ..
        } if *round == report.round
            && *purpose == report.purpose
            && *candidate == report.snapshot
            && *checks_only == report.mechanical_only =>
        {
            (*purpose, candidate.clone())
        }
        _ => return Err(format!("no audit of round {} is pending", report.round)),
    };
    same_contract(record, report)?;
    Ok((purpose, candidate))
}

/// A plan audit is logged and handed to planning (while the budget lasts).
fn apply_plan_audit(tx: &mut Tx, report: &AuditReport, candidate: String) {
    tx.log(LogEvent::AuditReport {
        step_attempt: None,
        purpose: AuditPurpose::Plan,
        worker: report.worker.clone(),
        snapshot: candidate,
        verdicts: report.verdicts,
        passing: 0,
        checked: 0,
        gaps: report.gaps.clone(),
        downgraded: false,
    });
    if !tx.check_spend_budget() {
        on_plan_audit(tx, report);
    }
}

/// The outcome of a round or final audit as the gate reads it: verdicts after the
/// acceptance-constraint guard, only evidence bound to the audited snapshot, and the rubric
/// only when the contract has one.
fn outcome_of_report(
    record: &RunRecord,
    report: &AuditReport,
    purpose: AuditPurpose,
    candidate: String,
) -> AuditOutcome {
    let (verdicts, downgraded) = guard_report(&record.contract, report);
    let evidence: Vec<Evidence> = report
        .evidence
        .iter()
        .filter(|e| e.artifact_version == candidate)
        .cloned()
        .collect();
    AuditOutcome {
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
    }
}
