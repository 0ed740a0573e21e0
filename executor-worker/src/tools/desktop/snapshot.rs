//! `desktop_snapshot`: the desktop's accessibility tree with element refs.

use loopgate_desktop::Session;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{object_schema, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_snapshot",
    description: "The desktop's windows and their accessibility tree, one element a line (- push button \"Save\" [ref=e7]), with the focused element.",
    parameters,
    effect: ToolEffect::ReadOnly,
};

fn parameters() -> Value {
    object_schema(json!({}), &[])
}

/// Takes no arguments.
pub(crate) async fn run(session: &mut Session) -> Result<String, GuiToolError> {
    Ok(session.snapshot().await?)
}
