//! The isolation checks get, and how a check is launched under it: bubblewrap arguments,
//! the started-status file, the unprivileged check user and the scratch-dir layout it may use.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use loopgate_common::config::SandboxMode;

use crate::sandbox::confine::{confinement_flags, is_hidden, HiddenPath};
use crate::sandbox::overlay::{layered_launcher, OverlayTools};

/// Default unprivileged user for checks when the worker runs as root.
pub(crate) const DEFAULT_CHECK_USER: &str = "nobody";

/// What the config asks for; `probe` turns it into a [`Sandbox`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// User name or `uid:gid` for checks when the worker runs as root.
    pub check_user: Option<String>,
    /// bubblewrap binary; default `bwrap` on PATH.
    pub bwrap: Option<PathBuf>,
}

/// Is `user` usable as `check_user`: a name or `uid:gid`, one word? (Whether it exists is
/// found out by the probe.)
pub fn is_valid_check_user(user: &str) -> bool {
    !user.trim().is_empty() && !user.contains(char::is_whitespace)
}

/// The isolation checks actually get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// bubblewrap, when checks run without network.
    pub bwrap: Option<PathBuf>,
    /// uid/gid checks run as; `None`: the worker's own user.
    pub run_as: Option<(u32, u32)>,
    /// Checks that cannot get a network sandbox are not run (inconclusive).
    pub required: bool,
    /// What this host could not provide, one line each; copied into every report's gaps.
    pub limitations: Vec<String>,
    /// With bubblewrap: checks can run on a layered copy (an overlay over a tree prepared once
    /// per audit, see `overlay.rs`) instead of a full copy each; `None`: full copies.
    pub overlay: Option<OverlayTools>,
    /// With bubblewrap: what checks must not see (absolute, existing, none inside another):
    /// the worker's secrets, its work dir (a check gets its own directories bound back in)
    /// and the host's sockets (`confine.rs`).
    pub hidden: Vec<HiddenPath>,
    /// With bubblewrap: checks share the worker's network. The auditor's never do; the
    /// executor's self-checks have the network exactly when its agent's `shell` has it.
    pub network: bool,
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
    /// No bubblewrap, the worker's own user (tests, and `sandbox = "off"` before probing).
    pub fn unisolated(reason: &str) -> Sandbox {
        Sandbox {
            bwrap: None,
            run_as: None,
            required: false,
            limitations: vec![format!(
                "acceptance checks ran without network isolation: {reason}"
            )],
            overlay: None,
            hidden: Vec::new(),
            network: false,
        }
    }

    /// Is `path` out of a check's sight here: under `/tmp` (fresh inside) or a hidden path?
    /// Never without bubblewrap.
    pub fn hides(&self, path: &Path) -> bool {
        self.bwrap.is_some() && is_hidden(path, &self.hidden)
    }

    /// Do checks run here as plain child processes of the worker, outside bubblewrap? (A
    /// sandbox that is required and missing runs none at all.)
    pub fn runs_unsandboxed(&self) -> bool {
        self.bwrap.is_none() && !self.required
    }

    /// Can checks run on layered copies here (bubblewrap plus a working overlay)?
    pub fn layers(&self) -> bool {
        self.bwrap.is_some() && self.overlay.is_some()
    }

    /// Whether checks run isolated here (under bubblewrap: no network, private namespaces, a
    /// read-only host); recorded on every evidence item.
    pub fn isolates(&self) -> bool {
        self.bwrap.is_some()
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
/// started its child can be told apart from a failing check. With `layer` (overlayfs mount
/// options, and a sandbox that [`Sandbox::layers`]) the launcher first mounts the check's
/// overlay on `cwd` in a namespace of its own (`overlay.rs`).
pub(crate) fn launch_args(
    sandbox: &Sandbox,
    command: &str,
    cwd: &Path,
    home: &Path,
    status_file: &Path,
    layer: Option<&str>,
) -> (OsString, Vec<OsString>) {
    let Some(bwrap) = &sandbox.bwrap else {
        return ("sh".into(), vec!["-c".into(), command.into()]);
    };
    let (program, mut args) = match (layer, &sandbox.overlay) {
        (Some(options), Some(tools)) => {
            let ids = sandbox.run_as.unwrap_or_else(own_ids);
            layered_launcher(tools, bwrap, options, cwd, status_file, ids)
        }
        _ => (
            "sh".into(),
            vec![
                "-c".into(),
                "exec 3>\"$1\" || exit 125; shift; exec \"$@\"".into(),
                "loopgate-check".into(),
                status_file.into(),
                bwrap.into(),
            ],
        ),
    };
    args.extend(confinement_flags(sandbox.network, &sandbox.hidden));
    for dir in [cwd, home] {
        args.extend(["--bind".into(), dir.into(), dir.into()]);
    }
    args.extend(["--chdir".into(), cwd.into()]);
    args.extend(["--json-status-fd".into(), "3".into(), "--".into()]);
    args.extend(["sh".into(), "-c".into(), command.into()]);
    (program, args)
}

/// This process's effective uid and gid.
pub(crate) fn own_ids() -> (u32, u32) {
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
}

/// Did bubblewrap run the check to its end? Its status fd gets the child's pid as soon as the
/// sandbox's first process is cloned, before that process sets the sandbox up (mounts), and
/// the child's exit code only once the command itself has run; a setup that failed (exit 1,
/// `bwrap: Can't bind mount …`) leaves the pid without an exit code.
pub(crate) fn sandbox_ran_command(status: &str) -> bool {
    status.contains("\"exit-code\"")
}

/// Look `user` up: a name in `passwd` text or a literal `uid:gid`.
pub(crate) fn resolve_user(user: &str, passwd: &str) -> Option<(u32, u32)> {
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

pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Make `path` (recursively) owned by `owner`, so a check running as that user can write it.
/// By directory handle, never following a symlink (`loopgate_workspace_walk::chown_tree`): the
/// tree may be a workspace the agent is writing in at the same moment.
pub(crate) fn chown_tree(path: &Path, owner: (u32, u32)) -> std::io::Result<()> {
    loopgate_workspace_walk::chown_tree(path, owner)
}

/// Let a check running as `run_as` use `owned` (chowned to it) inside `parent`, which stays
/// the worker's and becomes traverse-only for others (0711): the check can reach its own
/// copy but can neither list nor change its siblings (the pristine snapshot, other checks).
pub(crate) fn prepare_check_dir(
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
            overlay: None,
            hidden: vec![
                HiddenPath::Dir("/w".into()),
                HiddenPath::File("/etc/auditor.key".into()),
            ],
            network: false,
        };
        let (program, args) = launch_args(
            &sandbox,
            "pytest -q",
            Path::new("/w/ws"),
            Path::new("/w/home"),
            Path::new("/w/status"),
            None,
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
            // Hidden first, then the check's own directories bound back in.
            "--tmpfs /w --ro-bind /dev/null /etc/auditor.key --bind /w/ws /w/ws --bind /w/home /w/home",
            "--chdir /w/ws",
            "--json-status-fd 3 -- sh -c pytest -q",
        ] {
            assert!(joined.contains(needle), "missing {needle}: {joined}");
        }
        assert_eq!(args[3], "/w/status");
        // Layered: the launcher mounts the overlay, bubblewrap drops to the check user.
        let layered = Sandbox {
            overlay: Some(OverlayTools {
                unshare: "/usr/bin/unshare".into(),
                mount: "/usr/bin/mount".into(),
            }),
            ..sandbox.clone()
        };
        let (program, args) = launch_args(
            &layered,
            "pytest -q",
            Path::new("/w/ws"),
            Path::new("/w/home"),
            Path::new("/w/status"),
            Some("lowerdir=/w/base,upperdir=/w/up,workdir=/w/wk,userxattr"),
        );
        assert_eq!(program, "/usr/bin/unshare");
        let joined = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        for needle in [
            "-r --mount -- sh -c",
            "loopgate-check /w/status /usr/bin/mount lowerdir=/w/base,upperdir=/w/up,workdir=/w/wk,userxattr /w/ws /usr/bin/bwrap --unshare-user --uid 65534 --gid 65534 --die-with-parent",
            "--unshare-net",
            "--ro-bind / /",
            "--bind /w/ws /w/ws",
            "--json-status-fd 3 -- sh -c pytest -q",
        ] {
            assert!(joined.contains(needle), "missing {needle}: {joined}");
        }
        let (program, args) = launch_args(
            &Sandbox::unisolated("test"),
            "true",
            Path::new("/w"),
            Path::new("/h"),
            Path::new("/s"),
            None,
        );
        assert_eq!(
            (program, args),
            ("sh".into(), vec!["-c".into(), "true".into()])
        );
    }

    #[test]
    fn status_and_refusal() {
        // What bubblewrap 0.8 writes to its status fd, as seen on this host.
        let pid = "{ \"child-pid\": 31253, \"mnt-namespace\": 4026532175 }\n";
        let cases = [
            // The launcher failed before bubblewrap (overlay mount, status file).
            ("", false),
            // The sandbox's setup failed after the clone (`Can't bind mount`): pid, no exit.
            (pid, false),
            (&*format!("{pid}{{ \"exit-code\": 1 }}\n"), true),
            (&*format!("{pid}{{ \"exit-code\": 137 }}\n"), true),
        ];
        for (status, ran) in cases {
            assert_eq!(sandbox_ran_command(status), ran, "{status:?}");
        }
        let mut required = Sandbox::unisolated("no bwrap");
        assert_eq!(required.refusal(), None);
        required.required = true;
        assert!(required.refusal().unwrap().contains("no bwrap"));
    }
}
