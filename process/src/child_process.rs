//! The one way a worker runs a child process (the executor's `shell` tool, a CLI agent, an
//! acceptance check): in its own process group, stdin closed, stdout and stderr pumped into
//! bounded sinks as they arrive, a time budget after which the whole group is killed, and the
//! group killed again when the leader exits (background jobs would hold the pipes open and
//! outlive the episode) or when the caller drops the future (a cancelled episode leaves no
//! processes behind).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loopgate_common::output_cap::OutputCap;
use rustix::process::{kill_process_group, Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

/// After the leader exits (or is killed), how long the output pipes may take to drain.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for a killed leader to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(5);
const READ_CHUNK: usize = 16 * 1024;

/// Where a child's output goes, chunk by chunk as it arrives.
pub trait OutputSink: Send + 'static {
    fn push(&mut self, bytes: &[u8]);
}

impl OutputSink for OutputCap {
    fn push(&mut self, bytes: &[u8]) {
        OutputCap::push(self, bytes);
    }
}

/// A sink shared by a pump task and the caller.
pub type SharedSink<S> = Arc<Mutex<S>>;

/// A new shared sink.
pub fn shared<S: OutputSink>(sink: S) -> SharedSink<S> {
    Arc::new(Mutex::new(sink))
}

/// Runs `read` on the sink, even if a pump panicked while holding it.
pub fn with_sink<S, T>(sink: &SharedSink<S>, read: impl FnOnce(&mut S) -> T) -> T {
    let mut guard = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    read(&mut guard)
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEnd {
    /// The leader exited with this code; `None` when a signal ended it.
    Exited(Option<i32>),
    /// It ran past its budget and its process group was killed.
    TimedOut(Duration),
}

#[derive(Debug, Clone, Copy)]
pub struct ChildRun {
    pub end: ChildEnd,
    /// From spawn to the leader's end.
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for `{program}`: {source}")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// Kills a process group when dropped (or on `kill_now`).
#[derive(Debug)]
pub struct GroupKill {
    pgid: Option<Pid>,
}

impl GroupKill {
    /// The group led by the child with this pid (`None`: nothing to kill).
    pub fn for_leader(pid: Option<u32>) -> Self {
        GroupKill {
            pgid: pid
                .and_then(|id| i32::try_from(id).ok())
                .and_then(Pid::from_raw),
        }
    }

    pub fn kill_now(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // ESRCH (group already gone) is the normal case after a clean exit.
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill_now();
    }
}

async fn pump<S: OutputSink>(mut reader: impl AsyncRead + Unpin, sink: SharedSink<S>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => with_sink(&sink, |s| s.push(&buf[..n])),
        }
    }
}

/// Spawn `command` (its program, arguments, directory and environment set by the caller) and
/// run it to its end or `budget`, pumping stdout into `stdout` and stderr into `stderr` (the
/// same sink for both interleaves them as they arrive).
pub async fn run_child<O: OutputSink, E: OutputSink>(
    mut command: Command,
    budget: Duration,
    stdout: SharedSink<O>,
    stderr: SharedSink<E>,
) -> Result<ChildRun, ChildError> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| ChildError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut group = GroupKill::for_leader(child.id());
    let mut pumps: Vec<JoinHandle<()>> = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(out, stdout)));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(err, stderr)));
    }
    let end = match tokio::time::timeout(budget, child.wait()).await {
        Ok(Ok(status)) => ChildEnd::Exited(status.code()),
        Ok(Err(source)) => return Err(ChildError::Wait { program, source }),
        Err(_) => ChildEnd::TimedOut(budget),
    };
    let elapsed = started.elapsed();
    // Whatever it left running in its group goes too (and releases the pipes).
    group.kill_now();
    if matches!(end, ChildEnd::TimedOut(_)) {
        let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
    }
    // Pipes close once every holder is dead; a process that left the group (setsid) could keep
    // them open, so the drain is bounded.
    let drained = tokio::time::timeout(DRAIN_GRACE, async {
        for pump in pumps.iter_mut() {
            let _ = pump.await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(%program, "output pipe still open after the process group was killed");
        for pump in &pumps {
            pump.abort();
        }
    }
    Ok(ChildRun { end, elapsed })
}
