//! The read routes the operator console uses beyond the run routes: run counts by state
//! (`GET /v1/runs/counts`), the manager's model profiles (`GET /v1/models`), parsing a task
//! file (`POST /v1/tasks/parse`), the diff between two snapshots
//! (`GET /v1/snapshots/{from}/diff/{to}`) and a snapshot's integrity
//! (`GET /v1/snapshots/{id}/integrity`). Any client may use them; the console holds no state.

use std::collections::BTreeMap;

use loopgate_common::task::TaskFile;
use loopgate_protocol::snapshot::PathChange;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/runs/counts`: how many runs are in each state (every state is listed, zero
/// included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunCounts {
    /// State name to count.
    pub counts: BTreeMap<String, u64>,
    /// The sum over every state.
    pub total: u64,
}

/// One model profile the manager is configured with (no key, no URL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ModelInfo {
    /// The profile's name, as a task's `[roles]` names it.
    pub name: String,
    /// `openai` or `anthropic`.
    pub provider: String,
    /// The model the profile asks for.
    pub model: String,
}

/// `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ModelList {
    /// The manager's own model profiles.
    pub models: Vec<ModelInfo>,
    /// Per role, the profile names a task's `[roles]` may give it now: the manager's own
    /// profiles, and what live executor and auditor workers announce on their heartbeats.
    #[serde(default)]
    pub roles: RoleProfiles,
}

/// The profile names each role can be given now, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RoleProfiles {
    /// The manager's own profiles (`workers` is 0).
    pub manager: Vec<ServedProfile>,
    /// What live executor workers announce (model profiles and CLI agents).
    pub executor: Vec<ServedProfile>,
    /// What live auditor workers announce.
    pub auditor: Vec<ServedProfile>,
}

/// One profile name a role can be given (a name only: no key, no URL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ServedProfile {
    pub name: String,
    /// How many live workers of the role announce it (0 in `manager`).
    pub workers: u32,
    /// Whether the manager has a profile of this name too.
    pub manager_profile: bool,
}

/// `POST /v1/tasks/parse`: a task file's TOML text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ParseTaskRequest {
    pub toml: String,
}

/// The parsed (and validated) task, ready for `POST /v1/runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ParsedTask {
    pub task: TaskFile,
}

/// One changed path between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileChange {
    pub path: String,
    /// `added`, `removed` or `modified`.
    pub change: String,
    /// The file's `git diff` text (header, mode lines, hunks or "Binary files ... differ").
    pub diff: String,
}

impl FileChange {
    pub fn change_name(change: &PathChange) -> &'static str {
        match change {
            PathChange::Added { .. } => "added",
            PathChange::Removed { .. } => "removed",
            PathChange::Modified { .. } => "modified",
        }
    }
}

/// `GET /v1/snapshots/{from}/diff/{to}`: every changed path, in path order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotDiff {
    pub from: String,
    pub to: String,
    pub files: Vec<FileChange>,
}

/// A file whose stored bytes do not hash to its manifest's sha256 (or are gone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IntegrityViolation {
    pub path: String,
    pub sha256: String,
    /// `mismatch` (the bytes hash to something else) or `missing`.
    pub kind: String,
    pub detail: String,
}

/// `GET /v1/snapshots/{id}/integrity`: every blob of the snapshot re-hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IntegrityReport {
    pub snapshot: String,
    /// Files checked.
    pub checked: u32,
    /// True when every file's bytes hash to its manifest entry.
    pub intact: bool,
    pub violations: Vec<IntegrityViolation>,
}

/// One budget: how much is used, the limit (`None`: unlimited) and what is left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BudgetLine {
    pub used: u64,
    #[schema(required = true)]
    pub limit: Option<u64>,
    #[schema(required = true)]
    pub left: Option<u64>,
}

impl BudgetLine {
    pub fn of(used: u64, limit: Option<u64>) -> BudgetLine {
        BudgetLine {
            used,
            limit,
            left: limit.map(|l| l.saturating_sub(used)),
        }
    }
}

/// `GET /v1/runs/{id}/budget`: the run's budgets, used and left (rounds of this generation,
/// tokens, cost in micro-dollars, wall-clock seconds of this generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BudgetView {
    pub rounds: BudgetLine,
    pub tokens: BudgetLine,
    pub cost_micros: BudgetLine,
    pub wall_secs: BudgetLine,
}
