//! `browser_click`: click an element of the latest snapshot.

use loopgate_browser::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::{ref_param, GuiToolError};
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "browser_click",
    description: "Click the element with this ref.",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"ref": ref_param(), "element": string_param("Optional: what the element is, for the log")}),
        &["ref"],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(rename = "ref", alias = "element", alias = "target", alias = "id")]
    reference: String,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    session.click(&args.reference).await?;
    Ok(format!(
        "clicked {}; call browser_snapshot to see the result",
        args.reference
    ))
}
