//! `[executor]` in `executor.toml`, as written (raw, `deny_unknown_fields`). The executor
//! resolves it (`executor-worker/src/config.rs`); `loopgate up` writes it.

use std::path::PathBuf;

use loopgate_protocol::gui::GuiBackend;
use loopgate_protocol::subjects::Capability;
use serde::{Deserialize, Serialize};

use crate::config::sandbox_mode::SandboxMode;

/// `[executor]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSection {
    /// Default `<hostname>-<pid>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// Default `["cli"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<Capability>>,
    /// The gui backends served with `gui`: `browser` (headless Chromium) and/or `desktop`
    /// (Xvfb and AT-SPI); default `["browser"]`. Announced in the capability heartbeat; a
    /// backend whose programs are not installed is not announced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gui_backends: Option<Vec<GuiBackend>>,
    /// Default: the system temp dir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_cap_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_wait_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deliver: Option<i64>,
    /// How long an in-flight episode may run on after SIGTERM before it is nak'd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_secs: Option<u64>,
    /// Self-check isolation, as the auditor's: `auto` (default) | `required` | `off`. Agents
    /// run in bubblewrap unless `off` (then every episode's record says they did not); without
    /// a working bubblewrap the worker refuses to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// User (or `uid:gid`) self-checks run as when the executor runs as root; default `nobody`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_user: Option<String>,
    /// The bubblewrap binary; default `bwrap` on PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<PathBuf>,
    /// Network for the agent: `on` | `off`. Unset: CLI agents get it (their model API), the
    /// built-in `shell` does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_network: Option<AgentNetwork>,
    /// More host paths (files or directories) agents must not see, besides the defaults (the
    /// config file, `/run/secrets`, credentials under the worker's home, key files, the work
    /// dir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_hidden_paths: Option<Vec<PathBuf>>,
    /// How long this worker's capability announcement holds (heartbeat every third of it);
    /// default 15. The manager offers `gui` only while a live worker announces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_ttl_secs: Option<u64>,
    /// Bytes of recent snapshot trees and blobs kept under the work dir for warm materializes
    /// (LRU); 0 turns the cache off. Default 1 GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
    /// Free bytes the work dir's filesystem must keep: below it the worker takes no work
    /// (it stays queued) and `/readyz` says why. Default 64 MiB; 0 turns the check off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir_min_free_bytes: Option<u64>,
    /// Episodes run at once (per capability loop); default 1 (`EPISODES_PER_LOOP`). An
    /// autoscaler's per-pod target on the queue must equal it (see docs/deploy.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
}

/// `[executor] agent_network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentNetwork {
    /// The `shell` tool and CLI agents reach the network the worker reaches.
    On,
    /// Neither does: a private loopback only (`--unshare-net`). CLI agents then cannot reach
    /// their model API unless it listens inside the sandbox.
    Off,
}
