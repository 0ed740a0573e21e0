//! `desktop_press_key`: press a key or chord on the focused element.

use loopgate_desktop::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_press_key",
    description: "Press a key or chord on the focused element: Enter, Tab, Escape, Backspace, ArrowDown, Control+s, a, ...",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(json!({"key": string_param("Key name")}), &["key"])
}

#[derive(Deserialize)]
struct Args {
    #[serde(alias = "name")]
    key: String,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    session.press_key(&args.key).await?;
    Ok(format!("pressed {}", args.key.trim()))
}
