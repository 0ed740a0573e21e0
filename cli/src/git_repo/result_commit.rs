//! `loopgate apply`'s write: the verified final snapshot as one commit whose parent is the
//! run's start commit, on a new branch (never moved if it exists) or as a `git format-patch`
//! mbox file (its objects written to an in-memory object store only). The working tree, the
//! index, HEAD and every existing ref are left alone.
//!
//! A symlink of the start commit stays a symlink while the file at its path still has the
//! content of the file it points to (the snapshot holds the target's content there, as the
//! upload did); content is stored as `git add` would (`eol`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use git2::{
    AttrCheckFlags, AttrValue, Commit, Email, EmailCreateOptions, Index, IndexEntry, IndexTime,
    Oid, Repository, Signature,
};
use loopgate_common::state::RepoOrigin;
use loopgate_protocol::snapshot::sha256_hex;

use super::eol::{has_crlf, to_stored, TextAttr};
use super::error::RepoError;
use super::start_tree::{open_repository, tree_items};
use super::tree_select::{resolve_link, TreeItem, MODE_EXECUTABLE, MODE_FILE, MODE_SYMLINK};

/// One file of the verified final snapshot (already re-hashed against its manifest entry).
#[derive(Debug, Clone, Copy)]
pub struct FinalFile<'a> {
    pub path: &'a str,
    pub mode: u32,
    pub content: &'a [u8],
}

/// Where the commit goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultTarget {
    /// A new branch (`refs/heads/NAME`).
    Branch(String),
    /// An mbox file, as `git format-patch` writes.
    Patch(PathBuf),
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub commit: String,
    pub tree: String,
    /// Paths added, changed or removed.
    pub changed: usize,
}

/// Writes `files` as one commit on `origin.commit` with `message`, to `target`.
pub fn write_result(
    repo_path: &Path,
    origin: &RepoOrigin,
    files: &[FinalFile<'_>],
    message: &str,
    target: &ResultTarget,
) -> Result<Written, RepoError> {
    let repo = open_repository(repo_path)?;
    let refname = match target {
        ResultTarget::Branch(name) => {
            if !git2::Branch::name_is_valid(name).unwrap_or(false) {
                return Err(RepoError::BadBranchName(name.clone()));
            }
            let refname = format!("refs/heads/{name}");
            if repo.find_reference(&refname).is_ok() {
                return Err(RepoError::BranchExists(name.clone()));
            }
            Some(refname)
        }
        ResultTarget::Patch(path) => {
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(RepoError::PatchExists(path.clone()));
            }
            None
        }
    };
    let parent = start_commit(&repo, repo_path, origin)?;
    // A patch leaves no object behind: everything goes to memory.
    let odb = repo.odb()?;
    let memory = match target {
        ResultTarget::Patch(_) => Some(odb.add_new_mempack_backend(1000)?),
        ResultTarget::Branch(_) => None,
    };
    let tree_id = build_tree(&repo, &parent, files)?;
    let parent_tree = parent.tree()?;
    if tree_id == parent_tree.id() {
        return Err(RepoError::NothingToApply);
    }
    let tree = repo.find_tree(tree_id)?;
    let changed = repo
        .diff_tree_to_tree(Some(&parent_tree), Some(&tree), None)?
        .deltas()
        .len();
    let signature = repo
        .signature()
        .or_else(|_| Signature::now("loopgate", "loopgate@localhost"))?;
    let commit_id = repo.commit(None, &signature, &signature, message, &tree, &[&parent])?;
    match (target, refname) {
        (ResultTarget::Branch(name), Some(refname)) => {
            repo.reference(&refname, commit_id, false, "loopgate apply")
                .map_err(|e| match e.code() {
                    git2::ErrorCode::Exists => RepoError::BranchExists(name.clone()),
                    _ => RepoError::Git(e),
                })?;
        }
        (ResultTarget::Patch(path), _) => {
            let commit = repo.find_commit(commit_id)?;
            let email = Email::from_commit(&commit, &mut EmailCreateOptions::new())?;
            write_new(path, email.as_slice())?;
        }
        (ResultTarget::Branch(_), None) => {}
    }
    if let Some(memory) = memory {
        memory.reset()?;
    }
    Ok(Written {
        commit: commit_id.to_string(),
        tree: tree_id.to_string(),
        changed,
    })
}

/// The recorded start commit, which must still be in the repository with its recorded tree.
fn start_commit<'r>(
    repo: &'r Repository,
    repo_path: &Path,
    origin: &RepoOrigin,
) -> Result<Commit<'r>, RepoError> {
    let gone = || RepoError::StartCommitGone {
        path: repo_path.to_path_buf(),
        commit: origin.commit.clone(),
    };
    let id = Oid::from_str(&origin.commit).map_err(|_| gone())?;
    let commit = repo.find_commit(id).map_err(|_| gone())?;
    let tree = commit.tree_id().to_string();
    if tree != origin.tree {
        return Err(RepoError::TreeMismatch {
            commit: origin.commit.clone(),
            actual: tree,
            recorded: origin.tree.clone(),
        });
    }
    Ok(commit)
}

/// The final snapshot as a tree, in an index that lives in memory only.
fn build_tree(
    repo: &Repository,
    parent: &Commit<'_>,
    files: &[FinalFile<'_>],
) -> Result<Oid, RepoError> {
    let start = tree_items(repo, &parent.tree()?)?;
    let parent_tree = parent.tree()?;
    let digests: BTreeMap<&str, String> = files
        .iter()
        .map(|f| (f.path, sha256_hex(f.content)))
        .collect();
    let mut index = Index::new()?;
    for file in files {
        let kept_link = match start.get(file.path) {
            Some(TreeItem::Symlink { target }) => std::str::from_utf8(target)
                .ok()
                .and_then(|t| resolve_link(file.path, t))
                .filter(|to| digests.get(to.as_str()) == digests.get(file.path))
                .and_then(|_| parent_tree.get_path(Path::new(file.path)).ok())
                .map(|entry| entry.id()),
            _ => None,
        };
        let (mode, id) = match kept_link {
            Some(id) => (MODE_SYMLINK, id),
            None => {
                let start_had_crlf = matches!(
                    start.get(file.path),
                    Some(TreeItem::File { content, .. }) if has_crlf(content)
                );
                let stored = to_stored(text_attr(repo, file.path), start_had_crlf, file.content);
                let mode = if file.mode & 0o111 != 0 {
                    MODE_EXECUTABLE
                } else {
                    MODE_FILE
                };
                (mode, repo.blob(&stored)?)
            }
        };
        index.add(&entry(file.path, mode, id))?;
    }
    Ok(index.write_tree_to(repo)?)
}

fn entry(path: &str, mode: i32, id: Oid) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode: mode as u32,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// The path's `text`/`eol` attributes (from the repository's `.gitattributes` files).
fn text_attr(repo: &Repository, path: &str) -> TextAttr {
    let flags = if repo.is_bare() {
        AttrCheckFlags::INDEX_ONLY
    } else {
        AttrCheckFlags::FILE_THEN_INDEX
    };
    let get = |name: &str| {
        repo.get_attr_bytes(Path::new(path), name, flags)
            .ok()
            .flatten()
            .map(|v| AttrValue::from_bytes(Some(v)))
            .unwrap_or(AttrValue::Unspecified)
    };
    match get("text") {
        AttrValue::True => TextAttr::Text,
        AttrValue::False => TextAttr::Binary,
        AttrValue::String("auto") | AttrValue::Bytes(b"auto") => TextAttr::Auto,
        _ => match get("eol") {
            AttrValue::String(_) | AttrValue::Bytes(_) => TextAttr::Text,
            _ => TextAttr::Unspecified,
        },
    }
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), RepoError> {
    let fail = |source| RepoError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => RepoError::PatchExists(path.to_path_buf()),
            _ => fail(e),
        })?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)
}
