//! The CLI's error boundary: every failure a command can report, and the exit code it maps to.

use std::path::PathBuf;

use loopgate_common::task::TaskError;

use crate::api_client::ApiError;
use crate::commands::checkout::CheckoutError;
use crate::exit_status::ExitStatus;
use crate::git_repo::RepoError;
use crate::local_stack::StackError;
use crate::workspace_upload::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{path}: {source}")]
    InvalidTask { path: PathBuf, source: TaskError },
    #[error("cannot read {path}: {source}")]
    ReadInput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {problem}")]
    InvalidFile { path: PathBuf, problem: String },
    #[error("cannot write {path}: {source}")]
    WriteOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error(transparent)]
    Stack(#[from] StackError),
    #[error("{0}")]
    Usage(String),
    /// The RUN argument names no run, or more than one.
    #[error(transparent)]
    RunRef(#[from] crate::run_ref::RunRefError),
    #[error(transparent)]
    Browser(#[from] loopgate_browser::BrowserError),
    #[error(transparent)]
    Desktop(#[from] loopgate_desktop::DesktopError),
    /// stdout was closed (e.g. `loopgate log RUN | head`): stop quietly.
    #[error("stdout was closed")]
    StdoutClosed,
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
}

impl CliError {
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            CliError::Api(api) => api.exit_status(),
            CliError::Checkout(CheckoutError::Blob { source, .. }) => source.exit_status(),
            CliError::Usage(_) => ExitStatus::Usage,
            CliError::RunRef(crate::run_ref::RunRefError::Api(api)) => api.exit_status(),
            CliError::RunRef(_) => ExitStatus::NoSuchRun,
            CliError::InvalidTask { .. }
            | CliError::ReadInput { .. }
            | CliError::InvalidFile { .. }
            | CliError::WriteOutput { .. }
            | CliError::Workspace(_)
            | CliError::Checkout(_)
            | CliError::Repo(_)
            | CliError::Stack(_)
            | CliError::Browser(_)
            | CliError::Desktop(_)
            | CliError::StdoutClosed
            | CliError::Stdout(_) => ExitStatus::Error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_exit_codes() {
        let unreachable = || ApiError::Unreachable {
            server: "http://127.0.0.1:1".into(),
            detail: "connection refused".into(),
        };
        let server = || ApiError::Server {
            status: 404,
            code: "not_found".into(),
            message: "no run r1".into(),
        };
        let cases: Vec<(CliError, u8)> = vec![
            (CliError::Api(unreachable()), 5),
            (CliError::Api(server()), 1),
            (
                CliError::InvalidTask {
                    path: "t.toml".into(),
                    source: TaskError::Invalid {
                        field: "goal".into(),
                        problem: "must not be empty".into(),
                    },
                },
                1,
            ),
            (CliError::Usage("bad".into()), 2),
            (
                CliError::RunRef(crate::run_ref::RunRefError::Unknown {
                    prefix: "0193".into(),
                }),
                7,
            ),
            (
                CliError::RunRef(crate::run_ref::RunRefError::Ambiguous {
                    prefix: "0193".into(),
                    count: 2,
                    shown: "a, b".into(),
                }),
                7,
            ),
            (
                CliError::Checkout(CheckoutError::Blob {
                    path: "a.txt".into(),
                    source: unreachable(),
                }),
                5,
            ),
            (
                CliError::Checkout(CheckoutError::Blob {
                    path: "a.txt".into(),
                    source: server(),
                }),
                1,
            ),
        ];
        for (err, code) in cases {
            assert_eq!(err.exit_status().code(), code, "{err}");
        }
    }
}
