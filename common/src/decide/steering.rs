//! Operators steering a run: instructions for the manager, pause and unpause, and continuing a
//! completed run with a new goal.
//!
//! - An instruction is logged and kept in the record (the newest [`INSTRUCTIONS_KEEP`]); every
//!   later manager prompt shows the kept ones under their own heading, newest last and within
//!   [`INSTRUCTIONS_PROMPT_CHARS`]; where they conflict, the newest wins. Executors and auditors
//!   never see them (only what the manager decides).
//! - A paused run lets the step in flight (a manager decision, or a round's executor episode
//!   and its audit) finish and record; the step it would take next is held in phase `paused`
//!   (see [`HeldStep`]) and taken on unpause. The wall-clock budget is lifted while paused and
//!   set again from what was left.
//! - A completed run continues as a new generation with a new task (goal and contract) from
//!   its completed snapshot; the log keeps every earlier round and its evidence.

use super::transition::Decision;
use super::tx::Tx;
use crate::state::{
    HeldStep, Instruction, LogEvent, PauseHold, Phase, PlanningStage, RunRecord, RunState,
};
use crate::task::Task;

/// The most characters one instruction may have.
pub const INSTRUCTION_MAX_CHARS: usize = 4000;
/// Instructions kept in the record (older ones stay in the log).
pub const INSTRUCTIONS_KEEP: usize = 5;
/// The most characters the manager prompt gives to instructions (newest first).
pub const INSTRUCTIONS_PROMPT_CHARS: usize = 6000;

/// Why an instruction's text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstructionError {
    #[error("the instruction is empty")]
    Empty,
    #[error("the instruction has {chars} characters; at most {INSTRUCTION_MAX_CHARS} are allowed")]
    TooLong { chars: usize },
}

/// The instruction as kept (trimmed), or why it is refused.
pub fn validate_instruction(text: &str) -> Result<String, InstructionError> {
    let text = text.trim();
    let chars = text.chars().count();
    match chars {
        0 => Err(InstructionError::Empty),
        n if n > INSTRUCTION_MAX_CHARS => Err(InstructionError::TooLong { chars: n }),
        _ => Ok(text.to_string()),
    }
}

pub(super) fn on_instruct(record: &RunRecord, text: &str, now: i64) -> Decision {
    if record.state.is_terminal() {
        return Decision::Ignore(format!(
            "the run is {}: instructions go to runs that have not ended (`loopgate continue` a completed run)",
            record.state.as_str()
        ));
    }
    let text = match validate_instruction(text) {
        Ok(text) => text,
        Err(e) => return Decision::Ignore(e.to_string()),
    };
    let mut tx = Tx::new(record, now);
    let r = &mut tx.record;
    r.steering.instructions.push(Instruction {
        at: now,
        generation: r.generation,
        round: r.round,
        text: text.clone(),
    });
    let excess = r
        .steering
        .instructions
        .len()
        .saturating_sub(INSTRUCTIONS_KEEP);
    r.steering.instructions.drain(..excess);
    tx.log(LogEvent::Instructed { text });
    tx.finish()
}

pub(super) fn on_pause(record: &RunRecord, now: i64) -> Decision {
    if record.phase == Phase::Admission {
        return Decision::Ignore(
            "the run is waiting for an admission slot ([manager] max_active_runs) and has taken \
             no step yet: there is nothing to pause (cancel it instead)"
                .to_string(),
        );
    }
    match record.state {
        RunState::Queued | RunState::Running => {}
        RunState::Paused => return Decision::Ignore("the run is already paused".to_string()),
        RunState::WaitingForInput => return Decision::Ignore(
            "the run is waiting for input and takes no step until answered: answer it (or cancel)"
                .to_string(),
        ),
        ended => {
            return Decision::Ignore(format!(
                "the run is {}: only a queued or running run can be paused",
                ended.as_str()
            ))
        }
    }
    let mut tx = Tx::new(record, now);
    let r = &mut tx.record;
    r.steering.pause = Some(PauseHold {
        since_ms: now,
        from: record.state,
        wall_left_ms: r.deadlines.wall_ms.map(|w| w.saturating_sub(now).max(0)),
    });
    r.deadlines.wall_ms = None;
    r.state = RunState::Paused;
    tx.log(LogEvent::Paused {
        phase: record.phase.name().to_string(),
    });
    tx.finish()
}

pub(super) fn on_unpause(record: &RunRecord, now: i64) -> Decision {
    if record.state != RunState::Paused {
        return Decision::Ignore(format!("the run is {}, not paused", record.state.as_str()));
    }
    let hold = record.steering.pause.unwrap_or(PauseHold {
        since_ms: now,
        from: RunState::Running,
        wall_left_ms: None,
    });
    let mut tx = Tx::new(record, now);
    let back_to_queued = hold.from == RunState::Queued
        && matches!(
            record.phase,
            Phase::Deciding { .. }
                | Phase::Paused {
                    held: HeldStep::Decide
                }
        );
    let r = &mut tx.record;
    r.steering.pause = None;
    r.state = if back_to_queued {
        RunState::Queued
    } else {
        RunState::Running
    };
    if let Some(left) = hold.wall_left_ms {
        r.deadlines.wall_ms = Some(now.saturating_add(left));
    }
    tx.log(LogEvent::Unpaused {
        paused_ms: now.saturating_sub(hold.since_ms).max(0),
    });
    if let Phase::Paused { held } = &record.phase {
        tx.take_held(held.clone());
    }
    tx.finish()
}

/// A completed run continues with `task` (validated by the caller, its goal the new one) as a
/// new generation from its completed snapshot.
pub(super) fn on_continue(record: &RunRecord, task: &Task, now: i64) -> Decision {
    if record.state != RunState::Completed {
        return Decision::Ignore(format!(
            "a {} run cannot be continued: only a completed run can (`loopgate resume` an ended one)",
            record.state.as_str()
        ));
    }
    let mut tx = Tx::new(record, now);
    let r = &mut tx.record;
    r.generation += 1;
    r.accounting.generation_start_round = r.round;
    r.task = task.clone();
    r.contract = crate::goal::criteria::contract_for(task);
    // The new generation's work is judged against where the completed one left the artifact.
    r.base_snapshot = r.snapshot.clone();
    r.state = RunState::Running;
    r.terminal_reason = None;
    r.streaks = Default::default();
    // The earlier evidence was about the earlier contract: it stays in the log and the
    // evidence history, never in the new generation's gate.
    r.audit.evidence.clear();
    r.audit.last_verdicts = None;
    r.audit.last_gate = None;
    r.audit.last_good_snapshot = None;
    r.audit.rubric = None;
    r.audit.passing_ever.clear();
    r.audit.failures_seen.clear();
    r.planning = Default::default();
    if r.task.plan {
        r.planning.stage = Some(PlanningStage::Spec);
    }
    r.deadlines.wall_ms = r
        .task
        .budget
        .max_wall_secs
        .map(|s| now.saturating_add((s as i64).saturating_mul(1000)));
    let (goal, spec_hash, criteria) = (
        r.contract.goal.clone(),
        r.contract.spec_hash.clone(),
        r.contract.criteria.len() as u32,
    );
    let base_snapshot = r.base_snapshot.clone();
    tx.log(LogEvent::Continued {
        goal: goal.clone(),
        spec_hash,
        criteria,
        base_snapshot,
    });
    tx.feedback(format!(
        "Generation {} completed; the run continues from its completed snapshot with a new goal \
         and contract (above): {goal}",
        record.generation
    ));
    tx.continue_work();
    tx.finish()
}
