//! The desktop tools: one arm per tool, each defined in a file of its own; their names, specs
//! and dispatch come from here.

use loopgate_desktop::Session;
use serde_json::Value;

use crate::tools::browser::page_tool::{BrowserOutput, GuiToolError};
use crate::tools::desktop::{click, launch, press_key, screenshot, snapshot, type_text, wait_for};
use crate::tools::tool_def::ToolDef;
use crate::tools::workspace::{ToolError, Workspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DesktopTool {
    Launch,
    Snapshot,
    Click,
    Type,
    PressKey,
    WaitFor,
    Screenshot,
}

impl DesktopTool {
    /// Every desktop tool, in the order offered.
    pub(crate) const ALL: [DesktopTool; 7] = [
        DesktopTool::Launch,
        DesktopTool::Snapshot,
        DesktopTool::Click,
        DesktopTool::Type,
        DesktopTool::PressKey,
        DesktopTool::WaitFor,
        DesktopTool::Screenshot,
    ];

    pub(crate) fn def(self) -> &'static ToolDef {
        match self {
            DesktopTool::Launch => &launch::DEF,
            DesktopTool::Snapshot => &snapshot::DEF,
            DesktopTool::Click => &click::DEF,
            DesktopTool::Type => &type_text::DEF,
            DesktopTool::PressKey => &press_key::DEF,
            DesktopTool::WaitFor => &wait_for::DEF,
            DesktopTool::Screenshot => &screenshot::DEF,
        }
    }

    /// Runs the tool on the desktop with `args` (already a JSON value); `check_write` applies
    /// the step's write scope to a path the tool writes.
    pub(crate) async fn run(
        self,
        session: &mut Session,
        args: Value,
        workspace: &Workspace,
        check_write: impl Fn(&str) -> Result<(), ToolError>,
    ) -> Result<BrowserOutput, GuiToolError> {
        let text = match self {
            DesktopTool::Launch => launch::run(session, args).await?,
            DesktopTool::Snapshot => snapshot::run(session).await?,
            DesktopTool::Click => click::run(session, args).await?,
            DesktopTool::Type => type_text::run(session, args).await?,
            DesktopTool::PressKey => press_key::run(session, args).await?,
            DesktopTool::WaitFor => wait_for::run(session, args).await?,
            DesktopTool::Screenshot => {
                return screenshot::run(session, args, workspace, check_write).await
            }
        };
        Ok(BrowserOutput::text(text))
    }
}
