//! Runs: submitting one (`POST /v1/runs`), the run view every run route answers with, the run
//! list, the log and evidence pages, and the bodies of the routes that change a run (answer,
//! resume, instructions, continue).
//!
//! Response types read leniently (a client must keep working against an older or newer
//! manager): every field but `id` and `state` has a default, and fields the CLI does not show
//! read as their default when they have an unexpected shape. The manager fills every field.

use loopgate_common::budget::BudgetFile;
use loopgate_common::gate::GateVerdict;
use loopgate_common::state::{
    gate_word, short_id, Instruction, PlanningStage, RepoOrigin, RoleUsage, RunState,
};
use loopgate_common::task::TaskFile;
use loopgate_protocol::rubric::RubricStanding;
use loopgate_protocol::verdict::{CheckVerdict, Evidence, Verdicts};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::common_schemas::{LogRecord, PhaseName};
use crate::lenient;

/// The public view of a run (`GET /v1/runs/{id}` and every route that changes a run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    pub id: String,
    #[serde(default)]
    #[schema(required = true)]
    pub name: Option<String>,
    pub state: RunState,
    /// `deciding`, `executing`, `auditing`, `waiting_for_answer`, `paused` (a paused run whose
    /// step in flight has finished) or `finished`.
    #[serde(default, deserialize_with = "lenient::phase_name")]
    #[schema(value_type = PhaseName, required = true)]
    pub phase: String,
    #[serde(default)]
    #[schema(required = true)]
    pub generation: u32,
    #[serde(default)]
    #[schema(required = true)]
    pub round: u32,
    #[serde(default)]
    #[schema(value_type = u32, required = true)]
    pub max_rounds: Option<u32>,
    /// Rounds that count against `max_rounds`: this generation's, after planning.
    #[serde(default)]
    #[schema(value_type = u32, required = true)]
    pub counted_rounds: Option<u32>,
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub snapshot: Option<String>,
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub base_snapshot: Option<String>,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub spec_hash: String,
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub goal: Option<String>,
    /// Progress as evidence: `acceptance 3/5 passing on snapshot abc123, rubric 7.9/8.5`.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub progress: Option<String>,
    /// `spec`, `contract` or `approval` while a planned contract is being built.
    #[serde(default)]
    #[schema(value_type = Option<PlanningStage>, required = true)]
    pub planning: Option<String>,
    #[serde(default)]
    #[schema(value_type = Checks, required = true)]
    pub checks: Option<Checks>,
    /// The rubric's latest score, when the contract has a rubric.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub rubric: Option<RubricStanding>,
    #[serde(default)]
    #[schema(required = true)]
    pub gate: Option<GateView>,
    /// The latest audit's verdicts, when that audit was of the current snapshot.
    #[serde(default)]
    #[schema(required = true)]
    pub verdicts: Option<Verdicts>,
    /// Evidence on the current snapshot.
    #[serde(default)]
    #[schema(required = true)]
    pub evidence: Vec<EvidenceView>,
    #[serde(default)]
    #[schema(required = true)]
    pub terminal_reason: Option<String>,
    /// The manager's question while the run waits for an answer.
    #[serde(default)]
    #[schema(required = true)]
    pub question: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub task_state: Option<String>,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub usage: RoleUsage,
    #[serde(default)]
    #[schema(value_type = u64, required = true)]
    pub total_tokens: Option<u64>,
    /// Unix milliseconds.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub created_at: i64,
    /// Unix milliseconds.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub updated_at: i64,
    /// The operator instructions the manager's prompts carry, oldest first (`POST
    /// /v1/runs/{id}/instructions`; older ones are in the log).
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub instructions: Vec<Instruction>,
    /// Unix milliseconds when the run was paused, while it is `paused`.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub paused_at: Option<i64>,
    /// Unix milliseconds since when the step in flight has waited in its work queue, while no
    /// worker has picked it up (a backlog, not a failure: the wait never costs a round).
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub queued_since: Option<i64>,
    /// The git commit the run started from (`loopgate submit --repo`); null for a run
    /// started from an uploaded directory or an empty workspace.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub origin: Option<RepoOrigin>,
    /// While the round's executor episodes run: the latest progress notice of each (turn, the
    /// tool being called, tool calls, tokens, `elapsed_ms` when it was sent, worker); empty
    /// otherwise.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub episode_progress: Vec<loopgate_protocol::wire::EpisodeProgress>,
    /// While the round's audit runs: its latest progress notice (stage, the check running,
    /// n of m, `elapsed_ms` when it was sent, worker); null otherwise.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub audit_progress: Option<loopgate_protocol::wire::AuditProgress>,
    /// The rounds in the one wording every client shows ([`rounds_text`]): `3/5`, or
    /// `7 (3/5 counted)`.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub rounds: String,
    /// Where the run stands, from facts only: its state and phase, the gate and the checks on
    /// the current snapshot ([`standing_text`]); never a model's words (`task_state` is the
    /// manager's note, a claim).
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub standing: String,
    /// The changes the API accepts on this run now, decided by the same rule the routes refuse
    /// with (a route may still refuse a bad body): offer exactly these.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub actions: Vec<RunAction>,
}

/// A change a person can make to a run, by the route that makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunAction {
    /// `POST /v1/runs/{id}/cancel`
    Cancel,
    /// `POST /v1/runs/{id}/answer`
    Answer,
    /// `POST /v1/runs/{id}/approve`
    Approve,
    /// `POST /v1/runs/{id}/resume`
    Resume,
    /// `POST /v1/runs/{id}/instructions`
    Instruct,
    /// `POST /v1/runs/{id}/pause`
    Pause,
    /// `POST /v1/runs/{id}/unpause`
    Unpause,
    /// `POST /v1/runs/{id}/continue`
    Continue,
}

impl RunAction {
    pub const ALL: [RunAction; 8] = [
        RunAction::Cancel,
        RunAction::Answer,
        RunAction::Approve,
        RunAction::Resume,
        RunAction::Instruct,
        RunAction::Pause,
        RunAction::Unpause,
        RunAction::Continue,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunAction::Cancel => "cancel",
            RunAction::Answer => "answer",
            RunAction::Approve => "approve",
            RunAction::Resume => "resume",
            RunAction::Instruct => "instruct",
            RunAction::Pause => "pause",
            RunAction::Unpause => "unpause",
            RunAction::Continue => "continue",
        }
    }
}

/// Where a run stands, in words, from facts only: `completed; gate open on snapshot
/// abc123456789; checks 1/1 passing`, `running (executing); gate closed on snapshot ...:
/// check 'a' fails; checks 0/1 passing`, `queued; no gate yet`.
pub fn standing_text(
    state: RunState,
    phase: &str,
    gate: Option<&GateView>,
    checks: Option<Checks>,
) -> String {
    let mut text = state.as_str().replace('_', " ");
    if !phase.is_empty() && phase != "finished" {
        text.push_str(&format!(" ({})", phase.replace('_', " ")));
    }
    match gate {
        Some(g) => {
            let snapshot = short_id(&g.snapshot);
            text.push_str(&format!(
                "; gate {} on snapshot {snapshot}",
                gate_word(g.passed)
            ));
            if !g.passed && !g.reasons.is_empty() {
                text.push_str(&format!(": {}", g.reasons.join("; ")));
            }
        }
        None => text.push_str("; no gate yet"),
    }
    if let Some(c) = checks.filter(|c| c.total > 0) {
        text.push_str(&format!("; checks {}/{} passing", c.passing, c.total));
    }
    text
}

impl RunView {
    pub fn from_value(value: &serde_json::Value) -> Result<RunView, serde_json::Error> {
        RunView::deserialize(value)
    }

    /// The phase's name (`executing`, `auditing`, ...), if the manager sent one.
    pub fn phase_name(&self) -> Option<&str> {
        Some(self.phase.as_str()).filter(|p| !p.is_empty())
    }
}

/// Blocking criteria with a check that pass on the current snapshot, of all with a check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Checks {
    #[serde(default)]
    #[schema(required = true)]
    pub passing: u32,
    #[serde(default)]
    #[schema(required = true)]
    pub total: u32,
}

/// The completion gate's verdict on a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GateView {
    #[serde(default)]
    #[schema(required = true)]
    pub passed: bool,
    /// The snapshot the gate was evaluated against.
    #[serde(default)]
    #[schema(required = true)]
    pub snapshot: String,
    /// Criteria with a check that pass on `snapshot`.
    #[serde(default)]
    #[schema(required = true)]
    pub passing: u32,
    /// Criteria with a check.
    #[serde(default)]
    #[schema(required = true)]
    pub checked: u32,
    /// Why the gate is closed (empty when it passed).
    #[serde(default)]
    #[schema(required = true)]
    pub reasons: Vec<String>,
    /// `open` (passed) or `closed`: the gate's one word in every client.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub word: String,
}

impl From<&GateVerdict> for GateView {
    fn from(g: &GateVerdict) -> Self {
        GateView {
            passed: g.passed,
            snapshot: g.snapshot.clone(),
            passing: g.passing,
            checked: g.checked,
            reasons: g.reasons.clone(),
            word: gate_word(g.passed).to_string(),
        }
    }
}

/// One check's verdict bound to the snapshot it ran on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EvidenceView {
    /// The snapshot id the check ran on.
    #[serde(default)]
    #[schema(required = true)]
    pub artifact_version: String,
    pub check_id: String,
    /// `pass`, `fail` or `inconclusive`.
    #[schema(value_type = CheckVerdict)]
    pub verdict: String,
    /// Unix milliseconds.
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub produced_at: i64,
    /// sha256 of the full check output (`GET /v1/blobs/{sha256}`).
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub log_digest: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    #[schema(value_type = u64, required = true)]
    pub duration_ms: Option<u64>,
    /// The tail of the output, capped.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub output_excerpt: Option<String>,
    /// Whether the check ran isolated (under the auditor's bubblewrap sandbox); absent when no
    /// check ran for it (a rubric score) or an older auditor wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<bool>,
    /// The check's own screenshots (a browser check's `loopgate browse --screenshot`), each by
    /// digest: `GET /v1/runs/{id}/screenshots/{digest}` gives the PNG (as `image/png`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screenshots: Vec<ScreenshotView>,
}

/// One screenshot a check took, stored in the evidence bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScreenshotView {
    /// sha256 of the PNG (`GET /v1/runs/{id}/screenshots/{sha256}`).
    pub digest: String,
    /// `image/png`.
    pub media_type: String,
    /// Where the check wrote it, relative to its copy of the workspace.
    pub path: String,
    pub size_bytes: u64,
}

/// The wire name of a check verdict.
pub fn check_verdict_name(verdict: CheckVerdict) -> &'static str {
    match verdict {
        CheckVerdict::Pass => "pass",
        CheckVerdict::Fail => "fail",
        CheckVerdict::Inconclusive => "inconclusive",
    }
}

impl From<&Evidence> for EvidenceView {
    fn from(e: &Evidence) -> Self {
        EvidenceView {
            artifact_version: e.artifact_version.clone(),
            check_id: e.check_id.clone(),
            verdict: check_verdict_name(e.verdict).to_string(),
            produced_at: e.produced_at,
            log_digest: e.log_digest.clone(),
            exit_code: e.exit_code,
            duration_ms: Some(e.duration_ms),
            output_excerpt: Some(e.output_excerpt.clone()),
            isolated: e.isolated,
            screenshots: e
                .screenshots
                .iter()
                .map(|s| ScreenshotView {
                    digest: s.digest.clone(),
                    media_type: s.media_type.clone(),
                    path: s.path.clone(),
                    size_bytes: s.size_bytes,
                })
                .collect(),
        }
    }
}

/// `POST /v1/runs`: a task file and, optionally, the starting workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub task: TaskFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceUpload>,
    /// The git commit `workspace` was read from (`loopgate submit --repo`), recorded with the
    /// run so `loopgate apply` can commit the result on top of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RepoOrigin>,
}

/// The starting workspace: every file with its mode and base64 content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceUpload {
    pub files: Vec<UploadedFile>,
}

/// One workspace file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadedFile {
    /// Relative, normalized path inside the workspace: `/`-separated, no empty, `.` or `..`
    /// part, no `\` or NUL.
    #[schema(
        pattern = r"^(?:[^/\\\u0000.][^/\\\u0000]*|\.[^/\\\u0000.][^/\\\u0000]*|\.\.[^/\\\u0000]+)(?:/(?:[^/\\\u0000.][^/\\\u0000]*|\.[^/\\\u0000.][^/\\\u0000]*|\.\.[^/\\\u0000]+))*$"
    )]
    pub path: String,
    /// Unix permission bits (default 420 = 0o644); the snapshot keeps 0o755 when any execute
    /// bit is set, else 0o644.
    #[serde(default = "default_mode")]
    #[schema(maximum = 4294967295_u32)]
    pub mode: u32,
    /// The content, standard base64 (padded, no spare bits set).
    #[schema(
        pattern = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$",
        content_encoding = "base64"
    )]
    pub content_b64: String,
}

/// 0o644.
pub fn default_mode() -> u32 {
    0o644
}

/// `GET /v1/runs` query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only runs in this state.
    #[param(value_type = Option<RunState>)]
    pub state: Option<String>,
    /// Runs to skip, newest first.
    #[serde(default)]
    #[param(maximum = 18446744073709551615_usize)]
    pub offset: usize,
    /// Runs to answer (default 50, at most 500: larger values answer 500).
    #[param(maximum = 18446744073709551615_usize)]
    pub limit: Option<usize>,
    /// Only runs whose id starts with this (hex digits and dashes, case-insensitive): how a
    /// client resolves a short id (`loopgate status 0193a2b4-c5d`). With `state`, both apply.
    #[param(pattern = r"^[0-9A-Fa-f-]{1,36}$", max_length = 36, min_length = 1)]
    pub id_prefix: Option<String>,
}

/// The pattern of `ListQuery::id_prefix`.
pub fn is_id_prefix(prefix: &str) -> bool {
    (1..=36).contains(&prefix.len()) && prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// `GET /v1/runs`: runs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunList {
    pub limit: usize,
    pub offset: usize,
    pub runs: Vec<RunView>,
    /// Whether runs exist past this page (ask again with `offset = next_offset`).
    #[serde(default)]
    #[schema(required = true)]
    pub has_more: bool,
    /// The `offset` of the next page, when `has_more`.
    #[serde(default)]
    #[schema(value_type = Option<usize>, required = true)]
    pub next_offset: Option<usize>,
}

/// A run's rounds in the one wording the CLI, the API (`RunView::rounds`) and the console use:
/// `3/5` (rounds counted against `max_rounds` of it), or `7 (3/5 counted)` when the run's round
/// number (every round of every generation, planning too: what log entries are tagged with)
/// differs from the rounds counted.
pub fn rounds_text(round: u32, counted: Option<u32>, max: Option<u32>) -> String {
    match (max, counted) {
        (Some(max), Some(counted)) if counted != round => {
            format!("{round} ({counted}/{max} counted)")
        }
        (Some(max), _) => format!("{round}/{max}"),
        (None, _) => round.to_string(),
    }
}

/// How many characters of a run id the CLI and the console show, and the shortest prefix they
/// suggest: `0193a2b4-c5d` (a UUIDv7's first 11 hex digits: its creation time to 16 ms).
pub const SHORT_ID_LEN: usize = 12;

/// The id each of `ids` is shown by in a list: its first [`SHORT_ID_LEN`] characters, longer
/// where that prefix is shared with another id of the list (so every shown id resolves).
pub fn short_ids(ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let mut len = SHORT_ID_LEN.min(id.len());
            while len < id.len()
                && ids
                    .iter()
                    .any(|other| other != id && other.get(..len) == id.get(..len))
            {
                len += 1;
            }
            id.get(..len).unwrap_or(id).to_string()
        })
        .collect()
}

/// The key of the one-line headline the manager adds to every log entry it serves (`/log` and
/// the `log` events of `/events`): `LogEvent::headline` in `loopgate-common`.
pub const LOG_HEADLINE_KEY: &str = "headline";

/// `GET /v1/runs/{id}/log`: the append-only run log, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LogPage {
    /// Each entry as stored (`LogEntry` in `loopgate-common`) plus its stream `id` and its
    /// `headline`.
    #[schema(value_type = Vec<Option<LogRecord>>)]
    pub entries: Vec<serde_json::Value>,
}

/// `GET /v1/runs/{id}/evidence`: every evidence record of the run, each bound to a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EvidenceList {
    /// Records as stored (`Evidence` in `loopgate-common`).
    #[schema(value_type = Vec<EvidenceView>)]
    pub evidence: Vec<serde_json::Value>,
}

/// One Server-Sent Event of `GET /v1/runs/{id}/events` (describes the stream; never built).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct RunStreamEvent {
    event: RunStreamEventKind,
    /// The log entry's stream id, on `log` events (send it back as `Last-Event-ID`).
    id: Option<String>,
    /// JSON: a log entry (as in [`LogPage`]) on `log`, the final [`RunView`] on `end`.
    data: String,
}

/// `log` for each log entry, `end` once, with the final run view, when the run is terminal.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum RunStreamEventKind {
    Log,
    End,
}

/// `POST /v1/runs/{id}/answer`: the answer to the manager's question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    /// Must not be blank.
    #[schema(
        pattern = r"[^\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub text: String,
}

/// `POST /v1/runs/{id}/instructions`: an operator instruction for the manager's next prompts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstructRequest {
    /// Must not be blank; at most 4000 characters (after trimming).
    #[schema(
        pattern = r"[^\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]",
        max_length = 4000
    )]
    pub text: String,
}

/// `POST /v1/runs/{id}/continue`: the new goal and contract of a completed run's next
/// generation. At least one of `goal` and `task`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueRequest {
    /// The new goal. Alone, it keeps the run's task otherwise (acceptance checks, roles,
    /// budget); with `task`, it replaces the task file's goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        pattern = r"[^\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]",
        max_length = 20000
    )]
    pub goal: Option<String>,
    /// A whole new task file (goal, acceptance, roles, budget, ...), validated as at submit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskFile>,
    /// Budget keys to change over the new task's budget (the task file's `[budget]` keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetFile>,
}

/// `POST /v1/runs/{id}/resume`: budget changes for the new generation (optional body).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// Budget keys to change (the task file's `[budget]` keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetFile>,
}

#[cfg(test)]
#[path = "runs_tests.rs"]
mod tests;
