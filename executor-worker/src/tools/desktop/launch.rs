//! `desktop_launch`: start a program on the desktop and wait for its window.

use loopgate_desktop::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_launch",
    description: "Start a program on the desktop (a shell command run in the workspace, e.g. ./app.py) and wait until it shows a window.",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"command": string_param("The command, e.g. ./app.py or python3 app.py")}),
        &["command"],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(alias = "cmd", alias = "program")]
    command: String,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    Ok(session.launch(&args.command).await?)
}
