//! Running one CLI agent: spawned in the workspace inside the agent sandbox (bubblewrap: its
//! own pid namespace, the host read-only without the worker's secrets, only the workspace and
//! its own home writable, network as `agent_network` says; see `loopgate_checks::AgentSandbox`)
//! in its own process group, with an environment of exactly PATH, LANG, a HOME of its own and
//! the profile's variables, its JSON-lines stdout read as it streams, and everything it started
//! killed when the time budget runs out (or when the run is dropped: cancelled episodes leave
//! no processes behind).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopgate_checks::{AgentLaunch, AgentSandbox};
use loopgate_common::output_cap::OutputCap;
use loopgate_process::{run_child, shared, with_sink, ChildEnd, ChildError, OutputSink};
use serde_json::json;

use crate::agents::config::AgentProfile;
use crate::agents::templates::agent_args;
use crate::agents::transcript::{AgentReport, TranscriptReader};
use crate::config::ShellEnv;

/// One stdout line longer than this is cut (the rest of it is dropped).
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// stderr kept (head + tail).
const STDERR_CAP_BYTES: usize = 16 * 1024;
/// Default cap on the output kept for the transcript.
pub(crate) const DEFAULT_TRANSCRIPT_CAP_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct AgentLimits {
    /// Wall-clock budget; the process group is killed when it runs out.
    pub budget: Duration,
    pub shell_env: ShellEnv,
    /// Bytes of stdout kept for the transcript (the parse sees all of it).
    pub transcript_cap_bytes: usize,
    /// The worker's agent sandbox.
    pub sandbox: Arc<AgentSandbox>,
    /// Whether the agent may reach the network.
    pub network: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentExit {
    Exited(i32),
    Signalled,
    TimedOut(Duration),
}

#[derive(Debug)]
pub(crate) struct AgentRun {
    pub exit: AgentExit,
    pub report: AgentReport,
    /// stdout (capped) followed by one `loopgate.agent_end` JSON line with the exit and stderr.
    pub transcript: Vec<u8>,
    pub stderr_tail: String,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum AgentError {
    #[error("cannot start agent `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for agent `{command}`: {source}")]
    Wait {
        command: String,
        #[source]
        source: std::io::Error,
    },
}

/// stdout as read: the parse (line by line) and the bytes kept for the transcript.
struct StdoutCapture {
    reader: TranscriptReader,
    line: Vec<u8>,
    kept: Vec<u8>,
    cap: usize,
    dropped: u64,
}

impl StdoutCapture {
    fn end_line(&mut self) {
        self.reader.line(&String::from_utf8_lossy(&self.line));
        self.line.clear();
    }

    /// The parse and the transcript bytes, the last unterminated line included.
    fn finish(mut self) -> (AgentReport, Vec<u8>, u64) {
        if !self.line.is_empty() {
            self.end_line();
        }
        (self.reader.finish(), self.kept, self.dropped)
    }
}

impl OutputSink for StdoutCapture {
    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len()).min(bytes.len());
        self.kept.extend_from_slice(&bytes[..room]);
        self.dropped += (bytes.len() - room) as u64;
        for &byte in bytes {
            if byte == b'\n' {
                self.end_line();
            } else if self.line.len() < MAX_LINE_BYTES {
                self.line.push(byte);
            }
        }
    }
}

/// The agent's whole environment: PATH, HOME (its own), LANG, then the profile's variables
/// (`env` passed through from the worker, `set_env`) and nothing else.
pub(crate) fn agent_env(
    profile: &AgentProfile,
    home: &Path,
    limits: &AgentLimits,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_string(), limits.shell_env.path.clone()),
        ("HOME".to_string(), home.display().to_string()),
        ("LANG".to_string(), limits.shell_env.lang.clone()),
    ];
    env.extend(profile.env.iter().cloned());
    env
}

/// The agent's executable as an absolute, canonical path: `command` itself when it names a
/// path (relative to the worker's directory), else the first match in `path_var`. Resolved
/// before the launch so a sandbox can make it visible and a missing one fails as "cannot
/// start" rather than as a sandbox error.
pub(crate) fn resolve_command(command: &Path, path_var: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let not_found =
        || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
    let found = if command.components().count() > 1 || command.is_absolute() {
        Some(command.to_path_buf()).filter(|p| is_executable(p))
    } else {
        std::env::split_paths(path_var)
            .map(|dir| dir.join(command))
            .find(|candidate| is_executable(candidate))
    };
    found.ok_or_else(not_found)?.canonicalize()
}

/// Runs the agent with `prompt` in `workspace` (HOME = `home`) within `limits.budget`.
pub(crate) async fn run_agent(
    profile: &AgentProfile,
    prompt: &str,
    workspace: &Path,
    home: &Path,
    limits: &AgentLimits,
) -> Result<AgentRun, AgentError> {
    let command = profile.command.display().to_string();
    let spawn_error = |source| AgentError::Spawn {
        command: command.clone(),
        source,
    };
    let program = resolve_command(&profile.command, &limits.shell_env.path).map_err(spawn_error)?;
    let sandbox = limits.sandbox.clone();
    let (ws, own_home) = (workspace.to_path_buf(), home.to_path_buf());
    tokio::task::spawn_blocking(move || sandbox.grant(&[&ws, &own_home]))
        .await
        .map_err(|err| spawn_error(std::io::Error::other(err.to_string())))?
        .map_err(spawn_error)?;
    let env = agent_env(profile, home, limits);
    let args: Vec<OsString> = agent_args(profile, prompt)
        .into_iter()
        .map(OsString::from)
        .collect();
    let read_only: Vec<PathBuf> = if limits.sandbox.hides(&program) {
        vec![program.clone()]
    } else {
        Vec::new()
    };
    let cmd = limits
        .sandbox
        .plan(&AgentLaunch {
            program: &program,
            args: &args,
            workspace,
            home,
            env: &env,
            network: limits.network,
            read_only: &read_only,
        })
        .command();
    let capture = shared(StdoutCapture {
        reader: TranscriptReader::new(profile.kind),
        line: Vec::new(),
        kept: Vec::new(),
        cap: limits.transcript_cap_bytes,
        dropped: 0,
    });
    let stderr_sink = shared(OutputCap::halves(STDERR_CAP_BYTES));
    let run = run_child(cmd, limits.budget, capture.clone(), stderr_sink.clone())
        .await
        .map_err(|err| match err {
            ChildError::Spawn { source, .. } => AgentError::Spawn { command, source },
            ChildError::Wait { source, .. } => AgentError::Wait { command, source },
        })?;
    let exit = match run.end {
        ChildEnd::Exited(Some(code)) => AgentExit::Exited(code),
        ChildEnd::Exited(None) => AgentExit::Signalled,
        ChildEnd::TimedOut(after) => AgentExit::TimedOut(after),
    };
    let elapsed = run.elapsed;
    let stderr_tail = with_sink(&stderr_sink, |s| s.render());
    let (report, mut transcript, dropped) = take_capture(capture);
    if !transcript.is_empty() && !transcript.ends_with(b"\n") {
        transcript.push(b'\n');
    }
    let exit_json = match &exit {
        AgentExit::Exited(code) => json!({"exited": code}),
        AgentExit::Signalled => json!("signalled"),
        AgentExit::TimedOut(after) => json!({"timed_out_after_secs": after.as_secs()}),
    };
    let trailer = json!({
        "type": "loopgate.agent_end",
        "agent": profile.name,
        "kind": profile.kind.as_str(),
        "exit": exit_json,
        "elapsed_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "stdout_bytes_dropped": dropped,
        "stderr": stderr_tail,
    });
    transcript.extend_from_slice(trailer.to_string().as_bytes());
    transcript.push(b'\n');
    Ok(AgentRun {
        exit,
        report,
        transcript,
        stderr_tail,
        elapsed,
    })
}

/// The capture once the pumps are done; a pump that did not drain may still hold it, then
/// what it has so far is reported without the parse.
fn take_capture(capture: Arc<Mutex<StdoutCapture>>) -> (AgentReport, Vec<u8>, u64) {
    match Arc::try_unwrap(capture) {
        Ok(mutex) => mutex
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .finish(),
        Err(shared) => with_sink(&shared, |c| {
            (AgentReport::default(), c.kept.clone(), c.dropped)
        }),
    }
}
