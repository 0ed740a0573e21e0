//! The run state machine: `decide(record, event, now) -> Decision`, pure. The manager loads the
//! record, decides, stores the new record with compare-and-set, then publishes the outbox.

mod lifecycle;
mod manager_turn;
mod planning;
mod results;
mod tx;

use crate::budget::Budget;
use crate::contract::Contract;
use crate::state::{
    Accounting, AuditStanding, Deadlines, InconsistentRecord, LogEvent, Outgoing, Phase, Planning,
    PlanningStage, RunRecord, RunState, Streaks, RUN_RECORD_SCHEMA,
};
use crate::task::Task;
use crate::usage::Usage;
use crate::verdict::Evidence;
use crate::wire::{AuditReport, EpisodeStarted, ExecResult};

pub use planning::{approval_question, edited_contract};
pub use results::guard_report;
use tx::Tx;

/// Rounds kept in the record for the manager's prompt.
pub const HISTORY_KEEP: usize = 5;
/// Feedback lines kept for the next manager prompt.
pub const FEEDBACK_KEEP: usize = 6;
/// Raw manager output kept in the log for an invalid reply.
pub const RAW_LOG_CHARS: usize = 4000;
/// Slack on top of the manager episode before the decision deadline fires (a crashed replica's
/// request is redelivered by JetStream well before this).
pub const DECISION_SLACK_SECS: u64 = 120;
/// Slack on top of a started episode's own budget (the worker enforces the budget itself).
pub const EPISODE_GRACE_SECS: u64 = 60;

// Events are built once and passed by reference; boxing the report would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    ManagerReplied {
        generation: u32,
        seq: u32,
        raw: String,
        usage: Usage,
        /// Whether this deployment serves the `gui` route (some executor has that capability).
        gui_offered: bool,
    },
    ManagerFailed {
        generation: u32,
        seq: u32,
        error: String,
        usage: Usage,
    },
    EpisodeStarted(EpisodeStarted),
    ExecFinished(ExecResult),
    AuditFinished(AuditReport),
    Answer {
        text: String,
    },
    Cancel {
        reason: String,
    },
    /// A person approves the proposed contract, or replaces it with an edited one (validated
    /// against the task by the caller, see [`edited_contract`]).
    Approve {
        edited: Option<Contract>,
    },
    /// Start a new generation of an ended run, with its (validated) budget.
    Resume {
        budget: Budget,
    },
    /// A deadline sweep: act on whatever deadline has passed at `now`.
    Tick,
}

impl RunEvent {
    /// Identity of the event, to recognise a redelivery of the last applied one.
    pub fn key(&self) -> String {
        match self {
            RunEvent::ManagerReplied {
                generation, seq, ..
            }
            | RunEvent::ManagerFailed {
                generation, seq, ..
            } => format!("decide:{generation}:{seq}"),
            RunEvent::EpisodeStarted(s) => {
                format!(
                    "started:{}:{}:{:?}:{}",
                    s.generation, s.round, s.role, s.delivery_attempt
                )
            }
            RunEvent::ExecFinished(r) => format!("exec:{}:{}", r.generation, r.round),
            RunEvent::AuditFinished(r) => {
                format!(
                    "audit:{}:{}:{:?}:{}",
                    r.generation, r.round, r.purpose, r.snapshot
                )
            }
            RunEvent::Answer { .. } => "answer".to_string(),
            RunEvent::Approve { .. } => "approve".to_string(),
            RunEvent::Cancel { .. } => "cancel".to_string(),
            RunEvent::Resume { .. } => "resume".to_string(),
            RunEvent::Tick => "tick".to_string(),
        }
    }

    /// Events from people and the sweeper are never redeliveries of each other.
    fn replayable(&self) -> bool {
        !matches!(
            self,
            RunEvent::Answer { .. }
                | RunEvent::Approve { .. }
                | RunEvent::Cancel { .. }
                | RunEvent::Resume { .. }
                | RunEvent::Tick
        )
    }
}

/// The result of a transition, to be stored atomically.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub record: RunRecord,
    pub log: Vec<crate::state::LogEntry>,
    /// New evidence records for the run's evidence history.
    pub evidence: Vec<Evidence>,
    pub previous_state: RunState,
}

impl Step {
    pub fn outgoing(&self) -> &[Outgoing] {
        &self.record.outbox
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Apply(Box<Step>),
    /// The event was already applied: publish the stored outbox again (dedup ids make it safe).
    Replay(Vec<Outgoing>),
    /// Stale or irrelevant; acknowledge and drop.
    Ignore(String),
    /// The transition would store a record whose state and phase disagree (a bug, or a stored
    /// record that already disagreed): nothing may be stored. The driver logs it and treats
    /// the event as failed; the stored record stays as it was.
    Refused(InconsistentRecord),
}

/// Create the record of a new run and request its first decision.
pub fn start_run(id: &str, task: Task, base_snapshot: &str, now: i64) -> Step {
    let contract = Contract::from_task(&task);
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
        },
        trace_parent: None,
        escalation_level: 0,
        planning: Planning::default(),
    };
    let mut tx = Tx::new(&record, now);
    tx.log(LogEvent::Submitted {
        spec_hash: record.contract.spec_hash.clone(),
        base_snapshot: base_snapshot.to_string(),
        criteria: record.contract.criteria.len() as u32,
    });
    if record.task.plan {
        tx.record.state = RunState::Running;
        tx.record.planning.stage = Some(PlanningStage::Spec);
    }
    tx.continue_work();
    tx.into_step()
}

pub fn decide(record: &RunRecord, event: &RunEvent, now: i64) -> Decision {
    if event.replayable() && record.last_event.as_deref() == Some(event.key().as_str()) {
        return Decision::Replay(record.outbox.clone());
    }
    let decision = match event {
        RunEvent::Cancel { reason } => lifecycle::on_cancel(record, reason, now),
        RunEvent::Resume { budget } => lifecycle::on_resume(record, budget, now),
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
        RunEvent::ExecFinished(result) => results::on_exec(record, result, now),
        RunEvent::AuditFinished(report) => results::on_audit(record, report, now),
        RunEvent::Answer { text } => lifecycle::on_answer(record, text, now),
        RunEvent::Approve { edited } => planning::on_approve(record, edited.as_ref(), now),
        RunEvent::Tick => lifecycle::on_tick(record, now),
    };
    match decision {
        Decision::Apply(mut step) => {
            step.record.last_event = event.replayable().then(|| event.key());
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
mod consistency_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod planning_tests;
#[cfg(test)]
mod tests;
