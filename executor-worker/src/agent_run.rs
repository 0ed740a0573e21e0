//! Running one CLI agent: spawned in the workspace in its own process group with a scrubbed
//! environment (PATH, LANG, a HOME of its own, and the profile's variables), its JSON-lines
//! stdout read as it streams, and the whole group killed when the time budget runs out (or
//! when the run is dropped: cancelled episodes leave no processes behind).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::agent_config::AgentProfile;
use crate::agent_templates::agent_args;
use crate::agent_transcript::{AgentReport, TranscriptReader};
use crate::output_cap::CappedOutput;
use crate::process_group::GroupKill;
use crate::settings::ShellEnv;

/// After the agent exits (or is killed), how long to wait for its output pipes to drain.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// One stdout line longer than this is cut (the rest of it is dropped).
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// stderr kept (head + tail).
const STDERR_CAP_BYTES: usize = 16 * 1024;
/// Default cap on the stored transcript.
pub const DEFAULT_TRANSCRIPT_CAP_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct AgentLimits {
    /// Wall-clock budget; the process group is killed when it runs out.
    pub budget: Duration,
    pub shell_env: ShellEnv,
    /// Bytes of stdout kept for the stored transcript (the parse sees all of it).
    pub transcript_cap_bytes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentExit {
    Exited(i32),
    Signalled,
    TimedOut(Duration),
}

#[derive(Debug)]
pub struct AgentRun {
    pub exit: AgentExit,
    pub report: AgentReport,
    /// stdout (capped) followed by one `loopgate.agent_end` JSON line with the exit and stderr.
    pub transcript: Vec<u8>,
    pub stderr_tail: String,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
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

fn push_line(line: &mut Vec<u8>, capture: &Mutex<StdoutCapture>) {
    if let Ok(mut c) = capture.lock() {
        c.reader.line(&String::from_utf8_lossy(line));
    }
    line.clear();
}

/// stdout as read: the parse and the bytes kept.
struct StdoutCapture {
    reader: TranscriptReader,
    kept: Vec<u8>,
    dropped: u64,
}

async fn pump_stdout(
    mut stdout: impl AsyncRead + Unpin,
    capture: Arc<Mutex<StdoutCapture>>,
    cap: usize,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Ok(mut c) = capture.lock() {
            let room = cap.saturating_sub(c.kept.len()).min(n);
            c.kept.extend_from_slice(&buf[..room]);
            c.dropped += (n - room) as u64;
        }
        for &byte in &buf[..n] {
            if byte == b'\n' {
                push_line(&mut line, &capture);
            } else if line.len() < MAX_LINE_BYTES {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        push_line(&mut line, &capture);
    }
}

async fn pump_stderr(mut stderr: impl AsyncRead + Unpin, sink: Arc<Mutex<CappedOutput>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut out) = sink.lock() {
                    out.push(&buf[..n]);
                }
            }
        }
    }
}

/// Runs the agent with `prompt` in `workspace` (HOME = `home`) within `limits.budget`.
pub async fn run_agent(
    profile: &AgentProfile,
    prompt: &str,
    workspace: &Path,
    home: &Path,
    limits: &AgentLimits,
) -> Result<AgentRun, AgentError> {
    let command = profile.command.display().to_string();
    let mut cmd = Command::new(&profile.command);
    cmd.args(agent_args(profile, prompt))
        .current_dir(workspace)
        .env_clear()
        .env("PATH", &limits.shell_env.path)
        .env("HOME", home)
        .env("LANG", &limits.shell_env.lang)
        .envs(profile.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| AgentError::Spawn {
        command: command.clone(),
        source,
    })?;
    let mut group = GroupKill::for_leader(child.id());
    let capture = Arc::new(Mutex::new(StdoutCapture {
        reader: TranscriptReader::new(profile.kind),
        kept: Vec::new(),
        dropped: 0,
    }));
    let stderr_sink = Arc::new(Mutex::new(CappedOutput::new(STDERR_CAP_BYTES)));
    let mut pumps = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        pumps.push(tokio::spawn(pump_stdout(
            stdout,
            capture.clone(),
            limits.transcript_cap_bytes,
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        pumps.push(tokio::spawn(pump_stderr(stderr, stderr_sink.clone())));
    }
    let exit = match tokio::time::timeout(limits.budget, child.wait()).await {
        Ok(Ok(status)) => status
            .code()
            .map_or(AgentExit::Signalled, AgentExit::Exited),
        Ok(Err(source)) => return Err(AgentError::Wait { command, source }),
        Err(_) => AgentExit::TimedOut(limits.budget),
    };
    // Whatever it left running in its group goes too (and releases the pipes).
    group.kill_now();
    if matches!(exit, AgentExit::TimedOut(_)) {
        let _ = child.wait().await;
    }
    for pump in pumps {
        if tokio::time::timeout(DRAIN_TIMEOUT, pump).await.is_err() {
            tracing::warn!(agent = %profile.name, "agent output pipe still open after its group was killed");
        }
    }
    let elapsed = started.elapsed();
    let stderr_tail = stderr_sink.lock().map(|s| s.render()).unwrap_or_default();
    let (report, mut transcript, dropped) = match Arc::try_unwrap(capture) {
        Ok(mutex) => match mutex.into_inner() {
            Ok(c) => (c.reader.finish(), c.kept, c.dropped),
            Err(poisoned) => {
                let c = poisoned.into_inner();
                (c.reader.finish(), c.kept, c.dropped)
            }
        },
        // A pump that did not drain still holds it: report what we can.
        Err(shared) => match shared.lock() {
            Ok(c) => (AgentReport::default(), c.kept.clone(), c.dropped),
            Err(_) => (AgentReport::default(), Vec::new(), 0),
        },
    };
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
