//! The browser boundary's one error enum.

use std::time::Duration;

/// What went wrong driving the browser. Every variant says what the caller (the model, the
/// check author) can do about it.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// No Chromium executable was found.
    #[error("no Chromium found: set LOOPGATE_CHROMIUM or install Debian's `chromium` package")]
    NoChromium,
    /// Chromium could not be started or did not announce its DevTools endpoint in time.
    #[error("cannot start Chromium ({executable}): {reason}")]
    Launch {
        /// The executable tried.
        executable: String,
        /// Why it failed.
        reason: String,
        /// The underlying I/O error, if any.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The browser process is gone (crashed or killed). The next call starts a fresh one.
    #[error("the browser crashed or was killed; it is restarted on the next browser call (refs are reset)")]
    Crashed,
    /// A navigation target the policy refuses.
    #[error("refused URL {url:?}: {reason}")]
    Refused {
        /// The URL as given.
        url: String,
        /// Why it is refused.
        reason: String,
    },
    /// The page did not finish loading in time (it may still be usable).
    #[error("{url} did not finish loading within {}s; loading was stopped", timeout.as_secs())]
    LoadTimeout {
        /// The URL being loaded.
        url: String,
        /// The limit.
        timeout: Duration,
    },
    /// A ref that is not in the latest snapshot (or the page navigated since).
    #[error("unknown ref {0:?}: take a new browser_snapshot and use a ref from it")]
    UnknownRef(String),
    /// A ref whose element is no longer on the page or cannot be interacted with.
    #[error("ref {reference} cannot be used: {reason}; take a new browser_snapshot")]
    StaleRef {
        /// The ref.
        reference: String,
        /// Why.
        reason: String,
    },
    /// No element matched a label (`loopgate browse --click LABEL`), not even after waiting
    /// `timeout` for one to be rendered.
    #[error("no {what} labelled {label:?} appeared on the page within {}s", timeout.as_secs_f64())]
    NoSuchLabel {
        /// What kind of element was looked for.
        what: &'static str,
        /// The label.
        label: String,
        /// How long it was waited for.
        timeout: Duration,
    },
    /// No field or control with the label was on the page, and the page's text stopped
    /// changing before the limit.
    #[error("no {what} labelled {label:?} is on the page, whose text has not changed for {:.1}s", settle.as_secs_f64())]
    LabelNotSettled {
        /// What kind of element was looked for.
        what: &'static str,
        /// The label.
        label: String,
        /// How long the page's text stayed the same.
        settle: Duration,
    },
    /// A key name not on the US keyboard layout.
    #[error("unknown key {0:?}: use names like Enter, Tab, Escape, Backspace, ArrowDown, a")]
    UnknownKey(String),
    /// Text did not appear in time.
    #[error("text {text:?} did not appear within {}s", timeout.as_secs())]
    TextNotFound {
        /// The text waited for.
        text: String,
        /// The limit.
        timeout: Duration,
    },
    /// Text was not on the page, and the page's text stopped changing before the limit.
    #[error("text {text:?} is not on the page, whose text has not changed for {:.1}s", settle.as_secs_f64())]
    TextNotSettled {
        /// The text waited for.
        text: String,
        /// How long the page's text stayed the same.
        settle: Duration,
    },
    /// A DevTools command failed or timed out.
    #[error("browser command {command} failed: {reason}")]
    Protocol {
        /// The command.
        command: &'static str,
        /// The failure as the browser reported it.
        reason: String,
    },
    /// The `serve` command failed to start or never answered on its URL.
    #[error("serve command: {0}")]
    Serve(String),
    /// Local I/O (temp dirs, files).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl BrowserError {
    /// Whether trying the same thing again may succeed without changing the input.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            BrowserError::Crashed
                | BrowserError::LoadTimeout { .. }
                | BrowserError::TextNotFound { .. }
                | BrowserError::TextNotSettled { .. }
                | BrowserError::Protocol { .. }
                | BrowserError::Launch { .. }
                | BrowserError::Serve(_)
        )
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        BrowserError::Io {
            what: what.into(),
            source,
        }
    }
}
