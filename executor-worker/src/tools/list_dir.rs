//! `list_dir`: a directory's entries.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::context::ToolContext;
use crate::tools::tool_def::{object_schema, parse_args, string_param, ToolDef, ToolEffect};
use crate::tools::workspace::{beneath_err, io_err, ToolError, Workspace};

/// Most directory entries `list_dir` shows.
pub(crate) const LIST_DIR_LIMIT: usize = 500;

pub(crate) const DEF: ToolDef = ToolDef {
    name: "list_dir",
    description: "List a directory (directories end with /).",
    parameters,
    effect: ToolEffect::ReadOnly,
};

fn parameters() -> Value {
    object_schema(
        json!({"path": string_param("Directory relative to the workspace root; default '.'")}),
        &[],
    )
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct Args {
    #[serde(default, alias = "dir", alias = "directory")]
    path: Option<String>,
}

pub(crate) async fn run(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    let args: Args = parse_args(DEF.name, arguments)?;
    let path = args.path.unwrap_or_default();
    ctx.blocking(move |ws| ws.list_dir(&path)).await
}

impl Workspace {
    /// Sorted entries, directories with a trailing `/`, symlinks with a trailing `@`.
    pub fn list_dir(&self, rel: &str) -> Result<String, ToolError> {
        let target = self.resolve_target(rel)?;
        let shown = if rel.is_empty() { "." } else { rel };
        let meta = self
            .dir()
            .symlink_metadata(&target.real)
            .map_err(beneath_err("list", shown))?;
        if !meta.is_dir() {
            return Err(ToolError::NotDirectory(shown.to_string()));
        }
        let mut names = Vec::new();
        let entries = self
            .dir()
            .read_dir(&target.real)
            .map_err(beneath_err("list", shown))?;
        for entry in entries {
            let entry = entry.map_err(io_err("list", shown))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let suffix = match entry.file_type() {
                Ok(t) if t.is_symlink() => "@",
                Ok(t) if t.is_dir() => "/",
                _ => "",
            };
            names.push(format!("{name}{suffix}"));
        }
        names.sort();
        if names.is_empty() {
            return Ok(format!("{shown} is empty"));
        }
        let total = names.len();
        names.truncate(LIST_DIR_LIMIT);
        let mut out = names.join("\n");
        if total > LIST_DIR_LIMIT {
            out.push_str(&format!("\n... and {} more", total - LIST_DIR_LIMIT));
        }
        Ok(out)
    }
}
