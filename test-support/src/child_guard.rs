//! A spawned process that is killed and reaped when dropped, with stdout+stderr captured to a
//! log file for assertion messages.

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::errors::SupportError;
use crate::readiness::{Poller, WaitTimedOut};
use tempfile::TempDir;

/// How much of the log goes into error messages.
const LOG_TAIL_BYTES: usize = 4096;

pub struct ChildGuard {
    name: String,
    child: Child,
    exit: Option<ExitStatus>,
    log_path: PathBuf,
    _log_dir: Option<TempDir>,
}

impl ChildGuard {
    /// Spawns `command` with stdout and stderr appended to `<own tempdir>/<name>.log`.
    pub fn spawn(name: &str, command: Command) -> anyhow::Result<ChildGuard> {
        let dir = tempfile::Builder::new()
            .prefix("loopgate-child-")
            .tempdir()
            .map_err(|e| SupportError::io("creating log tempdir", e))?;
        let log_path = dir.path().join(format!("{name}.log"));
        let mut guard = Self::spawn_with_log(name, command, &log_path)?;
        guard._log_dir = Some(dir);
        Ok(guard)
    }

    /// Spawns `command` with stdout and stderr appended to `log_path` (created if missing).
    pub fn spawn_with_log(
        name: &str,
        mut command: Command,
        log_path: &Path,
    ) -> anyhow::Result<ChildGuard> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(|e| SupportError::io(format!("opening {}", log_path.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| SupportError::io("duplicating log handle", e))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child = command.spawn().map_err(|source| SupportError::Spawn {
            name: name.to_string(),
            source,
        })?;
        tracing::debug!(name, pid = child.id(), log = %log_path.display(), "spawned");
        Ok(ChildGuard {
            name: name.to_string(),
            child,
            exit: None,
            log_path: log_path.to_path_buf(),
            _log_dir: None,
        })
    }

    /// Kills this process (if running) and starts `command` in its place, appending to the
    /// same log, so what the killed process wrote stays readable beside its successor's.
    pub fn respawn(&mut self, command: Command) -> anyhow::Result<()> {
        self.kill();
        let mut next = Self::spawn_with_log(&self.name, command, &self.log_path)?;
        next._log_dir = self._log_dir.take();
        *self = next;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Everything the process wrote so far (lossy UTF-8).
    pub fn log_text(&self) -> String {
        std::fs::read(&self.log_path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The last `max_bytes` of the log (lossy UTF-8).
    pub fn log_tail(&self, max_bytes: usize) -> String {
        let read_tail = || -> std::io::Result<String> {
            let mut file = File::open(&self.log_path)?;
            let len = file.metadata()?.len();
            let start = len.saturating_sub(max_bytes as u64);
            file.seek(SeekFrom::Start(start))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        read_tail().unwrap_or_default()
    }

    /// The exit status if the process has exited (reaps it), else None.
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(status);
            }
        }
        self.exit
    }

    pub fn is_running(&mut self) -> bool {
        self.try_exit_status().is_none()
    }

    /// SIGKILL and reap. Idempotent.
    pub fn kill(&mut self) {
        if self.try_exit_status().is_some() {
            return;
        }
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            self.exit = Some(status);
        }
    }

    /// Sends SIGTERM and waits up to `grace` for a clean exit, then SIGKILLs.
    /// Returns the exit status (None only if it could not be reaped).
    pub async fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.try_exit_status().is_none() {
            self.signal("TERM");
            if self.wait_exit(grace).await.is_err() {
                tracing::warn!(name = %self.name, "did not exit within {grace:?} of SIGTERM; killing");
                self.kill();
            }
        }
        self.exit
    }

    /// Sends a signal by name (`TERM`, `INT`, `STOP`, `CONT`, ...). Errors are ignored: the
    /// process may already be gone.
    pub fn signal(&self, signal: &str) {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("kill -s {signal} {}", self.child.id()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Waits for the process to exit on its own.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, WaitTimedOut> {
        let mut poller = Poller::new(timeout);
        loop {
            if let Some(status) = self.try_exit_status() {
                return Ok(status);
            }
            if !poller.pause().await {
                return Err(WaitTimedOut { timeout });
            }
        }
    }

    /// Polls `probe` until it returns true, failing fast with [`SupportError::ExitedEarly`] if
    /// the process dies, or with [`SupportError::NotReady`] after `timeout`. Both errors carry
    /// the tail of the process log.
    pub async fn wait_ready<F, Fut>(
        &mut self,
        timeout: Duration,
        mut probe: F,
    ) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut poller = Poller::new(timeout);
        loop {
            if let Some(status) = self.try_exit_status() {
                return Err(SupportError::ExitedEarly {
                    name: self.name.clone(),
                    status: status.to_string(),
                    log_tail: self.log_tail(LOG_TAIL_BYTES),
                }
                .into());
            }
            if probe().await {
                return Ok(());
            }
            if !poller.pause().await {
                return Err(SupportError::NotReady {
                    name: self.name.clone(),
                    timeout,
                    log_tail: self.log_tail(LOG_TAIL_BYTES),
                }
                .into());
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

impl std::fmt::Debug for ChildGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildGuard")
            .field("name", &self.name)
            .field("pid", &self.child.id())
            .field("log_path", &self.log_path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[tokio::test]
    async fn captures_output_and_reports_early_exit() {
        let mut guard = ChildGuard::spawn("echoer", sh("echo out; echo err >&2; exit 3")).unwrap();
        let err = guard
            .wait_ready(Duration::from_secs(10), || async { false })
            .await
            .unwrap_err();
        match err.downcast_ref::<SupportError>() {
            Some(SupportError::ExitedEarly { log_tail, .. }) => {
                assert!(
                    log_tail.contains("out") && log_tail.contains("err"),
                    "{log_tail}"
                );
            }
            other => panic!("unexpected error: {other:?}"),
        }
        assert_eq!(guard.try_exit_status().and_then(|s| s.code()), Some(3));
    }

    #[tokio::test]
    async fn not_ready_when_probe_never_passes() {
        let mut guard = ChildGuard::spawn("sleeper", sh("exec sleep 30")).unwrap();
        let err = guard
            .wait_ready(Duration::from_millis(100), || async { false })
            .await
            .unwrap_err();
        assert!(matches!(
            err.downcast_ref::<SupportError>(),
            Some(SupportError::NotReady { .. })
        ));
        assert!(guard.is_running());
        guard.kill();
        assert!(!guard.is_running());
    }

    #[tokio::test]
    async fn terminate_sends_sigterm_first() {
        let mut guard = ChildGuard::spawn(
            "trapper",
            sh("trap 'echo got-term; exit 0' TERM; echo trap-set; while :; do sleep 0.05; done"),
        )
        .unwrap();
        // The trap must be installed before we signal.
        let log = guard.log_path().to_path_buf();
        crate::readiness::wait_until(Duration::from_secs(10), || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(log)
                    .map(|t| t.contains("trap-set"))
                    .unwrap_or(false)
            }
        })
        .await
        .unwrap();
        let status = guard.terminate(Duration::from_secs(10)).await.unwrap();
        assert!(status.success(), "{status}");
        assert!(guard.log_text().contains("got-term"));
    }

    #[test]
    fn drop_kills_the_process() {
        let guard = ChildGuard::spawn("sleeper", sh("exec sleep 30")).unwrap();
        let pid = guard.pid();
        drop(guard);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }
}
