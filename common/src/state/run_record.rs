//! The run record kept in Redis (`lg:run:<id>`, field `record`).

use serde::{Deserialize, Serialize};

use super::msg_id_secret::MsgIdSecret;
use super::record_groups::{Accounting, AuditStanding, Deadlines, Planning, Steering, Streaks};
use super::schema::{self, RecordError};
use super::{Outgoing, Phase, PlanningStage, RepoOrigin, RoundSummary, RunState};
use crate::task::Task;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::RubricStanding;
use loopgate_protocol::snapshot::SnapshotId;

/// One run, as stored. Related fields live in groups ([`Streaks`], [`Planning`],
/// [`Accounting`], [`Deadlines`], [`AuditStanding`]) flattened into the record, so the stored
/// JSON has the same flat keys as before the groups existed; `schema` versions that layout
/// (see [`RUN_RECORD_SCHEMA`](super::RUN_RECORD_SCHEMA)). Decode stored records with
/// [`RunRecord::from_json`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The layout version of the stored record; a record stored without it is schema 1.
    #[serde(default = "schema::unversioned", deserialize_with = "schema::known")]
    pub schema: u32,
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
    /// Failures in a row (`invalid_streak`, `failed_streak`, `done_refusals`).
    #[serde(flatten)]
    pub streaks: Streaks,
    /// Sequence number of the latest decision request.
    pub decide_seq: u32,
    /// Budget used (`usage`, `generation_start_round`).
    #[serde(flatten)]
    pub accounting: Accounting,
    pub created_at: i64,
    pub updated_at: i64,
    pub terminal_reason: Option<String>,
    /// What the audits established (`evidence`, `last_verdicts`, `last_gate`,
    /// `last_good_snapshot`, `rubric`).
    #[serde(flatten)]
    pub audit: AuditStanding,
    /// Messages published by the last transition, re-published if that event is redelivered.
    pub outbox: Vec<Outgoing>,
    /// Key of the last applied event (see `RunEvent::key`).
    pub last_event: Option<String>,
    /// The phase and wall-clock deadlines (`deadline`, `wall_deadline_ms`).
    #[serde(flatten)]
    pub deadlines: Deadlines,
    /// W3C `traceparent` of the run's root span: every later span of the run, in any process,
    /// joins this trace.
    #[serde(default)]
    pub trace_parent: Option<String>,
    /// Rungs climbed on the executor's profile ladder (`roles.executor_escalation`).
    #[serde(default)]
    pub escalation_level: u32,
    /// Contract planning of a `plan = true` run (`planning`, `proposed_contract`).
    #[serde(flatten)]
    pub planning: Planning,
    /// Operator steering (`instructions`, `paused`).
    #[serde(flatten)]
    pub steering: Steering,
    /// What the manager's results-stream dedup ids are sealed with (never sent to a worker,
    /// never in an API answer); empty in records stored before it existed.
    #[serde(default, skip_serializing_if = "MsgIdSecret::is_empty")]
    pub msg_id_secret: MsgIdSecret,
    /// The git commit the starting workspace came from (`loopgate submit --repo`); absent
    /// for an uploaded directory and in records stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RepoOrigin>,
    /// The latest progress notice of each executor episode of the round in flight (absent:
    /// none yet, and in records stored before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episode_progress: Vec<loopgate_protocol::wire::EpisodeProgress>,
    /// The latest progress notice of the audit in flight (absent: none yet, and in records
    /// stored before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_progress: Option<loopgate_protocol::wire::AuditProgress>,
}

impl RunRecord {
    /// Decode a stored record (`lg:run:<id>` field `record`) of any schema this code reads.
    /// The schema is read first, so a newer record is reported as newer even when its other
    /// keys would not decode.
    pub fn from_json(json: &str) -> Result<RunRecord, RecordError> {
        let schema = schema::probe(json)?;
        serde_json::from_str(json).map_err(|source| RecordError::Invalid { schema, source })
    }

    /// The earliest deadline that still matters, for the `lg:deadlines` index.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        if self.state.is_terminal() {
            return None;
        }
        match (
            self.deadlines.phase.map(|d| d.at_ms),
            self.deadlines.wall_ms,
        ) {
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
        match self.planning.stage {
            Some(PlanningStage::Spec) => {
                return "planning: the planner is writing spec.md (no contract yet)".to_string()
            }
            Some(PlanningStage::Contract) => {
                return "planning: the proposer is turning spec.md into the contract".to_string()
            }
            Some(PlanningStage::Approval) => {
                let (hash, n) = self
                    .planning
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
            .audit
            .last_gate
            .as_ref()
            .is_some_and(|g| g.snapshot == self.snapshot);
        let mut line = format!("acceptance {passing}/{checked} passing on snapshot {snapshot}");
        if !audited {
            line.push_str(" (not audited yet)");
        }
        if let Some(rubric) = &self.contract.rubric {
            match self
                .audit
                .rubric
                .as_ref()
                .filter(|r| r.snapshot == self.snapshot)
            {
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
        self.round
            .saturating_sub(self.accounting.generation_start_round)
    }

    /// Passing checks on the current snapshot, as "k/n".
    pub fn checks_passing(&self) -> (u32, u32) {
        self.audit
            .last_gate
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
