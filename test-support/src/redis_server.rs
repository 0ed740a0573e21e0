//! A real redis-server on a free loopback port: without persistence, or with the append-only
//! file (AOF) so a `kill -9` and restart keeps every acknowledged write.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::binaries::find_binary;
use crate::child_guard::ChildGuard;
use crate::errors::SupportError;
use crate::readiness::free_port;

const INSTALL_HINT: &str = "run scripts/install-deps.sh services";
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const PORT_ATTEMPTS: usize = 3;

/// A running redis-server (`--save ''`; `--appendonly no`, or `yes` when persistent), killed
/// and reaped on drop.
pub struct RedisServer {
    // Declared first so the process dies before its directory is removed.
    process: ChildGuard,
    binary: PathBuf,
    args: Vec<OsString>,
    port: u16,
    /// `--requirepass`, when started with one.
    password: Option<String>,
    dir: TempDir,
}

impl RedisServer {
    /// Starts redis-server and waits until it answers PING with PONG.
    pub async fn start() -> anyhow::Result<RedisServer> {
        Self::launch(None, false).await
    }

    /// Like [`RedisServer::start`] with the append-only file on (`--appendonly yes
    /// --appendfsync always`, in its own directory): [`RedisServer::restart`] after
    /// [`RedisServer::kill`] comes back with every acknowledged write. (With `everysec`, Redis
    /// postpones its AOF write for up to 2 s while a background fsync is slow, and answers
    /// meanwhile: on a loaded machine a killed process then lost the manager's last writes and
    /// the restart test saw a round's episode run twice.)
    pub async fn start_persistent() -> anyhow::Result<RedisServer> {
        Self::launch(None, true).await
    }

    /// Like [`RedisServer::start`] but every client must `AUTH` with `password` first
    /// (`--requirepass`); [`RedisServer::url`] carries it, as a Kubernetes Secret's URL does.
    pub async fn start_with_password(password: &str) -> anyhow::Result<RedisServer> {
        Self::launch(Some(password.to_string()), false).await
    }

    /// Like [`RedisServer::start`], as a replica of the server on 127.0.0.1:`primary_port`
    /// (`--replicaof`); ready once it answers PING, which is before it has synced (see
    /// [`RedisServer::wait_replicating`]).
    pub async fn start_replica_of(primary_port: u16) -> anyhow::Result<RedisServer> {
        Self::launch_with(None, false, replica_args(primary_port)).await
    }

    /// [`RedisServer::start_replica_of`] a primary that requires `password`; this one requires
    /// it too (`--requirepass`, `--masterauth`), as every node of a group does.
    pub async fn start_replica_with_password(
        primary_port: u16,
        password: &str,
    ) -> anyhow::Result<RedisServer> {
        let mut extra = replica_args(primary_port);
        extra.extend(["--masterauth".into(), password.into()]);
        Self::launch_with(Some(password.to_string()), false, extra).await
    }

    /// Like [`RedisServer::start_with_password`], also able to become a replica of another
    /// node that requires the same password (`--masterauth`).
    pub async fn start_group_member_with_password(password: &str) -> anyhow::Result<RedisServer> {
        Self::launch_with(
            Some(password.to_string()),
            false,
            vec!["--masterauth".into(), password.into()],
        )
        .await
    }

    /// `--requirepass`, when started with one.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    async fn launch(password: Option<String>, persistent: bool) -> anyhow::Result<RedisServer> {
        Self::launch_with(password, persistent, Vec::new()).await
    }

    async fn launch_with(
        password: Option<String>,
        persistent: bool,
        extra: Vec<OsString>,
    ) -> anyhow::Result<RedisServer> {
        let binary = find_binary("redis-server", "LOOPGATE_REDIS_SERVER", INSTALL_HINT)?;
        let mut dir = tempfile::Builder::new()
            .prefix("loopgate-redis-")
            .tempdir()
            .map_err(|e| SupportError::io("creating redis tempdir", e))?;
        let log_path = dir.path().join("redis-server.log");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            let mut args: Vec<OsString> = vec![
                "--port".into(),
                port.to_string().into(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--save".into(),
                "".into(),
                "--appendonly".into(),
                if persistent { "yes" } else { "no" }.into(),
                "--appendfsync".into(),
                "always".into(),
                "--daemonize".into(),
                "no".into(),
                "--dir".into(),
                dir.path().as_os_str().to_owned(),
                // A replica's first sync starts at once (the default waits 5 s for others).
                "--repl-diskless-sync-delay".into(),
                "0".into(),
            ];
            args.extend(extra.iter().cloned());
            if let Some(password) = &password {
                args.extend(["--requirepass".into(), password.into()]);
            }
            let process = spawn(&binary, &args, &log_path)?;
            let mut server = RedisServer {
                process,
                binary: binary.clone(),
                args,
                port,
                password: password.clone(),
                dir,
            };
            match server.wait_ready().await {
                Ok(()) => return Ok(server),
                Err(err) if attempt < PORT_ATTEMPTS && server.lost_port_race() => {
                    tracing::debug!("redis-server lost a port race, retrying: {err}");
                    let RedisServer {
                        process, dir: d, ..
                    } = server;
                    drop(process);
                    dir = d;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// `redis://127.0.0.1:PORT`, or `redis://:PASSWORD@127.0.0.1:PORT` with a password.
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!("redis://:{password}@127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// The process, e.g. to send it a signal.
    pub fn process_mut(&mut self) -> &mut ChildGuard {
        &mut self.process
    }

    /// SIGKILL now (simulates a crash); [`RedisServer::restart`] brings it back (empty unless
    /// started with [`RedisServer::start_persistent`]).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Kills the server if running and starts it again on the same port and directory.
    /// Without persistence it comes back empty, unless it was ever a replica: a replica keeps
    /// the dump of its last sync in its directory and loads it (an old state). With the AOF,
    /// that is loaded before PING answers.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.process.kill();
        self.process = spawn(&self.binary, &self.args, self.process.log_path())?;
        self.wait_ready().await
    }

    /// Kills the server if running and starts it again (empty, or holding its last sync's
    /// dump, unless persistent: see [`RedisServer::restart`]) as a replica of 127.0.0.1:`primary_port`, as an operator brings a failed primary back.
    pub async fn restart_as_replica_of(&mut self, primary_port: u16) -> anyhow::Result<()> {
        if let Some(at) = self.args.iter().position(|a| a == "--replicaof") {
            self.args.drain(at..(at + 3).min(self.args.len()));
        }
        self.args.extend(replica_args(primary_port));
        self.restart().await
    }

    /// Waits until this replica's link to its primary is up (`master_link_status:up`).
    pub async fn wait_replicating(&self, timeout: Duration) -> anyhow::Result<()> {
        let port = self.port;
        let password = self.password.as_deref();
        crate::readiness::wait_until(timeout, || async move {
            crate::redis_command::command_as(port, password, &["INFO", "replication"])
                .await
                .ok()
                .and_then(|v| redis::from_redis_value::<String>(v).ok())
                .is_some_and(|info| info.contains("master_link_status:up"))
        })
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "redis :{port} did not start replicating: {e}\n{}",
                self.log_text()
            )
        })
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let port = self.port;
        let password = self.password.clone();
        self.process
            .wait_ready(READY_TIMEOUT, || {
                let password = password.clone();
                async move { redis_ping(port, password.as_deref(), Duration::from_secs(2)).await }
            })
            .await
    }

    fn lost_port_race(&self) -> bool {
        self.process.log_text().contains("Address already in use")
    }
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("url", &self.url())
            .field("dir", &self.dir.path())
            .finish()
    }
}

fn replica_args(primary_port: u16) -> Vec<OsString> {
    vec![
        "--replicaof".into(),
        "127.0.0.1".into(),
        primary_port.to_string().into(),
    ]
}

fn spawn(binary: &PathBuf, args: &[OsString], log_path: &Path) -> anyhow::Result<ChildGuard> {
    let mut command = Command::new(binary);
    command.args(args);
    ChildGuard::spawn_with_log("redis-server", command, log_path)
}

/// True iff a RESP `PING` to 127.0.0.1:`port` (after `AUTH password`, when given) answers
/// `+PONG` within `timeout`.
pub(crate) async fn redis_ping(port: u16, password: Option<&str>, timeout: Duration) -> bool {
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let mut buf = [0u8; 64];
        if let Some(password) = password {
            let auth = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{password}\r\n", password.len());
            stream.write_all(auth.as_bytes()).await?;
            let n = stream.read(&mut buf).await?;
            if !buf[..n].starts_with(b"+OK") {
                return Ok(false);
            }
        }
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
        let n = stream.read(&mut buf).await?;
        Ok::<bool, std::io::Error>(buf[..n].starts_with(b"+PONG"))
    };
    matches!(tokio::time::timeout(timeout, exchange).await, Ok(Ok(true)))
}
