//! What the tools of one episode run against: its workspace, limits, write scope, sandbox and
//! browser.

use std::sync::Arc;

use loopgate_protocol::snapshot::path_in_scope;

use crate::config::ToolLimits;
use crate::isolation::AgentIsolationEnv;
use crate::tools::browser::gui_tools::GuiTools;
use crate::tools::desktop::desktop_tools::DesktopTools;
use crate::tools::workspace::{ToolError, Workspace};

/// One episode's tool context.
#[derive(Debug, Clone)]
pub(crate) struct ToolContext {
    pub(crate) workspace: Workspace,
    pub(crate) limits: ToolLimits,
    /// The step's write scope (`dir/` prefixes or exact files); empty = the whole workspace.
    /// `write_file` and `edit_file` refuse paths outside it at once, so the model can correct
    /// itself; the audit still checks every change (the shell can write anywhere).
    pub(crate) write_scope: Vec<String>,
    /// The task's protected paths (exact files or `dir/` prefixes): `write_file` and
    /// `edit_file` refuse them at once, so a model that sets out to rewrite a test learns it
    /// before the audit fails it (the audit still checks them: the shell can write anywhere).
    pub(crate) protected: Vec<String>,
    /// Where `shell` commands run: the worker's agent sandbox.
    pub(crate) isolation: AgentIsolationEnv,
    /// The browser tools (gui episodes only).
    pub(crate) gui: Option<Arc<GuiTools>>,
    /// The desktop tools (desktop gui episodes only).
    pub(crate) desktop: Option<Arc<DesktopTools>>,
}

impl ToolContext {
    /// `Err` when `path` is protected by the task or outside the step's write scope.
    pub(crate) fn check_scope(&self, path: &str) -> Result<(), ToolError> {
        let clean = path.trim().trim_start_matches("./");
        if !self.protected.is_empty() && path_in_scope(clean, &self.protected) {
            return Err(ToolError::Protected {
                path: path.to_string(),
            });
        }
        if self.write_scope.is_empty() || path_in_scope(clean, &self.write_scope) {
            return Ok(());
        }
        Err(ToolError::OutsideWriteScope {
            path: path.to_string(),
            scope: self.write_scope.join(", "),
        })
    }

    /// Runs a file operation on the workspace off the async threads.
    pub(crate) async fn blocking<F>(&self, op: F) -> Result<String, ToolError>
    where
        F: FnOnce(&Workspace) -> Result<String, ToolError> + Send + 'static,
    {
        let workspace = self.workspace.clone();
        tokio::task::spawn_blocking(move || op(&workspace))
            .await
            .map_err(|err| ToolError::Internal(err.to_string()))?
    }
}
