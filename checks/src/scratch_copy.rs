//! Each acceptance check gets its own copy of what it checks, so a check can write files
//! (tests do) without affecting the next check, the pristine copy the audit diffed, or the
//! executor's live workspace (and so its frozen snapshot). The auditor copies a materialized
//! snapshot ([`copy_tree`]); the executor copies the files its workspace would freeze to
//! ([`copy_files`]), which is exactly the tree the auditor will materialize. Blocking; run it
//! on `spawn_blocking`. A live workspace's files are read without following a symlink anywhere
//! on their path (`loopgate_workspace_walk::open_no_symlinks`): a file or directory the agent
//! swapped for a symlink since the walk is refused, never copied from outside.

use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use loopgate_protocol::snapshot::validate_relative_path;
use loopgate_workspace_walk::{open_no_symlinks, RootDir};

/// One file of a [`copy_files`] copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFile {
    /// Where it goes, relative to the copy's root (a snapshot path: `/`-separated, no `..`).
    pub path: String,
    /// Where its bytes are read from: a canonical path (as the workspace walk gives), opened
    /// following no symlink.
    pub source: PathBuf,
    /// Its permission bits in the copy.
    pub mode: u32,
}

/// Copy directory `from` into `to` (created; must not exist): directories and regular files
/// with their permission bits, read beneath `from` following no symlink. A materialized
/// snapshot holds nothing else; anything else is refused. Returns the bytes copied.
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<u64> {
    let source = RootDir::open(from)?;
    std::fs::create_dir(to)?;
    let mut bytes = 0;
    let mut stack = vec![(PathBuf::new(), to.to_path_buf())];
    while let Some((source_dir, target_dir)) = stack.pop() {
        for entry in source.read_dir(&source_dir)? {
            let entry = entry?;
            let file_type = entry.file_type()?;
            let rel = source_dir.join(entry.file_name());
            let target = target_dir.join(entry.file_name());
            if file_type.is_dir() {
                std::fs::create_dir(&target)?;
                stack.push((rel, target));
            } else if file_type.is_file() {
                let mut file = source.open_file(&rel)?;
                let mode = file.metadata()?.permissions().mode() & 0o777;
                let mut copy = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&target)?;
                bytes += io::copy(&mut file, &mut copy)?;
                copy.set_permissions(std::fs::Permissions::from_mode(mode))?;
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a file or directory", from.join(&rel).display()),
                ));
            }
        }
    }
    Ok(bytes)
}

/// Copy exactly `files` into `to` (created; must not exist), creating parent directories.
/// A path that is not a clean relative path is refused. Returns the bytes copied.
pub fn copy_files(files: &[CopyFile], to: &Path) -> io::Result<u64> {
    std::fs::create_dir(to)?;
    let mut bytes = 0;
    for file in files {
        validate_relative_path(&file.path)
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err.to_string()))?;
        let target = to.join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut source = open_no_symlinks(&file.source)?;
        let mut copy = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(file.mode & 0o777)
            .open(&target)?;
        bytes += io::copy(&mut source, &mut copy)?;
        copy.set_permissions(std::fs::Permissions::from_mode(file.mode & 0o777))?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn copies_files_dirs_and_modes_and_refuses_links() {
        let root = tempfile::tempdir().unwrap();
        let from = root.path().join("from");
        std::fs::create_dir_all(from.join("a/b")).unwrap();
        std::fs::write(from.join("a/b/run.sh"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            from.join("a/b/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(from.join("top.txt"), b"top").unwrap();
        std::fs::create_dir(from.join("empty")).unwrap();
        let to = root.path().join("to");
        assert_eq!(copy_tree(&from, &to).unwrap(), 13);
        assert_eq!(std::fs::read(to.join("top.txt")).unwrap(), b"top");
        assert_eq!(mode_of(&to.join("a/b/run.sh")), 0o755);
        assert!(to.join("empty").is_dir());
        assert!(copy_tree(&from, &to).is_err(), "target must be new");

        std::os::unix::fs::symlink("top.txt", from.join("link")).unwrap();
        let err = copy_tree(&from, &root.path().join("again")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    /// The walk found `d/f` and `g`; before the copy, `d` and `g` became symlinks to files
    /// outside the workspace (a process the agent left running can do that during a
    /// self-check): the copy is refused and holds no outside byte.
    #[test]
    fn a_listed_file_swapped_for_a_symlink_is_not_copied_from_outside() {
        let ws = tempfile::tempdir().unwrap();
        let ws_root = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("f"), b"outside secret").unwrap();
        std::fs::create_dir(ws_root.join("d")).unwrap();
        std::fs::write(ws_root.join("d/f"), b"mine").unwrap();
        std::fs::write(ws_root.join("g"), b"mine").unwrap();
        let listed = |path: &str| CopyFile {
            path: path.into(),
            source: ws_root.join(path),
            mode: 0o644,
        };
        std::fs::remove_dir_all(ws_root.join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws_root.join("d")).unwrap();
        std::fs::remove_file(ws_root.join("g")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), ws_root.join("g")).unwrap();
        for path in ["d/f", "g"] {
            let to = ws.path().join(format!("copy-{}", path.replace('/', "-")));
            assert!(copy_files(&[listed(path)], &to).is_err(), "{path}");
            let copied = std::fs::read(to.join(path)).unwrap_or_default();
            assert!(copied.is_empty(), "{path}: {copied:?}");
        }
    }

    #[test]
    fn copies_listed_files_with_their_modes_and_refuses_unclean_paths() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a"), b"aa").unwrap();
        std::fs::write(root.path().join("b"), b"bbb").unwrap();
        let file = |path: &str, source: &str, mode: u32| CopyFile {
            path: path.into(),
            source: root.path().join(source),
            mode,
        };
        let to = root.path().join("to");
        let copied = copy_files(
            &[file("x/y/run.sh", "a", 0o755), file("top.txt", "b", 0o644)],
            &to,
        )
        .unwrap();
        assert_eq!(copied, 5);
        assert_eq!(std::fs::read(to.join("x/y/run.sh")).unwrap(), b"aa");
        assert_eq!(mode_of(&to.join("x/y/run.sh")), 0o755);
        assert_eq!(std::fs::read(to.join("top.txt")).unwrap(), b"bbb");
        for bad in ["../escape", "/abs", "a/./b"] {
            let err = copy_files(&[file(bad, "a", 0o644)], &root.path().join("bad")).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
            std::fs::remove_dir_all(root.path().join("bad")).unwrap();
        }
        assert!(!root.path().join("escape").exists());
    }
}
