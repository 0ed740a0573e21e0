//! The gui capability's browser tools, named as Playwright MCP names them: `browser_navigate`,
//! `browser_snapshot`, `browser_click`, `browser_type`, `browser_press_key`,
//! `browser_wait_for`, `browser_screenshot`, one file each behind [`browser_tool::BrowserTool`].
//! One browser per episode (`gui_tools`: started on first use, restarted after a crash), the
//! task's `[gui] serve` command started with it, both in the agent's sandbox exactly like a
//! `shell` command (its network, its user, the worker's secrets and other workspaces out of
//! sight, an environment of PATH, HOME and LANG only); the worker drives the browser over its
//! DevTools pipe. Both die with the episode's tools.

pub(crate) mod browser_tool;
pub(crate) mod click;
pub(crate) mod gui_tools;
pub(crate) mod navigate;
pub(crate) mod page_tool;
pub(crate) mod press_key;
pub(crate) mod screenshot;
pub(crate) mod snapshot;
pub(crate) mod type_text;
pub(crate) mod wait_for;
