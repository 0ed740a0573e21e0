//! The one list of tools: [`Tool`] has an arm per tool, each defined in a file of its own (its
//! name, spec, lenient arguments and execution); the tool names, the specs offered to the
//! model, what each tool does to the workspace and the dispatch of a call all come from here.
//! Adding a tool: its file (a `DEF: ToolDef` and a `run`), and here a variant, its place in
//! [`Tool::TEXT`] and its arm in `def` and `run` (the compiler asks for the arms). A browser
//! tool goes under `browser/` and into
//! [`BrowserTool`](crate::tools::browser::browser_tool::BrowserTool) the same way.

use loopgate_models::{ImagePart, ToolSpec};
use serde_json::Value;

use crate::tools::browser::browser_tool::BrowserTool;
use crate::tools::context::ToolContext;
use crate::tools::desktop::desktop_tool::DesktopTool;
use crate::tools::tool_def::{ToolAction, ToolDef, ToolEffect};
use crate::tools::workspace::ToolError;
use crate::tools::{edit_file, finish, list_dir, read_file, shell, write_file};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tool {
    WriteFile,
    ReadFile,
    EditFile,
    ListDir,
    Shell,
    Finish,
    /// In browser gui episodes only.
    Browser(BrowserTool),
    /// In desktop gui episodes only.
    Desktop(DesktopTool),
}

impl Tool {
    /// The tools of every episode, in the order offered (the browser tools follow in gui
    /// episodes).
    pub(crate) const TEXT: [Tool; 6] = [
        Tool::WriteFile,
        Tool::ReadFile,
        Tool::EditFile,
        Tool::ListDir,
        Tool::Shell,
        Tool::Finish,
    ];

    pub(crate) fn def(self) -> &'static ToolDef {
        match self {
            Tool::WriteFile => &write_file::DEF,
            Tool::ReadFile => &read_file::DEF,
            Tool::EditFile => &edit_file::DEF,
            Tool::ListDir => &list_dir::DEF,
            Tool::Shell => &shell::DEF,
            Tool::Finish => &finish::DEF,
            Tool::Browser(tool) => tool.def(),
            Tool::Desktop(tool) => tool.def(),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        self.def().name
    }

    pub(crate) fn spec(self) -> ToolSpec {
        self.def().spec()
    }

    pub(crate) fn effect(self) -> ToolEffect {
        self.def().effect
    }

    /// The browser tools as tools.
    pub(crate) fn browser() -> impl Iterator<Item = Tool> {
        BrowserTool::ALL.into_iter().map(Tool::Browser)
    }

    /// The desktop tools as tools.
    pub(crate) fn desktop() -> impl Iterator<Item = Tool> {
        DesktopTool::ALL.into_iter().map(Tool::Desktop)
    }

    /// The tool called `name`, gui or not.
    pub(crate) fn named(name: &str) -> Option<Tool> {
        Tool::TEXT
            .into_iter()
            .chain(Tool::browser())
            .chain(Tool::desktop())
            .find(|tool| tool.name() == name)
    }

    /// What the effect of a call named `name` is (`None`: no such tool).
    pub(crate) fn effect_of(name: &str) -> Option<ToolEffect> {
        Tool::named(name).map(Tool::effect)
    }

    /// Carry out one call with `arguments`. Never fails: errors become the tool result text.
    pub(crate) async fn run(self, ctx: &ToolContext, arguments: &Value) -> ToolAction {
        let done = match self {
            Tool::WriteFile => write_file::run(ctx, arguments).await,
            Tool::ReadFile => read_file::run(ctx, arguments).await,
            Tool::EditFile => edit_file::run(ctx, arguments).await,
            Tool::ListDir => list_dir::run(ctx, arguments).await,
            Tool::Shell => shell::run(ctx, arguments).await,
            Tool::Finish => {
                return ToolAction::Finish {
                    summary: finish::summary(arguments),
                }
            }
            Tool::Browser(tool) => return run_browser(tool, ctx, arguments).await,
            Tool::Desktop(tool) => return run_desktop(tool, ctx, arguments).await,
        };
        ToolAction::from_text(done)
    }
}

async fn run_browser(tool: BrowserTool, ctx: &ToolContext, arguments: &Value) -> ToolAction {
    let Some(gui) = &ctx.gui else {
        return ToolAction::from_text(Err::<String, _>(unknown_tool(tool.def().name, Tool::TEXT)));
    };
    let scope = |path: &str| ctx.check_scope(path);
    match gui.call(tool, arguments, &ctx.workspace, scope).await {
        Ok(output) => ToolAction::Continue {
            result: output.text,
            ok: true,
            images: output.png.iter().map(|png| ImagePart::png(png)).collect(),
        },
        Err(err) => ToolAction::from_text(Err::<String, _>(err)),
    }
}

async fn run_desktop(tool: DesktopTool, ctx: &ToolContext, arguments: &Value) -> ToolAction {
    let Some(desktop) = &ctx.desktop else {
        return ToolAction::from_text(Err::<String, _>(unknown_tool(tool.def().name, Tool::TEXT)));
    };
    let scope = |path: &str| ctx.check_scope(path);
    match desktop.call(tool, arguments, &ctx.workspace, scope).await {
        Ok(output) => ToolAction::Continue {
            result: output.text,
            ok: true,
            images: output.png.iter().map(|png| ImagePart::png(png)).collect(),
        },
        Err(err) => ToolAction::from_text(Err::<String, _>(err)),
    }
}

/// The error of a call of a tool named `name` that the episode does not have; `available`
/// are the ones it names.
pub(crate) fn unknown_tool(name: &str, available: impl IntoIterator<Item = Tool>) -> ToolError {
    ToolError::UnknownTool {
        name: name.to_string(),
        available: available
            .into_iter()
            .map(Tool::name)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tool's name, description and argument schema as the model is offered them, byte
    /// for byte.
    #[test]
    fn the_specs_are_as_offered() {
        let shown: String = Tool::TEXT
            .into_iter()
            .chain(Tool::browser())
            .chain(Tool::desktop())
            .map(|tool| {
                let spec = tool.spec();
                format!("{}\n{}\n{}\n", spec.name, spec.description, spec.parameters)
            })
            .collect();
        assert_eq!(shown, include_str!("tool_specs.snapshot"));
    }

    #[test]
    fn every_tool_is_found_by_its_name_and_writers_name_their_text() {
        for tool in Tool::TEXT
            .into_iter()
            .chain(Tool::browser())
            .chain(Tool::desktop())
        {
            assert_eq!(Tool::named(tool.name()), Some(tool));
        }
        assert_eq!(Tool::named("rm_rf"), None);
        // (tool, the argument holding the text it writes)
        let cases = [
            ("write_file", Some("content")),
            ("edit_file", Some("new")),
            ("read_file", None),
            ("shell", None),
            ("browser_screenshot", None),
            ("desktop_screenshot", None),
            ("desktop_type", None),
        ];
        for (name, text) in cases {
            assert_eq!(
                Tool::effect_of(name).and_then(ToolEffect::written_text),
                text,
                "{name}"
            );
        }
    }
}
