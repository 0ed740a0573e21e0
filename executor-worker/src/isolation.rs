//! How the agent is kept away from the worker: the `[executor]` keys that shape its sandbox
//! (`agent_network`, `agent_hidden_paths`, and the shared `sandbox` / `check_user` / `bwrap`),
//! which host paths it must not see, and what every episode carries (`AgentIsolationEnv`: the
//! sandbox probed at start-up, `loopgate_checks::AgentSandbox`, and the network each kind of
//! agent gets).

use std::path::{Path, PathBuf};
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

/// Credential files and directories under a user's home that agents never need (CLI agents
/// get a home of their own): loopgate's cache, SSH, cloud, container, Kubernetes, package
/// registry and git credentials, and the CLI agents' own logins.
const HOME_CREDENTIALS: &[&str] = &[
    ".cache/loopgate",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".claude",
    ".claude.json",
    ".codex",
    ".local/share/opencode",
    ".config/opencode",
];

/// Where container platforms mount secrets.
const SECRET_MOUNTS: &[&str] = &["/run/secrets", "/var/run/secrets"];

/// Everything the worker knows about that the agent must not see, before checking what
/// exists (`loopgate_checks::hidden_paths` does that at start-up): the worker's config file,
/// the platform's secret mounts, credentials under the worker's home, the model profiles'
/// key files, and the config's own `agent_hidden_paths`. The work dir is always hidden too
/// (by the probe).
pub(crate) fn hidden_candidates(
    config_path: Option<&Path>,
    home: Option<&str>,
    key_files: &[PathBuf],
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    paths.extend(config_path.map(Path::to_path_buf));
    paths.extend(SECRET_MOUNTS.iter().map(PathBuf::from));
    if let Some(home) = home.map(str::trim).filter(|h| !h.is_empty() && *h != "/") {
        paths.extend(HOME_CREDENTIALS.iter().map(|rel| Path::new(home).join(rel)));
    }
    paths.extend(key_files.iter().cloned());
    paths.extend(extra.iter().cloned());
    paths
}

/// What every episode gets: the agent sandbox and who may use the network.
#[derive(Debug, Clone)]
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

    #[test]
    fn hidden_candidates_table() {
        let all = hidden_candidates(
            Some(Path::new("/etc/loopgate/executor.toml")),
            Some("/home/w"),
            &[PathBuf::from("/keys/openai")],
            &[PathBuf::from(".loopgate")],
        );
        for want in [
            "/etc/loopgate/executor.toml",
            "/run/secrets",
            "/var/run/secrets",
            "/home/w/.cache/loopgate",
            "/home/w/.ssh",
            "/keys/openai",
            ".loopgate",
        ] {
            assert!(
                all.contains(&PathBuf::from(want)),
                "missing {want}: {all:?}"
            );
        }
        // A home of `/` (or none) adds no home paths: `/.ssh` would be noise, `/` fatal.
        for home in [None, Some("/"), Some(" ")] {
            let paths = hidden_candidates(None, home, &[], &[]);
            assert_eq!(
                paths,
                vec![
                    PathBuf::from("/run/secrets"),
                    PathBuf::from("/var/run/secrets")
                ]
            );
        }
    }
}
