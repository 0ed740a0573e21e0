//! loopgate-checks: the one way acceptance checks run, shared by the auditor (a contract's
//! checks on a frozen candidate) and the executor (self-checks on its live workspace before
//! `finish` is accepted): the host's sandbox, probed once at start-up (`sandbox/`: bubblewrap
//! launch arguments, the start-up probe, the unprivileged check user), one check run as a
//! child process group with a scrubbed environment, a timeout and a bounded output
//! (`run_check`), each check in its own scratch copy (`scratch_copy`, `scratch_check`) with the
//! screenshots `loopgate browse` took in it collected as evidence (`screenshots`); and
//! the sandbox the executor's agents and self-checks run in (`sandbox/agent_launch.rs`, probed
//! at start-up by `sandbox/agent_probe.rs`): the same bubblewrap isolation and hidden paths
//! (`sandbox/confine.rs`), the worker's secrets out of sight (`sandbox/worker_secrets.rs`,
//! which also seals the worker process itself at start-up).
//!
//! Processes run through the shared `loopgate_process::run_child`. No Redis, no
//! snapshot store, no model: what a check runs on is handed in as a directory or a file list.

#![warn(unreachable_pub)]

mod check_base;
mod run_check;
mod sandbox;
mod scratch_check;
mod scratch_copy;
mod screenshots;

pub use check_base::{worth_layering, CheckBase, LAYER_MIN_BYTES, LAYER_MIN_FILES};
pub use run_check::{
    check_path, run_check, verdict_for, with_loopgate_dir, CheckEnd, CheckRun, CheckSpec,
    DEFAULT_CHECK_PATH, EXCERPT_CHARS,
};
pub use sandbox::{
    hidden_paths, is_valid_check_user, probe, probe_agent_sandbox, probe_for, probe_hiding,
    probe_layers, seal_process, secret_paths, AgentLaunch, AgentSandbox, HiddenPath, LaunchPlan,
    OverlayTools, Sandbox, SandboxError, SandboxMode, SandboxSettings, SealError,
};
pub use scratch_check::{run_in_scratch_copy, CopySource, ScratchCheck, ScratchCopyError};
pub use scratch_copy::{copy_files, copy_tree, CopyFile};
pub use screenshots::{CheckScreenshot, MAX_SCREENSHOTS, MAX_SCREENSHOT_BYTES};
