//! loopgate-browser: headless Chromium driven over the DevTools protocol (chromiumoxide), for
//! the executor's gui tools (`browser_*`) and the `loopgate browse` check verb.
//!
//! - `launch`: Chromium in its own process group (inside the caller's sandbox when it gives
//!   one, with the task's `serve` command beside it) with a fresh profile and network-quiet
//!   flags; the group is killed when the session drops.
//! - `pipe_relay`: the DevTools connection over `--remote-debugging-pipe` (no port).
//! - `session`: one page; navigate, snapshot, click / type / press by ref, wait, screenshot.
//! - `snapshot`: the accessibility tree as Playwright MCP-style lines with stable refs, and
//!   the size cap and delta (pure).
//! - `page_errors`: exceptions, `console.error` and error log entries a page reports.
//! - `target`: where the browser may go (workspace files, loopback http) (pure).
//! - `serve`: the task's `[gui] serve` command, started and waited on.
//! - `script`: `loopgate browse`'s steps.

#![warn(unreachable_pub)]

mod error;
mod launch;
mod page_errors;
mod pipe_relay;
mod script;
mod serve;
mod session;
mod snapshot;
mod target;

pub use error::BrowserError;
pub use launch::{
    find_chromium, Beside, CommandWrapper, LaunchSettings, WrappedLaunch, CHROMIUM_FLAGS,
};
pub use script::{find_by_label, run_script, BrowseReport, BrowseScript, StepReport};
pub use serve::{host_port, Served};
pub use session::{Session, DEFAULT_LOAD_TIMEOUT};
pub use snapshot::{
    frame_snapshot, render, AxItem, RefTable, Rendered, RenderedNode, DEFAULT_SNAPSHOT_CAP,
};
pub use target::{resolve_target, TargetPolicy};
