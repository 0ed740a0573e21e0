//! The desktop boundary's one error enum.

use std::time::Duration;

/// What went wrong driving the desktop. Every variant says what the caller (the model, the
/// check author) can do about it.
#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    /// A program the desktop needs is not installed (Xvfb, xdotool, the AT-SPI bus, PyGObject).
    #[error("the desktop cannot start: {0}")]
    MissingTool(String),
    /// The display, window manager or accessibility bus did not come up.
    #[error("cannot start the desktop: {reason}")]
    Start {
        /// Why it failed.
        reason: String,
        /// The underlying I/O error, if any.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The desktop (its display or its driver) is gone. The next call starts a fresh one.
    #[error("the desktop crashed or was killed; it is restarted on the next desktop call (launched programs and refs are gone)")]
    Crashed,
    /// A desktop command did not answer in time (the desktop is restarted on the next call).
    #[error("desktop command {op} did not answer within {}s", timeout.as_secs())]
    Timeout {
        /// The command.
        op: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// A launched program exited before it showed a window.
    #[error("{command:?} exited ({status}) before showing a window; its output ends: {tail}")]
    AppExited {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
        /// The last of its output.
        tail: String,
    },
    /// A launched program showed no accessible window in time.
    #[error("{command:?} showed no accessible window within {}s (it is still running: take a desktop_snapshot, or click by coordinates after a desktop_screenshot)", timeout.as_secs())]
    NoWindow {
        /// The command.
        command: String,
        /// The limit.
        timeout: Duration,
    },
    /// A ref that is not in the latest snapshot.
    #[error("unknown ref {0:?}: take a new desktop_snapshot and use a ref from it")]
    UnknownRef(String),
    /// A ref whose element is gone, moved or off screen.
    #[error("ref {reference} cannot be used: {reason}; take a new desktop_snapshot")]
    StaleRef {
        /// The ref.
        reference: String,
        /// Why.
        reason: String,
    },
    /// No element matched a label (`loopgate desktop-check --click LABEL`) in time.
    #[error("no {what} labelled {label:?} appeared on the desktop within {}s", timeout.as_secs_f64())]
    NoSuchLabel {
        /// What kind of element was looked for.
        what: &'static str,
        /// The label.
        label: String,
        /// How long it was waited for.
        timeout: Duration,
    },
    /// A key name the desktop does not know.
    #[error(
        "unknown key {0:?}: use names like Enter, Tab, Escape, Backspace, ArrowDown, Control+s, a"
    )]
    UnknownKey(String),
    /// Text or an element did not appear in time.
    #[error("{what} did not appear within {}s", timeout.as_secs())]
    NotFound {
        /// What was waited for (`text "Saved"`, `push button "Save"`).
        what: String,
        /// The limit.
        timeout: Duration,
    },
    /// Coordinates or arguments the desktop refuses.
    #[error("{0}")]
    BadRequest(String),
    /// A desktop command failed as the driver reported it.
    #[error("desktop command {op} failed: {message}")]
    Command {
        /// The command.
        op: &'static str,
        /// The driver's message.
        message: String,
    },
    /// Local I/O (temp dirs, files, the driver's pipes).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl DesktopError {
    /// Whether trying the same thing again may succeed without changing the input.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            DesktopError::Crashed
                | DesktopError::Timeout { .. }
                | DesktopError::NotFound { .. }
                | DesktopError::NoWindow { .. }
                | DesktopError::Command { .. }
                | DesktopError::Start { .. }
        )
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        DesktopError::Io {
            what: what.into(),
            source,
        }
    }
}
