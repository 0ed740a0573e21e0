//! Acting on what the run already knows: the audits remembered by snapshot (an identical
//! candidate is not audited again), and progress and stagnation (no newly passing criterion and
//! no new failure output). What an executor is told comes from `exec_feedback`.

use sha2::{Digest, Sha256};

use super::exec_feedback::ledger_lines;
use super::tx::Tx;
use crate::state::{AuditedSnapshot, LogEvent, RunRecord, AUDITS_REMEMBERED, FAILURES_REMEMBERED};
use loopgate_protocol::verdict::{CheckVerdict, Evidence};

/// Keep `audit` for reuse (replacing an older one of the same snapshot), bounded.
pub(super) fn remember_audit(tx: &mut Tx, audit: AuditedSnapshot) {
    let audited = &mut tx.record.audit.audited;
    audited.retain(|a| a.snapshot != audit.snapshot);
    audited.push(audit);
    let excess = audited.len().saturating_sub(AUDITS_REMEMBERED);
    audited.drain(..excess);
}

fn failure_digest(e: &Evidence) -> String {
    let digest = Sha256::digest(e.output_excerpt.trim().as_bytes());
    format!("{}:{}", e.check_id, hex::encode(&digest[..8]))
}

/// Record what an audited round established and whether it moved: a criterion passing that
/// never passed before, or a failure output not seen before. Returns whether it did.
pub(super) fn note_progress(tx: &mut Tx, evidence: &[Evidence]) -> bool {
    let audit = &mut tx.record.audit;
    let mut moved = false;
    for e in evidence {
        if e.verdict == CheckVerdict::Pass {
            if !audit.passing_ever.contains(&e.check_id) {
                audit.passing_ever.push(e.check_id.clone());
                moved = true;
            }
        } else {
            let digest = failure_digest(e);
            if !audit.failures_seen.contains(&digest) {
                audit.failures_seen.push(digest);
                moved = true;
            }
        }
    }
    let excess = audit
        .failures_seen
        .len()
        .saturating_sub(FAILURES_REMEMBERED);
    audit.failures_seen.drain(..excess);
    if moved {
        tx.record.streaks.stagnant_rounds = 0;
    } else {
        tx.record.streaks.stagnant_rounds += 1;
    }
    moved
}

/// Count an audited round's progress: a candidate set aside lost ground, which is not
/// progress however new its failure output; any other round moved when [`note_progress`] says
/// so.
pub(super) fn count_round_progress(tx: &mut Tx, set_aside: bool, evidence: &[Evidence]) {
    if set_aside {
        tx.record.streaks.stagnant_rounds += 1;
    } else {
        note_progress(tx, evidence);
    }
}

/// After a round that did not move: every `stagnation_rounds` such rounds in a row, escalate
/// (the executor ladder's next rung when there is one and the failed-rounds escalation did not
/// just climb it, `ladder_stepped`), tell the manager its approach did not work, and let the
/// next episode start from the attempt ledger.
pub(super) fn escalate_when_stagnant(tx: &mut Tx, ladder_stepped: bool) {
    if !stagnation_due(&tx.record) {
        return;
    }
    let stagnant = tx.record.streaks.stagnant_rounds;
    let rungs = tx.record.task.roles.executor_escalation.len() as u32;
    let escalated_to = if ladder_stepped {
        Some(tx.record.executor_profile().to_string())
    } else {
        (tx.record.escalation_level < rungs).then(|| {
            tx.record.escalation_level += 1;
            tx.record.executor_profile().to_string()
        })
    };
    let ledger = ledger_lines(&tx.record).join("\n");
    tx.feedback(format!(
        "The last {stagnant} audited rounds made no progress (no check newly passing, no new \
         failure output): your approach did not work. Choose a different one{}. Attempts so \
         far:\n{ledger}",
        escalated_to
            .as_deref()
            .map(|p| format!("; the executor now runs profile '{p}'"))
            .unwrap_or_default()
    ));
    tx.log(LogEvent::Stagnation {
        rounds: stagnant,
        escalated_to,
    });
}

/// Whether the rounds without progress so far escalate now: every `stagnation_rounds` of
/// them in a row (never when that is 0).
pub(super) fn stagnation_due(record: &RunRecord) -> bool {
    let every = record.task.budget.stagnation_rounds;
    let stagnant = record.streaks.stagnant_rounds;
    every != 0 && stagnant != 0 && stagnant.is_multiple_of(every)
}
