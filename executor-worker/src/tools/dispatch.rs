//! The executor's tool set as offered to the model, and the dispatch of one tool call to the
//! workspace tools or the shell. Every failure becomes tool-result text for the model.

use loopgate_models::{ImagePart, ToolCall, ToolSpec};
use loopgate_protocol::snapshot::path_in_scope;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::ToolLimits;
use crate::isolation::AgentIsolationEnv;
use crate::self_check::finish_rules::{finish_effect, FinishEffect, SelfCheckBudget};
use crate::self_check::runner::SelfCheck;
use crate::tools::browser::GuiTools;
use crate::tools::shell::run_shell;
use crate::tools::workspace::{ToolError, Workspace};

pub(crate) const TOOL_NAMES: [&str; 6] = [
    "write_file",
    "read_file",
    "edit_file",
    "list_dir",
    "shell",
    "finish",
];

/// What the loop does after a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAction {
    /// Give this text back to the model as the tool result and go on; `images` (a
    /// `browser_screenshot`'s PNG) go with it to vision models.
    Continue {
        result: String,
        ok: bool,
        images: Vec<ImagePart>,
    },
    /// The agent called `finish`.
    Finish { summary: String },
}

// Argument structs are lenient on purpose: weak models use other common names for fields.
#[derive(Deserialize)]
struct PathArgs {
    #[serde(alias = "file_path", alias = "filename", alias = "file", alias = "dir")]
    path: String,
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default, alias = "dir", alias = "directory")]
    path: Option<String>,
}

#[derive(Deserialize)]
struct WriteArgs {
    #[serde(alias = "file_path", alias = "filename", alias = "file")]
    path: String,
    #[serde(alias = "contents", alias = "text", alias = "data")]
    content: String,
}

#[derive(Deserialize)]
struct EditArgs {
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

#[derive(Deserialize)]
struct ShellArgs {
    #[serde(alias = "cmd", alias = "script")]
    command: String,
}

#[derive(Deserialize)]
struct FinishArgs {
    #[serde(default, alias = "message", alias = "result")]
    summary: Option<String>,
}

fn parse_args<T: DeserializeOwned>(tool: &str, arguments: &Value) -> Result<T, ToolError> {
    let bad = |reason: String| ToolError::BadArguments {
        tool: tool.to_string(),
        reason,
    };
    let value = match arguments {
        // Arguments the adapter could not decode arrive verbatim; some models double-encode.
        Value::String(text) => serde_json::from_str::<Value>(text)
            .map_err(|_| bad(format!("arguments are not a JSON object: {text}")))?,
        Value::Null => json!({}),
        other => other.clone(),
    };
    serde_json::from_value(value).map_err(|err| bad(err.to_string()))
}

fn string_param(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// The tools offered to the model, in a fixed order.
pub(crate) fn tool_specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, parameters: Value| ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters,
    };
    let path = string_param("Path relative to the workspace root");
    vec![
        spec(
            "write_file",
            "Create or overwrite a file with the complete content. Parent directories are created.",
            object_schema(
                json!({"path": path, "content": string_param("The complete file content")}),
                &["path", "content"],
            ),
        ),
        spec(
            "read_file",
            "Read a text file.",
            object_schema(json!({"path": path}), &["path"]),
        ),
        spec(
            "edit_file",
            "Replace the single exact occurrence of `old` with `new` in a file. Fails if `old` is \
             missing or appears more than once.",
            object_schema(
                json!({
                    "path": path,
                    "old": string_param("Exact text to replace, unique in the file"),
                    "new": string_param("Replacement text"),
                }),
                &["path", "old", "new"],
            ),
        ),
        spec(
            "list_dir",
            "List a directory (directories end with /).",
            object_schema(
                json!({"path": string_param("Directory relative to the workspace root; default '.'")}),
                &[],
            ),
        ),
        spec(
            "shell",
            "Run a shell command (sh -c) in the workspace root. Returns exit code and output.",
            object_schema(
                json!({"command": string_param("The command line")}),
                &["command"],
            ),
        ),
        spec(
            "finish",
            "Call when the step is done, with a one-line summary of what you did.",
            object_schema(
                json!({"summary": string_param("One-line summary")}),
                &["summary"],
            ),
        ),
    ]
}

/// One episode's tools, bound to its workspace and limits.
#[derive(Debug, Clone)]
pub struct EpisodeTools {
    workspace: Workspace,
    limits: ToolLimits,
    /// The step's write scope (`dir/` prefixes or exact files); empty = the whole workspace.
    /// `write_file` and `edit_file` refuse paths outside it at once, so the model can correct
    /// itself; the audit still checks every change (the shell can write anywhere).
    write_scope: Vec<String>,
    /// The step's checks, run on a copy of the workspace before `finish` is accepted.
    self_check: Option<SelfCheck>,
    /// Where `shell` commands run: the worker's agent sandbox.
    isolation: AgentIsolationEnv,
    /// The browser tools (gui episodes only).
    gui: Option<std::sync::Arc<GuiTools>>,
}

impl EpisodeTools {
    /// Tools for `workspace`; `shell` runs unsandboxed until [`EpisodeTools::with_isolation`]
    /// gives it the worker's sandbox (episodes always do).
    pub fn new(workspace: Workspace, limits: ToolLimits) -> Self {
        EpisodeTools {
            workspace,
            limits,
            write_scope: Vec::new(),
            self_check: None,
            isolation: AgentIsolationEnv::unsandboxed("no sandbox given to these tools"),
            gui: None,
        }
    }

    /// Run `shell` commands as `isolation` says (the sandbox probed at start-up).
    pub fn with_isolation(mut self, isolation: AgentIsolationEnv) -> Self {
        self.isolation = isolation;
        self
    }

    /// Add the browser tools (a gui episode).
    pub(crate) fn with_gui(mut self, gui: Option<GuiTools>) -> Self {
        self.gui = gui.map(std::sync::Arc::new);
        self
    }

    /// The tools offered to the model: the six text tools, plus the browser tools in gui
    /// episodes.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = tool_specs();
        if self.gui.is_some() {
            specs.extend(GuiTools::specs());
        }
        specs
    }

    pub(crate) fn with_self_check(mut self, self_check: Option<SelfCheck>) -> Self {
        self.self_check = self_check;
        self
    }

    /// Self-checks the episode may run (0 without a self-check).
    pub(crate) fn self_checks_allowed(&self) -> u32 {
        self.self_check.as_ref().map_or(0, SelfCheck::allowed)
    }

    /// Before `finish` ends the episode: run the step's self-check when one is due (`budget`
    /// has one left) and say what `finish` does. Never fails: a self-check that cannot run
    /// accepts `finish` (the audit decides either way).
    pub(crate) async fn check_before_finish(&self, budget: &mut SelfCheckBudget) -> FinishEffect {
        let Some(self_check) = &self.self_check else {
            return FinishEffect::Accept;
        };
        if !budget.take() {
            return FinishEffect::Accept;
        }
        match self_check.run(self.workspace.root()).await {
            Ok(findings) => finish_effect(&findings),
            Err(err) => {
                tracing::warn!(error = %err, "self-check could not run; finish accepted");
                FinishEffect::Accept
            }
        }
    }

    /// Whether [`EpisodeTools::check_before_finish`] would run a self-check now.
    pub(crate) fn can_self_check(&self, budget: &SelfCheckBudget) -> bool {
        self.self_check.is_some() && budget.has_left()
    }

    pub fn with_write_scope(mut self, write_scope: Vec<String>) -> Self {
        self.write_scope = write_scope;
        self
    }

    fn check_scope(&self, path: &str) -> Result<(), ToolError> {
        let clean = path.trim().trim_start_matches("./");
        if self.write_scope.is_empty() || path_in_scope(clean, &self.write_scope) {
            return Ok(());
        }
        Err(ToolError::OutsideWriteScope {
            path: path.to_string(),
            scope: self.write_scope.join(", "),
        })
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Carry out one call. Never fails: errors become the tool result text.
    pub async fn call(&self, call: &ToolCall) -> ToolAction {
        if call.name == "finish" {
            let summary = parse_args::<FinishArgs>("finish", &call.arguments)
                .ok()
                .and_then(|a| a.summary)
                .unwrap_or_default();
            return ToolAction::Finish { summary };
        }
        if let Some(gui) = self
            .gui
            .as_ref()
            .filter(|_| call.name.starts_with("browser_"))
        {
            let scope = |path: &str| self.check_scope(path);
            let parse = |tool: &str, args: &Value| parse_args::<Value>(tool, args);
            return match gui.call(call, &self.workspace, scope, parse).await {
                Ok(output) => ToolAction::Continue {
                    result: output.text,
                    ok: true,
                    images: output.png.iter().map(|png| ImagePart::png(png)).collect(),
                },
                Err(err) => ToolAction::Continue {
                    result: format!("error: {err}"),
                    ok: false,
                    images: Vec::new(),
                },
            };
        }
        match self.run(call).await {
            Ok(result) => ToolAction::Continue {
                result,
                ok: true,
                images: Vec::new(),
            },
            Err(err) => ToolAction::Continue {
                result: format!("error: {err}"),
                ok: false,
                images: Vec::new(),
            },
        }
    }

    async fn run(&self, call: &ToolCall) -> Result<String, ToolError> {
        let cap = self.limits.output_cap_bytes;
        let name = call.name.as_str();
        match name {
            "write_file" => {
                let args: WriteArgs = parse_args(name, &call.arguments)?;
                self.check_scope(&args.path)?;
                self.blocking(move |ws| ws.write_file(&args.path, &args.content))
                    .await
            }
            "read_file" => {
                let args: PathArgs = parse_args(name, &call.arguments)?;
                self.blocking(move |ws| ws.read_file(&args.path, cap)).await
            }
            "edit_file" => {
                let args: EditArgs = parse_args(name, &call.arguments)?;
                self.check_scope(&args.path)?;
                self.blocking(move |ws| ws.edit_file(&args.path, &args.old, &args.new))
                    .await
            }
            "list_dir" => {
                let args: ListArgs = parse_args(name, &call.arguments)?;
                let path = args.path.unwrap_or_default();
                self.blocking(move |ws| ws.list_dir(&path)).await
            }
            "shell" => {
                let args: ShellArgs = parse_args(name, &call.arguments)?;
                let outcome = run_shell(
                    self.workspace.root(),
                    &args.command,
                    &self.limits,
                    &self.isolation,
                )
                .await?;
                Ok(outcome.to_tool_text())
            }
            other => Err(ToolError::UnknownTool {
                name: other.to_string(),
                available: TOOL_NAMES.join(", "),
            }),
        }
    }

    async fn blocking<F>(&self, op: F) -> Result<String, ToolError>
    where
        F: FnOnce(&Workspace) -> Result<String, ToolError> + Send + 'static,
    {
        let workspace = self.workspace.clone();
        tokio::task::spawn_blocking(move || op(&workspace))
            .await
            .map_err(|err| ToolError::Internal(err.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments,
        }
    }

    #[tokio::test]
    async fn file_tools_refuse_paths_outside_the_write_scope() {
        let dir = tempfile::tempdir().unwrap();
        let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default())
            .with_write_scope(vec!["contract.toml".into(), "docs/".into()]);
        let cases: &[(&str, Value, bool)] = &[
            (
                "write_file",
                json!({"path": "contract.toml", "content": "x"}),
                true,
            ),
            (
                "write_file",
                json!({"path": "./contract.toml", "content": "x"}),
                true,
            ),
            (
                "write_file",
                json!({"path": "docs/a.md", "content": "x"}),
                true,
            ),
            (
                "write_file",
                json!({"path": "spec.md", "content": "x"}),
                false,
            ),
            (
                "write_file",
                json!({"path": "src/greet.py", "content": "x"}),
                false,
            ),
            (
                "edit_file",
                json!({"path": "spec.md", "old": "a", "new": "b"}),
                false,
            ),
        ];
        for (name, args, allowed) in cases {
            match tools.call(&call(name, args.clone())).await {
                ToolAction::Continue { result, ok, .. } => {
                    assert_eq!(ok, *allowed, "{name} {args}: {result}");
                    if !allowed {
                        assert!(result.contains("may only change"), "{result}");
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(!dir.path().join("spec.md").exists());
        assert!(!dir.path().join("src").exists());
    }

    #[test]
    fn specs_cover_every_tool() {
        let names: Vec<String> = tool_specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, TOOL_NAMES);
    }

    #[tokio::test]
    async fn dispatch_table() {
        let dir = tempfile::tempdir().unwrap();
        let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
        let cases: Vec<(ToolCall, bool, &str)> = vec![
            (
                call("write_file", json!({"path": "a/b.txt", "content": "hi"})),
                true,
                "wrote 2 bytes",
            ),
            (
                call(
                    "write_file",
                    json!({"file_path": "c.txt", "contents": "yo"}),
                ),
                true,
                "wrote 2 bytes",
            ),
            (
                call(
                    "write_file",
                    json!("{\"path\":\"d.txt\",\"content\":\"x\"}"),
                ),
                true,
                "wrote 1 bytes",
            ),
            (
                call("write_file", json!("not json")),
                false,
                "not a JSON object",
            ),
            (
                call("write_file", json!({"path": "x"})),
                false,
                "bad arguments for write_file",
            ),
            (
                call("write_file", json!({"path": "../../etc/x", "content": "x"})),
                false,
                "'..'",
            ),
            (call("read_file", json!({"path": "a/b.txt"})), true, "hi"),
            (
                call("read_file", json!({"path": "nope"})),
                false,
                "does not exist",
            ),
            (
                call(
                    "edit_file",
                    json!({"path": "a/b.txt", "old": "hi", "new": "ho"}),
                ),
                true,
                "edited",
            ),
            (call("list_dir", json!({})), true, "a/\nc.txt\nd.txt"),
            (call("list_dir", Value::Null), true, "a/"),
            (
                call("shell", json!({"command": "cat a/b.txt"})),
                true,
                "exit code: 0\nho",
            ),
            (call("rm_rf", json!({})), false, "unknown tool 'rm_rf'"),
        ];
        for (c, ok, needle) in cases {
            match tools.call(&c).await {
                ToolAction::Continue {
                    result, ok: got_ok, ..
                } => {
                    assert_eq!(got_ok, ok, "{c:?}: {result}");
                    assert!(result.contains(needle), "{c:?}: {result}");
                }
                other => panic!("{c:?}: {other:?}"),
            }
        }
        assert!(!dir.path().parent().unwrap().join("etc/x").exists());
        assert_eq!(
            tools
                .call(&call("finish", json!({"summary": "done"})))
                .await,
            ToolAction::Finish {
                summary: "done".into()
            }
        );
        assert_eq!(
            tools.call(&call("finish", json!("garbage"))).await,
            ToolAction::Finish {
                summary: String::new()
            }
        );
    }
}
