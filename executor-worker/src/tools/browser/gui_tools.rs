//! One episode's browser: started on first use in the agent's sandbox, with the task's
//! `serve` command beside it, and the call of one browser tool on it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loopgate_browser::{
    Beside, CommandWrapper, LaunchSettings, Session, TargetPolicy, WrappedLaunch,
};
use loopgate_checks::AgentLaunch;
use loopgate_protocol::gui::GuiSpec;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::ShellEnv;
use crate::isolation::AgentIsolationEnv;
use crate::prompt::template::text;
use crate::tools::agent_env::shell_env;
use crate::tools::browser::browser_tool::BrowserTool;
use crate::tools::browser::page_tool::{BrowserOutput, GuiToolError};
use crate::tools::tool_def::arguments_value;
use crate::tools::workspace::{ToolError, Workspace};

/// What the system prompt adds for gui episodes (after a blank line).
pub(crate) fn gui_note() -> &'static str {
    text(include_str!("gui_note.md"))
}

/// How long the `serve` command may take to answer on its URL.
const SERVE_START: Duration = Duration::from_secs(30);

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

    /// Carry out a call of `tool`; `check_write` applies the step's write scope to the
    /// screenshot path.
    pub(crate) async fn call(
        &self,
        tool: BrowserTool,
        arguments: &Value,
        workspace: &Workspace,
        check_write: impl Fn(&str) -> Result<(), ToolError>,
    ) -> Result<BrowserOutput, GuiToolError> {
        let args = arguments_value(tool.def().name, arguments)?;
        let mut session = self.session.lock().await;
        let output = tool.run(&mut session, args, workspace, check_write).await?;
        let text = if session.take_restarted() {
            format!(
                "(the browser had crashed and was restarted; earlier refs are gone)\n{}",
                output.text
            )
        } else {
            output.text
        };
        Ok(BrowserOutput {
            text,
            png: output.png,
        })
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
