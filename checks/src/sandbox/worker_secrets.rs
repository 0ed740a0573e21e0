//! What a worker (the executor, the auditor) keeps from everything it starts — agents, checks,
//! self-checks: which of its host paths hold secrets (`secret_paths`, hidden in every sandbox
//! it starts), and its own process sealed at start-up (`seal_process`): the variables that
//! held secrets removed from its environment, and the process made non-dumpable, so that no
//! process of the same user (an unsandboxed check or agent, a direct child) can read
//! `/proc/<worker>/environ`, `mem` or attach to it, and no core dump carries a key.

use std::path::{Path, PathBuf};

/// Credential files and directories under a user's home that agents and checks never need
/// (CLI agents get a home of their own, checks a scratch one): loopgate's cache, SSH, cloud,
/// container, Kubernetes, package registry and git credentials, and the CLI agents' own
/// logins.
const HOME_CREDENTIALS: &[&str] = &[
    ".cache/loopgate",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".claude",
    ".claude.json",
    ".codex",
    ".local/share/opencode",
    ".config/opencode",
];

/// Where container platforms mount secrets.
const SECRET_MOUNTS: &[&str] = &["/run/secrets", "/var/run/secrets"];

/// Everything a worker knows about that what it starts must not see, before checking what
/// exists (`hidden_paths` does that at start-up): the worker's config file, the platform's
/// secret mounts, credentials under the worker's `home`, its key files (model API keys, the
/// auditor's signing key) and the config's own extra paths. The work dir and the host's
/// sockets are added by every sandbox's probe.
pub fn secret_paths(
    config_path: Option<&Path>,
    home: Option<&str>,
    key_files: &[PathBuf],
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    paths.extend(config_path.map(Path::to_path_buf));
    paths.extend(SECRET_MOUNTS.iter().map(PathBuf::from));
    if let Some(home) = home.map(str::trim).filter(|h| !h.is_empty() && *h != "/") {
        paths.extend(HOME_CREDENTIALS.iter().map(|rel| Path::new(home).join(rel)));
    }
    paths.extend(key_files.iter().cloned());
    paths.extend(extra.iter().cloned());
    paths
}

/// The worker's process could not be sealed: it must not start.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// Changing the environment is only sound while the process has one thread.
    #[error(
        "the process already runs {threads} threads; its secrets must be removed from its \
         environment before any thread starts"
    )]
    Threaded { threads: usize },
    #[error("reading this process's threads from /proc/self/task: {0}")]
    Threads(#[source] std::io::Error),
    #[error("making the process non-dumpable (prctl PR_SET_DUMPABLE): {0}")]
    Dumpable(#[source] std::io::Error),
}

impl SealError {
    /// Nothing here gets better by trying again.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// Seal this worker before it starts anything: remove `secret_vars` (the variables its
/// secrets were read from, read once already) from its environment, so nothing it starts
/// inherits them and nothing in it reads them again, and make it non-dumpable
/// (`PR_SET_DUMPABLE` 0): `/proc/<pid>/environ` — which keeps the environment the process
/// started with, removed variables included — `mem`, `maps` and ptrace are then closed to
/// every process without `CAP_SYS_PTRACE`, processes of the worker's own user included, and
/// no core dump is written.
///
/// Call it from `main` while the process has one thread (before the async runtime and
/// telemetry start): the environment is process-wide and changing it races with any thread
/// reading it. It refuses to change anything otherwise.
pub fn seal_process<'a>(secret_vars: impl IntoIterator<Item = &'a str>) -> Result<(), SealError> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map_err(SealError::Threads)?
        .count();
    if threads != 1 {
        return Err(SealError::Threaded { threads });
    }
    for name in secret_vars {
        if !name.is_empty() && !name.contains(['=', '\0']) {
            // Edition 2021: safe; sound here because the process has one thread (above).
            std::env::remove_var(name);
        }
    }
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|errno| SealError::Dumpable(errno.into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn secret_paths_table() {
        let all = secret_paths(
            Some(Path::new("/etc/loopgate/executor.toml")),
            Some("/home/w"),
            &[PathBuf::from("/keys/openai")],
            &[PathBuf::from(".loopgate")],
        );
        for want in [
            "/etc/loopgate/executor.toml",
            "/run/secrets",
            "/var/run/secrets",
            "/home/w/.cache/loopgate",
            "/home/w/.ssh",
            "/keys/openai",
            ".loopgate",
        ] {
            assert!(
                all.contains(&PathBuf::from(want)),
                "missing {want}: {all:?}"
            );
        }
        // A home of `/` (or none) adds no home paths: `/.ssh` would be noise, `/` fatal.
        for home in [None, Some("/"), Some(" ")] {
            let paths = secret_paths(None, home, &[], &[]);
            assert_eq!(
                paths,
                vec![
                    PathBuf::from("/run/secrets"),
                    PathBuf::from("/var/run/secrets")
                ]
            );
        }
    }

    #[test]
    fn sealing_a_threaded_process_is_refused_and_changes_nothing() {
        // A second thread for the whole call, whatever the test harness runs on.
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv());
        let before = rustix::process::dumpable_behavior().unwrap();
        let err = seal_process(["PATH"]).unwrap_err();
        stop.send(()).unwrap();
        other.join().unwrap().unwrap();
        assert!(matches!(err, SealError::Threaded { .. }), "{err}");
        assert!(!err.is_retryable());
        assert!(std::env::var_os("PATH").is_some());
        assert_eq!(rustix::process::dumpable_behavior().unwrap(), before);
    }
}
