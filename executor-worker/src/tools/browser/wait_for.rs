//! `browser_wait_for`: wait until a text is on the page.

use std::time::Duration;

use loopgate_browser::Session;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::browser::page_tool::GuiToolError;
use crate::tools::tool_def::{from_value, object_schema, string_param, ToolDef, ToolEffect};

/// How long `browser_wait_for` waits by default, and at most.
const DEFAULT_WAIT_SECS: u64 = 5;
const MAX_WAIT_SECS: u64 = 60;

pub(crate) const DEF: ToolDef = ToolDef {
    name: "browser_wait_for",
    description: "Wait until the text appears on the page.",
    parameters,
    effect: ToolEffect::ReadOnly,
};

fn parameters() -> Value {
    object_schema(
        json!({"text": string_param("Text to wait for"), "timeout_secs": {"type": "number", "description": "At most this long (default 5, max 60)"}}),
        &["text"],
    )
}

#[derive(Deserialize)]
struct Args {
    text: String,
    #[serde(default, alias = "timeout", alias = "time")]
    timeout_secs: Option<f64>,
}

pub(crate) async fn run(session: &mut Session, args: Value) -> Result<String, GuiToolError> {
    let args: Args = from_value(DEF.name, args)?;
    let secs = args
        .timeout_secs
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_WAIT_SECS as f64, |s| s.min(MAX_WAIT_SECS as f64));
    session
        .wait_for_text(&args.text, Duration::from_secs_f64(secs))
        .await?;
    Ok(format!("{:?} is on the page", args.text))
}
