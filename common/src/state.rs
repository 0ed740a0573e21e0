//! The run record kept in Redis, its states and phases, and the run log entries.
//!
//! - `types`: the run's states, phases and planning stages, deadlines, outgoing messages, round
//!   summaries and usage per role;
//! - [`RunRecord`] (`run_record`): the stored record, its field groups (`record_groups`), its
//!   schema version (`schema`), the state/phase consistency rule (`consistency`) and the
//!   secret its results-stream dedup ids are sealed with (`msg_id_secret`), and the git commit
//!   a run started from (`repo_origin`);
//! - [`Attempt`] (`attempt`): the siblings of a step of several attempts while it runs;
//! - [`LogEntry`] / [`LogEvent`] (`log`): the append-only run log, and each event in one line
//!   for people ([`LogEvent::headline`], `log_headline`).

mod attempt;
mod consistency;
mod log;
mod log_headline;
mod msg_id_secret;
mod record_groups;
mod repo_origin;
mod run_record;
mod schema;
mod types;

pub use attempt::{Attempt, AttemptScore, AttemptStage};
pub use consistency::{phases_allowed, state_agrees_with_phase, InconsistentRecord};
pub use log::{LogEntry, LogEvent};
pub use log_headline::{excerpt, gate_word, short_id, verdicts_text, SNAPSHOT_PREFIX_LEN};
pub use msg_id_secret::MsgIdSecret;
pub use record_groups::{
    Accounting, AuditStanding, AuditedSnapshot, ClauseTries, Deadlines, EpisodeStart, PauseHold,
    Planning, Steering, Streaks, AUDITS_REMEMBERED, FAILURES_REMEMBERED,
};
pub use repo_origin::{is_git_object_id, RepoOrigin, MAX_REF_NAME_CHARS};
pub use run_record::RunRecord;
pub use schema::{RecordError, RUN_RECORD_SCHEMA};
pub use types::{
    ContractSource, Deadline, DeadlineKind, HeldStep, Instruction, Outgoing, Phase, PlanningStage,
    RoleUsage, RoundSummary, RunState, Target,
};
