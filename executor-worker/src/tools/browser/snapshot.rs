//! `browser_snapshot`: the page's accessibility tree with element refs.

use loopgate_browser::Session;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{object_schema, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "browser_snapshot",
    description: "The page's accessibility tree, one element a line (- button \"Greet\" [ref=e3]). After the first snapshot of a page, only what changed is shown when that is shorter.",
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
