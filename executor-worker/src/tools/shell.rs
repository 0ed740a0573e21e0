//! The `shell` tool: `sh -c <command>` in the workspace, in its own process group, with a scrubbed
//! environment (only PATH, HOME = workspace, LANG), a timeout after which the whole group is
//! killed, and output capped (head + tail).

use std::path::Path;
use std::time::Duration;

use loopgate_common::output_cap::OutputCap;
use loopgate_transport::runtime::{run_child, shared, with_sink, ChildEnd};
use tokio::process::Command;

use crate::config::ToolLimits;
use crate::tools::workspace::ToolError;

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

/// Run `command` with `sh -c` in `workspace`.
pub(crate) async fn run_shell(
    workspace: &Path,
    command: &str,
    limits: &ToolLimits,
) -> Result<ShellOutcome, ToolError> {
    if command.trim().is_empty() {
        return Err(ToolError::BadArguments {
            tool: "shell".into(),
            reason: "`command` is empty".into(),
        });
    }
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(workspace)
        .env_clear()
        .env("PATH", &limits.shell_env.path)
        .env("HOME", workspace)
        .env("LANG", &limits.shell_env.lang);
    let sink = shared(OutputCap::halves(limits.output_cap_bytes));
    let run = run_child(cmd, limits.shell_timeout, sink.clone(), sink.clone())
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

    fn limits(timeout_ms: u64, cap: usize) -> ToolLimits {
        ToolLimits {
            shell_timeout: Duration::from_millis(timeout_ms),
            output_cap_bytes: cap,
            shell_env: ShellEnv::default(),
        }
    }

    #[tokio::test]
    async fn runs_in_workspace_with_scrubbed_env() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_shell(
            dir.path(),
            "pwd; echo home=$HOME; echo vars: $(env | cut -d= -f1 | sort); echo err >&2; exit 3",
            &limits(10_000, 4096),
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

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survivor");
        let command = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let started = std::time::Instant::now();
        let out = run_shell(dir.path(), &command, &limits(300, 4096))
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

    #[tokio::test]
    async fn background_jobs_do_not_hold_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let out = run_shell(dir.path(), "sleep 30 & echo hi", &limits(20_000, 1024))
            .await
            .unwrap();
        assert_eq!(out.end, ShellEnd::Exited(0));
        assert_eq!(out.output.trim(), "hi");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn output_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_shell(
            dir.path(),
            "echo START; i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done; echo END",
            &limits(20_000, 1024),
        )
        .await
        .unwrap();
        assert_eq!(out.end, ShellEnd::Exited(0));
        assert!(out.output.starts_with("START"));
        assert!(out.output.trim_end().ends_with("END"));
        assert!(out.output.contains("bytes omitted"));
        assert!(out.output.len() < 1200);
    }

    #[tokio::test]
    async fn empty_command_is_a_tool_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = run_shell(dir.path(), "  ", &limits(1000, 1024))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::BadArguments { .. }));
    }
}
