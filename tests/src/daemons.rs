//! Starting one daemon for a test stack: the model profiles written into its config, the
//! process spawned from the workspace binaries with a clean environment, and the wait for a
//! manager's `/readyz`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::bail;
use loopgate_test_support::{free_port, workspace_bin, ChildGuard};

/// One model profile as written into the daemons' configs.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub base_url: String,
    pub model: String,
    pub timeout_secs: u64,
    /// `structured_output = "..."` when set (e.g. `json_schema`).
    pub structured_output: Option<String>,
    /// `max_tokens = N` when set: the reply cap (a local model in a repetition loop otherwise
    /// generates until its context is full, holding the server's only slot).
    pub max_tokens: Option<u32>,
    /// `vision = true`: tool results' screenshots go to the model as image parts.
    pub vision: bool,
    /// `temperature = T` when set.
    pub temperature: Option<f64>,
    /// `extra_body = { ... }` when set: more request fields, as a TOML inline table.
    pub extra_body: Option<String>,
}

/// The reply cap the benches give a local model's profiles.
pub const LOCAL_MAX_TOKENS: u32 = 2048;
/// The sampling temperature the benches give a local model's profiles (`loopgate up`'s
/// default too).
pub const LOCAL_TEMPERATURE: f64 = 0.2;

impl Profile {
    pub fn new(name: &str, base_url: &str, model: &str) -> Self {
        Profile {
            name: name.into(),
            base_url: base_url.into(),
            model: model.into(),
            timeout_secs: 120,
            structured_output: None,
            max_tokens: None,
            vision: false,
            temperature: None,
            extra_body: None,
        }
    }
    /// The profile a bench gives a local model: the reply cap and temperature `loopgate up`
    /// uses.
    pub fn local_defaults(self) -> Self {
        let mut profile = self.with_max_tokens(LOCAL_MAX_TOKENS);
        profile.temperature = Some(LOCAL_TEMPERATURE);
        profile
    }
    pub fn with_vision(mut self) -> Self {
        self.vision = true;
        self
    }
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
    /// `extra_body` from a JSON object (`{"repeat_penalty": 1.1}`), as a TOML inline table.
    pub fn with_extra_body(mut self, json: &serde_json::Value) -> anyhow::Result<Self> {
        anyhow::ensure!(json.is_object(), "extra_body must be a JSON object: {json}");
        let table = toml::Value::try_from(json)?;
        self.extra_body = Some(table.to_string());
        Ok(self)
    }
    pub fn with_structured_output(mut self, value: &str) -> Self {
        self.structured_output = Some(value.into());
        self
    }
    /// The profile's table; `api_key_env` names the env var holding its API key.
    pub(crate) fn toml(&self, api_key_env: Option<&str>) -> String {
        let key = api_key_env
            .map(|var| format!("api_key_env = \"{var}\"\n"))
            .unwrap_or_default();
        let structured = self
            .structured_output
            .as_ref()
            .map(|v| format!("structured_output = \"{v}\"\n"))
            .unwrap_or_default();
        let max_tokens = self
            .max_tokens
            .map(|n| format!("max_tokens = {n}\n"))
            .unwrap_or_default();
        let vision = if self.vision { "vision = true\n" } else { "" };
        let temperature = self
            .temperature
            .map(|t| format!("temperature = {t}\n"))
            .unwrap_or_default();
        let extra_body = self
            .extra_body
            .as_ref()
            .map(|t| format!("extra_body = {t}\n"))
            .unwrap_or_default();
        format!(
            "[models.{}]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"{}\"\ntimeout_secs = {}\n{key}{structured}{max_tokens}{vision}{temperature}{extra_body}",
            self.name, self.base_url, self.model, self.timeout_secs
        )
    }
}

/// A worker of the stack: the `index`-th executor or auditor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worker {
    Executor(usize),
    Auditor(usize),
}

/// How a worker was started: enough to start it again on the same config (after a kill).
#[derive(Debug, Clone)]
pub(crate) struct DaemonSpec {
    pub(crate) name: String,
    bin: String,
    config: PathBuf,
    env: Vec<(String, String)>,
}

impl DaemonSpec {
    pub(crate) fn new(name: &str, bin: &str, config: &Path, env: &[(String, String)]) -> Self {
        DaemonSpec {
            name: name.into(),
            bin: bin.into(),
            config: config.to_path_buf(),
            env: env.to_vec(),
        }
    }

    pub(crate) fn spawn(&self) -> anyhow::Result<ChildGuard> {
        spawn(&self.name, &self.bin, &self.config, &self.env)
    }

    /// Kill `child` and start this daemon in its place, on the same log.
    pub(crate) fn respawn(&self, child: &mut ChildGuard) -> anyhow::Result<()> {
        child.respawn(command(&self.bin, &self.config, &self.env)?)
    }
}

pub(crate) fn spawn(
    name: &str,
    bin: &str,
    config: &Path,
    env: &[(String, String)],
) -> anyhow::Result<ChildGuard> {
    ChildGuard::spawn(name, command(bin, config, env)?)
}

fn command(bin: &str, config: &Path, env: &[(String, String)]) -> anyhow::Result<Command> {
    let mut cmd = Command::new(workspace_bin(bin)?);
    cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.arg("--config").arg(config);
    cmd.env("LOOPGATE_LOG", "info");
    cmd.env_remove("LOOPGATE_NATS_URL");
    cmd.env_remove("LOOPGATE_REDIS_URL");
    cmd.env_remove("LOOPGATE_HTTP_ADDR");
    Ok(cmd)
}

/// Starts manager `name` on a free loopback port, its config written by `config_for(port)`,
/// and waits for its `/readyz`. A port found free can be taken by another process before the
/// manager binds it: the manager then exits saying so and is started again on a fresh port.
/// A `/readyz` answer counts only once the manager has said it listens on the port, never one
/// from whoever else holds it.
pub(crate) async fn start_manager(
    name: &str,
    client: &reqwest::Client,
    env: &[(String, String)],
    mut config_for: impl FnMut(u16) -> anyhow::Result<PathBuf>,
) -> anyhow::Result<(ChildGuard, String)> {
    const TRIES: usize = 4;
    for _ in 0..TRIES {
        let port = free_port()?;
        let cfg = config_for(port)?;
        let mut child = spawn(name, "loopgate-manager", &cfg, env)?;
        let http = format!("http://127.0.0.1:{port}");
        if wait_ready(client, port, &mut child, Duration::from_secs(60)).await? {
            return Ok((child, http));
        }
    }
    bail!("{name}: each of {TRIES} free ports was taken before the manager could bind it")
}

/// Waits until the manager `child` answers `/readyz` on `port` while listening there itself:
/// true; false when it exited because the port was taken; an error when it exited otherwise
/// or was not ready within `timeout`.
async fn wait_ready(
    client: &reqwest::Client,
    port: u16,
    child: &mut ChildGuard,
    timeout: Duration,
) -> anyhow::Result<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    let url = format!("http://127.0.0.1:{port}/readyz");
    loop {
        if !child.is_running() {
            let log = child.log_text();
            if log.contains("Address already in use") {
                return Ok(false);
            }
            bail!(
                "manager exited before it was ready:\n{}",
                child.log_tail(4000)
            );
        }
        if let Ok(r) = client.get(&url).send().await {
            if r.status().is_success() && listens_on(child, port) {
                return Ok(true);
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "manager not ready after {timeout:?}:\n{}",
                child.log_tail(4000)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Has the manager `child` said it listens on loopback `port`? (Its log's `http api listening`
/// line, written once the bind succeeded; a process id would not do, since an image test's
/// manager runs in a container behind a `podman run` shim.)
fn listens_on(child: &ChildGuard, port: u16) -> bool {
    let addr = format!("\"127.0.0.1:{port}\"");
    child
        .log_text()
        .lines()
        .any(|line| line.contains("http api listening") && line.contains(&addr))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::Profile;
    use serde_json::json;

    #[test]
    fn extra_body_goes_into_the_profile_table() {
        let profile = Profile::new("exec", "http://127.0.0.1:1/v1", "m")
            .with_extra_body(&json!({"repeat_penalty": 1.1, "kw": {"enable_thinking": false}}))
            .unwrap();
        let table: toml::Table = toml::from_str(&profile.toml(None)).unwrap();
        let extra = &table["models"]["exec"]["extra_body"];
        assert_eq!(extra["repeat_penalty"].as_float(), Some(1.1));
        assert_eq!(extra["kw"]["enable_thinking"].as_bool(), Some(false));
        assert!(Profile::new("e", "u", "m")
            .with_extra_body(&json!([1]))
            .is_err());
    }
}
