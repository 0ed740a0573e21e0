//! One episode's tools as offered to the model ([`EpisodeTools`]): the tools of [`Tool`] it
//! has, bound to its workspace, limits, write scope, sandbox and browser, and the dispatch of
//! one call to them. Every failure becomes tool-result text for the model.

use std::sync::Arc;

use loopgate_models::{ToolCall, ToolSpec};

use crate::config::ToolLimits;
use crate::isolation::AgentIsolationEnv;
use crate::self_check::finish_rules::{finish_effect, FinishEffect, SelfCheckBudget};
use crate::self_check::runner::SelfCheck;
use crate::tools::browser::gui_tools::GuiTools;
use crate::tools::context::ToolContext;
use crate::tools::desktop::desktop_tools::DesktopTools;
use crate::tools::tool::{unknown_tool, Tool};
use crate::tools::tool_def::{arguments_value, ToolAction};
use crate::tools::workspace::{ToolError, Workspace};

/// One episode's tools, bound to its workspace and limits.
#[derive(Debug, Clone)]
pub struct EpisodeTools {
    context: ToolContext,
    /// The step's checks, run on a copy of the workspace before `finish` is accepted.
    self_check: Option<SelfCheck>,
}

impl EpisodeTools {
    /// Tools for `workspace`; `shell` runs unsandboxed until [`EpisodeTools::with_isolation`]
    /// gives it the worker's sandbox (episodes always do).
    pub fn new(workspace: Workspace, limits: ToolLimits) -> Self {
        EpisodeTools {
            context: ToolContext {
                workspace,
                limits,
                write_scope: Vec::new(),
                protected: Vec::new(),
                isolation: AgentIsolationEnv::unsandboxed("no sandbox given to these tools"),
                gui: None,
                desktop: None,
            },
            self_check: None,
        }
    }

    /// Run `shell` commands as `isolation` says (the sandbox probed at start-up).
    pub fn with_isolation(mut self, isolation: AgentIsolationEnv) -> Self {
        self.context.isolation = isolation;
        self
    }

    /// Add the browser tools (a gui episode).
    pub(crate) fn with_gui(mut self, gui: Option<GuiTools>) -> Self {
        self.context.gui = gui.map(Arc::new);
        self
    }

    /// Add the desktop tools (a desktop gui episode).
    pub(crate) fn with_desktop(mut self, desktop: Option<DesktopTools>) -> Self {
        self.context.desktop = desktop.map(Arc::new);
        self
    }

    /// Paths outside `write_scope` (`dir/` prefixes or exact files; empty = the whole
    /// workspace) are refused by the tools that write files.
    pub fn with_write_scope(mut self, write_scope: Vec<String>) -> Self {
        self.context.write_scope = write_scope;
        self
    }

    /// The task's protected paths (`dir/` prefixes or exact files), refused by the tools that
    /// write files.
    pub fn with_protected_paths(mut self, protected: Vec<String>) -> Self {
        self.context.protected = protected;
        self
    }

    pub(crate) fn with_self_check(mut self, self_check: Option<SelfCheck>) -> Self {
        self.self_check = self_check;
        self
    }

    /// The tools offered to the model, in order: the text tools, plus the browser tools in
    /// browser gui episodes or the desktop tools in desktop ones.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        let browser = self.context.gui.is_some().then(Tool::browser);
        let desktop = self.context.desktop.is_some().then(Tool::desktop);
        Tool::TEXT
            .into_iter()
            .chain(browser.into_iter().flatten())
            .chain(desktop.into_iter().flatten())
            .collect()
    }

    /// The specs of [`EpisodeTools::tools`].
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        self.tools().into_iter().map(Tool::spec).collect()
    }

    /// The names of [`EpisodeTools::tools`].
    pub(crate) fn tool_names(&self) -> Vec<&'static str> {
        self.tools().into_iter().map(Tool::name).collect()
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
        match self_check.run(self.context.workspace.root()).await {
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

    pub fn workspace(&self) -> &Workspace {
        &self.context.workspace
    }

    /// Carry out one call. Never fails: errors become the tool result text.
    pub async fn call(&self, call: &ToolCall) -> ToolAction {
        let offered = Tool::named(&call.name).filter(|tool| self.offers(*tool));
        match offered {
            Some(tool) => tool.run(&self.context, &call.arguments).await,
            None => ToolAction::from_text(Err::<String, _>(self.unknown(call))),
        }
    }

    fn offers(&self, tool: Tool) -> bool {
        match tool {
            Tool::Browser(_) => self.context.gui.is_some(),
            Tool::Desktop(_) => self.context.desktop.is_some(),
            _ => true,
        }
    }

    /// The error of a call of a tool the episode does not have: it names the browser tools
    /// for a `browser_` name in a gui episode (once its arguments read as JSON), else the
    /// text tools.
    fn unknown(&self, call: &ToolCall) -> ToolError {
        if self.context.gui.is_some() && call.name.starts_with("browser_") {
            if let Err(err) = arguments_value(&call.name, &call.arguments) {
                return err;
            }
            return unknown_tool(&call.name, Tool::browser());
        }
        if self.context.desktop.is_some() && call.name.starts_with("desktop_") {
            if let Err(err) = arguments_value(&call.name, &call.arguments) {
                return err;
            }
            return unknown_tool(&call.name, Tool::desktop());
        }
        unknown_tool(&call.name, Tool::TEXT)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::{json, Value};

    /// The text tools, in the order offered.
    const TOOL_NAMES: [&str; 6] = [
        "write_file",
        "read_file",
        "edit_file",
        "list_dir",
        "shell",
        "finish",
    ];

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall::new("c1", name, arguments)
    }

    /// Calls each `(tool, arguments, allowed)`; a refused call's result says `refusal`.
    async fn refusals(tools: &EpisodeTools, cases: &[(&str, Value, bool)], refusal: &str) {
        for (name, args, allowed) in cases {
            match tools.call(&call(name, args.clone())).await {
                ToolAction::Continue { result, ok, .. } => {
                    assert_eq!(ok, *allowed, "{name} {args}: {result}");
                    if !allowed {
                        assert!(result.contains(refusal), "{result}");
                    }
                }
                other => panic!("{other:?}"),
            }
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
        refusals(&tools, cases, "may only change").await;
        assert!(!dir.path().join("spec.md").exists());
        assert!(!dir.path().join("src").exists());
    }

    #[tokio::test]
    async fn file_tools_refuse_the_tasks_protected_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("test_slugify.py"), "import textkit\n").unwrap();
        let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default())
            .with_protected_paths(vec!["test_slugify.py".into(), "fixtures/".into()]);
        let cases: &[(&str, Value, bool)] = &[
            (
                "write_file",
                json!({"path": "textkit.py", "content": "def slugify(s):\n    return s\n"}),
                true,
            ),
            (
                "write_file",
                json!({"path": "./test_slugify.py", "content": "x"}),
                false,
            ),
            (
                "edit_file",
                json!({"path": "test_slugify.py", "old": "import", "new": "from"}),
                false,
            ),
            (
                "write_file",
                json!({"path": "fixtures/a.csv", "content": "x"}),
                false,
            ),
        ];
        refusals(&tools, cases, "is protected by the task").await;
        assert_eq!(
            std::fs::read_to_string(dir.path().join("test_slugify.py")).unwrap(),
            "import textkit\n"
        );
        assert!(!dir.path().join("fixtures").exists());
    }

    #[test]
    fn specs_cover_every_tool() {
        let dir = tempfile::tempdir().unwrap();
        let tools = EpisodeTools::new(Workspace::new(dir.path()).unwrap(), ToolLimits::default());
        let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
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
