//! The starting workspace's checks, run before the first step.
//!
//! A candidate is set aside when it passes fewer blocking criteria than the current snapshot
//! (`regression`), which needs evidence on that snapshot. The starting workspace had none, so a
//! first round that broke what already passed (a repository's own test suite, say) became the
//! artifact, and every later round built on the broken tree. With `budget.baseline_checks`
//! (default on) a run first has an auditor run the checks on the starting workspace, checks
//! only (no model asked, never completing the run). Its evidence becomes the standing evidence
//! of that snapshot, then the run takes its first step as before. A baseline audit that is
//! lost (its deadline passes, its message is dead-lettered) is logged and skipped, never
//! counted as a failed round.

use super::audit_outcome::AuditOutcome;
use super::first_step::begin_steps;
use super::regression::blocking_passing;
use super::transition::Decision;
use super::tx::Tx;
use crate::state::{LogEvent, Phase, RunRecord, RunState};
use loopgate_protocol::wire::AuditPurpose;

/// The baseline audit's objective, as the auditor and the log see it.
pub(super) const OBJECTIVE: &str =
    "the starting workspace, before any step: which checks pass already";

/// Whether a run starting now checks its starting workspace first: the task wants it, the
/// contract is final (no planning stage) and some blocking criterion has a check to run.
pub(super) fn wanted(record: &RunRecord) -> bool {
    record.task.budget.baseline_checks
        && !record.task.plan
        && record.round == 0
        && record.contract.blocking().any(|c| c.check.is_some())
}

/// Send the starting workspace's checks out; the run is running from now on.
pub(super) fn dispatch(tx: &mut Tx) {
    tx.record.state = RunState::Running;
    tx.dispatch_start_audit(OBJECTIVE.to_string());
}

/// Whether the run waits for the baseline audit (a checks-only audit before round 1).
pub(super) fn is_pending(record: &RunRecord) -> bool {
    matches!(
        record.phase,
        Phase::Auditing {
            round: 0,
            purpose: AuditPurpose::Round,
            checks_only: true,
            ..
        }
    )
}

/// The baseline audit came back: its evidence stands for the starting workspace, and the run
/// takes its first step.
pub(super) fn on_baseline(mut tx: Tx, outcome: AuditOutcome) -> Decision {
    let contract = &tx.record.contract;
    let passed = blocking_passing(contract, &outcome.evidence.iter().collect::<Vec<_>>());
    let (passing, failing): (Vec<String>, Vec<String>) = contract
        .blocking()
        .map(|c| c.id.clone())
        .partition(|id| passed.contains(id));
    tx.log(LogEvent::BaselineChecked {
        snapshot: outcome.candidate,
        passing,
        failing,
        skipped: None,
    });
    tx.evidence = outcome.evidence.clone();
    tx.record.audit.evidence = outcome.evidence;
    begin_steps(&mut tx);
    tx.finish()
}

/// The baseline audit was lost (`why`): it is cancelled, and the run goes on without a
/// baseline.
pub(super) fn skip(mut tx: Tx, why: &str) -> Decision {
    tx.cancel_step(why);
    tx.log(LogEvent::BaselineChecked {
        snapshot: tx.record.snapshot.clone(),
        passing: Vec::new(),
        failing: Vec::new(),
        skipped: Some(why.to_string()),
    });
    begin_steps(&mut tx);
    tx.finish()
}

#[cfg(test)]
#[path = "baseline_tests.rs"]
mod tests;
