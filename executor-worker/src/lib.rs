//! loopgate-executor: takes one increment at a time from `loopgate.exec.<capability>`,
//! materializes the base snapshot, runs an agent (the built-in LLM tool loop confined to the
//! workspace, or an external CLI agent: Claude Code, Codex CLI, OpenCode), freezes the
//! candidate snapshot and publishes the result.
//!
//! `worker/` (start-up and the consume loop), `episode/` (one step: materialize, run, freeze),
//! `tool_loop/` (the model's tool-call loop and its context health), `tools/` (what the model
//! can call), `self_check/` (the step's checks before `finish` is accepted), `agents/` (CLI
//! agents), `isolation` (the agent's sandbox: network, hidden paths), `config` (the resolved
//! settings).

#![warn(unreachable_pub)]

mod agents;
mod config;
mod episode;
mod isolation;
mod observe;
mod prompt;
mod self_check;
mod tool_loop;
mod tools;
mod worker;

pub use agents::config::{AgentProfile, AgentProfileConfig};
pub use config::{ExecutorFile, ExternalInputs, Settings, SettingsError, ToolLimits};
pub use episode::{run_episode, run_episode_transcribed, EpisodeEnd, EpisodeEnv};
pub use isolation::{AgentIsolationEnv, AgentNetwork, AgentNetworkPolicy};
pub use self_check::runner::SelfCheckEnv;
pub use tool_loop::context_health::HealthPolicy;
pub use tool_loop::{run_tool_loop, EpisodePrompt, LoopEnd, LoopLimits};
pub use tools::dispatch::EpisodeTools;
pub use tools::workspace::Workspace;
pub use worker::startup::{prepare, run_workers};
