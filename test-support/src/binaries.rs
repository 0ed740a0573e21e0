//! Locating server binaries (installed by scripts/install-deps.sh) and cargo-built workspace
//! binaries.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::errors::SupportError;

/// `$LOOPGATE_CACHE`, else `~/.cache/loopgate` (the same rule as scripts/install-deps.sh).
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LOOPGATE_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache").join("loopgate")
}

/// Finds an executable: `$env_var` if set (it must then exist), else `<cache>/bin/<name>`,
/// else the first `<name>` on `PATH`. `hint` tells the user how to install it.
pub fn find_binary(name: &str, env_var: &str, hint: &str) -> anyhow::Result<PathBuf> {
    let cache_path = cache_dir().join("bin").join(name);
    let not_found = || SupportError::BinaryNotFound {
        name: name.to_string(),
        env_var: env_var.to_string(),
        cache_path: cache_path.clone(),
        hint: hint.to_string(),
    };
    if let Some(explicit) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        let explicit = PathBuf::from(explicit);
        return if is_executable(&explicit) {
            Ok(explicit)
        } else {
            Err(not_found().into())
        };
    }
    if is_executable(&cache_path) {
        return Ok(cache_path);
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| not_found().into())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Path of a binary built by cargo in the same profile as the running test
/// (`loopgate-manager`, `loopgate-executor`, `loopgate-auditor`, `loopgate`).
///
/// A test executable lives in `<target>/<profile>/deps/`; the binaries live in
/// `<target>/<profile>/`. `LOOPGATE_BIN_DIR` overrides the directory.
pub fn workspace_bin(name: &str) -> anyhow::Result<PathBuf> {
    let dir = match std::env::var_os("LOOPGATE_BIN_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe()
                .map_err(|e| SupportError::io("locating the current test executable", e))?;
            profile_dir_of(&exe)
        }
    };
    let path = dir.join(name);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(SupportError::BinaryNotBuilt {
            name: name.to_string(),
            dir,
        }
        .into())
    }
}

/// `<target>/<profile>/deps/test-abc` -> `<target>/<profile>`; any other location -> its parent.
fn profile_dir_of(exe: &Path) -> PathBuf {
    let parent = exe.parent().unwrap_or_else(|| Path::new("."));
    if parent.file_name().is_some_and(|n| n == "deps") {
        parent.parent().unwrap_or(parent).to_path_buf()
    } else {
        parent.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn profile_dir_is_derived_from_test_exe_location() {
        let cases = [
            ("/t/debug/deps/support-1234", "/t/debug"),
            (
                "/t/x86_64-unknown-linux-gnu/release/deps/e2e-9",
                "/t/x86_64-unknown-linux-gnu/release",
            ),
            ("/t/debug/loopgate", "/t/debug"),
        ];
        for (exe, expected) in cases {
            assert_eq!(
                profile_dir_of(Path::new(exe)),
                PathBuf::from(expected),
                "{exe}"
            );
        }
    }

    #[test]
    fn missing_workspace_binary_is_binary_not_built() {
        let err = workspace_bin("definitely-not-a-loopgate-binary").unwrap_err();
        assert!(matches!(
            err.downcast_ref::<SupportError>(),
            Some(SupportError::BinaryNotBuilt { .. })
        ));
    }

    #[test]
    fn missing_server_binary_is_binary_not_found() {
        let err =
            find_binary("no-such-server-xyz", "LOOPGATE_NO_SUCH_SERVER_XYZ", "hint").unwrap_err();
        assert!(matches!(
            err.downcast_ref::<SupportError>(),
            Some(SupportError::BinaryNotFound { .. })
        ));
    }
}
