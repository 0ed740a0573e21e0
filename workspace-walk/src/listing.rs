//! A workspace as a snapshot holds it: every regular file under the root, sorted by path, with
//! ignored entries left out and the symlink policy applied. A symlink to a regular file inside
//! the workspace stands for that file's content; one that points outside, dangles, or points to
//! a directory or a special file is refused, as are special files, names that are not UTF-8 and
//! paths a manifest can't hold. The freezer (`loopgate-snapshot`) and `loopgate submit`'s upload
//! (`loopgate-cli`) both read a workspace through this.

use std::fs;
use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::validate_relative_path;

use crate::error::{io_error, refused, Refusal, WalkError};
use crate::ignore::is_ignored;
use crate::tree_walk::{walk, FileStat, Found};

/// One file of the workspace.
#[derive(Debug)]
pub struct ListedFile {
    /// Relative to the root, `/`-separated, valid as a manifest path.
    pub rel: String,
    /// Where its content is read from: the file, or the in-workspace file a symlink resolves to.
    /// Canonical (no symlink on it when it was listed): read it with
    /// [`crate::open_no_symlinks`], so a component swapped for a symlink since is refused.
    pub source: PathBuf,
    /// The `lstat` of a regular file, the `stat` of a symlink's target.
    pub metadata: FileStat,
}

impl ListedFile {
    /// The mode a snapshot stores for it (see [`normalize_mode`]).
    pub fn mode(&self) -> u32 {
        normalize_mode(self.metadata.mode)
    }
}

/// Normalize Unix permission bits to what snapshots store: 0o755 if any execute bit, else 0o644.
pub fn normalize_mode(mode: u32) -> u32 {
    if mode & 0o111 != 0 {
        0o755
    } else {
        0o644
    }
}

/// The walked entries of a workspace, sorted by path; each resolves, in order, to a file or to
/// the reason it is refused (so the first refusal in path order is the one reported).
#[derive(Debug)]
pub struct Listing {
    root: PathBuf,
    found: std::vec::IntoIter<Found>,
}

/// Walk `root` (a directory; canonicalized here) on all cores, leaving out what `ignore`
/// matches (ignore patterns, see `ignore.rs`). Fails on the first I/O error of the walk.
pub fn list_workspace(root: &Path, ignore: &[String]) -> Result<Listing, WalkError> {
    let root = fs::canonicalize(root).map_err(|e| io_error(root, e))?;
    let skip = |rel: &str, is_dir: bool| is_ignored(rel, is_dir, ignore);
    let mut found = walk(&root, &skip)?;
    found.sort_by(|a, b| a.rel().cmp(b.rel()));
    Ok(Listing {
        root,
        found: found.into_iter(),
    })
}

impl Listing {
    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Iterator for Listing {
    type Item = Result<ListedFile, WalkError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.found.next()?;
        Some(resolve(&self.root, item))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.found.size_hint()
    }
}

/// A walked entry as a file to store, or why it can't be stored.
fn resolve(root: &Path, item: Found) -> Result<ListedFile, WalkError> {
    if let Found::NonUtf8 { rel, .. } = &item {
        return Err(refused(rel.as_str(), Refusal::NonUtf8Name));
    }
    validate_relative_path(item.rel()).map_err(|e| refused(item.rel(), Refusal::InvalidPath(e)))?;
    match item {
        Found::File {
            rel,
            path,
            metadata,
        } => Ok(ListedFile {
            rel,
            source: path,
            metadata,
        }),
        Found::Symlink { rel, path } => {
            let (source, metadata) = resolve_symlink(root, &path, &rel)?;
            Ok(ListedFile {
                rel,
                source,
                metadata,
            })
        }
        Found::Special { rel, .. } => Err(refused(rel, Refusal::SpecialFile)),
        Found::NonUtf8 { rel, .. } => Err(refused(rel, Refusal::NonUtf8Name)),
    }
}

/// A symlink stands for the file it points to, if that is a regular file inside `root`.
fn resolve_symlink(root: &Path, link: &Path, rel: &str) -> Result<(PathBuf, FileStat), WalkError> {
    let target = fs::read_link(link)
        .map(|t| t.display().to_string())
        .unwrap_or_default();
    let resolved = match fs::canonicalize(link) {
        Ok(resolved) => resolved,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refused(rel, Refusal::DanglingSymlink { target }))
        }
        Err(e) => return Err(io_error(link, e)),
    };
    if !resolved.starts_with(root) {
        return Err(refused(rel, Refusal::SymlinkOutside { target }));
    }
    let metadata = fs::metadata(&resolved).map_err(|e| io_error(&resolved, e))?;
    if metadata.is_dir() {
        return Err(refused(rel, Refusal::SymlinkToDirectory));
    }
    if !metadata.is_file() {
        return Err(refused(rel, Refusal::SpecialFile));
    }
    Ok((resolved, FileStat::of_std(&metadata)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::ignore::DEFAULT_IGNORES;
    use std::os::unix::fs::PermissionsExt;

    fn defaults() -> Vec<String> {
        DEFAULT_IGNORES.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lists_files_sorted_with_links_resolved_and_ignores_applied() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src/.git")).unwrap();
        fs::write(root.join("src/.git/HEAD"), "x").unwrap();
        fs::write(root.join("src/a.rs"), "a").unwrap();
        fs::write(root.join("b.sh"), "b").unwrap();
        fs::set_permissions(root.join("b.sh"), fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("src/a.rs", root.join("a-link")).unwrap();
        let listed: Vec<ListedFile> = list_workspace(root, &defaults())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let seen: Vec<(&str, u32)> = listed.iter().map(|f| (f.rel.as_str(), f.mode())).collect();
        assert_eq!(
            seen,
            vec![("a-link", 0o644), ("b.sh", 0o755), ("src/a.rs", 0o644)]
        );
        assert!(listed[0].source.ends_with("src/a.rs"));
    }

    #[test]
    fn refusals_name_the_entry_and_say_why() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        let refusals: Vec<(String, Refusal)> = list_workspace(root, &defaults())
            .unwrap()
            .map(|r| match r.unwrap_err() {
                WalkError::Refused { path, reason } => (path, reason),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(refusals.len(), 3);
        assert_eq!(refusals[0].0, "dangling");
        assert!(matches!(refusals[0].1, Refusal::DanglingSymlink { .. }));
        assert!(matches!(refusals[1].1, Refusal::SymlinkOutside { .. }));
        assert_eq!(refusals[2].1, Refusal::SpecialFile);
    }
}
