//! A real nats-server with JetStream, on free loopback ports, storing into a TempDir.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use crate::binaries::find_binary;
use crate::child_guard::ChildGuard;
use crate::errors::SupportError;
use crate::http_probe::http_get;
use crate::readiness::free_port;

const INSTALL_HINT: &str = "run scripts/install-deps.sh services";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const PORT_ATTEMPTS: usize = 3;

/// A running nats-server (`-js`), killed and reaped on drop. Its store, config and log live in
/// a TempDir removed on drop.
pub struct NatsServer {
    // Declared first so the process dies before its directory is removed.
    process: ChildGuard,
    binary: PathBuf,
    args: Vec<OsString>,
    port: u16,
    monitor_port: u16,
    store: PathBuf,
    dir: TempDir,
}

impl NatsServer {
    /// Starts nats-server with JetStream enabled and waits until `/healthz?js-enabled-only=true`
    /// answers 200.
    pub async fn start() -> anyhow::Result<NatsServer> {
        Self::launch(None, "127.0.0.1", None).await
    }

    /// Like [`NatsServer::start`] with the JetStream store in `store` (created if missing),
    /// e.g. on a small tmpfs; it outlives the server.
    pub async fn start_with_store(store: &Path) -> anyhow::Result<NatsServer> {
        Self::launch(None, "127.0.0.1", Some(store.to_path_buf())).await
    }

    /// Like [`NatsServer::start`] but with a config file (users, permissions, accounts...).
    /// Listen address, client port, monitoring port, `-js` and the store dir are still given
    /// on the command line and override the config. With accounts, remember
    /// `jetstream: enabled` in each account that needs it.
    pub async fn start_with_config(conf_text: &str) -> anyhow::Result<NatsServer> {
        Self::launch(Some(conf_text), "127.0.0.1", None).await
    }

    /// Like [`NatsServer::start_with_config`], listening for clients on every interface
    /// (`0.0.0.0`), e.g. for a client in another network namespace reaching it over a veth
    /// pair. [`NatsServer::url`] still names the loopback address.
    pub async fn start_with_config_on_all_interfaces(
        conf_text: &str,
    ) -> anyhow::Result<NatsServer> {
        Self::launch(Some(conf_text), "0.0.0.0", None).await
    }

    async fn launch(
        conf_text: Option<&str>,
        listen: &str,
        store: Option<PathBuf>,
    ) -> anyhow::Result<NatsServer> {
        let binary = find_binary("nats-server", "LOOPGATE_NATS_SERVER", INSTALL_HINT)?;
        let mut dir = tempfile::Builder::new()
            .prefix("loopgate-nats-")
            .tempdir()
            .map_err(|e| SupportError::io("creating nats tempdir", e))?;
        let store = store.unwrap_or_else(|| dir.path().join("jetstream"));
        std::fs::create_dir_all(&store)
            .map_err(|e| SupportError::io("creating jetstream store dir", e))?;
        let conf_path = match conf_text {
            Some(text) => {
                let path = dir.path().join("nats.conf");
                std::fs::write(&path, text)
                    .map_err(|e| SupportError::io("writing nats.conf", e))?;
                Some(path)
            }
            None => None,
        };
        let log_path = dir.path().join("nats-server.log");

        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            let monitor_port = distinct_free_port(port)?;
            let mut args: Vec<OsString> = vec![
                "-a".into(),
                listen.into(),
                "-p".into(),
                port.to_string().into(),
                "-m".into(),
                monitor_port.to_string().into(),
                "-js".into(),
                "-sd".into(),
                store.clone().into_os_string(),
            ];
            if let Some(conf) = &conf_path {
                args.push("-c".into());
                args.push(conf.clone().into_os_string());
            }
            let process = spawn(&binary, &args, &log_path)?;
            let mut server = NatsServer {
                process,
                binary: binary.clone(),
                args,
                port,
                monitor_port,
                store: store.clone(),
                dir,
            };
            match server.wait_ready().await {
                Ok(()) => return Ok(server),
                Err(err) if attempt < PORT_ATTEMPTS && server.lost_port_race() => {
                    tracing::debug!("nats-server lost a port race, retrying: {err}");
                    server.process.kill();
                    dir = server.into_dir();
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// `nats://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:MONITOR_PORT` (healthz, varz, jsz...).
    pub fn monitor_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.monitor_port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The JetStream store directory (survives [`NatsServer::restart`]).
    pub fn store_dir(&self) -> PathBuf {
        self.store.clone()
    }

    /// Everything nats-server logged so far, across restarts.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// The process, e.g. to send it a signal.
    pub fn process_mut(&mut self) -> &mut ChildGuard {
        &mut self.process
    }

    /// SIGKILL now (simulates a crash); [`NatsServer::restart`] brings it back.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Kills the server if running and starts it again on the same ports with the same store,
    /// so JetStream streams persist.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.process.kill();
        self.process = spawn(&self.binary, &self.args, self.process.log_path())?;
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let url = format!("{}/healthz?js-enabled-only=true", self.monitor_url());
        self.process
            .wait_ready(READY_TIMEOUT, || {
                let url = url.clone();
                async move {
                    matches!(http_get(&url, Duration::from_secs(2)).await, Ok(r) if r.status == 200)
                }
            })
            .await
    }

    fn lost_port_race(&self) -> bool {
        self.process.log_text().contains("address already in use")
    }

    fn into_dir(self) -> TempDir {
        let NatsServer { process, dir, .. } = self;
        drop(process);
        dir
    }
}

impl std::fmt::Debug for NatsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsServer")
            .field("url", &self.url())
            .field("monitor_url", &self.monitor_url())
            .field("dir", &self.dir.path())
            .field("store", &self.store)
            .finish()
    }
}

fn spawn(
    binary: &PathBuf,
    args: &[OsString],
    log_path: &std::path::Path,
) -> anyhow::Result<ChildGuard> {
    let mut command = Command::new(binary);
    command.args(args);
    ChildGuard::spawn_with_log("nats-server", command, log_path)
}

/// A free port different from `other` (two quick `free_port` calls can return the same port).
pub(crate) fn distinct_free_port(other: u16) -> anyhow::Result<u16> {
    for _ in 0..10 {
        let port = free_port()?;
        if port != other {
            return Ok(port);
        }
    }
    anyhow::bail!("could not find a second free port")
}
