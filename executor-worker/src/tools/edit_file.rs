//! `edit_file`: replace the one occurrence of a text in a file.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::context::ToolContext;
use crate::tools::edit_match::{replace_once, MatchKind, NoUniqueMatch};
use crate::tools::mended_python::{mend_python, mended_note};
use crate::tools::python_missing_import::{add_missing_imports, added_imports_note};
use crate::tools::python_redefined::refuse_a_second_definition;
use crate::tools::python_self_import::{drop_self_imports, self_import_note};
use crate::tools::python_syntax::check_python_write;
use crate::tools::tool_def::{
    object_schema, parse_args, path_param, string_param, ToolDef, ToolEffect,
};
use crate::tools::workspace::{beneath_err, TextFile, ToolError, Workspace};

pub(crate) const DEF: ToolDef = ToolDef {
    name: "edit_file",
    description: "Replace the single exact occurrence of `old` with `new` in a file. Fails if \
                  `old` is missing or appears more than once. An empty `old` appends `new` at \
                  the end of the file (creating it if missing).",
    parameters,
    effect: ToolEffect::EditsFile { text: "new" },
};

fn parameters() -> Value {
    object_schema(
        json!({
            "path": path_param(),
            "old": string_param("Exact text to replace, unique in the file"),
            "new": string_param("Replacement text"),
        }),
        &["path", "old", "new"],
    )
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct Args {
    #[serde(alias = "file_path", alias = "filename", alias = "file")]
    path: String,
    #[serde(
        alias = "old_str",
        alias = "old_string",
        alias = "old_text",
        alias = "search"
    )]
    old: String,
    #[serde(
        alias = "new_str",
        alias = "new_string",
        alias = "new_text",
        alias = "replace"
    )]
    new: String,
}

pub(crate) async fn run(ctx: &ToolContext, arguments: &Value) -> Result<String, ToolError> {
    let args: Args = parse_args(DEF.name, arguments)?;
    ctx.check_scope(&args.path)?;
    ctx.blocking(move |ws| ws.edit_file(&args.path, &args.old, &args.new))
        .await
}

impl Workspace {
    /// Replace the single occurrence of `old` with `new`: the exact text, else the one region
    /// that equals it ignoring whitespace (see `edit_match`; the result says so). When `old`
    /// is not there, the error shows the file's current text (a small file) to copy from.
    pub fn edit_file(&self, rel: &str, old: &str, new: &str) -> Result<String, ToolError> {
        if old.trim().is_empty() {
            return self.append_to_file(rel, new);
        }
        let TextFile { rel, real, text } = self.read_text(rel)?;
        let rel = rel.as_str();
        let (edited, kind) =
            replace_once(&text, old, new).map_err(|NoUniqueMatch(count)| match count {
                0 => ToolError::OldNotFound {
                    path: rel.to_string(),
                    current: current_text_hint(&text),
                },
                count => ToolError::OldAmbiguous {
                    path: rel.to_string(),
                    count,
                },
            })?;
        self.write_edit(rel, &real, &text, edited, kind)
    }

    /// An `edit_file` whose `old` is empty: `new` goes at the end of the file (on a line of its
    /// own), or becomes the file when there is none. Small models send an empty `old` to mean
    /// "add this"; refusing it, the 1.5B model sent the same call until the episode ended.
    fn append_to_file(&self, rel: &str, new: &str) -> Result<String, ToolError> {
        let TextFile { rel, real, text } = match self.read_text(rel) {
            Err(ToolError::NotFound(_)) => {
                let written = self.write_file(rel, new)?;
                return Ok(format!(
                    "{written} (`old` was empty and the file did not exist: it holds `new` now)"
                ));
            }
            other => other?,
        };
        let rel = rel.as_str();
        let separator = if text.is_empty() || text.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        let edited = format!("{text}{separator}{new}");
        let result = self.write_edit(rel, &real, &text, edited, MatchKind::Exact)?;
        Ok(format!(
            "{result}: `old` was empty, so `new` was appended at the end of the file (to change \
             text already there, give that text exactly as `old`)"
        ))
    }

    /// Write `edited` over `text` (the file at `real`), as `edit_file` does after finding
    /// `old` by `kind`: Python mended and checked, the result saying how `old` matched.
    fn write_edit(
        &self,
        rel: &str,
        real: &std::path::Path,
        text: &str,
        edited: String,
        kind: MatchKind,
    ) -> Result<String, ToolError> {
        let mended = mend_python(rel, &edited);
        let edited = mended.as_ref().map_or(edited.as_str(), |m| m.text.as_str());
        let own = drop_self_imports(rel, edited);
        let edited = own.as_ref().map_or(edited, |s| s.text.as_str());
        let imported = add_missing_imports(rel, edited);
        let edited = imported.as_ref().map_or(edited, |a| a.text.as_str());
        let mut notes = String::new();
        if let Some(own) = &own {
            notes.push_str(&self_import_note(rel, own, edited));
        }
        if let Some(added) = &imported {
            notes.push_str(&added_imports_note(rel, added));
        }
        if edited == text && !notes.is_empty() {
            return Ok(format!("{rel} is unchanged{notes}"));
        }
        if edited == text {
            return Ok(format!(
                "{rel} is unchanged: `new` is the same as `old`. Change something else, or \
                 call finish if the step is done."
            ));
        }
        let unparsed = check_python_write(rel, Some(text.as_bytes()), edited)?;
        refuse_a_second_definition(rel, Some(text.as_bytes()), edited)?;
        self.dir()
            .write(real, edited.as_bytes())
            .map_err(beneath_err("write", rel))?;
        let mut result = match kind {
            MatchKind::Exact => format!("edited {rel}{unparsed}"),
            MatchKind::IgnoringWhitespace => format!(
                "edited {rel}{unparsed} (`old` matched only with its whitespace ignored; read \
                 the file if the indentation matters)"
            ),
            MatchKind::IgnoringQuotes => format!(
                "edited {rel}{unparsed} (`old` matched only with its whitespace ignored and ' \
                 taken for \": the region now holds `new` as you wrote it; read the file if \
                 the quotes matter)"
            ),
        };
        if let Some(m) = &mended {
            result.push_str(&mended_note(m));
        }
        result.push_str(&notes);
        Ok(result)
    }
}

/// Most bytes of a file's text an `edit_file` miss shows.
const CURRENT_TEXT_SHOWN: usize = 1500;

/// What an `edit_file` miss adds to its error: the file's current text when it is small (the
/// model copies `old` from it on its next turn), else where to read it.
fn current_text_hint(text: &str) -> String {
    if text.len() > CURRENT_TEXT_SHOWN {
        return "; read_file shows its current text, copy `old` from it exactly".to_string();
    }
    let fence = if text.ends_with('\n') { "" } else { "\n" };
    format!(
        "; its current text is:\n```\n{text}{fence}```\nCopy `old` from it exactly, or write \
         the whole file with write_file"
    )
}
