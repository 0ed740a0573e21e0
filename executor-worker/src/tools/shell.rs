//! `shell`: `sh -c <command>` in the workspace, inside the agent sandbox (bubblewrap:
//! its own pid namespace, the host read-only without the worker's secrets, only the workspace
//! writable, network only with `agent_network = "on"`; see `loopgate_checks::AgentSandbox`),
//! in its own process group, with an environment of exactly PATH, HOME = workspace and LANG,
//! a timeout after which everything it started is killed (in the sandbox, `setsid` or not),
//! and output capped (head + tail).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loopgate_checks::AgentLaunch;
use loopgate_common::output_cap::OutputCap;
use loopgate_process::{run_child, shared, with_sink, ChildEnd};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::ToolLimits;
use crate::isolation::AgentIsolationEnv;
use crate::tools::agent_env::shell_env;
use crate::tools::context::ToolContext;
use crate::tools::tool_def::{object_schema, parse_args, string_param, ToolDef, ToolEffect};
use crate::tools::workspace::ToolError;

pub(crate) const DEF: ToolDef = ToolDef {
    name: "shell",
    description: "Run a shell command (sh -c) in the workspace root. Returns exit code and output.",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"command": string_param("The command line")}),
        &["command"],
    )
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct Args {
    #[serde(alias = "cmd", alias = "script")]
    command: String,
}

pub(crate) async fn run(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    let args: Args = parse_args(DEF.name, arguments)?;
    let outcome = run_shell(
        ctx.workspace.root(),
        &args.command,
        &ctx.limits,
        &ctx.isolation,
    )
    .await?;
    Ok(outcome.to_tool_text())
}

/// How the command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShellEnd {
    Exited(i32),
    Signalled,
    TimedOut(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellOutcome {
    pub end: ShellEnd,
    /// stdout and stderr interleaved as they arrived, capped.
    pub output: String,
}

impl ShellOutcome {
    /// The tool result text the model reads.
    pub(crate) fn to_tool_text(&self) -> String {
        let status = match &self.end {
            ShellEnd::Exited(code) => format!("exit code: {code}"),
            ShellEnd::Signalled => "terminated by a signal".to_string(),
            ShellEnd::TimedOut(after) => {
                format!(
                    "timed out after {}s; the command and its children were killed",
                    after.as_secs()
                )
            }
        };
        if self.output.is_empty() {
            format!("{status}\n(no output)")
        } else {
            format!("{status}\n{}", self.output)
        }
    }
}

/// Run `command` with `sh -c` in `workspace`, isolated as `isolation` says.
pub(crate) async fn run_shell(
    workspace: &Path,
    command: &str,
    limits: &ToolLimits,
    isolation: &AgentIsolationEnv,
) -> Result<ShellOutcome, ToolError> {
    if command.trim().is_empty() {
        return Err(ToolError::BadArguments {
            tool: DEF.name.into(),
            reason: "`command` is empty".into(),
        });
    }
    let sandbox = isolation.sandbox.clone();
    let root: PathBuf = workspace.to_path_buf();
    // Files the other tools wrote belong to the worker; the sandboxed user must own them.
    tokio::task::spawn_blocking(move || sandbox.grant(&[&root]))
        .await
        .map_err(|err| ToolError::Internal(err.to_string()))?
        .map_err(|err| {
            ToolError::Shell(format!("preparing the workspace for the sandbox: {err}"))
        })?;
    let env = shell_env(workspace, &limits.shell_env);
    let args: Vec<OsString> = vec!["-c".into(), command.into()];
    let plan = isolation.sandbox.plan(&AgentLaunch {
        program: Path::new("sh"),
        args: &args,
        workspace,
        home: workspace,
        env: &env,
        network: isolation.network.shell,
        read_only: &[],
    });
    let sink = shared(OutputCap::halves(limits.output_cap_bytes));
    let run = run_child(
        plan.command(),
        limits.shell_timeout,
        sink.clone(),
        sink.clone(),
    )
    .await
    .map_err(|err| ToolError::Shell(err.to_string()))?;
    let end = match run.end {
        ChildEnd::Exited(Some(code)) => ShellEnd::Exited(code),
        ChildEnd::Exited(None) => ShellEnd::Signalled,
        ChildEnd::TimedOut(after) => ShellEnd::TimedOut(after),
    };
    let output = with_sink(&sink, |out| out.render());
    Ok(ShellOutcome { end, output })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::ShellEnv;
    use crate::isolation::AgentNetworkPolicy;
    use loopgate_checks::{probe_agent_sandbox, SandboxSettings};
    use std::sync::Arc;

    fn limits(timeout_ms: u64, cap: usize) -> ToolLimits {
        ToolLimits {
            shell_timeout: Duration::from_millis(timeout_ms),
            output_cap_bytes: cap,
            shell_env: ShellEnv::default(),
        }
    }

    /// Every test runs in both modes: unsandboxed (`sandbox = "off"`) and in the bubblewrap
    /// sandbox the worker probes at start-up (as the check user when the tests run as root).
    /// The work dir the probe hides must be traversable by that user, as a real work dir is.
    #[allow(clippy::print_stderr)] // the SKIP line
    async fn isolations() -> (Vec<AgentIsolationEnv>, tempfile::TempDir) {
        use std::os::unix::fs::PermissionsExt;
        let work = tempfile::tempdir().unwrap();
        std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let mut modes = vec![AgentIsolationEnv::unsandboxed("unit test")];
        match probe_agent_sandbox(&SandboxSettings::default(), work.path(), Vec::new()).await {
            Ok(sandbox) => modes.push(AgentIsolationEnv {
                sandbox: Arc::new(sandbox),
                network: AgentNetworkPolicy::default(),
            }),
            Err(err) => eprintln!("SKIP sandboxed shell tests: {err}"),
        }
        (modes, work)
    }

    fn workspace() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[tokio::test]
    async fn runs_in_workspace_with_scrubbed_env() {
        let (modes, _work) = isolations().await;
        for isolation in &modes {
            let dir = workspace();
            let out = run_shell(
                dir.path(),
                "pwd; echo home=$HOME; echo vars: $(env | cut -d= -f1 | sort); echo err >&2; exit 3",
                &limits(10_000, 4096),
                isolation,
            )
            .await
            .unwrap();
            assert_eq!(out.end, ShellEnd::Exited(3));
            let root = dir.path().canonicalize().unwrap();
            assert!(
                out.output.contains(&root.display().to_string()),
                "{}",
                out.output
            );
            assert!(out
                .output
                .contains(&format!("home={}", dir.path().display())));
            assert!(out.output.contains("err"));
            // Only our variables (plus what sh itself sets, like PWD).
            let vars = out
                .output
                .lines()
                .find_map(|l| l.strip_prefix("vars:"))
                .unwrap();
            assert!(
                vars.contains("PATH") && vars.contains("HOME") && vars.contains("LANG"),
                "{vars}"
            );
            for var in vars.split_whitespace() {
                assert!(
                    ["HOME", "LANG", "PATH", "PWD", "OLDPWD", "SHLVL", "_"].contains(&var),
                    "{var}"
                );
            }
            assert!(out.to_tool_text().starts_with("exit code: 3\n"));
        }
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let (modes, _work) = isolations().await;
        for isolation in &modes {
            let dir = workspace();
            let marker = dir.path().join("survivor");
            let command = format!("(sleep 1; touch {}) & sleep 30", marker.display());
            let started = std::time::Instant::now();
            let out = run_shell(dir.path(), &command, &limits(300, 4096), isolation)
                .await
                .unwrap();
            assert!(matches!(out.end, ShellEnd::TimedOut(_)));
            assert!(started.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert!(
                !marker.exists(),
                "a child of the timed-out command survived"
            );
        }
    }

    #[tokio::test]
    async fn background_jobs_do_not_hold_the_call() {
        let (modes, _work) = isolations().await;
        for isolation in &modes {
            let dir = workspace();
            let started = std::time::Instant::now();
            let out = run_shell(
                dir.path(),
                "sleep 30 & echo hi",
                &limits(20_000, 1024),
                isolation,
            )
            .await
            .unwrap();
            assert_eq!(out.end, ShellEnd::Exited(0));
            assert_eq!(out.output.trim(), "hi");
            assert!(started.elapsed() < Duration::from_secs(5));
        }
    }

    #[tokio::test]
    async fn output_is_capped() {
        let (modes, _work) = isolations().await;
        for isolation in &modes {
            let dir = workspace();
            let out = run_shell(
                dir.path(),
                "echo START; i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done; echo END",
                &limits(20_000, 1024),
                isolation,
            )
            .await
            .unwrap();
            assert_eq!(out.end, ShellEnd::Exited(0));
            assert!(out.output.starts_with("START"));
            assert!(out.output.trim_end().ends_with("END"));
            assert!(out.output.contains("bytes omitted"));
            assert!(out.output.len() < 1200);
        }
    }

    #[tokio::test]
    async fn empty_command_is_a_tool_error() {
        let (modes, _work) = isolations().await;
        for isolation in &modes {
            let dir = workspace();
            let err = run_shell(dir.path(), "  ", &limits(1000, 1024), isolation)
                .await
                .unwrap_err();
            assert!(matches!(err, ToolError::BadArguments { .. }));
        }
    }

    /// In the sandbox: the worker's processes are invisible, a `setsid` child dies with the
    /// call, and the host is read-only while the workspace is writable.
    #[tokio::test]
    async fn sandbox_hides_the_worker_and_kills_setsid_children() {
        let (modes, _work) = isolations().await;
        let Some(isolation) = modes.iter().find(|m| m.sandbox.is_sandboxed()) else {
            return;
        };
        let dir = workspace();
        let token = format!(
            "{}.{}",
            4000 + std::process::id() % 1000,
            std::process::id()
        );
        let command = format!(
            "test ! -e /proc/{pid}/environ && echo no-worker; \
             setsid sh -c 'sleep {token}' & \
             echo x > /etc/loopgate-probe 2>/dev/null || echo ro-host; \
             echo y > ok.txt && echo ws-writable; \
             sleep 0.2",
            pid = std::process::id(),
        );
        let out = run_shell(dir.path(), &command, &limits(20_000, 4096), isolation)
            .await
            .unwrap();
        for want in ["no-worker", "ro-host", "ws-writable"] {
            assert!(out.output.contains(want), "{want}: {}", out.output);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !host_processes_with(&format!("sleep {token}")),
            "a setsid'd child survived the call"
        );
    }

    /// Any process on the host whose command line contains `needle`.
    fn host_processes_with(needle: &str) -> bool {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .chars()
                    .all(|c| c.is_ascii_digit())
            })
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|cmd| {
                String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .contains(needle)
            })
    }
}
