//! Wire messages between manager, executors and auditors. Every message is a versioned JSON
//! envelope `{"v": 1, "kind": "...", ...}`; unknown versions are rejected with a clear error.
//! Large content (workspaces, logs, transcripts) never rides in a message: messages carry digests.

mod agent_isolation;
mod exec_feedback;

use serde::{Deserialize, Serialize};

pub use self::agent_isolation::AgentIsolation;
pub use self::exec_feedback::{ExecFeedback, FailingCheck, FEEDBACK_EXCERPT_BYTES};
use crate::contract::Contract;
use crate::rubric::RubricVerdict;
use crate::snapshot::SnapshotId;
use crate::subjects::Capability;
use crate::usage::Usage;
use crate::verdict::{Evidence, Verdicts};

pub const WIRE_VERSION: u32 = 1;
/// `self_checks` of an exec request that does not name it, and a task's default.
pub const DEFAULT_SELF_CHECKS: u32 = 2;

fn default_self_checks() -> u32 {
    DEFAULT_SELF_CHECKS
}

/// The attempt index of a message that names none: the first (and, with `attempts = 1`,
/// only) sibling of its step.
pub const FIRST_ATTEMPT: u32 = 1;

fn first_attempt() -> u32 {
    FIRST_ATTEMPT
}

fn is_first_attempt(attempt: &u32) -> bool {
    *attempt == FIRST_ATTEMPT
}
/// Messages larger than this are refused on decode (they should carry digests instead).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// One bounded step chosen by the manager. The executor sees this and the contract, never the
/// manager's reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Increment {
    pub objective: String,
    #[serde(default)]
    pub instructions: String,
    /// Criterion ids this step should make pass.
    #[serde(default)]
    pub acceptance_checks: Vec<String>,
    /// Paths the step may change (`dir/` prefixes or exact files); empty = whole workspace.
    #[serde(default)]
    pub write_scope: Vec<String>,
    /// The goal's own words this step serves, verbatim (the executor reads them above the
    /// manager's wording).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goal_clauses: Vec<String>,
}

/// What an executor episode is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeKind {
    /// A bounded step of the work (the normal case).
    #[default]
    Step,
    /// Planning: write `spec.md` (product context and high-level design), no code or tests.
    Plan,
    /// Planning: turn `spec.md` into a proposed contract in `contract.toml`.
    Propose,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    pub capability: Capability,
    pub contract: Contract,
    pub increment: Increment,
    pub base_snapshot: SnapshotId,
    /// Model profile name (resolved by the worker's own config).
    pub executor_profile: String,
    pub episode_secs: u64,
    pub max_steps: u32,
    /// Unix millis. A FIRST delivery picked up after this is stale (the manager has already
    /// given up on it and re-planned): workers drop it. Redeliveries (attempt > 1) are served.
    #[serde(default)]
    pub start_by_ms: Option<i64>,
    /// The task's extra ignore patterns: never frozen into the candidate.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Planning episodes get their own instructions.
    #[serde(default)]
    pub episode: EpisodeKind,
    /// What the last audit found on the base snapshot.
    #[serde(default, skip_serializing_if = "ExecFeedback::is_empty")]
    pub feedback: ExecFeedback,
    /// Times the episode's `finish` runs the step's blocking checks on the live workspace
    /// first (the task's `budget.self_checks`; 0: never). Feedback for the agent, never evidence.
    #[serde(default = "default_self_checks")]
    pub self_checks: u32,
    /// The task's `[gui]`: gui episodes start its `serve` command and open its `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gui: Option<crate::gui::GuiSpec>,
    /// Tokens the episode may spend: what was left of the run's `max_total_tokens` when the
    /// step was dispatched, shared among the step's siblings. The built-in tool loop ends the
    /// episode (its workspace frozen as usual) once its usage reaches it, so a run spends at
    /// most its budget and one model turn. Absent: no token limit (CLI agents ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Which sibling of the step this is (1-based; the task's `budget.attempts` siblings run
    /// from the same base, and the executor samples each apart). Absent: the first, so a step
    /// of one attempt is the message it was before siblings existed.
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecOutcome {
    /// The episode ran and the workspace was frozen.
    Frozen {
        candidate: SnapshotId,
        summary: String,
        /// Did the agent itself claim it was done (called `finish`)?
        claimed_done: bool,
        steps: u32,
        tool_calls: u32,
        files_changed: u32,
        /// Times a self-check refused the agent's `finish` (a failing blocking check).
        #[serde(default)]
        self_check_refusals: u32,
    },
    /// The episode could not produce a candidate (model unreachable, bad base snapshot, ...).
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecResult {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    /// JetStream delivery attempt of the request this answers (fencing).
    pub delivery_attempt: u64,
    pub worker: String,
    pub outcome: ExecOutcome,
    pub usage: Usage,
    pub duration_ms: u64,
    /// How the episode's agent was isolated from the executor (absent from older executors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_isolation: Option<AgentIsolation>,
    /// The request's `attempt` (absent: the first).
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
    /// The episode's transcript (`crate::transcript::Transcript` as JSON) in the evidence
    /// bucket, by sha256 digest (absent from older executors, or when it could not be stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditPurpose {
    /// Audit of a round's candidate.
    Round,
    /// Final audit before completion, after the manager said `done`.
    Final,
    /// Audit of a planning episode (spec or contract proposal): changed paths and write scope
    /// only, no checks or judge; the report carries `contract.toml` as found in the snapshot.
    Plan,
}

impl AuditPurpose {
    /// `round`, `final` or `plan`: the word message ids and logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditPurpose::Round => "round",
            AuditPurpose::Final => "final",
            AuditPurpose::Plan => "plan",
        }
    }
}

/// What the auditor receives. It has no field for manager reasoning by construction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRequest {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    pub purpose: AuditPurpose,
    pub contract: Contract,
    /// The increment's objective (what was asked of the executor), not why.
    pub objective: String,
    pub write_scope: Vec<String>,
    pub base_snapshot: SnapshotId,
    pub candidate_snapshot: SnapshotId,
    pub auditor_profile: Option<String>,
    pub episode_secs: u64,
    /// The task's `[gui]`: browser checks get `LOOPGATE_GUI_URL` / `LOOPGATE_GUI_SERVE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gui: Option<crate::gui::GuiSpec>,
    /// A passing audit of this request completes the run: every final audit, and a round
    /// audit of a task with `complete_on_gate`. The auditor copies it into its report and
    /// signs it (`completes_run` in the claims), so a certificate shows that its report was
    /// the completing audit. Absent (false) from older managers.
    #[serde(default, skip_serializing_if = "is_false")]
    pub completes_run: bool,
    /// A clause judge's `met` stands without a quote of the evidence it was shown (the task's
    /// `judge_quotes = false`). Absent (false) by default and from older managers: a `met`
    /// must quote a line of a file or of a command's output the judge was shown.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unquoted_met: bool,
    /// Audit a sibling candidate of a step of several attempts: the checks only (no judge,
    /// no rubric), so the manager can pick the winner by evidence; the winner then gets the
    /// round's full audit. The auditor copies it into its report and signs it. Absent (false)
    /// by default and from older managers.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mechanical_only: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    pub purpose: AuditPurpose,
    pub delivery_attempt: u64,
    pub worker: String,
    /// The snapshot the verdicts and evidence are bound to.
    pub snapshot: SnapshotId,
    pub verdicts: Verdicts,
    pub evidence: Vec<Evidence>,
    pub gaps: Vec<String>,
    /// Acceptance-constraint backcheck lines (one per criterion).
    pub backcheck: Vec<String>,
    /// Paths changed base -> candidate.
    pub changed_paths: Vec<String>,
    /// Of `changed_paths`, those the candidate added (absent from older auditors: empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_paths: Vec<String>,
    /// The LLM judge's short opinion, when one ran.
    pub judgment: Option<String>,
    pub usage: Usage,
    pub duration_ms: u64,
    /// Plan audits: the text of `contract.toml` in the audited snapshot, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
    /// The rubric's score on the snapshot, when the contract has a rubric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<RubricVerdict>,
    /// The spec hash of the contract the audit was made against (reports about any other
    /// contract, or about none, are refused).
    #[serde(default)]
    pub spec_hash: String,
    /// The request's `completes_run`, signed: a passing report with it (or a passing final
    /// report) is what completed the run. Absent (false) from older auditors.
    #[serde(default, skip_serializing_if = "is_false")]
    pub completes_run: bool,
    /// The request's `mechanical_only`, signed: a sibling's checks-only audit, which scores a
    /// candidate and never completes anything. Absent (false) from older auditors.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mechanical_only: bool,
    /// Id of the auditor pool key that signed the report (`report_signing::key_id`); empty
    /// when unsigned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key_id: String,
    /// Ed25519 signature (128 hex digits) of the report's canonical claims
    /// (`report_claims::ReportClaims`); empty when unsigned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeRole {
    Executor,
    Auditor,
}

/// A worker picked an episode up (published before it starts working, on
/// `result.started.exec.<run>` or `result.started.audit.<run>`, as its role).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeStarted {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    pub role: EpisodeRole,
    pub delivery_attempt: u64,
    pub worker: String,
    /// The sibling of the step (the request's `attempt`; absent: the first).
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
}

/// A running executor episode's progress (on `result.progress.exec.<run>`), throttled by the
/// worker to at most one a second: the model turn it is in, the tool being called, the tokens
/// and tool calls so far and the time since the episode started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EpisodeProgress {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    pub delivery_attempt: u64,
    pub worker: String,
    /// The sibling of the step (the request's `attempt`; absent: the first).
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
    /// Model turns so far (1 while the first reply is awaited or run).
    #[serde(default)]
    pub turn: u32,
    /// The tool being called, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default)]
    pub tool_calls: u32,
    /// Tokens spent so far, input plus output.
    #[serde(default)]
    pub tokens: u64,
    /// Milliseconds since the episode started.
    #[serde(default)]
    pub elapsed_ms: u64,
}

/// What a running audit is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditStage {
    /// Running the contract's checks (`check` is the one running).
    Checks,
    /// Asking the judge (the goal's clauses, its opinion).
    Judge,
    /// Scoring the rubric.
    Rubric,
}

impl AuditStage {
    /// `checks`, `judge` or `rubric`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditStage::Checks => "checks",
            AuditStage::Judge => "judge",
            AuditStage::Rubric => "rubric",
        }
    }
}

/// A running audit's progress (on `result.progress.audit.<run>`), throttled by the auditor to
/// at most one a second: its stage, the check running (n of m) and the time since the audit
/// started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditProgress {
    pub run_id: String,
    pub generation: u32,
    pub round: u32,
    pub purpose: AuditPurpose,
    pub delivery_attempt: u64,
    pub worker: String,
    pub stage: AuditStage,
    /// The id of the check running, while one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The ordinal of the check running, or of the last one run (1-based; 0: none yet).
    #[serde(default)]
    pub check_index: u32,
    /// Checks this audit runs.
    #[serde(default)]
    pub checks_total: u32,
    /// Milliseconds since the audit started.
    #[serde(default)]
    pub elapsed_ms: u64,
}

/// Control notice on `control.<run>` (core NATS): stop in-flight episodes of this run whose
/// generation is at most `generation`, or only the one of `dispatch` (kill their process
/// groups); their results are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelEpisodes {
    pub run_id: String,
    pub generation: u32,
    pub reason: String,
    /// Only the episode of this dispatched request (its `Nats-Msg-Id`, e.g.
    /// `run:1:3:exec`): a missed deadline stops that step, and the run's later steps in the same
    /// generation go on. Absent: every episode of the generation (cancel, terminal states).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<String>,
}

/// A request for any manager replica to take the run's next decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecideRequest {
    pub run_id: String,
    pub generation: u32,
    pub seq: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    ExecRequest(ExecRequest),
    ExecResult(ExecResult),
    AuditRequest(AuditRequest),
    AuditReport(AuditReport),
    DecideRequest(DecideRequest),
    EpisodeStarted(EpisodeStarted),
    CancelEpisodes(CancelEpisodes),
    EpisodeProgress(EpisodeProgress),
    AuditProgress(AuditProgress),
}

impl Message {
    pub fn kind(&self) -> &'static str {
        match self {
            Message::ExecRequest(_) => "exec_request",
            Message::ExecResult(_) => "exec_result",
            Message::AuditRequest(_) => "audit_request",
            Message::AuditReport(_) => "audit_report",
            Message::DecideRequest(_) => "decide_request",
            Message::EpisodeStarted(_) => "episode_started",
            Message::CancelEpisodes(_) => "cancel_episodes",
            Message::EpisodeProgress(_) => "episode_progress",
            Message::AuditProgress(_) => "audit_progress",
        }
    }
    pub fn run_id(&self) -> &str {
        match self {
            Message::ExecRequest(m) => &m.run_id,
            Message::ExecResult(m) => &m.run_id,
            Message::AuditRequest(m) => &m.run_id,
            Message::AuditReport(m) => &m.run_id,
            Message::DecideRequest(m) => &m.run_id,
            Message::EpisodeStarted(m) => &m.run_id,
            Message::CancelEpisodes(m) => &m.run_id,
            Message::EpisodeProgress(m) => &m.run_id,
            Message::AuditProgress(m) => &m.run_id,
        }
    }
}

/// The versioned envelope around a message, for publishing with any JSON serializer:
/// `bus.publish_json(subject, &Envelope::new(&msg), ...)`. Same bytes as [`encode`].
#[derive(Debug, Serialize)]
pub struct Envelope<'a> {
    v: u32,
    #[serde(flatten)]
    message: &'a Message,
}

impl<'a> Envelope<'a> {
    pub fn new(message: &'a Message) -> Self {
        Envelope {
            v: WIRE_VERSION,
            message,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("message is {0} bytes, over the {MAX_MESSAGE_BYTES} byte limit")]
    TooLarge(usize),
    #[error("message is not JSON: {0}")]
    NotJson(String),
    #[error("message has no numeric envelope version `v`")]
    MissingVersion,
    #[error("message envelope version {got} is not supported (this build speaks v{WIRE_VERSION})")]
    UnsupportedVersion { got: u64 },
    #[error("malformed {kind} message: {detail}")]
    Malformed { kind: String, detail: String },
}

pub fn encode(message: &Message) -> Vec<u8> {
    serde_json::to_vec(&Envelope::new(message)).unwrap_or_default()
}

pub fn decode(bytes: &[u8]) -> Result<Message, WireError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge(bytes.len()));
    }
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| WireError::NotJson(e.to_string()))?;
    let version = value
        .get("v")
        .and_then(|v| v.as_u64())
        .ok_or(WireError::MissingVersion)?;
    if version != u64::from(WIRE_VERSION) {
        return Err(WireError::UnsupportedVersion { got: version });
    }
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("(no kind)")
        .to_string();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("v");
    }
    serde_json::from_value(value).map_err(|e| WireError::Malformed {
        kind,
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_envelope_shape() {
        let m = Message::DecideRequest(DecideRequest {
            run_id: "r".into(),
            generation: 1,
            seq: 2,
        });
        let bytes = encode(&m);
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["v"], 1);
        assert_eq!(v["kind"], "decide_request");
        assert_eq!(decode(&bytes).unwrap(), m);
    }

    #[test]
    fn decode_errors_by_kind() {
        let cases: Vec<(Vec<u8>, fn(&WireError) -> bool)> = vec![
            (b"not json".to_vec(), |e| matches!(e, WireError::NotJson(_))),
            (br#"{"kind":"decide_request"}"#.to_vec(), |e| {
                matches!(e, WireError::MissingVersion)
            }),
            (
                br#"{"v":2,"kind":"decide_request","run_id":"r","generation":1,"seq":1}"#.to_vec(),
                |e| matches!(e, WireError::UnsupportedVersion { got: 2 }),
            ),
            (br#"{"v":1,"kind":"nope"}"#.to_vec(), |e| {
                matches!(e, WireError::Malformed { .. })
            }),
            (
                br#"{"v":1,"kind":"decide_request","run_id":"r"}"#.to_vec(),
                |e| matches!(e, WireError::Malformed { .. }),
            ),
            (vec![b' '; MAX_MESSAGE_BYTES + 1], |e| {
                matches!(e, WireError::TooLarge(_))
            }),
        ];
        for (bytes, check) in cases {
            let err = decode(&bytes).unwrap_err();
            assert!(check(&err), "{err}");
        }
    }

    /// A message of the first attempt serializes without the field, as before siblings, and
    /// one without it reads as the first attempt.
    #[test]
    fn first_attempt_is_absent_on_the_wire() {
        let started = |attempt| EpisodeStarted {
            run_id: "r".into(),
            generation: 1,
            round: 2,
            role: EpisodeRole::Executor,
            delivery_attempt: 1,
            worker: "w".into(),
            attempt,
        };
        let one = serde_json::to_value(started(1)).unwrap();
        assert!(one.get("attempt").is_none(), "{one}");
        let back: EpisodeStarted = serde_json::from_value(one).unwrap();
        assert_eq!(back.attempt, FIRST_ATTEMPT);
        let three = serde_json::to_value(started(3)).unwrap();
        assert_eq!(three["attempt"], 3);
    }

    #[test]
    fn audit_request_refuses_extra_fields() {
        // An audit request cannot smuggle manager reasoning: unknown fields are refused.
        let raw = br#"{"v":1,"kind":"audit_request","run_id":"r","generation":1,"round":1,
            "purpose":"round","contract":{"goal":"g","criteria":[],"protected_paths":[],"spec_hash":"h"},
            "objective":"o","write_scope":[],"base_snapshot":"b","candidate_snapshot":"c",
            "auditor_profile":null,"episode_secs":5,"manager_reasoning":"secret"}"#;
        assert!(matches!(decode(raw), Err(WireError::Malformed { .. })));
    }
}
