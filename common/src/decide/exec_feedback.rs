//! What the executor of the next step is told about the snapshot it starts from (the last
//! audit's failing checks, the gate's reasons, the paths changed and added, why a candidate was
//! not kept), and the attempt ledger the manager and a stagnating executor read. Pure reads of
//! the record.

use crate::output_cap::cap_text;
use crate::state::{AuditedSnapshot, RoundSummary, RunRecord};
use loopgate_protocol::verdict::{CheckVerdict, Evidence, Integrity};
use loopgate_protocol::wire::{ExecFeedback, FailingCheck, FEEDBACK_EXCERPT_BYTES};

/// Characters of a step and of a failure excerpt in one ledger line.
const LEDGER_STEP_CHARS: usize = 140;
const LEDGER_EXCERPT_CHARS: usize = 160;
/// Changed paths shown to an executor.
const CHANGED_PATHS_SHOWN: usize = 40;

/// The earlier audit of `candidate` under the run's frozen contract, if one is remembered.
pub(super) fn remembered_audit<'a>(
    record: &'a RunRecord,
    candidate: &str,
) -> Option<&'a AuditedSnapshot> {
    record
        .audit
        .audited
        .iter()
        .rev()
        .find(|a| a.snapshot == candidate && a.spec_hash == record.contract.spec_hash)
}

fn excerpt_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let tail: String = {
        let chars: Vec<char> = flat.chars().collect();
        chars[chars.len() - max..].iter().collect()
    };
    format!("…{tail}")
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// One line per recent round, oldest first: the step, what it produced, how many checks
/// passed, the first failure, and whether the round changed nothing or repeated a failure.
pub fn ledger_lines(record: &RunRecord) -> Vec<String> {
    let history = &record.history;
    history
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let step = excerpt_line(&h.objective, LEDGER_STEP_CHARS);
            let mut line = format!("Round {}: step \"{step}\"", h.round);
            if h.retried {
                line.push_str(" (the previous round's step, tried again)");
            }
            match &h.candidate {
                None => line.push_str(&format!(
                    " -> no candidate ({})",
                    excerpt_line(&h.exec_summary, LEDGER_EXCERPT_CHARS)
                )),
                Some(c) => {
                    line.push_str(&format!(" -> snapshot {}", short(c)));
                    if h.set_aside.is_some() {
                        line.push_str(
                            " (set aside: it lost criteria the snapshot before it passed)",
                        );
                    } else if h.base.as_ref() == Some(c) {
                        line.push_str(" (changed nothing)");
                    } else if let Some(from) = h.reused_from {
                        line.push_str(&format!(" (identical to round {from}'s)"));
                    }
                }
            }
            if h.verdicts.is_some() {
                line.push_str(&format!(" -> {}/{} passing", h.passing.len(), h.checked));
            }
            if let Some((id, excerpt)) = h.failing.first() {
                line.push_str(&format!(
                    " -> `{id}` failed: {}",
                    excerpt_line(excerpt, LEDGER_EXCERPT_CHARS)
                ));
                if let Some(earlier) = same_failure_before(&history[..i], id, excerpt) {
                    line.push_str(&format!(" (the same failure as round {earlier})"));
                }
            }
            line
        })
        .collect()
}

fn same_failure_before(earlier: &[RoundSummary], id: &str, excerpt: &str) -> Option<u32> {
    earlier
        .iter()
        .rev()
        .find(|h| {
            h.failing
                .iter()
                .any(|(i, e)| i == id && e.trim() == excerpt.trim())
        })
        .map(|h| h.round)
}

/// The paths the run's rounds added (files the task did not start with), in the order they
/// were first added, at most `CHANGED_PATHS_SHOWN`.
fn run_added_paths(record: &RunRecord) -> Vec<String> {
    let mut added: Vec<String> = Vec::new();
    for path in record.history.iter().flat_map(|h| &h.added_paths) {
        if added.len() == CHANGED_PATHS_SHOWN {
            break;
        }
        if !added.contains(path) {
            added.push(path.clone());
        }
    }
    added
}

/// What the executor of the next step is told about its base snapshot: the last audit's
/// failing and inconclusive checks, the gate's reasons, the paths the last round changed and
/// those the run added, a rejected candidate's reason, and the attempt ledger when the run
/// stagnates.
pub(super) fn exec_feedback(record: &RunRecord) -> ExecFeedback {
    let Some(last) = record
        .history
        .iter()
        .rev()
        .find(|h| h.verdicts.is_some() && h.candidate.is_some())
    else {
        return ExecFeedback::default();
    };
    let audited = last.candidate.clone();
    // A candidate set aside as a regression is not what this step starts from: its evidence is
    // the snapshot's that it regressed from (the checks still to fix there).
    let shown = if last.set_aside.is_some() {
        Some(record.snapshot.as_str())
    } else {
        audited.as_deref()
    };
    let evidence: &[Evidence] = shown
        .and_then(|c| remembered_audit(record, c))
        .map(|a| a.evidence.as_slice())
        .unwrap_or(&[]);
    let failing = failing_checks(record, evidence);
    let rejected = audited
        .as_deref()
        .filter(|c| *c != record.snapshot)
        .map(|c| why_not_the_base(last, c));
    let stagnating = record.task.budget.stagnation_rounds > 0
        && record.streaks.stagnant_rounds >= record.task.budget.stagnation_rounds;
    ExecFeedback {
        audited_snapshot: audited,
        failing,
        gate_reasons: record
            .audit
            .last_gate
            .as_ref()
            .filter(|g| !g.passed)
            .map(|g| g.reasons.clone())
            .unwrap_or_default(),
        changed_paths: last
            .changed_paths
            .iter()
            .take(CHANGED_PATHS_SHOWN)
            .cloned()
            .collect(),
        added_paths: run_added_paths(record),
        rejected,
        attempts: if stagnating {
            ledger_lines(record)
        } else {
            Vec::new()
        },
    }
}

/// The checks that did not pass in `evidence`, with their commands and capped output.
fn failing_checks(record: &RunRecord, evidence: &[Evidence]) -> Vec<FailingCheck> {
    evidence
        .iter()
        .filter(|e| e.verdict != CheckVerdict::Pass)
        .map(|e| FailingCheck {
            criterion: e.check_id.clone(),
            check: record
                .contract
                .criteria
                .iter()
                .find(|c| c.id == e.check_id)
                .and_then(|c| c.check.clone()),
            verdict: e.verdict,
            exit_code: e.exit_code,
            output_excerpt: cap_text(e.output_excerpt.trim(), FEEDBACK_EXCERPT_BYTES),
        })
        .collect()
}

/// Why the step does not start from `candidate`, the last audited round's candidate: it was
/// set aside, rejected or rolled back.
fn why_not_the_base(last: &RoundSummary, candidate: &str) -> String {
    match (last.verdicts, &last.set_aside) {
        (_, Some(why)) => format!(
            "the last candidate {} was set aside as {why}: this step starts from that \
             snapshot, and the checks below are the ones that fail there",
            short(candidate)
        ),
        (Some(v), None) if v.integrity == Integrity::Violation => format!(
            "the last candidate {} was rejected (integrity violation: {}); this step starts \
             from the snapshot before it",
            short(candidate),
            last.gaps.join("; ")
        ),
        _ => format!(
            "the last candidate {} was rolled back; this step starts from an earlier snapshot",
            short(candidate)
        ),
    }
}
