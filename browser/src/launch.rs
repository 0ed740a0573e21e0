//! Starting headless Chromium in its own process group with a fresh profile, and killing the
//! whole group when the browser is dropped.

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

use crate::error::BrowserError;

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

/// How to start the browser.
#[derive(Debug, Clone)]
pub struct LaunchSettings {
    /// The Chromium executable.
    pub executable: PathBuf,
    /// How long Chromium may take to announce its DevTools endpoint.
    pub launch_timeout: Duration,
    /// How long one DevTools command may take.
    pub command_timeout: Duration,
    /// Viewport width and height in CSS pixels.
    pub viewport: (u32, u32),
}

impl LaunchSettings {
    /// Settings with the Chromium `find_chromium` finds and default limits.
    pub fn detect() -> Result<Self, BrowserError> {
        Ok(LaunchSettings {
            executable: find_chromium().ok_or(BrowserError::NoChromium)?,
            launch_timeout: Duration::from_secs(30),
            command_timeout: Duration::from_secs(20),
            viewport: (1280, 800),
        })
    }
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
    let mut command = Command::new(&settings.executable);
    command
        .args(CHROMIUM_FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!(
            "--window-size={},{}",
            settings.viewport.0, settings.viewport.1
        ))
        .arg("--remote-debugging-port=0")
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| launch_err("spawn failed".into(), Some(e)))?;
    let Some(stderr) = child.stderr.take() else {
        return Err(launch_err("no stderr pipe".into(), None));
    };
    let mut lines = BufReader::new(stderr).lines();
    let found = tokio::time::timeout(settings.launch_timeout, async {
        let mut tail = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.split("DevTools listening on ").nth(1) {
                return Ok(url.trim().to_string());
            }
            tail.push(line);
            if tail.len() > 5 {
                tail.remove(0);
            }
        }
        Err(tail.join(" | "))
    })
    .await;
    let ws_url = match found {
        Ok(Ok(url)) => url,
        Ok(Err(tail)) => {
            kill_group(child.id());
            return Err(launch_err(
                format!("exited before DevTools was up: {tail}"),
                None,
            ));
        }
        Err(_) => {
            kill_group(child.id());
            return Err(launch_err(
                format!(
                    "DevTools endpoint not announced within {}s",
                    settings.launch_timeout.as_secs()
                ),
                None,
            ));
        }
    };
    // Keep draining stderr so a chatty browser never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::trace!(target: "chromium", "{line}");
        }
    });
    let config = HandlerConfig {
        request_timeout: settings.command_timeout,
        viewport: None,
        ..HandlerConfig::default()
    };
    let (browser, mut handler) = match Browser::connect_with_config(ws_url, config).await {
        Ok(pair) => pair,
        Err(e) => {
            kill_group(child.id());
            return Err(launch_err(format!("DevTools connection failed: {e}"), None));
        }
    };
    let alive = Arc::new(AtomicBool::new(true));
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
        _profile: profile,
    })
}
