//! What can go wrong with snapshots: [`SnapshotError`] (the store's one error type), why a path
//! is refused ([`Refusal`], the workspace walk's), and the small helpers that map object-store
//! failures onto it.

use std::time::Duration;

use loopgate_protocol::snapshot::{is_sha256_hex, SnapshotPathError};
pub use loopgate_workspace_walk::Refusal;
use loopgate_workspace_walk::WalkError;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Stored content does not match its digest, or a blob the manifest names is missing.
    /// The auditor reports this as an integrity violation.
    #[error("integrity violation at '{path}': {reason}")]
    Integrity { path: String, reason: String },
    #[error("snapshot '{id}' not found")]
    ManifestNotFound { id: String },
    #[error("blob '{sha256}' not found")]
    BlobNotFound { sha256: String },
    #[error("'{0}' is not a sha256 hex digest")]
    InvalidDigest(String),
    #[error("refusing to snapshot '{path}': {reason}")]
    Refused { path: String, reason: Refusal },
    #[error("workspace is over the {limit} byte snapshot limit")]
    TotalTooLarge { limit: u64 },
    #[error("invalid manifest: {0}")]
    InvalidManifest(SnapshotPathError),
    #[error("'{path}' changed while it was being frozen")]
    ChangedDuringFreeze { path: String },
    #[error("refusing to write '{path}': {reason}")]
    UnsafeDestination { path: String, reason: String },
    #[error("i/o on '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("object store {op} failed: {reason}")]
    Store { op: &'static str, reason: String },
    #[error("object store {op} timed out after {after:?}")]
    Timeout { op: &'static str, after: Duration },
    /// An object's recorded size is over what a reader takes into memory: refused before any
    /// byte of it is read (object metadata is written by executors and not trusted). Also a
    /// compressed manifest object that decodes to more than that (`size` is then the bytes
    /// decoded when the decoder was stopped: the cap plus one).
    #[error("object '{object}' is {size} bytes or more, over the {limit} bytes a reader accepts")]
    ObjectTooLarge {
        object: String,
        size: u64,
        limit: u64,
    },
    /// A manifest lists more entries than `[snapshot] max_manifest_entries`: refused as soon as
    /// its index or the pages read so far say so, before the rest is fetched.
    #[error(
        "snapshot '{id}' lists more than {limit} entries ([snapshot] max_manifest_entries): {detail}"
    )]
    TooManyEntries {
        id: String,
        limit: u64,
        detail: String,
    },
    /// A manifest's files add up to more than `[snapshot] max_tree_bytes`: refused before
    /// anything of it is written to disk.
    #[error("snapshot '{id}' holds more than {limit} bytes of files ([snapshot] max_tree_bytes)")]
    TreeTooLarge { id: String, limit: u64 },
}

impl SnapshotError {
    /// Whether trying the same operation again may succeed: the store was unreachable or slow.
    /// Content problems (integrity, refusals, missing objects) stay what they are.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            SnapshotError::Store { .. } | SnapshotError::Timeout { .. } | SnapshotError::Io { .. }
        )
    }

    /// For a snapshot refused by a reader's caps (an object recorded too large, too many
    /// entries, too many bytes): the stable `reason` its warning and refusal counters carry.
    pub fn over_limit_reason(&self) -> Option<&'static str> {
        match self {
            SnapshotError::ObjectTooLarge { .. } => Some("snapshot_object_too_large"),
            SnapshotError::TooManyEntries { .. } => Some("snapshot_too_many_entries"),
            SnapshotError::TreeTooLarge { .. } => Some("snapshot_tree_too_large"),
            _ => None,
        }
    }
}

impl From<WalkError> for SnapshotError {
    fn from(err: WalkError) -> SnapshotError {
        match err {
            WalkError::Io { path, source } => SnapshotError::Io {
                path: path.display().to_string(),
                source,
            },
            WalkError::Refused { path, reason } => SnapshotError::Refused { path, reason },
        }
    }
}

pub(crate) fn check_digest(digest: &str) -> Result<(), SnapshotError> {
    if is_sha256_hex(digest) {
        Ok(())
    } else {
        Err(SnapshotError::InvalidDigest(digest.to_string()))
    }
}

pub(crate) fn store_error(op: &'static str, err: impl std::fmt::Display) -> SnapshotError {
    SnapshotError::Store {
        op,
        reason: err.to_string(),
    }
}

pub(crate) async fn bounded<T, E: std::fmt::Display>(
    op: &'static str,
    after: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, SnapshotError> {
    match tokio::time::timeout(after, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(store_error(op, err)),
        Err(_) => Err(SnapshotError::Timeout { op, after }),
    }
}

/// Log a refusal by a reader's caps at warn on the `loopgate::security` target, with its
/// stable `reason` (a security event: the snapshot bucket is written by executors), and hand
/// it back. The daemons count it (`loopgate.security.refused_messages`).
pub(crate) fn over_limit(err: SnapshotError) -> SnapshotError {
    if let Some(reason) = err.over_limit_reason() {
        tracing::warn!(
            target: "loopgate::security",
            security_event = "snapshot_refused",
            reason,
            error = %err,
            "snapshot refused: over a reader's limit"
        );
    }
    err
}
