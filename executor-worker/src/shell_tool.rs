//! The `shell` tool: `sh -c <command>` in the workspace, in its own process group, with a scrubbed
//! environment (only PATH, HOME = workspace, LANG), a timeout after which the whole group is
//! killed, and output capped (head + tail).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::output_cap::CappedOutput;
use crate::process_group::GroupKill;
use crate::settings::ToolLimits;
use crate::workspace_tools::ToolError;

/// After the shell exits (or is killed), how long to wait for the output pipes to drain.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// How the command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellEnd {
    Exited(i32),
    Signalled,
    TimedOut(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    pub end: ShellEnd,
    /// stdout and stderr interleaved as they arrived, capped.
    pub output: String,
}

impl ShellOutcome {
    /// The tool result text the model reads.
    pub fn to_tool_text(&self) -> String {
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

async fn pump(mut reader: impl AsyncRead + Unpin, sink: Arc<Mutex<CappedOutput>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut out) = sink.lock() {
                    out.push(&buf[..n]);
                }
            }
        }
    }
}

/// Run `command` with `sh -c` in `workspace`.
pub async fn run_shell(
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
        .env("LANG", &limits.shell_env.lang)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|err| ToolError::Shell(format!("cannot start sh: {err}")))?;
    let mut group = GroupKill::for_leader(child.id());
    let sink = Arc::new(Mutex::new(CappedOutput::new(limits.output_cap_bytes)));
    let mut readers = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        readers.push(tokio::spawn(pump(stdout, sink.clone())));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.push(tokio::spawn(pump(stderr, sink.clone())));
    }

    let end = match tokio::time::timeout(limits.shell_timeout, child.wait()).await {
        Ok(Ok(status)) => match status.code() {
            Some(code) => ShellEnd::Exited(code),
            None => ShellEnd::Signalled,
        },
        Ok(Err(err)) => return Err(ToolError::Shell(format!("waiting for sh: {err}"))),
        Err(_) => ShellEnd::TimedOut(limits.shell_timeout),
    };
    // Background jobs left in the group would hold the pipes open (and outlive the episode).
    group.kill_now();
    if matches!(end, ShellEnd::TimedOut(_)) {
        let _ = child.wait().await;
    }
    for reader in readers {
        if tokio::time::timeout(DRAIN_TIMEOUT, reader).await.is_err() {
            tracing::warn!("shell output pipe still open after the process group was killed");
        }
    }
    let output = sink.lock().map(|out| out.render()).unwrap_or_default();
    Ok(ShellOutcome { end, output })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::settings::ShellEnv;

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
