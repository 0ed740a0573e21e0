//! The page's accessibility tree as text, in Playwright MCP's style
//! (`- button "Greet" [ref=e3]`), with refs that stay stable until the next navigation
//! (`render`), and the size cap and delta against the previous snapshot (`frame`). Pure.

mod frame;
mod render;

pub use frame::{frame_snapshot, DEFAULT_SNAPSHOT_CAP};
pub use render::{render, AxItem, RefTable, Rendered, RenderedNode};
