//! The system prompt of an episode of the built-in tool loop (`system.md`): what the agent
//! is, the tools it has by name, how it names paths; a gui episode adds its backend's note
//! (the browser's or the desktop's).

use loopgate_protocol::gui::GuiBackend;

use crate::prompt::template::fill;
use crate::tools::browser::gui_tools::gui_note;
use crate::tools::desktop::desktop_tools::desktop_note;
use crate::tools::tool::Tool;

/// The system prompt, for a gui episode (of a backend) or not. A top-level file's example path has no
/// directory in front, so the agent keeps root files at the root.
pub(crate) fn system_prompt(gui: Option<GuiBackend>) -> String {
    let tools: Vec<&str> = Tool::TEXT.into_iter().map(Tool::name).collect();
    let mut system = fill(include_str!("system.md"), &[("tools", &tools.join(", "))]);
    let note = match gui {
        None => return system,
        Some(GuiBackend::Browser) => gui_note(),
        Some(GuiBackend::Desktop) => desktop_note(),
    };
    system.push_str("\n\n");
    system.push_str(note);
    system
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_prompt_is_as_written() {
        let system = "You are a coding agent. Your current directory is the project's \
root. Do exactly the step you are given, using the tools: write_file, read_file, edit_file, \
list_dir, shell, finish. A path is relative to the current directory: a top-level file is \
just its name, such as `app.py`, with no directory in front. Use each file at exactly the path \
the goal, the checks and the workspace list give it. Write complete file contents. When the \
step is done, call finish with a one-line summary. Do not edit acceptance tests and do not \
hard-code expected output.";
        let gui_note = "\n\nThis is a GUI step: besides the file tools and shell you have a headless browser. \
browser_navigate opens a workspace file (e.g. index.html) or the task's served URL (paths starting with / are on it). \
browser_snapshot lists the page's elements with refs like [ref=e3]; browser_click, browser_type and browser_press_key act on refs \
from the latest snapshot. browser_wait_for waits for text; browser_screenshot saves a PNG into the workspace. \
Edit the files, reload with browser_navigate, and look again.";
        assert_eq!(system_prompt(None), system);
        assert_eq!(
            system_prompt(Some(GuiBackend::Browser)),
            format!("{system}{gui_note}")
        );
        let desktop = system_prompt(Some(GuiBackend::Desktop));
        assert!(desktop.starts_with(&format!("{system}\n\nThis is a GUI step on a desktop:")));
        assert!(desktop.contains("desktop_launch") && !desktop.contains("browser_"));
    }
}
