//! `write_file`: create or overwrite a file with its complete content.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::context::ToolContext;
use crate::tools::mended_python::{mend_python, mended_note};
use crate::tools::same_name::{files_named_like, listed};
use crate::tools::tool_def::{
    object_schema, parse_args, path_param, string_param, ToolDef, ToolEffect,
};
use crate::tools::workspace::{io_err, non_empty, ToolError, Workspace};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "write_file",
    description:
        "Create or overwrite a file with the complete content. Parent directories are created.",
    parameters,
    effect: ToolEffect::WritesFile { text: "content" },
};

fn parameters() -> Value {
    object_schema(
        json!({"path": path_param(), "content": string_param("The complete file content")}),
        &["path", "content"],
    )
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct Args {
    #[serde(alias = "file_path", alias = "filename", alias = "file")]
    path: String,
    #[serde(alias = "contents", alias = "text", alias = "data")]
    content: String,
}

pub(crate) async fn run(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    let args: Args = parse_args(DEF.name, arguments)?;
    ctx.check_scope(&args.path)?;
    ctx.blocking(move |ws| ws.write_file(&args.path, &args.content))
        .await
}

impl Workspace {
    /// Create or replace a file, creating parent directories.
    pub fn write_file(&self, rel: &str, content: &str) -> Result<String, ToolError> {
        let (rel, dropped_prefix) = self.without_root_prefix(rel)?;
        let rel = rel.as_str();
        let path = self.resolve(non_empty(rel)?)?;
        if path.is_dir() {
            return Err(ToolError::IsDirectory(rel.to_string()));
        }
        let written = self.shown(&path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|source| match source.kind() {
                ErrorKind::AlreadyExists | ErrorKind::NotADirectory => {
                    ToolError::NotDirectory(parent_rel(rel))
                }
                _ => io_err("create directories for", rel)(source),
            })?;
        }
        let mended = mend_python(rel, content);
        let content = mended.as_ref().map_or(content, |m| m.text.as_str());
        if fs::read(&path).is_ok_and(|before| before == content.as_bytes()) {
            // Small models repeat the same write for every step they have left; say plainly
            // that it changed nothing, so the next move is `finish` or a different change.
            return Ok(format!(
                "{written} already holds exactly this content ({} bytes): nothing changed. If \
                 the step is done, call finish; otherwise change something else.",
                content.len()
            ));
        }
        let created = !path.exists();
        fs::write(&path, content).map_err(io_err("write", rel))?;
        let mut result = format!("wrote {} bytes to {written}", content.len());
        if created {
            let elsewhere = files_named_like(self.root(), &written);
            if !elsewhere.is_empty() {
                result.push_str(&format!(
                    " (a new file: the workspace also has {}; if you meant to change that \
                     file, write to its path)",
                    listed(&elsewhere)
                ));
            }
        }
        if dropped_prefix {
            result.push_str(
                " (paths are relative to the workspace root, so the `workspace/` prefix was \
                 dropped)",
            );
        }
        if let Some(m) = &mended {
            result.push_str(&mended_note(m));
        }
        Ok(result)
    }
}

fn parent_rel(rel: &str) -> String {
    Path::new(rel)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}
