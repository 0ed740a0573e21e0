//! loopgate-auditor: verifies a frozen candidate snapshot read-only (every blob re-hashed), runs
//! the contract's acceptance checks in a scratch copy, optionally asks a judge model (which can
//! only tighten the verdicts), scores the contract's rubric with that model and publishes a
//! three-state audit report bound to the snapshot. It talks to NATS only; it never reaches Redis.

pub mod audit;
mod audit_checks;
pub mod audit_rules;
pub mod checks;
pub mod config;
pub mod daemon;
pub mod episode_control;
pub mod judge;
pub mod judge_prompt;
pub mod output_cap;
pub mod rubric_judge;
pub mod rubric_prompt;
pub mod rubric_verdict;
pub mod sandbox;
pub mod scratch_copy;
pub mod worker;

pub use audit::{AuditError, Auditor};
pub use config::{AuditorSettings, ConfigError, RawConfig};
pub use daemon::{run_daemon, DaemonError};
pub use worker::{run_worker, WorkerError, WorkerOptions};
