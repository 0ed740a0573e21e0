//! loopgate-executor: takes one increment at a time from `loopgate.exec.<capability>`,
//! materializes the base snapshot, runs an agent (the built-in LLM tool loop confined to the
//! workspace, or an external CLI agent: Claude Code, Codex CLI, OpenCode), freezes the
//! candidate snapshot and publishes the result.

pub mod agent_config;
pub mod agent_episode;
pub mod agent_run;
pub mod agent_templates;
pub mod agent_transcript;
pub mod context_health;
pub mod context_reset;
pub mod episode;
pub mod episode_cancels;
pub mod output_cap;
pub mod process_group;
pub mod settings;
pub mod shell_tool;
pub mod startup;
pub mod tool_dispatch;
pub mod tool_loop;
pub mod worker_loop;
pub mod workspace_tools;
