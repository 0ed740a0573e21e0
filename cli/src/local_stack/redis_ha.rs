//! `loopgate up --ha`: Redis with failover on loopback. The primary listens on `--redis-port`,
//! a replica and three Redis Sentinels (quorum 2) on free loopback ports picked at start. Every
//! node and every sentinel requires this start's Redis password (`redis_auth.rs`); the sentinels
//! use it towards the data nodes (`sentinel auth-pass`) and each other (`sentinel-pass`), the
//! replica towards its primary (`masterauth` in `redis.conf`). The manager finds the primary
//! through the sentinels (`[redis] sentinels`, `master_name`) and acknowledges a transition
//! only once the replica holds it (`min_replicas_acked = 1`).

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

use super::error::{io_err, StackError};
use super::redis_auth::{create_private_dir, write_private, RedisPassword};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "loopgate";
pub const SENTINELS: usize = 3;
/// Sentinels that must agree the primary is down before one of them fails it over.
pub const QUORUM: usize = 2;
/// How long the primary may not answer before a sentinel thinks it down.
pub const DOWN_AFTER_MS: u64 = 2000;
/// The variable the manager reads the data nodes' and the sentinels' password from.
pub const REDIS_PASSWORD_ENV: &str = "LOOPGATE_REDIS_PASSWORD";

/// The ports of the replica and the sentinels (the primary's is `--redis-port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaPorts {
    pub replica: u16,
    pub sentinels: Vec<u16>,
}

impl HaPorts {
    /// Free loopback ports, distinct from each other and from `taken`: all are held open
    /// together while picking, then released for the servers to bind.
    pub fn pick(taken: &[u16]) -> Result<HaPorts, StackError> {
        let mut held = Vec::new();
        while held.len() < 1 + SENTINELS {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(io_err("picking a free loopback port"))?;
            let port = listener
                .local_addr()
                .map_err(io_err("picking a free loopback port"))?
                .port();
            if !taken.contains(&port) {
                held.push((port, listener));
            }
        }
        let ports: Vec<u16> = held.iter().map(|(port, _)| *port).collect();
        Ok(HaPorts {
            replica: ports[0],
            sentinels: ports[1..].to_vec(),
        })
    }

    /// `127.0.0.1:PORT` of every sentinel, for `[redis] sentinels`.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect()
    }
}

/// The replica's data directory under the stack's.
pub fn replica_dir(stack_dir: &Path) -> PathBuf {
    stack_dir.join("redis-replica")
}

/// Sentinel `n`'s directory (1-based): its config file, which it rewrites as it learns the
/// group, lives there.
pub fn sentinel_dir(stack_dir: &Path, n: usize) -> PathBuf {
    stack_dir.join(format!("sentinel-{n}"))
}

pub fn sentinel_conf_path(stack_dir: &Path, n: usize) -> PathBuf {
    sentinel_dir(stack_dir, n).join("sentinel.conf")
}

/// A sentinel's config: its port, loopback only, its own password, and the primary it
/// monitors with the password to reach it.
pub fn sentinel_conf_text(
    port: u16,
    dir: &Path,
    primary_port: u16,
    password: &RedisPassword,
) -> String {
    let pw = password.as_str();
    format!(
        "# Written by `loopgate up --ha` on every start (mode 0600); the sentinel rewrites it.\n\
         port {port}\nbind 127.0.0.1\ndaemonize no\ndir \"{dir}\"\n\
         requirepass {pw}\nsentinel sentinel-pass {pw}\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} {QUORUM}\n\
         sentinel auth-pass {MASTER_NAME} {pw}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {MASTER_NAME} 10000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        dir = dir.display(),
    )
}

/// Writes every sentinel's config (fresh on every start: the password is new).
pub fn write_sentinel_confs(
    stack_dir: &Path,
    ports: &HaPorts,
    primary_port: u16,
    password: &RedisPassword,
) -> Result<(), StackError> {
    for (i, port) in ports.sentinels.iter().enumerate() {
        let n = i + 1;
        let dir = sentinel_dir(stack_dir, n);
        create_private_dir(&dir)?;
        let text = sentinel_conf_text(*port, &dir, primary_port, password);
        write_private(&sentinel_conf_path(stack_dir, n), &text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn ports_are_distinct_and_avoid_the_taken_ones() {
        let ports = HaPorts::pick(&[16379]).unwrap();
        let mut all = vec![ports.replica];
        all.extend(&ports.sentinels);
        assert_eq!(ports.sentinels.len(), SENTINELS);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len(), "{all:?}");
        assert!(!all.contains(&16379));
        assert_eq!(
            ports.sentinel_addrs()[0],
            format!("127.0.0.1:{}", ports.sentinels[0])
        );
    }

    #[test]
    fn sentinel_confs_monitor_the_primary_with_the_password_and_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let password = RedisPassword::generate().unwrap();
        let ports = HaPorts {
            replica: 2,
            sentinels: vec![3, 4, 5],
        };
        write_sentinel_confs(dir.path(), &ports, 16379, &password).unwrap();
        let pw = password.as_str();
        for (n, port) in [(1, 3), (2, 4), (3, 5)] {
            let path = sentinel_conf_path(dir.path(), n);
            let text = std::fs::read_to_string(&path).unwrap();
            for line in [
                format!("port {port}"),
                "bind 127.0.0.1".to_string(),
                format!("requirepass {pw}"),
                format!("sentinel sentinel-pass {pw}"),
                "sentinel monitor loopgate 127.0.0.1 16379 2".to_string(),
                format!("sentinel auth-pass loopgate {pw}"),
            ] {
                assert!(text.lines().any(|l| l == line), "{line} in {text}");
            }
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }
}
