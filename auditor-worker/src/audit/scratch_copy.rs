//! Each acceptance check gets its own copy of the materialized snapshot, so a check can write
//! files (tests do) without affecting the next check or the pristine copy the audit diffed.
//! Blocking; run it on `spawn_blocking`.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Copy directory `from` into `to` (created; must not exist): directories and regular files
/// with their permission bits. A materialized snapshot holds nothing else; anything else is
/// refused. Returns the bytes copied.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> io::Result<u64> {
    std::fs::create_dir(to)?;
    let mut bytes = 0;
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source_dir, target_dir)) = stack.pop() {
        for entry in std::fs::read_dir(&source_dir)? {
            let entry = entry?;
            let file_type = entry.file_type()?;
            let target = target_dir.join(entry.file_name());
            if file_type.is_dir() {
                std::fs::create_dir(&target)?;
                stack.push((entry.path(), target));
            } else if file_type.is_file() {
                bytes += std::fs::copy(entry.path(), &target)?;
                let mode = entry.metadata()?.permissions().mode() & 0o777;
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))?;
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a file or directory", entry.path().display()),
                ));
            }
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
        let mode = std::fs::metadata(to.join("a/b/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(to.join("empty").is_dir());
        assert!(copy_tree(&from, &to).is_err(), "target must be new");

        std::os::unix::fs::symlink("top.txt", from.join("link")).unwrap();
        let err = copy_tree(&from, &root.path().join("again")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
