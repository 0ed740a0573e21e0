//! The workspace the tools work in, the path confinement every file tool goes through (every
//! path is relative to the workspace root and must stay under it, through `..` and through
//! symlinks), and the tools' errors, which the model reads as tool results. The file tools
//! themselves (`Workspace::read_file`, `write_file`, `edit_file`, `list_dir`) are each in the
//! tool's own file.
//!
//! A path is checked first ([`Workspace::resolve_target`]: clear errors for `..`, absolute
//! paths and symlinks leading out or nowhere; symlinks inside the workspace resolved), then
//! used through the workspace's [`RootDir`]: the resolved path is opened beneath the root
//! without following any symlink, so one swapped in between the check and the use (by a
//! process the agent left running, such as a gui episode's `serve`) is refused, never followed.

use std::fs;
use std::io::{ErrorKind, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use loopgate_workspace_walk::{BeneathError, RootDir};

use crate::tools::same_name::{files_named_like, listed};

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
    #[error("path '{0}' is, or goes through, a symlink that was not there when it was checked; refusing to follow it")]
    SymlinkRefused(String),
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
    #[error(
        "'{path}' is protected by the task: the checks run it as given, so a change to it \
         fails the audit; change the code it tests instead"
    )]
    Protected { path: String },
    #[error(
        "'{path}' was not written: the content would not parse as Python, at {problem}\nThe \
         file is as it was; send the whole corrected content (or a corrected edit)"
    )]
    WouldNotParse {
        path: String,
        /// Where it breaks, with the lines around it (`SyntaxProblem::describe`).
        problem: String,
    },
    #[error(
        "'{path}' was not written: it defines {count} functions and classes ({names}) and this \
         content defines none, so every one of them would be lost. To change one function, use \
         edit_file with `old` the lines to replace (such as its `raise NotImplementedError` \
         line) and `new` the lines that replace them; or write the whole file with its \
         definitions"
    )]
    WouldDropEveryDefinition {
        path: String,
        count: usize,
        /// The first few names it defines.
        names: String,
    },
    #[error(
        "'{path}' was not written: the content defines `{name}` twice (lines {first} and \
         {again}), and Python keeps only the later one, so the earlier is never used. Send it \
         with one `{name}`: the one that should run"
    )]
    WouldDefineTwice {
        path: String,
        name: String,
        first: usize,
        again: usize,
    },
    #[error(
        "'{path}' was not written: it is a whole HTML page (it has <html> or <body>) and this \
         content has neither, so the page would become this fragment and lose everything else \
         it holds. To change one part, use edit_file with `old` the exact text to replace and \
         `new` its replacement; or write the whole page"
    )]
    WouldReplacePage { path: String },
    #[error("shell: {0}")]
    Shell(String),
    #[error("internal error running the tool: {0}")]
    Internal(String),
}

pub(crate) fn io_err<'a>(
    op: &'static str,
    path: &'a str,
) -> impl FnOnce(std::io::Error) -> ToolError + 'a {
    move |source| match source.kind() {
        ErrorKind::NotFound => ToolError::NotFound(path.to_string()),
        _ => ToolError::Io {
            op,
            path: path.to_string(),
            source,
        },
    }
}

/// The use of a checked path failed: a symlink refused (a security event: logged and
/// counted) or an i/o error (`op` names the step for the model).
pub(crate) fn beneath_err<'a>(
    op: &'static str,
    path: &'a str,
) -> impl FnOnce(BeneathError) -> ToolError + 'a {
    move |err| match err {
        BeneathError::Io { source, .. } => io_err(op, path)(source),
        refused => {
            tracing::warn!(
                target: "loopgate::security",
                security_event = "path_refused",
                reason = "symlink_swapped",
                op,
                path,
                error = %refused,
                "a tool's path turned into a symlink after it was checked; not followed"
            );
            loopgate_telemetry::metrics::Metrics::new()
                .refused_paths
                .add(
                    1,
                    &[opentelemetry::KeyValue::new("reason", "symlink_swapped")],
                );
            ToolError::SymlinkRefused(path.to_string())
        }
    }
}

/// A text file a tool read.
#[derive(Debug)]
pub(crate) struct TextFile {
    /// Its path as the tools name it (relative to the root).
    pub(crate) rel: String,
    /// Where it is, relative to the root, with symlinks inside the workspace resolved.
    pub(crate) real: PathBuf,
    pub(crate) text: String,
}

/// A checked tool path: where it is as named, and where it really is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The root joined with the path as given (`.` and empty components dropped).
    pub(crate) path: PathBuf,
    /// Relative to the root, every symlink inside the workspace on the way resolved: the path
    /// the tools open, beneath the root, following nothing.
    pub(crate) real: PathBuf,
}

/// A workspace directory; all tool paths resolve under its canonical root.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    dir: Arc<RootDir>,
}

impl Workspace {
    /// `root` must exist; it is canonicalized once so symlinks above it (e.g. `/tmp`) are fine.
    pub fn new(root: &Path) -> Result<Workspace, ToolError> {
        let shown = root.display().to_string();
        let root = fs::canonicalize(root).map_err(io_err("open workspace", &shown))?;
        let dir = RootDir::open(&root).map_err(beneath_err("open workspace", &shown))?;
        Ok(Workspace {
            root,
            dir: Arc::new(dir),
        })
    }

    /// The root, opened once: paths used through it resolve beneath it, following nothing.
    pub(crate) fn dir(&self) -> &RootDir {
        &self.dir
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Map a model-supplied relative path to a path under the root. `""` and `"."` are the root.
    /// Refuses absolute paths, `..`, and any existing component that is a symlink resolving
    /// outside the root (or nowhere). Components that don't exist yet are fine: the tools create
    /// them as plain directories.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        self.resolve_target(rel).map(|target| target.path)
    }

    /// [`Workspace::resolve`], with where the path really is (see [`Target`]).
    pub(crate) fn resolve_target(&self, rel: &str) -> Result<Target, ToolError> {
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
        // `current` with every symlink on it resolved (inside the root, as checked).
        let mut real = self.root.clone();
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
                    Ok(target) => real = target,
                    Err(err) if err.kind() == ErrorKind::NotFound => {
                        return Err(ToolError::DanglingSymlink(rel.to_string()))
                    }
                    Err(err) => return Err(io_err("resolve", rel)(err)),
                },
                Ok(meta) if !is_last && !meta.is_dir() => return Err(not_a_dir()),
                Ok(_) => real.push(part),
                // Nothing further down exists; what is created there is created by us.
                Err(err) if err.kind() == ErrorKind::NotFound => {
                    real.extend(&parts[i..]);
                    break;
                }
                Err(err) => return Err(io_err("resolve", rel)(err)),
            }
        }
        let real = real
            .strip_prefix(&self.root)
            .map(Path::to_path_buf)
            .map_err(|_| ToolError::EscapesWorkspace(rel.to_string()))?;
        Ok(Target {
            path: self.root.join(clean),
            real,
        })
    }

    /// `path` relative to the root, as the file tools and the snapshot name it.
    pub(crate) fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }
    /// The text file at `rel` (a leading `workspace/` dropped; see
    /// [`Workspace::without_root_prefix`]), for a tool that reads it.
    pub(crate) fn read_text(&self, rel: &str) -> Result<TextFile, ToolError> {
        let (rel, _) = self.without_root_prefix(rel)?;
        let Target { real, .. } = self.resolve_target(non_empty(&rel)?)?;
        let mut file = match self.dir.open_file(&real) {
            Ok(file) => file,
            Err(BeneathError::Io { source, .. }) => return Err(self.read_error(&rel, source)),
            Err(refused) => return Err(beneath_err("read", &rel)(refused)),
        };
        let is_dir = file
            .metadata()
            .map_err(|err| self.read_error(&rel, err))?
            .is_dir();
        if is_dir {
            return Err(ToolError::IsDirectory(rel));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|err| self.read_error(&rel, err))?;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(TextFile { rel, real, text }),
            Err(_) => Err(ToolError::NotText(rel)),
        }
    }

    /// Write `bytes` to the checked path `target` (named `rel` to the model), its missing
    /// directories made; beneath the root, following no symlink.
    pub(crate) fn write_target(
        &self,
        target: &Target,
        rel: &str,
        bytes: &[u8],
    ) -> Result<(), ToolError> {
        if let Some(parent) = target.real.parent() {
            self.dir
                .create_dir_all(parent)
                .map_err(|err| match err.io_kind() {
                    Some(ErrorKind::AlreadyExists | ErrorKind::NotADirectory) => {
                        ToolError::NotDirectory(parent_rel(rel))
                    }
                    _ => beneath_err("create directories for", rel)(err),
                })?;
        }
        self.dir
            .write(&target.real, bytes)
            .map_err(beneath_err("write", rel))
    }

    /// Save `bytes` at `rel` (a tool's output file, e.g. a screenshot): checked, then written
    /// beneath the root following no symlink, its missing directories made.
    pub(crate) fn save(&self, rel: &str, bytes: &[u8]) -> Result<(), ToolError> {
        let target = self.resolve_target(rel)?;
        self.write_target(&target, rel, bytes)
    }

    /// Whether the checked path is an existing directory (nothing followed).
    pub(crate) fn is_dir(&self, target: &Target) -> bool {
        self.dir
            .symlink_metadata(&target.real)
            .is_ok_and(|meta| meta.is_dir())
    }

    /// A failed read of `rel`: when it does not exist but a file of its name does elsewhere
    /// in the workspace, the error names that file.
    pub(crate) fn read_error(&self, rel: &str, err: std::io::Error) -> ToolError {
        match io_err("read", rel)(err) {
            ToolError::NotFound(path) => {
                let elsewhere = files_named_like(&self.dir, &path);
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
    pub(crate) fn without_root_prefix(&self, rel: &str) -> Result<(String, bool), ToolError> {
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

/// The directory part of `rel`, as the model named it.
pub(crate) fn parent_rel(rel: &str) -> String {
    Path::new(rel)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// `rel`, unless it is blank.
pub(crate) fn non_empty(rel: &str) -> Result<&str, ToolError> {
    if rel.trim().is_empty() {
        Err(ToolError::EmptyPath)
    } else {
        Ok(rel)
    }
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
