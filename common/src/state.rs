//! The run record kept in Redis, its states and phases, and the run log entries.

use serde::{Deserialize, Serialize};

use crate::contract::Contract;
use crate::gate::GateVerdict;
use crate::next_step::Route;
use crate::rubric::{RubricStanding, ScoreLayer, Strategy};
use crate::snapshot::SnapshotId;
use crate::subjects::Capability;
use crate::task::Task;
use crate::usage::Usage;
use crate::verdict::{Evidence, Verdicts};
use crate::wire::{AuditPurpose, Increment, Message};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Queued,
    Running,
    WaitingForInput,
    Completed,
    Blocked,
    BudgetExhausted,
    Cancelled,
    Failed,
}

impl RunState {
    pub const ALL: [RunState; 8] = [
        RunState::Queued,
        RunState::Running,
        RunState::WaitingForInput,
        RunState::Completed,
        RunState::Blocked,
        RunState::BudgetExhausted,
        RunState::Cancelled,
        RunState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::WaitingForInput => "waiting_for_input",
            RunState::Completed => "completed",
            RunState::Blocked => "blocked",
            RunState::BudgetExhausted => "budget_exhausted",
            RunState::Cancelled => "cancelled",
            RunState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed
                | RunState::Blocked
                | RunState::BudgetExhausted
                | RunState::Cancelled
                | RunState::Failed
        )
    }
}

/// Where planning stands while a `plan = true` run builds its contract (before round 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanningStage {
    /// The planner episode writes `spec.md`.
    Spec,
    /// The proposer episode turns `spec.md` into `contract.toml`.
    Contract,
    /// The proposed contract waits for `loopgate approve`.
    Approval,
}

impl PlanningStage {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanningStage::Spec => "spec",
            PlanningStage::Contract => "contract",
            PlanningStage::Approval => "approval",
        }
    }
}

/// How the run's contract came to be frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractSource {
    /// Proposed by the planning phases and frozen without review.
    Proposed,
    /// Proposed, then approved by a person as is.
    Approved,
    /// Replaced by a person's edited contract at approval.
    Edited,
}

/// What the run is waiting for right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for a manager decision with this sequence number.
    Deciding { seq: u32 },
    /// Waiting for the executor's result of this round.
    Executing {
        round: u32,
        capability: Capability,
        increment: Increment,
    },
    /// Waiting for the auditor's report on `candidate`.
    Auditing {
        round: u32,
        purpose: AuditPurpose,
        candidate: SnapshotId,
        objective: String,
        write_scope: Vec<String>,
    },
    /// Waiting for a human answer to `question`.
    WaitingForAnswer { question: String },
    /// Terminal: nothing more will happen in this generation.
    Finished,
}

/// Where a message goes; the driver maps targets to subjects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Target {
    Exec {
        capability: Capability,
    },
    Audit,
    Decide,
    /// Core NATS `control.<run>`: not persisted, for in-flight episodes.
    Control,
}

/// What a phase deadline guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadlineKind {
    /// The manager's decision episode.
    Decision,
    /// A worker must pick the step up (an executor publishes `episode_started`).
    ExecStart,
    /// The executor episode, once started.
    ExecEpisode,
    /// The audit, from dispatch to report.
    Audit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadline {
    pub at_ms: i64,
    pub kind: DeadlineKind,
}

/// A message the driver must publish after the state change is stored (with a dedup id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    pub target: Target,
    pub msg_id: String,
    pub message: Message,
}

/// One round, compacted for the manager's prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundSummary {
    pub round: u32,
    pub objective: String,
    pub exec_summary: String,
    pub candidate: Option<SnapshotId>,
    pub verdicts: Option<Verdicts>,
    pub gaps: Vec<String>,
    /// (check id, output excerpt) for each failing or inconclusive check.
    pub failing: Vec<(String, String)>,
    pub passing: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleUsage {
    pub manager: Usage,
    pub executor: Usage,
    pub auditor: Usage,
}

impl RoleUsage {
    pub fn total(&self) -> u64 {
        self.manager.total() + self.executor.total() + self.auditor.total()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub generation: u32,
    pub state: RunState,
    pub phase: Phase,
    pub task: Task,
    pub contract: Contract,
    /// Rounds dispatched so far (an executor step is one round).
    pub round: u32,
    /// The starting workspace.
    pub base_snapshot: SnapshotId,
    /// The current artifact: the latest candidate that was not rejected.
    pub snapshot: SnapshotId,
    /// The manager's own summary of where the task stands.
    pub task_state: Option<String>,
    /// The last few rounds, compacted.
    pub history: Vec<RoundSummary>,
    /// Feedback for the manager's next prompt (refused `done`, parse errors, failures).
    pub feedback: Vec<String>,
    pub invalid_streak: u32,
    /// Sequence number of the latest decision request.
    pub decide_seq: u32,
    pub usage: RoleUsage,
    pub created_at: i64,
    pub updated_at: i64,
    pub terminal_reason: Option<String>,
    /// Evidence records on the current snapshot (the full history lives in the evidence hash).
    pub evidence: Vec<Evidence>,
    /// The latest audit verdicts and the snapshot they are about.
    pub last_verdicts: Option<(Verdicts, SnapshotId)>,
    pub last_gate: Option<GateVerdict>,
    /// Messages published by the last transition, re-published if that event is redelivered.
    pub outbox: Vec<Outgoing>,
    /// Key of the last applied event (see `RunEvent::key`).
    pub last_event: Option<String>,
    /// The current phase's deadline, swept by every manager replica.
    #[serde(default)]
    pub deadline: Option<Deadline>,
    /// The whole run's wall-clock deadline (this generation).
    #[serde(default)]
    pub wall_deadline_ms: Option<i64>,
    /// Rounds in a row that did not pass the gate (or could not run).
    #[serde(default)]
    pub failed_streak: u32,
    /// `round` when this generation started; `max_rounds` counts rounds per generation.
    #[serde(default)]
    pub generation_start_round: u32,
    /// W3C `traceparent` of the run's root span: every later span of the run, in any process,
    /// joins this trace.
    #[serde(default)]
    pub trace_parent: Option<String>,
    /// Rungs climbed on the executor's profile ladder (`roles.executor_escalation`).
    #[serde(default)]
    pub escalation_level: u32,
    /// `done` replies refused in a row (the gate was closed).
    #[serde(default)]
    pub done_refusals: u32,
    /// While a `plan = true` run is still building its contract; `None` once it is frozen.
    #[serde(default)]
    pub planning: Option<PlanningStage>,
    /// The proposed contract waiting for approval (`require_approval = true`).
    #[serde(default)]
    pub proposed_contract: Option<Contract>,
    /// The last snapshot whose audit passed (complete, clean, aligned, every blocking check
    /// passing): where a PIVOT rolls the artifact back to.
    #[serde(default)]
    pub last_good_snapshot: Option<SnapshotId>,
    /// The rubric's latest score, when the contract has a rubric.
    #[serde(default)]
    pub rubric: Option<RubricStanding>,
}

impl RunRecord {
    /// The earliest deadline that still matters, for the `lg:deadlines` index.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        if self.state.is_terminal() {
            return None;
        }
        match (self.deadline.map(|d| d.at_ms), self.wall_deadline_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The executor profile for the next round: the ladder's rung at `escalation_level`.
    pub fn executor_profile(&self) -> &str {
        let level = self.escalation_level as usize;
        match level {
            0 => &self.task.roles.executor,
            n => self
                .task
                .roles
                .executor_escalation
                .get(n - 1)
                .or(self.task.roles.executor_escalation.last())
                .map(String::as_str)
                .unwrap_or(&self.task.roles.executor),
        }
    }

    /// Progress as evidence, never as time spent: `acceptance 3/5 passing on snapshot abc123,
    /// rubric 7.9/8.5`, or where planning stands.
    pub fn progress(&self) -> String {
        match self.planning {
            Some(PlanningStage::Spec) => {
                return "planning: the planner is writing spec.md (no contract yet)".to_string()
            }
            Some(PlanningStage::Contract) => {
                return "planning: the proposer is turning spec.md into the contract".to_string()
            }
            Some(PlanningStage::Approval) => {
                let (hash, n) = self
                    .proposed_contract
                    .as_ref()
                    .map(|c| (c.short_hash().to_string(), c.criteria.len()))
                    .unwrap_or_default();
                return format!(
                    "planning: contract {hash} ({n} criteria) proposed, waiting for approval"
                );
            }
            None => {}
        }
        let (passing, checked) = self.checks_passing();
        let snapshot = self.snapshot.get(..12).unwrap_or(&self.snapshot);
        let audited = self
            .last_gate
            .as_ref()
            .is_some_and(|g| g.snapshot == self.snapshot);
        let mut line = format!("acceptance {passing}/{checked} passing on snapshot {snapshot}");
        if !audited {
            line.push_str(" (not audited yet)");
        }
        if let Some(rubric) = &self.contract.rubric {
            match self.rubric.as_ref().filter(|r| r.snapshot == self.snapshot) {
                Some(RubricStanding {
                    average: Some(avg), ..
                }) => line.push_str(&format!(", rubric {avg:.1}/{}", rubric.threshold)),
                _ => line.push_str(&format!(", rubric not scored/{}", rubric.threshold)),
            }
        }
        line
    }

    /// Rounds dispatched in this generation.
    pub fn rounds_this_generation(&self) -> u32 {
        self.round.saturating_sub(self.generation_start_round)
    }

    /// Passing checks on the current snapshot, as "k/n".
    pub fn checks_passing(&self) -> (u32, u32) {
        self.last_gate
            .as_ref()
            .filter(|g| g.snapshot == self.snapshot)
            .map(|g| (g.passing, g.checked))
            .unwrap_or((
                0,
                self.contract
                    .criteria
                    .iter()
                    .filter(|c| c.check.is_some())
                    .count() as u32,
            ))
    }
}

/// One entry of the append-only run log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub at: i64,
    pub generation: u32,
    pub round: u32,
    #[serde(flatten)]
    pub event: LogEvent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LogEvent {
    Submitted {
        spec_hash: String,
        base_snapshot: SnapshotId,
        criteria: u32,
    },
    Decision {
        seq: u32,
        route: Route,
        task: String,
        task_state: Option<String>,
    },
    InvalidOutput {
        seq: u32,
        error: String,
        raw: String,
    },
    ManagerError {
        seq: u32,
        error: String,
    },
    ExecDispatched {
        capability: Capability,
        objective: String,
        /// The snapshot the executor starts from.
        #[serde(default)]
        base_snapshot: SnapshotId,
    },
    ExecResult {
        worker: String,
        candidate: Option<SnapshotId>,
        summary: String,
        claimed_done: bool,
        /// Tool calls the agent made in the episode.
        #[serde(default)]
        tool_calls: u32,
        error: Option<String>,
    },
    AuditDispatched {
        purpose: AuditPurpose,
        candidate: SnapshotId,
    },
    AuditReport {
        purpose: AuditPurpose,
        worker: String,
        snapshot: SnapshotId,
        verdicts: Verdicts,
        passing: u32,
        checked: u32,
        gaps: Vec<String>,
        downgraded: bool,
    },
    Gate {
        passed: bool,
        snapshot: SnapshotId,
        reasons: Vec<String>,
    },
    DoneRefused {
        reasons: Vec<String>,
    },
    CandidateRejected {
        candidate: SnapshotId,
        reason: String,
    },
    Question {
        question: String,
    },
    EpisodeStarted {
        role: crate::wire::EpisodeRole,
        worker: String,
        attempt: u64,
    },
    DeadlineMissed {
        kind: DeadlineKind,
        detail: String,
    },
    Answered {
        text: String,
    },
    Resumed {
        from_state: RunState,
    },
    Escalated {
        profile: String,
        after_failed_rounds: u32,
    },
    Terminal {
        state: RunState,
        reason: String,
        snapshot: SnapshotId,
    },
    /// The planner's `spec.md` passed its audit.
    SpecWritten {
        snapshot: SnapshotId,
    },
    /// The proposer's contract is valid (and waits for approval when `require_approval`).
    ContractProposed {
        spec_hash: String,
        criteria: u32,
        rubric: bool,
        awaiting_approval: bool,
    },
    /// The proposer's contract could not be used; the proposer is asked again.
    ContractInvalid {
        error: String,
    },
    /// The contract is frozen by its hash for the rest of the run.
    ContractFrozen {
        spec_hash: String,
        criteria: u32,
        source: ContractSource,
    },
    /// The judge's rubric score on an audited snapshot.
    RubricScored {
        snapshot: SnapshotId,
        average: Option<f64>,
        threshold: f64,
        strategy: Option<Strategy>,
        layer: Option<ScoreLayer>,
        passed: bool,
        summary: String,
    },
    /// The judge said PIVOT: the artifact went back to `to` (the last passing snapshot or the
    /// base).
    Pivot {
        from: SnapshotId,
        to: SnapshotId,
        reason: String,
    },
}

impl LogEvent {
    pub fn kind(&self) -> &'static str {
        match self {
            LogEvent::Submitted { .. } => "submitted",
            LogEvent::Decision { .. } => "decision",
            LogEvent::InvalidOutput { .. } => "invalid_output",
            LogEvent::ManagerError { .. } => "manager_error",
            LogEvent::ExecDispatched { .. } => "exec_dispatched",
            LogEvent::ExecResult { .. } => "exec_result",
            LogEvent::AuditDispatched { .. } => "audit_dispatched",
            LogEvent::AuditReport { .. } => "audit_report",
            LogEvent::Gate { .. } => "gate",
            LogEvent::DoneRefused { .. } => "done_refused",
            LogEvent::CandidateRejected { .. } => "candidate_rejected",
            LogEvent::Question { .. } => "question",
            LogEvent::EpisodeStarted { .. } => "episode_started",
            LogEvent::DeadlineMissed { .. } => "deadline_missed",
            LogEvent::Answered { .. } => "answered",
            LogEvent::Resumed { .. } => "resumed",
            LogEvent::Escalated { .. } => "escalated",
            LogEvent::Terminal { .. } => "terminal",
            LogEvent::SpecWritten { .. } => "spec_written",
            LogEvent::ContractProposed { .. } => "contract_proposed",
            LogEvent::ContractInvalid { .. } => "contract_invalid",
            LogEvent::ContractFrozen { .. } => "contract_frozen",
            LogEvent::RubricScored { .. } => "rubric_scored",
            LogEvent::Pivot { .. } => "pivot",
        }
    }
}
