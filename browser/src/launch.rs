//! Starting headless Chromium in its own process group with a fresh profile (optionally inside
//! a caller's sandbox, with the task's `serve` command beside it), talking to it over its
//! DevTools pipe (`pipe_relay`), and killing the whole group when the browser is dropped.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::Browser;
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use crate::error::BrowserError;
use crate::pipe_relay::{probe, Relay};

/// Flags every launch uses: headless, no sandbox of Chromium's own (the executor's sandbox is
/// the boundary), and nothing that reaches out to the network on its own (a closed network
/// makes those hang).
pub const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--hide-scrollbars",
    "--password-store=basic",
    "--use-mock-keychain",
];

/// Builds the process that runs the launch script: the executor wraps it in its agent
/// sandbox (`loopgate_checks::AgentSandbox::plan`). It gets the program and arguments to run
/// and the profile directory, which must be writable inside. The returned command's stdio,
/// process group and kill-on-drop are set by the launch.
pub type CommandWrapper = Arc<dyn Fn(&WrappedLaunch<'_>) -> std::io::Result<Command> + Send + Sync>;

/// What a [`CommandWrapper`] wraps.
#[derive(Debug)]
pub struct WrappedLaunch<'a> {
    /// `sh`, run by its name.
    pub program: &'a Path,
    pub args: &'a [OsString],
    /// The browser's profile directory (also a good `HOME`).
    pub profile: &'a Path,
}

/// A command started beside the browser, in its process tree and (when sandboxed) its network:
/// the task's `[gui] serve`. It dies with the browser and starts again with it.
#[derive(Debug, Clone)]
pub struct Beside {
    pub command: String,
    /// The URL it serves: the session waits until a navigation to it loads.
    pub url: String,
    /// How long it may take to answer.
    pub start_timeout: Duration,
}

/// How to start the browser.
#[derive(Clone)]
pub struct LaunchSettings {
    /// The Chromium executable.
    pub executable: PathBuf,
    /// How long Chromium may take to answer on its DevTools pipe.
    pub launch_timeout: Duration,
    /// How long one DevTools command may take.
    pub command_timeout: Duration,
    /// Viewport width and height in CSS pixels.
    pub viewport: (u32, u32),
    /// Where the browser (and `beside`) run; the current directory when `None`.
    pub dir: Option<PathBuf>,
    /// The task's `serve` command, started with the browser.
    pub beside: Option<Beside>,
    /// The sandbox around the browser; a plain child process when `None`.
    pub wrap: Option<CommandWrapper>,
}

impl fmt::Debug for LaunchSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchSettings")
            .field("executable", &self.executable)
            .field("launch_timeout", &self.launch_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("viewport", &self.viewport)
            .field("dir", &self.dir)
            .field("beside", &self.beside)
            .field("wrapped", &self.wrap.is_some())
            .finish()
    }
}

impl LaunchSettings {
    /// Settings with the Chromium `find_chromium` finds and default limits.
    pub fn detect() -> Result<Self, BrowserError> {
        Ok(LaunchSettings {
            executable: find_chromium().ok_or(BrowserError::NoChromium)?,
            launch_timeout: Duration::from_secs(30),
            command_timeout: Duration::from_secs(20),
            viewport: (1280, 800),
            dir: None,
            beside: None,
            wrap: None,
        })
    }

    /// The same settings with the browser run through `wrap` (a sandbox).
    pub fn wrapped(mut self, wrap: CommandWrapper) -> Self {
        self.wrap = Some(wrap);
        self
    }
}

/// The launch script: start `$1` (the serve command, when not empty) in the background with
/// no stdio, then become the browser (`$2...`) with the DevTools pipe on fds 3 and 4 (taken
/// from stdin and stdout, which then point at /dev/null).
const LAUNCH_SCRIPT: &str = r#"if [ -n "$1" ]; then (sh -c "$1" </dev/null >/dev/null 2>&1 &); fi; shift; exec "$@" 3<&0 4>&1 </dev/null >/dev/null"#;

/// The launch script's arguments after `-c`: the script, `$0`, the serve command, Chromium and
/// its flags.
fn launch_args(settings: &LaunchSettings, profile: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "-c".into(),
        LAUNCH_SCRIPT.into(),
        "loopgate-browser".into(),
        settings
            .beside
            .as_ref()
            .map_or(String::new(), |b| b.command.clone())
            .into(),
        settings.executable.clone().into(),
    ];
    args.extend(CHROMIUM_FLAGS.iter().map(OsString::from));
    args.push(format!("--user-data-dir={}", profile.display()).into());
    args.push(
        format!(
            "--window-size={},{}",
            settings.viewport.0, settings.viewport.1
        )
        .into(),
    );
    args.push("--remote-debugging-pipe".into());
    args.push("about:blank".into());
    args
}

/// `$LOOPGATE_CHROMIUM`, else Debian's binary, else `chromium` / `chromium-browser` /
/// `google-chrome` on PATH.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LOOPGATE_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let debian = Path::new("/usr/lib/chromium/chromium");
    if debian.is_file() {
        return Some(debian.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// A running Chromium: the DevTools client, its process group and its profile directory.
pub(crate) struct Running {
    pub(crate) browser: Browser,
    child: Child,
    alive: Arc<AtomicBool>,
    handler: tokio::task::JoinHandle<()>,
    relay: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Running {
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// The browser's process id (tests kill it to play a crash).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handler.abort();
        self.relay.abort();
        kill_group(self.child.id());
        let _ = self.child.start_kill();
    }
}

fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

pub(crate) async fn launch(settings: &LaunchSettings) -> Result<Running, BrowserError> {
    let exe = settings.executable.display().to_string();
    let launch_err = |reason: String, source: Option<std::io::Error>| BrowserError::Launch {
        executable: exe.clone(),
        reason,
        source,
    };
    let profile = tempfile::Builder::new()
        .prefix("loopgate-chromium-")
        .tempdir()
        .map_err(|e| BrowserError::io("creating the browser profile directory", e))?;
    let args = launch_args(settings, profile.path());
    let mut command = match &settings.wrap {
        // The wrapper may walk the workspace (chown for the sandbox's user): off the runtime.
        Some(wrap) => {
            let (wrap, profile_dir) = (wrap.clone(), profile.path().to_path_buf());
            tokio::task::spawn_blocking(move || {
                wrap(&WrappedLaunch {
                    program: Path::new("sh"),
                    args: &args,
                    profile: &profile_dir,
                })
            })
            .await
            .map_err(|e| launch_err(format!("preparing its sandbox failed: {e}"), None))?
            .map_err(|e| launch_err("preparing its sandbox failed".into(), Some(e)))?
        }
        None => {
            let mut plain = Command::new("sh");
            plain.args(&args);
            if let Some(dir) = &settings.dir {
                plain.current_dir(dir);
            }
            plain
        }
    };
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| launch_err("spawn failed".into(), Some(e)))?;
    let (Some(mut to_browser), Some(from_browser), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        kill_group(child.id());
        return Err(launch_err("no stdio pipes".into(), None));
    };
    // Keep draining stderr (a chatty browser must never block on a full pipe), remembering
    // the last lines for a launch error.
    let tail = Arc::new(Mutex::new(Vec::<String>::new()));
    let kept = tail.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::trace!(target: "chromium", "{line}");
            let mut kept = kept.lock().await;
            kept.push(line);
            if kept.len() > 5 {
                kept.remove(0);
            }
        }
    });
    let mut from_browser = BufReader::new(from_browser);
    if let Err(reason) = probe(&mut to_browser, &mut from_browser, settings.launch_timeout).await {
        kill_group(child.id());
        let _ = child.start_kill();
        // Let the stderr reader take the last words of a browser that exited.
        let _ = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
        let last = tail.lock().await.join(" | ");
        let reason = if last.is_empty() {
            reason
        } else {
            format!("{reason}: {last}")
        };
        return Err(launch_err(reason, None));
    }
    let relay = Relay::bind().await?;
    let ws_url = relay.url()?;
    let alive = Arc::new(AtomicBool::new(true));
    let relay = {
        let alive = alive.clone();
        let accept_timeout = settings.launch_timeout;
        tokio::spawn(async move {
            relay.run(to_browser, from_browser, accept_timeout).await;
            alive.store(false, Ordering::SeqCst);
        })
    };
    let config = HandlerConfig {
        request_timeout: settings.command_timeout,
        viewport: None,
        ..HandlerConfig::default()
    };
    let (browser, mut handler) = match Browser::connect_with_config(ws_url, config).await {
        Ok(pair) => pair,
        Err(e) => {
            relay.abort();
            kill_group(child.id());
            return Err(launch_err(format!("DevTools connection failed: {e}"), None));
        }
    };
    let flag = alive.clone();
    let handler = tokio::spawn(async move {
        while let Some(event) = handler.next().await {
            if let Err(e) = event {
                tracing::debug!(error = %e, "browser handler event error");
                if matches!(e, chromiumoxide::error::CdpError::Ws(_)) {
                    break;
                }
            }
        }
        flag.store(false, Ordering::SeqCst);
    });
    Ok(Running {
        browser,
        child,
        alive,
        handler,
        relay,
        _profile: profile,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn settings(beside: Option<&str>) -> LaunchSettings {
        LaunchSettings {
            executable: "/usr/lib/chromium/chromium".into(),
            launch_timeout: Duration::from_secs(30),
            command_timeout: Duration::from_secs(20),
            viewport: (800, 600),
            dir: None,
            beside: beside.map(|command| Beside {
                command: command.to_string(),
                url: "http://127.0.0.1:8765/".into(),
                start_timeout: Duration::from_secs(30),
            }),
            wrap: None,
        }
    }

    #[test]
    fn launch_arguments_table() {
        // (serve command, what $1 is)
        for (beside, first) in [
            (None, ""),
            (
                Some("python3 -m http.server 8765"),
                "python3 -m http.server 8765",
            ),
        ] {
            let args = launch_args(&settings(beside), Path::new("/tmp/profile"));
            let args: Vec<String> = args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert_eq!(args[0], "-c");
            assert_eq!(args[1], LAUNCH_SCRIPT);
            assert_eq!(args[3], first, "{args:?}");
            assert_eq!(args[4], "/usr/lib/chromium/chromium");
            for flag in [
                "--headless",
                "--user-data-dir=/tmp/profile",
                "--window-size=800,600",
                "--remote-debugging-pipe",
            ] {
                assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
            }
            // Never a DevTools port.
            assert!(
                !args
                    .iter()
                    .any(|a| a.starts_with("--remote-debugging-port")),
                "{args:?}"
            );
            assert_eq!(args.last().map(String::as_str), Some("about:blank"));
        }
    }
}
