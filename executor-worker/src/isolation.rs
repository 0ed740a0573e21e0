//! How the agent is kept away from the worker: the `[executor]` keys that shape its sandbox
//! (`agent_network`, `agent_hidden_paths`, and the shared `sandbox` / `check_user` / `bwrap`;
//! which host paths it must not see is `loopgate_checks::secret_paths`), and what every episode
//! carries (`AgentIsolationEnv`: the sandbox probed at start-up,
//! `loopgate_checks::AgentSandbox`, and the network each kind of agent gets).

use std::sync::Arc;

use loopgate_checks::AgentSandbox;
pub use loopgate_common::config::AgentNetwork;
use loopgate_protocol::wire::AgentIsolation;

/// Who gets the network, resolved from `agent_network`. Unset: CLI agents do (they call their
/// model API themselves), the built-in `shell` does not (the worker makes the model calls; the
/// audit runs every check without network anyway, so the workspace must build offline, and a
/// prompt-injected command cannot send the workspace or anything else out, nor reach services
/// on the worker's network such as an unauthenticated Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentNetworkPolicy {
    pub shell: bool,
    pub cli_agents: bool,
}

impl AgentNetworkPolicy {
    pub fn from_setting(setting: Option<AgentNetwork>) -> Self {
        match setting {
            None => AgentNetworkPolicy {
                shell: false,
                cli_agents: true,
            },
            Some(AgentNetwork::On) => AgentNetworkPolicy {
                shell: true,
                cli_agents: true,
            },
            Some(AgentNetwork::Off) => AgentNetworkPolicy {
                shell: false,
                cli_agents: false,
            },
        }
    }
}

impl Default for AgentNetworkPolicy {
    fn default() -> Self {
        Self::from_setting(None)
    }
}

/// What every episode gets: the agent sandbox and who may use the network. Its self-checks
/// run in the same sandbox with the `shell`'s network (`SelfCheckEnv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIsolationEnv {
    pub sandbox: Arc<AgentSandbox>,
    pub network: AgentNetworkPolicy,
}

impl AgentIsolationEnv {
    /// Agents run unsandboxed (tests; `sandbox = "off"` is probed like any other mode).
    pub fn unsandboxed(reason: &str) -> Self {
        AgentIsolationEnv {
            sandbox: Arc::new(AgentSandbox::unsandboxed(reason)),
            network: AgentNetworkPolicy::default(),
        }
    }

    /// The record of a built-in tool loop episode (its `shell`).
    pub(crate) fn shell_record(&self) -> AgentIsolation {
        self.sandbox.isolation(self.network.shell)
    }

    /// The record of a CLI agent episode.
    pub(crate) fn cli_agent_record(&self) -> AgentIsolation {
        self.sandbox.isolation(self.network.cli_agents)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn network_policy_table() {
        let cases = [
            (None, false, true),
            (Some(AgentNetwork::On), true, true),
            (Some(AgentNetwork::Off), false, false),
        ];
        for (setting, shell, cli_agents) in cases {
            assert_eq!(
                AgentNetworkPolicy::from_setting(setting),
                AgentNetworkPolicy { shell, cli_agents },
                "{setting:?}"
            );
        }
    }
}
