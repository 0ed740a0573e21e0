//! One episode's desktop: started on first use in the agent's sandbox, and the call of one
//! desktop tool on it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopgate_checks::AgentLaunch;
use loopgate_desktop::{CommandWrapper, DesktopError, LaunchSettings, Session, WrappedLaunch};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::ShellEnv;
use crate::isolation::AgentIsolationEnv;
use crate::prompt::template::text;
use crate::tools::agent_env::shell_env;
use crate::tools::browser::page_tool::{BrowserOutput, GuiToolError};
use crate::tools::desktop::desktop_tool::DesktopTool;
use crate::tools::tool_def::arguments_value;
use crate::tools::workspace::{ToolError, Workspace};

/// What the system prompt adds for desktop gui episodes (after a blank line).
pub(crate) fn desktop_note() -> &'static str {
    text(include_str!("desktop_note.md"))
}

/// One episode's desktop.
pub(crate) struct DesktopTools {
    session: Mutex<Session>,
}

impl fmt::Debug for DesktopTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DesktopTools").finish_non_exhaustive()
    }
}

impl DesktopTools {
    /// Prepare a desktop for the episode in `root`, started on first use in the agent's
    /// sandbox (`isolation`: the shell's network, user and hidden paths). Refused at once when
    /// this host lacks the desktop's programs.
    pub(crate) fn start(
        root: &Path,
        isolation: &AgentIsolationEnv,
        shell_env: &ShellEnv,
    ) -> Result<DesktopTools, GuiToolError> {
        if let Some(missing) = loopgate_desktop::missing_tools() {
            return Err(DesktopError::MissingTool(format!(
                "{missing} not installed on this executor"
            ))
            .into());
        }
        let mut launch = LaunchSettings::detect().wrapped(in_sandbox(
            root.to_path_buf(),
            isolation.clone(),
            shell_env.clone(),
        ));
        launch.dir = Some(root.to_path_buf());
        Ok(DesktopTools {
            session: Mutex::new(Session::new(launch)),
        })
    }

    /// Carry out a call of `tool`; `check_write` applies the step's write scope to the
    /// screenshot path.
    pub(crate) async fn call(
        &self,
        tool: DesktopTool,
        arguments: &Value,
        workspace: &Workspace,
        check_write: impl Fn(&str) -> Result<(), ToolError>,
    ) -> Result<BrowserOutput, GuiToolError> {
        let args = arguments_value(tool.def().name, arguments)?;
        let mut session = self.session.lock().await;
        let output = tool.run(&mut session, args, workspace, check_write).await?;
        let text = if session.take_restarted() {
            format!(
                "(the desktop had crashed and was restarted; launched programs and earlier refs are gone)\n{}",
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

/// Run the desktop's driver the way `shell` runs a command: the agent's sandbox, the shell's
/// environment (`HOME` = a fresh directory, writable), the workspace as its directory; the
/// agent's user gets the workspace and the home first.
fn in_sandbox(workspace: PathBuf, isolation: AgentIsolationEnv, env: ShellEnv) -> CommandWrapper {
    Arc::new(move |launch: &WrappedLaunch<'_>| {
        isolation.sandbox.grant(&[&workspace, launch.home])?;
        let env = shell_env(launch.home, &env);
        let plan = isolation.sandbox.plan(&AgentLaunch {
            program: launch.program,
            args: launch.args,
            workspace: &workspace,
            home: launch.home,
            env: &env,
            network: isolation.network.shell,
            read_only: &[],
        });
        Ok(plan.command())
    })
}
