//! `browser_type`: replace the text of a field of the latest snapshot.

use loopgate_browser::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::{ref_param, GuiToolError};
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "browser_type",
    description: "Replace the text of the field with this ref; submit=true presses Enter after.",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"ref": ref_param(), "text": string_param("The text"), "submit": {"type": "boolean", "description": "Press Enter after typing"}}),
        &["ref", "text"],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(rename = "ref", alias = "element", alias = "target", alias = "id")]
    reference: String,
    #[serde(alias = "value", alias = "content")]
    text: String,
    #[serde(default)]
    submit: Option<bool>,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    let submit = args.submit.unwrap_or(false);
    session
        .type_text(&args.reference, &args.text, submit)
        .await?;
    Ok(format!(
        "typed {} characters into {}{}",
        args.text.chars().count(),
        args.reference,
        if submit { " and pressed Enter" } else { "" }
    ))
}
