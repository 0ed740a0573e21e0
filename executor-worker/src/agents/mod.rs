//! CLI agents (Claude Code, Codex CLI, OpenCode) as executors: their profiles (`config`), the
//! command lines and prompt they get (`templates`), running one under the episode's budget
//! (`run`) and reading its JSON-lines transcript (`transcript`).

pub(crate) mod config;
pub(crate) mod run;
pub(crate) mod templates;
pub(crate) mod transcript;
