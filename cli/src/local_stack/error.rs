//! What can go wrong bringing the local stack up or keeping it running.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error("{name} not found (looked in {looked_in}); run scripts/install-deps.sh services")]
    ServerNotFound { name: String, looked_in: String },
    #[error("{name} not found in {dir} (build it with `cargo build --workspace`, or set LOOPGATE_BIN_DIR)")]
    DaemonNotFound { name: String, dir: PathBuf },
    #[error("{what} port {addr} is already in use (is another `loopgate up` running? pick another with --{flag})")]
    PortInUse {
        what: &'static str,
        addr: SocketAddr,
        flag: &'static str,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("cannot render the config files: {0}")]
    Config(String),
    #[error("cannot start {name} ({}): {source}", program.display())]
    Spawn {
        name: String,
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{name} was not ready within {}s; last lines of {}:\n{log_tail}", timeout.as_secs(), log_path.display())]
    NotReady {
        name: String,
        timeout: Duration,
        log_path: PathBuf,
        log_tail: String,
    },
    #[error("{name} exited unexpectedly ({status}); last lines of {}:\n{log_tail}", log_path.display())]
    ChildExited {
        name: String,
        status: String,
        log_path: PathBuf,
        log_tail: String,
    },
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StackError {
    let context = context.into();
    move |source| StackError::Io { context, source }
}
