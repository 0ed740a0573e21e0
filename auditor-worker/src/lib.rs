//! loopgate-auditor: verifies a frozen candidate snapshot read-only (every blob re-hashed), runs
//! the contract's acceptance checks in a scratch copy, optionally asks a judge model (which can
//! only tighten the verdicts), scores the contract's rubric with that model and publishes a
//! three-state audit report bound to the snapshot. It talks to NATS only; it never reaches Redis.
//!
//! `worker/` (start-up and the consume loop), `audit/` (one audit: verify, check, judge,
//! report), `judge/` (the judge model's opinion and the goal's clauses), `rubric/` (the scored
//! rubric), `config`. What the judge and the rubric share: `judge_context` (what they are
//! handed of an audit, and how they ask the model), `prompt_text` (their prompts' common
//! pieces and templates) and `evidence` (the evidence bucket). Running one acceptance check
//! under the host's sandbox, in its own scratch copy, is `loopgate_checks` (shared with the
//! executor's self-checks).

#![warn(unreachable_pub)]

mod audit;
mod config;
mod evidence;
mod judge;
mod judge_context;
mod prompt_text;
mod rubric;
mod worker;

pub use audit::{AuditError, Auditor, AuditorParts};
pub use config::{load_config, parse_config, AuditorSettings, ConfigError, HostFacts, RawConfig};
pub use loopgate_checks::{
    probe, Sandbox, SandboxError, SandboxMode, SandboxSettings, DEFAULT_CHECK_PATH,
};
pub use worker::delivery::{run_worker, WorkerError, WorkerOptions};
pub use worker::startup::{run_daemon, DaemonError};
