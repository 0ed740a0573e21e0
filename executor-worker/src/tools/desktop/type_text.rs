//! `desktop_type`: replace the text of a field of the latest snapshot (or type into what has
//! the focus).

use loopgate_desktop::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_type",
    description: "Replace the text of the field with this ref (without ref: type into the focused element); submit=true presses Enter after.",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"ref": string_param("Exact ref from the latest desktop_snapshot, e.g. e3"), "text": string_param("The text"), "submit": {"type": "boolean", "description": "Press Enter after typing"}}),
        &["text"],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(
        rename = "ref",
        alias = "element",
        alias = "target",
        alias = "id",
        default
    )]
    reference: Option<String>,
    #[serde(alias = "value", alias = "content")]
    text: String,
    #[serde(default)]
    submit: Option<bool>,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    let submit = args.submit.unwrap_or(false);
    let reference = args.reference.filter(|r| !r.trim().is_empty());
    session
        .type_text(reference.as_deref(), &args.text, submit)
        .await?;
    Ok(format!(
        "typed {} characters into {}{}",
        args.text.chars().count(),
        reference.as_deref().unwrap_or("the focused element"),
        if submit { " and pressed Enter" } else { "" }
    ))
}
