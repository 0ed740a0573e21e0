//! loopgate-executor: takes one increment at a time from `loopgate.exec.<capability>`,
//! materializes the base snapshot, runs an LLM tool loop confined to the workspace, freezes the
//! candidate snapshot and publishes the result.

pub mod episode;
pub mod output_cap;
pub mod settings;
pub mod shell_tool;
pub mod startup;
pub mod tool_dispatch;
pub mod tool_loop;
pub mod worker_loop;
pub mod workspace_tools;
