//! The file tools (`read_file`, `write_file`, `edit_file`, `list_dir`) and the path confinement
//! they all go through: every path is relative to the workspace root and must stay under it,
//! through `..` and through symlinks. Errors are returned to the model as tool results.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use loopgate_common::output_cap::cap_text;

use crate::tools::edit_match::{replace_once, MatchKind, NoUniqueMatch};
use crate::tools::python_literals::{mend_python_source, Mended};
use crate::tools::same_name::{files_named_like, listed};

/// Most directory entries `list_dir` shows.
pub(crate) const LIST_DIR_LIMIT: usize = 500;

/// Why a tool call could not be carried out. The model reads the message and may try again.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("path is empty")]
    EmptyPath,
    #[error("path '{0}' is absolute; use a path relative to the workspace")]
    AbsolutePath(String),
    #[error("path '{0}' contains '..'; stay inside the workspace")]
    ParentComponent(String),
    #[error("path '{0}' leads outside the workspace through a symlink")]
    EscapesWorkspace(String),
    #[error("path '{0}' goes through a dangling symlink")]
    DanglingSymlink(String),
    #[error("'{0}' does not exist")]
    NotFound(String),
    #[error("'{path}' does not exist; the workspace has {elsewhere}")]
    NotFoundButNamedElsewhere { path: String, elsewhere: String },
    #[error("'{0}' is a directory")]
    IsDirectory(String),
    #[error("'{0}' is not a directory")]
    NotDirectory(String),
    #[error("'{0}' names the workspace root itself, not a file: give the file's path relative to the root, e.g. `main.py` or `src/main.py`")]
    WorkspaceRoot(String),
    #[error("edit_file: `old` must not be empty")]
    EmptyOld,
    #[error("edit_file: `old` text was not found in '{path}'{current}")]
    OldNotFound {
        path: String,
        /// The file's current text as the model should copy it (empty for a big file).
        current: String,
    },
    #[error("edit_file: `old` text appears {count} times in '{path}'; include more context so it is unique")]
    OldAmbiguous { path: String, count: usize },
    #[error("'{0}' is not UTF-8 text")]
    NotText(String),
    #[error("bad arguments for {tool}: {reason}")]
    BadArguments { tool: String, reason: String },
    #[error("unknown tool '{name}'; available: {available}")]
    UnknownTool { name: String, available: String },
    #[error("{op} '{path}': {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("this step may only change {scope}; '{path}' is outside it")]
    OutsideWriteScope { path: String, scope: String },
    #[error("shell: {0}")]
    Shell(String),
    #[error("internal error running the tool: {0}")]
    Internal(String),
}

fn io_err<'a>(op: &'static str, path: &'a str) -> impl FnOnce(std::io::Error) -> ToolError + 'a {
    move |source| match source.kind() {
        ErrorKind::NotFound => ToolError::NotFound(path.to_string()),
        _ => ToolError::Io {
            op,
            path: path.to_string(),
            source,
        },
    }
}

/// A workspace directory; all tool paths resolve under its canonical root.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// `root` must exist; it is canonicalized once so symlinks above it (e.g. `/tmp`) are fine.
    pub fn new(root: &Path) -> Result<Workspace, ToolError> {
        let shown = root.display().to_string();
        let root = fs::canonicalize(root).map_err(io_err("open workspace", &shown))?;
        Ok(Workspace { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Map a model-supplied relative path to a path under the root. `""` and `"."` are the root.
    /// Refuses absolute paths, `..`, and any existing component that is a symlink resolving
    /// outside the root (or nowhere). Components that don't exist yet are fine: the tools create
    /// them as plain directories.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        if rel.contains('\0') {
            return Err(ToolError::BadArguments {
                tool: "path".into(),
                reason: "contains a NUL byte".into(),
            });
        }
        let mut clean = PathBuf::new();
        for component in Path::new(rel).components() {
            match component {
                Component::Normal(part) => clean.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(ToolError::ParentComponent(rel.to_string())),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(ToolError::AbsolutePath(rel.to_string()))
                }
            }
        }
        let mut current = self.root.clone();
        let parts: Vec<Component> = clean.components().collect();
        for (i, part) in parts.iter().enumerate() {
            current.push(part);
            let is_last = i + 1 == parts.len();
            let not_a_dir = || {
                let shown: PathBuf = parts[..=i].iter().collect();
                ToolError::NotDirectory(shown.display().to_string())
            };
            match fs::symlink_metadata(&current) {
                Ok(meta) if meta.file_type().is_symlink() => match fs::canonicalize(&current) {
                    Ok(target) if !target.starts_with(&self.root) => {
                        return Err(ToolError::EscapesWorkspace(rel.to_string()))
                    }
                    Ok(target) if !is_last && !target.is_dir() => return Err(not_a_dir()),
                    Ok(_) => {}
                    Err(err) if err.kind() == ErrorKind::NotFound => {
                        return Err(ToolError::DanglingSymlink(rel.to_string()))
                    }
                    Err(err) => return Err(io_err("resolve", rel)(err)),
                },
                Ok(meta) if !is_last && !meta.is_dir() => return Err(not_a_dir()),
                Ok(_) => {}
                // Nothing further down exists; what is created there is created by us.
                Err(err) if err.kind() == ErrorKind::NotFound => break,
                Err(err) => return Err(io_err("resolve", rel)(err)),
            }
        }
        Ok(self.root.join(clean))
    }

    /// Whole file as text, capped at `cap` bytes (head + tail).
    pub fn read_file(&self, rel: &str, cap: usize) -> Result<String, ToolError> {
        let (rel, _) = self.without_root_prefix(rel)?;
        let rel = rel.as_str();
        let path = self.resolve(non_empty(rel)?)?;
        if path.is_dir() {
            return Err(ToolError::IsDirectory(rel.to_string()));
        }
        let bytes = fs::read(&path).map_err(|err| self.read_error(rel, err))?;
        let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText(rel.to_string()))?;
        Ok(cap_text(&text, cap))
    }

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
            let elsewhere = files_named_like(&self.root, &written);
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

    /// `path` relative to the root, as the file tools and the snapshot name it.
    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// Replace the single occurrence of `old` with `new`: the exact text, else the one region
    /// that equals it ignoring whitespace (see `edit_match`; the result says so). When `old`
    /// is not there, the error shows the file's current text (a small file) to copy from.
    pub fn edit_file(&self, rel: &str, old: &str, new: &str) -> Result<String, ToolError> {
        if old.is_empty() {
            return Err(ToolError::EmptyOld);
        }
        let (rel, _) = self.without_root_prefix(rel)?;
        let rel = rel.as_str();
        let path = self.resolve(non_empty(rel)?)?;
        if path.is_dir() {
            return Err(ToolError::IsDirectory(rel.to_string()));
        }
        let bytes = fs::read(&path).map_err(|err| self.read_error(rel, err))?;
        let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText(rel.to_string()))?;
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
        let mended = mend_python(rel, &edited);
        let edited = mended.as_ref().map_or(edited.as_str(), |m| m.text.as_str());
        if edited == text {
            return Ok(format!(
                "{rel} is unchanged: `new` is the same as `old`. Change something else, or \
                 call finish if the step is done."
            ));
        }
        fs::write(&path, edited).map_err(io_err("write", rel))?;
        let mut result = match kind {
            MatchKind::Exact => format!("edited {rel}"),
            MatchKind::IgnoringWhitespace => format!(
                "edited {rel} (`old` matched only with its whitespace ignored; read the file \
                 if the indentation matters)"
            ),
        };
        if let Some(m) = &mended {
            result.push_str(&mended_note(m));
        }
        Ok(result)
    }

    /// Sorted entries, directories with a trailing `/`, symlinks with a trailing `@`.
    pub fn list_dir(&self, rel: &str) -> Result<String, ToolError> {
        let path = self.resolve(rel)?;
        let shown = if rel.is_empty() { "." } else { rel };
        let meta = fs::metadata(&path).map_err(io_err("list", shown))?;
        if !meta.is_dir() {
            return Err(ToolError::NotDirectory(shown.to_string()));
        }
        let mut names = Vec::new();
        for entry in fs::read_dir(&path).map_err(io_err("list", shown))? {
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

/// Most bytes of a file's text an `edit_file` miss shows.
const CURRENT_TEXT_SHOWN: usize = 1500;

/// A Python file's text with what Python rejects outright mended (line breaks inside one-line
/// literals, `\n` escaped twice outside them, NUL characters inside them, a compound statement
/// after `;` or `:`: see `python_literals`); None for other files, or when there is nothing.
fn mend_python(rel: &str, text: &str) -> Option<Mended> {
    rel.ends_with(".py")
        .then(|| mend_python_source(text))
        .flatten()
}

fn mended_note(m: &Mended) -> String {
    let listed = |lines: &[usize]| {
        lines
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut notes = Vec::new();
    if !m.lines.is_empty() {
        notes.push(format!(
            "line {}: a line break inside a one-line string literal, which Python rejects, was \
             written as the escape \\n; in a JSON argument, write \\\\n for a backslash-n in the code",
            listed(&m.lines)
        ));
    }
    if !m.escaped_breaks.is_empty() {
        notes.push(format!(
            "line {} as sent: the two characters \\n stood outside any string literal, where \
             Python allows no backslash, and were written as line breaks; in a JSON argument, a \
             line break is \\n, not \\\\n",
            listed(&m.escaped_breaks)
        ));
    }
    if !m.nul_chars.is_empty() {
        notes.push(format!(
            "line {} as sent: a NUL character inside a string literal, which Python \
             rejects, was written as the escape \\x00",
            listed(&m.nul_chars)
        ));
    }
    if !m.compound_lines.is_empty() {
        notes.push(format!(
            "line {} as sent: a `with`, `for`, `if`, `while`, `def`, `class` or `try` after `;` \
             or after another statement's `:` on the same line, which Python rejects, was put \
             on a line of its own",
            listed(&m.compound_lines)
        ));
    }
    format!(" ({})", notes.join("; "))
}

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

fn non_empty(rel: &str) -> Result<&str, ToolError> {
    if rel.trim().is_empty() {
        Err(ToolError::EmptyPath)
    } else {
        Ok(rel)
    }
}

fn parent_rel(rel: &str) -> String {
    Path::new(rel)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// A path that starts with a `workspace/` directory the workspace does not have yet: small
/// models prefix paths with the workspace's name. Returns the path without the prefix.
impl Workspace {
    /// A failed read of `rel`: when it does not exist but a file of its name does elsewhere
    /// in the workspace, the error names that file.
    fn read_error(&self, rel: &str, err: std::io::Error) -> ToolError {
        match io_err("read", rel)(err) {
            ToolError::NotFound(path) => {
                let elsewhere = files_named_like(&self.root, &path);
                if elsewhere.is_empty() {
                    ToolError::NotFound(path)
                } else {
                    ToolError::NotFoundButNamedElsewhere {
                        path,
                        elsewhere: listed(&elsewhere),
                    }
                }
            }
            other => other,
        }
    }

    /// Models often name the root itself (`workspace/hello.py`, or a file called `workspace`).
    /// While the workspace has no `workspace` entry of its own, a leading `workspace/` is the
    /// root (true: it was dropped), and `workspace` alone is refused as a file path.
    fn without_root_prefix(&self, rel: &str) -> Result<(String, bool), ToolError> {
        let trimmed = rel.trim();
        let clean = trimmed.trim_start_matches("./");
        if self.root.join("workspace").symlink_metadata().is_ok() {
            return Ok((trimmed.to_string(), false));
        }
        if clean.trim_end_matches('/') == "workspace" {
            return Err(ToolError::WorkspaceRoot(rel.to_string()));
        }
        match clean.strip_prefix("workspace/") {
            Some(rest) if !rest.trim_start_matches('/').is_empty() => {
                Ok((rest.trim_start_matches('/').to_string(), true))
            }
            _ => Ok((trimmed.to_string(), false)),
        }
    }
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
