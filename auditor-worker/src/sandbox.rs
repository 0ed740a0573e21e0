//! How acceptance checks are isolated on this host, decided once at start-up by probing.
//!
//! Preferred: bubblewrap (`bwrap`, Debian package `bubblewrap`) with no network
//! (`--unshare-net`: only a private loopback), private pid/ipc/uts namespaces, a read-only view
//! of the host filesystem, a fresh `/tmp`, `/dev` and `/proc`, and only the check's scratch copy
//! and home writable; run as an unprivileged user (`check_user`, default `nobody`) when the
//! auditor runs as root. Whatever the host cannot provide is dropped in this order — the
//! privilege drop (bwrap as root still has no network), then bubblewrap itself (e.g. user
//! namespaces unavailable to an unprivileged auditor) — and every report then says so in its
//! gaps. `sandbox = "required"` turns a missing network sandbox into `inconclusive` checks
//! instead; `sandbox = "off"` skips bubblewrap. Timeouts, output caps, process-group kills and
//! the scrubbed environment (checks.rs) apply in every mode.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::checks::{run_check, CheckEnd, CheckSpec, DEFAULT_CHECK_PATH};

/// Default unprivileged user for checks when the auditor runs as root.
pub const DEFAULT_CHECK_USER: &str = "nobody";
/// uid/gid used when `nobody` is not in /etc/passwd.
const NOBODY_ID: u32 = 65534;
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Use bubblewrap where the host allows it, else run checks unisolated (said in reports).
    #[default]
    Auto,
    /// No network sandbox, no check: checks become inconclusive.
    Required,
    /// Never use bubblewrap.
    Off,
}

/// What the config asks for; `probe` turns it into a [`Sandbox`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// User name or `uid:gid` for checks when the auditor runs as root.
    pub check_user: Option<String>,
    /// bubblewrap binary; default `bwrap` on PATH.
    pub bwrap: Option<PathBuf>,
}

/// The isolation checks actually get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// bubblewrap, when checks run without network.
    pub bwrap: Option<PathBuf>,
    /// uid/gid checks run as; `None`: the auditor's own user.
    pub run_as: Option<(u32, u32)>,
    /// Checks that cannot get a network sandbox are not run (inconclusive).
    pub required: bool,
    /// What this host could not provide, one line each; copied into every report's gaps.
    pub limitations: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("check user '{0}' not found in /etc/passwd (use a name or uid:gid)")]
    UnknownUser(String),
    #[error("preparing the sandbox probe under {path:?}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no way to run acceptance checks here: {0}")]
    Unusable(String),
}

impl Sandbox {
    /// No bubblewrap, the auditor's own user (tests, and `sandbox = "off"` before probing).
    pub fn unisolated(reason: &str) -> Sandbox {
        Sandbox {
            bwrap: None,
            run_as: None,
            required: false,
            limitations: vec![format!(
                "acceptance checks ran without network isolation: {reason}"
            )],
        }
    }

    /// Why a check may not run at all under this sandbox.
    pub fn refusal(&self) -> Option<String> {
        (self.required && self.bwrap.is_none()).then(|| {
            format!(
                "sandbox required but unavailable ({})",
                self.limitations.join("; ")
            )
        })
    }
}

/// Program and arguments that run `command` under `sandbox` in `cwd`. With bubblewrap the
/// launcher shell opens `status_file` as fd 3 for `--json-status-fd`, so a sandbox that never
/// started its child can be told apart from a failing check.
pub fn launch_args(
    sandbox: &Sandbox,
    command: &str,
    cwd: &Path,
    home: &Path,
    status_file: &Path,
) -> (OsString, Vec<OsString>) {
    let Some(bwrap) = &sandbox.bwrap else {
        return ("sh".into(), vec!["-c".into(), command.into()]);
    };
    let mut args: Vec<OsString> = vec![
        "-c".into(),
        "exec 3>\"$1\" || exit 125; shift; exec \"$@\"".into(),
        "loopgate-check".into(),
        status_file.into(),
        bwrap.into(),
    ];
    for flag in [
        "--die-with-parent",
        "--new-session",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-uts",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ] {
        args.push(flag.into());
    }
    for dir in [cwd, home] {
        args.extend(["--bind".into(), dir.into(), dir.into()]);
    }
    args.extend(["--chdir".into(), cwd.into()]);
    args.extend(["--json-status-fd".into(), "3".into(), "--".into()]);
    args.extend(["sh".into(), "-c".into(), command.into()]);
    ("sh".into(), args)
}

/// Did bubblewrap start the check? (Its status fd reports the child's pid once it runs.)
pub fn sandbox_started(status: &str) -> bool {
    status.contains("\"child-pid\"")
}

/// Look `user` up: a name in `passwd` text or a literal `uid:gid`.
pub fn resolve_user(user: &str, passwd: &str) -> Option<(u32, u32)> {
    if let Some((uid, gid)) = user.split_once(':') {
        if let (Ok(uid), Ok(gid)) = (uid.parse(), gid.parse()) {
            return Some((uid, gid));
        }
    }
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        match fields.as_slice() {
            [name, _, uid, gid, ..] if *name == user => {
                Some((uid.parse().ok()?, gid.parse().ok()?))
            }
            _ => None,
        }
    })
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Make `path` (recursively) owned by `owner`, so a check running as that user can write it.
pub fn chown_tree(path: &Path, owner: (u32, u32)) -> std::io::Result<()> {
    let mut stack = vec![path.to_path_buf()];
    while let Some(current) = stack.pop() {
        let metadata = std::fs::symlink_metadata(&current)?;
        if metadata.file_type().is_symlink() {
            continue;
        }
        std::os::unix::fs::chown(&current, Some(owner.0), Some(owner.1))?;
        if metadata.is_dir() {
            for entry in std::fs::read_dir(&current)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// Let a check running as `run_as` use `owned` (chowned to it) inside `parent`, which stays
/// the auditor's and becomes traverse-only for others (0711): the check can reach its own
/// copy but can neither list nor change its siblings (the pristine snapshot, other checks).
pub fn prepare_check_dir(
    parent: &Path,
    owned: &[&Path],
    run_as: Option<(u32, u32)>,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Some(owner) = run_as else {
        return Ok(());
    };
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o711))?;
    for path in owned {
        chown_tree(path, owner)?;
    }
    Ok(())
}

struct Candidate {
    bwrap: Option<PathBuf>,
    run_as: Option<(u32, u32)>,
}

/// Try `candidate` on a throwaway scratch dir under `work_dir`: `Ok(())` when a check ran.
async fn try_candidate(candidate: &Candidate, work_dir: &Path) -> Result<(), String> {
    let scratch = tempfile::Builder::new()
        .prefix("sandbox-probe-")
        .tempdir_in(work_dir)
        .map_err(|e| format!("scratch dir: {e}"))?;
    let ws = scratch.path().join("ws");
    let home = scratch.path().join("home");
    let status = scratch.path().join("status");
    for dir in [&ws, &home] {
        std::fs::create_dir_all(dir).map_err(|e| format!("scratch dir: {e}"))?;
    }
    std::fs::write(&status, b"").map_err(|e| format!("scratch dir: {e}"))?;
    // The same layout as an audit's scratch dir (see `prepare_check_dir`).
    prepare_check_dir(scratch.path(), &[&ws, &home, &status], candidate.run_as)
        .map_err(|e| format!("preparing scratch: {e}"))?;
    let sandbox = Sandbox {
        bwrap: candidate.bwrap.clone(),
        run_as: candidate.run_as,
        required: false,
        limitations: Vec::new(),
    };
    let run = run_check(&CheckSpec {
        command: "echo ok > probe && test -s probe",
        cwd: &ws,
        home: &home,
        path_var: DEFAULT_CHECK_PATH,
        timeout: PROBE_TIMEOUT,
        sandbox: &sandbox,
        status_file: &status,
    })
    .await;
    match run.end {
        CheckEnd::Exited(Some(0)) => Ok(()),
        end => {
            let output = String::from_utf8_lossy(&run.output);
            let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!("{end:?} {}", first.trim()).trim().to_string())
        }
    }
}

/// Decide how checks run here (see the module docs). Fails only when no way works at all.
pub async fn probe(settings: &SandboxSettings, work_dir: &Path) -> Result<Sandbox, SandboxError> {
    std::fs::create_dir_all(work_dir).map_err(|source| SandboxError::Io {
        path: work_dir.to_path_buf(),
        source,
    })?;
    let is_root = rustix::process::geteuid().is_root();
    let run_as = if is_root {
        let name = settings.check_user.as_deref().unwrap_or(DEFAULT_CHECK_USER);
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        match resolve_user(name, &passwd) {
            Some(ids) => Some(ids),
            None if settings.check_user.is_none() => Some((NOBODY_ID, NOBODY_ID)),
            None => return Err(SandboxError::UnknownUser(name.to_string())),
        }
    } else {
        None
    };
    let bwrap = match settings.mode {
        SandboxMode::Off => None,
        _ => settings.bwrap.clone().or_else(|| find_on_path("bwrap")),
    };
    let mut candidates = Vec::new();
    if bwrap.is_some() {
        candidates.push(Candidate {
            bwrap: bwrap.clone(),
            run_as,
        });
        if run_as.is_some() {
            candidates.push(Candidate {
                bwrap: bwrap.clone(),
                run_as: None,
            });
        }
    }
    candidates.push(Candidate {
        bwrap: None,
        run_as,
    });
    if run_as.is_some() {
        candidates.push(Candidate {
            bwrap: None,
            run_as: None,
        });
    }
    let mut failures: Vec<String> = Vec::new();
    for candidate in &candidates {
        match try_candidate(candidate, work_dir).await {
            Ok(()) => {
                return Ok(describe(
                    settings,
                    is_root,
                    bwrap.is_some(),
                    candidate,
                    &failures,
                ));
            }
            Err(reason) => {
                let how = match (&candidate.bwrap, candidate.run_as) {
                    (Some(_), Some((uid, _))) => format!("bubblewrap as uid {uid}"),
                    (Some(_), None) => "bubblewrap as the auditor's user".to_string(),
                    (None, Some((uid, _))) => format!("plain shell as uid {uid}"),
                    (None, None) => "plain shell".to_string(),
                };
                tracing::warn!(how = %how, reason = %reason, "sandbox probe failed");
                failures.push(format!("{how}: {reason}"));
            }
        }
    }
    Err(SandboxError::Unusable(failures.join("; ")))
}

fn describe(
    settings: &SandboxSettings,
    is_root: bool,
    bwrap_found: bool,
    chosen: &Candidate,
    failures: &[String],
) -> Sandbox {
    let mut limitations = Vec::new();
    let failed = if failures.is_empty() {
        String::new()
    } else {
        format!(" ({})", failures.join("; "))
    };
    if chosen.bwrap.is_none() {
        let why = match settings.mode {
            SandboxMode::Off => "sandbox = \"off\" in the auditor config".to_string(),
            _ if !bwrap_found => "bubblewrap (bwrap) is not installed".to_string(),
            _ => format!("bubblewrap cannot run on this host{failed}"),
        };
        limitations.push(format!(
            "acceptance checks ran without network isolation: {why}"
        ));
    }
    if is_root && chosen.run_as.is_none() {
        limitations.push(format!(
            "acceptance checks ran as root: the check user cannot use the work dir{failed}"
        ));
    }
    Sandbox {
        bwrap: chosen.bwrap.clone(),
        run_as: chosen.run_as,
        required: settings.mode == SandboxMode::Required,
        limitations,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn users_resolve_by_name_or_ids() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/:/usr/sbin/nologin\n";
        assert_eq!(resolve_user("nobody", passwd), Some((65534, 65534)));
        assert_eq!(resolve_user("1000:1001", passwd), Some((1000, 1001)));
        assert_eq!(resolve_user("ghost", passwd), None);
        assert_eq!(resolve_user("12:x", passwd), None);
    }

    #[test]
    fn bubblewrap_launch_isolates_network_and_binds_only_the_scratch() {
        let sandbox = Sandbox {
            bwrap: Some("/usr/bin/bwrap".into()),
            run_as: Some((65534, 65534)),
            required: false,
            limitations: vec![],
        };
        let (program, args) = launch_args(
            &sandbox,
            "pytest -q",
            Path::new("/w/ws"),
            Path::new("/w/home"),
            Path::new("/w/status"),
        );
        assert_eq!(program, "sh");
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        for needle in [
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "--ro-bind / /",
            "--bind /w/ws /w/ws",
            "--bind /w/home /w/home",
            "--chdir /w/ws",
            "--json-status-fd 3 -- sh -c pytest -q",
        ] {
            assert!(joined.contains(needle), "missing {needle}: {joined}");
        }
        assert_eq!(args[3], "/w/status");
        let (program, args) = launch_args(
            &Sandbox::unisolated("test"),
            "true",
            Path::new("/w"),
            Path::new("/h"),
            Path::new("/s"),
        );
        assert_eq!(
            (program, args),
            ("sh".into(), vec!["-c".into(), "true".into()])
        );
    }

    #[test]
    fn status_and_refusal() {
        assert!(sandbox_started("{ \"child-pid\": 12 }\n"));
        assert!(!sandbox_started(""));
        let mut required = Sandbox::unisolated("no bwrap");
        assert_eq!(required.refusal(), None);
        required.required = true;
        assert!(required.refusal().unwrap().contains("no bwrap"));
    }
}
