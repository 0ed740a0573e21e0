//! `desktop_click`: click an element of the latest snapshot, or a point on the screen.

use loopgate_desktop::{DesktopError, Session};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_click",
    description: "Click the element with this ref (or, when the tree has nothing to click, the screen at x, y).",
    parameters,
    effect: ToolEffect::Acts,
};

fn parameters() -> Value {
    object_schema(
        json!({
            "ref": string_param("Exact ref from the latest desktop_snapshot, e.g. e3"),
            "x": {"type": "integer", "description": "Screen x in pixels (without ref)"},
            "y": {"type": "integer", "description": "Screen y in pixels (without ref)"}
        }),
        &[],
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
    #[serde(default)]
    x: Option<i64>,
    #[serde(default)]
    y: Option<i64>,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    match (
        args.reference.filter(|r| !r.trim().is_empty()),
        args.x,
        args.y,
    ) {
        (Some(reference), _, _) => {
            let (x, y) = session.click(&reference).await?;
            Ok(format!(
                "clicked {reference} at ({x},{y}); call desktop_snapshot to see the result"
            ))
        }
        (None, Some(x), Some(y)) => {
            session.click_at(x, y).await?;
            Ok(format!(
                "clicked ({x},{y}); call desktop_snapshot to see the result"
            ))
        }
        _ => Err(DesktopError::BadRequest(
            "give ref (from desktop_snapshot), or both x and y".into(),
        )
        .into()),
    }
}
