//! The one error type of this crate. Functions return `anyhow::Result` for convenience in tests;
//! the underlying error is always a [`SupportError`], so callers can `downcast_ref` and match on
//! the variant instead of the message text.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum SupportError {
    /// A third-party server binary (nats-server, redis-server, llama-server) is not installed.
    #[error("{name} not found (checked ${env_var}, {cache_path}, PATH); {hint}")]
    BinaryNotFound {
        name: String,
        env_var: String,
        cache_path: PathBuf,
        hint: String,
    },
    /// A workspace binary has not been built by cargo yet.
    #[error("{name} not found in {dir}; run `cargo build --workspace --bins` first")]
    BinaryNotBuilt { name: String, dir: PathBuf },
    #[error("failed to spawn {name}: {source}")]
    Spawn {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// The process exited while we were waiting for it to become ready.
    #[error("{name} exited before becoming ready ({status}); log tail:\n{log_tail}")]
    ExitedEarly {
        name: String,
        status: String,
        log_tail: String,
    },
    /// The process kept running but never became ready.
    #[error("{name} not ready within {timeout:?}; log tail:\n{log_tail}")]
    NotReady {
        name: String,
        timeout: Duration,
        log_tail: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl SupportError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SupportError::Io {
            context: context.into(),
            source,
        }
    }
}
