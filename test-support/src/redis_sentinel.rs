//! Redis with failover: a primary, a replica and three Redis Sentinels (`redis-server
//! --sentinel`, quorum 2) on free loopback ports. Killing the primary makes the sentinels
//! promote the replica; [`RedisHa::wait_failover`] waits for it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use crate::binaries::find_binary;
use crate::child_guard::ChildGuard;
use crate::errors::SupportError;
use crate::readiness::{free_port, wait_until};
use crate::redis_command::{command, command_as, COMMAND_TIMEOUT};
use crate::redis_server::RedisServer;

const INSTALL_HINT: &str = "run scripts/install-deps.sh services";
/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "loopgate";
const SENTINELS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a primary may not answer before a sentinel thinks it down.
const DOWN_AFTER_MS: u64 = 1000;

/// One redis sentinel process, killed on drop.
pub struct RedisSentinel {
    process: ChildGuard,
    port: u16,
    _dir: TempDir,
}

impl RedisSentinel {
    /// Starts a sentinel monitoring 127.0.0.1:`primary_port` as [`MASTER_NAME`] with `quorum`
    /// (authenticating to the nodes with `password`, when given).
    pub async fn start(
        primary_port: u16,
        quorum: usize,
        password: Option<&str>,
    ) -> anyhow::Result<RedisSentinel> {
        let binary = find_binary("redis-server", "LOOPGATE_REDIS_SERVER", INSTALL_HINT)?;
        let dir = tempfile::Builder::new()
            .prefix("loopgate-sentinel-")
            .tempdir()
            .map_err(|e| SupportError::io("creating sentinel tempdir", e))?;
        let port = free_port()?;
        let conf = dir.path().join("sentinel.conf");
        // The sentinel rewrites its file as it learns the group: it must be its own.
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} {quorum}\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {MASTER_NAME} 10000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n{auth}",
                dir = dir.path().display(),
                auth = password
                    .map(|p| format!("sentinel auth-pass {MASTER_NAME} {p}\n"))
                    .unwrap_or_default(),
            ),
        )
        .map_err(|e| SupportError::io("writing sentinel.conf", e))?;
        let args: Vec<OsString> = vec![conf.into_os_string(), "--sentinel".into()];
        let log: PathBuf = dir.path().join("sentinel.log");
        let mut command = Command::new(&binary);
        command.args(&args);
        let mut process = ChildGuard::spawn_with_log("redis-sentinel", command, &log)?;
        process
            .wait_ready(READY_TIMEOUT, || async move {
                crate::redis_server::redis_ping(port, None, COMMAND_TIMEOUT).await
            })
            .await?;
        Ok(RedisSentinel {
            process,
            port,
            _dir: dir,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// The port this sentinel names as the primary now.
    pub async fn primary_port(&self) -> Option<u16> {
        let reply = command(
            self.port,
            &["SENTINEL", "get-master-addr-by-name", MASTER_NAME],
        )
        .await
        .ok()?;
        let (_, port): (String, u16) = redis::from_redis_value(reply).ok()?;
        Some(port)
    }

    /// How many replicas and other sentinels this one knows.
    async fn known(&self) -> Option<(usize, usize)> {
        let replicas = command(self.port, &["SENTINEL", "replicas", MASTER_NAME])
            .await
            .ok()?;
        let sentinels = command(self.port, &["SENTINEL", "sentinels", MASTER_NAME])
            .await
            .ok()?;
        let count = |v: redis::Value| match v {
            redis::Value::Array(items) => Some(items.len()),
            _ => None,
        };
        Some((count(replicas)?, count(sentinels)?))
    }
}

/// A primary, one replica and three sentinels.
pub struct RedisHa {
    /// The two data nodes, in start order (the first starts as the primary).
    pub nodes: Vec<RedisServer>,
    pub sentinels: Vec<RedisSentinel>,
    /// The data nodes' password (the sentinels take none).
    password: Option<String>,
}

impl RedisHa {
    /// Starts the group and waits until the replica has synced and every sentinel knows the
    /// replica and the two other sentinels (so a failover can be authorised).
    pub async fn start() -> anyhow::Result<RedisHa> {
        RedisHa::launch(None).await
    }

    /// [`RedisHa::start`] with data nodes that require `password` (`--requirepass`,
    /// `--masterauth`; the sentinels `auth-pass`).
    pub async fn start_with_password(password: &str) -> anyhow::Result<RedisHa> {
        RedisHa::launch(Some(password)).await
    }

    async fn launch(password: Option<&str>) -> anyhow::Result<RedisHa> {
        let primary = match password {
            Some(p) => RedisServer::start_group_member_with_password(p).await?,
            None => RedisServer::start().await?,
        };
        let replica = match password {
            Some(p) => RedisServer::start_replica_with_password(primary.port(), p).await?,
            None => RedisServer::start_replica_of(primary.port()).await?,
        };
        replica.wait_replicating(READY_TIMEOUT).await?;
        let mut sentinels = Vec::new();
        for _ in 0..SENTINELS {
            sentinels.push(RedisSentinel::start(primary.port(), 2, password).await?);
        }
        let ha = RedisHa {
            nodes: vec![primary, replica],
            sentinels,
            password: password.map(str::to_string),
        };
        let ready = wait_until(READY_TIMEOUT, || async {
            for s in &ha.sentinels {
                if s.known().await != Some((1, SENTINELS - 1)) {
                    return false;
                }
            }
            true
        })
        .await;
        if ready.is_err() {
            anyhow::bail!(
                "the sentinels did not discover each other and the replica within {READY_TIMEOUT:?}\n{}",
                ha.logs()
            );
        }
        Ok(ha)
    }

    /// The sentinels' addresses (`127.0.0.1:PORT`), for `[redis] sentinels`.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisSentinel::addr).collect()
    }

    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// The port the first answering sentinel names as the primary.
    pub async fn primary_port(&self) -> Option<u16> {
        for s in &self.sentinels {
            if let Some(port) = s.primary_port().await {
                return Some(port);
            }
        }
        None
    }

    /// The data node on `port`.
    pub fn node_mut(&mut self, port: u16) -> Option<&mut RedisServer> {
        self.nodes.iter_mut().find(|n| n.port() == port)
    }

    /// SIGKILL the node the sentinels name as the primary; its port.
    pub async fn kill_primary(&mut self) -> anyhow::Result<u16> {
        let port = self
            .primary_port()
            .await
            .ok_or_else(|| anyhow::anyhow!("no sentinel names a primary"))?;
        self.node_mut(port)
            .ok_or_else(|| anyhow::anyhow!("the primary :{port} is not one of the nodes"))?
            .kill();
        Ok(port)
    }

    /// Waits until every sentinel names a primary other than `old_port` and that node says
    /// it is a master; its port.
    pub async fn wait_failover(&self, old_port: u16, timeout: Duration) -> anyhow::Result<u16> {
        self.wait_primary(timeout, |port| port != old_port, false)
            .await
            .map_err(|logs| {
                anyhow::anyhow!("no failover from :{old_port} within {timeout:?}\n{logs}")
            })
    }

    /// Waits until the group could fail over again: every sentinel names one primary, that
    /// node says it is a master, and every other node replicates from it with its link up
    /// (after a frozen primary is let go, the sentinels turn it into a replica of the one
    /// they promoted meanwhile). The primary's port.
    pub async fn wait_healthy(&self, timeout: Duration) -> anyhow::Result<u16> {
        self.wait_primary(timeout, |_| true, true).await.map_err(|logs| {
            anyhow::anyhow!(
                "the Redis group did not settle on one primary with its replica within {timeout:?}\n{logs}"
            )
        })
    }

    /// Waits until every sentinel names one primary that `wanted` accepts and that node says
    /// it is a master and, with `replicas_synced`, every other node replicates from it with
    /// its link up; its port, or every log when `timeout` passed first.
    async fn wait_primary(
        &self,
        timeout: Duration,
        wanted: impl Fn(u16) -> bool,
        replicas_synced: bool,
    ) -> Result<u16, String> {
        let primary = std::cell::Cell::new(None);
        let wanted = &wanted;
        let settled = wait_until(timeout, || {
            let primary = &primary;
            async move {
                let Some(port) = self.agreed_primary().await.filter(|p| wanted(*p)) else {
                    return false;
                };
                for node in &self.nodes {
                    let is_primary = node.port() == port;
                    if !is_primary && !replicas_synced {
                        continue;
                    }
                    let info = self.replication_info(node.port()).await;
                    let in_place = if is_primary {
                        info.contains("role:master")
                    } else {
                        info.contains("role:slave")
                            && info.contains(&format!("master_port:{port}\r"))
                            && info.contains("master_link_status:up")
                    };
                    if !in_place {
                        return false;
                    }
                }
                primary.set(Some(port));
                true
            }
        })
        .await;
        match (settled, primary.get()) {
            (Ok(()), Some(port)) => Ok(port),
            _ => Err(self.logs()),
        }
    }

    /// The port every sentinel names as the primary, when they all answer and agree.
    async fn agreed_primary(&self) -> Option<u16> {
        let mut agreed = None;
        for s in &self.sentinels {
            let port = s.primary_port().await?;
            if agreed.is_some_and(|a| a != port) {
                return None;
            }
            agreed = Some(port);
        }
        agreed
    }

    /// `INFO replication` of the node on `port` (empty when it does not answer).
    async fn replication_info(&self, port: u16) -> String {
        command_as(port, self.password.as_deref(), &["INFO", "replication"])
            .await
            .ok()
            .and_then(|v| redis::from_redis_value::<String>(v).ok())
            .unwrap_or_default()
    }

    /// Every sentinel's and node's log, for assertion messages.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            s.push_str(&format!(
                "--- sentinel {i} ---\n{}\n",
                tail(&sentinel.log_text())
            ));
        }
        for node in &self.nodes {
            s.push_str(&format!(
                "--- redis :{} ---\n{}\n",
                node.port(),
                tail(&node.log_text())
            ));
        }
        s
    }
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(3000);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

impl std::fmt::Debug for RedisHa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisHa")
            .field("nodes", &self.nodes)
            .field("sentinels", &self.sentinel_addrs())
            .finish()
    }
}
