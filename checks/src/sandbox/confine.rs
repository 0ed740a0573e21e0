//! The one definition of what a sandboxed process sees of the host, shared by every sandbox
//! (the auditor's checks, the executor's agents and its self-checks): the bubblewrap flags it
//! starts with, and the host paths it must not see — the caller's secrets (config files, keys,
//! credential directories, the work dir's other trees) and the host's UNIX sockets (the
//! per-user runtime dirs, D-Bus, docker, podman, containerd) — each replaced by an empty
//! directory or an empty file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What is bound (read-only) over hidden files: reads as empty, writes go nowhere, and
/// nothing is left behind in the work dir.
pub(crate) const EMPTY_FILE: &str = "/dev/null";

/// Host paths that lead to services outside the sandbox through UNIX sockets: the per-user
/// runtime dirs (session D-Bus, rootless podman and docker, pulse, ...), the system D-Bus, and
/// the docker, podman, containerd and CRI-O sockets. Hidden in every sandbox where they exist
/// at start-up (`/tmp/.X11-unix` goes with the fresh `/tmp`; abstract sockets with the private
/// network namespace).
pub(crate) const HOST_SOCKETS: &[&str] = &[
    "/run/user",
    "/run/dbus",
    "/var/run/dbus",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/docker",
    "/run/podman",
    "/var/run/podman",
    "/run/containerd",
    "/run/crio",
];

/// A host path a sandboxed process must not see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HiddenPath {
    /// A directory: an empty tmpfs takes its place.
    Dir(PathBuf),
    /// A file (or socket): an empty file takes its place.
    File(PathBuf),
}

impl HiddenPath {
    pub fn path(&self) -> &Path {
        match self {
            HiddenPath::Dir(path) | HiddenPath::File(path) => path,
        }
    }
}

/// `candidates` as a sandbox hides them: made absolute (`relative_to`) and canonical,
/// missing ones dropped, duplicates and paths inside another hidden directory dropped, `/`
/// refused (hiding it would hide the shell itself). Directories first in path order, so a
/// file inside a hidden directory never needs a mount of its own.
pub fn hidden_paths(candidates: &[PathBuf], relative_to: &Path) -> Vec<HiddenPath> {
    let mut found: Vec<HiddenPath> = Vec::new();
    for candidate in candidates {
        let absolute = if candidate.is_absolute() {
            candidate.clone()
        } else {
            relative_to.join(candidate)
        };
        let Ok(canonical) = absolute.canonicalize() else {
            continue;
        };
        if canonical == Path::new("/") {
            continue;
        }
        let Ok(metadata) = std::fs::metadata(&canonical) else {
            continue;
        };
        found.push(if metadata.is_dir() {
            HiddenPath::Dir(canonical)
        } else {
            HiddenPath::File(canonical)
        });
    }
    normalize(found)
}

/// Everything a sandbox on this host hides: `hidden` (from [`hidden_paths`]), the work dir
/// (canonical: other episodes, other audits, warm trees; a process gets its own directories
/// bound back in) and the host sockets that exist.
pub(crate) fn with_work_dir_and_sockets(
    mut hidden: Vec<HiddenPath>,
    work_dir: &Path,
) -> Vec<HiddenPath> {
    let sockets: Vec<PathBuf> = HOST_SOCKETS.iter().map(PathBuf::from).collect();
    hidden.extend(hidden_paths(&sockets, Path::new("/")));
    hidden.push(HiddenPath::Dir(work_dir.to_path_buf()));
    normalize(hidden)
}

/// The part of `hidden` a process of `ids` (uid, gid) could reach at all: a path below a
/// directory that user may not search is out of its sight already, and bubblewrap, running as
/// that user, could not make the mount point that would hide it (`Can't mkdir parents`).
/// `None` (the worker's own user) keeps everything; a directory that cannot be read for its
/// mode counts as searchable, so the path stays hidden.
pub(crate) fn reachable_by(hidden: &[HiddenPath], ids: Option<(u32, u32)>) -> Vec<HiddenPath> {
    let Some((uid, gid)) = ids else {
        return hidden.to_vec();
    };
    hidden
        .iter()
        .filter(|h| {
            h.path()
                .ancestors()
                .skip(1)
                .all(|dir| may_search(dir, uid, gid))
        })
        .cloned()
        .collect()
}

/// May `uid` (with primary group `gid`) search `dir`, by its owner, group and other bits?
fn may_search(dir: &Path, uid: u32, gid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return true;
    };
    let bit = if meta.uid() == uid {
        0o100
    } else if meta.gid() == gid {
        0o010
    } else {
        0o001
    };
    meta.mode() & bit != 0
}

/// [`hidden_paths`]' ordering and nesting rules on an already resolved list.
pub(crate) fn normalize(mut hidden: Vec<HiddenPath>) -> Vec<HiddenPath> {
    hidden.sort_by(|a, b| a.path().cmp(b.path()));
    hidden.dedup_by(|a, b| a.path() == b.path());
    let dirs: Vec<PathBuf> = hidden
        .iter()
        .filter_map(|h| match h {
            HiddenPath::Dir(dir) => Some(dir.clone()),
            HiddenPath::File(_) => None,
        })
        .collect();
    hidden.retain(|h| {
        !dirs
            .iter()
            .any(|dir| h.path() != dir && h.path().starts_with(dir))
    });
    hidden
}

/// Is `path` out of sight in a bubblewrap sandbox hiding `hidden`: under `/tmp` (fresh
/// inside) or a hidden path?
pub(crate) fn is_hidden(path: &Path, hidden: &[HiddenPath]) -> bool {
    path.starts_with("/tmp") || hidden.iter().any(|h| path.starts_with(h.path()))
}

/// The bubblewrap flags every sandboxed process starts with (checks and agents alike): it dies
/// with its parent and runs in a session of its own, in private ipc, pid and uts namespaces —
/// and a private network namespace (only a loopback of its own) unless `network` — with the
/// host filesystem read-only, fresh `/dev`, `/proc` (only the sandbox's own processes) and
/// `/tmp`, and every `hidden` path replaced by an empty directory or file. With
/// `--unshare-pid` bubblewrap is pid 1 of the namespace: when the sandboxed command ends or
/// bubblewrap is killed, the kernel kills everything left inside, processes that called
/// `setsid` included. What the process may write is bound in after these.
pub(crate) fn confinement_flags(network: bool, hidden: &[HiddenPath]) -> Vec<OsString> {
    let mut flags: Vec<&str> = vec!["--die-with-parent", "--new-session"];
    if !network {
        flags.push("--unshare-net");
    }
    flags.extend([
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
    ]);
    let mut flags: Vec<OsString> = flags.into_iter().map(OsString::from).collect();
    for path in hidden {
        match path {
            HiddenPath::Dir(dir) => flags.extend(["--tmpfs".into(), dir.into()]),
            HiddenPath::File(file) => {
                flags.extend(["--ro-bind".into(), EMPTY_FILE.into(), file.into()])
            }
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]
    use super::*;

    #[test]
    fn paths_a_user_cannot_reach_need_no_hiding_from_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let closed = dir.path().join("closed");
        let open = dir.path().join("open");
        for (path, mode) in [(&closed, 0o700), (&open, 0o755)] {
            std::fs::create_dir_all(path.join("secret")).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let hidden = vec![
            HiddenPath::Dir(closed.join("secret")),
            HiddenPath::Dir(open.join("secret")),
        ];
        let owner = {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(&closed).unwrap();
            (meta.uid(), meta.gid())
        };
        // Another user cannot pass the 0700 directory: only the open one needs a mount.
        let other = (owner.0.wrapping_add(4242), owner.1.wrapping_add(4242));
        assert_eq!(
            reachable_by(&hidden, Some(other)),
            vec![HiddenPath::Dir(open.join("secret"))]
        );
        // The owner, and the worker's own user, reach both.
        assert_eq!(reachable_by(&hidden, Some(owner)), hidden);
        assert_eq!(reachable_by(&hidden, None), hidden);
    }

    #[test]
    fn hidden_paths_table() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("secrets/inner")).unwrap();
        std::fs::write(root.join("secrets/inner/key"), "k").unwrap();
        std::fs::write(root.join("executor.toml"), "").unwrap();
        std::fs::create_dir_all(root.join("cache")).unwrap();
        let candidates = vec![
            root.join("secrets"),
            root.join("secrets/inner/key"),
            PathBuf::from("executor.toml"),
            root.join("missing"),
            root.join("cache/../cache"),
            root.join("cache"),
            PathBuf::from("/"),
        ];
        assert_eq!(
            hidden_paths(&candidates, &root),
            vec![
                HiddenPath::Dir(root.join("cache")),
                HiddenPath::File(root.join("executor.toml")),
                HiddenPath::Dir(root.join("secrets")),
            ]
        );
    }

    #[test]
    fn the_work_dir_and_existing_sockets_are_always_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().canonicalize().unwrap();
        let key = work.join("inside.key");
        let all = with_work_dir_and_sockets(vec![HiddenPath::File(key)], &work);
        // The key sits in the work dir: one mount hides both.
        assert!(all.contains(&HiddenPath::Dir(work.clone())), "{all:?}");
        assert!(!all
            .iter()
            .any(|h| h.path().starts_with(&work) && h.path() != work));
        for socket in HOST_SOCKETS {
            let Ok(canonical) = Path::new(socket).canonicalize() else {
                continue;
            };
            assert!(
                all.iter().any(|h| h.path() == canonical),
                "{socket} exists here and is not hidden: {all:?}"
            );
        }
    }

    #[test]
    fn confinement_flags_table() {
        let hidden = vec![
            HiddenPath::Dir("/w".into()),
            HiddenPath::File("/etc/lg.toml".into()),
        ];
        // (network, must contain, must not contain)
        let cases = [
            (
                false,
                "--die-with-parent --new-session --unshare-net --unshare-ipc --unshare-pid \
                 --unshare-uts --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
                 --tmpfs /w --ro-bind /dev/null /etc/lg.toml",
                "--share-net",
            ),
            (
                true,
                "--new-session --unshare-ipc --unshare-pid --unshare-uts --ro-bind / / --dev \
                 /dev --proc /proc --tmpfs /tmp --tmpfs /w",
                "--unshare-net",
            ),
        ];
        for (network, present, absent) in cases {
            let flags = confinement_flags(network, &hidden)
                .iter()
                .map(|f| f.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(flags.contains(present), "{network}: {flags}");
            assert!(!flags.contains(absent), "{network}: {flags}");
        }
    }

    #[test]
    fn is_hidden_table() {
        let hidden = vec![
            HiddenPath::Dir("/w".into()),
            HiddenPath::File("/etc/lg.toml".into()),
        ];
        for (path, want) in [
            ("/w/ep", true),
            ("/wx", false),
            ("/tmp/x", true),
            ("/etc/lg.toml", true),
            ("/etc", false),
        ] {
            assert_eq!(is_hidden(Path::new(path), &hidden), want, "{path}");
        }
    }

    /// A root worker hides a secret under a 0700 directory (as `~/.cache/loopgate` under
    /// `/root`): checks and agents still drop to the check user, since that user could not reach
    /// the secret anyway and bubblewrap running as it could not mount over it.
    #[tokio::test]
    async fn a_secret_behind_a_closed_directory_does_not_keep_sandboxes_on_root() {
        use crate::sandbox::agent_probe::probe_agent_sandbox;
        use crate::sandbox::launch::{SandboxMode, SandboxSettings};
        use crate::sandbox::probe::probe_hiding;
        use std::os::unix::fs::PermissionsExt;
        if !rustix::process::geteuid().is_root() {
            eprintln!("SKIP a_secret_behind_a_closed_directory_does_not_keep_sandboxes_on_root: needs root (checks drop to the check user only from root)");
            return;
        }
        if crate::sandbox::probe::bwrap_binary(&SandboxSettings::default()).is_none() {
            eprintln!("SKIP a_secret_behind_a_closed_directory_does_not_keep_sandboxes_on_root: bubblewrap is not installed");
            return;
        }
        // Outside /tmp: a sandbox's /tmp is fresh anyway, so nothing under it needs a mount.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".cache/loopgate")).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hidden = hidden_paths(&[home.join(".cache/loopgate")], dir.path());
        let settings = SandboxSettings {
            mode: SandboxMode::Auto,
            ..SandboxSettings::default()
        };
        let checks = probe_hiding(&settings, &work, "auditor", hidden.clone())
            .await
            .unwrap();
        assert!(
            checks.run_as.is_some(),
            "checks fell back to root: {:?}",
            checks.limitations
        );
        let agents = probe_agent_sandbox(&settings, &work, hidden).await.unwrap();
        assert!(
            agents.run_as.is_some(),
            "agents fell back to root: {:?}",
            agents.limitations
        );
    }

    /// UNIX sockets listening where the host keeps them (as root: under `/run/user` and
    /// `/run/dbus`, which the test creates when missing and leaves, removing only its own
    /// sockets; never `/run/docker.sock` itself, whose disappearance would break every other
    /// sandbox probed meanwhile), and every host socket path that exists here: a check and an
    /// agent's shell see none of them and connect to none.
    #[tokio::test]
    async fn host_sockets_are_out_of_every_sandboxs_reach() {
        use crate::run_check::DEFAULT_CHECK_PATH;
        use crate::sandbox::agent_launch::AgentLaunch;
        use crate::scratch_check::{run_in_scratch_copy, CopySource, ScratchCheck};
        use loopgate_common::output_cap::OutputCap;
        use loopgate_process::{run_child, shared, with_sink};
        use std::os::unix::net::UnixListener;
        use std::time::Duration;

        struct Sockets(Vec<(PathBuf, UnixListener)>);
        impl Drop for Sockets {
            fn drop(&mut self) {
                for (path, _) in &self.0 {
                    let _ = std::fs::remove_file(path);
                    if let Some(dir) = path.parent().filter(|d| d.starts_with("/run/user/")) {
                        let _ = std::fs::remove_dir(dir);
                    }
                }
            }
        }
        let tag = format!("lg-{}-{}", std::process::id(), line!());
        let mut sockets = Sockets(Vec::new());
        if rustix::process::geteuid().is_root() {
            for (dir, name) in [
                (
                    PathBuf::from("/run/user").join(format!("4{}", std::process::id())),
                    "bus",
                ),
                (PathBuf::from("/run/dbus"), tag.as_str()),
            ] {
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join(name);
                let listener = UnixListener::bind(&path).unwrap();
                sockets.0.push((path, listener));
            }
        } else {
            eprintln!("SKIP planting sockets (not root): only the host's own are tried");
        }
        let mut targets: Vec<String> = sockets
            .0
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        targets.extend(HOST_SOCKETS.iter().map(|p| p.to_string()));
        // A socket, or a directory with anything in it (hidden ones are empty), is visible.
        let command = format!(
            "for p in {}; do \
             if [ -S \"$p\" ] || {{ [ -d \"$p\" ] && [ -n \"$(ls -A \"$p\" 2>/dev/null)\" ]; }}; \
             then echo \"VISIBLE $p\"; fi; \
             command -v python3 >/dev/null && python3 -c 'import socket,sys; \
             s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' \"$p\" 2>/dev/null \
             && echo \"CONNECTED $p\"; done; echo done",
            targets.join(" ")
        );

        let root = tempfile::tempdir().unwrap();
        let work = root.path().canonicalize().unwrap();
        let settings = crate::SandboxSettings::default();
        let mut outputs = Vec::new();
        let checks = crate::probe(&settings, &work).await.unwrap();
        if checks.isolates() {
            let scratch = work.join("scratch");
            std::fs::create_dir(&scratch).unwrap();
            let tree = work.join("tree");
            std::fs::create_dir(&tree).unwrap();
            let check = ScratchCheck {
                scratch: &scratch,
                index: 0,
                command: &command,
                timeout: Duration::from_secs(30),
                path_var: DEFAULT_CHECK_PATH,
                sandbox: &checks,
                extra_env: &[],
            };
            let run = run_in_scratch_copy(&check, &CopySource::Tree(tree))
                .await
                .unwrap();
            outputs.push(("check", String::from_utf8_lossy(&run.output).into_owned()));
        } else {
            eprintln!("SKIP the check sandbox: {:?}", checks.limitations);
        }
        match crate::probe_agent_sandbox(&settings, &work, Vec::new()).await {
            Ok(agent) => {
                let ws = tempfile::tempdir_in(&work).unwrap();
                agent.grant(&[ws.path()]).unwrap();
                let args: Vec<OsString> = vec!["-c".into(), command.clone().into()];
                let env = vec![("PATH".to_string(), DEFAULT_CHECK_PATH.to_string())];
                let plan = agent.plan(&AgentLaunch {
                    program: Path::new("sh"),
                    args: &args,
                    workspace: ws.path(),
                    home: ws.path(),
                    env: &env,
                    network: false,
                    read_only: &[],
                });
                let sink = shared(OutputCap::halves(64 * 1024));
                run_child(
                    plan.command(),
                    Duration::from_secs(30),
                    sink.clone(),
                    sink.clone(),
                )
                .await
                .unwrap();
                outputs.push(("agent", with_sink(&sink, |o| o.render())));
            }
            Err(err) => eprintln!("SKIP the agent sandbox: {err}"),
        }
        for (sandbox, output) in &outputs {
            assert!(output.contains("done"), "{sandbox}: {output}");
            assert!(
                !output.contains("VISIBLE") && !output.contains("CONNECTED"),
                "{sandbox} reaches host sockets:\n{output}"
            );
        }
        drop(sockets);
    }
}
