//! What can go wrong reading the user's git repository (`submit --repo`) or writing the
//! verified result into it (`apply`).

use std::path::PathBuf;

/// What kind of failure a [`RepoError`] is, for callers that match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoErrorKind {
    /// The repository, a revision or the start commit cannot be found.
    NotFound,
    /// The tree holds something a snapshot can't (submodule, LFS pointer, outside symlink, ...).
    Unsupported,
    /// The branch or patch file would overwrite something.
    Exists,
    /// A bad argument (branch name, `--ref` with `--include-dirty`).
    Invalid,
    /// libgit2 or the file system failed.
    Git,
}

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("{} is not a git repository (or cannot be opened): {detail}", path.display())]
    NotARepository { path: PathBuf, detail: String },
    #[error("'{rev}' does not name a commit in {}: {detail}", path.display())]
    NoSuchRevision {
        path: PathBuf,
        rev: String,
        detail: String,
    },
    #[error("the run's start commit {commit} is not in the repository at {} (was it rebased away, or is this another clone? fetch it, then run apply again)", path.display())]
    StartCommitGone { path: PathBuf, commit: String },
    #[error("run {0} did not start from a git repository (submit --repo PATH): there is no commit to apply on; `loopgate checkout {0} DIR` gets its files")]
    NoOrigin(String),
    #[error("the start commit {commit} has tree {actual}, the run recorded tree {recorded}")]
    TreeMismatch {
        commit: String,
        actual: String,
        recorded: String,
    },
    #[error("'{path}' is a git submodule: submodules are not supported (the run would start without its files); submit a repository without them, or upload a directory with --workspace")]
    Submodule { path: String },
    #[error("'{path}' is a Git LFS pointer, not the file's content: LFS files are not supported (run `git lfs pull` and submit a directory with --workspace, or untrack it from LFS)")]
    LfsPointer { path: String },
    #[error("'{path}' is a symlink to '{target}', which leaves the repository's tree")]
    SymlinkOutside { path: String, target: String },
    #[error("'{path}' is a symlink to '{target}', which is not a file in the tree (dangling, a directory, or a chain too long)")]
    SymlinkUnresolved { path: String, target: String },
    #[error("'{path}' has a name a snapshot can't hold: {problem}")]
    BadPath { path: String, problem: String },
    #[error("the tree is larger than {limit} bytes (reached {total} at '{path}')")]
    TooLarge {
        path: String,
        total: u64,
        limit: u64,
    },
    #[error("--include-dirty reads the working tree, which is checked out at HEAD: it cannot be combined with --ref {rev} (a commit other than HEAD)")]
    DirtyNeedsHead { rev: String },
    #[error("the repository at {} is bare: --include-dirty needs a working tree", path.display())]
    Bare { path: PathBuf },
    #[error("'{0}' is not a valid branch name")]
    BadBranchName(String),
    #[error("branch '{0}' exists already: apply never moves a branch (name another with --branch, or delete it)")]
    BranchExists(String),
    #[error("{} exists already: apply never overwrites a file", .0.display())]
    PatchExists(PathBuf),
    #[error("the run's final snapshot has the start commit's tree: there is nothing to apply")]
    NothingToApply,
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RepoError {
    pub fn kind(&self) -> RepoErrorKind {
        match self {
            RepoError::NotARepository { .. }
            | RepoError::NoOrigin(_)
            | RepoError::NoSuchRevision { .. }
            | RepoError::StartCommitGone { .. }
            | RepoError::TreeMismatch { .. } => RepoErrorKind::NotFound,
            RepoError::Submodule { .. }
            | RepoError::LfsPointer { .. }
            | RepoError::SymlinkOutside { .. }
            | RepoError::SymlinkUnresolved { .. }
            | RepoError::BadPath { .. }
            | RepoError::TooLarge { .. }
            | RepoError::NothingToApply => RepoErrorKind::Unsupported,
            RepoError::BranchExists(_) | RepoError::PatchExists(_) => RepoErrorKind::Exists,
            RepoError::DirtyNeedsHead { .. }
            | RepoError::Bare { .. }
            | RepoError::BadBranchName(_) => RepoErrorKind::Invalid,
            RepoError::Git(_) | RepoError::Write { .. } => RepoErrorKind::Git,
        }
    }

    /// Nothing here gets better by trying again: the repository must change first.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
