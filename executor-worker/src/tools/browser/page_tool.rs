//! What the browser tools share: what they give back, their error, and the element-ref
//! argument.

use loopgate_browser::BrowserError;
use serde_json::Value;

use crate::tools::tool_def::string_param;
use crate::tools::workspace::ToolError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum GuiToolError {
    #[error(transparent)]
    Browser(#[from] BrowserError),
    #[error(transparent)]
    Desktop(#[from] loopgate_desktop::DesktopError),
    #[error(transparent)]
    Tool(#[from] ToolError),
}

/// What a browser tool gives back: text for every model, and the PNG of a screenshot (sent as
/// an image part to models whose profile has `vision = true`).
#[derive(Debug)]
pub(crate) struct BrowserOutput {
    pub(crate) text: String,
    pub(crate) png: Option<Vec<u8>>,
}

impl BrowserOutput {
    pub(crate) fn text(text: String) -> Self {
        BrowserOutput { text, png: None }
    }
}

/// The `ref` argument: an element of the latest snapshot.
pub(crate) fn ref_param() -> Value {
    string_param("Exact ref from the latest browser_snapshot, e.g. e3")
}
