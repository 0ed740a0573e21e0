//! The sandbox an executor's agent runs in — every `shell` command of the built-in tool loop,
//! every CLI agent run, and every self-check of the step (`AgentSandbox::for_checks`: a
//! self-check sees exactly what the agent's `shell` sees) — and how one process is launched in
//! it. The same bubblewrap isolation as a check (`confine::confinement_flags`: its own pid
//! namespace, so the worker's processes and their `/proc/*/environ` are invisible and
//! everything left inside dies with it, `setsid` or not; private ipc/uts; the host read-only;
//! fresh `/dev`, `/proc`, `/tmp`; the hidden paths), plus:
//! - network only when asked for (`--unshare-net` otherwise);
//! - the worker's secrets out of sight: the work dir (other episodes' workspaces, self-check
//!   copies), every hidden path (the worker's config file, credential files and directories)
//!   and the host's sockets replaced by an empty directory or an empty file;
//! - only the workspace and the agent's own home writable;
//! - an environment that is exactly the allow-list the caller passes (nothing inherited);
//! - the check user (`nobody`) when the worker runs as root.
//!
//! With `sandbox = "off"` the agent runs as a plain child process (its own process group, the
//! same allow-listed environment), and every episode's record says so.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use loopgate_protocol::wire::AgentIsolation;

use crate::sandbox::confine::{confinement_flags, is_hidden, HiddenPath};
use crate::sandbox::launch::{chown_tree, Sandbox};
use crate::sandbox::overlay::OverlayTools;

/// How this executor isolates its agents, decided once at start-up
/// ([`crate::probe_agent_sandbox`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSandbox {
    /// bubblewrap; `None`: `sandbox = "off"`, agents run as plain child processes.
    pub bwrap: Option<PathBuf>,
    /// uid/gid agents run as (the check user when the worker runs as root).
    pub run_as: Option<(u32, u32)>,
    /// What the agent must not see (absolute, existing, none inside another; the work dir
    /// and the host's sockets among them).
    pub hidden: Vec<HiddenPath>,
    /// What this host could not provide, one line each (logged at start-up; the first one is
    /// the note on every episode's record when unsandboxed).
    pub limitations: Vec<String>,
}

/// One process to start in the sandbox.
#[derive(Debug, Clone)]
pub struct AgentLaunch<'a> {
    /// The executable: a name looked up in the environment's `PATH`, or a path.
    pub program: &'a Path,
    pub args: &'a [OsString],
    /// Working directory, writable.
    pub workspace: &'a Path,
    /// `HOME`, writable (the workspace itself for the `shell` tool).
    pub home: &'a Path,
    /// The process's whole environment, in order.
    pub env: &'a [(String, String)],
    pub network: bool,
    /// Host paths visible read-only even inside a hidden path (the agent's own executable).
    pub read_only: &'a [PathBuf],
}

/// Everything needed to spawn one launch: what [`AgentSandbox::plan`] decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchPlan {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// The whole environment (the child inherits nothing else).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub run_as: Option<(u32, u32)>,
}

impl LaunchPlan {
    /// The command to hand to `loopgate_process::run_child`.
    pub fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command
    }
}

impl AgentSandbox {
    /// No bubblewrap (`sandbox = "off"`); `reason` goes on every episode's record.
    pub fn unsandboxed(reason: &str) -> AgentSandbox {
        AgentSandbox {
            bwrap: None,
            run_as: None,
            hidden: Vec::new(),
            limitations: vec![format!("agents run without a sandbox: {reason}")],
        }
    }

    pub fn is_sandboxed(&self) -> bool {
        self.bwrap.is_some()
    }

    /// What an episode's record says about its agent.
    pub fn isolation(&self, network: bool) -> AgentIsolation {
        AgentIsolation {
            sandboxed: self.is_sandboxed(),
            network,
            note: if self.is_sandboxed() {
                String::new()
            } else {
                self.limitations.join("; ")
            },
        }
    }

    /// Is `path` out of the agent's sight in this sandbox: under `/tmp` (fresh inside) or a
    /// hidden path? Never when unsandboxed.
    pub fn hides(&self, path: &Path) -> bool {
        self.is_sandboxed() && is_hidden(path, &self.hidden)
    }

    /// The sandbox a check runs in when it must see exactly what this sandbox's agent sees
    /// (the executor's self-checks): the same bubblewrap, user, hidden paths and `network`
    /// (the agent's `shell` setting), with `overlay` for layered copies. Unsandboxed
    /// (`sandbox = "off"`) checks run as plain child processes of the worker, as the agent
    /// does.
    pub fn for_checks(&self, network: bool, overlay: Option<OverlayTools>) -> Sandbox {
        Sandbox {
            bwrap: self.bwrap.clone(),
            run_as: self.run_as,
            required: false,
            limitations: self.limitations.clone(),
            overlay: self.bwrap.as_ref().and(overlay),
            hidden: self.hidden.clone(),
            network,
        }
    }

    /// The user [`AgentSandbox::grant`] gives workspaces to, when it gives them to anyone:
    /// materialize a workspace for it (`materialize_warm_as`) and `grant` finds nothing to do.
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.bwrap.as_ref().and(self.run_as)
    }

    /// Let the agent's user write `dirs` (recursively chowned when agents drop to the check
    /// user; nothing to do otherwise). Entries it already owns are left alone, so calling it
    /// before every `shell` command costs one `lstat` per file.
    pub fn grant(&self, dirs: &[&Path]) -> std::io::Result<()> {
        let (Some(owner), Some(_)) = (self.run_as, &self.bwrap) else {
            return Ok(());
        };
        for dir in dirs {
            chown_tree(dir, owner)?;
        }
        Ok(())
    }

    /// Program, arguments, environment, directory and user for `launch` (pure).
    pub fn plan(&self, launch: &AgentLaunch<'_>) -> LaunchPlan {
        let env = launch.env.to_vec();
        let cwd = launch.workspace.to_path_buf();
        let Some(bwrap) = &self.bwrap else {
            return LaunchPlan {
                program: launch.program.into(),
                args: launch.args.to_vec(),
                env,
                cwd,
                run_as: None,
            };
        };
        let mut args = confinement_flags(launch.network, &self.hidden);
        for path in launch.read_only {
            args.extend(["--ro-bind".into(), path.into(), path.into()]);
        }
        args.extend([
            "--bind".into(),
            launch.workspace.into(),
            launch.workspace.into(),
        ]);
        if launch.home != launch.workspace {
            args.extend(["--bind".into(), launch.home.into(), launch.home.into()]);
        }
        args.extend(["--chdir".into(), launch.workspace.into(), "--".into()]);
        args.push(launch.program.into());
        args.extend(launch.args.iter().cloned());
        LaunchPlan {
            program: bwrap.into(),
            args,
            env,
            cwd,
            run_as: self.run_as,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sandbox() -> AgentSandbox {
        AgentSandbox {
            bwrap: Some("/usr/bin/bwrap".into()),
            run_as: Some((65534, 65534)),
            hidden: vec![
                HiddenPath::Dir("/w".into()),
                HiddenPath::Dir("/run/secrets".into()),
                HiddenPath::File("/etc/loopgate/executor.toml".into()),
            ],
            limitations: Vec::new(),
        }
    }

    fn joined(plan: &LaunchPlan) -> String {
        plan.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn launch_argument_table() {
        let env = vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("HOME".to_string(), "/w/ep".to_string()),
            ("LANG".to_string(), "C.UTF-8".to_string()),
        ];
        let shell_args: Vec<OsString> = vec!["-c".into(), "make test".into()];
        let agent_bin = vec![PathBuf::from("/w/bin/agent")];
        // (network, home, read_only, must contain, must not contain)
        type Case<'a> = (bool, &'a str, &'a [PathBuf], Vec<&'a str>, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            (
                false,
                "/w/ep",
                &[],
                vec![
                    "--die-with-parent --new-session --unshare-net --unshare-ipc --unshare-pid --unshare-uts",
                    "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp",
                    "--tmpfs /w --tmpfs /run/secrets --ro-bind /dev/null /etc/loopgate/executor.toml",
                    "--bind /w/ep /w/ep --chdir /w/ep -- sh -c make test",
                ],
                vec!["--share-net", "/w/home"],
            ),
            (
                true,
                "/w/home",
                &agent_bin,
                vec![
                    "--die-with-parent --new-session --unshare-ipc --unshare-pid",
                    "--ro-bind /w/bin/agent /w/bin/agent --bind /w/ep /w/ep --bind /w/home /w/home",
                    "--chdir /w/ep -- sh -c make test",
                ],
                vec!["--unshare-net"],
            ),
        ];
        let sandbox = sandbox();
        for (network, home, read_only, present, absent) in cases {
            let plan = sandbox.plan(&AgentLaunch {
                program: Path::new("sh"),
                args: &shell_args,
                workspace: Path::new("/w/ep"),
                home: Path::new(home),
                env: &env,
                network,
                read_only,
            });
            assert_eq!(plan.program, "/usr/bin/bwrap");
            assert_eq!(plan.run_as, Some((65534, 65534)));
            assert_eq!(plan.cwd, PathBuf::from("/w/ep"));
            // The environment is exactly the allow-list, and never on the command line.
            assert_eq!(plan.env, env);
            let args = joined(&plan);
            for needle in present {
                assert!(
                    args.contains(needle),
                    "network={network}: missing {needle}: {args}"
                );
            }
            for needle in absent {
                assert!(
                    !args.contains(needle),
                    "network={network}: has {needle}: {args}"
                );
            }
            assert!(
                !args.contains("C.UTF-8") && !args.contains("/usr/bin:/bin"),
                "{args}"
            );
        }
    }

    #[test]
    fn unsandboxed_launch_is_the_plain_program_with_the_same_environment() {
        let off = AgentSandbox::unsandboxed("sandbox = \"off\" in the executor config");
        let env = vec![("PATH".to_string(), "/bin".to_string())];
        let args: Vec<OsString> = vec!["-c".into(), "true".into()];
        let plan = off.plan(&AgentLaunch {
            program: Path::new("sh"),
            args: &args,
            workspace: Path::new("/w/ep"),
            home: Path::new("/w/ep"),
            env: &env,
            network: false,
            read_only: &[],
        });
        assert_eq!(
            plan,
            LaunchPlan {
                program: "sh".into(),
                args,
                env,
                cwd: "/w/ep".into(),
                run_as: None,
            }
        );
        let record = off.isolation(true);
        assert!(!record.sandboxed && record.network);
        assert!(record.note.contains("sandbox = \"off\""), "{record:?}");
        let on = sandbox().isolation(false);
        assert!(on.sandboxed && !on.network && on.note.is_empty());
    }

    #[test]
    fn a_check_in_the_agents_sandbox_starts_with_the_agents_flags() {
        use crate::sandbox::launch::launch_args;
        let agent = sandbox();
        for network in [false, true] {
            let plan = agent.plan(&AgentLaunch {
                program: Path::new("sh"),
                args: &[],
                workspace: Path::new("/w/ep"),
                home: Path::new("/w/ep"),
                env: &[],
                network,
                read_only: &[],
            });
            let checks = agent.for_checks(network, None);
            assert_eq!(
                (&checks.bwrap, checks.run_as, &checks.hidden, checks.network),
                (&agent.bwrap, agent.run_as, &agent.hidden, network)
            );
            let (_, args) = launch_args(
                &checks,
                "make test",
                Path::new("/w/sc/check-0/ws"),
                Path::new("/w/sc/check-0/home"),
                Path::new("/w/sc/check-0/status"),
                None,
            );
            // The same isolation and hidden paths, then each binds its own directories.
            let flags = confinement_flags(network, &agent.hidden);
            let has_flags = |args: &[OsString]| -> bool {
                args.windows(flags.len()).any(|w| w == flags.as_slice())
            };
            assert!(has_flags(&plan.args), "agent: {:?}", plan.args);
            assert!(has_flags(&args), "check: {args:?}");
        }
        let off = AgentSandbox::unsandboxed("off").for_checks(false, None);
        assert!(off.bwrap.is_none() && off.hidden.is_empty() && !off.required);
    }

    #[test]
    fn hides_table() {
        let sandbox = sandbox();
        for (path, hidden) in [
            ("/w/ep/x", true),
            ("/w", true),
            ("/run/secrets/token", true),
            ("/etc/loopgate/executor.toml", true),
            ("/etc/loopgate", false),
            ("/usr/bin/sh", false),
            ("/wx", false),
            ("/tmp/t/bin/agent", true),
        ] {
            assert_eq!(sandbox.hides(Path::new(path)), hidden, "{path}");
        }
        assert!(!AgentSandbox::unsandboxed("off").hides(Path::new("/tmp/x")));
    }
}
