//! A real llama-server serving a local Qwen2.5-Coder GGUF through the repo's chat template,
//! for end-to-end tests against a real (small) model.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::binaries::{cache_dir, find_binary};
use crate::child_guard::ChildGuard;
use crate::errors::SupportError;
use crate::http_probe::http_get;
use crate::readiness::free_port;

const INSTALL_HINT: &str = "run scripts/install-deps.sh llama";
/// Loading a GGUF on a busy 2-core CI machine can take a while.
const DEFAULT_LOAD_TIMEOUT: Duration = Duration::from_secs(180);

/// A running llama-server (OpenAI-compatible API), killed and reaped on drop.
pub struct LocalModel {
    process: ChildGuard,
    port: u16,
    model_name: String,
}

impl LocalModel {
    /// Starts llama-server for `size` (`"0.5b"` or `"1.5b"`) with the repo's fenced-tools chat
    /// template and waits for `/health`.
    ///
    /// Returns `Ok(None)` when the binary or the weights are not installed (or
    /// `LOOPGATE_SKIP_LOCAL_MODEL` is set); [`LocalModel::unavailable_reason`] says why, so the
    /// test can print a visible skip line. Errors only when it is installed but fails to start.
    ///
    /// Env: `LOOPGATE_LLAMA_SERVER` (binary), `LOOPGATE_MODEL_GGUF` (weights file),
    /// `LOOPGATE_LLAMA_THREADS` (default 2), `LOOPGATE_MODEL_LOAD_TIMEOUT_S` (default 180).
    pub async fn start(size: &str) -> anyhow::Result<Option<LocalModel>> {
        if Self::unavailable_reason(size).is_some() {
            return Ok(None);
        }
        let binary = find_binary("llama-server", "LOOPGATE_LLAMA_SERVER", INSTALL_HINT)?;
        let gguf = gguf_path(size);
        let template = Self::chat_template_path();
        if !template.is_file() {
            return Err(SupportError::io(
                format!("chat template {}", template.display()),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )
            .into());
        }
        let threads = std::env::var("LOOPGATE_LLAMA_THREADS").unwrap_or_else(|_| "2".into());
        let load_timeout = std::env::var("LOOPGATE_MODEL_LOAD_TIMEOUT_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_LOAD_TIMEOUT);
        let model_name = format!("qwen2.5-coder-{size}-instruct");

        let mut process = None;
        let mut port = 0;
        for attempt in 1..=3 {
            port = free_port()?;
            let mut command = Command::new(&binary);
            command
                .arg("-m")
                .arg(&gguf)
                .arg("--alias")
                .arg(&model_name)
                .arg("--host")
                .arg("127.0.0.1")
                .arg("--port")
                .arg(port.to_string())
                .arg("-t")
                .arg(&threads)
                .arg("-c")
                .arg("8192")
                .arg("-ngl")
                .arg("0")
                .arg("--parallel")
                .arg("1")
                .arg("--jinja")
                .arg("--chat-template-file")
                .arg(&template);
            let mut guard = ChildGuard::spawn("llama-server", command)?;
            let health = format!("http://127.0.0.1:{port}/health");
            match guard
                .wait_ready(load_timeout, || {
                    let health = health.clone();
                    async move {
                        matches!(http_get(&health, Duration::from_secs(5)).await, Ok(r) if r.status == 200)
                    }
                })
                .await
            {
                Ok(()) => {
                    process = Some(guard);
                    break;
                }
                Err(err) if attempt < 3 && lost_port_race(&guard.log_text()) =>
                {
                    tracing::debug!("llama-server lost a port race, retrying: {err}");
                }
                Err(err) => return Err(err),
            }
        }
        let process =
            process.ok_or_else(|| anyhow::anyhow!("llama-server could not bind a port"))?;
        Ok(Some(LocalModel {
            process,
            port,
            model_name,
        }))
    }

    /// Why [`LocalModel::start`] would return `Ok(None)` for `size`, or None if it would start.
    pub fn unavailable_reason(size: &str) -> Option<String> {
        if std::env::var_os("LOOPGATE_SKIP_LOCAL_MODEL").is_some_and(|v| !v.is_empty()) {
            return Some("LOOPGATE_SKIP_LOCAL_MODEL is set".into());
        }
        if let Err(err) = find_binary("llama-server", "LOOPGATE_LLAMA_SERVER", INSTALL_HINT) {
            return Some(err.to_string());
        }
        let gguf = gguf_path(size);
        if !gguf.is_file() {
            return Some(format!(
                "model weights {} not found; run scripts/install-deps.sh model {size}",
                gguf.display()
            ));
        }
        None
    }

    /// `deploy/llama/qwen-fenced-tools.jinja` in this repository: beside the sources this was
    /// built from, or else under the current directory (a build cache shared between two
    /// checkouts can hand one checkout the other's compiled-in path, which may be gone).
    pub fn chat_template_path() -> PathBuf {
        let relative = Path::new("deploy")
            .join("llama")
            .join("qwen-fenced-tools.jinja");
        let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(&relative);
        if built.is_file() || !relative.is_file() {
            return built;
        }
        relative
    }

    /// `http://127.0.0.1:PORT/v1` (OpenAI-compatible base URL).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The model id to send in requests (llama-server's `--alias`).
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    pub fn log_text(&self) -> String {
        self.process.log_text()
    }
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("base_url", &self.base_url())
            .field("model_name", &self.model_name)
            .finish()
    }
}

/// `$LOOPGATE_MODEL_GGUF`, else `<cache>/models/qwen2.5-coder-<size>-instruct-q4_k_m.gguf`.
fn gguf_path(size: &str) -> PathBuf {
    match std::env::var_os("LOOPGATE_MODEL_GGUF").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => cache_dir()
            .join("models")
            .join(format!("qwen2.5-coder-{size}-instruct-q4_k_m.gguf")),
    }
}

/// llama-server (cpp-httplib) says "couldn't bind HTTP server socket" when the port was taken.
fn lost_port_race(log: &str) -> bool {
    let log = log.to_lowercase();
    log.contains("couldn't bind") || log.contains("address already in use")
}
