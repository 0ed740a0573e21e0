//! `desktop_screenshot`: save a PNG of the screen into the workspace (within the step's write
//! scope); vision models also get the image.

use loopgate_desktop::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::{BrowserOutput, GuiToolError};
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};
use crate::tools::workspace::{ToolError, Workspace};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_screenshot",
    description: "Save a PNG of the screen into the workspace (it is frozen with the snapshot).",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"path": string_param("Workspace-relative path ending in .png, e.g. shots/app.png")}),
        &["path"],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(alias = "filename", alias = "file")]
    path: String,
}

/// `check_write` applies the step's write scope to the path.
pub(crate) async fn run(
    session: &mut Session,
    args: Value,
    workspace: &Workspace,
    check_write: impl Fn(&str) -> Result<(), ToolError>,
) -> Result<BrowserOutput, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    check_write(&args.path)?;
    let png = session.screenshot_png().await?;
    workspace.save(args.path.trim(), &png)?;
    let text = format!("saved a {}-byte PNG to {}", png.len(), args.path.trim());
    Ok(BrowserOutput {
        text,
        png: Some(png),
    })
}
