//! The small types the run record and the run log are made of.

use serde::{Deserialize, Serialize};

use loopgate_protocol::snapshot::SnapshotId;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Verdicts;
use loopgate_protocol::wire::{AuditPurpose, EpisodeKind, ExecFeedback, Increment, Message};

/// A run's state (`lg:runs:<state>` indexes the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Queued,
    Running,
    /// Held by an operator (`loopgate pause`): the step in flight finishes and is recorded,
    /// no new step is taken, and the wall-clock budget does not run until `unpause`.
    Paused,
    WaitingForInput,
    Completed,
    Blocked,
    BudgetExhausted,
    Cancelled,
    Failed,
}

impl RunState {
    pub const ALL: [RunState; 9] = [
        RunState::Queued,
        RunState::Running,
        RunState::Paused,
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
            RunState::Paused => "paused",
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
        /// The siblings of a step of several attempts (`budget.attempts`), while they run and
        /// are audited; empty for a step of one episode (and then absent when stored).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attempts: Vec<super::Attempt>,
    },
    /// Waiting for the auditor's report on `candidate`.
    Auditing {
        round: u32,
        purpose: AuditPurpose,
        candidate: SnapshotId,
        objective: String,
        write_scope: Vec<String>,
        /// A checks-only audit (no model asked): the round's candidate when the token or cost
        /// budget ran out with its episode, so the run ends holding the better of it and the
        /// artifact before. Absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        checks_only: bool,
    },
    /// Waiting for a human answer to `question`.
    WaitingForAnswer { question: String },
    /// A paused run whose step in flight has finished: `held` is the step it would have taken
    /// next, taken when the run is unpaused.
    Paused { held: HeldStep },
    /// A new run waiting (state `queued`) for a slot under `[manager] max_active_runs`.
    Admission,
    /// Terminal: nothing more will happen in this generation.
    Finished,
}

impl Phase {
    /// The phase's `type` tag, as stored (`deciding`, `executing`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Deciding { .. } => "deciding",
            Phase::Executing { .. } => "executing",
            Phase::Auditing { .. } => "auditing",
            Phase::WaitingForAnswer { .. } => "waiting_for_answer",
            Phase::Paused { .. } => "paused",
            Phase::Admission => "admission",
            Phase::Finished => "finished",
        }
    }
}

/// The step a paused run holds back (see [`Phase::Paused`]); deadlines are set, and the request
/// built, only when it is taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HeldStep {
    /// Ask the manager for the next decision.
    Decide,
    /// Dispatch this executor episode (a round, or a planning episode).
    Exec {
        capability: Capability,
        increment: Increment,
        episode: EpisodeKind,
        /// Boxed: the largest field by far (serialized the same as unboxed).
        feedback: Box<ExecFeedback>,
    },
    /// Dispatch this audit (a final audit: a round's own audit finishes with its round).
    Audit {
        purpose: AuditPurpose,
        candidate: SnapshotId,
        objective: String,
        write_scope: Vec<String>,
    },
}

impl HeldStep {
    pub fn name(&self) -> &'static str {
        match self {
            HeldStep::Decide => "decide",
            HeldStep::Exec { .. } => "exec",
            HeldStep::Audit { .. } => "audit",
        }
    }
}

/// One operator instruction (`loopgate instruct`), kept for the manager's prompts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Instruction {
    /// Unix millis when it was given.
    pub at: i64,
    /// The generation and round the run was at.
    pub generation: u32,
    pub round: u32,
    pub text: String,
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
    /// The snapshot the round started from.
    #[serde(default)]
    pub base: Option<SnapshotId>,
    /// Paths the round changed (base -> candidate), as the auditor saw them.
    #[serde(default)]
    pub changed_paths: Vec<String>,
    /// Of `changed_paths`, those the round added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_paths: Vec<String>,
    /// Criteria with a check on the audited snapshot (`passing` of them passed).
    #[serde(default)]
    pub checked: u32,
    /// The candidate was audited before (in this round): its report was reused, not redone.
    #[serde(default)]
    pub reused_from: Option<u32>,
    /// The capability the step ran on (absent in records stored before it was kept: `cli`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<loopgate_protocol::subjects::Capability>,
    /// The round tried the step of the round before it again, with that round's audit
    /// evidence, and no manager decision (`budget.step_retries`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retried: bool,
    /// The candidate was set aside as a regression (why): the artifact stayed at the snapshot
    /// the round started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<String>,
}

/// Usage per role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
