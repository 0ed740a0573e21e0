//! The browser tools: one arm per tool, each defined in a file of its own; their names, specs
//! and dispatch come from here. Adding a browser tool: its file (a `DEF: ToolDef` and a
//! `run`), and here a variant, its place in [`BrowserTool::ALL`] and its arm in `def` and
//! `run`.

use loopgate_browser::Session;
use serde_json::Value;

use crate::tools::browser::page_tool::{BrowserOutput, GuiToolError};
use crate::tools::browser::{
    click, navigate, press_key, screenshot, snapshot, type_text, wait_for,
};
use crate::tools::tool_def::ToolDef;
use crate::tools::workspace::{ToolError, Workspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrowserTool {
    Navigate,
    Snapshot,
    Click,
    Type,
    PressKey,
    WaitFor,
    Screenshot,
}

impl BrowserTool {
    /// Every browser tool, in the order offered.
    pub(crate) const ALL: [BrowserTool; 7] = [
        BrowserTool::Navigate,
        BrowserTool::Snapshot,
        BrowserTool::Click,
        BrowserTool::Type,
        BrowserTool::PressKey,
        BrowserTool::WaitFor,
        BrowserTool::Screenshot,
    ];

    pub(crate) fn def(self) -> &'static ToolDef {
        match self {
            BrowserTool::Navigate => &navigate::DEF,
            BrowserTool::Snapshot => &snapshot::DEF,
            BrowserTool::Click => &click::DEF,
            BrowserTool::Type => &type_text::DEF,
            BrowserTool::PressKey => &press_key::DEF,
            BrowserTool::WaitFor => &wait_for::DEF,
            BrowserTool::Screenshot => &screenshot::DEF,
        }
    }

    /// Runs the tool on the page with `args` (already a JSON value); `check_write` applies the
    /// step's write scope to a path the tool writes.
    pub(crate) async fn run(
        self,
        session: &mut Session,
        args: Value,
        workspace: &Workspace,
        check_write: impl Fn(&str) -> Result<(), ToolError>,
    ) -> Result<BrowserOutput, GuiToolError> {
        let text = match self {
            BrowserTool::Navigate => navigate::run(session, args).await?,
            BrowserTool::Snapshot => snapshot::run(session).await?,
            BrowserTool::Click => click::run(session, args).await?,
            BrowserTool::Type => type_text::run(session, args).await?,
            BrowserTool::PressKey => press_key::run(session, args).await?,
            BrowserTool::WaitFor => wait_for::run(session, args).await?,
            BrowserTool::Screenshot => {
                return screenshot::run(session, args, workspace, check_write).await
            }
        };
        Ok(BrowserOutput::text(text))
    }
}
