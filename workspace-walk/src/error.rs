//! What a walk of a workspace can run into: an I/O failure, or an entry no snapshot can hold.

use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::SnapshotPathError;

#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("i/o on '{}': {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `path` is relative to the workspace root (`/`-separated; shown lossily when not UTF-8).
    #[error("refusing '{path}': {reason}")]
    Refused { path: String, reason: Refusal },
}

/// Why a path can't go into a snapshot (or a workspace upload).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("symlink points outside the workspace (to '{target}')")]
    SymlinkOutside { target: String },
    #[error("symlink is dangling (to '{target}')")]
    DanglingSymlink { target: String },
    #[error("symlink points to a directory; only file symlinks are stored")]
    SymlinkToDirectory,
    /// A fifo, socket or device, or a symlink to one (`tree_walk::special_kind` names it).
    #[error("not a regular file (device, fifo or socket)")]
    SpecialFile,
    /// Over a size limit (the freezer's; the walk itself has none).
    #[error("file is {size} bytes, over the {limit} byte limit")]
    FileTooLarge { size: u64, limit: u64 },
    #[error("name is not valid UTF-8")]
    NonUtf8Name,
    #[error("invalid path: {0}")]
    InvalidPath(SnapshotPathError),
}

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> WalkError {
    WalkError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn refused(path: impl Into<String>, reason: Refusal) -> WalkError {
    WalkError::Refused {
        path: path.into(),
        reason,
    }
}
