//! `loopgate verify --offline`: a checked-out tree against the certified manifest. Every file
//! the manifest lists must be a regular file with that size and sha256, and the tree may hold
//! no other file (a checkout writes exactly the manifest's files); directories are fine.

use std::collections::BTreeSet;
use std::path::Path;

use loopgate_protocol::snapshot::{sha256_hex, Manifest};

use super::checks::Problem;

/// Problems of `dir` against `manifest` (none: the tree is the snapshot, byte for byte).
pub fn check_tree(manifest: &Manifest, dir: &Path) -> Result<Vec<Problem>, std::io::Error> {
    let mut problems = Vec::new();
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ));
    }
    let mut listed = BTreeSet::new();
    for entry in &manifest.entries {
        listed.insert(entry.path.as_str());
        let path = dir.join(&entry.path);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(Problem::new("blob", format!("'{}' is missing", entry.path)));
            }
            Err(e) => return Err(e),
            Ok(meta) if !meta.file_type().is_file() => problems.push(Problem::new(
                "blob",
                format!("'{}' is not a regular file", entry.path),
            )),
            Ok(_) => {
                let bytes = std::fs::read(&path)?;
                let actual = sha256_hex(&bytes);
                if actual != entry.sha256 || bytes.len() as u64 != entry.size {
                    problems.push(Problem::new(
                        "blob",
                        format!(
                            "'{}' hashes to {actual} ({} bytes), the certified snapshot has {} ({} bytes): tampered",
                            entry.path,
                            bytes.len(),
                            entry.sha256,
                            entry.size
                        ),
                    ));
                }
            }
        }
    }
    for found in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let found = found.map_err(std::io::Error::other)?;
        if found.file_type().is_dir() {
            continue;
        }
        let relative = found
            .path()
            .strip_prefix(dir)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !listed.contains(relative.as_str()) {
            problems.push(Problem::new(
                "blob",
                format!("'{relative}' is not in the certified snapshot"),
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::commands::verify::checks::tests::{certificate, FILE};

    #[test]
    fn the_tree_must_be_the_snapshot_exactly() {
        let manifest = certificate().manifest;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hello.py"), FILE).unwrap();
        assert_eq!(check_tree(&manifest, dir.path()).unwrap(), vec![]);

        std::fs::write(dir.path().join("hello.py"), b"print('hello, l00pgate')\n").unwrap();
        let problems = check_tree(&manifest, dir.path()).unwrap();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].detail.contains("tampered"), "{problems:?}");

        std::fs::write(dir.path().join("hello.py"), FILE).unwrap();
        std::fs::create_dir(dir.path().join("extra")).unwrap();
        std::fs::write(dir.path().join("extra/x.txt"), b"x").unwrap();
        let problems = check_tree(&manifest, dir.path()).unwrap();
        assert_eq!(
            problems,
            vec![Problem::new(
                "blob",
                "'extra/x.txt' is not in the certified snapshot"
            )]
        );

        std::fs::remove_dir_all(dir.path().join("extra")).unwrap();
        std::fs::remove_file(dir.path().join("hello.py")).unwrap();
        let problems = check_tree(&manifest, dir.path()).unwrap();
        assert_eq!(problems[0].detail, "'hello.py' is missing");
        assert!(check_tree(&manifest, &dir.path().join("nope")).is_err());
    }
}
