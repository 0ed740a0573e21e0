//! The groups of related [`RunRecord`](super::RunRecord) fields.
//!
//! Every group is `#[serde(flatten)]`ed into the record, so the stored JSON keeps the flat keys
//! it always had (written next to each field below when the Rust name differs): old records
//! load, a replica that predates the groups reads new records, and tools that read the JSON
//! keep working. Fields added after the first stored records carry `#[serde(default)]`, exactly
//! as they did in the flat record.

use serde::{Deserialize, Serialize};

use super::{Deadline, Instruction, PlanningStage, RoleUsage, RunState};
use crate::gate::GateVerdict;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::{RubricStanding, RubricVerdict};
use loopgate_protocol::snapshot::SnapshotId;
use loopgate_protocol::verdict::{Evidence, Verdicts};
use loopgate_protocol::wire::EpisodeRole;

/// Things that went wrong in a row. Each counter is bounded by a budget in `task.budget` and
/// resets when the run makes the kind of progress it counts against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Streaks {
    /// Manager decisions in a row that gave nothing usable: an unparseable reply, a model
    /// error or a missed decision deadline (stored as `invalid_streak`). Bounded by
    /// `max_invalid_outputs`; reset by a usable reply and on resume.
    #[serde(rename = "invalid_streak")]
    pub invalid_decisions: u32,
    /// Rounds (and planning attempts) in a row that did not pass the gate or could not run
    /// (stored as `failed_streak`). `max_failed_rounds` of them ask a person; every
    /// `escalate_after` of them escalate the executor. Reset by a passing gate, an answer, a
    /// resume, an accepted planning step and the contract's freeze.
    #[serde(rename = "failed_streak", default)]
    pub failed_rounds: u32,
    /// `done` replies refused in a row because the gate was closed. Bounded by
    /// `max_done_refusals`; reset by any other usable route.
    #[serde(default)]
    pub done_refusals: u32,
    /// Audited rounds in a row that made no progress: no criterion passed that never passed
    /// before, and no failure output appeared that was not seen before. `stagnation_rounds` of
    /// them escalate; reset by progress and by the escalation itself.
    #[serde(default)]
    pub stagnant_rounds: u32,
    /// Manager steps sent back in a row (a verbatim repeat of an instruction that just failed,
    /// or one that altered the goal's exact names). Reset by a step that is dispatched.
    #[serde(default)]
    pub steps_sent_back: u32,
    /// Failed steps tried again in a row without a manager decision (`step_retries` of them
    /// at most). Reset by a step the manager chose.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step_retries: u32,
    /// The goal clause the clause policy (`budget.clause_steps`) last gave as the step, and its
    /// tries in a row. Replaced when the policy gives another clause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause_tries: Option<ClauseTries>,
    /// Goal clauses (0-based) the clause policy gave their tries and moved past while they
    /// still failed: it gives the next failing clause instead, and asks the manager once every
    /// failing clause is here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clauses_set_aside: Vec<u32>,
}

/// A goal clause given as the step without a manager call, and how often in a row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClauseTries {
    /// The clause's index among the goal's clauses (0-based).
    pub clause: u32,
    /// Its tries as the step in a row (a step retry of it included).
    pub tries: u32,
    /// The round of its last try.
    pub round: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// Where a `plan = true` run stands while it builds its contract; all `None` once the contract
/// is frozen (and for a run that was never planned).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planning {
    /// The planning stage in progress (stored as `planning`).
    #[serde(rename = "planning", default)]
    pub stage: Option<PlanningStage>,
    /// The proposed contract waiting for approval (`require_approval = true`).
    #[serde(default)]
    pub proposed_contract: Option<Contract>,
}

/// What the run has used of its budget (`task.budget`), besides the wall clock (see
/// [`Deadlines::wall_ms`]) and the streaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    /// Model usage per role, against `max_total_tokens` and `max_cost_micros`.
    pub usage: RoleUsage,
    /// `round` when this generation started (or its contract was frozen): `max_rounds` counts
    /// the rounds after it.
    #[serde(default)]
    pub generation_start_round: u32,
}

/// The deadlines every manager replica's sweeper enforces (the earliest is indexed in
/// `lg:deadlines`, see [`RunRecord::next_deadline_ms`](super::RunRecord::next_deadline_ms)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadlines {
    /// The current phase's deadline (stored as `deadline`); `None` while nothing is awaited
    /// from a worker or the manager.
    #[serde(rename = "deadline", default)]
    pub phase: Option<Deadline>,
    /// The whole generation's wall-clock deadline, unix millis (stored as
    /// `wall_deadline_ms`), from `max_wall_secs`.
    #[serde(rename = "wall_deadline_ms", default)]
    pub wall_ms: Option<i64>,
    /// Since when the current exec step has waited in its work queue (unix millis): set when
    /// it is dispatched, cleared when a worker picks it up. Left out of the stored JSON while
    /// empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_since_ms: Option<i64>,
    /// The first start announced for the step in flight: it alone set the episode's deadline,
    /// later starts of the same step never move it. Cleared when a step is dispatched; left
    /// out of the stored JSON while empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episode_started: Option<EpisodeStart>,
}

/// An episode's first announced start (see [`Deadlines::episode_started`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeStart {
    pub role: EpisodeRole,
    pub round: u32,
    /// Its delivery attempt.
    pub attempt: u64,
    /// Unix millis when the manager heard of it.
    pub at_ms: i64,
    /// The highest delivery attempt that announced a start since (a redelivery after a lost
    /// worker); 0 while only the first did.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub latest_attempt: u64,
    /// How many such later starts were logged (at most `MAX_LOGGED_RESTARTS`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: u32,
}

fn is_zero_u64(value: &u64) -> bool {
    *value == 0
}

/// What operators steer the run with (`loopgate instruct`, `pause`). Both keys are left out of
/// the stored JSON while empty, so a record never steered keeps the keys it always had.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steering {
    /// The newest operator instructions, oldest first, at most
    /// [`INSTRUCTIONS_KEEP`](crate::decide::INSTRUCTIONS_KEEP) (every one is in the run log).
    /// Each goes into every later manager prompt until newer ones push it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<Instruction>,
    /// Set while the run is `paused` (stored as `paused`).
    #[serde(rename = "paused", default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseHold>,
}

/// A pause in effect: what unpausing restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseHold {
    /// Unix millis when the run was paused.
    pub since_ms: i64,
    /// The state it was paused from (`queued` or `running`).
    pub from: RunState,
    /// What was left of the wall-clock budget when paused (the wall deadline is lifted while
    /// paused, and set again from this on unpause).
    pub wall_left_ms: Option<i64>,
}

/// What the audits so far established about the run's artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditStanding {
    /// Evidence records on the current snapshot (the full history lives in the evidence hash).
    pub evidence: Vec<Evidence>,
    /// The latest audit verdicts and the snapshot they are about.
    pub last_verdicts: Option<(Verdicts, SnapshotId)>,
    /// The gate's latest verdict.
    pub last_gate: Option<GateVerdict>,
    /// The last snapshot whose audit passed (complete, clean, aligned, every blocking check
    /// passing): where a PIVOT rolls the artifact back to.
    #[serde(default)]
    pub last_good_snapshot: Option<SnapshotId>,
    /// The rubric's latest score, when the contract has a rubric.
    #[serde(default)]
    pub rubric: Option<RubricStanding>,
    /// The most recent audits, by snapshot: an identical candidate is not audited again, its
    /// earlier report (bound to that very snapshot id) is reused. At most [`AUDITS_REMEMBERED`].
    #[serde(default)]
    pub audited: Vec<AuditedSnapshot>,
    /// Criteria that have passed on some audited snapshot of this generation (progress is a
    /// criterion passing that never passed before).
    #[serde(default)]
    pub passing_ever: Vec<String>,
    /// Digests of the failure outputs seen so far (`criterion:sha256-prefix`), at most
    /// [`FAILURES_REMEMBERED`]; a failure output not among them is progress too.
    #[serde(default)]
    pub failures_seen: Vec<String>,
}

/// Audits remembered for reuse.
pub const AUDITS_REMEMBERED: usize = 8;
/// Failure digests remembered.
pub const FAILURES_REMEMBERED: usize = 64;

/// One audit's outcome, kept so that an identical candidate reuses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditedSnapshot {
    pub snapshot: SnapshotId,
    /// The contract it was audited against.
    pub spec_hash: String,
    /// The round whose audit this was.
    pub round: u32,
    /// The verdicts after the acceptance-constraint guard.
    pub verdicts: Verdicts,
    pub downgraded: bool,
    /// Evidence bound to `snapshot`.
    pub evidence: Vec<Evidence>,
    pub gaps: Vec<String>,
    #[serde(default)]
    pub changed_paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_paths: Vec<String>,
    #[serde(default)]
    pub rubric: Option<RubricVerdict>,
}
