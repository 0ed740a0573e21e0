//! Executor results and audit reports: each is checked against what its episode could have
//! spent (`episode_bounds`) and the pending step, recorded, and handed on (an executor's
//! candidate to its audit, an audit's outcome to [`apply_audit`]).

use super::audit_outcome::{apply_audit, AuditOutcome};
use super::episode_bounds::check_usage;
use super::exec_feedback::remembered_audit;
use super::planning::on_plan_audit;
use super::transition::{Decision, HISTORY_KEEP};
use super::tx::Tx;
use crate::state::{LogEvent, Phase, RoundSummary, RunRecord};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Evidence, Verdicts};
use loopgate_protocol::wire::{
    AuditPurpose, AuditReport, EpisodeRole, ExecOutcome, ExecResult, Increment,
};

fn push_history(tx: &mut Tx, summary: RoundSummary) {
    tx.record.history.push(summary);
    let excess = tx.record.history.len().saturating_sub(HISTORY_KEEP);
    tx.record.history.drain(..excess);
}

/// What an executor episode produced, read off its outcome.
struct Produced {
    candidate: Option<String>,
    summary: String,
    claimed_done: bool,
    tool_calls: u32,
    error: Option<String>,
    self_check_refusals: u32,
}

impl Produced {
    fn of(outcome: &ExecOutcome) -> Produced {
        match outcome {
            ExecOutcome::Frozen {
                candidate,
                summary,
                claimed_done,
                tool_calls,
                self_check_refusals,
                ..
            } => Produced {
                candidate: Some(candidate.clone()),
                summary: summary.clone(),
                claimed_done: *claimed_done,
                tool_calls: *tool_calls,
                error: None,
                self_check_refusals: *self_check_refusals,
            },
            ExecOutcome::Failed { error } => Produced {
                candidate: None,
                summary: String::new(),
                claimed_done: false,
                tool_calls: 0,
                error: Some(error.clone()),
                self_check_refusals: 0,
            },
        }
    }
}

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
    let mut tx = Tx::new(record, now);
    tx.episode_in_flight = false;
    tx.record.accounting.usage.executor.add(result.usage);
    let produced = Produced::of(&result.outcome);
    log_exec_result(&mut tx, result, &produced);
    let summary = round_summary(record, result, &increment, capability, &produced);
    push_history(&mut tx, summary);
    if tx.check_spend_budget() {
        return tx.finish();
    }
    let purpose = if tx.record.planning.stage.is_some() {
        AuditPurpose::Plan
    } else {
        AuditPurpose::Round
    };
    if let Some(outcome) = reuse_earlier_audit(&mut tx, record, result.round, purpose, &produced) {
        return apply_audit(tx, outcome);
    }
    audit_or_report_failure(&mut tx, result.round, purpose, produced, increment);
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
        } if *round == result.round => Ok((increment.clone(), *capability)),
        _ => Err(format!(
            "no executor result for round {} is pending",
            result.round
        )),
    }
}

fn log_exec_result(tx: &mut Tx, result: &ExecResult, p: &Produced) {
    tx.log(LogEvent::ExecResult {
        worker: result.worker.clone(),
        candidate: p.candidate.clone(),
        summary: p.summary.clone(),
        claimed_done: p.claimed_done,
        tool_calls: p.tool_calls,
        error: p.error.clone(),
        self_check_refusals: p.self_check_refusals,
        agent_isolation: result.agent_isolation.clone(),
        tokens: Some(
            result
                .usage
                .input_tokens
                .saturating_add(result.usage.output_tokens),
        ),
    });
}

/// The round's summary as the executor leaves it (its audit completes it).
fn round_summary(
    record: &RunRecord,
    result: &ExecResult,
    increment: &Increment,
    capability: Capability,
    p: &Produced,
) -> RoundSummary {
    RoundSummary {
        round: result.round,
        objective: increment.objective.clone(),
        exec_summary: p
            .error
            .clone()
            .map(|e| format!("executor failed: {e}"))
            .unwrap_or_else(|| p.summary.clone()),
        candidate: p.candidate.clone(),
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
    }
}

/// An identical candidate is not audited again: the earlier report is bound to this very
/// snapshot id under the same contract. The outcome of that earlier audit, when a round's
/// candidate has one.
fn reuse_earlier_audit(
    tx: &mut Tx,
    record: &RunRecord,
    round: u32,
    purpose: AuditPurpose,
    p: &Produced,
) -> Option<AuditOutcome> {
    let earlier = p
        .candidate
        .as_deref()
        .filter(|_| purpose == AuditPurpose::Round)
        .and_then(|c| remembered_audit(record, c))?
        .clone();
    tx.log(LogEvent::AuditReused {
        snapshot: earlier.snapshot.clone(),
        from_round: earlier.round,
    });
    if let Some(last) = tx.record.history.last_mut() {
        last.reused_from = Some(earlier.round);
    }
    Some(AuditOutcome {
        round,
        purpose,
        candidate: earlier.snapshot,
        verdicts: earlier.verdicts,
        downgraded: earlier.downgraded,
        evidence: earlier.evidence,
        gaps: earlier.gaps,
        changed_paths: earlier.changed_paths,
        added_paths: earlier.added_paths,
        rubric: earlier.rubric,
        worker: format!("reused from round {}", earlier.round),
        reused: true,
    })
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
    apply_audit(tx, outcome)
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
            ..
        } if *round == report.round
            && *purpose == report.purpose
            && *candidate == report.snapshot =>
        {
            (*purpose, candidate.clone())
        }
        _ => return Err(format!("no audit of round {} is pending", report.round)),
    };
    if report.spec_hash.is_empty() {
        // A report that names no contract cannot be checked against the run's (the results
        // loop already refuses it as a security event; this is the state machine's own guard).
        return Err("the audit report names no spec hash".to_string());
    }
    if report.spec_hash != record.contract.spec_hash {
        return Err(format!(
            "the audit was made against contract {}, not the run's frozen contract {}",
            report.spec_hash.get(..12).unwrap_or(&report.spec_hash),
            record.contract.short_hash()
        ));
    }
    Ok((purpose, candidate))
}

/// A plan audit is logged and handed to planning (while the budget lasts).
fn apply_plan_audit(tx: &mut Tx, report: &AuditReport, candidate: String) {
    tx.log(LogEvent::AuditReport {
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
