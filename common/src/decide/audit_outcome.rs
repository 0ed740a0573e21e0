//! What an audited round does to the run, as a pipeline: the audit is remembered, the judge's
//! rubric is recorded, the artifact moves (or the candidate is rejected, rolled back or set
//! aside), the gate is evaluated, the round's summary and progress are noted, and the run
//! completes or goes on.

use super::progress::{count_round_progress, remember_audit};
use super::regression::{regression, set_aside, Regression};
use super::step_retry::go_on_after_failed_round;
use super::transition::Decision;
use super::tx::Tx;
use crate::gate::{evaluate_gate, GateVerdict};
use crate::state::{AuditedSnapshot, LogEvent, RunState};
use loopgate_protocol::rubric::{RubricOutcome, RubricStanding, RubricVerdict};
use loopgate_protocol::verdict::{
    AuditStatus, CheckVerdict, ContractVerdict, Evidence, Integrity, Verdicts,
};
use loopgate_protocol::wire::AuditPurpose;

/// An audit's outcome as the gate reads it: from a report, or reused from an earlier audit of
/// the same snapshot.
pub(super) struct AuditOutcome {
    pub round: u32,
    pub purpose: AuditPurpose,
    pub candidate: String,
    /// After the acceptance-constraint guard.
    pub verdicts: Verdicts,
    pub downgraded: bool,
    /// Bound to `candidate`.
    pub evidence: Vec<Evidence>,
    pub gaps: Vec<String>,
    pub changed_paths: Vec<String>,
    /// Of `changed_paths`, those the candidate added.
    pub added_paths: Vec<String>,
    pub rubric: Option<RubricVerdict>,
    pub worker: String,
    pub reused: bool,
}

impl AuditOutcome {
    /// Whether the judge's rubric said PIVOT (roll back and take another approach).
    fn pivots(&self) -> bool {
        self.rubric
            .as_ref()
            .is_some_and(|r| r.outcome == Some(RubricOutcome::Pivot))
    }
}

/// What an audited round does to the run: the artifact moves (or the candidate is rejected or
/// rolled back), the gate is evaluated, progress is noted, and the run completes or goes on.
pub(super) fn apply_audit(mut tx: Tx, outcome: AuditOutcome) -> Decision {
    remember_unless_reused(&mut tx, &outcome);
    if let Some(r) = &outcome.rubric {
        record_rubric(&mut tx, outcome.round, &outcome.candidate, r);
    }
    let pivot = outcome.pivots();
    let regressed = regression_to_set_aside(&tx, &outcome, pivot);
    move_artifact(&mut tx, &outcome, pivot, regressed.as_ref());
    let (gate, checked) = evaluate_and_log_gate(&mut tx, &outcome);
    summarize_round(&mut tx, &outcome, checked, regressed.as_ref());
    let passed = gate.passed;
    let reasons = gate.reasons.join("; ");
    tx.record.audit.last_gate = Some(gate);
    if outcome.purpose == AuditPurpose::Round {
        count_round_progress(&mut tx, regressed.is_some(), &outcome.evidence);
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
    go_on_after_audit(&mut tx, outcome.purpose, passed, &reasons);
    tx.finish()
}

/// The transition's evidence, and the audit kept for reuse; a reused audit adds neither.
fn remember_unless_reused(tx: &mut Tx, o: &AuditOutcome) {
    if o.reused {
        tx.evidence = Vec::new();
        return;
    }
    tx.evidence = o.evidence.clone();
    let spec_hash = tx.record.contract.spec_hash.clone();
    remember_audit(
        tx,
        AuditedSnapshot {
            snapshot: o.candidate.clone(),
            spec_hash,
            round: o.round,
            verdicts: o.verdicts,
            downgraded: o.downgraded,
            evidence: o.evidence.clone(),
            gaps: o.gaps.clone(),
            changed_paths: o.changed_paths.clone(),
            added_paths: o.added_paths.clone(),
            rubric: o.rubric.clone(),
        },
    );
}

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

/// The regression a round's clean candidate makes, if any (a rejected candidate and a pivot
/// leave the artifact elsewhere already; plan and final audits set nothing aside).
fn regression_to_set_aside(tx: &Tx, o: &AuditOutcome, pivot: bool) -> Option<Regression> {
    let comparable =
        o.purpose == AuditPurpose::Round && o.verdicts.integrity != Integrity::Violation && !pivot;
    comparable
        .then(|| regression(&tx.record, &o.evidence))
        .flatten()
}

/// Where the artifact stands after the audit: the candidate is rejected (integrity violation),
/// rolled back from (pivot), set aside (regression) or accepted. A candidate set aside leaves
/// the verdicts of the snapshot it regressed from standing: the gate stays about the artifact
/// (which may have passed it already, with `complete_on_gate = false`), and a later `done` is
/// judged on it.
fn move_artifact(tx: &mut Tx, o: &AuditOutcome, pivot: bool, regressed: Option<&Regression>) {
    if o.verdicts.integrity == Integrity::Violation {
        reject_candidate(tx, o);
    } else if pivot {
        roll_back_on_pivot(tx, o);
    } else if let Some(regressed) = regressed {
        set_aside(tx, o.round, &o.candidate, regressed);
    } else {
        accept_candidate(tx, o);
    }
    if regressed.is_none() {
        tx.record.audit.last_verdicts = Some((o.verdicts, o.candidate.clone()));
    }
}

/// An integrity violation: the workspace stays at the previous snapshot.
fn reject_candidate(tx: &mut Tx, o: &AuditOutcome) {
    let reason = format!("integrity violation: {}", o.gaps.join("; "));
    tx.log(LogEvent::CandidateRejected {
        candidate: o.candidate.clone(),
        reason: reason.clone(),
    });
    tx.feedback(format!(
        "Round {}: the candidate was rejected ({reason}); the workspace stays at the previous snapshot.",
        o.round
    ));
}

/// The judge said PIVOT: the artifact goes back to the last snapshot whose audit passed (or the
/// starting workspace), and the manager is told to take another approach.
fn roll_back_on_pivot(tx: &mut Tx, o: &AuditOutcome) {
    let rubric = o.rubric.as_ref();
    let to = tx
        .record
        .audit
        .last_good_snapshot
        .clone()
        .unwrap_or_else(|| tx.record.base_snapshot.clone());
    let reason = rubric.map(|r| r.reason.clone()).unwrap_or_default();
    tx.log(LogEvent::Pivot {
        from: o.candidate.clone(),
        to: to.clone(),
        reason: reason.clone(),
    });
    tx.feedback(format!(
        "Round {}: the judge said PIVOT ({}); the artifact was rolled back to snapshot {} \
         (the last one whose audit passed, or the starting workspace). Take a different \
         approach. Judge: {}",
        o.round,
        rubric.map(|r| r.summary()).unwrap_or_default(),
        to.get(..12).unwrap_or(&to),
        reason
    ));
    tx.record.audit.evidence = Vec::new();
    tx.record.snapshot = to;
}

/// The candidate becomes the artifact, and the last good snapshot when its audit passed clean.
fn accept_candidate(tx: &mut Tx, o: &AuditOutcome) {
    tx.record.snapshot = o.candidate.clone();
    tx.record.audit.evidence = o.evidence.clone();
    let v = o.verdicts;
    if v.status == AuditStatus::Complete
        && v.integrity == Integrity::Clean
        && v.contract == ContractVerdict::Aligned
    {
        tx.record.audit.last_good_snapshot = Some(o.candidate.clone());
    }
}

/// Evaluate the gate on the artifact as it stands now and log the audit and the gate. Returns
/// the gate and how many checks the audit ran on the candidate.
fn evaluate_and_log_gate(tx: &mut Tx, o: &AuditOutcome) -> (GateVerdict, u32) {
    let r = &tx.record;
    let gate = evaluate_gate(
        &r.contract,
        r.audit.last_verdicts.as_ref().map(|(v, s)| (v, s.as_str())),
        &r.audit.evidence,
        &r.snapshot,
    );
    // What the audit found on the candidate itself: the gate's count when the candidate is the
    // artifact now, its own when it was rejected or set aside.
    let (passing, checked) = if o.candidate == r.snapshot {
        (gate.passing, gate.checked)
    } else {
        let own = evaluate_gate(&r.contract, None, &o.evidence, &o.candidate);
        (own.passing, own.checked)
    };
    tx.log(LogEvent::AuditReport {
        step_attempt: None,
        purpose: o.purpose,
        worker: o.worker.clone(),
        snapshot: o.candidate.clone(),
        verdicts: o.verdicts,
        passing,
        checked,
        gaps: o.gaps.clone(),
        downgraded: o.downgraded,
    });
    tx.log(LogEvent::Gate {
        passed: gate.passed,
        snapshot: gate.snapshot.clone(),
        reasons: gate.reasons.clone(),
    });
    (gate, checked)
}

/// Complete this round's summary in the history with what its audit found.
fn summarize_round(tx: &mut Tx, o: &AuditOutcome, checked: u32, regressed: Option<&Regression>) {
    let Some(last) = tx.record.history.last_mut().filter(|h| h.round == o.round) else {
        return;
    };
    last.verdicts = Some(o.verdicts);
    last.gaps = o.gaps.clone();
    last.changed_paths = o.changed_paths.clone();
    last.added_paths = o.added_paths.clone();
    last.checked = checked;
    last.failing = o
        .evidence
        .iter()
        .filter(|e| e.verdict != CheckVerdict::Pass)
        .map(|e| (e.check_id.clone(), e.output_excerpt.clone()))
        .collect();
    last.passing = o
        .evidence
        .iter()
        .filter(|e| e.verdict == CheckVerdict::Pass)
        .map(|e| e.check_id.clone())
        .collect();
    last.set_aside = regressed.map(Regression::reason);
}

/// The run after an audit that did not pivot: it completes when the gate passed where that
/// ends it, asks the manager again after a passing round, and goes on from a failure.
fn go_on_after_audit(tx: &mut Tx, purpose: AuditPurpose, passed: bool, reasons: &str) {
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
            tx.continue_after_failure(reasons);
        }
        (AuditPurpose::Round, true) => tx.request_decision(),
        (AuditPurpose::Round, false) => go_on_after_failed_round(tx, reasons),
        // Plan audits are handled by `on_plan_audit` before an outcome is built.
        (AuditPurpose::Plan, _) => {}
    }
}
