//! The run state machine: `decide(record, event, now) -> Decision`, pure. The manager loads the
//! record, decides, stores the new record with compare-and-set, then publishes the outbox.

mod attempt_choice;
mod attempts;
mod audit_outcome;
mod audit_progress;
mod baseline;
mod clause_step;
mod dispatch_ids;
mod episode_bounds;
mod episode_progress;
mod exec_feedback;
mod first_step;
mod lifecycle;
pub mod manager_prompt;
mod manager_turn;
mod planning;
mod progress;
mod regression;
mod results;
mod round_parts;
mod steering;
mod step_retry;
mod step_review;
mod transition;
mod tx;

use crate::state::{
    Accounting, AuditStanding, Deadlines, LogEvent, MsgIdSecret, Phase, Planning, RunRecord,
    RunState, Steering, Streaks, RUN_RECORD_SCHEMA,
};
use crate::task::Task;

pub use attempt_choice::{choose_winner, Contender};
pub use dispatch_ids::single_episode_in_flight;
pub use episode_bounds::{COST_MICROS_PER_EPISODE_SEC, TOKENS_PER_EPISODE_SEC};
pub use exec_feedback::ledger_lines;
pub use planning::{approval_question, edited_contract};
pub use results::guard_report;
pub use steering::{
    validate_instruction, InstructionError, INSTRUCTIONS_KEEP, INSTRUCTIONS_PROMPT_CHARS,
    INSTRUCTION_MAX_CHARS,
};
pub use transition::{
    Decision, Distrust, RunEvent, Step, DECISION_SLACK_SECS, EPISODE_GRACE_SECS, FEEDBACK_KEEP,
    HISTORY_KEEP, RAW_LOG_CHARS,
};
use tx::Tx;

/// Create the record of a new run and request its first decision (a run without a msg-id
/// secret: its ids are the bare prefixes; the manager uses [`start_run_with`]).
pub fn start_run(id: &str, task: Task, base_snapshot: &str, now: i64) -> Step {
    start_run_with(id, task, base_snapshot, now, false, MsgIdSecret::default())
}

/// [`start_run`], or with `wait_for_slot` a run that waits in `queued` (phase `admission`)
/// until a [`RunEvent::Admit`] starts it. `msg_id_secret` seals the run's results-stream
/// dedup ids (random, made by the caller; see [`MsgIdSecret`]).
pub fn start_run_with(
    id: &str,
    task: Task,
    base_snapshot: &str,
    now: i64,
    wait_for_slot: bool,
    msg_id_secret: MsgIdSecret,
) -> Step {
    let contract = crate::goal::criteria::contract_for(&task);
    let wall_deadline_ms = task.budget.max_wall_secs.map(|s| now + (s as i64) * 1000);
    let record = RunRecord {
        schema: RUN_RECORD_SCHEMA,
        id: id.to_string(),
        generation: 1,
        state: RunState::Queued,
        phase: Phase::Deciding { seq: 0 },
        contract,
        task,
        round: 0,
        base_snapshot: base_snapshot.to_string(),
        snapshot: base_snapshot.to_string(),
        task_state: None,
        history: Vec::new(),
        feedback: Vec::new(),
        streaks: Streaks::default(),
        decide_seq: 0,
        accounting: Accounting::default(),
        created_at: now,
        updated_at: now,
        terminal_reason: None,
        audit: AuditStanding::default(),
        outbox: Vec::new(),
        last_event: None,
        deadlines: Deadlines {
            phase: None,
            wall_ms: wall_deadline_ms,
            queued_since_ms: None,
            episode_started: None,
        },
        trace_parent: None,
        escalation_level: 0,
        planning: Planning::default(),
        steering: Steering::default(),
        msg_id_secret,
        origin: None,
        episode_progress: Vec::new(),
        audit_progress: None,
    };
    let mut tx = Tx::new(&record, now);
    tx.log(LogEvent::Submitted {
        spec_hash: record.contract.spec_hash.clone(),
        base_snapshot: base_snapshot.to_string(),
        criteria: record.contract.criteria.len() as u32,
    });
    if wait_for_slot {
        tx.record.phase = Phase::Admission;
        tx.log(LogEvent::AdmissionQueued);
    } else {
        begin(&mut tx);
    }
    tx.into_step()
}

/// A run's start: the starting workspace's checks first when the task wants a baseline (see
/// `baseline`), else its first step.
fn begin(tx: &mut Tx) {
    if baseline::wanted(&tx.record) {
        baseline::dispatch(tx);
    } else {
        first_step::begin_steps(tx);
    }
}

fn on_admit(record: &RunRecord, now: i64) -> Decision {
    if record.phase != Phase::Admission {
        return Decision::Ignore("the run is not waiting for a slot".to_string());
    }
    let mut tx = Tx::new(record, now);
    tx.log(LogEvent::Admitted {
        waited_ms: now.saturating_sub(record.created_at).max(0),
    });
    begin(&mut tx);
    tx.finish()
}

pub fn decide(record: &RunRecord, event: &RunEvent, now: i64) -> Decision {
    if event.replayable() && record.last_event.as_deref() == Some(event.key().as_str()) {
        return Decision::Replay(record.outbox.clone());
    }
    let decision = match event {
        RunEvent::Cancel { reason } => lifecycle::on_cancel(record, reason, now),
        RunEvent::Resume { budget } => lifecycle::on_resume(record, budget, now),
        RunEvent::Continue { task } => steering::on_continue(record, task, now),
        RunEvent::Instruct { text } => steering::on_instruct(record, text, now),
        RunEvent::Pause => steering::on_pause(record, now),
        RunEvent::Unpause => steering::on_unpause(record, now),
        _ if record.state.is_terminal() => {
            Decision::Ignore(format!("run is {}", record.state.as_str()))
        }
        RunEvent::ManagerReplied {
            generation,
            seq,
            raw,
            usage,
            gui_offered,
        } => manager_turn::on_manager_reply(
            record,
            *generation,
            *seq,
            raw,
            *usage,
            *gui_offered,
            now,
        ),
        RunEvent::ManagerFailed {
            generation,
            seq,
            error,
            usage,
        } => manager_turn::on_manager_failed(record, *generation, *seq, error, *usage, now),
        RunEvent::EpisodeStarted(started) => lifecycle::on_episode_started(record, started, now),
        RunEvent::EpisodeProgress(progress) => {
            episode_progress::on_episode_progress(record, progress, now)
        }
        RunEvent::AuditProgress(progress) => {
            audit_progress::on_audit_progress(record, progress, now)
        }
        RunEvent::ExecFinished(result) => results::on_exec(record, result, now),
        RunEvent::AuditFinished(report) => results::on_audit(record, report, now),
        RunEvent::Answer { text } => lifecycle::on_answer(record, text, now),
        RunEvent::Approve { edited } => planning::on_approve(record, edited.as_ref(), now),
        RunEvent::Tick => lifecycle::on_tick(record, now, None),
        RunEvent::Sweep { serving } => lifecycle::on_tick(record, now, Some(serving)),
        RunEvent::Admit => on_admit(record, now),
        RunEvent::DeadLettered {
            kind,
            generation,
            step,
            reason,
        } => lifecycle::on_dead_letter(record, kind, *generation, *step, reason, now),
    };
    match decision {
        Decision::Apply(mut step) => {
            // A progress notice leaves the last applied event as it was: a redelivery of that
            // one is still recognised.
            if !matches!(
                event,
                RunEvent::EpisodeProgress(_) | RunEvent::AuditProgress(_)
            ) {
                step.record.last_event = event.replayable().then(|| event.key());
            }
            // Every transition ends here: never hand back a record that may not be stored.
            match step.record.check_consistency() {
                Ok(()) => Decision::Apply(step),
                Err(inconsistent) => Decision::Refused(inconsistent),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod admission_tests;
#[cfg(test)]
mod attempts_tests;
#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod clause_step_tests;
#[cfg(test)]
mod closing_audit_tests;
#[cfg(test)]
mod consistency_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod planning_tests;
#[cfg(test)]
mod progress_tests;
#[cfg(test)]
mod rubric_tests;
#[cfg(test)]
mod steering_tests;
#[cfg(test)]
mod tests;
