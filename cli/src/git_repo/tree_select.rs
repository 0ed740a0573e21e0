//! Which entries of a git tree become the starting workspace, pure: regular files keep their
//! executable bit (0o755, else 0o644), a symlink inside the tree is uploaded as the content of
//! the file it points to (as a directory upload is), and submodules, LFS pointers, symlinks
//! leaving the tree and names a snapshot can't hold are refused by name.

use std::collections::BTreeMap;

use loopgate_protocol::snapshot::validate_relative_path;

use super::error::RepoError;

/// git's file modes.
pub const MODE_FILE: i32 = 0o100644;
pub const MODE_EXECUTABLE: i32 = 0o100755;
pub const MODE_SYMLINK: i32 = 0o120000;
pub const MODE_SUBMODULE: i32 = 0o160000;

/// Links followed from one symlink before giving up.
const MAX_LINK_HOPS: usize = 8;

/// The first line of a Git LFS pointer file.
const LFS_POINTER_START: &[u8] = b"version https://git-lfs.github.com/spec/v1\n";
/// LFS pointers are small; a larger file starting with the same line is content.
const LFS_POINTER_MAX_BYTES: usize = 1024;

/// One entry of a tree, as read from git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeItem {
    /// A blob with its git mode (`MODE_FILE` or `MODE_EXECUTABLE`).
    File { executable: bool, content: Vec<u8> },
    /// A symlink: its target as stored.
    Symlink { target: Vec<u8> },
    /// A gitlink (a submodule's commit).
    Submodule,
}

/// One file of the starting workspace: path, snapshot mode, content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedFile {
    pub path: String,
    pub mode: u32,
    pub content: Vec<u8>,
}

/// Whether `content` is a Git LFS pointer rather than a file's content.
pub fn is_lfs_pointer(content: &[u8]) -> bool {
    content.len() <= LFS_POINTER_MAX_BYTES && content.starts_with(LFS_POINTER_START)
}

/// The tree path a symlink at `link` pointing to `target` names, or `None` when it leaves
/// the tree (absolute, or climbing above the root).
pub fn resolve_link(link: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}

/// The starting workspace from a tree's entries (path → item), in path order; refuses the
/// first entry a snapshot can't hold, and a total over `max_total_bytes`.
pub fn select_files(
    items: &BTreeMap<String, TreeItem>,
    max_total_bytes: u64,
) -> Result<Vec<SelectedFile>, RepoError> {
    let mut files = Vec::with_capacity(items.len());
    let mut total: u64 = 0;
    for (path, item) in items {
        validate_relative_path(path).map_err(|e| RepoError::BadPath {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        let (executable, content) = match item {
            TreeItem::Submodule => return Err(RepoError::Submodule { path: path.clone() }),
            TreeItem::File {
                executable,
                content,
            } => (*executable, content),
            TreeItem::Symlink { .. } => follow(items, path)?,
        };
        if is_lfs_pointer(content) {
            return Err(RepoError::LfsPointer { path: path.clone() });
        }
        total = total.saturating_add(content.len() as u64);
        if total > max_total_bytes {
            return Err(RepoError::TooLarge {
                path: path.clone(),
                total,
                limit: max_total_bytes,
            });
        }
        files.push(SelectedFile {
            path: path.clone(),
            mode: if executable { 0o755 } else { 0o644 },
            content: content.clone(),
        });
    }
    Ok(files)
}

/// The file a symlink at `path` ends at, through at most `MAX_LINK_HOPS` links.
fn follow<'a>(
    items: &'a BTreeMap<String, TreeItem>,
    path: &str,
) -> Result<(bool, &'a Vec<u8>), RepoError> {
    let mut at = path.to_string();
    for _ in 0..MAX_LINK_HOPS {
        let Some(TreeItem::Symlink { target }) = items.get(&at) else {
            break;
        };
        let shown = String::from_utf8_lossy(target).into_owned();
        let outside = || RepoError::SymlinkOutside {
            path: path.to_string(),
            target: shown.clone(),
        };
        let text = std::str::from_utf8(target).map_err(|_| outside())?;
        at = resolve_link(&at, text).ok_or_else(outside)?;
        if let Some(TreeItem::File {
            executable,
            content,
        }) = items.get(&at)
        {
            return Ok((*executable, content));
        }
    }
    let target = match items.get(path) {
        Some(TreeItem::Symlink { target }) => String::from_utf8_lossy(target).into_owned(),
        _ => String::new(),
    };
    Err(RepoError::SymlinkUnresolved {
        path: path.to_string(),
        target,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn file(content: &str) -> TreeItem {
        TreeItem::File {
            executable: false,
            content: content.as_bytes().to_vec(),
        }
    }

    fn link(target: &str) -> TreeItem {
        TreeItem::Symlink {
            target: target.as_bytes().to_vec(),
        }
    }

    fn tree(items: &[(&str, TreeItem)]) -> BTreeMap<String, TreeItem> {
        items
            .iter()
            .map(|(p, i)| (p.to_string(), i.clone()))
            .collect()
    }

    #[test]
    fn links_resolve_inside_the_tree_only() {
        let cases = [
            ("a", "b", Some("b")),
            ("d/a", "b", Some("d/b")),
            ("d/a", "../b", Some("b")),
            ("d/e/a", "./../f/./b", Some("d/f/b")),
            ("a", "../b", None),
            ("d/a", "../../b", None),
            ("a", "/etc/passwd", None),
        ];
        for (link, target, want) in cases {
            assert_eq!(
                resolve_link(link, target).as_deref(),
                want,
                "{link} -> {target}"
            );
        }
    }

    #[test]
    fn files_keep_modes_and_links_carry_their_target() {
        let items = tree(&[
            (
                "bin/run.sh",
                TreeItem::File {
                    executable: true,
                    content: b"#!/bin/sh\n".to_vec(),
                },
            ),
            ("docs/alias.md", link("../README.md")),
            ("README.md", file("# hi\n")),
            ("twice", link("docs/alias.md")),
        ]);
        let files = select_files(&items, 1 << 20).unwrap();
        let got: Vec<(&str, u32, &[u8])> = files
            .iter()
            .map(|f| (f.path.as_str(), f.mode, f.content.as_slice()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("README.md", 0o644, &b"# hi\n"[..]),
                ("bin/run.sh", 0o755, &b"#!/bin/sh\n"[..]),
                ("docs/alias.md", 0o644, &b"# hi\n"[..]),
                ("twice", 0o644, &b"# hi\n"[..]),
            ]
        );
    }

    #[test]
    fn what_a_snapshot_cannot_hold_is_refused_by_name() {
        let lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 12\n";
        type Expect = fn(&RepoError) -> bool;
        let cases: Vec<(Vec<(&str, TreeItem)>, Expect)> = vec![
            (
                vec![("vendor/lib", TreeItem::Submodule)],
                |e| matches!(e, RepoError::Submodule { path } if path == "vendor/lib"),
            ),
            (
                vec![("big.bin", file(lfs))],
                |e| matches!(e, RepoError::LfsPointer { path } if path == "big.bin"),
            ),
            (
                vec![("up", link("../secret"))],
                |e| matches!(e, RepoError::SymlinkOutside { path, .. } if path == "up"),
            ),
            (
                vec![("abs", link("/etc/passwd"))],
                |e| matches!(e, RepoError::SymlinkOutside { path, .. } if path == "abs"),
            ),
            (
                vec![("dangling", link("nowhere"))],
                |e| matches!(e, RepoError::SymlinkUnresolved { path, .. } if path == "dangling"),
            ),
            (
                vec![("a", link("b")), ("b", link("a"))],
                |e| matches!(e, RepoError::SymlinkUnresolved { path, .. } if path == "a"),
            ),
            (
                vec![("a\\b", file("x"))],
                |e| matches!(e, RepoError::BadPath { path, .. } if path == "a\\b"),
            ),
        ];
        for (items, expect) in cases {
            let err = select_files(&tree(&items), 1 << 20).unwrap_err();
            assert!(expect(&err), "{err:?}");
        }
        // An LFS-looking first line on a large file is content.
        let mut large = lfs.as_bytes().to_vec();
        large.resize(4096, b'x');
        let items = tree(&[(
            "data",
            TreeItem::File {
                executable: false,
                content: large,
            },
        )]);
        assert!(select_files(&items, 1 << 20).is_ok());
        let err = select_files(&tree(&[("a", file("12345")), ("b", file("678"))]), 7).unwrap_err();
        assert!(
            matches!(err, RepoError::TooLarge { ref path, .. } if path == "b"),
            "{err:?}"
        );
    }
}
