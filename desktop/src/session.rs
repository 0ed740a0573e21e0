//! One desktop: started on first use, restarted after a crash; launch programs, snapshot the
//! accessibility tree, click / type / press, wait, screenshot.

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::error::DesktopError;
use crate::keys::xdotool_key;
use crate::launch::{launch, AgentFailure, LaunchSettings, Running};
use crate::tree::{render, AppNode, RefTable, Rendered, DEFAULT_SNAPSHOT_CAP};

/// How long a launched program may take to show a window.
pub const DEFAULT_LAUNCH_WAIT: Duration = Duration::from_secs(15);

/// How often a wait looks at the tree again.
const POLL: Duration = Duration::from_millis(100);

/// One desktop session.
pub struct Session {
    settings: LaunchSettings,
    running: Option<Running>,
    refs: RefTable,
    cap: usize,
    launch_wait: Duration,
    restarted: bool,
    started_once: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("settings", &self.settings)
            .field("running", &self.running.is_some())
            .finish_non_exhaustive()
    }
}

fn body(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl Session {
    /// A session that starts its desktop on first use.
    pub fn new(settings: LaunchSettings) -> Self {
        Session {
            settings,
            running: None,
            refs: RefTable::default(),
            cap: DEFAULT_SNAPSHOT_CAP,
            launch_wait: DEFAULT_LAUNCH_WAIT,
            restarted: false,
            started_once: false,
        }
    }

    /// The same session with a snapshot cap of `cap` bytes.
    pub fn with_snapshot_cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    /// The same session with `wait` for a launched program's window.
    pub fn with_launch_wait(mut self, wait: Duration) -> Self {
        self.launch_wait = wait;
        self
    }

    /// The driver's process id (tests kill it to play a crash).
    pub fn driver_pid(&self) -> Option<u32> {
        self.running.as_ref().and_then(Running::pid)
    }

    /// The X display (`:0`) of the running desktop.
    pub fn display(&self) -> Option<&str> {
        self.running.as_ref().map(|r| r.display.as_str())
    }

    /// Kill the desktop and everything launched on it.
    pub fn close(&mut self) {
        self.running = None;
        self.refs.clear();
    }

    /// Whether the desktop was restarted (after a crash) since the last call.
    pub fn take_restarted(&mut self) -> bool {
        std::mem::take(&mut self.restarted)
    }

    /// Start the desktop now (it otherwise starts on first use).
    pub async fn start(&mut self) -> Result<(), DesktopError> {
        self.running().await.map(|_| ())
    }

    async fn running(&mut self) -> Result<&mut Running, DesktopError> {
        let alive = match self.running.as_mut() {
            Some(running) => running.is_alive(),
            None => false,
        };
        if !alive {
            if self.running.take().is_some() || self.started_once {
                self.restarted = true;
            }
            self.refs.clear();
            let running = launch(&self.settings).await?;
            self.started_once = true;
            self.running = Some(running);
        }
        self.running.as_mut().ok_or(DesktopError::Crashed)
    }

    async fn call(
        &mut self,
        op: &'static str,
        args: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, AgentFailure> {
        let running = self.running().await.map_err(AgentFailure::Transport)?;
        running.request(op, body(args), timeout).await
    }

    /// A driver command whose refusals are plain command errors.
    async fn plain(&mut self, op: &'static str, args: Value) -> Result<Value, DesktopError> {
        self.call(op, args, None).await.map_err(|f| match f {
            AgentFailure::Transport(e) => e,
            AgentFailure::Refused { kind, message } if kind == "bad_request" => {
                DesktopError::BadRequest(message)
            }
            AgentFailure::Refused { kind, message } if kind == "missing_tool" => {
                DesktopError::MissingTool(message)
            }
            AgentFailure::Refused { message, .. } => DesktopError::Command { op, message },
        })
    }

    /// Start `command` (`sh -c`) on the desktop in the workspace, and wait until it shows an
    /// accessible window (or exits).
    pub async fn launch(&mut self, command: &str) -> Result<String, DesktopError> {
        if command.trim().is_empty() {
            return Err(DesktopError::BadRequest("an empty command".into()));
        }
        let before: Vec<i64> = self.apps().await?.iter().map(|a| a.pid).collect();
        let cwd = self.settings.dir.as_ref().map(|d| d.display().to_string());
        let started = self
            .plain("launch", json!({"command": command, "cwd": cwd}))
            .await?;
        let pid = started.get("pid").and_then(Value::as_i64).unwrap_or(0);
        let deadline = Instant::now() + self.launch_wait;
        loop {
            let apps = self.apps().await?;
            if let Some(app) = apps
                .iter()
                .find(|a| !before.contains(&a.pid) && a.windows.iter().any(|w| w.showing))
            {
                let titles: Vec<String> = app
                    .windows
                    .iter()
                    .filter(|w| w.showing)
                    .map(|w| format!("{:?}", w.name))
                    .collect();
                return Ok(format!(
                    "launched {command:?} (pid {pid}); window {} is up: take a desktop_snapshot",
                    titles.join(", ")
                ));
            }
            if let Some((status, tail)) = self.exited(pid).await? {
                return Err(DesktopError::AppExited {
                    command: command.to_string(),
                    status,
                    tail,
                });
            }
            if Instant::now() >= deadline {
                return Err(DesktopError::NoWindow {
                    command: command.to_string(),
                    timeout: self.launch_wait,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether the launched program `pid` exited: its status and the end of its output.
    async fn exited(&mut self, pid: i64) -> Result<Option<(String, String)>, DesktopError> {
        let status = self.plain("app_status", json!({})).await?;
        let apps = status.get("apps").and_then(Value::as_array);
        let Some(app) = apps.and_then(|a| {
            a.iter()
                .find(|app| app.get("pid").and_then(Value::as_i64) == Some(pid))
        }) else {
            return Ok(None);
        };
        let Some(code) = app.get("exit").and_then(Value::as_i64) else {
            return Ok(None);
        };
        let tail = app
            .get("tail")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string();
        Ok(Some((format!("exit status {code}"), tail)))
    }

    async fn apps(&mut self) -> Result<Vec<AppNode>, DesktopError> {
        let tree = self.plain("tree", json!({})).await?;
        let apps = tree
            .get("apps")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        serde_json::from_value(apps).map_err(|e| DesktopError::Command {
            op: "tree",
            message: format!("unreadable tree: {e}"),
        })
    }

    /// The accessibility tree, rendered with refs (not capped in `nodes`).
    pub async fn snapshot_raw(&mut self) -> Result<Rendered, DesktopError> {
        let apps = self.apps().await?;
        Ok(render(&apps, &mut self.refs, self.cap))
    }

    /// The accessibility tree as capped lines.
    pub async fn snapshot(&mut self) -> Result<String, DesktopError> {
        Ok(self.snapshot_raw().await?.text)
    }

    /// The element a ref names in the latest snapshot.
    fn element(&self, reference: &str) -> Result<(String, String), DesktopError> {
        self.refs
            .lookup(reference)
            .ok_or_else(|| DesktopError::UnknownRef(reference.to_string()))
    }

    /// A ref names an element of the desktop its snapshot came from: when that desktop's driver
    /// has died since, the call says so and forgets the refs (the next call starts a fresh
    /// desktop), instead of sending the old ref to a new desktop.
    fn refuse_if_crashed(&mut self) -> Result<(), DesktopError> {
        let dead = self.running.as_mut().is_some_and(|r| !r.is_alive());
        if dead {
            self.running = None;
            self.refs.clear();
            return Err(DesktopError::Crashed);
        }
        Ok(())
    }

    /// A command on one element, its `stale` refusals named by `reference`.
    async fn on_element(
        &mut self,
        op: &'static str,
        reference: &str,
        extra: Value,
    ) -> Result<Value, DesktopError> {
        self.refuse_if_crashed()?;
        let (key, role) = self.element(reference)?;
        let mut args = body(extra);
        args.insert("key".into(), Value::from(key));
        args.insert("role".into(), Value::from(role));
        self.call(op, Value::Object(args), None)
            .await
            .map_err(|f| match f {
                AgentFailure::Transport(e) => e,
                AgentFailure::Refused { kind, message } if kind == "stale" => {
                    DesktopError::StaleRef {
                        reference: reference.to_string(),
                        reason: message,
                    }
                }
                AgentFailure::Refused { message, .. } => DesktopError::Command { op, message },
            })
    }

    /// Click the element `reference` names (a real pointer click at its centre).
    pub async fn click(&mut self, reference: &str) -> Result<(i64, i64), DesktopError> {
        let at = self.on_element("click", reference, json!({})).await?;
        Ok(point(&at))
    }

    /// Click the screen at (`x`, `y`).
    pub async fn click_at(&mut self, x: i64, y: i64) -> Result<(), DesktopError> {
        self.plain("click", json!({"x": x, "y": y}))
            .await
            .map(|_| ())
    }

    /// Replace the text of the element `reference` names (focused and emptied first), or type
    /// into whatever has the focus; `submit` presses Enter after it.
    pub async fn type_text(
        &mut self,
        reference: Option<&str>,
        text: &str,
        submit: bool,
    ) -> Result<(), DesktopError> {
        if let Some(reference) = reference {
            self.on_element("focus", reference, json!({"clear": true}))
                .await?;
        }
        self.plain("type", json!({"text": text})).await?;
        if submit {
            self.plain("key", json!({"key": "Return"})).await?;
        }
        Ok(())
    }

    /// Press a key or chord (`Enter`, `Control+s`).
    pub async fn press_key(&mut self, key: &str) -> Result<(), DesktopError> {
        let key = xdotool_key(key)?;
        self.plain("key", json!({"key": key})).await.map(|_| ())
    }

    /// Wait until `text` is in some element's name or contents.
    pub async fn wait_for_text(
        &mut self,
        text: &str,
        timeout: Duration,
    ) -> Result<(), DesktopError> {
        let what = format!("text {text:?}");
        self.wait_until(timeout, what, |r| r.contains_text(text))
            .await
    }

    /// Wait until an element named `name` (of `role`, when given) is shown.
    pub async fn wait_for_element(
        &mut self,
        role: Option<&str>,
        name: &str,
        timeout: Duration,
    ) -> Result<(), DesktopError> {
        let what = format!("{} {name:?}", role.unwrap_or("element"));
        self.wait_until(timeout, what, |r| {
            r.nodes
                .iter()
                .any(|n| n.name == name && role.is_none_or(|role| n.role == role))
        })
        .await
    }

    async fn wait_until(
        &mut self,
        timeout: Duration,
        what: String,
        done: impl Fn(&Rendered) -> bool,
    ) -> Result<(), DesktopError> {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.snapshot_raw().await?) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DesktopError::NotFound { what, timeout });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The whole screen as a PNG.
    pub async fn screenshot_png(&mut self) -> Result<Vec<u8>, DesktopError> {
        let shot = self.plain("screenshot", json!({})).await?;
        let data = shot.get("png").and_then(Value::as_str).unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| DesktopError::Command {
                op: "screenshot",
                message: format!("unreadable image: {e}"),
            })
    }
}

fn point(v: &Value) -> (i64, i64) {
    (
        v.get("x").and_then(Value::as_i64).unwrap_or(0),
        v.get("y").and_then(Value::as_i64).unwrap_or(0),
    )
}
