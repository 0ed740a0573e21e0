//! Deciding at start-up how this executor's agents are isolated: a real sandboxed
//! process in a throwaway workspace under the work dir — as the check user first when the
//! worker runs as root, then as the worker's own user (said in the limitations). Where
//! bubblewrap is missing or cannot start, the executor refuses to run agents at all unless the
//! config says `sandbox = "off"` (see `sandbox/agent_launch.rs`).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use loopgate_common::output_cap::OutputCap;
use loopgate_process::{run_child, shared, with_sink, ChildEnd};

use crate::run_check::{CHECK_LANG, DEFAULT_CHECK_PATH};
use crate::sandbox::agent_launch::{AgentLaunch, AgentSandbox};
use crate::sandbox::confine::{reachable_by, with_work_dir_and_sockets, HiddenPath};
use crate::sandbox::launch::{SandboxError, SandboxMode, SandboxSettings};
use crate::sandbox::probe::{bwrap_binary, unprivileged_ids};

const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Decide how agents run here: `sandbox = "off"` runs them unsandboxed (said on every
/// episode's record); otherwise bubblewrap must work with `hidden` (from
/// [`crate::hidden_paths`]), the work dir and the host's sockets hidden, or start-up fails
/// with what was tried.
pub async fn probe_agent_sandbox(
    settings: &SandboxSettings,
    work_dir: &Path,
    hidden: Vec<HiddenPath>,
) -> Result<AgentSandbox, SandboxError> {
    if settings.mode == SandboxMode::Off {
        return Ok(AgentSandbox::unsandboxed(
            "sandbox = \"off\" in the executor config",
        ));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SandboxError::Io { path, source }
    };
    std::fs::create_dir_all(work_dir).map_err(io(work_dir))?;
    let work_dir = work_dir.canonicalize().map_err(io(work_dir))?;
    let Some(bwrap) = bwrap_binary(settings) else {
        return Err(SandboxError::Unusable(
            "agents must run in bubblewrap and bwrap is not installed (Debian package \
             `bubblewrap`); set `[executor] sandbox = \"off\"` to run them unsandboxed"
                .to_string(),
        ));
    };
    let all_hidden = with_work_dir_and_sockets(hidden, &work_dir);
    let is_root = rustix::process::geteuid().is_root();
    let dropped = unprivileged_ids(settings, is_root)?;
    let mut users = vec![dropped];
    if dropped.is_some() {
        users.push(None);
    }
    let mut failures = Vec::new();
    for run_as in users {
        let sandbox = AgentSandbox {
            bwrap: Some(bwrap.clone()),
            run_as,
            hidden: reachable_by(&all_hidden, run_as),
            limitations: Vec::new(),
        };
        let who = match run_as {
            Some((uid, _)) => format!("as uid {uid}"),
            None => "as the executor's user".to_string(),
        };
        match try_agent_sandbox(&sandbox, &work_dir).await {
            Ok(()) => {
                let mut sandbox = sandbox;
                if is_root && run_as.is_none() {
                    sandbox.limitations.push(format!(
                        "agents run as root inside bubblewrap: the check user cannot use the work \
                         dir ({})",
                        failures.join("; ")
                    ));
                }
                return Ok(sandbox);
            }
            Err(reason) => {
                tracing::warn!(how = %who, reason = %reason, "agent sandbox probe failed");
                failures.push(format!("bubblewrap {who}: {reason}"));
            }
        }
    }
    Err(SandboxError::Unusable(format!(
        "agents must run in bubblewrap and it cannot start here ({}); set `[executor] sandbox = \
         \"off\"` to run them unsandboxed",
        failures.join("; ")
    )))
}

/// One sandboxed shell in a throwaway workspace: it must be able to write there.
async fn try_agent_sandbox(sandbox: &AgentSandbox, work_dir: &Path) -> Result<(), String> {
    let scratch = tempfile::Builder::new()
        .prefix("agent-probe-")
        .tempdir_in(work_dir)
        .map_err(|e| format!("scratch dir: {e}"))?;
    sandbox
        .grant(&[scratch.path()])
        .map_err(|e| format!("preparing scratch: {e}"))?;
    let args: Vec<OsString> = vec!["-c".into(), "echo ok > probe && test -s probe".into()];
    let env = vec![
        ("PATH".to_string(), DEFAULT_CHECK_PATH.to_string()),
        ("HOME".to_string(), scratch.path().display().to_string()),
        ("LANG".to_string(), CHECK_LANG.to_string()),
    ];
    let plan = sandbox.plan(&AgentLaunch {
        program: Path::new("sh"),
        args: &args,
        workspace: scratch.path(),
        home: scratch.path(),
        env: &env,
        network: false,
        read_only: &[],
    });
    let output = shared(OutputCap::halves(4096));
    let run = run_child(
        plan.command(),
        PROBE_TIMEOUT,
        output.clone(),
        output.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    match run.end {
        ChildEnd::Exited(Some(0)) => Ok(()),
        end => {
            let text = with_sink(&output, |o| o.render());
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!("{end:?} {}", first.trim()).trim().to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn off_needs_no_bubblewrap_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let settings = SandboxSettings {
            mode: SandboxMode::Off,
            check_user: None,
            bwrap: Some("/nonexistent/bwrap".into()),
        };
        let sandbox = probe_agent_sandbox(&settings, dir.path(), Vec::new())
            .await
            .unwrap();
        assert!(!sandbox.is_sandboxed());
        assert!(sandbox.isolation(false).note.contains("sandbox = \"off\""));
    }

    #[tokio::test]
    async fn missing_bubblewrap_refuses_unless_off() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [SandboxMode::Auto, SandboxMode::Required] {
            let settings = SandboxSettings {
                mode,
                check_user: None,
                bwrap: Some("/nonexistent/bwrap".into()),
            };
            let err = probe_agent_sandbox(&settings, dir.path(), Vec::new())
                .await
                .unwrap_err();
            assert!(err.to_string().contains("sandbox = \"off\""), "{err}");
        }
    }
}
