//! The siblings of a step of several attempts (`budget.attempts`), as the record keeps them
//! while the step runs (in `Phase::Executing`): each one's progress, its tokens and, once its
//! checks-only audit came back, its score.

use serde::{Deserialize, Serialize};

use loopgate_protocol::snapshot::SnapshotId;

/// One sibling episode of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1-based: sibling `index` of the step (its request's `attempt`).
    pub index: u32,
    pub stage: AttemptStage,
    /// The executor that announced its start (the latest one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The highest delivery attempt that announced its start (0: not started yet).
    #[serde(default)]
    pub started: u64,
    /// Tokens its episode used (input plus output), once its result came.
    #[serde(default)]
    pub tokens: u64,
    /// Its frozen candidate, once its result came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<SnapshotId>,
    /// The executor's summary, or why the episode failed.
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub claimed_done: bool,
    /// Its candidate's checks-only audit, once it came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<AttemptScore>,
}

impl Attempt {
    /// Sibling `index`, dispatched and not started yet.
    pub fn queued(index: u32) -> Attempt {
        Attempt {
            index,
            stage: AttemptStage::Queued,
            worker: None,
            started: 0,
            tokens: 0,
            candidate: None,
            summary: String::new(),
            claimed_done: false,
            score: None,
        }
    }

    /// Nothing more will come of it: scored, failed or lost.
    pub fn is_settled(&self) -> bool {
        matches!(
            self.stage,
            AttemptStage::Scored | AttemptStage::Failed | AttemptStage::Lost
        )
    }
}

/// Where a sibling stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStage {
    /// Dispatched, waiting for an executor.
    Queued,
    /// An executor announced its start.
    Running,
    /// Its candidate's checks-only audit is out.
    Auditing,
    /// Its candidate's checks-only audit came back.
    Scored,
    /// The episode produced no candidate.
    Failed,
    /// Cancelled before it was scored (another sibling won, or the step's deadline passed).
    Lost,
}

impl AttemptStage {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStage::Queued => "queued",
            AttemptStage::Running => "running",
            AttemptStage::Auditing => "auditing",
            AttemptStage::Scored => "scored",
            AttemptStage::Failed => "failed",
            AttemptStage::Lost => "lost",
        }
    }
}

/// What a sibling's checks-only audit found on its candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptScore {
    /// Blocking criteria with pass evidence on the candidate.
    pub passing: u32,
    /// Blocking criteria of the contract.
    pub blocking: u32,
    /// The candidate broke integrity (a protected path changed, ...): it never wins.
    pub integrity_violation: bool,
    /// Paths the candidate changed from the base (the diff's size, for ties).
    pub changed_paths: u32,
}

impl AttemptScore {
    /// Passes every blocking criterion, clean: the siblings still running are not needed.
    pub fn passes_all(&self) -> bool {
        !self.integrity_violation && self.blocking > 0 && self.passing >= self.blocking
    }
}
