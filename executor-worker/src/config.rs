//! `executor.toml` as written (raw, `deny_unknown_fields`) and its resolution, together with the
//! environment and flags read once in `main`, into validated [`Settings`].
//!
//! `[executor]` takes the auditor's check keys (`sandbox`, `check_user`, `bwrap`; same
//! meaning, same defaults): self-checks run under the sandbox they describe, probed at start-up.
//! The same keys put the agent (`shell` commands, CLI agents) in bubblewrap, with
//! `agent_network` and `agent_hidden_paths` (see `isolation.rs`); without bubblewrap the worker
//! refuses to start unless `sandbox = "off"`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use loopgate_checks::{is_valid_check_user, SandboxSettings};
use loopgate_common::config::{
    ConfigError, ExecutorSection, NatsSection, NatsSettings, SnapshotLimits, SnapshotSection,
};
use loopgate_models::{resolve_profiles, ModelConfigError, ModelProfile, ModelProfiles};
use loopgate_protocol::subjects::Capability;
use loopgate_transport::runtime::EPISODES_PER_LOOP;
use serde::Deserialize;

use crate::agents::config::{AgentProfile, AgentProfileConfig};
use crate::isolation::AgentNetworkPolicy;

pub(crate) const DEFAULT_SHELL_TIMEOUT_SECS: u64 = 120;
pub(crate) const DEFAULT_OUTPUT_CAP_BYTES: usize = 16 * 1024;
pub(crate) const DEFAULT_ACK_WAIT_SECS: u64 = 30;
pub(crate) const DEFAULT_MAX_DELIVER: i64 = 5;
pub(crate) const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 20;
/// `[executor] work_dir_min_free_bytes` default: room for an episode's workspace and output.
pub(crate) const DEFAULT_WORK_DIR_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;
/// `[executor] cache_bytes` default: the warm-workspace cache (kept trees and blobs).
pub(crate) const DEFAULT_CACHE_BYTES: u64 = 1024 * 1024 * 1024;
/// `[executor] concurrency` upper bound (episodes at once per worker).
pub(crate) const MAX_CONCURRENCY: usize = 64;
/// Smallest output cap accepted: below this the model can't read a compiler error.
pub(crate) const MIN_OUTPUT_CAP_BYTES: usize = 1024;
const DEFAULT_SHELL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const DEFAULT_SHELL_LANG: &str = "C.UTF-8";

/// The config file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorFile {
    #[serde(default)]
    pub nats: NatsSection,
    #[serde(default)]
    pub executor: ExecutorSection,
    /// `[snapshot]`: the largest base this executor materializes and the largest tree it
    /// freezes (shared with the other daemons).
    #[serde(default)]
    pub snapshot: SnapshotSection,
    #[serde(default)]
    pub models: ModelProfiles,
    /// External CLI agents, by profile name (a task's `roles.executor` names one of these or a
    /// model profile).
    #[serde(default)]
    pub agents: BTreeMap<String, AgentProfileConfig>,
    /// `[metrics] addr`: Prometheus `/metrics` and `/healthz`.
    #[serde(default)]
    pub metrics: loopgate_common::config::MetricsSection,
}

/// Everything `main` reads from outside the file, read once.
#[derive(Debug, Clone, Default)]
pub struct ExternalInputs {
    /// `--worker-id`.
    pub worker_id_flag: Option<String>,
    /// `--capability` (repeatable); empty = use the file.
    pub capability_flags: Vec<Capability>,
    /// Used for the default worker id.
    pub hostname: Option<String>,
    pub pid: u32,
    /// The process environment, read once (LOOPGATE_NATS_URL, API key vars, PATH, LANG, ...).
    pub env: BTreeMap<String, String>,
    /// The system temp dir, for the default work dir.
    pub temp_dir: PathBuf,
    /// `--config`: hidden from agents.
    pub config_path: Option<PathBuf>,
}

impl ExternalInputs {
    fn env_var(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }
}

/// What the `shell` tool's children get as their whole environment (besides `HOME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellEnv {
    pub path: String,
    pub lang: String,
}

impl Default for ShellEnv {
    fn default() -> Self {
        ShellEnv {
            path: DEFAULT_SHELL_PATH.to_string(),
            lang: DEFAULT_SHELL_LANG.to_string(),
        }
    }
}

/// Limits one episode's tools run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLimits {
    pub shell_timeout: Duration,
    pub output_cap_bytes: usize,
    pub shell_env: ShellEnv,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            shell_timeout: Duration::from_secs(DEFAULT_SHELL_TIMEOUT_SECS),
            output_cap_bytes: DEFAULT_OUTPUT_CAP_BYTES,
            shell_env: ShellEnv::default(),
        }
    }
}

/// The validated configuration the worker runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub nats: NatsSettings,
    pub worker_id: String,
    pub capabilities: Vec<Capability>,
    /// The gui backends served with `gui` (none without it).
    pub gui_backends: Vec<loopgate_protocol::gui::GuiBackend>,
    pub work_dir: PathBuf,
    pub tools: ToolLimits,
    pub ack_wait: Duration,
    pub max_deliver: i64,
    pub shutdown_grace: Duration,
    /// The TTL of this worker's capability heartbeats.
    pub capability_ttl: Duration,
    /// Model profiles by name, API keys read.
    pub models: BTreeMap<String, ModelProfile>,
    /// CLI agent profiles by name, passed-through variables read.
    pub agents: BTreeMap<String, AgentProfile>,
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// How self-checks should be isolated (probed at start-up, as the auditor's checks).
    pub sandbox: SandboxSettings,
    /// `PATH` handed to self-checks (as the auditor gives its checks).
    pub check_path: String,
    /// Who among the agents gets the network (`agent_network`).
    pub agent_network: AgentNetworkPolicy,
    /// Host paths agents must not see, before start-up checks which exist.
    pub agent_hidden: Vec<PathBuf>,
    /// Warm-workspace cache budget (0: off).
    pub cache_bytes: u64,
    /// Free bytes the work dir must keep before the worker takes work (0: no check).
    pub work_dir_min_free_bytes: u64,
    /// Episodes at once per capability loop.
    pub concurrency: usize,
    /// `[snapshot]`: caps on the snapshots this worker reads and writes.
    pub snapshot: SnapshotLimits,
    /// The environment variables secrets were read from (the NATS password and URL, model API
    /// keys, what CLI agents get passed through): `main` removes them from the process's
    /// environment before anything starts (`loopgate_checks::seal_process`).
    pub secret_vars: Vec<String>,
}

impl Settings {
    /// The profile names a task's `roles.executor` may give this worker (model profiles and
    /// CLI agents), sorted: what its capability heartbeat announces (names only, no keys).
    pub fn profile_names(&self) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> =
            self.models.keys().chain(self.agents.keys()).collect();
        names.into_iter().cloned().collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("reading config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {reason}")]
    Parse { path: String, reason: String },
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error(transparent)]
    Model(#[from] ModelConfigError),
}

impl ExecutorFile {
    pub fn parse(text: &str, path: &str) -> Result<ExecutorFile, SettingsError> {
        toml::from_str(text).map_err(|err| SettingsError::Parse {
            path: path.to_string(),
            reason: err.to_string(),
        })
    }

    pub fn load(path: &std::path::Path) -> Result<ExecutorFile, SettingsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Precedence: flags > env > file > defaults.
    pub fn resolve(&self, inputs: &ExternalInputs) -> Result<Settings, SettingsError> {
        let env = |name: &str| inputs.env_var(name);
        let nats = self
            .nats
            .resolve(inputs.env_var("LOOPGATE_NATS_URL"), &env)?;
        let section = &self.executor;

        let worker_id = inputs
            .worker_id_flag
            .clone()
            .or_else(|| section.worker_id.clone())
            .unwrap_or_else(|| {
                let host = inputs.hostname.as_deref().map(str::trim).unwrap_or("");
                let host = if host.is_empty() { "executor" } else { host };
                format!("{host}-{}", inputs.pid)
            });
        if worker_id.is_empty() || worker_id.contains(|c: char| c.is_whitespace() || c.is_control())
        {
            return Err(ConfigError::invalid(
                "executor.worker_id",
                "must be non-empty without whitespace",
            )
            .into());
        }

        let mut capabilities = if inputs.capability_flags.is_empty() {
            section
                .capabilities
                .clone()
                .unwrap_or_else(|| vec![Capability::Cli])
        } else {
            inputs.capability_flags.clone()
        };
        let mut seen = Vec::new();
        capabilities.retain(|c| {
            let new = !seen.contains(c);
            seen.push(*c);
            new
        });
        if capabilities.is_empty() {
            return Err(
                ConfigError::invalid("executor.capabilities", "must name at least one").into(),
            );
        }

        let mut gui_backends = section
            .gui_backends
            .clone()
            .unwrap_or_else(|| vec![loopgate_protocol::gui::GuiBackend::Browser]);
        gui_backends.sort();
        gui_backends.dedup();
        if capabilities.contains(&Capability::Gui) && gui_backends.is_empty() {
            return Err(ConfigError::invalid(
                "executor.gui_backends",
                "must name at least one of \"browser\", \"desktop\" when gui is served",
            )
            .into());
        }
        if !capabilities.contains(&Capability::Gui) {
            gui_backends.clear();
        }

        let work_dir = section
            .work_dir
            .clone()
            .unwrap_or_else(|| inputs.temp_dir.join("loopgate-executor"));
        if work_dir.as_os_str().is_empty() {
            return Err(ConfigError::invalid("executor.work_dir", "must not be empty").into());
        }

        let shell_timeout_secs = section
            .shell_timeout_secs
            .unwrap_or(DEFAULT_SHELL_TIMEOUT_SECS);
        if shell_timeout_secs == 0 {
            return Err(
                ConfigError::invalid("executor.shell_timeout_secs", "must be at least 1").into(),
            );
        }
        let output_cap_bytes = section.output_cap_bytes.unwrap_or(DEFAULT_OUTPUT_CAP_BYTES);
        if output_cap_bytes < MIN_OUTPUT_CAP_BYTES {
            return Err(ConfigError::invalid(
                "executor.output_cap_bytes",
                format!("must be at least {MIN_OUTPUT_CAP_BYTES}"),
            )
            .into());
        }
        let concurrency = section.concurrency.unwrap_or(EPISODES_PER_LOOP);
        if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
            return Err(ConfigError::invalid(
                "executor.concurrency",
                format!("must be between 1 and {MAX_CONCURRENCY}"),
            )
            .into());
        }
        let ack_wait_secs = section.ack_wait_secs.unwrap_or(DEFAULT_ACK_WAIT_SECS);
        if ack_wait_secs < 3 {
            return Err(ConfigError::invalid(
                "executor.ack_wait_secs",
                "must be at least 3 (progress acks go out every third of it)",
            )
            .into());
        }
        let max_deliver = section.max_deliver.unwrap_or(DEFAULT_MAX_DELIVER);
        if max_deliver < 1 {
            return Err(ConfigError::invalid("executor.max_deliver", "must be at least 1").into());
        }
        let shutdown_grace_secs = section
            .shutdown_grace_secs
            .unwrap_or(DEFAULT_SHUTDOWN_GRACE_SECS);
        use loopgate_protocol::capabilities::{
            DEFAULT_CAPABILITY_TTL_SECS, MAX_CAPABILITY_TTL_SECS, MIN_CAPABILITY_TTL_SECS,
        };
        let capability_ttl_secs = section
            .capability_ttl_secs
            .unwrap_or(DEFAULT_CAPABILITY_TTL_SECS);
        if !(MIN_CAPABILITY_TTL_SECS..=MAX_CAPABILITY_TTL_SECS).contains(&capability_ttl_secs) {
            return Err(ConfigError::invalid(
                "executor.capability_ttl_secs",
                format!("must be {MIN_CAPABILITY_TTL_SECS}..={MAX_CAPABILITY_TTL_SECS}"),
            )
            .into());
        }

        let defaults = ShellEnv::default();
        let shell_env = ShellEnv {
            path: inputs
                .env_var("PATH")
                .filter(|p| !p.is_empty())
                .unwrap_or(defaults.path),
            lang: inputs
                .env_var("LANG")
                .filter(|l| !l.is_empty())
                .unwrap_or(defaults.lang),
        };

        if let Some(user) = &section.check_user {
            if !is_valid_check_user(user) {
                return Err(ConfigError::invalid(
                    "executor.check_user",
                    "must be a user name or uid:gid",
                )
                .into());
            }
        }
        let sandbox = SandboxSettings {
            mode: section.sandbox.unwrap_or_default(),
            check_user: section.check_user.clone(),
            bwrap: section.bwrap.clone(),
        };

        let extra_hidden = section.agent_hidden_paths.clone().unwrap_or_default();
        if extra_hidden.iter().any(|p| p.as_os_str().is_empty()) {
            return Err(ConfigError::invalid(
                "executor.agent_hidden_paths",
                "paths must not be empty",
            )
            .into());
        }
        let key_files: Vec<PathBuf> = self
            .models
            .values()
            .filter_map(|m| m.api_key_file.clone())
            .collect();
        let agent_hidden = loopgate_checks::secret_paths(
            inputs.config_path.as_deref(),
            inputs.env_var("HOME").as_deref(),
            &key_files,
            &extra_hidden,
        );

        let models = resolve_profiles(&self.models, &env)?;
        let mut agents = BTreeMap::new();
        for (name, agent) in &self.agents {
            if models.contains_key(name) {
                return Err(ConfigError::invalid(
                    format!("agents.{name}"),
                    "a model profile has the same name; profile names must be unique",
                )
                .into());
            }
            agents.insert(name.clone(), agent.resolve(name, &env)?);
        }

        Ok(Settings {
            nats,
            worker_id,
            capabilities,
            gui_backends,
            work_dir,
            tools: ToolLimits {
                shell_timeout: Duration::from_secs(shell_timeout_secs),
                output_cap_bytes,
                shell_env,
            },
            ack_wait: Duration::from_secs(ack_wait_secs),
            max_deliver,
            shutdown_grace: Duration::from_secs(shutdown_grace_secs),
            capability_ttl: Duration::from_secs(capability_ttl_secs),
            models,
            agents,
            metrics_addr: self.metrics.resolve()?,
            sandbox,
            check_path: loopgate_checks::check_path(inputs.env_var("PATH")),
            agent_network: AgentNetworkPolicy::from_setting(section.agent_network),
            agent_hidden,
            cache_bytes: section.cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES),
            work_dir_min_free_bytes: section
                .work_dir_min_free_bytes
                .unwrap_or(DEFAULT_WORK_DIR_MIN_FREE_BYTES),
            concurrency,
            snapshot: self.snapshot.resolve()?,
            secret_vars: self.secret_vars(),
        })
    }

    /// The variables this file reads secrets from (see [`Settings::secret_vars`]), and
    /// `LOOPGATE_NATS_URL`, which may carry a password.
    fn secret_vars(&self) -> Vec<String> {
        let mut vars = vec!["LOOPGATE_NATS_URL".to_string()];
        vars.extend(self.nats.password_env.iter().cloned());
        vars.extend(self.models.values().filter_map(|m| m.api_key_env.clone()));
        vars.extend(self.agents.values().flat_map(|a| a.env.iter().cloned()));
        vars.sort();
        vars.dedup();
        vars
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
