//! The gui capability's browser tools, named as Playwright MCP names them: `browser_navigate`,
//! `browser_snapshot`, `browser_click`, `browser_type`, `browser_press_key`,
//! `browser_wait_for`, `browser_screenshot`. One browser per episode (started on first use,
//! restarted after a crash), the task's `[gui] serve` command started with it, both in the
//! agent's sandbox exactly like a `shell` command (its network, its user, the worker's secrets
//! and other workspaces out of sight, an environment of PATH, HOME and LANG only); the worker
//! drives the browser over its DevTools pipe. Both die with the episode's tools.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopgate_browser::{
    Beside, BrowserError, CommandWrapper, LaunchSettings, Session, TargetPolicy, WrappedLaunch,
};
use loopgate_checks::AgentLaunch;
use loopgate_models::{ToolCall, ToolSpec};
use loopgate_protocol::gui::GuiSpec;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::config::ShellEnv;
use crate::isolation::AgentIsolationEnv;
use crate::tools::shell::shell_env;
use crate::tools::workspace::{ToolError, Workspace};

pub(crate) const BROWSER_TOOL_NAMES: [&str; 7] = [
    "browser_navigate",
    "browser_snapshot",
    "browser_click",
    "browser_type",
    "browser_press_key",
    "browser_wait_for",
    "browser_screenshot",
];

/// What the system prompt adds for gui episodes.
pub(crate) const GUI_NOTE: &str = "\n\nThis is a GUI step: besides the file tools and shell you have a headless browser. \
browser_navigate opens a workspace file (e.g. index.html) or the task's served URL (paths starting with / are on it). \
browser_snapshot lists the page's elements with refs like [ref=e3]; browser_click, browser_type and browser_press_key act on refs \
from the latest snapshot. browser_wait_for waits for text; browser_screenshot saves a PNG into the workspace. \
Edit the files, reload with browser_navigate, and look again.";

/// How long `browser_wait_for` waits by default, and at most.
const DEFAULT_WAIT_SECS: u64 = 5;
const MAX_WAIT_SECS: u64 = 60;
/// How long the `serve` command may take to answer on its URL.
const SERVE_START: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub(crate) enum GuiToolError {
    #[error(transparent)]
    Browser(#[from] BrowserError),
    #[error(transparent)]
    Tool(#[from] ToolError),
}

#[derive(Deserialize)]
struct NavigateArgs {
    #[serde(alias = "path", alias = "href")]
    url: String,
}

#[derive(Deserialize)]
struct RefArgs {
    #[serde(rename = "ref", alias = "element", alias = "target", alias = "id")]
    reference: String,
}

#[derive(Deserialize)]
struct TypeArgs {
    #[serde(rename = "ref", alias = "element", alias = "target", alias = "id")]
    reference: String,
    #[serde(alias = "value", alias = "content")]
    text: String,
    #[serde(default)]
    submit: Option<bool>,
}

#[derive(Deserialize)]
struct KeyArgs {
    #[serde(alias = "name")]
    key: String,
}

#[derive(Deserialize)]
struct WaitArgs {
    text: String,
    #[serde(default, alias = "timeout", alias = "time")]
    timeout_secs: Option<f64>,
}

#[derive(Deserialize)]
struct ShotArgs {
    #[serde(alias = "filename", alias = "file")]
    path: String,
}

/// What a browser tool gives back: text for every model, and the PNG of a screenshot (sent as
/// an image part to models whose profile has `vision = true`).
#[derive(Debug)]
pub(crate) struct BrowserOutput {
    pub(crate) text: String,
    pub(crate) png: Option<Vec<u8>>,
}

/// One episode's browser (with the served artifact beside it, in the same sandbox).
pub(crate) struct GuiTools {
    session: Mutex<Session>,
}

impl fmt::Debug for GuiTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuiTools").finish_non_exhaustive()
    }
}

impl GuiTools {
    /// Prepare a browser for the episode in `root`, started on first use in the agent's
    /// sandbox (`isolation`: the shell's network, user and hidden paths) together with the
    /// task's `serve` command. A serve command that does not answer is reported by the
    /// navigation to its URL, not here: the model can still fix the app with the file tools
    /// and shell, and the next navigation to it starts it again.
    pub(crate) fn start(
        root: &Path,
        gui: Option<&GuiSpec>,
        isolation: &AgentIsolationEnv,
        shell_env: &ShellEnv,
    ) -> Result<GuiTools, GuiToolError> {
        let mut launch = LaunchSettings::detect()?.wrapped(in_sandbox(
            root.to_path_buf(),
            isolation.clone(),
            shell_env.clone(),
        ));
        launch.dir = Some(root.to_path_buf());
        launch.beside =
            gui.and_then(|g| g.serve.clone().zip(g.url.clone()))
                .map(|(command, url)| Beside {
                    command,
                    url,
                    start_timeout: SERVE_START,
                });
        let policy = TargetPolicy {
            workspace: Some(root.to_path_buf()),
            base_url: gui.and_then(|g| g.url.clone()),
            allow_network: isolation.network.shell,
        };
        Ok(GuiTools {
            session: Mutex::new(Session::new(launch, policy)),
        })
    }

    /// The browser tools' specs.
    pub(crate) fn specs() -> Vec<ToolSpec> {
        let s = |d: &str| json!({"type": "string", "description": d});
        let spec = |name: &str, description: &str, properties: Value, required: &[&str]| ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters: json!({"type": "object", "properties": properties, "required": required}),
        };
        let reference = s("Exact ref from the latest browser_snapshot, e.g. e3");
        vec![
            spec(
                "browser_navigate",
                "Open a page: a workspace-relative file (index.html), a path on the task's served URL (/), or a loopback http URL. Refs from the previous page become invalid.",
                json!({"url": s("Workspace path or loopback http URL")}),
                &["url"],
            ),
            spec(
                "browser_snapshot",
                "The page's accessibility tree, one element a line (- button \"Greet\" [ref=e3]). After the first snapshot of a page, only what changed is shown when that is shorter.",
                json!({}),
                &[],
            ),
            spec(
                "browser_click",
                "Click the element with this ref.",
                json!({"ref": reference.clone(), "element": s("Optional: what the element is, for the log")}),
                &["ref"],
            ),
            spec(
                "browser_type",
                "Replace the text of the field with this ref; submit=true presses Enter after.",
                json!({"ref": reference, "text": s("The text"), "submit": {"type": "boolean", "description": "Press Enter after typing"}}),
                &["ref", "text"],
            ),
            spec(
                "browser_press_key",
                "Press a key on the focused element: Enter, Tab, Escape, Backspace, ArrowDown, a, ...",
                json!({"key": s("Key name")}),
                &["key"],
            ),
            spec(
                "browser_wait_for",
                "Wait until the text appears on the page.",
                json!({"text": s("Text to wait for"), "timeout_secs": {"type": "number", "description": "At most this long (default 5, max 60)"}}),
                &["text"],
            ),
            spec(
                "browser_screenshot",
                "Save a PNG of the page into the workspace (it is frozen with the snapshot).",
                json!({"path": s("Workspace-relative path ending in .png, e.g. shots/page.png")}),
                &["path"],
            ),
        ]
    }

    /// Carry out a `browser_*` call; `check_write` applies the step's write scope to the
    /// screenshot path.
    pub(crate) async fn call(
        &self,
        call: &ToolCall,
        workspace: &Workspace,
        check_write: impl Fn(&str) -> Result<(), ToolError>,
        parse: impl Fn(&str, &Value) -> Result<Value, ToolError>,
    ) -> Result<BrowserOutput, GuiToolError> {
        let name = call.name.as_str();
        let args = parse(name, &call.arguments)?;
        let bad = |e: serde_json::Error| {
            GuiToolError::Tool(ToolError::BadArguments {
                tool: name.to_string(),
                reason: e.to_string(),
            })
        };
        let mut session = self.session.lock().await;
        let mut png_out = None;
        let result = match name {
            "browser_navigate" => {
                let a: NavigateArgs = serde_json::from_value(args).map_err(bad)?;
                let url = session.navigate(&a.url).await?;
                let (_, title) = session.location().await?;
                format!(
                    "navigated to {url} (title: {title:?}); call browser_snapshot to see the page"
                )
            }
            "browser_snapshot" => session.snapshot().await?,
            "browser_click" => {
                let a: RefArgs = serde_json::from_value(args).map_err(bad)?;
                session.click(&a.reference).await?;
                format!(
                    "clicked {}; call browser_snapshot to see the result",
                    a.reference
                )
            }
            "browser_type" => {
                let a: TypeArgs = serde_json::from_value(args).map_err(bad)?;
                let submit = a.submit.unwrap_or(false);
                session.type_text(&a.reference, &a.text, submit).await?;
                format!(
                    "typed {} characters into {}{}",
                    a.text.chars().count(),
                    a.reference,
                    if submit { " and pressed Enter" } else { "" }
                )
            }
            "browser_press_key" => {
                let a: KeyArgs = serde_json::from_value(args).map_err(bad)?;
                session.press_key(&a.key).await?;
                format!("pressed {}", a.key.trim())
            }
            "browser_wait_for" => {
                let a: WaitArgs = serde_json::from_value(args).map_err(bad)?;
                let secs = a
                    .timeout_secs
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .map_or(DEFAULT_WAIT_SECS as f64, |s| s.min(MAX_WAIT_SECS as f64));
                session
                    .wait_for_text(&a.text, Duration::from_secs_f64(secs))
                    .await?;
                format!("{:?} is on the page", a.text)
            }
            "browser_screenshot" => {
                let a: ShotArgs = serde_json::from_value(args).map_err(bad)?;
                check_write(&a.path)?;
                let png = session.screenshot_png().await?;
                let path = workspace.resolve(a.path.trim())?;
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|source| ToolError::Io {
                        op: "create directories for",
                        path: a.path.clone(),
                        source,
                    })?;
                }
                std::fs::write(&path, &png).map_err(|source| ToolError::Io {
                    op: "write",
                    path: a.path.clone(),
                    source,
                })?;
                let text = format!("saved a {}-byte PNG to {}", png.len(), a.path.trim());
                png_out = Some(png);
                text
            }
            other => {
                return Err(GuiToolError::Tool(ToolError::UnknownTool {
                    name: other.to_string(),
                    available: BROWSER_TOOL_NAMES.join(", "),
                }))
            }
        };
        let text = if session.take_restarted() {
            format!("(the browser had crashed and was restarted; earlier refs are gone)\n{result}")
        } else {
            result
        };
        Ok(BrowserOutput { text, png: png_out })
    }
}

/// Run the browser's launch script the way `shell` runs a command: the agent's sandbox, the
/// shell's environment (`HOME` = the browser profile, writable), the workspace as its
/// directory; the agent's user gets the workspace and the profile first.
fn in_sandbox(workspace: PathBuf, isolation: AgentIsolationEnv, env: ShellEnv) -> CommandWrapper {
    Arc::new(move |launch: &WrappedLaunch<'_>| {
        isolation.sandbox.grant(&[&workspace, launch.profile])?;
        let env = shell_env(launch.profile, &env);
        let plan = isolation.sandbox.plan(&AgentLaunch {
            program: launch.program,
            args: launch.args,
            workspace: &workspace,
            home: launch.profile,
            env: &env,
            network: isolation.network.shell,
            read_only: &[],
        });
        Ok(plan.command())
    })
}
