//! `desktop_wait_for`: wait until a text, or an element with a name, is on the desktop.

use std::time::Duration;

use loopgate_desktop::{DesktopError, Session};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

/// How long `desktop_wait_for` waits by default, and at most.
const DEFAULT_WAIT_SECS: u64 = 5;
const MAX_WAIT_SECS: u64 = 60;

pub(crate) const DEF: ToolDef = ToolDef {
    name: "desktop_wait_for",
    description: "Wait until the text appears on the desktop, or an element with this name (and role, e.g. push button) is shown.",
    parameters,
    effect: ToolEffect::ReadOnly,
};

fn parameters() -> Value {
    object_schema(
        json!({
            "text": string_param("Text to wait for (in any element's name or contents)"),
            "element": string_param("Or: the name of an element to wait for"),
            "role": string_param("With element: its role, e.g. push button"),
            "timeout_secs": {"type": "number", "description": "At most this long (default 5, max 60)"}
        }),
        &[],
    )
}

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    text: Option<String>,
    #[serde(default, alias = "name")]
    element: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default, alias = "timeout", alias = "time")]
    timeout_secs: Option<f64>,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    let secs = args
        .timeout_secs
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_WAIT_SECS as f64, |s| s.min(MAX_WAIT_SECS as f64));
    let wait = Duration::from_secs_f64(secs);
    let role = args.role.filter(|r| !r.trim().is_empty());
    match (args.text.filter(|t| !t.is_empty()), args.element) {
        (Some(text), _) => {
            session.wait_for_text(&text, wait).await?;
            Ok(format!("{text:?} is on the desktop"))
        }
        (None, Some(name)) if !name.trim().is_empty() => {
            session
                .wait_for_element(role.as_deref(), name.trim(), wait)
                .await?;
            Ok(format!(
                "{} {:?} is shown",
                role.as_deref().unwrap_or("element"),
                name.trim()
            ))
        }
        _ => Err(DesktopError::BadRequest("give text, or element (and role)".into()).into()),
    }
}
