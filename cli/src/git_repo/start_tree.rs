//! `loopgate submit --repo PATH [--ref REV] [--include-dirty]`: the starting workspace read
//! from a commit's tree with libgit2 (never from the working directory, so untracked and
//! ignored files, and anything outside the tree, are never read), plus with
//! `--include-dirty` the tracked files modified in the working tree, read through git's clean
//! filters (`.gitattributes` eol/text) into an in-memory object store so nothing is written
//! to the repository.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use git2::{
    Commit, ObjectType, Repository, Status, StatusOptions, Tree, TreeWalkMode, TreeWalkResult,
};
use loopgate_common::state::RepoOrigin;

use super::error::RepoError;
use super::tree_select::{
    select_files, SelectedFile, TreeItem, MODE_EXECUTABLE, MODE_SUBMODULE, MODE_SYMLINK,
};

/// The starting workspace and where it came from.
#[derive(Debug)]
pub struct StartTree {
    pub origin: RepoOrigin,
    pub files: Vec<SelectedFile>,
    /// Tracked paths whose working-tree state was taken (`--include-dirty`), sorted.
    pub dirty: Vec<String>,
}

/// Opens the repository at (or above) `path`.
pub fn open_repository(path: &Path) -> Result<Repository, RepoError> {
    Repository::discover(path).map_err(|e| RepoError::NotARepository {
        path: path.to_path_buf(),
        detail: e.message().to_string(),
    })
}

/// Reads the tree of `rev` (default `HEAD`) of the repository at `path`.
pub fn read_start(
    path: &Path,
    rev: Option<&str>,
    include_dirty: bool,
    max_total_bytes: u64,
) -> Result<StartTree, RepoError> {
    let repo = open_repository(path)?;
    let rev_text = rev.unwrap_or("HEAD");
    let no_commit = |e: git2::Error| RepoError::NoSuchRevision {
        path: path.to_path_buf(),
        rev: rev_text.to_string(),
        detail: e.message().to_string(),
    };
    let commit = repo
        .revparse_single(rev_text)
        .and_then(|o| o.peel_to_commit())
        .map_err(no_commit)?;
    let tree = commit.tree()?;
    let mut items = tree_items(&repo, &tree)?;
    let dirty = if include_dirty {
        overlay_dirty(&repo, path, &commit, rev_text, &mut items)?
    } else {
        Vec::new()
    };
    let files = select_files(&items, max_total_bytes)?;
    let mut origin = RepoOrigin {
        commit: commit.id().to_string(),
        tree: tree.id().to_string(),
        ref_name: ref_name(&repo, rev),
        dirty: !dirty.is_empty(),
    };
    if origin.problem().is_some() {
        origin.ref_name = None;
    }
    Ok(StartTree {
        origin,
        files,
        dirty,
    })
}

/// The name the user gave, or for `HEAD` the branch it is on (`HEAD` when detached).
fn ref_name(repo: &Repository, rev: Option<&str>) -> Option<String> {
    match rev {
        Some(rev) => Some(rev.to_string()),
        None => repo
            .head()
            .ok()
            .and_then(|head| head.name().ok().map(str::to_string))
            .filter(|name| name != "HEAD")
            .or_else(|| Some("HEAD".to_string())),
    }
}

/// Every entry of `tree` below the root, by path: blobs read, symlinks with their target,
/// submodules marked.
pub fn tree_items(
    repo: &Repository,
    tree: &Tree<'_>,
) -> Result<BTreeMap<String, TreeItem>, RepoError> {
    let mut items = BTreeMap::new();
    let mut failure: Option<RepoError> = None;
    tree.walk(TreeWalkMode::PreOrder, |root, entry| {
        if entry.kind() == Some(ObjectType::Tree) {
            return TreeWalkResult::Ok;
        }
        let path = match std::str::from_utf8(entry.name_bytes()) {
            Ok(name) => format!("{root}{name}"),
            Err(_) => {
                failure = Some(RepoError::BadPath {
                    path: format!("{root}{}", String::from_utf8_lossy(entry.name_bytes())),
                    problem: "the name is not valid UTF-8".into(),
                });
                return TreeWalkResult::Abort;
            }
        };
        let item = match entry.filemode() {
            MODE_SUBMODULE => Ok(TreeItem::Submodule),
            mode => repo.find_blob(entry.id()).map(|blob| {
                let content = blob.content().to_vec();
                if mode == MODE_SYMLINK {
                    TreeItem::Symlink { target: content }
                } else {
                    TreeItem::File {
                        executable: mode == MODE_EXECUTABLE,
                        content,
                    }
                }
            }),
        };
        match item {
            Ok(item) => {
                items.insert(path, item);
                TreeWalkResult::Ok
            }
            Err(e) => {
                failure = Some(RepoError::Git(e));
                TreeWalkResult::Abort
            }
        }
    })
    .or_else(|e| if failure.is_some() { Ok(()) } else { Err(e) })?;
    match failure {
        Some(e) => Err(e),
        None => Ok(items),
    }
}

/// Replaces tracked entries with their working-tree state (modified, type-changed, staged
/// new, deleted); untracked and ignored files are not looked at. Returns the paths taken.
fn overlay_dirty(
    repo: &Repository,
    path: &Path,
    commit: &Commit<'_>,
    rev: &str,
    items: &mut BTreeMap<String, TreeItem>,
) -> Result<Vec<String>, RepoError> {
    let workdir = repo.workdir().ok_or_else(|| RepoError::Bare {
        path: path.to_path_buf(),
    })?;
    let head = repo.head().and_then(|h| h.peel_to_commit())?;
    if head.id() != commit.id() {
        return Err(RepoError::DirtyNeedsHead {
            rev: rev.to_string(),
        });
    }
    let mut options = StatusOptions::new();
    options
        .include_untracked(false)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = repo.statuses(Some(&mut options))?;
    // Working-tree content goes through git's clean filters into memory, never to disk.
    let odb = repo.odb()?;
    let memory = odb.add_new_mempack_backend(1000)?;
    let mut taken = Vec::new();
    for entry in statuses.iter() {
        let status = entry.status();
        if status.is_empty() || status.intersects(Status::WT_NEW | Status::IGNORED) {
            continue;
        }
        let rel = String::from_utf8_lossy(entry.path_bytes()).into_owned();
        let abs = workdir.join(&rel);
        match std::fs::symlink_metadata(&abs) {
            Err(_) => {
                items.remove(&rel);
            }
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&abs).map_err(|source| RepoError::Write {
                    path: abs.clone(),
                    source,
                })?;
                let target = target.to_string_lossy().into_owned().into_bytes();
                items.insert(rel.clone(), TreeItem::Symlink { target });
            }
            Ok(meta) => {
                let id = repo.blob_path(&abs)?;
                let content = repo.find_blob(id)?.content().to_vec();
                let executable = meta.permissions().mode() & 0o111 != 0;
                items.insert(
                    rel.clone(),
                    TreeItem::File {
                        executable,
                        content,
                    },
                );
            }
        }
        taken.push(rel);
    }
    memory.reset()?;
    taken.sort();
    taken.dedup();
    Ok(taken)
}
