//! `read_file`: a text file's whole content, capped.

use loopgate_common::output_cap::cap_text;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::context::ToolContext;
use crate::tools::tool_def::{object_schema, parse_args, path_param, ToolDef, ToolEffect};
use crate::tools::workspace::{ToolError, Workspace};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "read_file",
    description: "Read a text file.",
    parameters,
    effect: ToolEffect::ReadOnly,
};

fn parameters() -> Value {
    object_schema(json!({"path": path_param()}), &["path"])
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct Args {
    #[serde(alias = "file_path", alias = "filename", alias = "file", alias = "dir")]
    path: String,
}

pub(crate) async fn run(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    let args: Args = parse_args(DEF.name, arguments)?;
    let cap = ctx.limits.output_cap_bytes;
    ctx.blocking(move |ws| ws.read_file(&args.path, cap)).await
}

impl Workspace {
    /// Whole file as text, capped at `cap` bytes (head + tail).
    pub fn read_file(&self, rel: &str, cap: usize) -> Result<String, ToolError> {
        let file = self.read_text(rel)?;
        Ok(cap_text(&file.text, cap))
    }
}
