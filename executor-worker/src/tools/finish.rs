//! `finish`: the agent says the step is done, with a one-line summary. The loop runs the
//! step's self-check before it ends the episode.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::tool_def::{object_schema, parse_args, string_param, ToolDef, ToolEffect};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "finish",
    description: "Call when the step is done, with a one-line summary of what you did.",
    parameters,
    effect: ToolEffect::Ends,
};

fn parameters() -> Value {
    object_schema(
        json!({"summary": string_param("One-line summary")}),
        &["summary"],
    )
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct Args {
    #[serde(default, alias = "message", alias = "result")]
    summary: Option<String>,
}

/// The call's summary; empty when its arguments cannot be read (`finish` never fails).
pub(crate) fn summary(arguments: &Value) -> String {
    parse_args::<Args>(DEF.name, arguments)
        .ok()
        .and_then(|args| args.summary)
        .unwrap_or_default()
}
