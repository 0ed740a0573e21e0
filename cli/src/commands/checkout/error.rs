//! What can go wrong fetching snapshots (`checkout`, `diff`).

use std::path::PathBuf;

use crate::api_client::ApiError;

/// Errors of fetching snapshots (`checkout`, `diff`).
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("run {run} has no round {round} (it has {count})")]
    NoSuchRound {
        run: String,
        round: u32,
        count: usize,
    },
    #[error("round {round} of run {run} produced no candidate snapshot")]
    NoCandidate { run: String, round: u32 },
    #[error("run {0} has no round with a candidate snapshot yet")]
    NoRounds(String),
    #[error("the server's round list is malformed: {0}")]
    BadRounds(String),
    #[error("{0} exists and is not empty (checkout needs an empty or new directory)")]
    DirNotEmpty(PathBuf),
    #[error("{0} exists and is not a directory")]
    NotADirectory(PathBuf),
    #[error("run {0} has no snapshot yet")]
    NoSnapshot(String),
    #[error("'{0}' is not a snapshot id (64 lowercase hex digits)")]
    BadSnapshotId(String),
    #[error("the manifest of snapshot {snapshot} is invalid: {problem}")]
    InvalidManifest { snapshot: String, problem: String },
    #[error("the manifest served for snapshot {snapshot} hashes to {actual}: refusing it")]
    ManifestMismatch { snapshot: String, actual: String },
    #[error("cannot download the content of '{path}': {source}")]
    Blob { path: String, source: ApiError },
    #[error("'{path}': content hashes to {actual}, manifest says {expected}: refusing it ({} is incomplete)", dir.display())]
    BlobMismatch {
        path: String,
        expected: String,
        actual: String,
        dir: PathBuf,
    },
    #[error("cannot write '{path}': {source} ({} is incomplete)", dir.display())]
    Write {
        path: String,
        dir: PathBuf,
        source: std::io::Error,
    },
}
