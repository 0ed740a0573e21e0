//! Starting the desktop driver (`agent.py`: Xvfb, a window manager, the AT-SPI bus and
//! registry, xdotool for input) in its own process group, optionally inside a caller's
//! sandbox, and talking to it in JSON lines over its stdin and stdout. The whole group (and,
//! sandboxed, the sandbox's pid namespace) is killed when the driver is dropped.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use crate::error::DesktopError;

/// The driver, run by `python3 -c`.
const AGENT: &str = include_str!("agent.py");

/// Builds the process that runs the driver: the executor wraps it in its agent sandbox. It
/// gets the program and arguments to run and a home directory, which must be writable
/// inside. The returned command's stdio, process group and kill-on-drop are set by the launch.
pub type CommandWrapper = Arc<dyn Fn(&WrappedLaunch<'_>) -> std::io::Result<Command> + Send + Sync>;

/// What a [`CommandWrapper`] wraps.
#[derive(Debug)]
pub struct WrappedLaunch<'a> {
    /// The Python interpreter.
    pub program: &'a Path,
    pub args: &'a [OsString],
    /// A fresh directory for `HOME`.
    pub home: &'a Path,
}

/// How to start the desktop.
#[derive(Clone)]
pub struct LaunchSettings {
    /// A Python 3 with PyGObject and the Atspi typelib (Debian's `/usr/bin/python3`).
    pub python: PathBuf,
    /// Screen width and height in pixels.
    pub screen: (u32, u32),
    /// How long the display, window manager and accessibility bus may take to come up.
    pub start_timeout: Duration,
    /// How long one driver command may take.
    pub command_timeout: Duration,
    /// Where launched programs run (the workspace); the current directory when `None`.
    pub dir: Option<PathBuf>,
    /// The sandbox around the desktop; a plain child process when `None`.
    pub wrap: Option<CommandWrapper>,
}

impl fmt::Debug for LaunchSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchSettings")
            .field("python", &self.python)
            .field("screen", &self.screen)
            .field("start_timeout", &self.start_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("dir", &self.dir)
            .field("wrapped", &self.wrap.is_some())
            .finish()
    }
}

impl LaunchSettings {
    /// Settings with the Python `find_python` finds and default limits.
    pub fn detect() -> Self {
        LaunchSettings {
            python: find_python(),
            screen: (1280, 800),
            start_timeout: Duration::from_secs(30),
            command_timeout: Duration::from_secs(20),
            dir: None,
            wrap: None,
        }
    }

    /// The same settings with the desktop run through `wrap` (a sandbox).
    pub fn wrapped(mut self, wrap: CommandWrapper) -> Self {
        self.wrap = Some(wrap);
        self
    }
}

/// `$LOOPGATE_DESKTOP_PYTHON`, else Debian's `/usr/bin/python3` (where `python3-gi` installs),
/// else `python3` on PATH.
pub fn find_python() -> PathBuf {
    if let Some(p) = std::env::var_os("LOOPGATE_DESKTOP_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let debian = Path::new("/usr/bin/python3");
    if debian.is_file() {
        return debian.to_path_buf();
    }
    PathBuf::from("python3")
}

/// The programs a desktop needs on PATH; `None` when all are there.
pub fn missing_tools() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<&str> = ["Xvfb", "xdotool", "matchbox-window-manager", "dbus-daemon"]
        .into_iter()
        .filter(|tool| !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The driver's arguments: the script and the screen size.
fn agent_args(settings: &LaunchSettings) -> Vec<OsString> {
    vec![
        "-c".into(),
        AGENT.into(),
        settings.screen.0.to_string().into(),
        settings.screen.1.to_string().into(),
    ]
}

/// A running desktop: the driver's pipes, its process group and its home directory.
pub(crate) struct Running {
    child: Child,
    /// The driver's process group (its pid at spawn: `Child::id` is gone once it is reaped,
    /// and what it started must still be killed).
    group: Option<u32>,
    to_agent: ChildStdin,
    from_agent: Lines<BufReader<ChildStdout>>,
    pub(crate) display: String,
    command_timeout: Duration,
    dead: bool,
    _home: tempfile::TempDir,
}

impl Running {
    pub(crate) fn is_alive(&mut self) -> bool {
        !self.dead && matches!(self.child.try_wait(), Ok(None))
    }

    /// The driver's process id (tests kill it to play a crash).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.group
    }

    /// Send one command and read its answer. A driver error comes back as its `kind` and
    /// message; a closed pipe or a timeout marks the desktop dead.
    pub(crate) async fn request(
        &mut self,
        op: &'static str,
        mut body: serde_json::Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, AgentFailure> {
        body.insert("op".into(), Value::from(op));
        let mut line = Value::Object(body).to_string();
        line.push('\n');
        let limit = timeout.unwrap_or(self.command_timeout);
        let exchange = async {
            self.to_agent.write_all(line.as_bytes()).await?;
            self.to_agent.flush().await?;
            self.from_agent.next_line().await
        };
        let answer = match tokio::time::timeout(limit, exchange).await {
            Err(_) => {
                self.dead = true;
                return Err(AgentFailure::Transport(DesktopError::Timeout {
                    op,
                    timeout: limit,
                }));
            }
            Ok(Err(_)) | Ok(Ok(None)) => {
                self.dead = true;
                return Err(AgentFailure::Transport(DesktopError::Crashed));
            }
            Ok(Ok(Some(answer))) => answer,
        };
        let value: Value = serde_json::from_str(&answer).map_err(|e| {
            AgentFailure::Transport(DesktopError::Command {
                op,
                message: format!("unreadable answer: {e}"),
            })
        })?;
        if value.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(value);
        }
        Err(AgentFailure::Refused {
            kind: value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("internal")
                .to_string(),
            message: value
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_string(),
        })
    }
}

/// Why a driver command failed.
#[derive(Debug)]
pub(crate) enum AgentFailure {
    /// The driver is gone or did not answer.
    Transport(DesktopError),
    /// The driver answered with an error of `kind` (`stale`, `bad_request`, `input`, ...).
    Refused { kind: String, message: String },
}

impl Drop for Running {
    fn drop(&mut self) {
        kill_group(self.group);
        let _ = self.child.start_kill();
    }
}

fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

fn start_err(reason: String, source: Option<std::io::Error>) -> DesktopError {
    DesktopError::Start { reason, source }
}

/// The driver's command: through the caller's sandbox when it gives one.
async fn driver_command(settings: &LaunchSettings, home: &Path) -> Result<Command, DesktopError> {
    let args = agent_args(settings);
    let Some(wrap) = &settings.wrap else {
        let mut plain = Command::new(&settings.python);
        plain.args(&args).env("HOME", home);
        if let Some(dir) = &settings.dir {
            plain.current_dir(dir);
        }
        return Ok(plain);
    };
    // The wrapper may walk the workspace (chown for the sandbox's user): off the runtime.
    let (wrap, home_dir, python) = (wrap.clone(), home.to_path_buf(), settings.python.clone());
    tokio::task::spawn_blocking(move || {
        wrap(&WrappedLaunch {
            program: &python,
            args: &args,
            home: &home_dir,
        })
    })
    .await
    .map_err(|e| start_err(format!("preparing its sandbox failed: {e}"), None))?
    .map_err(|e| start_err("preparing its sandbox failed".into(), Some(e)))
}

/// Keep draining `stderr` (a chatty program must never block on a full pipe), remembering the
/// last lines for a start error.
fn drain_stderr(stderr: ChildStderr) -> Arc<Mutex<Vec<String>>> {
    let tail = Arc::new(Mutex::new(Vec::<String>::new()));
    let kept = tail.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::trace!(target: "desktop", "{line}");
            let mut kept = kept.lock().await;
            kept.push(line);
            if kept.len() > 5 {
                kept.remove(0);
            }
        }
    });
    tail
}

/// The driver's first line: its display, or why it did not start (pure).
fn parse_hello(line: &str) -> Result<String, DesktopError> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| start_err(format!("unreadable first line {line:?}: {e}"), None))?;
    if v.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(v
            .get("display")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string());
    }
    let message = v
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message")
        .to_string();
    if v.get("kind").and_then(Value::as_str) == Some("missing_tool") {
        return Err(DesktopError::MissingTool(message));
    }
    Err(start_err(message, None))
}

pub(crate) async fn launch(settings: &LaunchSettings) -> Result<Running, DesktopError> {
    let home = tempfile::Builder::new()
        .prefix("loopgate-desktop-home-")
        .tempdir()
        .map_err(|e| DesktopError::io("creating the desktop's home directory", e))?;
    let mut command = driver_command(settings, home.path()).await?;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| start_err(format!("cannot run {}", settings.python.display()), Some(e)))?;
    let (Some(to_agent), Some(from_agent), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        kill_group(child.id());
        return Err(start_err("no stdio pipes".into(), None));
    };
    let tail = drain_stderr(stderr);
    let mut from_agent = BufReader::new(from_agent).lines();
    let hello = match tokio::time::timeout(settings.start_timeout, from_agent.next_line()).await {
        Ok(Ok(Some(line))) => parse_hello(&line),
        Ok(Ok(None)) | Ok(Err(_)) => Err(start_err("the driver exited".into(), None)),
        Err(_) => Err(start_err(
            format!("no answer within {}s", settings.start_timeout.as_secs()),
            None,
        )),
    };
    let failure = match hello {
        Ok(display) => {
            return Ok(Running {
                group: child.id(),
                child,
                to_agent,
                from_agent,
                display,
                command_timeout: settings.command_timeout,
                dead: false,
                _home: home,
            })
        }
        Err(DesktopError::Start { reason, .. }) => reason,
        Err(other) => {
            kill_group(child.id());
            return Err(other);
        }
    };
    kill_group(child.id());
    let _ = child.start_kill();
    // Let the stderr reader take the last words of a driver that exited.
    let _ = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
    let last = tail.lock().await.join(" | ");
    let reason = if last.is_empty() {
        failure
    } else {
        format!("{failure}: {last}")
    };
    Err(start_err(reason, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_arguments() {
        let mut settings = LaunchSettings::detect();
        settings.screen = (800, 600);
        let args: Vec<String> = agent_args(&settings)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[0], "-c");
        assert!(args[1].contains("-nolisten"), "the driver script");
        assert_eq!(&args[2..], ["800", "600"]);
    }

    #[test]
    fn first_line_table() {
        // (line, display or the error's kind)
        let cases: &[(&str, Result<&str, &str>)] = &[
            (r#"{"ok": true, "display": ":3"}"#, Ok(":3")),
            (
                r#"{"ok": false, "kind": "missing_tool", "message": "Xvfb not found"}"#,
                Err("missing"),
            ),
            (
                r#"{"ok": false, "kind": "start", "message": "no bus"}"#,
                Err("start"),
            ),
            ("Traceback (most recent call last):", Err("start")),
        ];
        for (line, want) in cases {
            let got = parse_hello(line).map_err(|e| match e {
                DesktopError::MissingTool(_) => "missing",
                DesktopError::Start { .. } => "start",
                _ => "other",
            });
            assert_eq!(got.as_deref().map_err(|e| *e), *want, "{line}");
        }
    }
}
