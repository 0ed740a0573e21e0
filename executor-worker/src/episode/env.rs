//! What an episode needs from the worker (`EpisodeEnv`) and how it ends (`EpisodeEnd`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use loopgate_models::ChatClient;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::{AgentIsolation, ExecOutcome};
use loopgate_snapshot::{SnapshotStore, WorkspaceCache};

use crate::agents::config::AgentProfile;
use crate::config::ToolLimits;
use crate::isolation::AgentIsolationEnv;
use crate::self_check::runner::SelfCheckEnv;

/// What an episode needs from the worker besides the request.
#[derive(Debug, Clone)]
pub struct EpisodeEnv {
    pub store: SnapshotStore,
    pub work_dir: PathBuf,
    pub tools: ToolLimits,
    /// Clients of the model profiles (the built-in tool loop) by name, built once at start-up.
    pub models: BTreeMap<String, ChatClient>,
    /// CLI agent profiles by name.
    pub agents: BTreeMap<String, AgentProfile>,
    /// How the built-in tool loop's self-checks run here (the auditor's sandbox).
    pub self_check: SelfCheckEnv,
    /// The sandbox the agent runs in (`shell` commands, CLI agents), probed at start-up.
    pub agent: AgentIsolationEnv,
    /// Warm workspaces (`[executor] cache_bytes`): episodes start from a kept tree and
    /// freeze by stat cache; `None`: every episode materializes from scratch.
    pub workspaces: Option<WorkspaceCache>,
    /// Episodes run on overlays (probed at start-up, see `worker/startup.rs`): the workspace is
    /// an overlay over the cache's read-only tree of the base, frozen from its upper layer.
    /// Needs `workspaces` and a sandboxed agent (which never sees the cache); false: copies.
    pub overlays: bool,
}

impl EpisodeEnv {
    /// What the episode for `profile` records about its agent's isolation: a CLI agent's
    /// network setting when `profile` names one, else the built-in `shell`'s.
    pub fn agent_isolation_for(&self, profile: &str) -> AgentIsolation {
        if self.agents.contains_key(profile) {
            self.agent.cli_agent_record()
        } else {
            self.agent.shell_record()
        }
    }
}

/// How an episode ended, from the worker loop's point of view.
#[derive(Debug)]
pub enum EpisodeEnd {
    /// Publish this result.
    Outcome { outcome: ExecOutcome, usage: Usage },
    /// Infrastructure trouble (object store unreachable, local disk): let JetStream redeliver.
    Retry { reason: String },
}

impl EpisodeEnd {
    pub(crate) fn failed(error: impl Into<String>, usage: Usage) -> Self {
        EpisodeEnd::Outcome {
            outcome: ExecOutcome::Failed {
                error: error.into(),
            },
            usage,
        }
    }
}
