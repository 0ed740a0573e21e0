//! loopgate-desktop: a private X display (Xvfb) with a small window manager and an AT-SPI
//! accessibility bus, for the executor's desktop gui tools (`desktop_*`) and the
//! `loopgate desktop-check` verb.
//!
//! - `launch`: the driver (`agent.py`, run by Debian's Python with PyGObject) in its own
//!   process group, inside the caller's sandbox when it gives one; it starts Xvfb (a socket
//!   file in its `/tmp` only, a cookie required), matchbox-window-manager, the accessibility
//!   bus and registry, and answers JSON lines; the group is killed when the session drops.
//! - `session`: launch programs, snapshot, click / type / press by ref, wait, screenshot.
//! - `tree`: the accessibility tree as browser-snapshot-style lines with stable refs, capped
//!   (pure).
//! - `keys`: key names to X keysyms (pure).
//! - `script`: `loopgate desktop-check`'s steps.

#![warn(unreachable_pub)]

mod error;
mod keys;
mod launch;
mod script;
mod session;
mod tree;

pub use error::DesktopError;
pub use launch::{find_python, missing_tools, CommandWrapper, LaunchSettings, WrappedLaunch};
pub use script::{run_script, CheckReport, CheckScript, StepReport};
pub use session::{Session, DEFAULT_LAUNCH_WAIT};
pub use tree::{render, AppNode, AxNode, RefTable, Rendered, RenderedNode, DEFAULT_SNAPSHOT_CAP};
