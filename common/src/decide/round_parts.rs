//! The parts of a round both a step of one episode (`results`) and a step of several
//! attempts (`attempts`) are made of: what an episode produced, its log entry and round
//! summary, and the reuse of an earlier audit of an identical candidate.

use super::audit_outcome::AuditOutcome;
use super::exec_feedback::remembered_audit;
use super::tx::Tx;
use crate::state::{LogEvent, RoundSummary, RunRecord};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{AuditPurpose, AuditReport, ExecOutcome, ExecResult, Increment};

/// What an executor episode produced, read off its outcome.
pub(super) struct Produced {
    pub candidate: Option<String>,
    pub summary: String,
    pub claimed_done: bool,
    pub tool_calls: u32,
    pub error: Option<String>,
    pub self_check_refusals: u32,
}

impl Produced {
    pub fn of(outcome: &ExecOutcome) -> Produced {
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

/// The `exec_result` entry of an episode (`step_attempt`: the sibling it was, of a step of
/// several attempts).
pub(super) fn log_exec_result(
    tx: &mut Tx,
    result: &ExecResult,
    p: &Produced,
    step_attempt: Option<u32>,
) {
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
        step_attempt,
    });
}

/// The round's summary as the executor leaves it (its audit completes it).
pub(super) fn round_summary(
    record: &RunRecord,
    round: u32,
    increment: &Increment,
    capability: Capability,
    p: &Produced,
) -> RoundSummary {
    RoundSummary {
        round,
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
pub(super) fn reuse_earlier_audit(
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

/// Whether `report` was made against the run's frozen contract; else why it is ignored.
pub(super) fn same_contract(record: &RunRecord, report: &AuditReport) -> Result<(), String> {
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
    Ok(())
}
