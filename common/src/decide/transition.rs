//! What a transition takes and gives: the [`RunEvent`]s the state machine reacts to, the
//! [`Step`] (new record, log, evidence) a transition produces, the [`Decision`] the driver acts
//! on, and the limits the handlers share.

use crate::budget::Budget;
use crate::state::{InconsistentRecord, LogEntry, Outgoing, RunRecord, RunState};
use crate::task::Task;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::wire::{
    AuditProgress, AuditReport, EpisodeProgress, EpisodeStarted, ExecResult,
};

/// Rounds kept in the record for the manager's prompt.
pub const HISTORY_KEEP: usize = 5;
/// Feedback lines kept for the next manager prompt.
pub const FEEDBACK_KEEP: usize = 6;
/// Raw manager output kept in the log for an invalid reply.
pub const RAW_LOG_CHARS: usize = 4000;
/// Slack on top of the manager episode before the decision deadline fires (a crashed replica's
/// request is redelivered by JetStream well before this).
pub const DECISION_SLACK_SECS: u64 = 120;
/// Default slack on top of a started episode's own budget (`[budget] episode_grace_secs`).
pub const EPISODE_GRACE_SECS: u64 = crate::budget::DEFAULT_EPISODE_GRACE_SECS;

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
    /// A running executor episode's progress (see `episode_progress`).
    EpisodeProgress(EpisodeProgress),
    /// A running audit's progress (see `audit_progress`).
    AuditProgress(AuditProgress),
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
    /// An operator instruction for the manager's next prompts (validated by the caller, see
    /// [`validate_instruction`](super::validate_instruction)).
    Instruct {
        text: String,
    },
    /// Hold the run: the step in flight finishes, no new one is taken.
    Pause,
    /// Take the held step and let the run go on.
    Unpause,
    /// Continue a completed run as a new generation with this (validated) task: a new goal and
    /// contract, from the completed snapshot.
    Continue {
        task: Box<Task>,
    },
    /// A deadline sweep: act on whatever deadline has passed at `now`.
    Tick,
    /// A deadline sweep that knows the capabilities live executors serve now (their
    /// heartbeats): a start deadline that passes while the step's capability is served is
    /// queue wait behind busy workers, not a failed round (see `LogEvent::QueueWait`).
    Sweep {
        serving: Vec<loopgate_protocol::subjects::Capability>,
    },
    /// A slot is free (`[manager] max_active_runs`): a run waiting in the admission queue
    /// starts.
    Admit,
    /// A message of this run exhausted its deliveries (see `LogEvent::DeadLetter`): `kind`
    /// is the message kind, `generation` and `step` the step it belonged to (the round of an
    /// exec or audit message, the sequence number of a decision request).
    DeadLettered {
        kind: String,
        generation: u32,
        step: u32,
        reason: String,
    },
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
            // The worker too: a redelivery of the notice just applied is a replay, another
            // worker's start of the same attempt is not (see `lifecycle::on_episode_started`).
            // A sibling of a step of several attempts is its own episode (the first keeps the
            // key of a step of one); a checks-only audit is not the round's own.
            RunEvent::EpisodeStarted(s) => {
                format!(
                    "started:{}:{}:{:?}:{}:{}{}",
                    s.generation,
                    s.round,
                    s.role,
                    s.delivery_attempt,
                    s.worker,
                    sibling_suffix(s.attempt)
                )
            }
            RunEvent::EpisodeProgress(p) => format!(
                "progress:{}:{}:{}:{}:{}",
                p.generation, p.round, p.attempt, p.worker, p.elapsed_ms
            ),
            RunEvent::AuditProgress(p) => format!(
                "audit-progress:{}:{}:{:?}:{}:{}",
                p.generation, p.round, p.purpose, p.worker, p.elapsed_ms
            ),
            RunEvent::ExecFinished(r) => format!(
                "exec:{}:{}{}",
                r.generation,
                r.round,
                sibling_suffix(r.attempt)
            ),
            RunEvent::AuditFinished(r) => {
                format!(
                    "audit:{}:{}:{:?}:{}{}",
                    r.generation,
                    r.round,
                    r.purpose,
                    r.snapshot,
                    if r.mechanical_only {
                        ":checks-only"
                    } else {
                        ""
                    }
                )
            }
            RunEvent::Answer { .. } => "answer".to_string(),
            RunEvent::Approve { .. } => "approve".to_string(),
            RunEvent::Cancel { .. } => "cancel".to_string(),
            RunEvent::Resume { .. } => "resume".to_string(),
            RunEvent::Instruct { .. } => "instruct".to_string(),
            RunEvent::Pause => "pause".to_string(),
            RunEvent::Unpause => "unpause".to_string(),
            RunEvent::Continue { .. } => "continue".to_string(),
            RunEvent::Tick | RunEvent::Sweep { .. } => "tick".to_string(),
            RunEvent::Admit => "admit".to_string(),
            RunEvent::DeadLettered {
                kind,
                generation,
                step,
                ..
            } => format!("dead:{kind}:{generation}:{step}"),
        }
    }

    /// Events from people and the sweeper are never redeliveries of each other.
    pub(super) fn replayable(&self) -> bool {
        !matches!(
            self,
            RunEvent::Answer { .. }
                | RunEvent::Approve { .. }
                | RunEvent::Cancel { .. }
                | RunEvent::Resume { .. }
                | RunEvent::Instruct { .. }
                | RunEvent::Pause
                | RunEvent::Unpause
                | RunEvent::Continue { .. }
                | RunEvent::Tick
                | RunEvent::Sweep { .. }
                | RunEvent::Admit
        )
    }
}

/// `:attempt-K` for sibling K > 1 of a step, nothing for the first.
fn sibling_suffix(attempt: u32) -> String {
    if attempt > loopgate_protocol::wire::FIRST_ATTEMPT {
        format!(":attempt-{attempt}")
    } else {
        String::new()
    }
}

/// The result of a transition, to be stored atomically.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub record: RunRecord,
    pub log: Vec<LogEntry>,
    /// New evidence records for the run's evidence history.
    pub evidence: Vec<Evidence>,
    /// The (signed) audit report this transition accepted: a round or final audit, not a
    /// planning one and not a reused one. Stored beside the record by its snapshot id; the
    /// report stored for a completed run's final snapshot is its certificate.
    pub audit_report: Option<AuditReport>,
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
    /// The message claims what its sender could not have done (see [`Distrust`]): dropped
    /// like [`Decision::Ignore`], and a security event for the driver to log and count.
    Distrusted(Distrust),
    /// The transition would store a record whose state and phase disagree (a bug, or a stored
    /// record that already disagreed): nothing may be stored. The driver logs it and treats
    /// the event as failed; the stored record stays as it was.
    Refused(InconsistentRecord),
}

/// A worker's message refused because it claims more than its dispatch allowed: usage no
/// episode of that length can spend, or a second start of an episode that already started.
/// Nothing of it reaches the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distrust {
    /// The message's kind (`exec_result`, `audit_report`, `episode_started`).
    pub kind: &'static str,
    /// The stable name of the refusal (log field and metric attribute):
    /// `usage_over_ceiling`, `repeated_episode_start`.
    pub reason: &'static str,
    /// What was claimed and what was allowed, for the log.
    pub detail: String,
}

impl RunEvent {
    /// The infrastructure-failure event for `message`, which exhausted its deliveries for
    /// `reason`; None for a message that belongs to no step (a cancel notice) or whose loss
    /// changes nothing (a progress notice).
    pub fn dead_lettered(
        message: &loopgate_protocol::wire::Message,
        reason: &str,
    ) -> Option<RunEvent> {
        use loopgate_protocol::wire::Message;
        let (generation, step) = match message {
            Message::ExecRequest(m) => (m.generation, m.round),
            Message::ExecResult(m) => (m.generation, m.round),
            Message::AuditRequest(m) => (m.generation, m.round),
            Message::AuditReport(m) => (m.generation, m.round),
            Message::DecideRequest(m) => (m.generation, m.seq),
            Message::EpisodeStarted(m) => (m.generation, m.round),
            // A lost progress notice changes nothing: the next one, or the result, follows.
            Message::EpisodeProgress(_)
            | Message::AuditProgress(_)
            | Message::CancelEpisodes(_) => return None,
        };
        Some(RunEvent::DeadLettered {
            kind: message.kind().to_string(),
            generation,
            step,
            reason: reason.to_string(),
        })
    }
}
