//! Finding the programs `loopgate up` starts: nats-server and redis-server (env var, then
//! `~/.cache/loopgate/bin/`, then `PATH`) and the loopgate daemons (next to this executable).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::StackError;

/// Daemon binaries, looked up next to the running `loopgate` (or in `$LOOPGATE_BIN_DIR`).
pub const MANAGER_BIN: &str = "loopgate-manager";
pub const EXECUTOR_BIN: &str = "loopgate-executor";
pub const AUDITOR_BIN: &str = "loopgate-auditor";

/// `$LOOPGATE_CACHE`, else `$HOME/.cache/loopgate` (the rule scripts/install-deps.sh uses).
pub fn cache_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(dir) = env("LOOPGATE_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = env("HOME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache").join("loopgate")
}

pub fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A server binary: `$env_var` (which must then point at an executable), else
/// `<cache>/bin/<name>`, else the first `<name>` on `PATH`.
pub fn find_server(
    name: &str,
    env_var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, StackError> {
    if let Some(explicit) = env(env_var).filter(|v| !v.is_empty()) {
        let explicit = PathBuf::from(explicit);
        return if is_executable(&explicit) {
            Ok(explicit)
        } else {
            Err(StackError::ServerNotFound {
                name: name.to_string(),
                looked_in: format!("${env_var} = {}", explicit.display()),
            })
        };
    }
    let cache_bin = cache_dir(env).join("bin");
    let cached = cache_bin.join(name);
    if is_executable(&cached) {
        return Ok(cached);
    }
    let path_var = env("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| StackError::ServerNotFound {
            name: name.to_string(),
            looked_in: format!("${env_var}, {}, PATH", cache_bin.display()),
        })
}

/// The directory holding the daemon binaries: `$LOOPGATE_BIN_DIR`, else this executable's dir.
pub fn daemon_dir(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, StackError> {
    if let Some(dir) = env("LOOPGATE_BIN_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().map_err(|source| StackError::Io {
        context: "locating the loopgate executable".into(),
        source,
    })?;
    Ok(exe.parent().map(Path::to_path_buf).unwrap_or_default())
}

pub fn find_daemon(dir: &Path, name: &str) -> Result<PathBuf, StackError> {
    let path = dir.join(name);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(StackError::DaemonNotFound {
            name: name.to_string(),
            dir: dir.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::HashMap;

    fn exe(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn server_lookup_order_env_then_cache_then_path() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        std::fs::create_dir_all(cache.join("bin")).unwrap();
        let on_path = root.path().join("path");
        std::fs::create_dir_all(&on_path).unwrap();
        let explicit = exe(root.path(), "my-nats");
        let path_copy = exe(&on_path, "nats-server");
        let mut vars: HashMap<&str, String> = HashMap::new();
        vars.insert("LOOPGATE_CACHE", cache.display().to_string());
        vars.insert("PATH", on_path.display().to_string());
        let lookup = |vars: &HashMap<&str, String>| {
            let env = |k: &str| vars.get(k).cloned();
            find_server("nats-server", "LOOPGATE_NATS_SERVER", &env)
        };
        assert_eq!(lookup(&vars).unwrap(), path_copy);
        let cached = exe(&cache.join("bin"), "nats-server");
        assert_eq!(lookup(&vars).unwrap(), cached);
        vars.insert("LOOPGATE_NATS_SERVER", explicit.display().to_string());
        assert_eq!(lookup(&vars).unwrap(), explicit);
        vars.insert(
            "LOOPGATE_NATS_SERVER",
            root.path().join("missing").display().to_string(),
        );
        assert!(matches!(
            lookup(&vars),
            Err(StackError::ServerNotFound { .. })
        ));
    }

    #[test]
    fn missing_server_says_how_to_install() {
        let root = tempfile::tempdir().unwrap();
        let vars: HashMap<&str, String> = HashMap::from([
            ("LOOPGATE_CACHE", root.path().display().to_string()),
            ("PATH", root.path().display().to_string()),
        ]);
        let env = |k: &str| vars.get(k).cloned();
        let err = find_server("redis-server", "LOOPGATE_REDIS_SERVER", &env).unwrap_err();
        assert!(
            matches!(err, StackError::ServerNotFound { ref name, .. } if name == "redis-server")
        );
        assert!(err.to_string().contains("scripts/install-deps.sh services"));
    }

    #[test]
    fn daemons_must_exist_in_the_bin_dir() {
        let root = tempfile::tempdir().unwrap();
        exe(root.path(), MANAGER_BIN);
        assert!(find_daemon(root.path(), MANAGER_BIN).is_ok());
        assert!(matches!(
            find_daemon(root.path(), AUDITOR_BIN),
            Err(StackError::DaemonNotFound { .. })
        ));
    }
}
