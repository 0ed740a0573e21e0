//! The append-only run log (`lg:run:<id>:log`): one entry per thing that happened.

use serde::{Deserialize, Serialize};

use super::{ContractSource, DeadlineKind, RunState};
use crate::next_step::Route;
use loopgate_protocol::rubric::{ScoreLayer, Strategy};
use loopgate_protocol::snapshot::SnapshotId;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::Verdicts;
use loopgate_protocol::wire::{AgentIsolation, AuditPurpose};

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
        /// Sibling episodes dispatched for the step (`budget.attempts`; absent: one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempts: Option<u32>,
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
        /// Times a self-check refused the agent's `finish` in the episode.
        #[serde(default)]
        self_check_refusals: u32,
        /// How the executor isolated the episode's agent (absent from older executors).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_isolation: Option<AgentIsolation>,
        /// Tokens the episode used, input plus output (absent from older entries).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<u64>,
        /// The sibling of a step of several attempts this episode was (absent: the step had
        /// one episode).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_attempt: Option<u32>,
        /// How long the episode ran, in milliseconds (absent from older entries).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        /// The episode's transcript in the evidence bucket, by digest (absent: none stored).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transcript: Option<String>,
    },
    AuditDispatched {
        purpose: AuditPurpose,
        candidate: SnapshotId,
        /// The checks only, no model asked: a sibling's candidate, or the last round's when the
        /// spend budget ran out with its episode. Absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        checks_only: bool,
        /// The starting workspace's checks before round 1 (`budget.baseline_checks`), not a
        /// round's candidate. Absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        baseline: bool,
    },
    /// The starting workspace's checks, run before the first step (`budget.baseline_checks`):
    /// which blocking criteria pass already. A first candidate that breaks one is set aside.
    BaselineChecked {
        snapshot: SnapshotId,
        /// Blocking criteria passing on the starting workspace.
        passing: Vec<String>,
        /// Blocking criteria failing there (or without a conclusive check).
        failing: Vec<String>,
        /// Why the starting workspace has no baseline (its audit was lost): the first
        /// candidate then has nothing to be compared with. Absent when it was checked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
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
        /// The sibling whose candidate this checks-only audit scored (absent: the round's own
        /// audit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_attempt: Option<u32>,
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
        role: loopgate_protocol::wire::EpisodeRole,
        worker: String,
        attempt: u64,
        /// How long an exec step waited in its work queue before this pickup (the first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queued_ms: Option<i64>,
        /// The sibling of a step of several attempts that started (absent: the step has one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_attempt: Option<u32>,
    },
    /// A running executor episode's progress (the worker's throttled notice): logged when its
    /// turn or tool changes.
    EpisodeProgress {
        worker: String,
        turn: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default)]
        tool_calls: u32,
        #[serde(default)]
        tokens: u64,
        elapsed_ms: u64,
        /// The sibling of a step of several attempts (absent: the step has one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_attempt: Option<u32>,
    },
    /// A running audit's progress (the auditor's throttled notice): logged when its stage or
    /// its check changes.
    AuditProgress {
        worker: String,
        stage: loopgate_protocol::wire::AuditStage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check: Option<String>,
        #[serde(default)]
        check_index: u32,
        #[serde(default)]
        checks_total: u32,
        elapsed_ms: u64,
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
    /// The candidate was audited before (under the same contract): that audit's report, bound
    /// to this very snapshot, is reused instead of running the checks again.
    AuditReused {
        snapshot: SnapshotId,
        from_round: u32,
    },
    /// `rounds` audited rounds in a row made no progress: the harness escalated.
    Stagnation {
        rounds: u32,
        /// The executor profile it moved to, when the ladder had another rung.
        escalated_to: Option<String>,
    },
    /// An operator instruction (`loopgate instruct`): it goes into the manager's next prompts.
    Instructed {
        text: String,
    },
    /// An operator paused the run (`loopgate pause`).
    Paused {
        /// The phase the run was in: the step in flight (if any) still finishes.
        phase: String,
    },
    /// A paused run's step in flight finished: `step` (`decide`, `exec`, `audit`) waits for
    /// `unpause`.
    Held {
        step: String,
    },
    /// An operator unpaused the run (`loopgate unpause`); `paused_ms` is how long it was held.
    Unpaused {
        paused_ms: i64,
    },
    /// A completed run continues with a new goal and contract (`loopgate continue`) as a new
    /// generation, from its completed snapshot.
    Continued {
        goal: String,
        spec_hash: String,
        criteria: u32,
        base_snapshot: SnapshotId,
    },
    /// The manager's step was sent back before any executor ran (a verbatim repeat of an
    /// instruction that just failed, or a step that altered the goal's exact names).
    StepSentBack {
        seq: u32,
        reason: String,
    },
    /// Round `from_round`'s step failed its audit and goes straight back to an executor with
    /// that audit's evidence, without a manager decision (`budget.step_retries`).
    StepRetried {
        from_round: u32,
        /// The step, as round `from_round` ran it.
        step: String,
    },
    /// The run's first step is the whole goal, its `of` clauses in one episode checked against
    /// every criterion, without a manager call (`budget.goal_first`); the clause policy takes
    /// the clauses that still fail after it.
    GoalStep {
        of: u32,
    },
    /// The clause policy (`budget.clause_steps`) chose the entry's round's step without a
    /// manager call: clause `clause` (1-based) of the goal's `of` clauses, in the goal's own
    /// words.
    ClauseStep {
        clause: u32,
        of: u32,
        text: String,
        /// This clause's tries as the step in a row, this one included.
        attempt: u32,
        /// Clauses (1-based) set aside, still failing after their tries, when this step went
        /// out.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        set_aside: Vec<u32>,
    },
    /// The manager's step still altered the goal's exact words after it was sent back as often
    /// as `max_invalid_outputs` allows: the executor gets the goal's own words as its step and
    /// not the manager's wording.
    StepReplaced {
        seq: u32,
        /// The manager's wording that was dropped.
        dropped: String,
        /// The step the executor got instead.
        step: String,
    },
    /// The run waits in `queued` for a slot (`[manager] max_active_runs`); nothing is
    /// dispatched until it is admitted.
    AdmissionQueued,
    /// The run got a slot after waiting `waited_ms` in the admission queue.
    Admitted {
        waited_ms: i64,
    },
    /// The exec step of `round` was still queued when its start budget ran out while a live
    /// executor serves `capability`: the workers are busy. Not a failure: the start budget is
    /// counted again from now, and the step stays queued. `waited_ms` since it was dispatched.
    QueueWait {
        round: u32,
        capability: loopgate_protocol::subjects::Capability,
        waited_ms: i64,
    },
    /// Sibling `attempt` of `of` won its step (`budget.attempts`): its candidate passed
    /// `passing` of the contract's `blocking` blocking criteria in its checks-only audit, the
    /// most (ties: fewer tokens, then the smaller diff); `early` when it passed them all and the
    /// siblings still running were cancelled. Its candidate goes on to the round's full audit.
    AttemptWon {
        attempt: u32,
        of: u32,
        candidate: SnapshotId,
        worker: String,
        tokens: u64,
        passing: u32,
        blocking: u32,
        early: bool,
        /// The losers in one line (`attempt 1: 5/9 checks, outscored; attempt 3: failed`).
        others: String,
    },
    /// A message of this run exhausted its deliveries and went to the dead-letter stream: an
    /// infrastructure failure, not the agent's.
    DeadLetter {
        /// The message kind (`exec_result`, `exec_request`, ...).
        kind: String,
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
            LogEvent::BaselineChecked { .. } => "baseline_checked",
            LogEvent::AuditReport { .. } => "audit_report",
            LogEvent::Gate { .. } => "gate",
            LogEvent::DoneRefused { .. } => "done_refused",
            LogEvent::CandidateRejected { .. } => "candidate_rejected",
            LogEvent::Question { .. } => "question",
            LogEvent::EpisodeStarted { .. } => "episode_started",
            LogEvent::EpisodeProgress { .. } => "episode_progress",
            LogEvent::AuditProgress { .. } => "audit_progress",
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
            LogEvent::AuditReused { .. } => "audit_reused",
            LogEvent::Stagnation { .. } => "stagnation",
            LogEvent::StepSentBack { .. } => "step_sent_back",
            LogEvent::StepReplaced { .. } => "step_replaced",
            LogEvent::StepRetried { .. } => "step_retried",
            LogEvent::ClauseStep { .. } => "clause_step",
            LogEvent::GoalStep { .. } => "goal_step",
            LogEvent::Instructed { .. } => "instructed",
            LogEvent::Paused { .. } => "paused",
            LogEvent::Held { .. } => "held",
            LogEvent::Unpaused { .. } => "unpaused",
            LogEvent::Continued { .. } => "continued",
            LogEvent::AdmissionQueued => "admission_queued",
            LogEvent::Admitted { .. } => "admitted",
            LogEvent::DeadLetter { .. } => "dead_letter",
            LogEvent::QueueWait { .. } => "queue_wait",
            LogEvent::AttemptWon { .. } => "attempt_won",
        }
    }
}
