//! `browser_navigate`: open a workspace file, a path on the task's served URL, or a loopback
//! URL.

use loopgate_browser::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "browser_navigate",
    description: "Open a page: a workspace-relative file (index.html), a path on the task's served URL (/), or a loopback http URL. Refs from the previous page become invalid.",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({"url": string_param("Workspace path or loopback http URL")}),
        &["url"],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(alias = "path", alias = "href")]
    url: String,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    let url = session.navigate(&args.url).await?;
    let (_, title) = session.location().await?;
    Ok(format!(
        "navigated to {url} (title: {title:?}); call browser_snapshot to see the page"
    ))
}
