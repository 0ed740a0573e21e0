//! The local stack's Redis password: generated on every `loopgate up` (like the NATS
//! passwords), written into `DIR/redis.conf` (mode 0600, `requirepass`), which redis-server
//! reads as its config file, and handed to the manager only in its environment
//! (`LOOPGATE_REDIS_URL=redis://:PASSWORD@127.0.0.1:PORT`, which wins over `[redis] url` in
//! `manager.toml`, so the password is in no file but the 0600 one). Without it any local
//! process, an agent's shell with the network on included, could read and rewrite every run's
//! state on the loopback port.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::error::{io_err, StackError};
use super::nats_users::random_hex;

/// The variable the manager reads its Redis URL from (over `[redis] url`).
pub const REDIS_URL_ENV: &str = "LOOPGATE_REDIS_URL";

/// A random Redis password (48 hex digits). `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisPassword(String);

impl std::fmt::Debug for RedisPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisPassword(<redacted>)")
    }
}

impl RedisPassword {
    pub fn generate() -> Result<RedisPassword, StackError> {
        random_hex(24)
            .map(RedisPassword)
            .map_err(io_err("generating the Redis password"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The manager's Redis URL with this password (hex: nothing to escape).
    pub fn url(&self, port: u16) -> String {
        format!("redis://:{}@127.0.0.1:{port}", self.0)
    }
}

/// `redis.conf` for the local stack: the password clients must give, and the one a replica
/// gives its primary (`up --ha`); port, bind address, data directory, persistence and a
/// replica's primary come from the command line.
pub fn redis_conf_text(password: &RedisPassword) -> String {
    format!(
        "# Written by `loopgate up` on every start (mode 0600): clients must AUTH with this.\n\
         requirepass {pw}\nmasterauth {pw}\n",
        pw = password.as_str()
    )
}

/// Write `path` with mode 0600 (also when it existed with a wider mode).
pub fn write_redis_conf(path: &Path, password: &RedisPassword) -> Result<(), StackError> {
    write_private(path, &redis_conf_text(password))
}

/// Creates `dir` (if needed) with mode 0700, also when it existed with a wider one. Every
/// config a Redis server loads lives in such a directory: redis-server and redis-sentinel
/// rewrite their config file (a sentinel on every start, a data node on `CONFIG REWRITE`
/// after a failover) with mode 0644, password included, so the file's own 0600 does not last.
pub fn create_private_dir(dir: &Path) -> Result<(), StackError> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io_err(format!("making {} private", dir.display())))
}

/// Write `text` to `path` with mode 0600 (also when it existed with a wider mode).
pub fn write_private(path: &Path, text: &str) -> Result<(), StackError> {
    let context = || format!("writing {}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err(context()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io_err(context()))?;
    file.write_all(text.as_bytes()).map_err(io_err(context()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_conf_requires_the_password_and_only_its_owner_reads_it() {
        let password = RedisPassword::generate().unwrap();
        assert_eq!(password.as_str().len(), 48);
        assert_ne!(password, RedisPassword::generate().unwrap());
        assert!(!format!("{password:?}").contains(password.as_str()));
        assert_eq!(
            password.url(16379),
            format!("redis://:{}@127.0.0.1:16379", password.as_str())
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redis.conf");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_redis_conf(&path, &password).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(&format!("\nrequirepass {}\n", password.as_str())),
            "{text}"
        );
        assert!(
            text.contains(&format!("\nmasterauth {}\n", password.as_str())),
            "{text}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
