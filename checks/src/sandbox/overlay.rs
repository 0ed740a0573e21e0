//! Layered check copies: instead of copying the audited tree into every check's directory, the
//! tree is prepared once per audit as the read-only lower layer of an overlay (see
//! `check_base.rs`) and each check gets its own empty upper layer, so a check's private copy
//! costs a mount, not a copy of the tree.
//!
//! bubblewrap 0.8 has no overlay options, and loopgate code may not call `unshare(2)` itself
//! (no unsafe code), so the overlay is mounted by util-linux: the check's launcher runs as
//! `unshare -r --mount`, i.e. in a user namespace of its own where it is root over nothing but
//! its own uid, mounts the overlay there (unprivileged overlayfs, Linux 5.11+, with
//! `userxattr`) and execs bubblewrap, which drops to the check user (`--unshare-user --uid`)
//! with no capabilities and the host read-only as always. The mount lives only in that mount
//! namespace and disappears with the check's last process; the lower layer is read-only both
//! to overlayfs (it never writes a lower layer) and inside bubblewrap (the `--ro-bind / /`).
//! Whatever the check writes lands in its own upper directory, removed with it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The util-linux programs a layered launch needs, found at probe time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayTools {
    pub unshare: PathBuf,
    pub mount: PathBuf,
}

/// One check's layers: the audit's shared read-only `lower` tree, the check's own `upper`
/// and `work` directories (same filesystem, owned by the check user) and the mount point.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub(crate) lower: PathBuf,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
}

/// Can `path` go into overlayfs mount options as it is (no separators or escapes)?
pub(crate) fn is_mountable(path: &Path) -> bool {
    path.to_str().is_some_and(|p| {
        p.starts_with('/')
            && !p
                .chars()
                .any(|c| matches!(c, ',' | ':' | '\\' | '=') || c.is_whitespace() || c.is_control())
    })
}

impl Layer {
    /// The overlayfs mount options; None when a path cannot be written into them.
    pub(crate) fn options(&self) -> Option<String> {
        [&self.lower, &self.upper, &self.work]
            .iter()
            .all(|p| is_mountable(p))
            .then(|| {
                format!(
                    "lowerdir={},upperdir={},workdir={},userxattr",
                    self.lower.display(),
                    self.upper.display(),
                    self.work.display()
                )
            })
    }
}

/// The launcher for a layered check: `unshare -r --mount -- sh -c <script> loopgate-check
/// <status> <mount> <options> <target> <bwrap...>`. The script opens the status file as fd 3
/// (for `--json-status-fd`), mounts the overlay on `target` and execs the rest; it exits 125
/// when either fails, which leaves the status without an exit code (`SandboxFailed`).
pub(crate) fn layered_launcher(
    tools: &OverlayTools,
    bwrap: &Path,
    options: &str,
    target: &Path,
    status_file: &Path,
    ids: (u32, u32),
) -> (OsString, Vec<OsString>) {
    let args: Vec<OsString> = vec![
        "-r".into(),
        "--mount".into(),
        "--".into(),
        "sh".into(),
        "-c".into(),
        concat!(
            "exec 3>\"$1\" || exit 125; ",
            "\"$2\" -t overlay -o \"$3\" overlay \"$4\" || exit 125; ",
            "shift 4; exec \"$@\""
        )
        .into(),
        "loopgate-check".into(),
        status_file.into(),
        tools.mount.clone().into(),
        options.into(),
        target.into(),
        bwrap.into(),
    ];
    let mut args = args;
    // bubblewrap leaves the launcher's namespace root behind for the check user.
    args.extend(user_flags(ids));
    (tools.unshare.clone().into(), args)
}

/// bubblewrap's flags to run as `ids` in a user namespace of its own (nested in the
/// launcher's): the check has no capabilities and its real uid is the check user's.
fn user_flags((uid, gid): (u32, u32)) -> Vec<OsString> {
    vec![
        "--unshare-user".into(),
        "--uid".into(),
        uid.to_string().into(),
        "--gid".into(),
        gid.to_string().into(),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mount_options_refuse_paths_that_would_split_them() {
        let layer = |lower: &str| Layer {
            lower: lower.into(),
            upper: "/w/check-0/upper".into(),
            work: "/w/check-0/work".into(),
        };
        assert_eq!(
            layer("/w/snapshot").options().unwrap(),
            "lowerdir=/w/snapshot,upperdir=/w/check-0/upper,workdir=/w/check-0/work,userxattr"
        );
        for bad in [
            "/w/a,b", "/w/a:b", "/w/a b", "relative", "/w/a=b", "/w/a\\b",
        ] {
            assert_eq!(layer(bad).options(), None, "{bad}");
        }
    }
}
