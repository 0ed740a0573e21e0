//! The gui capability's desktop tools, named like the browser tools: `desktop_launch`,
//! `desktop_snapshot`, `desktop_click`, `desktop_type`, `desktop_press_key`,
//! `desktop_wait_for`, `desktop_screenshot`, one file each behind
//! [`desktop_tool::DesktopTool`]. One desktop per episode (`desktop_tools`: a private Xvfb
//! display with a window manager and an accessibility bus, started on first use and restarted
//! after a crash) in the agent's sandbox exactly like a `shell` command (its network, its user,
//! the worker's secrets and other workspaces out of sight, the shell's environment); programs
//! the model launches run on it. All of it dies with the episode's tools.

pub(crate) mod click;
pub(crate) mod desktop_tool;
pub(crate) mod desktop_tools;
pub(crate) mod launch;
pub(crate) mod press_key;
pub(crate) mod screenshot;
pub(crate) mod snapshot;
pub(crate) mod type_text;
pub(crate) mod wait_for;
