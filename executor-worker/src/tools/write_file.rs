//! `write_file`: create or overwrite a file with its complete content.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::context::ToolContext;
use crate::tools::fenced_content::{unfenced, UNFENCED_NOTE};
use crate::tools::html_fragment::refuse_replacing_a_page;
use crate::tools::kept_definitions::{definition_names, keep_dropped_definitions};
use crate::tools::mended_python::{mend_python, mended_note};
use crate::tools::python_missing_import::{add_missing_imports, added_imports_note};
use crate::tools::python_redefined::refuse_a_second_definition;
use crate::tools::python_self_import::{drop_self_imports, self_import_note};
use crate::tools::python_syntax::check_python_write;
use crate::tools::same_name::{files_named_like, listed};
use crate::tools::tool_def::{
    object_schema, parse_args, path_param, string_param, ToolDef, ToolEffect,
};
use crate::tools::workspace::{non_empty, ToolError, Workspace};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "write_file",
    description: "Create or overwrite a file with the complete content. Parent directories are \
                  created. Over an existing Python file, the top-level functions, classes, \
                  imports and assignments the content leaves out are kept (remove one with \
                  edit_file).",
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
        let target = self.resolve_target(non_empty(rel)?)?;
        if self.is_dir(&target) {
            return Err(ToolError::IsDirectory(rel.to_string()));
        }
        let written = self.shown(&target.path);
        let unfenced = unfenced(rel, content);
        let content = unfenced.as_deref().unwrap_or(content);
        let mended = mend_python(rel, content);
        let content = mended.as_ref().map_or(content, |m| m.text.as_str());
        // Left out before the merge: a self-import binds the names it imports, so the merge
        // would take the file's own definitions of them for replaced and drop them.
        let own_sent = drop_self_imports(rel, content);
        let content = own_sent.as_ref().map_or(content, |s| s.text.as_str());
        let before = self.dir().read(&target.real).ok();
        let kept = before
            .as_deref()
            .filter(|_| rel.ends_with(".py"))
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|old| keep_dropped_definitions(old, content));
        let content = kept.as_ref().map_or(content, |k| k.text.as_str());
        // And after it, for one the earlier version held and the merge kept.
        let own_kept = kept.as_ref().and_then(|k| drop_self_imports(rel, &k.text));
        let content = own_kept.as_ref().map_or(content, |s| s.text.as_str());
        let imported = add_missing_imports(rel, content);
        let content = imported.as_ref().map_or(content, |a| a.text.as_str());
        if before.as_deref() == Some(content.as_bytes()) {
            // Small models repeat the same write for every step they have left; say plainly
            // that it changed nothing, so the next move is `finish` or a different change.
            return Ok(format!(
                "{written} already holds exactly this content ({} bytes): nothing changed. If \
                 the step is done, call finish; otherwise change something else.",
                content.len()
            ));
        }
        refuse_dropping_every_definition(rel, before.as_deref(), content)?;
        refuse_replacing_a_page(rel, before.as_deref(), content)?;
        let unparsed = check_python_write(rel, before.as_deref(), content)?;
        refuse_a_second_definition(rel, before.as_deref(), content)?;
        let created = self.dir().symlink_metadata(&target.real).is_err();
        self.write_target(&target, rel, content.as_bytes())?;
        let mut result = format!("wrote {} bytes to {written}{unparsed}", content.len());
        if created {
            let elsewhere = files_named_like(self.dir(), &written);
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
        if let Some(k) = &kept {
            result.push_str(&format!(
                " (kept from the file's earlier version, which this content left out: {}; \
                 write_file replaces the definitions it is given and keeps the others: to \
                 remove one, edit_file it away)",
                k.kept.join(", ")
            ));
        }
        if unfenced.is_some() {
            result.push_str(UNFENCED_NOTE);
        }
        if let Some(m) = &mended {
            result.push_str(&mended_note(m));
        }
        for own in [&own_sent, &own_kept].into_iter().flatten() {
            result.push_str(&self_import_note(&written, own, content));
        }
        if let Some(added) = &imported {
            result.push_str(&added_imports_note(&written, added));
        }
        Ok(result)
    }
}

/// Definitions a Python file must hold before a whole-file write that keeps none of them is
/// refused.
const DEFINITIONS_GUARDED: usize = 2;

/// A whole-file write over a Python module that defines functions or classes, with content that
/// defines none (a usage example, a test snippet, a stray script), would lose them all: the
/// kept-definitions rule only applies to content that is itself code. Small models do this to
/// a package's modules (a 1.5B run replaced a 1,000-line `recipes.py` with four lines of
/// example usage). Refused, with the way to do it on purpose.
fn refuse_dropping_every_definition(
    rel: &str,
    before: Option<&[u8]>,
    content: &str,
) -> Result<(), ToolError> {
    if !rel.ends_with(".py") {
        return Ok(());
    }
    let Some(old) = before.and_then(|b| std::str::from_utf8(b).ok()) else {
        return Ok(());
    };
    let Some(old_names) = definition_names(old) else {
        return Ok(());
    };
    if old_names.len() < DEFINITIONS_GUARDED
        || definition_names(content).is_none_or(|names| !names.is_empty())
    {
        return Ok(());
    }
    const SHOWN: usize = 5;
    let mut names = old_names
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if old_names.len() > SHOWN {
        names.push_str(", ...");
    }
    Err(ToolError::WouldDropEveryDefinition {
        path: rel.to_string(),
        count: old_names.len(),
        names,
    })
}
